"""Call hierarchy, workspace symbols and diagnostics over LSP, under both client profiles.

One server per profile serves several workspace folders at once (multi-root): shared cases
006, 007 and 020, a file with emoji before call sites, an import cycle and an unresolved
import. Each profile gets its own copies (the 020 and cycle tests edit files).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from conftest import CASES, shared_case
from lsp_harness import PROFILES, SERVER, as_dict, uri, wait_indexed

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.shared_cases("006-py-self-method-instantiation", "007-py-decorators",
                                       "020-syntax-error-mid-edit", fixture="client")]

EMOJI = '''def f():
    return 1


def g():
    s = "😋"; return f()


x = "😋"; f()
'''

EDITS_020 = CASES / "020-syntax-error-mid-edit" / "edits"
# a form feed is not a line break for LSP nor for ast (str.splitlines would count one)
FORM_FEED = 'def h():\n    return 1\n\x0c\ny = "😋"; h()\n'
FOLDERS = ("w006", "w007", "w020", "emoji", "cycle", "unres", "hub")


def make_workspaces(base: Path) -> dict[str, Path]:
    roots = {}
    for name, case in (("w006", "006-py-self-method-instantiation"), ("w007", "007-py-decorators"),
                       ("w020", "020-syntax-error-mid-edit")):
        roots[name] = base / name
        shutil.copytree(shared_case(case) / "workspace", roots[name])
    roots["emoji"] = base / "emoji"
    roots["emoji"].mkdir()
    (roots["emoji"] / "mod.py").write_text(EMOJI, encoding="utf-8")
    (roots["emoji"] / "ff.py").write_text(FORM_FEED, encoding="utf-8", newline="")
    roots["cycle"] = base / "cycle"
    roots["cycle"].mkdir()
    (roots["cycle"] / "a.py").write_text("import b\n\n\ndef fa():\n    return b.fb()\n")
    (roots["cycle"] / "b.py").write_text("import a\n\n\ndef fb():\n    return 1\n\n\ndef fc():\n    return a.fa()\n")
    (roots["cycle"] / "c.py").write_text("import a\n")
    roots["unres"] = base / "unres"
    roots["unres"].mkdir()
    (roots["unres"] / "app.py").write_text("import os\nfrom . import missing\n")
    roots["hub"] = base / "hub"
    roots["hub"].mkdir()
    (roots["hub"] / "hub.py").write_text("def hub():\n    return 1\n")
    (roots["hub"] / "spokes.py").write_text("from hub import hub\n\n" + "".join(
        f"def spoke_{i}():\n    return hub()\n\n" for i in range(5)) + "def rim():\n    return spoke_3()\n")
    # hub.py's dependents: spokes.py at 1 hop, wheel_a.py and wheel_b.py at 2, axle.py at 3
    for wheel in ("wheel_a", "wheel_b"):
        (roots["hub"] / f"{wheel}.py").write_text("import json\nimport spokes\n")
    (roots["hub"] / "axle.py").write_text("import wheel_a\n")
    return roots


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory):
    return {p: make_workspaces(tmp_path_factory.mktemp("hier-" + p[:6])) for p in PROFILES}


class Session:
    def __init__(self, profile: str, roots: dict[str, Path], encoding: str):
        self.profile, self.roots, self.encoding = profile, roots, encoding


@pytest_lsp.fixture(scope="module", config=SERVER, params=PROFILES)
async def client(lsp_client: LanguageClient, workspaces, request):
    roots = workspaces[request.param]

    @lsp_client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def _refresh(params):  # the VS Code profile declares refresh support: answer it
        return None

    result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities(request.param),
        root_uri=uri(roots["w006"]),
        workspace_folders=[types.WorkspaceFolder(uri=uri(roots[n]), name=n) for n in FOLDERS],
    ))
    await wait_indexed(lsp_client)
    lsp_client.orbit = Session(request.param, roots, result.capabilities.position_encoding or "utf-16")
    yield
    await lsp_client.shutdown_session()


# -- helpers --------------------------------------------------------------------------------------
def R(l1, c1, l2, c2) -> types.Range:  # noqa: N802
    return types.Range(types.Position(l1, c1), types.Position(l2, c2))


async def prepare(client, path: Path, line: int, character: int):
    return await asyncio.wait_for(client.text_document_prepare_call_hierarchy_async(types.CallHierarchyPrepareParams(
        text_document=types.TextDocumentIdentifier(uri=uri(path)), position=types.Position(line, character))), 10)


async def incoming(client, item):
    return await asyncio.wait_for(client.call_hierarchy_incoming_calls_async(
        types.CallHierarchyIncomingCallsParams(item=item)), 10)


async def outgoing(client, item):
    return await asyncio.wait_for(client.call_hierarchy_outgoing_calls_async(
        types.CallHierarchyOutgoingCallsParams(item=item)), 10)


async def symbols(client, query: str):
    return await asyncio.wait_for(client.workspace_symbol_async(types.WorkspaceSymbolParams(query=query)), 10)


async def wait_diagnostics(client, path: Path, predicate, timeout: float = 10.0):
    """Wait until the diagnostics published for ``path`` satisfy ``predicate`` (polls what the
    client has received, so a notification that arrived first is not missed)."""
    key = uri(path)
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        diags = client.diagnostics.get(key)
        if diags is not None and predicate(diags):
            return diags
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"diagnostics of {path.name} never matched; last: {diags}")
        await asyncio.sleep(0.02)


async def save(client, path: Path, text: str, version: int) -> None:
    """Write ``text`` to ``path`` as an editor would: didChange (full text), then didSave."""
    path.write_text(text, encoding="utf-8")
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri(path), version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri(path))))


def open_doc(client, path: Path) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri(path), language_id="python", version=1, text=path.read_text(encoding="utf-8"))))


def orbit(client) -> Session:
    return client.orbit


# -- call hierarchy ------------------------------------------------------------------------------
async def test_negotiated_encoding(client: LanguageClient):
    s = orbit(client)
    # VS Code declares no positionEncodings (UTF-16 by default); neovim's profile lists utf-8 first
    assert s.encoding == {"visual-studio-code": "utf-16", "neovim": "utf-8"}[s.profile]


async def test_prepare_on_definition(client: LanguageClient):
    widgets = orbit(client).roots["w006"] / "widgets.py"
    [item] = await prepare(client, widgets, 4, 9)  # "    def render(self):"
    assert item.name == "render" and item.kind == types.SymbolKind.Method
    assert item.detail == "widgets.Widget.render" and item.uri == uri(widgets)
    assert item.selection_range == R(4, 8, 4, 14)
    assert item.range == R(4, 0, 6, 0)  # lines 5-6 whole, their ends included (LSP: up to the next line's start)
    assert as_dict(item.data) == {"file": "widgets.py", "qual": "widgets.Widget.render"}


async def test_prepare_on_call_site_and_nothing(client: LanguageClient):
    widgets = orbit(client).roots["w006"] / "widgets.py"
    [item] = await prepare(client, widgets, 16, 14)  # "    return w.render()" on "render"
    assert item.detail == "widgets.Widget.render"
    assert await prepare(client, widgets, 6, 0) is None  # blank line
    assert await prepare(client, widgets, 2, 8) is None  # "self.label = label": no symbol
    # a document outside every folder
    assert await prepare(client, Path("/nonexistent/x.py"), 0, 0) is None


async def test_incoming_calls_006(client: LanguageClient):
    widgets = orbit(client).roots["w006"] / "widgets.py"
    [item] = await prepare(client, widgets, 4, 9)
    calls = await incoming(client, item)
    # show() calls it on what make_widget() returns; _draw_one(item) on the Widgets of
    # self.items, which draw() passes it (parameter values, issue 14)
    assert [(c.from_.detail, c.from_.kind) for c in calls] == [
        ("widgets.show", types.SymbolKind.Function), ("widgets.Panel._draw_one", types.SymbolKind.Method)]
    assert list(calls[0].from_ranges) == [R(16, 11, 16, 19)]  # "w.render" in show
    assert calls[0].from_.selection_range == R(14, 4, 14, 8)
    assert list(calls[1].from_ranges) == [R(27, 15, 27, 26)]  # "item.render" in _draw_one
    # the same-named method in decoy.py has its own caller only
    [gadget] = await prepare(client, orbit(client).roots["w006"] / "decoy.py", 1, 9)
    assert gadget.detail == "decoy.Gadget.render"
    assert [c.from_.detail for c in await incoming(client, gadget)] == ["decoy.unrelated"]


async def test_outgoing_calls_006_instantiation_once(client: LanguageClient):
    widgets = orbit(client).roots["w006"] / "widgets.py"
    [panel_init] = await prepare(client, widgets, 20, 9)  # Panel.__init__
    assert panel_init.detail == "widgets.Panel.__init__"
    calls = await outgoing(client, panel_init)
    # Widget("a") is bound to the class and to Widget.__init__: shown once, as the class
    assert [(c.to.detail, c.to.kind) for c in calls] == [("widgets.Widget", types.SymbolKind.Class)]
    assert list(calls[0].from_ranges) == [R(21, 22, 21, 28)]


async def test_outgoing_calls_007(client: LanguageClient):
    service = orbit(client).roots["w007"] / "service.py"
    [main] = await prepare(client, service, 29, 5)  # "def main():"
    assert main.detail == "service.main"
    calls = await outgoing(client, main)
    got = {c.to.detail: list(c.from_ranges) for c in calls}
    # reading the property ``acct.name`` runs its getter: a call of Account.name (issue 14)
    assert set(got) == {"service.Account.build", "service.Account.fetch", "service.Account.name"}
    assert got["service.Account.build"] == [R(30, 11, 30, 24)]  # "Account.build"
    assert got["service.Account.fetch"] == [R(31, 11, 31, 21)]  # "acct.fetch"
    assert got["service.Account.name"] == [R(31, 28, 31, 37)]  # "acct.name"
    # and back: fetch is called by main, and by the decorator's wrapper, whose ``fn`` holds the
    # function ``deco`` was applied to (``fn(*args, **kwargs)``: parameter values, issue 14);
    # lookup likewise by fetch and by wrapper (its ``fn`` is ``lru_cache(...)(lookup)``, which
    # orbit reads as the function it caches: calling it runs lookup on a cache miss)
    fetch = next(c.to for c in calls if c.to.detail == "service.Account.fetch")
    assert [c.from_.detail for c in await incoming(client, fetch)] == ["service.main", "tracing.trace.deco.wrapper"]
    [lookup] = await prepare(client, service, 11, 5)
    assert lookup.detail == "service.lookup" and lookup.range.start.line == 11
    assert [c.from_.detail for c in await incoming(client, lookup)] == ["service.Account.fetch",
                                                                       "tracing.trace.deco.wrapper"]


async def test_ranges_follow_the_negotiated_encoding(client: LanguageClient):
    s = orbit(client)
    mod = s.roots["emoji"] / "mod.py"
    [f] = await prepare(client, mod, 0, 4)
    calls = {c.from_.detail: c for c in await incoming(client, f)}
    assert set(calls) == {"mod", "mod.g"}
    # 'f' comes after '"😋"; ': 12 UTF-8 bytes / 10 UTF-16 units / 9 code points into the line
    col = {"utf-8": 12, "utf-16": 10, "utf-32": 9}[s.encoding]
    module = calls["mod"]
    assert module.from_.kind == types.SymbolKind.Module and module.from_.name == "mod.py"
    assert list(module.from_ranges) == [R(8, col, 8, col + 1)]
    g_col = col + len("    s = ") - len("x = ") + len("return ")
    assert list(calls["mod.g"].from_ranges) == [R(5, g_col, 5, g_col + 1)]
    # a definition on lines with an emoji: whole lines, up to the start of the next one
    assert calls["mod.g"].from_.range == R(4, 0, 6, 0)
    assert calls["mod.g"].from_.selection_range == R(4, 4, 4, 5)
    # a position sent in client units on that line finds the call
    [again] = await prepare(client, mod, 8, col)
    assert again.detail == "mod.f"


async def test_form_feed_is_not_a_line_break(client: LanguageClient):
    s = orbit(client)
    ff = s.roots["emoji"] / "ff.py"
    [h] = await prepare(client, ff, 0, 4)
    [call] = await incoming(client, h)
    col = {"utf-8": 12, "utf-16": 10, "utf-32": 9}[s.encoding]
    assert call.from_.name == "ff.py" and list(call.from_ranges) == [R(3, col, 3, col + 1)]
    [again] = await prepare(client, ff, 3, col)
    assert again.detail == "ff.h"


async def test_incoming_with_item_without_data(client: LanguageClient):
    widgets = orbit(client).roots["w006"] / "widgets.py"
    [item] = await prepare(client, widgets, 4, 9)
    item.data = None  # a client that drops data: the selection range still identifies it
    assert [c.from_.detail for c in await incoming(client, item)] == ["widgets.show", "widgets.Panel._draw_one"]


# -- workspace symbols ---------------------------------------------------------------------------
async def test_workspace_symbols(client: LanguageClient):
    roots = orbit(client).roots
    found = await symbols(client, "RENDER")
    by_container = {s.container_name: s for s in found}
    assert set(by_container) == {"widgets.Widget", "decoy.Gadget"}
    w = by_container["widgets.Widget"]
    assert w.name == "render" and w.kind == types.SymbolKind.Method
    assert w.location.uri == uri(roots["w006"] / "widgets.py") and w.location.range == R(4, 8, 4, 14)
    # substring match, across folders; exact names first
    names = [(s.name, s.container_name) for s in await symbols(client, "fetch")]
    assert names == [("fetch", "service.Account")]
    assert [s.name for s in await symbols(client, "f")][:1] == ["f"]
    assert [s for s in await symbols(client, "no-such-symbol-anywhere")] == []
    everything = await symbols(client, "")
    assert 0 < len(everything) <= 200
    assert all(s.kind != types.SymbolKind.Module for s in everything)
    assert {"Widget", "Account", "fa"} <= {s.name for s in everything}


# -- diagnostics -----------------------------------------------------------------------------------
def _only(diags, code):
    return [d for d in diags if d.code == code]


async def test_import_cycle_diagnostics_and_clearing(client: LanguageClient):
    root = orbit(client).roots["cycle"]
    a = await wait_diagnostics(client, root / "a.py", lambda d: _only(d, "import-cycle"))
    b = await wait_diagnostics(client, root / "b.py", lambda d: _only(d, "import-cycle"))
    [da], [db] = a, b
    assert da.message == "import cycle: a.py → b.py → a.py" and db.message == "import cycle: b.py → a.py → b.py"
    assert da.severity == types.DiagnosticSeverity.Warning and da.source == "orbit"
    assert da.range == R(0, 0, 0, len("import b"))
    assert uri(root / "c.py") not in client.diagnostics or len(client.diagnostics[uri(root / "c.py")]) == 0
    # breaking the cycle clears both files (b.py is re-indexed; a.py's diagnostics change too)
    b_text = "def fb():\n    return 1\n"
    open_doc(client, root / "b.py")
    await save(client, root / "b.py", b_text, 2)
    await wait_diagnostics(client, root / "a.py", lambda d: len(d) == 0)
    await wait_diagnostics(client, root / "b.py", lambda d: len(d) == 0)


async def test_unresolved_import_hint(client: LanguageClient):
    app = orbit(client).roots["unres"] / "app.py"
    diags = await wait_diagnostics(client, app, lambda d: bool(d))
    [d] = diags
    assert d.severity == types.DiagnosticSeverity.Hint and d.code == "unresolved-import" and d.source == "orbit"
    assert d.range == R(1, 0, 1, len("from . import missing")) and "missing" in d.message


async def test_020_broken_save_reports_syntax_error(client: LanguageClient):
    root = orbit(client).roots["w020"]
    inventory, shop = root / "inventory.py", root / "shop.py"
    open_doc(client, inventory)
    open_doc(client, shop)
    assert not [d for d in client.diagnostics.get(uri(inventory), []) if d.code == "syntax-error"]

    await save(client, inventory, (EDITS_020 / "1-broken-inventory.py").read_text(), 2)
    diags = await wait_diagnostics(client, inventory, lambda d: _only(d, "syntax-error"))
    [err] = _only(diags, "syntax-error")
    assert err.severity == types.DiagnosticSeverity.Error and err.source == "orbit"
    assert err.range.start.line in (11, 12) and err.range.start.character == 0
    assert "never closed" in err.message and "last good graph" in err.message

    # the last good graph still answers for `remove` (line 8, 0-based 7)
    res = as_dict(await asyncio.wait_for(client.protocol.send_request_async("orbit/impact", {
        "textDocument": {"uri": uri(inventory)}, "position": {"line": 7, "character": 5}}), 10))
    assert res["target"]["type"] == "symbol" and res["target"]["qual"] == "inventory.remove"
    assert "shop.sell" in [c["qual"] for c in res["callers"]]
    assert {d["path"]: d["hops"] for d in res["dependents"]} == {"shop.py": 1}
    [remove] = await prepare(client, inventory, 7, 5)
    assert remove.detail == "inventory.remove"
    assert [c.from_.detail for c in await incoming(client, remove)] == ["shop.sell"]
    assert await symbols(client, "restock") == []  # not half-added


async def test_020_fixed_save_clears_it(client: LanguageClient):
    inventory = orbit(client).roots["w020"] / "inventory.py"
    await save(client, inventory, (EDITS_020 / "2-fixed-inventory.py").read_text(), 3)
    await wait_diagnostics(client, inventory, lambda d: not _only(d, "syntax-error"))
    [restock] = await symbols(client, "restock")
    assert restock.container_name == "inventory" and restock.location.range == R(11, 4, 11, 11)
    [item] = await prepare(client, inventory, 11, 5)
    assert [c.to.detail for c in await outgoing(client, item)] == ["inventory.add"]
    [report] = await symbols(client, "report")
    assert report.location.range == R(15, 4, 15, 10)  # moved from line 12 to 16


async def test_caller_lists_are_capped_by_max_callers_and_say_so(client: LanguageClient):
    """``orbit.maxCallers`` caps the incoming calls listed (first by file and line) and the
    callers of ``orbit/impact``; the true totals are still given: by a message for the call
    hierarchy (LSP has no field for it), in ``callersTotal`` for ``orbit/impact``."""
    hub = client.orbit.roots["hub"] / "hub.py"
    item = (await prepare(client, hub, 0, 4))[0]
    assert [c.from_.name for c in await incoming(client, item)] == [f"spoke_{i}" for i in range(5)]
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"orbit": {"maxCallers": 2}}))
    try:
        shown = client.protocol.wait_for_notification_async(types.WINDOW_SHOW_MESSAGE)
        calls = await incoming(client, item)
        assert [c.from_.name for c in calls] == ["spoke_0", "spoke_1"]
        msg = await asyncio.wait_for(shown, 10)
        assert "hub has 5 callers" in msg.message and "first 2" in msg.message and "maxCallers" in msg.message
        res = as_dict(await client.protocol.send_request_async("orbit/impact", {
            "textDocument": {"uri": uri(hub)}, "position": {"line": 0, "character": 4}}))
        assert [c["qual"] for c in res["callers"]] == ["spokes.spoke_0", "spokes.spoke_1"]
        assert res["callersTotal"] == {"all": 6, "byDepth": [5, 1]}
        assert any("6 callers within 4 hops; showing the first 2" in n for n in res["notes"])
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"orbit": {}}))
    assert len(await incoming(client, item)) == 5


async def test_dependent_lists_are_capped_by_max_dependents_and_say_so(client: LanguageClient):
    """``orbit.maxDependents`` caps the dependent files ``orbit/impact`` lists, nearest first (by
    hops, then path; a package's users by path); ``dependentsTotal`` still counts every one and
    a note says the list is cut. The lens command's message gives the total."""
    roots = client.orbit.roots["hub"]
    hub = {"textDocument": {"uri": uri(roots / "hub.py")}}
    json_import = {"textDocument": {"uri": uri(roots / "wheel_a.py")}, "position": {"line": 0, "character": 8}}

    async def impact(params):
        return as_dict(await client.protocol.send_request_async("orbit/impact", params))

    whole = await impact(hub)
    assert [(d["path"], d["hops"]) for d in whole["dependents"]] == [
        ("spokes.py", 1), ("wheel_a.py", 2), ("wheel_b.py", 2), ("axle.py", 3)]
    assert whole["dependentsTotal"] == {"all": 4, "byHops": [1, 2, 1]}
    assert not any("maxDependents" in n for n in whole["notes"])
    package = await impact(json_import)
    assert package["target"] == {"type": "package", "name": "json"}
    assert [(d["path"], d["hops"]) for d in package["dependents"]] == [("wheel_a.py", 1), ("wheel_b.py", 1)]
    assert package["dependentsTotal"] == {"all": 2, "byHops": [2]}
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"orbit": {"maxDependents": 2}}))
    try:
        cut = await impact(hub)
        assert [(d["path"], d["hops"]) for d in cut["dependents"]] == [("spokes.py", 1), ("wheel_a.py", 2)]
        assert cut["dependentsTotal"] == {"all": 4, "byHops": [1, 2, 1]}
        assert "4 files depend on hub.py within 4 hops; listing the nearest 2 (setting orbit.maxDependents)" in cut["notes"]
        shown = client.protocol.wait_for_notification_async(types.WINDOW_SHOW_MESSAGE)
        res = as_dict(await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="orbit.showImpact", arguments=[uri(roots / "hub.py")])))
        assert res["dependentsTotal"]["all"] == 4 and len(res["dependents"]) == 2
        msg = await asyncio.wait_for(shown, 10)
        assert msg.message.startswith("orbit: hub.py has 4 dependent files (up to 3 hops)"), msg.message
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"orbit": {"maxDependents": 1}}))
        package = await impact(json_import)
        assert [d["path"] for d in package["dependents"]] == ["wheel_a.py"]
        assert package["dependentsTotal"] == {"all": 2, "byHops": [2]}
        assert "2 files use package json; listing the first 1 by path (setting orbit.maxDependents)" in package["notes"]
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"orbit": {}}))
    assert len((await impact(hub))["dependents"]) == 4
