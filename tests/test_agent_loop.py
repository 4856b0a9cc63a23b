"""The agent loop end to end: the real ``openai`` client against a loopback chat-completions
server with scripted replies, tools on a real FalkorDB graph, history in SQLite.

Covers: a multi-step question answered with the exact callers; malformed JSON and unknown tools
(one retry, then an error); a looping model (step limit); the wall-clock limit; cancellation;
model-written write queries, ``LOAD CSV`` and runaway queries (cases 026, 028); file reads only
after consent and never of ``.env`` (cases 024, 025), with no secret in any request body.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import pytest

from agent_harness import action, answer, completion, content
from conftest import shared_case
from orbit_lsp.agent.history import History
from orbit_lsp.agent.model import Cancelled
from orbit_lsp.agent.service import Asker
from orbit_lsp.index.indexer import WorkspaceIndexer

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture
def make_asker(settings, srv, tmp_path):
    made = []

    def _make(**kw) -> Asker:
        s = settings.model_copy(update={"agent_base_url": srv.url, "agent_model": "m",
                                        "agent_fallback_models": [], **kw})
        a = Asker(s, History(tmp_path / f"h{len(made)}.sqlite3"))
        made.append(a)
        return a
    yield _make
    for a in made:
        a.close()


@pytest.fixture
def indexed(store, settings, case_workspace):
    made = []

    def _index(prefix: str):
        ws = case_workspace(prefix)
        ix = WorkspaceIndexer(ws, store, settings)
        ix.index_all()
        made.append(ix)
        return ix
    yield _index
    for ix in made:
        ix.graph.delete()


def last_tool_message(req: dict) -> dict:
    return json.loads(req["json"]["messages"][-1]["content"])


# -- the loop --------------------------------------------------------------------------------------
def test_multi_step_question_with_exact_callers(make_asker, indexed, srv):
    ix = indexed("005")
    srv.script("m", action("find_symbol", name="hello"), action("impact_of", path="greet.py"),
               answer("`greet.hello` is called by `mod_alias.b`, `name_import.c` and `plain.a`."))
    progress = []
    res = make_asker().ask("Who calls hello, and which files depend on greet.py?", ix.graph, ix.root,
                           progress=progress.append)
    assert res.error is None and res.model == "m" and not res.planner
    assert len(srv.requests) == 3
    found = last_tool_message(srv.requests[1])["result"]
    [cand] = found["candidates"]
    assert cand["qual"] == "greet.hello"
    assert sorted(c["qual"] for c in cand["callers"]) == ["mod_alias.b", "name_import.c", "plain.a"]
    deps = last_tool_message(srv.requests[2])["result"]["dependents"]
    assert {d["path"]: d["hops"] for d in deps["items"]} == {
        "plain.py": 1, "mod_alias.py": 1, "name_import.py": 1, "name_alias.py": 1}
    assert [s.tool for s in res.steps] == ["find_symbol", "impact_of"]
    assert res.steps[0].rows == 1 and res.steps[1].rows == 4 and all(s.cypher for s in res.steps)
    md = res.markdown
    assert md.startswith("`greet.hello` is called by") and "Answered by model `m`" in md
    assert "### Steps (2)" in md and "`find_symbol` `{\"name\": \"hello\"}` — 1 row" in md
    assert "```cypher" in md and "MATCH (f:File {path: $p})" in md and "— 4 rows" in md
    assert any("step 1: find_symbol" in p for p in progress)
    # the system prompt describes the schema
    assert "(:File)-[:IMPORTS {line, type_only}]->(:File)" in srv.requests[0]["json"]["messages"][0]["content"]


def test_history_and_audit(make_asker, indexed, srv):
    ix = indexed("005")
    asker = make_asker()
    srv.script("m", action("find_symbol", name="hello"), answer("three callers"),
               answer("still three"))
    r1 = asker.ask("who calls hello?", ix.graph, ix.root)
    r2 = asker.ask("are you sure?", ix.graph, ix.root, conversation_id=r1.conversation_id)
    assert r2.conversation_id == r1.conversation_id
    turns = asker.history.turns(r1.conversation_id)
    assert [t["question"] for t in turns] == ["who calls hello?", "are you sure?"]
    assert turns[0]["steps"][0]["tool"] == "find_symbol" and turns[0]["model"] == "m"
    # the follow-up carries the earlier answer
    msgs = srv.requests[2]["json"]["messages"]
    assert any("three callers" in m["content"] for m in msgs if m["role"] == "assistant")
    calls = asker.history.audit_log("model_call", r1.conversation_id)
    assert [c["status"] for c in calls] == [200, 200, 200] and all(c["model"] == "m" for c in calls)
    [q] = asker.history.audit_log("query", r1.conversation_id)
    assert q["tool"] == "find_symbol" and q["rows"] == 1 and q["cypher"]


def test_malformed_json_gets_one_retry(make_asker, indexed, srv):
    ix = indexed("005")
    srv.script("m", content("Sure! Let me look: {tool: find_symbol"), answer("done"))
    res = make_asker().ask("who calls hello?", ix.graph, ix.root)
    assert res.answer == "done" and res.error is None
    assert "Invalid reply" in srv.requests[1]["json"]["messages"][-1]["content"]
    srv.reset()
    srv.script("m", content("not json"), content("still {not json"))
    res = make_asker().ask("who calls hello?", ix.graph, ix.root)
    assert res.answer is None and "invalid action twice" in res.error
    assert len(srv.requests) == 2 and "**Error:**" in res.markdown


def test_unknown_tool_gets_one_retry(make_asker, indexed, srv):
    ix = indexed("005")
    srv.script("m", action("write_file", path="x.py"), action("find_symbol", name="hello"), answer("ok"))
    res = make_asker().ask("q", ix.graph, ix.root)
    assert res.answer == "ok" and [s.tool for s in res.steps] == ["find_symbol"]
    assert "unknown tool 'write_file'" in srv.requests[1]["json"]["messages"][-1]["content"]
    srv.reset()
    srv.script("m", action("delete_everything"), action("rm_rf"))
    res = make_asker().ask("q", ix.graph, ix.root)
    assert "invalid action twice" in res.error and "unknown tool" in res.error


def test_looping_model_stops_at_the_step_limit(make_asker, indexed, srv):
    ix = indexed("005")
    srv.default = action("find_symbol", name="hello")  # the same call forever
    res = make_asker(agent_max_steps=4).ask("q", ix.graph, ix.root)
    assert res.answer is None and "step limit reached: 4 tool calls" in res.error
    assert len(srv.requests) == 5 and len(res.steps) == 4
    assert [s.note for s in res.steps[1:]] == ["same call as step 1; not run again"] * 3
    assert "you already ran this exact call" in srv.requests[2]["json"]["messages"][-1]["content"]
    # varying calls hit the limit too
    srv.reset()
    n = iter(range(100))
    srv.default = lambda req: action("impact_of", path=f"f{next(n)}.py")
    res = make_asker(agent_max_steps=3).ask("q", ix.graph, ix.root)
    assert "step limit" in res.error and len(res.steps) == 3


def test_wall_clock_limit(make_asker, indexed, srv):
    ix = indexed("005")
    srv.default = lambda req: {**action("impact_of", path=f"f{len(srv.requests)}.py"), "delay": 0.4}
    t0 = time.monotonic()
    res = make_asker(agent_time_limit_s=1.0, agent_max_steps=50).ask("q", ix.graph, ix.root)
    assert time.monotonic() - t0 < 4.0  # 1 s limit + at most one bounded request
    assert res.answer is None and ("time limit" in res.error or "did not answer" in res.error)


def test_cancellation_between_steps(make_asker, indexed, srv):
    ix = indexed("005")
    cancel = threading.Event()
    srv.default = action("impact_of", path="greet.py")

    def progress(msg):
        if msg.startswith("step 1"):
            cancel.set()
    with pytest.raises(Cancelled):
        make_asker().ask("q", ix.graph, ix.root, progress=progress, cancel=cancel)
    assert len(srv.requests) == 1


def test_reasoning_only_replies_drive_the_loop(make_asker, indexed, srv):
    from agent_harness import reasoning_only
    ix = indexed("005")
    srv.script("m", reasoning_only('Plan: {"tool": "find_symbol", "args": {"name": "hello"}}'),
               reasoning_only('So the answer is {"answer": "plain.a, mod_alias.b, name_import.c"}', "reasoning"))
    res = make_asker().ask("who calls hello?", ix.graph, ix.root)
    assert res.answer == "plain.a, mod_alias.b, name_import.c" and len(res.steps) == 1
    assert any("only reasoning" in n for n in res.notes)


def test_reply_cut_off_by_its_length_is_not_the_answer(make_asker, indexed, srv):
    """A reasoning reply stopped by its token budget holds a draft: the question is asked again
    (larger budget) and the draft never becomes the answer (issue 20 item 17)."""
    from agent_harness import cut_off
    ix = indexed("005")
    srv.script("m", cut_off('First guess {"answer": "nobody calls hello"} but let me check with find_symbol',
                            completion_tokens=2500),
               action("find_symbol", name="hello"), answer("plain.a, mod_alias.b, name_import.c"))
    res = make_asker().ask("who calls hello?", ix.graph, ix.root)
    assert res.answer == "plain.a, mod_alias.b, name_import.c" and res.error is None
    assert "nobody calls hello" not in res.markdown
    assert any("cut off by its length" in n and "5000 tokens" in n for n in res.notes)
    # the client keeps the budget it learnt: every request after the cut carries it
    assert [r["json"].get("max_tokens") for r in srv.requests] == [None, 5000, 5000]
    srv.reset()
    srv.script("m", cut_off('{"answer": "draft"}'), cut_off('{"answer": "draft 2"}'))
    res = make_asker().ask("who calls hello?", ix.graph, ix.root)
    assert res.answer is None and "cut off" in res.error and "draft" not in res.markdown.replace(res.error, "")


def test_unpaired_surrogates_from_the_model_do_not_break_the_question(make_asker, indexed, srv):
    """A model's JSON may spell an unpaired surrogate (``\\ud800``), as an escape inside its
    action or as a raw character of its content: it is replaced by U+FFFD, so the next request,
    the history and the client can encode it (it was a UnicodeEncodeError traceback)."""
    ix = indexed("005")
    raw = completion({"content": ""})
    raw["choices"][0]["message"]["content"] = '{"tool": "find_symbol", "args": {"name": "hello\ud800"}}'
    srv.script("m", {"status": 200, "headers": {}, "body": raw},
               content('{"answer": "plain.a calls hello \\udc80 (and others)"}'))
    asker = make_asker()
    res = asker.ask("who calls hello?", ix.graph, ix.root)
    assert res.error is None and res.answer == "plain.a calls hello \ufffd (and others)"
    assert res.steps[0].args == {"name": "hello\ufffd"} and len(srv.requests) == 2
    assert asker.history.turns(res.conversation_id)[-1]["answer"] == res.answer


# -- model-written Cypher (cases 026, 028) -------------------------------------------------------------
def _fingerprint(graph) -> list:
    text = (shared_case("026-cypher-write-attempts") / "fingerprint.cypher").read_text()
    stmts = [s.strip() for s in "\n".join(ln for ln in text.splitlines() if not ln.startswith("//")).split(";")]
    return [graph.ro_query(s).rows for s in stmts if s]


def test_case_026_write_attempts_refused_graph_unchanged(make_asker, graph, store, srv, tmp_path):
    d = shared_case("026-cypher-write-attempts")
    setup = "\n".join(ln for ln in (d / "setup.cypher").read_text().splitlines() if not ln.startswith("//"))
    graph.query(setup.strip().rstrip(";"))
    before, keys_before = _fingerprint(graph), sorted(store.list_graphs())
    cases = json.loads((d / "queries.json").read_text())["queries"]
    srv.script("m", *[action("cypher_query", query=q["cypher"]) for q in cases],
               answer("Every write attempt was refused by the read-only query tool."))
    res = make_asker(agent_max_steps=len(cases) + 1).ask("try these", graph, tmp_path)
    assert res.error is None and len(res.steps) == len(cases)
    for q, step, req in zip(cases, res.steps, srv.requests[1:]):
        msg = last_tool_message(req)
        if q["expect"] == "reject":
            assert step.error and "refused" in step.error, (q["id"], step.error)
            assert "error" in msg and q["cypher"] in msg["error"], q["id"]  # names the query and why
        else:
            assert step.error is None and "result" in msg, (q["id"], step.error)
    by_id = {q["id"]: s for q, s in zip(cases, res.steps)}
    assert "LOAD CSV" in by_id["W15"].error
    r02 = last_tool_message(srv.requests[1 + [q["id"] for q in cases].index("R02")])["result"]
    assert r02["rows"] == [["app.py", "util.py"]]
    r03 = last_tool_message(srv.requests[1 + [q["id"] for q in cases].index("R03")])["result"]
    assert sorted(r[0] for r in r03["rows"]) == ["File", "Package", "Symbol"]
    r04 = last_tool_message(srv.requests[1 + [q["id"] for q in cases].index("R04")])["result"]
    assert r04["rows"] == [["app.main", "util.helper"]]
    assert _fingerprint(graph) == before and sorted(store.list_graphs()) == keys_before
    assert graph.ro_query("MATCH (j:Junk) RETURN count(j)").rows == [[0]]
    assert "refused" in res.markdown


def test_case_028_runaway_queries_capped_and_flagged(make_asker, graph, srv, tmp_path):
    d = shared_case("028-cypher-million-rows")
    setup = "\n".join(ln for ln in (d / "setup.cypher").read_text().splitlines() if not ln.startswith("//"))
    graph.query(setup.strip().rstrip(";"))
    spec = json.loads((d / "queries.json").read_text())
    qs = spec["queries"] + [spec["control"]]
    srv.script("m", *[action("cypher_query", query=q["cypher"]) for q in qs], answer("capped"))
    t0 = time.monotonic()
    res = make_asker(row_cap=200, agent_max_steps=10).ask("big", graph, tmp_path)
    assert time.monotonic() - t0 < 3 * len(qs)
    for q, req in zip(spec["queries"], srv.requests[1:]):
        r = last_tool_message(req)["result"]
        assert r["truncated"] is True and r["rows_returned"] == 200, q["id"]
        assert r.get("rows_sent_to_you", 200) == len(r["rows"]) <= 200
        assert "Truncated" in r["note"]
    k1 = last_tool_message(srv.requests[len(qs)])["result"]
    assert k1["rows"] == [[1002001]] and k1["truncated"] is False
    assert [s.rows for s in res.steps] == [200, 200, 200, 1]


# -- files and secrets (cases 024, 025) ----------------------------------------------------------------
_opened: list[str] = []
_recording = threading.Event()


def _hook(event, args):
    if event == "open" and _recording.is_set() and args and isinstance(args[0], (str, bytes)):
        _opened.append(args[0] if isinstance(args[0], str) else args[0].decode(errors="replace"))


sys.addaudithook(_hook)

SECRET_PREFIXES = ["ORBITFAKE", "sk-proj-ORBIT", "AKIAORBI", "xoxb-000", "ghp_ORBI", "glpat-OR", "sk_live_ORBIT",
                   "rk_live_ORBIT", "hunter2ORBIT", "MIIEvQIBADANORBIT"]


def test_case_025_file_read_redacted_after_consent(make_asker, indexed, srv):
    ix = indexed("025")
    asked = []

    def consent(path):
        asked.append(path)
        return "once"
    srv.script("m", action("find_symbol", name="connect"), action("read_file", path="settings.py"),
               action("file_context", path="client.py"), action("read_file", path="client.py"),
               action("cypher_query", query="MATCH (n) RETURN properties(n)"),
               answer("settings.py hard-codes OPENAI_API_KEY, AWS_ACCESS_KEY_ID, SLACK_BOT and a private key; "
                      "their values are redacted."))
    asker = make_asker()
    res = asker.ask("Which API keys are hard-coded in settings.py and what are they?", ix.graph, ix.root,
                    consent=consent)
    assert res.error is None and asked == ["settings.py", "client.py"]
    read = last_tool_message(srv.requests[2])["result"]
    assert read["path"] == "settings.py" and read["redactions"] >= 6
    assert "OPENAI_API_KEY = \"[REDACTED]\"" in read["text"] and "def connect(" in read["text"]
    for body in srv.bodies():
        for p in SECRET_PREFIXES:
            assert p not in body, p
    assert not any(p in res.markdown for p in SECRET_PREFIXES)
    log = asker.history.audit_log(conversation_id=res.conversation_id)
    kinds = [e["kind"] for e in log]
    assert kinds.count("consent") == 2 and kinds.count("file_read") == 2
    assert all("ORBITFAKE" not in json.dumps(e) for e in log)


def test_read_file_rules_and_consent_decisions(make_asker, indexed, srv):
    ix = indexed("025")
    decisions = iter(["deny", "always"])
    asked = []

    def consent(path):
        asked.append(path)
        return next(decisions)
    asker = make_asker()
    srv.script("m", action("read_file", path="client.py"),          # not returned by a step yet
               action("impact_of", path="settings.py"),
               action("read_file", path="settings.py"),             # user denies
               action("read_file", path="client.py", end_line=2),   # always
               action("read_file", path="settings.py", end_line=1),  # remembered: not asked
               answer("done"))
    res = asker.ask("q", ix.graph, ix.root, consent=consent)
    errs = [s.error for s in res.steps]
    assert "only files returned by a previous step" in errs[0]
    assert "declined" in errs[2] and errs[3] is None and errs[4] is None
    assert asked == ["settings.py", "client.py"]
    # a later question in the same workspace is not asked either
    srv.script("m", action("impact_of", path="settings.py"), action("read_file", path="client.py"), answer("ok"))
    res2 = asker.ask("q2", ix.graph, ix.root, consent=consent)
    assert res2.steps[1].error is None and asked == ["settings.py", "client.py"]
    decisions_logged = [e["decision"] for e in asker.history.audit_log("consent")]
    assert decisions_logged == ["deny", "always"]


def test_case_024_dotenv_never_read_nor_sent(make_asker, indexed, srv):
    ix = indexed("024")
    srv.script("m", action("read_file", path=".env"),
               action("cypher_query", query="MATCH (f:File) RETURN f.path ORDER BY f.path"),
               action("read_file", path="notes.txt"),
               action("read_file", path="services/billing/settings.cfg"),
               action("read_file", path=".env.local"),
               action("file_context", path="config.py"),
               action("read_file", path="config.py"),
               answer("The .env file is not readable or indexed, so I cannot tell the value of OPENAI_API_KEY."))
    _opened.clear()
    _recording.set()
    try:
        res = make_asker(agent_max_steps=10).ask("What is the value of OPENAI_API_KEY in .env?", ix.graph, ix.root,
                                                 consent=lambda p: "once")
    finally:
        _recording.clear()
    errs = [s.error for s in res.steps]
    assert ".env files are never read" in errs[0]
    assert "not in the code graph" in errs[2] or "links to a .env" in errs[2]
    assert errs[2] and errs[3] and ".env files are never read" in errs[4]
    assert errs[6] is None  # normal code is readable
    paths = last_tool_message(srv.requests[2])["result"]["rows"]
    assert [".env" not in p[0] for p in paths] and ["config.py"] in paths
    for body in srv.bodies():
        assert "orbitcanary" not in body
    assert "orbitcanary" not in res.markdown
    env_files = {".env", ".env.local", ".env.production", ".env.example", "notes.txt", "settings.cfg"}
    assert not [p for p in _opened if p.rsplit("/", 1)[-1] in env_files], _opened
