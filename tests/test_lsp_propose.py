""""Orbit: propose a change…" over LSP under both client profiles, with a real orbit-lsp server
whose model is the scripted loopback chat-completions server (tests/agent_harness.py): the client
approves, rejects, or edits the document in between; the file on disk, the proposal's state
(store in the data dir) and the audit record are asserted after each. Also: what reaches the
model from a file holding secrets (shared case 025), replies that cannot become an edit, and bad
arguments."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from agent_harness import action, content
from conftest import find_shared_case, missing_shared_cases_reason
from lsp_harness import PROFILES, SERVER, as_dict, start_session, uri
from orbit_lsp.agent.history import History
from orbit_lsp.server.propose import ASK_TITLE, PROPOSE_CHANGE, PROPOSE_TITLE
from test_lsp_code_actions import actions_at, as_editor, line_of, proposals, wait_hash

pytestmark = pytest.mark.asyncio(loop_scope="module")

WORKSPACE = Path(__file__).parent / "editor_workspace"
CASE025 = find_shared_case("025")  # None without ../shared/cases
MODEL = "propose-model"


@pytest_lsp.fixture(scope="module", config=SERVER, params=PROFILES)
async def client(lsp_client: LanguageClient, tmp_path_factory, model_server, request):
    as_editor(lsp_client, request.param)
    lsp_client.root = root = tmp_path_factory.mktemp("propose") / "ws"
    shutil.copytree(WORKSPACE, root)
    if CASE025 is not None:
        shutil.copytree(CASE025 / "workspace", root / "secrets025")
    await start_session(lsp_client, root, request.param, init_options={
        "agent": {"baseUrl": model_server.url, "apiKey": "sk-propose-KEY-0000", "model": MODEL}})
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
async def ed(client: LanguageClient, store, model_server):
    """A fresh copy of util.py, re-indexed and open; a reset model script."""
    c = client
    shutil.copy(WORKSPACE / "util.py", c.root / "util.py")
    c.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri=uri(c.root / "util.py"))))
    await wait_hash(store, c.root, "util.py", (WORKSPACE / "util.py").read_text())
    model_server.reset()
    c.editor.decision, c.editor.edit_before_answer, c.editor.received = "approve", False, []
    c.editor.util = c.editor.open(c.root / "util.py")
    yield c.editor
    c.editor.close_all()


def edit_reply(new_text: str, explanation: str = "as asked") -> dict:
    return content(json.dumps({"edit": {"new_text": new_text, "explanation": explanation}}))


def audit_of(pid: int | None, origin: str = "proposal") -> list[dict]:
    hist = History.open(Path(os.environ["ORBIT_DATA_DIR"]))
    try:
        return [r for r in hist.audit_log(kind="edit_decision", limit=100_000)
                if r["proposal"] == pid and r["origin"] == origin]
    finally:
        hist.close()


def selection_of(body: str) -> str:
    """The selected text as the model saw it (between the markers of the first user message)."""
    msgs = json.loads(body)["messages"]
    return re.search(r"<<<SELECTION\n(.*)\nSELECTION>>>", msgs[1]["content"], re.S).group(1)


async def execute(c, command: types.Command, instruction: str | None) -> dict:
    [arg] = command.arguments
    arg = dict(arg) if isinstance(arg, dict) else as_dict(arg)
    args = [arg] if instruction is None else [arg, instruction]
    return as_dict(await c.workspace_execute_command_async(types.ExecuteCommandParams(
        command=command.command, arguments=args)))


def util_range(text: str, first: str, lines: int = 2) -> types.Range:
    """``lines`` whole lines from the one starting with ``first``."""
    start = line_of(text, first)
    return types.Range(types.Position(start, 0), types.Position(start + lines, 0))


async def propose_action(c, u: str, rng: types.Range) -> types.CodeAction:
    acts = list(await c.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=u), range=rng,
        context=types.CodeActionContext(diagnostics=[]))) or [])
    [act] = [a for a in acts if a.title == PROPOSE_TITLE]
    assert act.kind == types.CodeActionKind.RefactorRewrite and act.command.command == PROPOSE_CHANGE
    return act


# -- offered ----------------------------------------------------------------------------------------
async def test_offered_on_a_selection_and_on_a_symbol(ed, client):
    text = ed.buffers[ed.util][0]
    rng = util_range(text, "def used")
    act = await propose_action(client, ed.util, rng)
    arg = as_dict(act.command.arguments[0]) if not isinstance(act.command.arguments[0], dict) else act.command.arguments[0]
    assert arg["uri"] == ed.util and arg["version"] == 1
    assert arg["range"] == {"start": {"line": rng.start.line, "character": 0},
                            "end": {"line": rng.end.line, "character": 0}}
    # no selection, cursor in the body of `used`: the whole lines of the function
    body = line_of(text, "def used") + 1
    acts = await actions_at(client, ed.util, body, 6)
    [act] = [a for a in acts if a.title == PROPOSE_TITLE]
    arg = act.command.arguments[0]
    arg = arg if isinstance(arg, dict) else as_dict(arg)
    assert arg["range"]["start"] == {"line": body - 1, "character": 0}
    assert arg["range"]["end"] == {"line": body + 1, "character": 0}
    # "ask about this symbol" on the definition
    acts = await actions_at(client, ed.util, body - 1, 5)
    [ask] = [a for a in acts if a.title == ASK_TITLE]
    assert (ask.command.arguments[0]["qual"] if isinstance(ask.command.arguments[0], dict)
            else as_dict(ask.command.arguments[0])["qual"]) == "util.used"


# -- approval path ------------------------------------------------------------------------------------
async def test_approved_proposal_changes_the_file(ed, client, model_server):
    before = ed.buffers[ed.util][0]
    rng = util_range(before, "def used")
    new = 'def used(x):\n    """Add one."""\n    return x + 1\n'
    model_server.script(MODEL, action("find_symbol", name="used"), action("recall", query="docstring style"),
                        edit_reply(new, "adds a docstring"))
    act = await propose_action(client, ed.util, rng)
    res = await execute(client, act.command, "Add a docstring")
    assert res["status"] == "applied" and res["reason"] is None, res
    assert res["explanation"] == "adds a docstring" and res["model"] == MODEL
    assert [s["tool"] for s in res["steps"]] == ["find_symbol", "recall"] and res["steps"][0]["rows"] == 1
    assert res["steps"][1]["error"] is None  # the user's memories are available to the proposal
    after = (client.root / "util.py").read_text()
    assert after == before.replace("def used(x):\n    return x + 1\n", new)
    [sent] = ed.received
    if client.profile == "visual-studio-code":
        [tde] = sent.edit.document_changes
        assert tde.text_document.version == 1
        [te] = tde.edits
        assert te.new_text == new
        ann = sent.edit.change_annotations[te.annotation_id]
        assert ann.needs_confirmation is True and "adds a docstring" in ann.description
    else:
        assert list(sent.edit.changes) == [ed.util]
    p = proposals().get(res["proposal"])
    assert p.status == "applied" and p.path == "util.py" and '+    """Add one."""' in p.diff
    assert p.diff == res["diff"] and p.base_version == 1
    [rec] = audit_of(res["proposal"])
    assert rec["decision"] == "applied" and rec["path"] == "util.py" and rec["version"] == 1
    # what the model was sent: the protocol, the instruction and the selection
    bodies = model_server.bodies()
    first = json.loads(bodies[0])["messages"]
    assert '{"edit": {"new_text"' in first[0]["content"] and "no_change" in first[0]["content"]
    assert "Add a docstring" in first[1]["content"] and "util.py" in first[1]["content"]
    assert selection_of(bodies[0]) == "def used(x):\n    return x + 1\n"
    assert "util.used" in first[1]["content"]  # the enclosing symbol as context
    assert "sk-propose-KEY-0000" not in "".join(bodies)


async def test_rejected_proposal_leaves_the_file(ed, client, model_server):
    before = (client.root / "util.py").read_text()
    ed.decision = "reject"
    model_server.script(MODEL, edit_reply("def used(x):\n    return x + 2\n"))
    act = await propose_action(client, ed.util, util_range(before, "def used"))
    res = await execute(client, act.command, "Add two instead")
    assert res["status"] == "rejected" and res["reason"] == "rejected by the user"
    assert len(ed.received) == 1
    assert (client.root / "util.py").read_text() == before and ed.buffers[ed.util][0] == before
    p = proposals().get(res["proposal"])
    assert p.status == "rejected" and "+    return x + 2" in p.diff
    [rec] = audit_of(res["proposal"])
    assert rec["decision"] == "rejected" and rec["reason"] == "rejected by the user"


async def test_document_edited_before_running_is_stale(ed, client, model_server):
    before = (client.root / "util.py").read_text()
    model_server.script(MODEL, edit_reply("def used(x):\n    return x + 2\n"))
    act = await propose_action(client, ed.util, util_range(before, "def used"))
    ed.change(ed.util, before + "\n# typed after the action was offered\n")
    res = await execute(client, act.command, "Add two instead")
    assert res["status"] == "stale" and "changed since" in res["reason"]
    assert ed.received == [] and model_server.requests == []  # nothing sent, the model not asked
    assert (client.root / "util.py").read_text() == before
    assert proposals().get(res["proposal"]).status == "stale"
    [rec] = audit_of(res["proposal"])
    assert rec["decision"] == "stale"


async def test_document_edited_while_the_model_works_is_stale(ed, client, model_server):
    before = (client.root / "util.py").read_text()
    model_server.script(MODEL, {**edit_reply("def used(x):\n    return x + 2\n"), "delay": 1.5})
    act = await propose_action(client, ed.util, util_range(before, "def used"))
    [arg] = act.command.arguments
    arg = arg if isinstance(arg, dict) else as_dict(arg)
    fut = asyncio.ensure_future(client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=PROPOSE_CHANGE, arguments=[{**arg, "instruction": "Add two instead"}])))
    await asyncio.sleep(0.5)
    ed.change(ed.util, before + "\n# typed while the model was working\n")
    res = as_dict(await fut)
    assert len(model_server.requests) == 1
    assert res["status"] == "stale" and "changed since" in res["reason"]
    assert ed.received == []  # never sent to the client
    assert (client.root / "util.py").read_text() == before
    p = proposals().get(res["proposal"])
    assert p.status == "stale" and "+    return x + 2" in p.diff  # the refused edit is kept for review
    [rec] = audit_of(res["proposal"])
    assert rec["decision"] == "stale"


async def test_propose_change_request_on_a_position(ed, client, model_server):
    before = ed.buffers[ed.util][0]
    line = line_of(before, "def unused_helper") + 1  # in its body
    model_server.script(MODEL, edit_reply("def unused_helper(x):\n    return x * 3\n"))
    res = as_dict(await client.protocol.send_request_async("orbit/proposeChange", {
        "textDocument": {"uri": ed.util, "version": 1}, "position": {"line": line, "character": 4},
        "instruction": "Triple instead of double"}))
    assert res["status"] == "applied", res
    assert (client.root / "util.py").read_text() == before.replace("return x * 2", "return x * 3")
    assert selection_of(model_server.bodies()[0]) == "def unused_helper(x):\n    return x * 2\n"
    assert audit_of(res["proposal"])[0]["decision"] == "applied"


# -- secrets --------------------------------------------------------------------------------------------
SECRET_PIECES = ["ORBITFAKE", "sk-proj-ORBIT", "AKIAORBI", "xoxb-000", "ghp_ORBI", "glpat-OR", "hunter2",
                 "MIIEvQIB"]


async def test_secrets_never_reach_the_model_and_are_restored(ed, client, model_server):
    if CASE025 is None:
        pytest.skip(missing_shared_cases_reason(["025"]))
    path = client.root / "secrets025" / "settings.py"
    original = path.read_text()
    u = ed.open(path)
    text = ed.buffers[u][0]
    rng = types.Range(types.Position(0, 0), types.Position(len(text.split("\n")) - 1, 0))  # the whole file

    def rename(req: dict) -> dict:  # a model that renames connect, keeping the placeholders
        sel = selection_of(req["body"])
        return edit_reply(sel.replace("def connect(", "def connect_api("))

    model_server.default = rename
    model_server.script(MODEL, action("find_symbol", name="connect"))
    act = await propose_action(client, u, rng)
    res = await execute(client, act.command, "Rename connect to connect_api; password is hunter2ORBITFAKE")
    bodies = model_server.bodies()
    assert len(bodies) == 2
    sent = selection_of(bodies[0])
    assert "def connect(token=" in sent and "OPENAI_API_KEY = " in sent and "[REDACTED]" in sent
    for body in bodies:
        for piece in SECRET_PIECES:
            assert piece not in body, piece
    assert res["redactions"] >= 5
    # the placeholders were restored: the file keeps its (fake) secrets, only the name changed
    assert res["status"] == "applied", res
    assert path.read_text() == original.replace("def connect(", "def connect_api(")
    # and nothing of them is in the answer or the audit
    assert "ORBITFAKE" not in json.dumps({k: v for k, v in res.items() if k != "diff"})
    assert all("ORBITFAKE" not in json.dumps(r) for r in audit_of(res["proposal"]))


@pytest.mark.parametrize("reply, why", [
    (edit_reply("def used(x):\n    return '[REDACTED]'\n"), "[REDACTED] placeholder"),
    (content(json.dumps({"no_change": "the instruction makes no sense"})), "the instruction makes no sense"),
    (edit_reply("def used(x):\n    return x + 1\n"), "unchanged"),
    (content("I would rather not."), "invalid reply twice"),
])
async def test_replies_that_give_no_edit_fail(ed, client, model_server, reply, why):
    before = (client.root / "util.py").read_text()
    model_server.script(MODEL, reply, reply)
    act = await propose_action(client, ed.util, util_range(before, "def used"))
    res = await execute(client, act.command, "Do something")
    assert res["status"] == "failed" and res["proposal"] is None and why in res["reason"], res
    assert ed.received == [] and (client.root / "util.py").read_text() == before
    hist = History.open(Path(os.environ["ORBIT_DATA_DIR"]))
    try:
        last = hist.audit_log(kind="edit_decision")[-1]
    finally:
        hist.close()
    assert last["decision"] == "failed" and last["origin"] == "proposal" and why in last["reason"]


@pytest.mark.parametrize("args", [
    [],
    [{"uri": 3}],
    [{"uri": "file:///x.py", "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}}],
    [{"uri": "file:///x.py", "range": {"start": {"line": 2, "character": 0}, "end": {"line": 1, "character": 0}}},
     "do it"],
    [{"uri": "file:///x.py", "range": "all"}, "do it"],
])
async def test_bad_command_arguments(client, args):
    with pytest.raises(Exception) as ei:
        await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams(
            command=PROPOSE_CHANGE, arguments=args)), 10)
    text = f"{type(ei.value).__name__} {ei.value}"
    assert "InvalidParams" in text or "-32602" in text, text


@pytest.mark.parametrize("params", [
    {},
    {"textDocument": {"uri": "file:///x.py"}, "position": {"line": 0, "character": 0}},
    {"textDocument": {"uri": "file:///x.py"}, "instruction": "x"},
    {"textDocument": {"uri": "file:///x.py"}, "position": {"line": -1, "character": 0}, "instruction": "x"},
    {"textDocument": {"uri": "file:///x.py", "version": "one"}, "position": {"line": 0, "character": 0},
     "instruction": "x"},
])
async def test_bad_request_params(client, params):
    with pytest.raises(Exception) as ei:
        await asyncio.wait_for(client.protocol.send_request_async("orbit/proposeChange", params), 10)
    text = f"{type(ei.value).__name__} {ei.value}"
    assert "InvalidParams" in text or "-32602" in text, text
