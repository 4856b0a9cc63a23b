"""Code lenses (+ resolve, the orbit.showImpact command) and hover over LSP, under both client
profiles. One server per profile serves every case workspace used here as a multi-root
workspace (one graph per folder).

VS Code offers no position encodings (UTF-16); Neovim offers utf-8 first, so its server
announces "utf-8" and every column below is converted to the announced encoding (shared case 017
MUST under VS Code, its SHOULD variant under Neovim).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from conftest import shared_case
from lsp_harness import PROFILES, SERVER, as_dict, uri, wait_indexed

NAMES = {"001": "001-py-relative-import", "003": "003-py-import-submodule-forms", "005": "005-py-aliased-imports",
         "006": "006-py-self-method-instantiation", "007": "007-py-decorators", "017": "017-utf16-emoji-positions",
         "032": "032-codelens-after-external-change"}
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.shared_cases(*NAMES.values(), fixture="client")]
T = 10  # seconds: every wait is bounded


def copy_cases(base) -> dict:
    out = {}
    for key, name in NAMES.items():
        out[key] = base / f"ws{key}"
        shutil.copytree(shared_case(name) / "workspace", out[key], symlinks=True)
    unb = out["unbound"] = base / "wsunbound"  # a call that cannot be bound: counted and located
    unb.mkdir()
    (unb / "shapes.py").write_text("class Circle:\n    def area(self):\n        return 1\n\n\ndef direct():\n"
                                   "    return Circle().area()\n\n\ndef unknown(shape):\n    return shape.area()\n")
    many = out["many"] = base / "wsmany"  # a function with more callers than a hover lists
    many.mkdir()
    (many / "lib.py").write_text("def f(x):\n    return f(x - 1) if x else 0\n")
    (many / "users.py").write_text("from lib import f\n" + "".join(
        f"\n\ndef user{i:02}():\n    return f({i})\n" for i in range(12)))
    return out


@pytest_lsp.fixture(scope="module", config=SERVER, params=PROFILES)
async def client(lsp_client: LanguageClient, tmp_path_factory, request):
    roots = lsp_client.roots = copy_cases(tmp_path_factory.mktemp("lenses"))  # one copy per profile
    lsp_client.refreshes = []  # times of workspace/codeLens/refresh requests

    @lsp_client.feature("workspace/codeLens/refresh")
    def on_refresh(params=None):
        lsp_client.refreshes.append(time.monotonic())
        return None

    folders = [types.WorkspaceFolder(uri=uri(r), name=r.name) for r in roots.values()]
    result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities(request.param), root_uri=folders[0].uri, workspace_folders=folders))
    await asyncio.wait_for(wait_indexed(lsp_client), 60)
    lsp_client.profile = request.param
    lsp_client.init_result = result
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
def roots(client):
    return client.roots


# -- helpers -----------------------------------------------------------------------------------------
def encoding(client) -> str:
    return client.init_result.capabilities.position_encoding or "utf-16"


def units(client, text: str) -> int:
    """Length of ``text`` in the announced encoding's code units."""
    enc = encoding(client)
    if enc == "utf-8":
        return len(text.encode("utf-8"))
    if enc == "utf-32":
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def col(client, line_text: str, utf16_col: int) -> int:
    """A UTF-16 column of ``line_text`` (as shared cases give them) in the announced encoding."""
    n = i = 0
    while n < utf16_col:
        n += len(line_text[i].encode("utf-16-le")) // 2
        i += 1
    return units(client, line_text[:i])


def open_doc(client, path, text=None, version=1, language="python"):
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=uri(path), language_id=language, version=version,
        text=path.read_text(encoding="utf-8") if text is None else text)))


def replace_all(client, path, text, version):
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri(path), version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))


async def lenses(client, path) -> list[types.CodeLens]:
    """Lenses of ``path``, each resolved."""
    got = await asyncio.wait_for(client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri(path)))), T)
    out = []
    for lens in got or []:
        assert lens.command is None and lens.data  # the command comes from codeLens/resolve
        out.append(await asyncio.wait_for(client.code_lens_resolve_async(lens), T))
    return out


def titles(ls: list[types.CodeLens]) -> dict[tuple[int, int], str]:
    return {(x.range.start.line, x.range.start.character): x.command.title for x in ls}


def symbol_lenses(ls):
    return [x for x in ls if x.data["target"]["type"] == "symbol"]


async def hover(client, path, line, character) -> types.Hover | None:
    return await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri(path)), position=types.Position(line, character))), T)


# -- lenses ------------------------------------------------------------------------------------------
async def test_lenses_case003_measure(client, roots):
    drift = roots["003"] / "pkg/retrieval/drift.py"
    got = await lenses(client, drift)
    assert titles(got) == {(0, 0): "4 dependents, 1 hop", (0, 4): "4 callers"}
    file_lens = got[0] if got[0].data["target"]["type"] == "file" else got[1]
    assert file_lens.range == types.Range(types.Position(0, 0), types.Position(0, 0))
    [m] = symbol_lenses(got)
    assert m.range == types.Range(types.Position(0, 4), types.Position(0, 11))  # on the name `measure`
    assert m.data["target"]["qual"] == "pkg.retrieval.drift.measure"


async def test_lenses_case001_recursive_flatten(client, roots):
    got = await lenses(client, roots["001"] / "app/jenkins/build_tree.py")
    # diag.run calls it; its own recursive call is not counted as a caller
    assert titles(got) == {(0, 0): "2 dependents, 2 hops", (0, 4): "1 caller · recursive"}
    got = await lenses(client, roots["001"] / "app/misc/flatten.py")
    assert titles(got) == {(0, 0): "0 dependents", (1, 4): "0 callers"}


async def test_lenses_case006_unresolved_note(client, roots):
    got = titles(await lenses(client, roots["006"] / "widgets.py"))
    # Widget.render: show() calls it, and so does ``item.render()`` in _draw_one: ``item`` holds
    # the Widgets of ``self.items`` that draw() passes it (parameter values, issue 14)
    assert got[(4, 8)] == "2 callers"
    assert got[(0, 6)] == "2 callers"  # class Widget: instantiated by make_widget and Panel.__init__
    assert got[(14, 4)] == "0 callers"  # show
    assert got[(0, 0)] == "0 dependents"
    assert (9, 4) not in got  # `factory = Widget` is a local variable, no lens
    decoy = titles(await lenses(client, roots["006"] / "decoy.py"))
    assert decoy[(1, 8)] == "1 caller"  # Gadget.render: only decoy.unrelated, never a widgets.py caller
    # an unbound call using the name adds the note
    shapes = titles(await lenses(client, roots["unbound"] / "shapes.py"))
    assert shapes[(1, 8)] == "1 caller · unresolved calls to 'area' in 1 function may add more"


async def test_lens_command_runs_show_impact(client, roots):
    drift = roots["003"] / "pkg/retrieval/drift.py"
    got = await lenses(client, drift)
    [m] = symbol_lenses(got)
    assert m.command.command == "orbit.showImpact"
    assert list(m.command.arguments) == [uri(drift), {"line": 0, "character": 4}]
    shown = len(client.messages)
    res = as_dict(await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=m.command.command, arguments=m.command.arguments)), T))
    same = as_dict(await client.protocol.send_request_async("orbit/impact", {
        "textDocument": {"uri": uri(drift)}, "position": {"line": 0, "character": 4}}))
    assert res["cypher"] and {k: v for k, v in res.items() if k != "cypher"} == {
        k: v for k, v in same.items() if k != "cypher"}
    assert res["target"]["qual"] == "pkg.retrieval.drift.measure" and len(res["callers"]) == 4
    for _ in range(100):
        if len(client.messages) > shown:
            break
        await asyncio.sleep(0.02)
    msg = client.messages[-1].message
    assert "pkg.retrieval.drift.measure" in msg and "4 direct callers" in msg
    file_lens = next(x for x in got if x.data["target"]["type"] == "file")
    assert list(file_lens.command.arguments) == [uri(drift)]
    res = as_dict(await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="orbit.showImpact", arguments=file_lens.command.arguments)), T))
    assert res["target"]["type"] == "file" and len(res["dependents"]) == 4


async def test_lens_command_bad_arguments(client):
    for args in ([], [3], ["file:///x.py", "here"]):
        with pytest.raises(Exception) as ei:
            await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams(
                command="orbit.showImpact", arguments=args)), T)
        assert "orbit.showImpact" in str(ei.value) or "-32602" in str(ei.value)


async def test_lens_resolve_reads_the_graph_as_it_is_then(client, roots):
    """The counts are read when a lens is resolved: a lens made before its symbol left the graph
    says so ("unknown", not "0 callers"); a lens this server did not make is an InvalidParams
    error."""
    drift = roots["003"] / "pkg/retrieval/drift.py"
    got = await asyncio.wait_for(client.text_document_code_lens_async(
        types.CodeLensParams(types.TextDocumentIdentifier(uri(drift)))), T)
    assert all(x.command is None and "counts" not in x.data for x in got)
    [m] = [x for x in got if x.data["target"]["type"] == "symbol"]
    gone = types.CodeLens(m.range, data={**m.data, "target": {**m.data["target"], "qual": "pkg.retrieval.drift.gone"}})
    res = await asyncio.wait_for(client.code_lens_resolve_async(gone), T)
    assert res.command.title == "callers unknown: measure is not in the graph now"
    elsewhere = types.CodeLens(m.range, data={"uri": uri(roots["003"] / "nowhere.py"), "target": {"type": "file"}})
    res = await asyncio.wait_for(client.code_lens_resolve_async(elsewhere), T)
    assert res.command.title == "dependents unknown: the file is not in the graph now"
    for data in (None, {"uri": uri(drift)}, {"uri": uri(drift), "target": {"type": "symbol", "qual": 3}}):
        with pytest.raises(Exception) as ei:
            await asyncio.wait_for(client.code_lens_resolve_async(types.CodeLens(m.range, data=data)), T)
        assert "not made by orbit-lsp" in str(ei.value)


async def test_lenses_resolved_at_once_are_read_in_one_batch(client, roots):
    """An editor resolves the lenses on screen at once: those read in one batch get the same
    titles as resolved one by one, each its own (a lens gone from the graph among them too)."""
    widgets = roots["006"] / "widgets.py"
    one_by_one = titles(await lenses(client, widgets))
    got = await asyncio.wait_for(client.text_document_code_lens_async(
        types.CodeLensParams(types.TextDocumentIdentifier(uri(widgets)))), T)
    sym = next(x for x in got if x.data["target"]["type"] == "symbol")
    gone = types.CodeLens(sym.range, data={**sym.data, "target": {**sym.data["target"], "qual": "widgets.gone"}})
    at_once = await asyncio.wait_for(asyncio.gather(*(client.code_lens_resolve_async(x) for x in [*got, gone])), T)
    assert titles(at_once[:-1]) == one_by_one and len(one_by_one) == len(got) > 2
    assert at_once[-1].command.title == f"callers unknown: {sym.data['target']['name']} is not in the graph now"


async def test_lenses_outside_graph_are_empty(client, roots, tmp_path):
    outside = tmp_path / "elsewhere.py"
    outside.write_text("def f():\n    pass\n")
    assert await lenses(client, outside) == []
    notes = roots["003"] / "notes.txt"  # in a folder but not a source file: not in the graph
    notes.write_text("hello\n")
    assert await lenses(client, notes) == []


# -- hover -------------------------------------------------------------------------------------------
async def test_hover_on_definition(client, roots):
    drift = roots["003"] / "pkg/retrieval/drift.py"
    h = await hover(client, drift, 0, 6)
    assert h is not None and h.contents.kind == types.MarkupKind.Markdown
    text = h.contents.value
    assert "**function** `pkg.retrieval.drift.measure` · `pkg/retrieval/drift.py:1`" in text
    assert "**4 direct callers**" in text
    for tool in ("use_dotted", "use_name", "use_relative_module", "use_from_pkg"):
        assert f"`pkg.tools.{tool}.report` · `pkg/tools/{tool}.py:5`" in text
    assert "- hop 1: 4 files (`pkg/tools/use_dotted.py`, `pkg/tools/use_from_pkg.py`, `pkg/tools/use_name.py`, " \
           "`pkg/tools/use_relative_module.py`)" in text
    assert "**Packages** used by `pkg/retrieval/drift.py`: none" in text
    assert h.range == types.Range(types.Position(0, 4), types.Position(0, 11))


async def test_hover_same_name_never_mixed(client, roots):
    text = (await hover(client, roots["006"] / "decoy.py", 1, 9)).contents.value
    assert "`decoy.Gadget.render`" in text and "`decoy.unrelated`" in text
    # never mixed: widgets' callers are not Gadget.render's, and ``item.render()`` in
    # widgets.py is bound to Widget.render (``item`` holds what draw() passes: Widgets)
    assert "widgets." not in text
    assert "could not be bound" not in text
    text = (await hover(client, roots["006"] / "widgets.py", 4, 9)).contents.value
    assert "`widgets.Widget.render`" in text and "`widgets.show` · `widgets.py:17`" in text
    assert "`widgets.Panel._draw_one` · `widgets.py:28`" in text
    assert "could not be bound" not in text and "decoy" not in text
    # a call that could not be bound is said, and located
    text = (await hover(client, roots["unbound"] / "shapes.py", 1, 9)).contents.value
    assert "could not be bound" in text
    assert "Unbound calls to this name: `shapes.py:11` (in `shapes.unknown`)" in text


async def test_hover_on_call_site_case005(client, roots):
    # mod_alias.py line 4 "    return G.hello("b")": `G` is part of the bound call G.hello
    h = await hover(client, roots["005"] / "mod_alias.py", 4, 11)
    assert h is not None
    assert "**function** `greet.hello` · `greet.py:1`" in h.contents.value
    assert "**3 direct callers**" in h.contents.value
    assert h.range == types.Range(types.Position(4, 11), types.Position(4, 12))


async def test_hover_on_import(client, roots):
    h = await hover(client, roots["005"] / "mod_alias.py", 0, 8)  # import greet as G
    text = h.contents.value
    assert text.startswith("**file** `greet.py` · 2 symbols")
    assert "**Dependents** of `greet.py`: 4 files" in text and "- hop 1: 4 files" in text
    h = await hover(client, roots["005"] / "analysis.py", 0, 8)  # import numpy as np
    assert "**package** `numpy`" in h.contents.value and "analysis.py" in h.contents.value


async def test_hover_decorated_function(client, roots):
    text = (await hover(client, roots["007"] / "service.py", 11, 5)).contents.value
    assert "**function** `service.lookup` · `service.py:12`" in text
    assert "Decorated with (workspace decorators) `tracing.trace`" in text
    assert "`service.Account.fetch` · `service.py:19`" in text
    assert "`functools` (stdlib)" in text


async def test_hover_lists_ten_callers_of_many(client, roots):
    text = (await hover(client, roots["many"] / "lib.py", 0, 4)).contents.value
    assert "**12 direct callers**:" in text and "- … and 2 more" in text and "(it also calls itself)" in text
    assert "`users.user00` · `users.py:5`" in text and "`users.user09`" in text and "`users.user10`" not in text
    got = titles(await lenses(client, roots["many"] / "lib.py"))
    assert got == {(0, 0): "1 dependent, 1 hop", (0, 4): "12 callers · recursive"}


async def test_hover_nothing_there(client, roots):
    widgets = roots["006"] / "widgets.py"
    assert await hover(client, widgets, 6, 0) is None  # blank line
    assert await hover(client, widgets, 4, 2) is None  # indentation
    assert await hover(client, widgets, 4, 4) is None  # the `def` keyword
    assert await hover(client, widgets, 27, 40) is None  # past the end of the line
    assert await hover(client, widgets, 400, 0) is None  # past the end of the file


# -- shared case 017: UTF-16 (VS Code) / UTF-8 (Neovim) positions with emoji ---------------------------
async def test_case017_positions(client, roots):
    ws = roots["017"]
    enc = client.init_result.capabilities.position_encoding
    if client.profile == "visual-studio-code":
        assert enc in (None, "utf-16")  # MUST 1
    else:
        assert enc in ("utf-8", "utf-16")  # SHOULD: whatever it announces, it uses consistently
    msgs = json.loads((shared_case(NAMES["017"]) / "messages.json").read_text(encoding="utf-8"))["messages"]
    texts = {m["params"]["textDocument"]["uri"].rsplit("/", 1)[1]: m["params"]["textDocument"]["text"]
             for m in msgs if m.get("method") == "textDocument/didOpen"}
    for name, text in texts.items():
        open_doc(client, ws / name, text, language="javascript" if name.endswith(".js") else "python")
    app = ws / "app.py"
    line2 = texts["app.py"].split("\n")[2]

    got = await lenses(client, app)  # request id 2 and MUST 6
    assert titles(got) == {(0, 0): "0 dependents", (3, 4): "0 callers"}

    h = await hover(client, app, 2, col(client, line2, 21))  # id 3: the `r` of `helper`
    assert h is not None and "`util.helper`" in h.contents.value
    assert "**Dependents** of `util.py`: 1 file" in h.contents.value and "hop 1: 1 file (`app.py`)" in h.contents.value
    assert h.range == types.Range(types.Position(2, col(client, line2, 16)), types.Position(2, col(client, line2, 22)))
    assert await hover(client, app, 2, col(client, line2, 14)) is None  # id 4: the second `=`
    h = await hover(client, app, 2, col(client, line2, 16))  # id 5: start of `helper`
    assert h is not None and "`util.helper`" in h.contents.value

    # incremental didChange: line 4 chars 23-29 (UTF-16) `helper` -> `helper_v2` (unsaved)
    line4 = texts["app.py"].split("\n")[4]
    change = next(m for m in msgs if m.get("method") == "textDocument/didChange")["params"]["contentChanges"][0]
    assert (change["range"]["start"]["character"], change["range"]["end"]["character"]) == (23, 29)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri(app), version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(4, col(client, line4, 23)), types.Position(4, col(client, line4, 29))),
            text=change["text"])]))
    new4 = '    s = "😋😋"; return helper_v2()'
    h = await hover(client, app, 4, col(client, new4, 31))  # id 6
    assert h is not None and "`util.helper_v2`" in h.contents.value, h
    assert h.range == types.Range(types.Position(4, col(client, new4, 23)), types.Position(4, col(client, new4, 32)))
    got = await lenses(client, app)  # the buffer differs from the graph now: lenses from the buffer
    assert titles(got) == {(0, 0): "0 dependents", (3, 4): "0 callers"}

    ui = await lenses(client, ws / "ui.js")  # id 7: JavaScript has no symbols in the graph yet
    ui_line = texts["ui.js"].split("\n")[0]
    for lens in ui:
        assert lens.data["target"]["type"] == "file" or lens.range.start.character == col(client, ui_line, 36)


# -- shared case 032: lenses after a file is rewritten outside the editor --------------------------------
async def _wait_reindexed(client, root, since: float) -> None:
    deadline = time.monotonic() + T
    while time.monotonic() < deadline:
        st = await client.protocol.send_request_async("orbit/status", {})
        ws = [as_dict(w) for w in as_dict(st)["workspaces"]]
        if any(w["root"] == str(root.resolve()) and (w["last_index"] or 0) > since for w in ws):
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"{root} not re-indexed")


async def test_case032_lenses_after_external_change(client, roots):
    ws = roots["032"]
    lib = ws / "lib.py"
    v1 = lib.read_text(encoding="utf-8")
    v2 = (shared_case(NAMES["032"]) / "edits/lib.v2.py").read_text(encoding="utf-8")
    open_doc(client, lib, v1)
    got = await lenses(client, lib)  # request 2 (v1)
    assert titles(got) == {(0, 0): "1 dependent, 1 hop", (0, 4): "1 caller", (4, 4): "0 callers", (8, 4): "1 caller"}

    refreshes = len(client.refreshes)
    since = time.time()
    await asyncio.sleep(0.05)
    lib.write_text(v2, encoding="utf-8")  # the generator rewrites lib.py; the watcher re-indexes it
    await _wait_reindexed(client, ws, since)
    if client.profile == "visual-studio-code":  # MUST 2: refresh requested, once for this re-index
        for _ in range(100):
            if len(client.refreshes) > refreshes:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        assert len(client.refreshes) == refreshes + 1
    else:  # Neovim declares no refreshSupport: nothing may be sent
        await asyncio.sleep(0.3)
        assert client.refreshes == []

    # the client has not reloaded the buffer yet: lenses stay on the v1 text's rows, for the
    # symbols the graph still has (legacy is gone), with the graph's counts
    got = await lenses(client, lib)
    assert titles(got) == {(0, 0): "1 dependent, 1 hop", (0, 4): "1 caller", (8, 4): "1 caller"}

    replace_all(client, lib, v2, 2)  # the client reloads the buffer
    got = await lenses(client, lib)  # request 3 (v2): MUST 3
    assert titles(got) == {(0, 0): "1 dependent, 1 hop", (6, 4): "1 caller", (11, 4): "1 caller"}
    assert sorted(x.range.start.line for x in symbol_lenses(got)) == [6, 11]

    # unsaved edits: two lines inserted on top move the lenses with the text; a new function
    # that the graph does not know yet gets none
    replace_all(client, lib, "# a\n# b\n" + v2 + "\n\ndef fresh():\n    return 1\n", 3)
    got = await lenses(client, lib)
    assert titles(got) == {(0, 0): "1 dependent, 1 hop", (8, 4): "1 caller", (13, 4): "1 caller"}
    # a buffer that does not parse: only the file lens (graph rows never go on foreign text)
    replace_all(client, lib, v2.replace("def render(items):", "def render(items:"), 4)
    got = await lenses(client, lib)
    assert titles(got) == {(0, 0): "1 dependent, 1 hop"}
    replace_all(client, lib, v2, 5)
    h = await hover(client, lib, 11, 5)
    assert "`lib.render` · `lib.py:12`" in h.contents.value and "`main.run` · `main.py:5`" in h.contents.value


# -- a lens request during a re-index (shared case 032 item 5), without a server ----------------------------
async def test_lens_data_during_reindex_comes_from_the_buffer(store, tmp_path):
    import threading

    from orbit_lsp.index.indexer import WorkspaceIndexer
    from orbit_lsp.index.buffers import lens_counts, lens_work

    ws = tmp_path / "ws032"
    shutil.copytree(shared_case(NAMES["032"]) / "workspace", ws)
    ix = WorkspaceIndexer(ws, store)
    ix.index_all()
    try:
        v1 = (ws / "lib.py").read_bytes()
        res = lens_work(ix, "lib.py", v1)
        assert res["source"] == "graph" and [(s["name"], s["line"]) for s in res["symbols"]] == [
            ("parse", 1), ("legacy", 5), ("render", 9)]
        # the indexer's lock is held (a re-index is writing): graph rows may be half updated, so
        # the rows come from the buffer and only the counts from the graph
        held, release = threading.Event(), threading.Event()

        def reindexing():
            with ix.lock:
                held.set()
                release.wait(5)

        t = threading.Thread(target=reindexing)
        t.start()
        held.wait(5)
        try:
            v2ish = b"\n\n" + v1
            res = lens_work(ix, "lib.py", v2ish)
            assert res["source"] == "buffer"
            assert [(s["name"], s["line"]) for s in res["symbols"]] == [("parse", 3), ("legacy", 7), ("render", 11)]
            # the counts are read when each lens is resolved: one query, no lock needed
            counts = lens_counts(ix, "lib.py", [(s["qual"], s["name"]) for s in res["symbols"]], 4)
            assert [c["callers"] for c in counts] == [1, 0, 1]
        finally:
            release.set()
            t.join(5)
        assert lens_work(ix, "missing.py", b"") is None
        assert lens_counts(ix, "missing.py", [(None, "")], 4) == [None]
        assert lens_counts(ix, "lib.py", [("lib.gone", "gone"), ("lib.parse", "parse"), (None, "")], 4) == [
            None, {"callers": 1, "recursive": False, "unresolved_elsewhere": 0, "implicit": None}, {"dependents": 1, "hops": 1}]
    finally:
        ix.graph.delete()


async def test_unresolved_counts_same_from_kept_counts_from_the_index_and_from_a_scan(store, tmp_path):
    """A lens's "may call it too" count is read from the graph's per-name counts; a graph of an
    older version without them is counted through the index on ``Symbol.unresolved_names``, and
    one older still, without that index, by one scan: the same numbers each way."""
    from orbit_lsp.graph import queries
    from orbit_lsp.index.indexer import WorkspaceIndexer

    ws = tmp_path / "ws006"
    shutil.copytree(shared_case(NAMES["006"]) / "workspace", ws)
    # a call of ``render`` on a value nobody passes: unbound, counted where it is (case 006's
    # own ``item.render()`` is bound through the parameter's values)
    (ws / "extra.py").write_text("def paint(thing):\n    return thing.render()\n")
    ix = WorkspaceIndexer(ws, store)
    ix.index_all()
    try:
        def counts():
            indexed = queries.unresolved_indexed(ix.graph)
            syms = [(s["qual"], s["name"]) for s in queries.file_lens_sites(ix.graph, "widgets.py").rows[0]["symbols"]
                    if s["kind"] != "module"]
            ans = queries.symbol_lens_counts(ix.graph, "widgets.py", syms, indexed)
            return {r["qual"]: r["unresolved_elsewhere"] for r in ans.rows}, ans.cypher

        kept, cypher = counts()  # read from the per-name counts the indexer keeps (UnboundName)
        assert kept["widgets.Widget.render"] == 1 and sum(kept.values()) == 1
        assert any("MATCH (u:UnboundName {name: n})" in c["query"] for c in cypher)
        assert not any("unresolved_names" in c["query"] for c in cypher)
        ix.graph.query("MATCH (u:UnboundName) DELETE u")  # a graph written before the counts existed
        looked_up, cypher = counts()  # the indexer creates the Symbol.unresolved_names index
        assert looked_up == kept
        assert any("UNWIND $names AS n MATCH (c:Symbol) WHERE n IN c.unresolved_names" in c["query"] for c in cypher)
        ix.graph.query("DROP INDEX ON :Symbol(unresolved_names)")
        for _ in range(100):  # FalkorDB drops an index in the background
            if not any(r[0] == "Symbol" and "unresolved_names" in r[1] for r in ix.graph.ro_query(
                    "CALL db.indexes() YIELD label, properties RETURN label, properties").rows):
                break
            time.sleep(0.01)
        scanned, cypher = counts()  # a graph built before the index existed: one scan
        assert scanned == looked_up
        assert any("UNWIND c.unresolved_names" in c["query"] for c in cypher)
        assert queries.symbol_summary(ix.graph, "decoy.py", "decoy.Gadget.render").rows[0]["unresolved_elsewhere"] == 1
    finally:
        ix.graph.delete()
