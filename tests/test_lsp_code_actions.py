"""Code actions over LSP under both client profiles: "Orbit: show impact" and "Orbit: ask about this
symbol" on any symbol, and the graph-derived "Remove `f`" offered only when the graph proves it,
applied through workspace/applyEdit only when the client approves. Each test asserts the file on
disk (the test client acts as the editor: it applies an approved edit to its buffer and saves
it), the proposal's state in the store and its audit record (data dir of the server). This
server has no model: "propose a change" answers that it needs one, questions go to the built-in
planner. (Proposals with a model: test_lsp_propose.py.)"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_harness import PROFILES, SERVER, as_dict, start_session, uri
from orbit_lsp.agent.history import History
from orbit_lsp.edits.proposals import ProposalStore
from orbit_lsp.server.code_actions import REMOVE_SYMBOL, SHOW_IMPACT_TITLE, remove_title
from orbit_lsp.server.propose import ASK_TITLE, NO_MODEL, PROPOSE_TITLE

pytestmark = pytest.mark.asyncio(loop_scope="module")

WORKSPACE = Path(__file__).parent / "editor_workspace"


def apply_text_edits(text: str, edits: list) -> str:
    """Apply LSP text edits (UTF-16 == code points for this ASCII workspace) to ``text``."""
    lines = text.split("\n")
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln) + 1)

    def off(p):
        return min(offsets[p.line] + p.character, len(text)) if p.line < len(lines) else len(text)

    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:off(e.range.start)] + e.new_text + text[off(e.range.end):]
    return text


class Editor:
    """The client's side: open buffers (text, version), a decision for the next applyEdit."""

    def __init__(self, client: LanguageClient):
        self.client = client
        self.buffers: dict[str, list] = {}  # uri -> [text, version, path]
        self.decision = "approve"
        self.edit_before_answer = False
        self.received: list[types.ApplyWorkspaceEditParams] = []

    def open(self, path: Path) -> str:
        u = uri(path)
        text = path.read_text()
        self.buffers[u] = [text, 1, path]
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=u, language_id="python", version=1, text=text)))
        return u

    def change(self, u: str, text: str) -> None:
        buf = self.buffers[u]
        buf[0], buf[1] = text, buf[1] + 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=u, version=buf[1]),
            [types.TextDocumentContentChangeWholeDocument(text=text)]))

    def save(self, u: str) -> None:
        text, _, path = self.buffers[u]
        path.write_text(text)
        self.client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri=u)))

    def close_all(self) -> None:
        for u in list(self.buffers):
            self.client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri=u)))
        self.buffers.clear()

    def on_apply_edit(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        self.received.append(params)
        edit = params.edit
        if edit.document_changes:
            [tde] = edit.document_changes
            u, version, edits = tde.text_document.uri, tde.text_document.version, tde.edits
        else:
            [(u, edits)] = edit.changes.items()
            version = None
        if self.edit_before_answer:  # the user typed while the preview was open
            self.change(u, self.buffers[u][0] + "# typed meanwhile\n")
        if self.decision != "approve":
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason="rejected by the user")
        text, now, _ = self.buffers[u]
        if version is not None and version != now:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason=f"version {version} is not {now}")
        self.change(u, apply_text_edits(text, edits))
        self.save(u)
        return types.ApplyWorkspaceEditResult(applied=True)


def fix_code_action_union(client: LanguageClient) -> None:
    """lsprotocol's client-side hook reads every ``CodeAction`` that has a ``command`` as a bare
    ``Command`` (it only checks that the key exists; a Command's ``command`` is a string, a
    CodeAction's an object). Editors tell them apart by that type: do the same."""
    from typing import Union

    conv = client.protocol._converter

    def hook(obj, _):
        cls = types.Command if isinstance(obj.get("command"), str) else types.CodeAction
        return conv.structure(obj, cls)

    conv.register_structure_hook(Union[types.Command, types.CodeAction], hook)


def as_editor(lsp_client: LanguageClient, profile: str) -> None:
    """Make the test client an editor of ``profile``: an ``Editor`` answers its
    ``workspace/applyEdit`` requests, and code-action results are structured."""
    lsp_client.profile = profile
    fix_code_action_union(lsp_client)
    lsp_client.editor = Editor(lsp_client)

    @lsp_client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params):
        return lsp_client.editor.on_apply_edit(params)


@pytest_lsp.fixture(scope="module", config=SERVER, params=PROFILES)
async def client(lsp_client: LanguageClient, tmp_path_factory, request):
    as_editor(lsp_client, request.param)
    lsp_client.root = root = tmp_path_factory.mktemp("actions") / "ws"
    shutil.copytree(WORKSPACE, root)
    await start_session(lsp_client, root, request.param)
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
async def ed(client: LanguageClient, store):
    """A fresh copy of the workspace files, re-indexed, with util.py open."""
    c = client
    for name in ("util.py", "main.py", "cli.py", "handlers.py", "dispatch.py", "settings_demo.py"):
        shutil.copy(WORKSPACE / name, c.root / name)
        c.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri=uri(c.root / name))))
    await wait_hash(store, c.root, "util.py", (WORKSPACE / "util.py").read_text())
    c.editor.decision, c.editor.edit_before_answer, c.editor.received = "approve", False, []
    c.editor.util = c.editor.open(c.root / "util.py")
    yield c.editor
    c.editor.close_all()


async def wait_hash(store, root: Path, rel: str, text: str, timeout: float = 20) -> None:
    """Wait until the server's graph has ``rel`` with this text (re-index after a save)."""
    from orbit_lsp.graph import queries
    from orbit_lsp.graph.connection import code_graph_name
    from orbit_lsp.index.indexer import content_hash

    want = content_hash(text.encode())
    graph = store.graph(code_graph_name(root))
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        rows = queries.file_record(graph, rel).rows
        if rows and rows[0]["hash"] == want:
            await asyncio.sleep(0.3)  # the re-index of the other files saved with it
            return
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"{rel} not re-indexed")
        await asyncio.sleep(0.1)


def line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.split("\n")) if ln.startswith(needle))


async def actions_at(c, u: str, line: int, character: int = 4) -> list[types.CodeAction]:
    pos = types.Position(line, character)
    return list(await c.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=u), range=types.Range(pos, pos),
        context=types.CodeActionContext(diagnostics=[]))) or [])


def proposals() -> ProposalStore:
    return ProposalStore.in_data_dir(Path(os.environ["ORBIT_DATA_DIR"]))


def audit_of(pid: int) -> list[dict]:
    """The edit_decision audit records of proposal ``pid`` of a removal."""
    hist = History.open(Path(os.environ["ORBIT_DATA_DIR"]))
    try:
        return [r for r in hist.audit_log(kind="edit_decision", limit=100_000)
                if r["proposal"] == pid and r["origin"] == "removal"]
    finally:
        hist.close()


async def run_action(c, action: types.CodeAction) -> dict:
    return as_dict(await c.workspace_execute_command_async(types.ExecuteCommandParams(
        command=action.command.command, arguments=action.command.arguments)))


# -- what is offered --------------------------------------------------------------------------------
@pytest.mark.parametrize("needle, offered", [
    ("def unused_helper", True),
    ("    def spare", True),
    ("def used", False),             # called from main.py
    ("def exported_unused", False),  # in __all__
    ("def cached_unused", False),    # decorated
    ("def mystery", False),          # obj.mystery() in main.py could not be bound
    ("def referenced", False),       # util.referenced in main.py (not a call)
    ("    def __repr__", False),     # dunder
    ("def test_like", False),        # a test runner may collect it by name
    ("def only_named_elsewhere", False),  # named in a string in settings_demo.py
])
async def test_remove_offered_only_when_proven(ed, client, needle, offered):
    text = ed.buffers[ed.util][0]
    line = line_of(text, needle)
    acts = await actions_at(client, ed.util, line, len(needle) - 2)
    titles = [a.title for a in acts]
    name = needle.split()[-1]
    assert (remove_title(name) in titles) is offered, titles
    assert SHOW_IMPACT_TITLE in titles  # on any symbol
    show = next(a for a in acts if a.title == SHOW_IMPACT_TITLE)
    res = await run_action(client, show)
    assert res["target"]["type"] == "symbol" and res["target"]["name"] == name


@pytest.mark.parametrize("rel, needle", [
    ("handlers.py", "    def do_GET"),     # a library base class calls it by name
    ("handlers.py", "    def log_message"),
    ("dispatch.py", "def cmd_hello"),      # globals()[...] lookup in its file
])
async def test_remove_not_offered_for_dynamic_uses(ed, client, rel, needle):
    u = ed.open(client.root / rel)
    line = line_of(ed.buffers[u][0], needle)
    titles = [a.title for a in await actions_at(client, u, line, len(needle) - 2)]
    assert SHOW_IMPACT_TITLE in titles and not any(t.startswith("Remove") for t in titles), titles


async def test_show_impact_action_on_a_call(ed, client):
    u = ed.open(client.root / "main.py")
    acts = await actions_at(client, u, 8, 12)  # "    return used(1)": on "used"
    show = next(a for a in acts if a.title == SHOW_IMPACT_TITLE)
    res = await run_action(client, show)
    assert res["target"]["qual"] == "util.used" and {c["qual"]: c["depth"] for c in res["callers"]} == {"main.run": 1, "cli.entry": 2}


async def test_only_filter(ed, client):
    line = line_of(ed.buffers[ed.util][0], "def unused_helper")
    pos = types.Position(line, 5)
    acts = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=ed.util), range=types.Range(pos, pos),
        context=types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.QuickFix])))
    assert not acts


# -- approval path ---------------------------------------------------------------------------------
async def test_approved_removal_edits_the_file(ed, client):
    before = ed.buffers[ed.util][0]
    line = line_of(before, "def unused_helper")
    [act] = [a for a in await actions_at(client, ed.util, line) if a.title == remove_title("unused_helper")]
    assert act.kind == types.CodeActionKind.RefactorRewrite and act.command.command == REMOVE_SYMBOL
    res = await run_action(client, act)
    assert res["status"] == "applied"
    [sent] = ed.received
    if client.profile == "visual-studio-code":  # documentChanges + change annotations declared
        [tde] = sent.edit.document_changes
        assert tde.text_document.version == 1
        [te] = tde.edits
        ann = sent.edit.change_annotations[te.annotation_id]
        assert ann.needs_confirmation is True and ann.label == remove_title("unused_helper")
    else:  # neovim's profile declares neither: plain changes
        assert sent.edit.document_changes is None and list(sent.edit.changes) == [ed.util]
    after = (client.root / "util.py").read_text()
    assert "unused_helper" not in after
    assert after == before.replace("def unused_helper(x):\n    return x * 2\n\n\n", "")
    p = proposals().get(res["proposal"])
    assert p.status == "applied" and p.path == "util.py" and "-def unused_helper(x):" in p.diff
    assert p.base_version == 1 and p.created <= p.updated
    [rec] = audit_of(res["proposal"])
    assert rec["decision"] == "applied" and rec["path"] == "util.py" and rec["title"] == remove_title("unused_helper")
    assert rec["workspace"] == str(client.root.resolve()) and rec["version"] == 1


async def test_rejected_removal_leaves_file(ed, client):
    before = (client.root / "util.py").read_text()
    ed.decision = "reject"
    [act] = [a for a in await actions_at(client, ed.util, line_of(before, "    def spare"))
             if a.title.startswith("Remove")]
    res = await run_action(client, act)
    assert res["status"] == "rejected" and res["reason"] == "rejected by the user"
    assert (client.root / "util.py").read_text() == before and ed.buffers[ed.util][0] == before
    p = proposals().get(res["proposal"])
    assert p.status == "rejected" and "-    def spare(self):" in p.diff
    [rec] = audit_of(res["proposal"])
    assert rec["decision"] == "rejected" and rec["reason"] == "rejected by the user"


async def test_document_edited_before_running_is_stale(ed, client):
    before = (client.root / "util.py").read_text()
    [act] = [a for a in await actions_at(client, ed.util, line_of(before, "def unused_helper"))
             if a.title.startswith("Remove")]
    ed.change(ed.util, before + "\n# a comment typed after the action was offered\n")
    res = await run_action(client, act)
    assert res["status"] == "stale" and "changed since" in res["reason"]
    assert ed.received == []  # nothing was sent to apply
    assert (client.root / "util.py").read_text() == before
    assert proposals().get(res["proposal"]).status == "stale"
    [rec] = audit_of(res["proposal"])
    assert rec["decision"] == "stale" and "changed since" in rec["reason"]


async def test_document_edited_while_asking_is_stale(ed, client):
    before = (client.root / "util.py").read_text()
    ed.edit_before_answer = True
    [act] = [a for a in await actions_at(client, ed.util, line_of(before, "def unused_helper"))
             if a.title.startswith("Remove")]
    res = await run_action(client, act)
    assert len(ed.received) == 1
    if client.profile == "visual-studio-code":  # the client saw the version mismatch
        assert res["status"] == "stale"
    else:  # unversioned `changes`: the client applied it to its edited buffer
        assert res["status"] == "applied"
        assert "unused_helper" not in (client.root / "util.py").read_text()
        assert audit_of(res["proposal"])[0]["decision"] == "applied"
        return
    assert (client.root / "util.py").read_text() == before
    assert proposals().get(res["proposal"]).status == "stale"
    assert audit_of(res["proposal"])[0]["decision"] == "stale"


async def test_bad_arguments(client):
    with pytest.raises(Exception) as ei:
        await client.workspace_execute_command_async(types.ExecuteCommandParams(command=REMOVE_SYMBOL, arguments=[{"uri": 3}]))
    assert "needs" in str(ei.value) or "InvalidParams" in type(ei.value).__name__


# -- propose / ask without a model -------------------------------------------------------------------
async def test_propose_without_a_model_is_disabled_with_its_reason(ed, client):
    """Without a model the action is shown disabled, saying why, to a client that can show
    disabled actions (VS Code); the others are not offered it (issue 18 item 6: it used to fail
    only after the user had typed the instruction). Running it anyway is a clear error."""
    before = (client.root / "util.py").read_text()
    line = line_of(before, "def used") + 1
    acts = [a for a in await actions_at(client, ed.util, line, 6) if a.title == PROPOSE_TITLE]
    if client.profile == "neovim":  # no codeAction.disabledSupport
        assert acts == []
        return
    [act] = acts
    assert act.disabled is not None and act.disabled.reason == NO_MODEL
    [arg] = act.command.arguments
    with pytest.raises(Exception) as ei:
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command=act.command.command, arguments=[arg, "Add a docstring"]))
    assert "needs a model" in str(ei.value) and NO_MODEL.split(":")[0] in str(ei.value)
    with pytest.raises(Exception) as ei:
        await client.protocol.send_request_async("orbit/proposeChange", {
            "textDocument": {"uri": ed.util}, "position": {"line": line, "character": 6},
            "instruction": "Add a docstring"})
    assert "needs a model" in str(ei.value)
    assert ed.received == [] and (client.root / "util.py").read_text() == before


async def test_ask_about_symbol_answered_by_the_planner(ed, client):
    text = ed.buffers[ed.util][0]
    acts = await actions_at(client, ed.util, line_of(text, "def used"), 5)
    [ask] = [a for a in acts if a.title == ASK_TITLE]
    before = len(client.messages)
    res = await run_action(client, ask)
    assert res["planner"] is True and res["error"] is None
    assert res["question"] == "What depends on `util.used` and who calls it?"
    assert "**`util.used` (`util.py:8`)** has 1 direct caller:" in res["answer"]
    assert "- `main.run` (`main.py:" in res["answer"]
    assert "depend on `util.py`" in res["answer"] and "- `main.py` — 1 hop" in res["answer"]
    assert [s["tool"] for s in res["steps"]] == ["find_symbol", "impact_of"]
    assert "### Steps (2)" in res["markdown"]
    shown = [m.message for m in client.messages[before:]]
    assert any(m.startswith("Orbit: **`util.used` (`util.py:8`)** has 1 direct caller") for m in shown), shown
    # an editor that shows the answer itself says so: then no message repeats its first lines
    arg = ask.command.arguments[0]
    arg = dict(arg if isinstance(arg, dict) else as_dict(arg), clientShowsAnswer=True)
    before = len(client.messages)
    res2 = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=ask.command.command, arguments=[arg]))
    assert as_dict(res2)["answer"] == res["answer"]
    await asyncio.sleep(0.2)
    assert [m.message for m in client.messages[before:] if m.message.startswith("Orbit:")] == []
    # on a use of the symbol too (main.py calls it)
    u = ed.open(client.root / "main.py")
    [ask] = [a for a in await actions_at(client, u, 8, 12) if a.title == ASK_TITLE]
    assert (ask.command.arguments[0] if isinstance(ask.command.arguments[0], dict)
            else as_dict(ask.command.arguments[0]))["qual"] == "util.used"
