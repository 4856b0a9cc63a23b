"""Memory over LSP under both client profiles, with no model configured (the built-in planner):
orbit/remember, orbit/memories (uses, stale), orbit/confirm, orbit/forget, the Docker Compose
example through orbit/ask with its RECALLED edge, an anchored memory marked stale after the file
is edited and saved (re-indexed), and bad params.

The server's memory graph is this module's own (``ORBIT_MEMORY_GRAPH``); both profiles' servers
share it, so tests assert on the ids they created."""

from __future__ import annotations

import asyncio
import functools
import uuid

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_harness import PROFILES, request, server_config, start_session, uri

pytestmark = pytest.mark.asyncio(loop_scope="module")

MEMORY_GRAPH = "orbit_memory_lsp_" + uuid.uuid4().hex[:10]
DOCKER = "I deploy my projects with Docker Compose on a Hetzner VPS"
QUESTION = "How should I deploy my next side project?"
SOURCE = "def build():\n    return 1\n\n\ndef ship():\n    return build()\n"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("memlsp") / "side"
    root.mkdir()
    (root / "deploy.py").write_text(SOURCE)
    (root / "app.py").write_text("from deploy import ship\n\n\ndef main():\n    return ship()\n")
    return root


@pytest.fixture(scope="module")
def mgraph(store):
    g = store.graph(MEMORY_GRAPH)
    yield g
    g.delete()


@pytest_lsp.fixture(scope="module", config=server_config({"ORBIT_MEMORY_GRAPH": MEMORY_GRAPH}), params=PROFILES)
async def client(lsp_client: LanguageClient, ws, request):
    await start_session(lsp_client, ws, request.param)
    yield
    await lsp_client.shutdown_session()


req = functools.partial(request, timeout=30)


async def test_docker_example_with_the_planner(client: LanguageClient, ws, mgraph):
    mem = await req(client, "orbit/remember", {"text": DOCKER})
    assert mem["confirmed"] and mem["source"] == "user" and mem["text"] == DOCKER
    assert mem["projects"] == [{"id": mem["projects"][0]["id"], "root": str(ws.resolve())}]
    res = await req(client, "orbit/ask", {"question": QUESTION})
    assert res["planner"] and res["error"] is None
    assert f"memory #{mem['id']}" in res["answer"] and DOCKER in res["answer"]
    assert mem["id"] in [m["id"] for m in res["memories"]]
    assert "### Memories used" in res["markdown"] and DOCKER in res["markdown"]
    # the turn is linked to the memory in the memory graph, and listed as a use
    rows = mgraph.ro_query("MATCH (c:Conversation)-[:HAS_TURN]->(t:Turn)-[:RECALLED]->(m:Memory {id: $id}) "
                           "RETURN c.id, t.id", {"id": mem["id"]}).rows
    assert rows == [[res["conversationId"], res["turnId"]]]
    listed = {m["id"]: m for m in (await req(client, "orbit/memories", {}))["memories"]}
    assert [u["turn"] for u in listed[mem["id"]]["uses"]] == [res["turnId"]]
    assert listed[mem["id"]]["uses"][0]["question"] == QUESTION


async def test_unconfirmed_confirm_and_forget(client: LanguageClient, mgraph):
    text = f"the nightly batch {uuid.uuid4().hex[:6]} runs on a Raspberry Pi cluster"
    mem = await req(client, "orbit/remember", {"text": text, "confirmed": False})
    assert mem["confirmed"] is False
    res = await req(client, "orbit/ask", {"question": "Where does the nightly batch run on the cluster?"})
    assert mem["id"] not in [m["id"] for m in res["memories"]]
    unconfirmed = (await req(client, "orbit/memories", {"confirmed": False}))["memories"]
    assert mem["id"] in [m["id"] for m in unconfirmed]
    assert (await req(client, "orbit/confirm", {"id": mem["id"]}))["confirmed"] is True
    res = await req(client, "orbit/ask", {"question": "Where does the nightly batch run on the cluster?"})
    assert mem["id"] in [m["id"] for m in res["memories"]] and "Raspberry Pi" in res["answer"]
    gone = (await req(client, "orbit/forget", {"id": mem["id"]}))["forgotten"]
    assert gone["id"] == mem["id"] and [u["turn"] for u in gone["uses"]] == [res["turnId"]]
    listed = (await req(client, "orbit/memories", {}))["memories"]
    assert mem["id"] not in [m["id"] for m in listed]
    assert mgraph.ro_query("MATCH (m:Memory {id: $id}) RETURN count(m)", {"id": mem["id"]}).rows == [[0]]
    assert "raspberri" not in {r[0] for r in mgraph.ro_query("MATCH (k:Concept) RETURN k.name").rows}


async def test_proposed_memory_from_a_question(client: LanguageClient):
    res = await req(client, "orbit/ask", {"question": "Remember that releases are tagged on Thursdays."})
    p = res["proposedMemory"]
    assert p["text"] == "releases are tagged on Thursdays" and p["confirmed"] is False and p["source"] == "agent"
    assert "### Proposed memory" in res["markdown"]
    await req(client, "orbit/forget", {"id": p["id"]})


async def test_anchored_memory_stale_after_edit_and_save(client: LanguageClient, ws):
    doc = uri(ws / "deploy.py")
    mem = await req(client, "orbit/remember", {"text": "ship() runs after the image build",
                                               "textDocument": {"uri": doc},
                                               "position": {"line": 5, "character": 4}})
    assert mem["anchor"]["path"] == "deploy.py" and mem["anchor"]["symbol"] == "deploy.ship"
    assert mem["anchor"]["uri"] == doc and mem["stale"] is False
    listed = {m["id"]: m for m in (await req(client, "orbit/memories", {}))["memories"]}
    assert listed[mem["id"]]["stale"] is False
    # edit the anchored file and save it: the server re-indexes it, the memory becomes stale
    (ws / "deploy.py").write_text(SOURCE + f"\n\ndef rollback_{uuid.uuid4().hex[:6]}():\n    return 0\n")
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=doc)))
    for _ in range(200):
        listed = {m["id"]: m for m in (await req(client, "orbit/memories", {}))["memories"]}
        if listed[mem["id"]]["stale"]:
            break
        await asyncio.sleep(0.05)
    assert listed[mem["id"]]["stale"] is True
    assert "deploy.py changed" in listed[mem["id"]]["staleReason"]
    res = await req(client, "orbit/ask", {"question": "When does ship run after the image build?"})
    [used] = [m for m in res["memories"] if m["id"] == mem["id"]]
    assert used["stale"] is True and "possibly stale" in res["markdown"]
    await req(client, "orbit/forget", {"id": mem["id"]})


@pytest.mark.parametrize("method,params", [
    ("orbit/remember", {}),
    ("orbit/remember", {"text": 3}),
    ("orbit/remember", {"text": "   "}),
    ("orbit/remember", {"text": "the of and"}),
    ("orbit/remember", {"text": "x y z deploy", "confirmed": "yes"}),
    ("orbit/remember", {"text": "deploy", "textDocument": "nope"}),
    ("orbit/remember", {"text": "deploy", "position": {"line": 0, "character": 0}}),
    ("orbit/remember", {"text": "deploy", "anchor": "no"}),
    ("orbit/memories", {"confirmed": 1}),
    ("orbit/confirm", {}),
    ("orbit/confirm", {"id": "3"}),
    ("orbit/confirm", {"id": 987654321}),
    ("orbit/forget", {"id": -1}),
    ("orbit/forget", {"id": True}),
    ("orbit/forget", {"id": 987654321}),
])
async def test_bad_params_get_invalid_params(client: LanguageClient, method, params):
    with pytest.raises(Exception) as ei:
        await asyncio.wait_for(client.protocol.send_request_async(method, params), 10)
    text = f"{type(ei.value).__name__} {ei.value}"
    assert "InvalidParams" in text or "-32602" in text, text


async def test_remember_where_no_anchor_is_possible_keeps_the_memory(client: LanguageClient, ws, tmp_path):
    outside = await req(client, "orbit/remember", {"text": "the staging box deploys nightly",
                                                   "textDocument": {"uri": uri(tmp_path / "x.py")},
                                                   "position": {"line": 0, "character": 0}})
    assert outside["anchor"] is None and "not in a workspace folder" in outside["notes"][0]
    assert outside["projects"][0]["root"] == str(ws.resolve())
    (ws / "NOTES.md").write_text("# notes\n")
    unindexed = await req(client, "orbit/remember", {"text": "release notes are written by hand",
                                                     "textDocument": {"uri": uri(ws / "NOTES.md")}})
    assert unindexed["anchor"] is None and "not in the code graph" in unindexed["notes"][0]
    plain = await req(client, "orbit/remember", {"text": "ship() is retried three times", "anchor": False,
                                                 "textDocument": {"uri": uri(ws / "deploy.py")},
                                                 "position": {"line": 5, "character": 4}})
    assert plain["anchor"] is None and plain["notes"] == []
    assert plain["projects"][0]["root"] == str(ws.resolve())
    for m in (outside, unindexed, plain):
        await req(client, "orbit/forget", {"id": m["id"]})
