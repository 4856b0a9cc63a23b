"""The Docker Compose memory example end to end over LSP under both client profiles, answered by a
scripted model on the loopback chat-completions server: the recalled memory reaches the model
with the question, the model calls the ``recall`` tool, the answer names the memory, and the
turn is linked to it with a RECALLED edge."""

from __future__ import annotations

import functools
import json
import uuid

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient

from agent_harness import action, answer
from lsp_harness import PROFILES, request, server_config, start_session

pytestmark = pytest.mark.asyncio(loop_scope="module")

MEMORY_GRAPH = "orbit_memory_lspm_" + uuid.uuid4().hex[:10]
DOCKER = "I deploy my projects with Docker Compose on a Hetzner VPS"
QUESTION = "How should I deploy my next side project?"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("memlspm") / "side"
    root.mkdir()
    (root / "app.py").write_text("def main():\n    return 0\n")
    return root


@pytest.fixture(scope="module")
def mgraph(store):
    g = store.graph(MEMORY_GRAPH)
    yield g
    g.delete()


@pytest_lsp.fixture(scope="module", config=server_config({"ORBIT_MEMORY_GRAPH": MEMORY_GRAPH}), params=PROFILES)
async def client(lsp_client: LanguageClient, ws, model_server, request):
    await start_session(lsp_client, ws, request.param, init_options={
        "agent": {"baseUrl": model_server.url, "apiKey": "sk-mem-SECRET-000", "model": "mem-model"}})
    yield
    await lsp_client.shutdown_session()


req = functools.partial(request, timeout=30)


async def test_docker_example_with_a_scripted_model(client: LanguageClient, model_server, mgraph):
    model_server.reset()
    mem = await req(client, "orbit/remember", {"text": DOCKER})
    model_server.script("mem-model", action("recall", query="deploying side projects"),
                        answer(f"Deploy it the way you deploy your projects: Docker Compose on your "
                               f"Hetzner VPS (memory #{mem['id']})."))
    res = await req(client, "orbit/ask", {"question": QUESTION})
    assert res["error"] is None and res["model"] == "mem-model" and not res["planner"]
    assert f"memory #{mem['id']}" in res["answer"] and "Docker Compose" in res["answer"]
    # the memory reached the model with the question; the recall tool found it too
    first = model_server.requests[0]["json"]["messages"]
    assert DOCKER in first[-1]["content"] and f"memory #{mem['id']}" in first[-1]["content"]
    assert res["steps"][0]["tool"] == "recall" and res["steps"][0]["rows"] >= 1 and res["steps"][0]["cypher"]
    tool_result = json.loads(model_server.requests[1]["json"]["messages"][-1]["content"])
    assert mem["id"] in [m["memory"] for m in tool_result["result"]["memories"]]
    # the answer lists the memory; the turn is linked to it
    assert mem["id"] in [m["id"] for m in res["memories"]]
    assert "### Memories used" in res["markdown"] and DOCKER in res["markdown"]
    rows = mgraph.ro_query("MATCH (c:Conversation)-[:HAS_TURN]->(t:Turn)-[:RECALLED]->(m:Memory {id: $id}) "
                           "RETURN c.id, t.id", {"id": mem["id"]}).rows
    assert rows == [[res["conversationId"], res["turnId"]]]
    assert all("sk-mem-SECRET-000" not in b for b in model_server.bodies())
    await req(client, "orbit/forget", {"id": mem["id"]})
