"""The memory graph against the session's real FalkorDB (a fresh memory graph per test): concept
extraction, save/recall/scoring with the project boost, unconfirmed memories, forget (audit kept),
redaction, anchors marked stale after the anchored file is edited and re-indexed, and the Docker
Compose example through ``Asker`` with the built-in planner and with a scripted loopback model."""

from __future__ import annotations

import json
import math
import uuid

import pytest

from agent_harness import ModelServer, action, answer
from orbit_lsp.agent.history import History
from orbit_lsp.agent.service import Asker
from orbit_lsp.config import Settings
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.memory.anchors import AnchorError, anchor_at
from orbit_lsp.config import settings_from_sources
from orbit_lsp.graph.connection import code_graph_name
from orbit_lsp.memory.concepts import concepts, question_concepts
from orbit_lsp.memory.intent import proposed_memory
from orbit_lsp.memory.store import MIN_RECALL_SCORE, PROJECT_BOOST, InvalidMemory, MemoryStore, UnknownMemory, project_id

DOCKER = "I deploy my projects with Docker Compose on a Hetzner VPS"
QUESTION = "How should I deploy my next side project?"


@pytest.fixture
def history(tmp_path):
    h = History(tmp_path / "history.sqlite3")
    yield h
    h.close()


@pytest.fixture
def mem(store, history):
    m = MemoryStore(store, "orbit_memory_test_" + uuid.uuid4().hex[:10], history=history)
    yield m
    m.graph.delete()


# -- concepts ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("words", [("deploy", "deploying", "deployment", "deployed", "Deploys"),
                                   ("project", "projects", "Project's"),
                                   ("index", "indexing", "indexes")])
def test_word_forms_meet_in_one_concept(words):
    assert len({tuple(concepts(w)) for w in words}) == 1, [concepts(w) for w in words]


def test_concepts_normalised_without_stop_words():
    assert concepts(DOCKER) == ["deploy", "project", "docker", "compos", "hetzner", "vps"]
    assert concepts(QUESTION) == ["deploy", "next", "side", "project"]
    assert concepts("the of and I my, you? what!") == []
    assert concepts("Docker-Compose DOCKER compose") == ["docker", "compos"]
    assert concepts("Déploiement") == concepts("deploiement")


def test_proposed_memory_from_a_question():
    assert proposed_memory("Remember that I use Postgres 16. Which files use psycopg?") == "I use Postgres 16"
    assert proposed_memory("please remember: we ship on fly.io every friday!") == "we ship on fly.io every friday"
    assert proposed_memory("Do you remember that thing?") is None
    assert proposed_memory(QUESTION) is None


# -- save, recall, score ------------------------------------------------------------------------------
def test_save_and_recall_the_docker_memory(mem, tmp_path):
    m = mem.remember(DOCKER)
    assert m.id >= 1 and m.confirmed and m.source == "user"
    assert m.concepts == sorted(["deploy", "project", "docker", "compos", "hetzner", "vps"])
    rec = mem.recall(QUESTION)
    assert [r.id for r in rec.memories] == [m.id]
    assert rec.memories[0].matched == ["deploy", "project"] and rec.memories[0].score == 2
    assert rec.cypher and "$concepts" in rec.cypher[0]["query"]
    # the graph holds the schema's nodes and edges
    rows = mem.graph.ro_query("MATCH (m:Memory {id: $id})-[:MENTIONS]->(k:Concept) RETURN k.name ORDER BY k.name",
                              {"id": m.id}).rows
    assert [r[0] for r in rows] == m.concepts
    assert mem.recall("what is the weather like").memories == []


def rarity(n: int, df: int) -> float:
    """A concept's weight across memories (the store's documented formula): 1 for a concept
    only one of the ``n`` memories has, less the more memories share it."""
    return math.log(1 + n / df) / math.log(1 + n)


def test_score_weights_rare_concepts_and_boosts_the_active_project(mem, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    general = mem.remember("deploy with docker compose")                    # deploy, docker, compos
    other = mem.remember("deploy the api with docker", project=b)           # about another project
    mine = mem.remember("deploy the docs site by rsync", project=a)         # about the active one
    rec = mem.recall("how do I deploy docker compose here", project=a)
    scores = {m.id: m.score for m in rec.memories}
    # deploy: all 3 memories (rarity 0.5), docker: 2, compose: 1 (rarity 1). `mine` shares only
    # "deploy", which every memory has: 0.5 < MIN_RECALL_SCORE, not recalled, boost or not
    assert rarity(3, 3) == 0.5 and 0.5 < MIN_RECALL_SCORE
    assert scores == {general.id: pytest.approx(rarity(3, 3) + rarity(3, 2) + 1, abs=1e-3),
                      other.id: pytest.approx(rarity(3, 3) + rarity(3, 2), abs=1e-3)}
    assert [m.id for m in rec.memories] == [general.id, other.id]
    # the same question for project b: its memory gets the boost instead
    rec_b = mem.recall("how do I deploy docker compose here", project=b)
    assert {m.id: m.score for m in rec_b.memories}[other.id] == pytest.approx(
        rarity(3, 3) + rarity(3, 2) + PROJECT_BOOST, abs=1e-3)
    # "docs" is `mine`'s alone: with "deploy" it is recalled, with the boost of project a
    rec_docs = mem.recall("how do I deploy the docs", project=a)
    assert [(m.id, m.score) for m in rec_docs.memories] == [(mine.id, pytest.approx(0.5 + 1 + PROJECT_BOOST, abs=1e-3))]
    assert mine.projects == [{"id": project_id(a), "root": str(a.resolve())}]
    assert [m.id for m in mem.list(project=a)] == [mine.id]


def test_recalled_memories_say_which_project_they_are_about(mem, tmp_path):
    """A recalled memory carries its projects (and concepts) as ``list`` gives them, whether the
    question is asked in that project, in another one or in none: answers print "about <root>"
    from them, never "no project in particular" for a memory saved in a workspace."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    m = mem.remember("get_auth_from_url swallows every parsing error", project=a)
    about_a = [{"id": project_id(a), "root": str(a.resolve())}]
    assert m.projects == about_a and mem.get(m.id).projects == about_a
    for project in (a, b, None):
        rec = mem.recall("why does get_auth_from_url hide parsing errors?", project=project)
        assert [r.id for r in rec.memories] == [m.id], project
        assert rec.memories[0].projects == about_a, project
        assert rec.memories[0].concepts == m.concepts, project


def test_a_part_of_an_identifier_does_not_recall_alone(mem):
    """Issue 18 item 7: a question about `wsgi_app` recalled "We deploy flask apps with gunicorn"
    through the word "app"."""
    flask = mem.remember("We deploy flask apps with gunicorn")
    assert question_concepts("What calls wsgi_app?") == {"call": 1.0, "wsgi": 0.5, "app": 0.5}
    assert mem.recall("What calls wsgi_app?").memories == []          # app: ½ × rarity 1 < 0.75
    assert [(m.id, m.score) for m in mem.recall("how do we deploy?").memories] == [(flask.id, 1.0)]
    # both parts of an identifier the memory has do recall it
    wsgi = mem.remember("wsgi_app must stay thread safe")
    assert [m.id for m in mem.recall("What calls wsgi_app?").memories] == [wsgi.id]


def test_a_word_most_memories_share_does_not_recall_alone(mem):
    ids = [mem.remember(t).id for t in ("the app uses redis", "the app logs to stderr",
                                         "the app is deployed by ansible", "tests need docker")]
    assert rarity(4, 3) < MIN_RECALL_SCORE
    assert mem.recall("how is the app started?").memories == []       # "app": 3 of 4 memories
    rec = mem.recall("where does the app keep redis data?")            # + "redis": 1 of 4
    assert [(m.id, m.matched, m.score) for m in rec.memories] == [
        (ids[0], ["app", "redi"], pytest.approx(rarity(4, 3) + 1, abs=1e-3))]


def test_memory_graph_cannot_be_a_code_graph(store, tmp_path):
    with pytest.raises(ValueError, match="code graphs"):
        MemoryStore(store, code_graph_name(tmp_path))
    settings, problems = settings_from_sources({"memoryGraph": code_graph_name(tmp_path)})
    assert settings.memory_graph == "orbit_memory"
    assert problems and problems[0].startswith("orbit.memoryGraph: ") and "code graphs" in problems[0]


def test_unconfirmed_is_not_recalled_until_confirmed(mem, history):
    m = mem.remember(DOCKER, confirmed=False, source="agent")
    assert not m.confirmed and mem.recall(QUESTION).memories == []
    assert [x.id for x in mem.list(confirmed=False)] == [m.id]
    assert mem.confirm(m.id).confirmed
    assert [x.id for x in mem.recall(QUESTION).memories] == [m.id]
    kinds = [r["kind"] for r in history.audit_log()]
    assert kinds == ["memory_saved", "memory_confirmed"]
    with pytest.raises(UnknownMemory):
        mem.confirm(987654)


def test_forget_removes_memory_and_concept_links_keeps_audit(mem, history):
    keep = mem.remember("we deploy on fridays")
    gone = mem.remember(DOCKER)
    mem.link_turn(7, 42, [gone.id], QUESTION)
    assert mem.get(gone.id).uses[0]["turn"] == 42
    forgotten = mem.forget(gone.id)
    assert forgotten.text == DOCKER
    with pytest.raises(UnknownMemory):
        mem.get(gone.id)
    assert [m.id for m in mem.recall(QUESTION).memories] == [keep.id]  # "deploy" still meets "keep"
    names = {r[0] for r in mem.graph.ro_query("MATCH (k:Concept) RETURN k.name").rows}
    assert names == {"deploy", "friday"}  # concepts only the forgotten memory had are gone
    assert mem.graph.ro_query("MATCH ()-[r:RECALLED]->() RETURN count(r)").rows == [[0]]
    [rec] = history.audit_log(kind="memory_forgotten")
    assert rec["id"] == gone.id and rec["text"] == DOCKER and rec["turns"] == [42]
    with pytest.raises(UnknownMemory):
        mem.forget(gone.id)
    # ids are never reused
    assert mem.remember("another note about docker").id == gone.id + 1


def test_bad_texts_refused_and_secrets_redacted(mem):
    for bad in ("", "   ", "the and of my", "x" * 3000):
        with pytest.raises(InvalidMemory):
            mem.remember(bad)
    m = mem.remember("our staging key is sk-proj-abcdefghijklmnop1234 for the deploy bot")
    assert "sk-proj" not in m.text and "[REDACTED]" in m.text and m.redactions == 1
    stored = mem.graph.ro_query("MATCH (m:Memory) RETURN m.text").rows
    assert all("abcdefghijklmnop1234" not in r[0] for r in stored)
    assert "abcdefghijklmnop1234" not in json.dumps([r for r in mem.history.audit_log()])


# -- anchors --------------------------------------------------------------------------------------
def test_anchored_memory_stale_after_edit_and_reindex(mem, store, settings, tmp_path):
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    f = root / "pkg" / "deploy.py"
    f.write_text("def build():\n    return 1\n\n\ndef ship():\n    return build()\n")
    (root / "other.py").write_text("X = 1\n")
    ix = WorkspaceIndexer(root, store, settings)
    ix.index_all()
    try:
        sym = mem.remember("ship() must run after the image is built", project=root,
                           anchor=anchor_at(store, root, "pkg/deploy.py", line=6))
        whole = mem.remember("deploy.py holds the release steps", project=root,
                             anchor=anchor_at(store, root, "pkg/deploy.py"))
        elsewhere = mem.remember("other.py holds release constants", project=root,
                                 anchor=anchor_at(store, root, "other.py"))
        assert sym.anchor.symbol == "pkg.deploy.ship" and sym.anchor.line == 5 and whole.anchor.symbol is None
        assert not any(m.stale for m in mem.list())
        with pytest.raises(AnchorError):
            anchor_at(store, root, "missing.py")

        # an edit that is not re-indexed yet changes nothing; the re-index makes them stale
        f.write_text("def build():\n    return 2\n\n\ndef ship():\n    return build()\n")
        assert not any(m.stale for m in mem.list())
        ix.reindex_file(f)
        listed = {m.id: m for m in mem.list()}
        assert listed[sym.id].stale and listed[whole.id].stale and not listed[elsewhere.id].stale
        assert "pkg/deploy.py changed" in listed[sym.id].stale_reason
        rec = mem.recall("what about the release steps of deploy", project=root)
        assert {m.id: m.stale for m in rec.memories}[whole.id] is True
        assert "possibly stale" in listed[whole.id].label()

        # the anchored symbol removed: the file changed
        fresh = mem.remember("ship is the entry point", anchor=anchor_at(store, root, "pkg/deploy.py", line=5))
        f.write_text("def build():\n    return 2\n")
        ix.reindex_file(f)
        assert "changed" in mem.get(fresh.id).stale_reason
        (root / "other.py").unlink()
        ix.reindex_file(root / "other.py")
        assert "no longer in the code graph" in mem.get(elsewhere.id).stale_reason
    finally:
        ix.graph.delete()


# -- the Docker Compose example through the agent ----------------------------------------------------
@pytest.fixture
def workspace(tmp_path, store, settings):
    root = tmp_path / "side"
    root.mkdir()
    (root / "app.py").write_text("def main():\n    return 0\n")
    ix = WorkspaceIndexer(root, store, settings)
    ix.index_all()
    yield root, ix.graph
    ix.graph.delete()


def _asker(settings: Settings, mem: MemoryStore, history: History, **agent) -> Asker:
    s = settings.model_copy(update={"memory_graph": mem.graph_name, **agent})
    return Asker(s, history=history)


def test_docker_example_with_the_planner(mem, history, settings, workspace):
    root, graph = workspace
    m = mem.remember(DOCKER)
    asker = _asker(settings, mem, history)
    res = asker.ask(QUESTION, graph, root)
    assert res.planner and res.error is None
    assert f"memory #{m.id}" in res.answer and DOCKER in res.answer
    assert [x.id for x in res.memories] == [m.id]
    assert "### Memories used (1)" in res.markdown and DOCKER in res.markdown
    # the turn (the history's id) is linked to the memory
    [turn] = history.turns(res.conversation_id)
    assert res.turn_id == turn["id"]
    rows = mem.graph.ro_query("MATCH (c:Conversation)-[:HAS_TURN]->(t:Turn)-[:RECALLED]->(m:Memory {id: $id}) "
                              "RETURN c.id, t.id", {"id": m.id}).rows
    assert rows == [[res.conversation_id, res.turn_id]]
    assert [u["turn"] for u in mem.get(m.id).uses] == [res.turn_id]
    # a graph question the planner understands: no memory shares its concepts, none is listed
    res2 = asker.ask("who calls main", graph, root)
    assert res2.memories == [] and "Memories used" not in res2.markdown
    # one that does: the graph answer, then the memory quoted
    note = mem.remember("main is called by the systemd unit, not by Python code")
    res3 = asker.ask("who calls main", graph, root)
    assert res3.answer.startswith("**`app.main` (`app.py:1`)** has 0 direct callers.")
    assert f"memory #{note.id}: “{note.text}”" in res3.answer and [x.id for x in res3.memories] == [note.id]


def test_docker_example_with_a_scripted_model(mem, history, settings, workspace):
    root, graph = workspace
    m = mem.remember(DOCKER)
    with ModelServer() as srv:
        srv.script("mem-model", action("recall", query="deploying side projects"),
                   answer(f"Deploy it like your other projects: Docker Compose on your Hetzner VPS (memory #{m.id})."))
        asker = _asker(settings, mem, history, agent_base_url=srv.url, agent_model="mem-model")
        try:
            res = asker.ask(QUESTION, graph, root)
        finally:
            asker.close()
        first = srv.requests[0]["json"]["messages"]
    assert res.error is None and res.model == "mem-model"
    # the memory reached the model with the question, and the recall tool found it again
    assert DOCKER in first[-1]["content"] and f"memory #{m.id}" in first[-1]["content"]
    assert "recall" in first[0]["content"]
    assert res.steps[0].tool == "recall" and res.steps[0].rows == 1 and res.steps[0].cypher
    assert f"memory #{m.id}" in res.answer
    assert [x.id for x in res.memories] == [m.id] and DOCKER in res.markdown
    rows = mem.graph.ro_query("MATCH (t:Turn)-[:RECALLED]->(m:Memory {id: $id}) RETURN t.id", {"id": m.id}).rows
    assert rows == [[res.turn_id]]


def test_remember_that_in_a_question_proposes_an_unconfirmed_memory(mem, history, settings, workspace):
    root, graph = workspace
    asker = _asker(settings, mem, history)
    res = asker.ask("Remember that I deploy my projects with Docker Compose on a Hetzner VPS", graph, root)
    p = res.proposed_memory
    assert p is not None and not p.confirmed and p.source == "agent" and p.text == DOCKER
    assert "### Proposed memory" in res.markdown and "unconfirmed" in res.markdown
    assert asker.ask(QUESTION, graph, root).memories == []  # not recalled before confirmation
    mem.confirm(p.id)
    assert [x.id for x in asker.ask(QUESTION, graph, root).memories] == [p.id]
