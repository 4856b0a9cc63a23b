"""orbit/ask over LSP under both client profiles: a real orbit-lsp server (model configured in
the initialization options, pointing at the loopback chat-completions server), consent through
window/showMessageRequest, work-done progress, cancellation, bad params."""

from __future__ import annotations

import asyncio
import time

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from agent_harness import action, answer, content
from conftest import shared_case
from lsp_harness import PROFILES, SERVER, as_dict, copy_case, start_session, uri

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.shared_cases("005-py-aliased-imports", fixture="client")]

CONSENT: dict = {"reply": "Allow once", "asked": []}


@pytest.fixture(scope="module")
def ws005(tmp_path_factory):
    return copy_case(shared_case("005-py-aliased-imports"), tmp_path_factory.mktemp("ask") / "ws005")


@pytest_lsp.fixture(scope="module", config=SERVER, params=PROFILES)
async def client(lsp_client: LanguageClient, ws005, model_server, request):
    @lsp_client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def show_message_request(params: types.ShowMessageRequestParams):
        CONSENT["asked"].append(params)
        return types.MessageActionItem(title=CONSENT["reply"])

    await start_session(lsp_client, ws005, request.param, init_options={
        "agent": {"baseUrl": model_server.url, "apiKey": "sk-lsp-SECRET-000", "model": "lsp-model"}})
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
def srv(model_server):
    model_server.reset()
    CONSENT["asked"].clear()
    return model_server


async def ask(client, params) -> dict:
    return as_dict(await client.protocol.send_request_async("orbit/ask", params))


async def test_ask_with_steps_progress_and_consent(client: LanguageClient, ws005, srv):
    CONSENT["reply"] = "Allow once"
    srv.script("lsp-model", action("find_symbol", name="hello"), action("read_file", path="greet.py"),
               answer("`greet.hello` is called by `plain.a`, `mod_alias.b` and `name_import.c`."))
    before = set(client.progress_reports)
    res = await ask(client, {"question": "Who calls the function under the cursor?",
                             "textDocument": {"uri": uri(ws005 / "greet.py")},
                             "position": {"line": 0, "character": 5}})
    assert res["error"] is None and res["model"] == "lsp-model" and res["planner"] is False
    assert res["answer"].startswith("`greet.hello` is called by")
    assert [s["tool"] for s in res["steps"]] == ["find_symbol", "read_file"]
    assert res["steps"][0]["rows"] == 1 and res["steps"][0]["cypher"] and res["steps"][1]["error"] is None
    assert "### Steps (2)" in res["markdown"] and "```cypher" in res["markdown"]
    assert res["workspace"] == str(ws005.resolve())
    # the cursor context reached the model
    first = srv.requests[0]["json"]["messages"][-1]["content"]
    assert "greet.hello" in first and "greet.py" in first
    # consent was asked with the three choices, and the file reached the model (redacted)
    [req] = CONSENT["asked"]
    assert "greet.py" in req.message
    assert [a.title for a in req.actions] == ["Allow once", "Always for this workspace", "Deny"]
    assert "def hello" in srv.requests[2]["body"]
    assert "sk-lsp-SECRET-000" not in str(res)
    # work-done progress: begin, a report per step, end
    [token] = set(client.progress_reports) - before
    reports = client.progress_reports[token]
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and isinstance(reports[-1], types.WorkDoneProgressEnd)
    msgs = [r.message for r in reports if isinstance(r, types.WorkDoneProgressReport)]
    assert "step 1: find_symbol" in msgs and "step 2: read_file" in msgs


async def test_denied_read(client: LanguageClient, ws005, srv):
    CONSENT["reply"] = "Deny"
    srv.script("lsp-model", action("impact_of", path="greet.py"), action("read_file", path="greet.py"),
               answer("I was not allowed to read greet.py."))
    res = await ask(client, {"question": "Show me greet.py"})
    assert len(CONSENT["asked"]) == 1
    assert "declined" in res["steps"][1]["error"]
    assert all("def hello" not in b for b in srv.bodies())


async def test_cancel_request_and_other_requests_keep_answering(client: LanguageClient, srv):
    srv.script("lsp-model", content('{"answer": "late"}', delay=4.0))
    msg_id = f"ask-cancel-{time.monotonic_ns()}"
    fut = asyncio.wrap_future(client.protocol.send_request("orbit/ask", {"question": "slow?"}, msg_id=msg_id))
    await asyncio.sleep(0.5)
    t0 = time.monotonic()
    status = await client.protocol.send_request_async("orbit/status", {})
    assert time.monotonic() - t0 < 2.0 and as_dict(status)["falkordb"]["online"]  # not blocked by the agent
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
    with pytest.raises(Exception) as ei:
        await asyncio.wait_for(fut, 3.0)  # before the model's 4 s reply
    assert "cancel" in str(ei.value).lower() or "-32800" in str(ei.value)


@pytest.mark.parametrize("params", [
    {},
    {"question": 3},
    {"question": "   "},
    {"question": "q", "textDocument": "nope"},
    {"question": "q", "textDocument": {"uri": "file:///x.py"}, "position": {"line": -1, "character": 0}},
    {"question": "q", "position": {"line": 0, "character": 0}},
    {"question": "q", "conversationId": "abc"},
    {"question": "q", "conversationId": 987654321},
    {"question": "q", "conversationId": 2**70},   # beyond SQLite's integers (issue 20 item 16)
    {"question": "who calls\x00 f?"},
    {"question": "who calls \ud800 f?"},
])
async def test_bad_params_get_invalid_params(client: LanguageClient, params):
    with pytest.raises(Exception) as ei:
        await asyncio.wait_for(client.protocol.send_request_async("orbit/ask", params), 10)
    text = f"{type(ei.value).__name__} {ei.value}"
    assert "InvalidParams" in text or "-32602" in text, text
