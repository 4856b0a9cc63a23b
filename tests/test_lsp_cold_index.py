"""What the language server answers while a folder's first (cold) index runs (issue 19 item 2):
the open file's lenses come at once, on its own definitions, and say "indexing…" (their counts
are not final: callers and importers can be in any file); hovers on a definition say what it is
and that its callers are not counted yet; ``orbit/impact`` refuses; once the index is done the
server asks the client to refresh its lenses (when it supports that) and they carry the exact
counts.

The index is held by the server's test hook ``ORBIT_TEST_HOLD_INDEX`` (the folder's index waits
until that file exists), so the lenses are asked for during the cold index whatever the
machine's speed. One server per client profile: VS Code declares ``workspace/codeLens/refresh``,
the Neovim profile (Neovim 0.11 itself) does not.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import pytest_asyncio
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient, client_capabilities

from lsp_harness import PROFILES, as_dict, server_config, uri, wait_indexed

pytestmark = pytest.mark.asyncio(loop_scope="module")
T = 10  # seconds: every wait is bounded

FILES = {
    "pkg/__init__.py": "",
    "pkg/core.py": ("def helper(x):\n"
                    "    return x + 1\n"
                    "\n"
                    "\n"
                    "class Engine:\n"
                    "    def run(self):\n"
                    "        return helper(1)\n"),
    "pkg/users.py": ("from pkg.core import Engine, helper\n"
                     "\n"
                     "\n"
                     "def use():\n"
                     "    return helper(2) + Engine().run()\n"),
    "app.py": ("from pkg import users\n"
               "\n"
               "\n"
               "def main():\n"
               "    return users.use()\n"),
    "tests/test_core.py": ("from pkg.core import helper\n"
                           "\n"
                           "\n"
                           "def test_helper():\n"
                           "    assert helper(1) == 2\n"),
}
RELEASE = ".orbit-test-release"  # created in the folder by the test: its held index starts


@pytest_lsp.fixture(scope="module", params=PROFILES, config=server_config({"ORBIT_TEST_HOLD_INDEX": RELEASE}))
async def client(lsp_client: LanguageClient, tmp_path_factory, request):
    base = tmp_path_factory.mktemp("cold")
    root = base / "ws"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "pyproject.toml").write_text("[project]\nname = 'ws'\n")
    lsp_client.root = root
    lsp_client.release = root / RELEASE
    lsp_client.refreshes = []

    @lsp_client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def on_refresh(params=None):
        lsp_client.refreshes.append(time.monotonic())
        return None

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def on_register(params=None):  # VS Code registers for didChangeConfiguration
        return None

    lsp_client.profile = request.param
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities(request.param), root_uri=uri(root),
        workspace_folders=[types.WorkspaceFolder(uri=uri(root), name=root.name)]))
    yield
    lsp_client.release.touch()  # never leave the server waiting
    await lsp_client.shutdown_session()


def open_doc(client, rel: str, text: str | None = None) -> str:
    path = client.root / rel
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=uri(path), language_id="python", version=1, text=path.read_text() if text is None else text)))
    return uri(path)


async def code_lenses(client, doc: str) -> list[types.CodeLens]:
    return await asyncio.wait_for(client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(doc))), T) or []


async def first_lenses(client, doc: str) -> list[types.CodeLens]:
    """The document's lenses, asked for until there are some: the folder is served once the
    server has read the client's settings (right after ``initialized``)."""
    for _ in range(200):
        got = await code_lenses(client, doc)
        if got:
            return got
        await asyncio.sleep(0.02)
    raise AssertionError("no lenses during the cold index")


async def resolved(client, got: list[types.CodeLens]) -> dict[tuple[int, int, str], types.CodeLens]:
    """Each lens resolved, keyed by (line, character, target type)."""
    out = {}
    for lens in got:
        assert lens.command is None and lens.data  # the command comes from codeLens/resolve
        r = await asyncio.wait_for(client.code_lens_resolve_async(lens), T)
        out[(r.range.start.line, r.range.start.character, r.data["target"]["type"])] = r
    return out


def titles(lenses: dict) -> dict:
    return {k: v.command.title for k, v in lenses.items()}


async def status(client) -> dict:
    st = as_dict(await asyncio.wait_for(client.protocol.send_request_async("orbit/status", {}), T))
    [w] = st["workspaces"]
    return w


@pytest_asyncio.fixture(loop_scope="module")
async def released(client):
    """The held index let go and finished; the times of the refreshes asked for before it."""
    before = list(client.refreshes)
    client.release.touch()
    await asyncio.wait_for(wait_indexed(client), 60)
    return before


# -- during the cold index -------------------------------------------------------------------------
async def test_open_file_gets_lenses_that_say_indexing(client):
    doc = open_doc(client, "pkg/core.py")
    got = await resolved(client, await first_lenses(client, doc))
    # the file lens and one on the name of each function, class and method; no tests lens yet
    assert titles(got) == {(0, 0, "file"): "indexing…", (0, 4, "symbol"): "indexing…",
                           (4, 6, "symbol"): "indexing…", (5, 8, "symbol"): "indexing…"}
    quals = {k: v.data["target"].get("qual") for k, v in got.items()}
    assert quals[(0, 4, "symbol")] == "pkg.core.helper"  # the graph's names: resolved alike later
    assert quals[(5, 8, "symbol")] == "pkg.core.Engine.run"
    lens = got[(0, 4, "symbol")]
    assert lens.range.end == types.Position(0, 10)
    assert lens.command.command == "orbit.indexing" and list(lens.command.arguments) == [doc]
    w = await status(client)
    assert w["indexing"] is True and not w["last_index"]


async def test_unsaved_buffer_lenses_sit_on_its_own_lines(client):
    text = "def extra():\n    pass\n\n\n" + FILES["pkg/users.py"]
    doc = open_doc(client, "pkg/users.py", text)
    got = titles(await resolved(client, await code_lenses(client, doc)))
    assert got == {(0, 0, "file"): "indexing…", (0, 4, "symbol"): "indexing…", (7, 4, "symbol"): "indexing…"}
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(doc)))


async def test_indexing_command_says_how_far(client):
    doc = uri(client.root / "pkg/core.py")
    shown = len(client.messages)
    res = as_dict(await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="orbit.indexing", arguments=[doc])), T))
    assert res["indexing"] is True and [f["root"] for f in res["folders"]] == [str(client.root.resolve())]
    for _ in range(100):
        if len(client.messages) > shown:
            break
        await asyncio.sleep(0.02)
    assert client.messages[-1].message.startswith(f"orbit: indexing {client.root.name}")


async def test_hover_on_a_definition_says_indexing(client):
    doc = uri(client.root / "pkg/core.py")
    h = await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(doc), types.Position(5, 9))), T)
    text = h.contents.value
    assert text.startswith("**method** `pkg.core.Engine.run` · `pkg/core.py:6`") and "indexing…" in text
    assert h.range == types.Range(types.Position(5, 8), types.Position(5, 11))
    # a call: what it calls is known only from the index
    assert await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(doc), types.Position(6, 16))), T) is None


async def test_impact_is_refused_not_zero(client):
    doc = uri(client.root / "pkg/core.py")
    with pytest.raises(JsonRpcException, match="indexing ws"):
        await asyncio.wait_for(client.protocol.send_request_async("orbit/impact", {
            "textDocument": {"uri": doc}, "position": {"line": 0, "character": 4}}), T)


async def test_call_hierarchy_is_refused_not_empty(client):
    doc = uri(client.root / "pkg/core.py")
    with pytest.raises(JsonRpcException, match="indexing ws"):
        await asyncio.wait_for(client.text_document_prepare_call_hierarchy_async(types.CallHierarchyPrepareParams(
            types.TextDocumentIdentifier(doc), types.Position(0, 5))), T)


# -- once it is done --------------------------------------------------------------------------------
async def test_exact_counts_after_the_index(client, released):
    doc = uri(client.root / "pkg/core.py")
    if client.profile == "visual-studio-code":
        # the server asks for fresh lenses once the index is done
        for _ in range(100):
            if len(client.refreshes) > len(released):
                break
            await asyncio.sleep(0.02)
        assert len(client.refreshes) > len(released)
    else:
        assert client.refreshes == []  # Neovim 0.11 declares no refresh support: none is sent
    got = titles(await resolved(client, await code_lenses(client, doc)))
    assert got == {
        # users.py and tests/test_core.py import it; app.py imports users.py
        (0, 0, "file"): "3 dependents, 2 hops",
        (0, 4, "symbol"): "3 callers",  # Engine.run, use, test_helper
        (0, 4, "tests"): "1 test reaches this",
        (4, 6, "symbol"): "1 caller",  # Engine() in use
        (5, 8, "symbol"): "1 caller",  # Engine().run() in use
        (5, 8, "tests"): "no test reaches this",
    }
    w = await status(client)
    assert w["indexing"] is False and w["last_index"] and w["progress"] is None


async def test_lens_asked_during_the_index_resolves_with_counts_after_it(client):
    # an editor may resolve a lens it got during the index after the index ended
    lens = types.CodeLens(range=types.Range(types.Position(0, 4), types.Position(0, 10)),
                          data={"uri": uri(client.root / "pkg/core.py"),
                                "target": {"type": "symbol", "qual": "pkg.core.helper", "name": "helper"}})
    r = await asyncio.wait_for(client.code_lens_resolve_async(lens), T)
    assert r.command.title == "3 callers" and r.command.command == "orbit.showImpact"


async def test_hover_and_impact_after_the_index(client):
    doc = uri(client.root / "pkg/core.py")
    h = await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(doc), types.Position(0, 5))), T)
    assert "**3 direct callers**" in h.contents.value and "indexing" not in h.contents.value
    res = as_dict(await asyncio.wait_for(client.protocol.send_request_async("orbit/impact", {
        "textDocument": {"uri": doc}, "position": {"line": 0, "character": 4}}), T))
    assert res["callersTotal"]["byDepth"][0] == 3
    res = as_dict(await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="orbit.indexing", arguments=[doc])), T))
    assert res == {"indexing": False, "folders": []}


async def test_folder_added_later_says_indexing_until_its_index_is_done(client, released):
    """A workspace folder added at run time: its open file's lenses say "indexing…" while its
    own first index runs (held the same way), then carry counts; the first folder keeps its."""
    extra = client.root.parent / "extra"
    extra.mkdir()
    (extra / "lib.py").write_text("def shared():\n    return 1\n")
    (extra / "main.py").write_text("from lib import shared\n\n\ndef go():\n    return shared() + shared()\n")
    (extra / "pyproject.toml").write_text("[project]\nname = 'extra'\n")
    client.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
        types.WorkspaceFoldersChangeEvent(added=[types.WorkspaceFolder(uri(extra), "extra")], removed=[])))
    path = extra / "lib.py"
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=uri(path), language_id="python", version=1, text=path.read_text())))
    got = titles(await resolved(client, await first_lenses(client, uri(path))))
    assert got == {(0, 0, "file"): "indexing…", (0, 4, "symbol"): "indexing…"}
    core = titles(await resolved(client, await code_lenses(client, uri(client.root / "pkg/core.py"))))
    assert core[(0, 4, "symbol")] == "3 callers"
    (extra / RELEASE).touch()
    await asyncio.wait_for(wait_indexed(client), 60)
    got = titles(await resolved(client, await code_lenses(client, uri(path))))
    assert got == {(0, 0, "file"): "1 dependent, 1 hop", (0, 4, "symbol"): "1 caller"}  # go() calls it twice


# -- a first index cancelled -------------------------------------------------------------------------
@pytest_lsp.fixture(scope="module", config=server_config({"ORBIT_TEST_HOLD_INDEX": RELEASE}))
async def cancelled(lsp_client: LanguageClient, tmp_path_factory):
    root = tmp_path_factory.mktemp("cancel") / "ws"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    lsp_client.root = root
    lsp_client.refreshes = []

    @lsp_client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def on_refresh(params=None):
        lsp_client.refreshes.append(time.monotonic())
        return None

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def on_register(params=None):
        return None

    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=uri(root),
        workspace_folders=[types.WorkspaceFolder(uri=uri(root), name=root.name)]))
    yield
    await lsp_client.shutdown_session()


async def test_cancelled_first_index_takes_its_indexing_lenses_away(cancelled):
    client = cancelled
    doc = open_doc(client, "pkg/core.py")
    assert titles(await resolved(client, await first_lenses(client, doc)))[(0, 0, "file")] == "indexing…"
    for _ in range(200):  # the folder's progress has begun
        if client.progress_reports:
            break
        await asyncio.sleep(0.02)
    [token] = list(client.progress_reports)
    client.protocol.notify(types.WINDOW_WORK_DONE_PROGRESS_CANCEL, types.WorkDoneProgressCancelParams(token=token))
    for _ in range(500):
        if not (await status(client))["indexing"]:
            break
        await asyncio.sleep(0.02)
    w = await status(client)
    assert w["indexing"] is False and not w["last_index"]  # not indexed, and no longer said to be
    for _ in range(100):
        if client.refreshes:
            break
        await asyncio.sleep(0.02)
    assert client.refreshes  # the editor asks again, and gets no lens: nothing is counted
    assert await code_lenses(client, doc) == []
