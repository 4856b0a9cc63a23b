"""Language-server benchmark: a real ``orbit-lsp`` process driven over stdio by pygls's client.

    python -m bench.run lsp [--corpus stdlib|PATH] [--n 20] [--saves 20]
    python -m bench.run lsp [--corpus stdlib|PATH] --first-lenses [--open REL]

Measures, on a server serving the corpus (a copy, see ``bench.run.prepare_corpus``):
- time from ``initialize`` to the first code lenses of a file opened right after ``initialized``
  ("indexing…" while the folder's first index runs) and to its lenses with counts (cold: graph
  and cache removed first; then a second server re-opening the same folder); with
  ``--first-lenses [--open REL]`` only these;
- save -> fresh lenses: a function is appended to a file and ``didSave`` sent; the time until a
  code-lens request shows the new function's lens and the lenses on the screen that shows it
  are resolved (p50/p95; lenses are asked for when the server sends
  ``workspace/codeLens/refresh``, as an editor does, else every 50 ms), the file restored
  afterwards;
- latency of ``textDocument/codeLens`` alone, of it followed by ``codeLens/resolve`` of the
  lenses on the first screen (``SCREEN_LINES``, sent at once: what an editor shows on opening
  a file), and of it followed by resolving every lens (Neovim's way; no target),
  ``textDocument/hover``, ``prepareCallHierarchy`` +
  ``callHierarchy/incomingCalls`` and ``orbit/impact`` on the most imported files and the most
  called functions (p50/p95; ``orbit/impact`` as editors get it, at most ``maxDependents``
  listed, then once more listing every dependent, for the record), each target asked once, its
  file open in the client (``didOpen``
  before, ``didClose`` after, untimed, as an editor has it), after the diagnostics the server
  publishes once the index is done have settled (no client-side garbage collection meanwhile);
  the notes name the three slowest targets of each kind (marked when one of FalkorDB's snapshots,
  read from its log, overlapped them: its fork stalls the server) and the snapshots taken
  while the requests were timed;
- the server's RSS (now and peak, from /proc; FalkorDB excluded: it is another process), and
  that of its selection process (``server.worker``, a child of the server computing the tests
  lenses) apart.
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import gc
import os
import re
import sys
import time
from pathlib import Path

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.client import LanguageClient
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import JsonRPCResponseMessage
from pygls.uris import from_fs_path

from bench.run import Report, Table, child_pids, code_graph_name, ms, open_store, pct, proc_status
from orbit_lsp.graph.embedded import EmbeddedPaths

LENS_TARGET_MS = 10.0
SAVE_TARGET_MS = 50.0
RSS_TARGET_MIB = 300
SCREEN_LINES = 60  # the lines an editor window shows: the lenses an editor resolves first
SHOWN = f"codeLens + resolve of the lenses on screen (first {SCREEN_LINES} lines)"
EVERY = "codeLens + resolve of every lens (as Neovim does)"
LISTED_ALL = "orbit/impact listing every dependent (maxDependents 100,000)"
NO_TARGET = {EVERY, LISTED_ALL}  # for the record: Neovim shows each lens as it is resolved; editors
# get orbit/impact with the default orbit.maxDependents


def _proc_mib(pid: int) -> tuple[float | None, float | None]:
    """RSS now and peak (MiB) of a process."""
    st = proc_status(pid)
    return tuple(st[k] / 1024 if k in st else None for k in ("VmRSS", "VmHWM"))


def _worker_mib(pid: int) -> tuple[float | None, float | None]:
    """RSS now and peak (MiB) of the server's selection process (its child running
    ``orbit_lsp.server.worker``), or (None, None) when it has none (no tests lens computed)."""
    for child in child_pids(pid):
        try:
            if b"orbit_lsp.server.worker" in open(f"/proc/{child}/cmdline", "rb").read():
                return _proc_mib(child)
        except OSError:
            continue
    return None, None


class _PlainResultProtocol(LanguageServerProtocol):
    """Results stay plain JSON, as an editor's JSON-RPC layer gives them. pygls's client would
    structure them: lsprotocol objects through cattrs (~30 µs each: 9 ms for the 300 lenses of
    a large file) and, for ``orbit/*``, a freshly made namedtuple class per object (more than
    the server's whole answer on 1,400 dependents) — time spent in this Python client, which
    an editor does not spend and the latencies measured here should not contain."""

    def get_message_type(self, method: str):
        # lenses are sent back to be resolved as the plain JSON they came as
        return None if method == types.CODE_LENS_RESOLVE else super().get_message_type(method)

    def structure_message(self, data):
        # called for every JSON object of a message (``json.loads``'s object_hook): the
        # objects inside a result are left alone at once
        if "jsonrpc" not in data:
            return data
        if "id" in data and "result" in data and "method" not in data:
            self._result_types.pop(data["id"], None)
            return JsonRPCResponseMessage(id=data["id"], jsonrpc=data["jsonrpc"], result=data["result"])
        return super().structure_message(data)


class _Client(LanguageClient):
    def __init__(self):
        super().__init__("orbit-bench", "1", protocol_cls=_PlainResultProtocol)
        self.refreshes = 0
        self.failures: list[str] = []  # requests the server answered with an error (``_resolve``)
        self.tests_titles = collections.Counter()  # tests lenses resolved: "counting…", "unknown", "count"

        self.refreshed = asyncio.Event()

        @self.feature(types.WORKSPACE_CODE_LENS_REFRESH)
        def _refresh(params):  # noqa: ARG001
            self.refreshes += 1
            self.refreshed.set()

        @self.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def _progress(params):  # noqa: ARG001
            return None

        @self.feature(types.WORKSPACE_CONFIGURATION)
        def _configuration(params):  # no settings, as an editor without an ``orbit`` section answers
            return [None for _ in params.items]

        self.last_diagnostics = 0.0  # perf_counter of the last publishDiagnostics

        @self.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def _diagnostics(params):  # noqa: ARG001
            self.last_diagnostics = time.perf_counter()


CAPS = types.ClientCapabilities(
    general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf16]),
    window=types.WindowClientCapabilities(work_done_progress=True),
    workspace=types.WorkspaceClientCapabilities(code_lens=types.CodeLensWorkspaceClientCapabilities(refresh_support=True),
                                                configuration=True),
    text_document=types.TextDocumentClientCapabilities(
        hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown]),
        code_lens=types.CodeLensClientCapabilities(),
        synchronization=types.TextDocumentSyncClientCapabilities(did_save=True),
        call_hierarchy=types.CallHierarchyClientCapabilities()),
)


async def _drain(stream: asyncio.StreamReader, tail: collections.deque) -> None:
    """Read ``stream`` to its end, keeping its last lines in ``tail``."""
    while line := await stream.readline():
        tail.append(line.decode("utf-8", "replace").rstrip())


async def _impact(client: _Client, uri: str, rel: str, sizes: list | None = None) -> float | None:
    """Seconds ``orbit/impact`` of a file took, None when it was answered with an error
    (recorded in ``client.failures``, not fatal, as in ``_resolve``); ``sizes`` gains (rel,
    dependents listed, dependents in all)."""
    t = time.perf_counter()
    try:
        res = await client.protocol.send_request_async("orbit/impact", {"textDocument": {"uri": uri}})
    except JsonRpcException as exc:
        client.failures.append(f"orbit/impact of {rel}: {str(exc)[:160]}")
        return None
    took = time.perf_counter() - t
    if sizes is not None:
        listed = len(res["dependents"])
        sizes.append((rel, listed, (res.get("dependentsTotal") or {}).get("all", listed)))
    return took


async def _start(root: Path, env: dict) -> tuple[_Client, float]:
    client = _Client()
    await client.start_io(sys.executable, "-m", "orbit_lsp", env=env)
    # pygls pipes the server's stderr and never reads it: drained here, or a server logging
    # 64 KB (tracebacks of failing requests) blocks in its logger and the benchmark hangs
    client.stderr_tail = collections.deque(maxlen=200)
    client.stderr_task = asyncio.create_task(_drain(client._server.stderr, client.stderr_tail))
    t0 = time.perf_counter()
    await client.initialize_async(types.InitializeParams(
        capabilities=CAPS, root_uri=from_fs_path(str(root)),
        workspace_folders=[types.WorkspaceFolder(uri=from_fs_path(str(root)), name=root.name)]))
    client.init_s = time.perf_counter() - t0  # the server's start-up: its answer to initialize
    client.initialized(types.InitializedParams())
    return client, t0


async def _lenses(client: _Client, uri: str):
    """The file's code lenses; [] (the failure recorded, as in ``_resolve``) when the server
    answers with an error."""
    try:
        return await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    except JsonRpcException as exc:
        client.failures.append(f"codeLens of {uri.rpartition('/')[2]}: {str(exc)[:160]}")
        return []


async def _resolve(client: _Client, lenses: list, first: int = 0) -> list:
    """``codeLens/resolve`` of the lenses starting on lines ``first`` .. ``first +
    SCREEN_LINES - 1`` (all of them when ``first`` is None), sent at once as an editor does."""
    if first is not None:
        lenses = [x for x in lenses if first <= x["range"]["start"]["line"] < first + SCREEN_LINES]
    got = await asyncio.gather(*(client.protocol.send_request_async("codeLens/resolve", x) for x in lenses),
                               return_exceptions=True)
    # a resolve the server answers with an error (e.g. "no answer within 7 s") is recorded and
    # reported, not fatal: the other measures of the run still stand
    client.failures += [f"codeLens/resolve of line {x['range']['start']['line'] + 1}: {str(g)[:160]}"
                        for x, g in zip(lenses, got) if isinstance(g, Exception)]
    done = [g for g in got if not isinstance(g, Exception)]
    for g in done:
        if g["data"]["target"].get("type") == "tests":
            title = g["command"]["title"]
            client.tests_titles["counting…" if title == COUNTING else "unknown" if title.startswith("tests unknown")
                                else "count"] += 1
    return done


COUNTING = "tests: counting…"  # a tests lens whose selection was not known in time (``server.lenses``)
INDEXING = "indexing…"  # the title of a lens whose counts are not final (the folder's first index runs)


def _file_title(shown: list) -> str | None:
    return next((x["command"]["title"] for x in shown if x["data"]["target"]["type"] == "file"), None)


async def _first_lenses(client: _Client, path: Path, uri: str, t0: float, timeout: float = 900) -> dict:
    """What an editor opening ``path`` right after ``initialized`` sees: ``didOpen``, then the
    file's lenses, those on the first screen resolved. Seconds from ``t0`` (``initialize`` sent)
    to the first lenses (``first_s``; their file lens's title: ``first_title``, "indexing…"
    while the folder's first index runs) and to lenses with counts (``counted_s``,
    ``counted_title``): asked again each time the server sends ``workspace/codeLens/refresh``,
    as an editor does (and every 5 s, should a refresh be missed). Then the tests lenses on
    the first screen are resolved: ``tests_s``, ``tests_lenses``, ``tests_failed`` (errors)."""
    _open(client, path, uri)
    deadline = time.perf_counter() + timeout
    out: dict = {}
    while True:
        client.refreshed.clear()
        lenses = await _lenses(client, uri) or []
        # the callers/dependents lenses on screen; then the tests lenses ("N tests reach this",
        # slower: recorded apart, failures counted)
        counts = [x for x in lenses if x["data"]["target"]["type"] != "tests"]
        try:
            shown = await _resolve(client, counts) if counts else []
        except Exception as exc:  # noqa: BLE001 - e.g. "too slow": recorded, asked again
            out.setdefault("errors", []).append(str(exc)[:200])
            if time.perf_counter() > deadline:
                raise
            await asyncio.sleep(0.5)
            continue
        title = _file_title(shown)
        if title is not None and "first_s" not in out:
            out["first_s"], out["first_title"] = time.perf_counter() - t0, title
        if title is not None and title != INDEXING:
            out["counted_s"], out["counted_title"] = time.perf_counter() - t0, title
            tests = [x for x in lenses if x["data"]["target"]["type"] == "tests"
                     and x["range"]["start"]["line"] < SCREEN_LINES]
            got = await asyncio.gather(*(client.protocol.send_request_async("codeLens/resolve", x) for x in tests),
                                       return_exceptions=True)
            out["tests_lenses"] = len(tests)
            out["tests_failed"] = [str(g)[:200] for g in got if isinstance(g, BaseException)]
            out["tests_s"] = time.perf_counter() - t0
            return out
        if time.perf_counter() > deadline:
            raise TimeoutError(f"no counted lenses before the timeout ({out})")
        if title is None:  # (before the folders are served a request waits for them)
            await asyncio.sleep(0.05)
            continue
        try:
            await asyncio.wait_for(client.refreshed.wait(), 5.0)
        except asyncio.TimeoutError:
            pass


async def _wait_lenses(client: _Client, uri: str, timeout: float = 600) -> None:
    """Until the file's lenses have counts (not "indexing…")."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        try:
            lenses = await _lenses(client, uri)
            if lenses and _file_title(await _resolve(client, lenses)) not in (None, INDEXING):
                return
        except Exception:  # noqa: BLE001 - "not indexed yet" answers while indexing
            pass
        await asyncio.sleep(0.05)
    raise TimeoutError("no code lenses before the timeout")


def _open(client: _Client, path: Path, uri: str) -> None:
    """``didOpen`` of a file, as an editor sends before asking anything about it."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))


def _close(client: _Client, uri: str) -> None:
    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))


async def _settle(client: _Client, quiet: float = 1.0, first: float = 30, timeout: float = 120) -> None:
    """Wait for the diagnostics the server computes and publishes after an index (the import
    cycles and unresolved imports of the whole folder: requests timed meanwhile would measure
    that background work too): the first of them (at most ``first`` seconds: a folder without
    problems has none), then ``quiet`` seconds without another."""
    start = time.perf_counter()
    while not client.last_diagnostics and time.perf_counter() - start < first:
        await asyncio.sleep(0.05)
    while time.perf_counter() - start < timeout and time.perf_counter() - client.last_diagnostics < quiet:
        await asyncio.sleep(0.1)


async def _stop(client: _Client) -> None:
    try:
        await asyncio.wait_for(client.shutdown_async(None), 30)
        client.exit(None)
    except Exception:  # noqa: BLE001
        pass
    await client.stop()


_SERVER_LINE = re.compile(r"^\d+:M (\d+ \w+ \d+ [\d:.]+) [*#-] (.*)$")  # what the server's main process logs
_SNAPSHOT_ENDS = ("Background saving terminated", "Background saving error", "User requested shutdown",
                  "Server initialized")  # a snapshot the server's stop killed ends with its stop


def _snapshots(logfile: Path) -> list[tuple[float, float | None]]:
    """FalkorDB's snapshots (``BGSAVE``: a fork, then a child writing every graph) as wall-clock
    (start, end) pairs read from its log (``redis-server --logfile``; times in local time, ms):
    one ends when the server says it ended or failed, or when the server stops or starts again
    (a stop kills the child); end None when the log does not show it ending. Empty when the log
    cannot be read."""
    out: list[tuple[float, float | None]] = []
    try:
        lines = logfile.read_text(errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        m = _SERVER_LINE.match(line)
        if not m:
            continue
        message = m.group(2)
        if message.startswith("Background saving started"):
            out.append((_log_time(m.group(1)), None))
        elif message.startswith(_SNAPSHOT_ENDS) and out and out[-1][1] is None:
            out[-1] = (out[-1][0], _log_time(m.group(1)))
    return out


def _log_time(text: str) -> float:
    """A FalkorDB log line's time (``04 Dec 2026 14:27:30.656``, local time) as ``time.time()``."""
    return datetime.datetime.strptime(text, "%d %b %Y %H:%M:%S.%f").timestamp()


def _during_snapshots(span: tuple[float, float], snapshots: list[tuple[float, float | None]]) -> bool:
    """Whether a request's wall-clock span overlaps one of ``_snapshots`` (an unended one lasts
    to the end of time)."""
    start, end = span
    return any(s <= end and (e is None or e >= start) for s, e in snapshots)


def _timed(samples: list, t: float) -> None:
    samples.append(time.perf_counter() - t)


def _cold_folder(corpus: Path, settings) -> tuple[dict, object, object]:
    """Make ``corpus`` cold for a language server started with the returned environment (the
    benchmark's data dir, embedded FalkorDB): its graph and its cache are removed. Returns
    ``(env, store, graph)``; the caller closes the store."""
    env = dict(os.environ, ORBIT_DATA_DIR=str(settings.data_dir))
    env.pop("ORBIT_FALKORDB_URL", None)
    store = open_store(settings)
    graph = store.graph(code_graph_name(corpus))
    graph.delete()
    cache = Path(settings.data_dir) / "cache" / f"{graph.name}.sqlite"
    if cache.exists():
        cache.unlink()
    return env, store, graph


async def _measure(corpus: Path, settings, n: int, saves: int, live: list) -> dict:
    env, store, graph = _cold_folder(corpus, settings)
    probe = corpus / "os.py" if (corpus / "os.py").exists() else next(corpus.rglob("*.py"))
    probe_uri = from_fs_path(str(probe))
    out: dict = {}

    client, t0 = await _start(corpus, env)
    live.append(client)
    first = await _first_lenses(client, probe, probe_uri, t0)
    _close(client, probe_uri)
    out["cold_init_to_first_lenses_s"], out["cold_init_to_lenses_s"] = first["first_s"], first["counted_s"]
    await _settle(client)
    pid = client._server.pid if client._server else None

    # targets
    imported = [r[0] for r in graph.ro_query(
        "MATCH (d:File)-[:IMPORTS]->(f:File) RETURN f.path, count(d) AS c ORDER BY c DESC, f.path LIMIT $n",
        {"n": n + 1}).rows]
    called = graph.ro_query(
        "MATCH (c:Symbol)-[:CALLS]->(s:Symbol) WHERE s.kind IN ['function', 'method'] "
        "RETURN s.file, s.line, s.col, count(c) AS k ORDER BY k DESC, s.file LIMIT $n", {"n": n + 1}).rows
    # the last of each list warms this client up and is not timed: the first use of a request
    # type makes cattrs generate its (un)structuring code here, a one-off cost of several ms
    imported, warm_file = imported[:n], imported[n:]
    called, warm_call = called[:n], called[n:]

    def pos_of(path: Path, line1: int, col: int) -> types.Position:
        text = path.read_bytes().split(b"\n")[line1 - 1]
        prefix = text[:col].decode("utf-8", "replace")
        return types.Position(line=line1 - 1, character=len(prefix.encode("utf-16-le")) // 2 + 1)

    # this client's own garbage collections (a full one takes tens of ms once it holds a few
    # large answers) are not the server's latency: none while timing
    gc.disable()
    lat: dict[str, list[float]] = {"codeLens": [], SHOWN: [], EVERY: [], "hover": [],
                                   "callHierarchy (prepare+incoming)": [], "orbit/impact": []}
    what: dict[str, list[str]] = {k: [] for k in lat}  # the target of each sample
    spans: dict[str, list[tuple[float, float]]] = {k: [] for k in lat}  # wall clock (start, end) of each
    sizes: list[tuple[str, int, int]] = []  # (file, dependents listed, dependents in all) of each impact
    for i, rel in enumerate(warm_file + imported):
        timed = i >= len(warm_file)
        uri = from_fs_path(str(corpus / rel))
        _open(client, corpus / rel, uri)
        began = time.time()  # the requests of one file share its span (for ``_during_snapshots``)
        t = time.perf_counter()
        lenses = await _lenses(client, uri)
        lens_s = time.perf_counter() - t
        await _resolve(client, lenses)
        shown_s = time.perf_counter() - t
        # every lens resolved: the codeLens time above (a second request would be answered
        # from the server's cache) plus resolving all of them (symbol counts are never cached)
        t = time.perf_counter()
        await _resolve(client, lenses, None)
        every_s = lens_s + time.perf_counter() - t
        impact_s = await _impact(client, uri, rel, sizes if timed else None)
        _close(client, uri)
        if timed:
            for kind, value in (("codeLens", lens_s), (SHOWN, shown_s), (EVERY, every_s), ("orbit/impact", impact_s)):
                if value is not None:
                    lat[kind].append(value)
                    what[kind].append(rel)
                    spans[kind].append((began, time.time()))
    # the same impacts with every dependent listed (the size of the answer is most of its time)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"orbit": {"maxDependents": 100_000}}))
    lat[LISTED_ALL], what[LISTED_ALL] = [], []
    for rel in imported:
        uri = from_fs_path(str(corpus / rel))
        _open(client, corpus / rel, uri)
        value = await _impact(client, uri, rel)
        _close(client, uri)
        if value is not None:
            lat[LISTED_ALL].append(value)
            what[LISTED_ALL].append(rel)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"orbit": {}}))
    out["impact_sizes"] = sizes
    for i, (file, line, col, _k) in enumerate(warm_call + called):
        timed = i >= len(warm_call)
        path = corpus / file
        uri = from_fs_path(str(path))
        pos = pos_of(path, line, col)
        doc = types.TextDocumentIdentifier(uri=uri)
        _open(client, path, uri)
        hover_s = hier_s = hover_span = None  # None: answered with an error (recorded and reported, as in ``_resolve``)
        began = time.time()
        t = time.perf_counter()
        try:
            await client.text_document_hover_async(types.HoverParams(text_document=doc, position=pos))
            hover_s = time.perf_counter() - t
            hover_span = (began, time.time())
        except JsonRpcException as exc:
            client.failures.append(f"hover at {file}:{line}: {str(exc)[:160]}")
        began = time.time()
        t = time.perf_counter()
        try:
            items = await client.text_document_prepare_call_hierarchy_async(
                types.CallHierarchyPrepareParams(text_document=doc, position=pos))
            hier_s = time.perf_counter() - t
            if items:  # the item as the server sent it (plain JSON, data included)
                params = client.protocol._converter.structure({"item": items[0]}, types.CallHierarchyIncomingCallsParams)
                t = time.perf_counter()
                await client.call_hierarchy_incoming_calls_async(params)
                hier_s += time.perf_counter() - t
        except JsonRpcException as exc:
            client.failures.append(f"call hierarchy at {file}:{line}: {str(exc)[:160]}")
            hier_s = None
        hier_span = (began, time.time())
        _close(client, uri)
        if timed:
            for kind, value, span in (("hover", hover_s, hover_span),
                                      ("callHierarchy (prepare+incoming)", hier_s, hier_span)):
                if value is not None:
                    lat[kind].append(value)
                    what[kind].append(f"{file}:{line}")
                    spans[kind].append(span)
    out["latency"] = lat
    out["latency_targets"] = what
    out["latency_spans"] = spans
    out["snapshots"] = _snapshots(EmbeddedPaths.for_data_dir(settings.data_dir).logfile)

    # save -> fresh lenses
    files = sorted((p for p in corpus.rglob("*.py") if "test" not in p.parts and p.stat().st_size < 40_000),
                   key=lambda p: str(p))[: saves * 3: 3]
    save_s = []
    for i, path in enumerate(files[:saves]):
        original = path.read_bytes()
        name = f"orbit_bench_fn_{i}"
        path.write_bytes(original + f"\n\ndef {name}():\n    return 1\n".encode())
        uri = from_fs_path(str(path))
        last_line = original.count(b"\n") + 2
        client.refreshed.clear()
        t = time.perf_counter()
        client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
        deadline = t + 30
        while time.perf_counter() < deadline:
            # as an editor does: lenses asked again when the server sends workspace/codeLens/refresh
            # (after it re-indexed), else every 50 ms
            try:
                await asyncio.wait_for(client.refreshed.wait(), 0.05)
            except asyncio.TimeoutError:
                pass
            client.refreshed.clear()
            lenses = await _lenses(client, uri)
            if any(lens["range"]["start"]["line"] >= last_line for lens in lenses or []):
                # the titles of the lenses on the screen that shows the new function
                shown = await _resolve(client, lenses, max(0, last_line + 1 - SCREEN_LINES))
                # the new function's callers lens (a "tests" lens follows it when the workspace has tests)
                counts = [x for x in shown if x["data"]["target"].get("type") != "tests"]
                assert counts and counts[-1]["command"]["title"] == "0 callers", shown[-1:]
                break
        _timed(save_s, t)
        path.write_bytes(original)
        client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
        await asyncio.sleep(0.3)
    out["save_to_lenses_s"] = save_s
    gc.enable()
    out["rss_mib"], out["rss_peak_mib"] = _proc_mib(pid) if pid else (None, None)
    out["worker_rss_mib"], out["worker_rss_peak_mib"] = _worker_mib(pid) if pid else (None, None)
    out["lens_refreshes"] = client.refreshes
    out["failures"] = client.failures
    out["tests_titles"] = dict(client.tests_titles)
    live.remove(client)
    await _stop(client)

    # re-open: a second server on the same (indexed) folder
    client, t0 = await _start(corpus, env)
    live.append(client)
    first = await _first_lenses(client, probe, probe_uri, t0)
    _close(client, probe_uri)
    out["reopen_init_to_first_lenses_s"], out["reopen_init_to_lenses_s"] = first["first_s"], first["counted_s"]
    pid = client._server.pid if client._server else None
    out["reopen_rss_mib"], out["reopen_rss_peak_mib"] = _proc_mib(pid) if pid else (None, None)
    out["reopen_worker_rss_mib"], out["reopen_worker_rss_peak_mib"] = _worker_mib(pid) if pid else (None, None)
    live.remove(client)
    await _stop(client)
    store.close()
    return out


async def _run(corpus: Path, settings, n: int, saves: int) -> dict:
    """``_measure``; a server still running when it fails is shut down (else the benchmark
    would wait for it forever)."""
    live: list = []
    try:
        return await _measure(corpus, settings, n, saves, live)
    finally:
        for client in live:
            await _stop(client)


async def _measure_first(corpus: Path, settings, rel: str | None, live: list) -> dict:
    """First lenses of the file ``rel`` (opened right after ``initialized``) on a cold folder
    (graph and cache removed) and then re-opened by a second server: ``_first_lenses`` of each."""
    env, store, graph = _cold_folder(corpus, settings)
    path = corpus / rel if rel else (corpus / "os.py" if (corpus / "os.py").exists() else next(corpus.rglob("*.py")))
    uri = from_fs_path(str(path))
    out: dict = {"file": str(path.relative_to(corpus))}
    for mode in ("cold", "reopen"):
        client, t0 = await _start(corpus, env)
        live.append(client)
        out[mode] = await _first_lenses(client, path, uri, t0)
        out[mode]["initialize_s"] = client.init_s
        out[mode]["lenses"] = len(await _lenses(client, uri) or [])
        live.remove(client)
        await _stop(client)
    store.close()
    return out


def run_first_lenses(corpus: Path, label: str, settings, command: str, rel: str | None = None) -> Report:
    """``python -m bench.run lsp --first-lenses [--open REL]``: initialize → first lenses of an
    open file on a cold and on an indexed folder (see ``_first_lenses``); a ``Report``."""
    async def go() -> dict:
        live: list = []
        try:
            return await _measure_first(corpus, settings, rel, live)
        finally:
            for client in live:
                await _stop(client)

    data = asyncio.run(go())
    rep = Report("lsp-first-lenses", label, command, data=data)
    rows = []
    for mode, what in (("cold", "cold (graph and cache removed)"), ("reopen", "indexed (a second server re-opens it)")):
        d = data[mode]
        rows.append([what, d["initialize_s"], d["first_s"], d["first_title"], d["counted_s"], d["counted_title"],
                     f"{d['tests_s']:.1f} ({d['tests_lenses']} lenses, {len(d['tests_failed'])} failed)", d["lenses"]])
        for err in sorted(set(d["tests_failed"])):
            rep.notes.append(f"{mode}: a tests lens failed to resolve: {err}")
        for err in sorted(set(d.get("errors", []))):
            rep.notes.append(f"{mode}: resolving the lenses failed (asked again): {err}")
    rep.tables.append(Table(f"initialize → first code lenses of {data['file']} (opened right after initialized; "
                            f"lenses on the first {SCREEN_LINES} lines resolved)",
                            ["workspace", "initialize answered (s)", "first lenses (s)", "their file lens", "lenses with counts (s)",
                             "file lens then", "tests lenses resolved (s)", "lenses in the file"], rows))
    return rep


def run_lsp(corpus: Path, label: str, settings, command: str, n: int = 20, saves: int = 20) -> Report:
    """Run the language-server benchmark; returns a ``Report`` (tables as in RESULTS.md)."""
    data = asyncio.run(_run(corpus, settings, n, saves))
    rep = Report("lsp", label, command, data=data)
    rows = [["initialize → first lenses (\"indexing…\"), cold (s)", data["cold_init_to_first_lenses_s"], None, "–"],
            ["initialize → first lenses with counts, cold (s)", data["cold_init_to_lenses_s"], None, "–"],
            ["initialize → first lenses (\"indexing…\"), re-open (s)", data["reopen_init_to_first_lenses_s"], None, "–"],
            ["initialize → first lenses with counts, re-open (s)", data["reopen_init_to_lenses_s"], None, "–"]]
    s = data["save_to_lenses_s"]
    rows.append(["didSave → fresh lenses (ms)", ms(pct(s, 50)), ms(pct(s, 95)),
                 "ok" if s and ms(pct(s, 95)) <= SAVE_TARGET_MS else "OVER"])
    for kind, vals in data["latency"].items():
        p95 = ms(pct(vals, 95))
        rows.append([f"{kind} (ms, n={len(vals)})", ms(pct(vals, 50)), p95,
                     "–" if kind in NO_TARGET else "ok" if p95 is not None and p95 <= LENS_TARGET_MS else "OVER"])
    rep.tables.append(Table("latency (p50 / p95); targets: save → lenses ≤ 50 ms, requests ≤ 10 ms",
                            ["measure", "p50 (or value)", "p95", "target"], rows))
    rep.tables.append(Table("server memory (the orbit-lsp process, and its selection process apart; FalkorDB "
                            "excluded); target ≤ 300 MiB for the server",
                            ["server", "RSS now (MiB)", "peak RSS (MiB)", "selection process RSS now / peak (MiB)",
                             "target"],
                            [["after cold index + requests", data["rss_mib"], data["rss_peak_mib"],
                              _pair(data.get("worker_rss_mib"), data.get("worker_rss_peak_mib")),
                              "ok" if (data["rss_peak_mib"] or 1e9) <= RSS_TARGET_MIB else "OVER"],
                             ["after re-open", data["reopen_rss_mib"], data["reopen_rss_peak_mib"],
                              _pair(data.get("reopen_worker_rss_mib"), data.get("reopen_worker_rss_peak_mib")),
                              "ok" if (data["reopen_rss_peak_mib"] or 1e9) <= RSS_TARGET_MIB else "OVER"]]))
    snapshots = data.get("snapshots") or []
    for kind, vals in data["latency"].items():
        spans = data.get("latency_spans", {}).get(kind) or [None] * len(vals)
        marked = [(v, t + (" (during a FalkorDB snapshot)" if s and _during_snapshots(s, snapshots) else ""))
                  for v, t, s in zip(vals, data.get("latency_targets", {}).get(kind, []), spans)]
        slow = sorted(marked, reverse=True)[:3]
        if slow:
            rep.notes.append(f"slowest {kind}: " + ", ".join(f"{t} {ms(v):.1f} ms" for v, t in slow))
    timed = [span for spans in data.get("latency_spans", {}).values() for span in spans]
    if timed:
        began, ended = min(s for s, _ in timed), max(e for _, e in timed)
        during = [time.strftime("%H:%M:%S", time.localtime(s)) + ("" if e is None else f" ({e - s:.1f} s)")
                  for s, e in snapshots if _during_snapshots((began, ended), [(s, e)])]
        rep.notes.append(f"FalkorDB snapshots (its log) while the requests above were timed: {len(during)}"
                         + (": began " + ", ".join(during) if during else ""))
    if data.get("impact_sizes"):
        rel, listed, total = max(data["impact_sizes"], key=lambda x: (x[2], x[0]))
        rep.notes.append(f"orbit/impact answers list at most orbit.maxDependents (default) dependents, nearest "
                         f"first, and count them all: the largest, {rel}, listed {listed:,} of {total:,}")
    rep.notes.append(f"workspace/codeLens/refresh requests received: {data['lens_refreshes']}")
    if data.get("tests_titles"):
        t = data["tests_titles"]
        rep.notes.append(f"tests lenses resolved: {sum(t.values())}; with a count {t.get('count', 0)}, "
                         f"\"counting…\" {t.get('counting…', 0)} (the selection not known within the "
                         f"lens's wait; the editor is asked to refresh), \"tests unknown\" {t.get('unknown', 0)}")
    if data.get("failures"):
        rep.notes.append(f"requests answered with an error: {len(data['failures'])} (not in the latencies); "
                         + "; ".join(sorted(set(data["failures"]))[:5]))
    return rep


def _pair(now: float | None, peak: float | None) -> str:
    return "–" if now is None else f"{now:,.0f} / {peak:,.0f}"
