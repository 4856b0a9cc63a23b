"""Lifecycle over LSP, under both client profiles: initial indexing with work-done progress,
multi-root folders (added, removed, nested), settings (initializationOptions, the ``orbit``
configuration section, didChangeConfiguration, invalid values), re-indexing on didSave and on
changes made outside the editor (watchdog; shared cases 019 and 022), URI spellings, bad
params, a responsive event loop while a large folder indexes, re-open without re-parsing, and
FalkorDB going offline and coming back mid-session.

Graph contents are checked with a ``GraphStore`` in this process on the same embedded server
(``store`` fixture, same ``ORBIT_DATA_DIR``). Re-index counts come from the server's
``window/logMessage`` lines ``orbit: re-indexed <rel> [<folder>] ...`` (one per re-index that
changed the graph; a re-index of unchanged content is a no-op and logs nothing).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import pytest_asyncio
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from conftest import shared_case
from lsp_harness import (PROFILES, SERVER, ExternalFalkorDB, copy_case, request, server_config,
                         start_session, uri, wait_indexed)
from orbit_lsp.graph.connection import code_graph_name

# the `client` fixture's workspaces include shared cases 022 and 019 (the offline tests need none)
pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.shared_cases("022-atomic-save-rename", "019-symlink-loops", fixture="client")]

CHAIN = {"c0.py": "def base():\n    return 0\n", "c1.py": "import c0\n", "c2.py": "import c1\n",
         "c3.py": "import c2\n", "c4.py": "import c3\n"}
LIB_V1 = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
APP = "from lib import f\n\n\ndef main():\n    return f()\n"
TEMPORARIES = ["mod.py~", ".mod.py.swp", "4913", ".goutputstream-7QX2K1"]


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def build_workspaces(base: Path) -> SimpleNamespace:
    ws = SimpleNamespace(
        chain=write_tree(base / "chain", CHAIN),
        edit=write_tree(base / "edit", {"lib.py": LIB_V1, "app.py": APP}),
        w022=copy_case(shared_case("022-atomic-save-rename"), base / "ws022"),
        spaces=write_tree(base / "my dir", {"a b.py": "def f():\n    return 1\n"}),
        outer=write_tree(base / "outer", {"outer.py": "import os\n", "inner/inn.py": "def x():\n    return 1\n"}),
        w019=base / "ws019",
    )
    subprocess.run(["sh", str(shared_case("019-symlink-loops") / "make_workspace.sh"), str(ws.w019)],
                   check=True, capture_output=True)
    ws.initial = [ws.chain, ws.edit, ws.w022, ws.spaces, ws.outer, ws.w019]
    return ws


def answer_client_requests(client: LanguageClient) -> LanguageClient:
    """Handlers for the server-to-client requests the real editors answer (pytest-lsp's client
    does not): lens refreshes and capability registrations, both recorded."""
    client.refreshes = []
    client.registrations = []

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def _refresh(params=None):
        client.refreshes.append(time.monotonic())

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def _register(params: types.RegistrationParams):
        client.registrations.extend(params.registrations)

    return client


def folder(p: Path) -> types.WorkspaceFolder:
    return types.WorkspaceFolder(uri=uri(p), name=p.name)


@pytest_lsp.fixture(scope="module", config=SERVER, params=PROFILES)
async def client(lsp_client: LanguageClient, request, tmp_path_factory):
    ws = build_workspaces(tmp_path_factory.mktemp(f"lc-{request.param}"))
    lsp_client.ws = ws
    lsp_client.profile = request.param
    answer_client_requests(lsp_client)
    lsp_client.set_configuration({"maxHops": 2}, section="orbit")
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities(request.param),
        root_uri=uri(ws.chain),
        workspace_folders=[folder(p) for p in ws.initial],
        initialization_options={"queryTimeoutMs": "soon"},
    ))
    await wait_indexed(lsp_client)
    yield
    await lsp_client.shutdown_session()


# -- helpers ------------------------------------------------------------------------------------
async def until(pred, timeout: float = 5.0, what: str = "", interval: float = 0.05):
    """Poll ``pred`` (a function, possibly async) until it returns a truthy value."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = pred()
        if asyncio.iscoroutine(last):
            last = await last
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or pred}; last: {last!r}")
        await asyncio.sleep(interval)


async def impact(client, path: Path | str, position: tuple[int, int] | None = None) -> dict:
    params: dict = {"textDocument": {"uri": path if isinstance(path, str) else uri(path)}}
    if position is not None:
        params["position"] = {"line": position[0], "character": position[1]}
    return await request(client, "orbit/impact", params)


async def dependents(client, path: Path) -> dict[str, int]:
    return {d["path"]: d["hops"] for d in (await impact(client, path))["dependents"]}


async def status(client) -> dict:
    return await request(client, "orbit/status", {})


def rows(store, root: Path, cypher: str, params: dict | None = None) -> list[list]:
    return store.graph(code_graph_name(root)).ro_query(cypher, params).rows


def file_paths(store, root: Path) -> list[str]:
    """Every File path of the folder's graph, with repetitions (a duplicate shows twice)."""
    return sorted(r[0] for r in rows(store, root, "MATCH (f:File) RETURN f.path"))


def defined(store, root: Path, rel: str) -> set[str]:
    return {r[0] for r in rows(store, root, "MATCH (:File {path: $p})-[:DEFINES]->(s:Symbol) "
                                            "WHERE s.kind <> 'module' RETURN s.name", {"p": rel})}


def reindexed(client, rel: str, root: Path) -> int:
    tag = f"orbit: re-indexed {rel} [{root.name}]"
    return sum(1 for m in client.log_messages if m.message.startswith(tag))


def shown(client, text: str) -> list[str]:
    return [m.message for m in client.messages if text in m.message]


def did_save(client, path_uri: str) -> None:
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=path_uri)))


def change_folders(client, added=(), removed=()) -> None:
    client.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
        event=types.WorkspaceFoldersChangeEvent(added=[folder(p) for p in added],
                                                removed=[folder(p) for p in removed])))


def progress_of(client, name: str) -> list[list]:
    """The progress sequences (begin ... end) whose begin title names folder ``name``."""
    out = []
    for values in client.progress_reports.values():
        if values and isinstance(values[0], types.WorkDoneProgressBegin) and values[0].title == f"orbit: indexing {name}":
            out.append(values)
    return out


# -- initial indexing, multi-root -----------------------------------------------------------------
async def test_initial_index_reports_progress_per_folder(client: LanguageClient):
    for root in client.ws.initial:
        [seq] = progress_of(client, root.name)
        begin, *reports, end = seq
        assert isinstance(begin, types.WorkDoneProgressBegin) and begin.cancellable
        assert reports and all(isinstance(r, types.WorkDoneProgressReport) for r in reports)
        # every phase of the first index is shown, the percentage (of the whole index) only grows
        # (after "starting FalkorDB…" when this index started the server)
        words = ("reading", "parsing", "resolving", "writing")
        messages = [r.message.split(" ")[0] for r in reports if r.message.split(" ")[0] in words]
        assert [m for i, m in enumerate(messages) if i == 0 or messages[i - 1] != m] == list(words), messages
        percents = [r.percentage for r in reports if r.percentage is not None]
        assert percents == sorted(percents) and percents[-1] == 100, percents
        assert isinstance(end, types.WorkDoneProgressEnd) and "files" in end.message, end.message


async def test_multi_root_one_graph_each_file_once(client: LanguageClient, store):
    ws = client.ws
    st = await status(client)
    by_root = {w["root"]: w for w in st["workspaces"]}
    assert set(by_root) == {str(p.resolve()) for p in ws.initial}
    for root in ws.initial:
        w = by_root[str(root.resolve())]
        assert w["graph"] == code_graph_name(root) and w["last_index"]
    assert file_paths(store, ws.chain) == sorted(CHAIN)
    assert file_paths(store, ws.edit) == ["app.py", "lib.py"]
    assert file_paths(store, ws.w022) == ["mod.py", "user.py"]
    assert file_paths(store, ws.spaces) == ["a b.py"]
    # case 019 MUST 2: the real files, each once (the vendor files under one of their names)
    files019 = file_paths(store, ws.w019)
    vendor = [p for p in files019 if p.endswith(("helper.py", "vendor/__init__.py", "vendor_link/__init__.py"))]
    assert sorted(set(files019) - set(vendor)) == sorted(
        ["main.py", "foo/__init__.py", "foo/it.py", "bar/__init__.py", "bar/other.py"])
    assert len(vendor) == 2 and len({p.split("/")[0] for p in vendor}) == 1
    assert len(files019) == len(set(files019)) == 7


# -- settings -----------------------------------------------------------------------------------
async def test_invalid_init_option_is_named_once_and_defaults_apply(client: LanguageClient):
    msgs = shown(client, "queryTimeoutMs")
    assert len(msgs) == 1, client.messages
    assert "invalid setting" in msgs[0] and "default" in msgs[0]


async def test_configuration_section_and_did_change_configuration(client: LanguageClient):
    c0 = client.ws.chain / "c0.py"
    caps = client_capabilities(client.profile).workspace.did_change_configuration
    registered = [r for r in client.registrations if r.method == types.WORKSPACE_DID_CHANGE_CONFIGURATION]
    assert len(registered) == (1 if caps.dynamic_registration else 0)
    # the client's orbit section said maxHops 2
    assert await dependents(client, c0) == {"c1.py": 1, "c2.py": 2}
    # an invalid value: named in a showMessage, the default (4) is used, nothing crashes
    client.set_configuration({"maxHops": "lots"}, section="orbit")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    msg = await until(lambda: shown(client, "maxHops"), what="a message naming maxHops")
    assert len(msg) == 1 and "invalid setting" in msg[0]
    await until(lambda: _deps_equal(client, c0, {"c1.py": 1, "c2.py": 2, "c3.py": 3, "c4.py": 4}),
                what="impact with the default maxHops")
    # pulled again on the next change
    client.set_configuration({"maxHops": 3}, section="orbit")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await until(lambda: _deps_equal(client, c0, {"c1.py": 1, "c2.py": 2, "c3.py": 3}), what="maxHops 3")
    # settings pushed in the notification itself
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"orbit": {"maxHops": 1}}))
    await until(lambda: _deps_equal(client, c0, {"c1.py": 1}), what="maxHops 1 (pushed)")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"orbit": {"maxHops": 2}}))
    await until(lambda: _deps_equal(client, c0, {"c1.py": 1, "c2.py": 2}), what="maxHops 2 (pushed)")
    client.set_configuration({"maxHops": 2}, section="orbit")
    assert len(shown(client, "maxHops")) == 1  # not repeated
    assert len(shown(client, "queryTimeoutMs")) == 1


async def _deps_equal(client, path: Path, expected: dict) -> bool:
    return await dependents(client, path) == expected


# -- re-indexing on save and on changes outside the editor ---------------------------------------------
async def test_did_save_reindexes_once(client: LanguageClient, store):
    ws = client.ws.edit
    lib = ws / "lib.py"
    before = reindexed(client, "lib.py", ws)
    lib.write_text(LIB_V1 + "\n\ndef h():\n    return f()\n")
    did_save(client, uri(lib))  # the watcher sees the same save too
    await until(lambda: defined(store, ws, "lib.py") == {"f", "g", "h"}, 2.0, "lib.h in the graph")
    res = await impact(client, lib, (8, 4))
    assert res["target"]["type"] == "symbol" and res["target"]["qual"] == "lib.h"
    await asyncio.sleep(0.8)  # the watcher's events for the same save have been handled
    assert reindexed(client, "lib.py", ws) == before + 1, [m.message for m in client.log_messages]


async def test_external_write_create_delete_rename(client: LanguageClient, store):
    ws = client.ws.edit
    lib = ws / "lib.py"
    # write (no didSave)
    lib.write_text(lib.read_text() + "\n\ndef k():\n    return 3\n")
    await until(lambda: "k" in defined(store, ws, "lib.py"), 2.5, "lib.k after an external write")
    # create
    (ws / "extra.py").write_text("import lib\n\n\ndef use():\n    return lib.f()\n")
    await until(lambda: _deps_equal(client, lib, {"app.py": 1, "extra.py": 1}), 2.5, "extra.py as a dependent")
    # delete
    (ws / "extra.py").unlink()
    await until(lambda: _deps_equal(client, lib, {"app.py": 1}), 2.5, "extra.py gone")
    assert file_paths(store, ws) == ["app.py", "lib.py"]
    # rename
    (ws / "app.py").rename(ws / "app2.py")
    await until(lambda: file_paths(store, ws) == ["app2.py", "lib.py"], 2.5, "app.py renamed to app2.py")
    assert await dependents(client, lib) == {"app2.py": 1}
    assert rows(store, ws, "MATCH (a:Symbol {qual: 'app2.main'})-[:CALLS]->(b:Symbol {qual: 'lib.f'}) "
                           "RETURN count(*)")[0][0] == 1


async def test_external_directory_changes_and_gitignore(client: LanguageClient, store):
    ws = client.ws.edit
    base = file_paths(store, ws)
    (ws / "gen").mkdir()
    write_tree(ws, {"gen/__init__.py": "", "gen/a.py": "import lib\n"})
    gen = ["gen/__init__.py", "gen/a.py"]
    await until(lambda: file_paths(store, ws) == sorted(base + gen), 2.5, "a new directory's files")
    (ws / "gen").rename(ws / "gen2")
    gen2 = ["gen2/__init__.py", "gen2/a.py"]
    await until(lambda: file_paths(store, ws) == sorted(base + gen2), 2.5, "a renamed directory")
    (ws / ".gitignore").write_text("gen2/\n")
    await until(lambda: file_paths(store, ws) == base, 2.5, "files of a newly ignored directory leave")
    (ws / ".gitignore").unlink()
    await until(lambda: file_paths(store, ws) == sorted(base + gen2), 2.5, "files no longer ignored come back")
    shutil.rmtree(ws / "gen2")
    await until(lambda: file_paths(store, ws) == base, 2.5, "a deleted directory's files leave")


async def test_case_022_atomic_saves_by_rename(client: LanguageClient, store):
    ws = client.ws.w022
    script = shared_case("022-atomic-save-rename") / "save_like_editors.py"
    samples: list[tuple[int, list]] = []
    stop = asyncio.Event()

    async def monitor():  # MUST 2 and 4 the whole time: mod.py exactly once, no temporaries
        while not stop.is_set():
            paths = file_paths(store, ws)
            samples.append((paths.count("mod.py"), [p for p in paths if p in TEMPORARIES]))
            await asyncio.sleep(0.01)

    task = asyncio.ensure_future(monitor())
    try:
        for mode, expected in (("backup-rename", {"alpha", "gamma"}), ("temp-rename", {"alpha", "delta"})):
            before = reindexed(client, "mod.py", ws)
            proc = await asyncio.create_subprocess_exec(sys.executable, str(script), str(ws), mode)
            assert await asyncio.wait_for(proc.wait(), 10) == 0
            await until(lambda: defined(store, ws, "mod.py") == expected, 2.0, f"mod.py symbols after {mode}")
            assert file_paths(store, ws) == ["mod.py", "user.py"]
            assert rows(store, ws, "MATCH (:File {path: 'user.py'})-[:IMPORTS]->(:File {path: 'mod.py'}) "
                                   "RETURN count(*)")[0][0] == 1
            assert rows(store, ws, "MATCH (:Symbol {qual: 'user.go'})-[:CALLS]->(:Symbol {qual: 'mod.alpha'}) "
                                   "RETURN count(*)")[0][0] == 1
            assert await dependents(client, ws / "mod.py") == {"user.py": 1}
            await asyncio.sleep(0.8)  # trailing events of the same save
            assert reindexed(client, "mod.py", ws) == before + 1, [m.message for m in client.log_messages]
            assert defined(store, ws, "mod.py") == expected
    finally:
        stop.set()
        await task
    assert samples and all(n == 1 and not tmp for n, tmp in samples), [s for s in samples if s != (1, [])][:5]


async def test_case_019_watcher_does_not_follow_symlink_loops(client: LanguageClient, store):
    ws = client.ws.w019
    files = file_paths(store, ws)
    before = reindexed(client, "foo/it.py", ws)
    with open(ws / "foo" / "it.py", "a") as fh:
        fh.write("\n\ndef more():\n    return 2\n")
    await until(lambda: "more" in defined(store, ws, "foo/it.py"), 2.5, "foo/it.py re-indexed")
    await asyncio.sleep(0.6)
    assert reindexed(client, "foo/it.py", ws) == before + 1
    os.utime(ws / "foo" / "it.py")  # touch: same content
    await asyncio.sleep(0.6)
    assert reindexed(client, "foo/it.py", ws) == before + 1
    looped = [m.message for m in client.log_messages if "ws019" in m.message and
              any(seg in m.message for seg in ("foo/bar/", "bar/foo/", "lib/up/", "self/", "outside/"))]
    assert not looped
    (ws / "bar" / "new.py").write_text("def n():\n    return 1\n")
    await until(lambda: "bar/new.py" in file_paths(store, ws), 2.5, "bar/new.py indexed")
    await asyncio.sleep(0.4)
    assert file_paths(store, ws) == sorted(files + ["bar/new.py"])
    assert await dependents(client, ws / "foo" / "it.py") == {"bar/other.py": 1, "main.py": 1}


# -- URIs, params ------------------------------------------------------------------------------------
async def test_uri_spellings_map_to_one_file(client: LanguageClient, store):
    ws = client.ws.spaces
    path = ws / "a b.py"
    raw = "file://" + str(path)
    spellings = [
        uri(path),                                              # file:///.../my%20dir/a%20b.py
        raw,                                                    # unencoded spaces
        uri(path).replace("a%20b.py", "%61%20%62%2Epy"),        # every character encoded
        uri(path).replace("/my%20dir/", "/my%20dir/./"),        # a dot segment
        "file://localhost" + uri(path)[len("file://"):],        # an explicit local host
    ]
    assert " " in raw and "%20" in spellings[0]
    for i, u in enumerate(spellings):
        with open(path, "a") as fh:
            fh.write(f"\n\ndef s{i}():\n    return {i}\n")
        did_save(client, u)
        await until(lambda: f"s{i}" in defined(store, ws, "a b.py"), 2.5, f"save via {u}")
        assert file_paths(store, ws) == ["a b.py"], u
        res = await impact(client, u)
        assert res["target"]["path"] == "a b.py", u
        assert res["target"]["uri"] == u  # echoed as the client spelled it (issue 20 item 18)


@pytest.mark.parametrize("method,params", [
    ("orbit/impact", [1, 2]),
    ("orbit/impact", {"textDocument": {"uri": "untitled:Untitled-1"}}),
    ("orbit/impact", {"textDocument": {"uri": "file:///nowhere/x.py"}}),
    ("orbit/impact", {"textDocument": {"uri": "file://"}}),
    ("orbit/impact", {"textDocument": {}, "position": {"line": 0, "character": 0}}),
    ("orbit/impact", {"textDocument": {"uri": "file:///x.py"}, "position": {"line": 1.5, "character": 0}}),
    ("orbit/impact", {"textDocument": {"uri": "file:///x.py"}, "position": {"line": True, "character": 0}}),
    ("orbit/noSuchMethod", {}),
    ("orbit/status", "nope"),
])
async def test_bad_requests_get_errors_not_hangs(client: LanguageClient, method, params):
    with pytest.raises(Exception) as ei:
        await request(client, method, params, timeout=5)
    assert not isinstance(ei.value, asyncio.TimeoutError)
    if method == "orbit/noSuchMethod":
        assert "MethodNotFound" in type(ei.value).__name__ or "-32601" in str(ei.value), repr(ei.value)


async def test_unknown_notification_is_ignored_and_position_past_the_end_answers(client: LanguageClient):
    client.protocol.notify("orbit/noSuchNotification", {"x": 1})
    lib = client.ws.chain / "c0.py"
    res = await impact(client, lib, (999, 999))
    assert res["target"]["type"] == "file" and res["target"]["path"] == "c0.py"
    assert (await status(client))["falkordb"]["online"] is True


# -- folders added and removed at run time ---------------------------------------------------------
async def test_nested_folder_added_then_removed(client: LanguageClient, store):
    outer, inner = client.ws.outer, client.ws.outer / "inner"
    assert file_paths(store, outer) == ["inner/inn.py", "outer.py"]
    change_folders(client, added=[inner])
    await until(lambda: file_paths(store, outer) == ["outer.py"], 5.0, "outer graph without the nested folder")
    await until(lambda: _status_has(client, inner, indexed=True), 5.0, "nested folder indexed")
    assert file_paths(store, inner) == ["inn.py"]
    # a change in the nested folder goes to its own graph only
    (inner / "inn.py").write_text("def x():\n    return 1\n\n\ndef y():\n    return 2\n")
    did_save(client, uri(inner / "inn.py"))
    await until(lambda: defined(store, inner, "inn.py") == {"x", "y"}, 2.5, "inn.py re-indexed in its graph")
    assert file_paths(store, outer) == ["outer.py"]
    change_folders(client, removed=[inner])
    await until(lambda: _status_has(client, inner, indexed=None), 5.0, "nested folder gone from status")
    await until(lambda: file_paths(store, outer) == ["inner/inn.py", "outer.py"], 5.0, "outer takes its files back")
    assert defined(store, outer, "inner/inn.py") == {"x", "y"}


async def _status_has(client, root: Path, indexed: bool | None) -> bool:
    """indexed None: the folder is not served; True: served and indexed."""
    roots = {w["root"]: w for w in (await status(client))["workspaces"]}
    w = roots.get(str(root.resolve()))
    return w is None if indexed is None else bool(w and w["last_index"])


async def test_large_folder_added_event_loop_stays_responsive_then_removed(client: LanguageClient, tmp_path_factory):
    if client.profile != PROFILES[0]:
        pytest.skip("profile-independent and slow: run under one profile")
    big = tmp_path_factory.mktemp("big") / "big"
    files = {}
    for i in range(2000):
        pkg = f"pkg{i // 100}"
        files[f"{pkg}/__init__.py"] = ""
        prev = f"from {pkg} import m{i - 1}\n" if i % 100 else "import os\n"
        files[f"{pkg}/m{i}.py"] = prev + f"\n\ndef f{i}():\n    return {i}\n"
    write_tree(big, files)
    change_folders(client, added=[big])
    latencies, seen_indexing = [], False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        t = time.monotonic()
        st = await request(client, "orbit/status", {}, timeout=5)
        latencies.append(time.monotonic() - t)
        w = next((w for w in st["workspaces"] if w["root"] == str(big.resolve())), None)
        if w is not None and not w["last_index"]:
            seen_indexing = True
        if w is not None and w["last_index"]:
            break
        await asyncio.sleep(0.05)
    assert w is not None and w["last_index"] and w["files"] == 2020, w
    assert seen_indexing, "status never answered while the folder was being indexed"
    assert max(latencies) < 1.0, sorted(latencies)[-5:]
    [seq] = await until(lambda: [s for s in progress_of(client, "big") if isinstance(s[-1], types.WorkDoneProgressEnd)],
                        5.0, "the end of the big folder's progress")
    assert "2020 files" in seq[-1].message, seq[-1].message
    assert all(isinstance(r, types.WorkDoneProgressReport) for r in seq[1:-1]) and len(seq) > 3
    change_folders(client, removed=[big])
    await until(lambda: _status_has(client, big, indexed=None), 5.0, "big folder gone from status")


async def test_folder_removed_changed_and_added_again_parses_only_the_change(client: LanguageClient, store):
    ws = client.ws.chain
    change_folders(client, removed=[ws])
    await until(lambda: _status_has(client, ws, indexed=None), 5.0, "chain gone from status")
    with open(ws / "c4.py", "a") as fh:
        fh.write("\n\ndef tail():\n    return 4\n")
    n = len(progress_of(client, ws.name))
    change_folders(client, added=[ws])
    seqs = await until(lambda: [s for s in progress_of(client, ws.name)[n:] if isinstance(s[-1], types.WorkDoneProgressEnd)],
                       10.0, "the re-open's progress")
    assert seqs[0][-1].message.endswith("; 1 parsed (incremental)"), seqs[0][-1].message
    assert defined(store, ws, "c4.py") == {"tail"}
    assert await dependents(client, ws / "c3.py") == {"c4.py": 1}


async def test_reopen_is_incremental(client: LanguageClient):
    """A second server on a folder the first one indexed parses nothing."""
    if client.profile != PROFILES[0]:
        pytest.skip("profile-independent and costs a server start: run under one profile")
    ws = client.ws.chain
    second = answer_client_requests(await SERVER.start())
    try:
        await asyncio.wait_for(start_session(second, ws, PROFILES[1]), 30)
        seq = await until(lambda: [s for s in progress_of(second, ws.name) if isinstance(s[-1], types.WorkDoneProgressEnd)],
                          5.0, "the end of the second server's progress")
        assert seq[0][-1].message.endswith("; 0 parsed (unchanged)"), seq[0][-1].message
        # phases with nothing to do are not reported as "parsing 0/0 files"
        messages = [r.message for r in seq[0][1:-1] if isinstance(r, types.WorkDoneProgressReport)]
        assert not any(" 0/0 " in (m or "") for m in messages), messages
    finally:
        await asyncio.wait_for(second.shutdown_session(), 10)
        await second.stop()


# -- FalkorDB offline mid-session ------------------------------------------------------------------
@pytest_asyncio.fixture(scope="module", loop_scope="module", params=PROFILES)
async def offline(request, tmp_path_factory):
    base = tmp_path_factory.mktemp(f"off-{request.param}")
    fdb = ExternalFalkorDB(base / "falkordb").start()
    ws = write_tree(base / "chain", CHAIN)
    client = answer_client_requests(
        await server_config({"ORBIT_FALKORDB_URL": fdb.url, "ORBIT_QUERY_TIMEOUT_MS": "1000",
                             "ORBIT_ROW_CAP": "many"}).start())
    try:
        await asyncio.wait_for(start_session(client, ws, request.param), 30)
        yield SimpleNamespace(client=client, fdb=fdb, ws=ws)
    finally:
        try:
            if fdb.proc is None:
                fdb.start()
            await asyncio.wait_for(client.shutdown_session(), 15)
        finally:
            await client.stop()
            fdb.kill()


async def test_falkordb_offline_then_back(offline):
    client, fdb, ws = offline.client, offline.fdb, offline.ws
    c0 = ws / "c0.py"
    full = {"c1.py": 1, "c2.py": 2, "c3.py": 3, "c4.py": 4}
    assert await dependents(client, c0) == full
    assert (await status(client))["falkordb"]["mode"] == "external"
    # an invalid environment variable is named and ignored, it does not stop the server
    [bad_env] = shown(client, "ORBIT_ROW_CAP")
    assert "invalid setting" in bad_env and "default" in bad_env
    caps = client.capabilities
    lensing = bool(caps and caps.text_document and caps.text_document.code_lens)
    made = await asyncio.wait_for(client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri(c0)))), 10) if lensing else []
    fdb.kill()
    t = time.monotonic()
    for _ in range(3):
        with pytest.raises(Exception) as ei:
            await impact(client, c0, (0, 5))
        assert "FalkorDB offline" in str(ei.value), repr(ei.value)
    if lensing:
        with pytest.raises(Exception) as ei:
            await asyncio.wait_for(client.text_document_code_lens_async(types.CodeLensParams(
                text_document=types.TextDocumentIdentifier(uri=uri(c0)))), 10)
        assert "FalkorDB offline" in str(ei.value), repr(ei.value)
        for lens in made:  # lenses made before: resolving them says so too, at once
            with pytest.raises(Exception) as ei:
                await asyncio.wait_for(client.code_lens_resolve_async(lens), 10)
            assert "FalkorDB offline" in str(ei.value), repr(ei.value)
    assert time.monotonic() - t < 5, "requests waited on a dead server"
    st = await status(client)
    assert st["falkordb"]["online"] is False and "FalkorDB offline" in st["falkordb"]["error"]
    assert len(shown(client, "FalkorDB offline")) == 1, [m.message for m in client.messages]
    # a change while offline is picked up after recovery
    (ws / "c5.py").write_text("import c4\n")
    fdb.start()
    await until(lambda: shown(client, "FalkorDB is back"), 15.0, "the server to say FalkorDB is back")
    assert await dependents(client, c0) == {**full}  # maxHops 4: c5 is 5 hops away
    assert await dependents(client, ws / "c4.py") == {"c5.py": 1}
    assert (await status(client))["falkordb"]["online"] is True
    assert len(shown(client, "FalkorDB offline")) == 1
    assert len(shown(client, "FalkorDB is back")) == 1


async def test_falkordb_hung_requests_do_not_hang(offline):
    """A FalkorDB that accepts connections but never answers (SIGSTOP): requests get an error
    after the query timeout (+ a margin), then the server recovers when it answers again."""
    import signal

    client, fdb, ws = offline.client, offline.fdb, offline.ws
    await until(lambda: _online(client), 15.0, "online before the test")
    n_off = len(shown(client, "FalkorDB offline"))
    n_back = len(shown(client, "FalkorDB is back"))
    os.kill(fdb.proc.pid, signal.SIGSTOP)
    try:
        t = time.monotonic()
        with pytest.raises(Exception) as ei:
            # a question not asked before (answers already given are served from the server's
            # cache while the graph is unchanged and FalkorDB is not known to be offline)
            await client.workspace_symbol_async(types.WorkspaceSymbolParams(query=f"q{time.time_ns()}"))
        assert "FalkorDB offline" in str(ei.value), repr(ei.value)
        assert time.monotonic() - t < 6
        with pytest.raises(Exception):  # once known offline, every graph request is refused
            await impact(client, ws / "c0.py")
        assert len(shown(client, "FalkorDB offline")) == n_off + 1
    finally:
        os.kill(fdb.proc.pid, signal.SIGCONT)
    await until(lambda: len(shown(client, "FalkorDB is back")) == n_back + 1, 20.0, "recovery after SIGCONT")
    assert (await dependents(client, ws / "c4.py")) == {"c5.py": 1}


async def _online(client) -> bool:
    return (await status(client))["falkordb"]["online"]
