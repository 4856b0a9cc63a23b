"""The language server: one ``OrbitServer`` (pygls 2) wired to its features by ``setup``.

Features live in their own modules (``lifecycle``, ``lenses``, ``hover``, ``hierarchy``,
``diagnostics``, ``requests``), each a class registered on the server by ``setup``. Handlers only
translate between LSP and the layers below (``orbit_lsp.index``, ``orbit_lsp.graph``): they turn
URIs into paths and positions into (line, UTF-8 byte column) pairs and back, call the layer
below in a worker thread (the event loop never waits on indexing or a query), and shape the
result. A ``FalkorDBOffline`` from below becomes one "FalkorDB offline" message for the user,
an error answer for the request, and a background check that brings the server back by itself.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import sys
import threading
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, TypeVar

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument
from pygls.uris import from_fs_path, to_fs_path
from urllib.parse import quote

from orbit_lsp import __version__
from orbit_lsp.config import settings_from_sources
from orbit_lsp.graph.cache import ANSWERS
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.graph.errors import FalkorDBOffline, GraphError
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.index.walk import workspace_file_refusal
from orbit_lsp.index.workspaces import WorkspaceSet
from orbit_lsp.server.background import BackgroundExecutor
from orbit_lsp.server.worker import SelectionWorker
from orbit_lsp.server.heap import IdleCollector
from orbit_lsp.server.protocol import OrbitProtocol
from orbit_lsp.server.transport import serve_stdio
from orbit_lsp.server.lines import FILE_LINES, LineCache, split_lines

log = logging.getLogger("orbit_lsp.server")
T = TypeVar("T")

REQUEST_FAILED = -32803  # LSP ErrorCodes.RequestFailed
OFFLINE_RETRY_S = 2.0   # how often an offline server is probed
PROBE_TIMEOUT_S = 5.0   # a probe that takes longer counts as failed
PING_TIMEOUT_S = 2.0    # a request that timed out: FalkorDB answering PING within this is not offline
ANSWER_MARGIN_S = 2.0   # added to the query timeout: longest wait for a graph read
SLOW_WORK_S = 600.0     # longest wait for long graph work (``slow_query``), queued time included



@functools.lru_cache(maxsize=1 << 16)
def _joined_uri(base: str, rel: str) -> str:
    """``base`` (a folder's URI) joined with workspace-relative ``rel``, percent-encoded; kept
    for the files answers name most: an impact lists thousands of dependents (2,719 for a file
    of the scale corpus: ~2 ms of encoding each time)."""
    return (base if base.endswith("/") else base + "/") + quote(rel)

class OrbitServer(LanguageServer):
    """pygls server plus orbit's state: settings, the graph store, the served workspaces, one
    thread for indexing (writes are serialised) and a pool for queries."""

    def __init__(self) -> None:
        super().__init__("orbit-lsp", __version__, protocol_cls=OrbitProtocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        # invalid ORBIT_* variables fall back to defaults; they are announced with the other
        # setting problems once the client can be told (apply_settings)
        self.settings, _ = settings_from_sources()
        self.store = GraphStore(self.settings)
        self.workspaces = WorkspaceSet(self.store, self.settings)
        self.index_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="orbit-index")
        self.query_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="orbit-query")
        # long graph work no request waits on for long (the tests lenses' selections, which read
        # thousands of test files in a large workspace): one thread, so that it never holds the
        # query pool, where hovers, lenses' counts and call hierarchies are answered
        self.slow_pool = BackgroundExecutor("orbit-slow")
        # the tests lenses' selections themselves run in a child process of lower priority (the
        # slow pool's thread waits for it): they take no GIL from the requests
        self.selections = SelectionWorker()
        self._probe_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="orbit-probe")
        # reads of workspace files a client names (never on the event loop, never waiting
        # behind graph queries)
        self.file_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="orbit-file")
        self.offline: FalkorDBOffline | None = None
        self._relapsed = False  # FalkorDB failed again while recovering
        self._recovery: asyncio.Task | None = None
        self.on_recovered: list[Callable[[], Any]] = []
        self.features: list[Any] = []
        self.heap = IdleCollector()  # full garbage collections while no message arrives
        self._announced: list[str] = []  # setting problems last shown to the user
        self._spelling_key: tuple[str, ...] | None = None  # open documents' URIs (uri_speller)
        self._spellings: dict[tuple[Path, str], str] = {}
        self._graph_gates: dict[Path, threading.Lock] = {}  # graph_gate
        # folders whose first index (or re-open after a branch switch) is running or queued,
        # and its last progress message: see ``indexing``
        self.first_index: dict[Path, str] = {}
        self.folders_served = asyncio.Event()  # set once ``initialized`` served the workspace folders

    def on(self, method: str, fn: Callable[[Any], Any], options: Any = None) -> None:
        """Register feature method ``fn`` (a bound method taking the params) for ``method``.
        pygls stores attributes on handlers, which bound methods cannot carry: wrap in a plain
        function of the same kind (coroutine or not)."""
        if inspect.iscoroutinefunction(fn):
            async def handler(params: Any = None):
                return await fn(params)
        else:
            def handler(params: Any = None):
                return fn(params)
        handler.__name__ = getattr(fn, "__name__", "handler")
        self.feature(method, options)(handler) if options is not None else self.feature(method)(handler)

    def on_command(self, name: str, fn: Callable[..., Any]) -> None:
        """Register bound coroutine method ``fn`` (taking the command's arguments) as the
        ``workspace/executeCommand`` command ``name`` (pygls wants a plain function, as for
        ``on``)."""
        async def command(*args):
            return await fn(*args)

        command.__name__ = getattr(fn, "__name__", "command")
        self.command(name)(command)

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Errors outside a request's answer (a notification's handler failed, a message could not
        be sent): logged, and written to the client's log (``window/logMessage``), never shown as
        a popup, so a client sending malformed notifications does not get one per message.
        Request errors are in their answers already."""
        from pygls.exceptions import FeatureRequestError, JsonRpcInternalError

        if source is FeatureRequestError:
            return
        log.error("%s: %s", getattr(source, "__name__", source), error)
        if source is JsonRpcInternalError:
            # a message could not be sent (pygls reports its failed writes so, and only those:
            # the client is gone, its pipe closed): sending the report would fail the same way
            # and be reported again, without end (a server exiting then spun for minutes)
            return
        try:
            self.window_log_message(types.LogMessageParams(types.MessageType.Error,
                                                           f"orbit-lsp: {type(error).__name__}: {error}"[:2000]))
        except Exception:  # noqa: BLE001 - reporting must never fail the caller
            log.debug("could not send the error to the client's log", exc_info=True)

    # -- settings -------------------------------------------------------------------------
    def apply_settings(self, *layers: dict | None, announce: bool = True) -> list[str]:
        """Rebuild settings from the environment and ``layers`` (later layers win); returns
        the problems found, each ``"orbit.<setting>: <reason> (using the default)"``.

        With ``announce`` the problems are shown to the user (``window/showMessage``, one per
        problem), except those already shown last time (re-reading unchanged settings does not
        nag). A changed FalkorDB location or data dir gets a new store (and
        new indexers for the same folders: the caller re-indexes); otherwise the store and
        every indexer get the new settings."""
        settings, problems = settings_from_sources(*layers)
        if announce:
            for p in problems:
                if p not in self._announced:
                    self.window_show_message(types.ShowMessageParams(types.MessageType.Warning,
                                                                     f"orbit-lsp: invalid setting {p}"))
            self._announced = problems
        old = self.settings
        self.settings = settings
        if (settings.falkordb_url, settings.data_dir) != (old.falkordb_url, old.data_dir):
            self.store.close()
            self.store = GraphStore(settings)
            folders = [ix.root for ix in self.workspaces.all()]
            self.workspaces = WorkspaceSet(self.store, settings)
            for f in folders:
                self.workspaces.add(f)
            self.workspaces.take_dirty()
        else:
            self.store.settings = settings
            self.workspaces.update_settings(settings)
        return problems

    # -- paths and positions --------------------------------------------------------------
    @staticmethod
    def path_of(uri: str) -> Path | None:
        """Absolute, normalised filesystem path of a ``file:`` URI, else None (also for a URI
        whose path holds a NUL or a lone surrogate).

        Percent-encoding is decoded (``my%20dir/a%20b.py`` and ``my dir/a b.py`` are one file),
        ``file://localhost/...`` is local, Windows drive letters are handled by pygls, and
        ``.``/``..`` segments are collapsed, so every spelling of a file maps to one path (the
        indexer then maps paths to one workspace-relative name)."""
        if not isinstance(uri, str):
            return None
        if uri[:17].lower() == "file://localhost/":
            uri = "file:///" + uri[17:]
        try:
            p = to_fs_path(uri)
        except Exception:  # noqa: BLE001 - a malformed URI is the client's: answer "no file"
            return None
        if not p or not os.path.isabs(p) or not usable_text(p):
            return None  # a NUL or a lone surrogate names no file (os calls would raise)
        return Path(os.path.normpath(p))

    @staticmethod
    def uri_of(path: Path | str) -> str:
        return from_fs_path(os.fspath(path)) or ""

    @staticmethod
    @functools.lru_cache(maxsize=64)
    def _root_uri(root: str) -> str:
        return from_fs_path(root) or ""

    def rel_uri(self, root: Path, rel: str) -> str:
        """URI of workspace-relative ``rel`` under folder ``root``: the same string as
        ``uri_of(root / rel)`` (percent-encoding is per character, so the root's encoded prefix
        is reused), without building and re-encoding the whole path each time."""
        return _joined_uri(self._root_uri(os.fspath(root)), rel)

    def uri_speller(self, *sent: Any) -> Callable[[Path, str], str]:
        """``spell(root, rel)``: the URI of workspace file ``rel`` under folder ``root`` as the
        client spells it: one of the URIs ``sent`` in this request naming that file, else the
        URI of the open document of that file, else the canonical ``rel_uri`` (answers echo
        the client's percent-encoding and drive-letter case, so it matches them to its own
        documents)."""
        by_root: dict[Path, dict[str, str]] = {}  # the spellings of each folder's files
        for (root, rel), uri in self._open_spellings().items():
            by_root.setdefault(root, {})[rel] = uri
        for uri in sent:
            owner = self.locate(uri) if isinstance(uri, str) else None
            if owner is not None:
                by_root.setdefault(owner[0].root, {})[owner[1]] = uri
        bases: dict[Path, str] = {}

        def spell(root: Path, rel: str) -> str:
            # called once per file an answer names (thousands for an impact): the folder's
            # encoded prefix is looked up once per answer
            mine = by_root.get(root)
            if mine is not None:
                hit = mine.get(rel)
                if hit is not None:
                    return hit
            base = bases.get(root)
            if base is None:
                base = bases[root] = self._root_uri(os.fspath(root))
            return _joined_uri(base, rel)
        return spell

    def _open_spellings(self) -> dict[tuple[Path, str], str]:
        """(folder root, rel) -> URI of each open document, rebuilt when the open set changes."""
        keys = tuple(self.workspace.text_documents)
        if keys != self._spelling_key:
            found: dict[tuple[Path, str], str] = {}
            for doc in list(self.workspace.text_documents.values()):
                uri = doc.uri  # as the client sent it (pygls keys documents by the unquoted URI)
                owner = self.locate(uri)
                if owner is not None:
                    found.setdefault((owner[0].root, owner[1]), uri)
            self._spelling_key, self._spellings = keys, found
        return self._spellings

    def locate(self, uri: str) -> tuple[WorkspaceIndexer, str] | None:
        """(indexer, workspace-relative path) of a document, or None outside every folder."""
        path = self.path_of(uri)
        return self.workspaces.owner(path) if path is not None else None

    def open_text(self, path: Path) -> str | None:
        """Text of the open document of ``path`` (what the client sees), None when not open."""
        doc = self.workspace.text_documents.get(self.uri_of(path))
        return doc.source if doc is not None else None

    def lines(self) -> LineCache:
        """Per-request lines of documents as the client sees them (see ``server.lines``), for
        converting graph positions (1-based line, UTF-8 byte column) into LSP ones and back."""
        return LineCache(self.workspace.position_codec, self.open_text, self.may_read)

    def may_read(self, path: Path) -> bool:
        """True if the server may open ``path`` for a client: inside a served folder, not a
        ``.env*`` file nor a link to one, not a link leaving its folder
        (``walk.workspace_file_refusal``). Only lstat/readlink calls."""
        owner = self.workspaces.owner(path)
        return owner is not None and workspace_file_refusal(owner[0].root, path) is None

    async def warm_lines(self, paths: Any) -> None:
        """Read the lines of the files ``paths`` that are not open into ``lines.FILE_LINES`` in
        a worker thread, so converting positions on the event loop afterwards (``lines()``)
        finds them there and does no file I/O but a ``stat``. Files the server may not open
        (``may_read``) are skipped."""
        todo = [p for p in dict.fromkeys(paths) if self.open_text(p) is None and self.may_read(p)]
        if todo:
            await asyncio.get_running_loop().run_in_executor(
                self.file_pool, lambda: [FILE_LINES.get(p) for p in todo])

    def to_position(self, path: Path, line1: int, byte_col: int) -> types.Position:
        """LSP position (0-based, negotiated encoding) of a graph position (1-based line,
        UTF-8 byte column)."""
        return self.lines().position(path, line1, byte_col)

    def to_graph_position(self, path: Path, pos: types.Position) -> tuple[int, int]:
        """(1-based line, UTF-8 byte column) of an LSP position."""
        return self.lines().graph_position(path, pos)

    # -- a folder's first index ----------------------------------------------------------
    def indexing(self, ix: WorkspaceIndexer) -> bool:
        """True while ``ix`` has no finished index in this server and one is running or queued
        (its first index after ``initialized`` or after the folder was added, or the re-open of
        another branch's graph): the graph is not final, so answers that carry counts (lenses,
        hovers, impact) say "indexing…" instead of reading it. False once the index ended, and
        when it failed or was cancelled (the folder is then not indexed), and while FalkorDB is
        offline (requests say so)."""
        return ix.last_index_time is None and ix.root in self.first_index and self.offline is None

    async def wait_served(self, timeout: float = 10.0) -> None:
        """Wait (at most ``timeout`` seconds) until the workspace folders are served: an editor
        asks for the lenses of the open file as soon as it attached, before the server has read
        the client's settings and served the folders in ``initialized``."""
        if not self.folders_served.is_set():
            try:
                await asyncio.wait_for(self.folders_served.wait(), timeout)
            except asyncio.TimeoutError:
                pass

    def indexing_note(self, ix: WorkspaceIndexer) -> str:
        """``"indexing <folder>: <progress>"`` for messages while ``indexing(ix)``."""
        what = self.first_index.get(ix.root) or "starting"
        return f"indexing {ix.root.name}: {what}"

    def refuse_while_indexing(self, ix: WorkspaceIndexer, what: str) -> None:
        """Raise RequestFailed ``"orbit: indexing <folder>: <progress>; <what> known once it is
        done"`` while ``indexing(ix)``: an answer read from a graph that is not final would be
        wrong (no callers, no dependents), not merely incomplete."""
        if self.indexing(ix):
            raise JsonRpcException(f"orbit: {self.indexing_note(ix)}; {what} known once it is done",
                                   code=REQUEST_FAILED)

    # -- running work off the event loop --------------------------------------------------
    def answer_timeout(self) -> float:
        """Longest wait (seconds) for a graph read: the server-side query timeout plus a margin.
        A FalkorDB that accepts connections but does not answer (stopped, overloaded) is
        treated as offline after it."""
        return self.settings.query_timeout_ms / 1000 + ANSWER_MARGIN_S

    async def query(self, fn: Callable[..., T], *args, **kwargs) -> T:
        """Run a graph read in the query pool. Raises a JSON-RPC error (RequestFailed) saying
        "FalkorDB offline" when the store is unreachable, or does not answer within
        ``answer_timeout()`` and then not to a PING either (a read that takes that long while
        FalkorDB answers PING fails alone, saying it is too slow), and for other graph errors."""
        return await self._run_read(self.query_pool, self.answer_timeout(), fn, *args, **kwargs)

    async def slow_query(self, fn: Callable[..., T], *args, **kwargs) -> T:
        """``query`` for long work (many graph reads and file reads), run in ``slow_pool`` (one
        thread, never the query pool) and allowed ``SLOW_WORK_S`` seconds, time queued
        included."""
        return await self._run_read(self.slow_pool, SLOW_WORK_S, fn, *args, **kwargs)

    async def _run_read(self, pool: Executor, wait: float, fn: Callable[..., T], *args, **kwargs) -> T:
        if self.offline is not None:
            raise JsonRpcException(str(self.offline), code=REQUEST_FAILED)
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(
                loop.run_in_executor(pool, functools.partial(fn, *args, **kwargs)), wait)
        except asyncio.TimeoutError:
            if await self._answers_ping():
                # FalkorDB is there: the work is slow (many queries), not the server gone; going
                # offline would refuse every request and re-index every folder
                log.warning("%s took over %.0f s; FalkorDB answers", getattr(fn, "__name__", fn), wait)
                raise JsonRpcException(f"orbit: no answer within {wait:.0f} s (FalkorDB answers; this request "
                                       f"is too slow)", code=REQUEST_FAILED) from None
            exc = FalkorDBOffline(self.store.where, f"no answer within {wait:.0f} s")
            self.went_offline(exc)
            raise JsonRpcException(str(exc), code=REQUEST_FAILED) from None
        except FalkorDBOffline as exc:
            self.went_offline(exc)
            raise JsonRpcException(str(exc), code=REQUEST_FAILED) from exc
        except GraphError as exc:
            raise JsonRpcException(f"{type(exc).__name__}: {exc}", code=REQUEST_FAILED) from exc

    async def _answers_ping(self) -> bool:
        """True when FalkorDB answers PING within ``PING_TIMEOUT_S`` (checked in the probe thread:
        a server that does not answer must never hold up the event loop)."""
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(self._probe_pool, self.store.healthy), PING_TIMEOUT_S)
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - no answer is the answer
            return False

    async def answer(self, ix: WorkspaceIndexer, fn: Callable[..., T], *args) -> T:
        """``fn(ix.graph, *args)`` (a ``graph.queries`` function) off the event loop, from the
        process's answer cache while ``ix`` has not changed the graph since (see
        ``graph.cache``)."""
        return await self.query(ANSWERS.get, ix.graph, ix.generation, fn, *args)

    def graph_gate(self, ix: WorkspaceIndexer) -> threading.Lock:
        """The lock the index thread holds while it works on ``ix``'s graph and the agent's
        reads hold while they run (``server.ask.AgentGraph``): a re-index then waits here for a
        model-written read, not in FalkorDB, where a waiting writer also holds up every read
        (hover, lens) that arrives after it."""
        gate = self._graph_gates.get(ix.root)
        if gate is None:
            gate = self._graph_gates.setdefault(ix.root, threading.Lock())
        return gate

    async def index(self, fn: Callable[..., T], *args, **kwargs) -> T | None:
        """Run indexing work in the (single) index thread; None when FalkorDB is offline (the
        work is redone after recovery by a full incremental re-open). Other graph errors
        (a query timeout, a rejected write) are logged and also give None: indexing is
        background work, no request is waiting for its error."""
        loop = asyncio.get_running_loop()
        ix = next((a for a in args if isinstance(a, WorkspaceIndexer)), None)
        work = functools.partial(fn, *args, **kwargs)
        if ix is not None:
            work = functools.partial(self._gated, self.graph_gate(ix), work)
        try:
            return await loop.run_in_executor(self.index_pool, work)
        except FalkorDBOffline as exc:
            self.went_offline(exc)
            return None
        except GraphError as exc:
            log.error("indexing failed: %s: %s", type(exc).__name__, exc)
            self.window_log_message(types.LogMessageParams(types.MessageType.Error,
                                                           f"orbit-lsp: indexing failed: {type(exc).__name__}: {exc}"))
            return None

    @staticmethod
    def _gated(gate: threading.Lock, work: Callable[[], T]) -> T:
        with gate:
            return work()

    # -- FalkorDB offline ---------------------------------------------------------------------
    def went_offline(self, exc: FalkorDBOffline) -> None:
        """Tell the user once, refuse graph requests, and poll until FalkorDB answers again.
        Must be called on the event loop."""
        if self.offline is not None:
            self._relapsed = True
            return
        self.offline = exc
        log.warning("%s", exc)
        self.window_show_message(types.ShowMessageParams(types.MessageType.Error,
                                                         f"orbit-lsp: {exc}. Graph features are paused until it is back."))
        self._recovery = asyncio.get_running_loop().create_task(self._recover())  # on the event loop

    async def _recover(self) -> None:
        """Every ``OFFLINE_RETRY_S``: reconnect; once FalkorDB answers, run the
        ``on_recovered`` hooks (lifecycle re-indexes every folder: the server may have lost the
        graphs) while graph requests are still refused, then resume and tell the user."""
        loop = asyncio.get_running_loop()
        probe: asyncio.Future | None = None
        while self.offline is not None:
            await asyncio.sleep(OFFLINE_RETRY_S)
            # in its own thread: connecting to a server that does not answer may block (and
            # holds the store's lock), which must never reach the event loop
            if probe is None or probe.done():
                probe = loop.run_in_executor(self._probe_pool, self._reconnect)
            try:
                ok = await asyncio.wait_for(asyncio.shield(probe), PROBE_TIMEOUT_S)
            except asyncio.TimeoutError:
                continue
            probe = None
            if not ok:
                continue
            self._relapsed = False
            for callback in list(self.on_recovered):
                try:
                    result = callback()
                    if asyncio.iscoroutine(result):
                        await result
                except Exception:  # noqa: BLE001 - a failing hook must not end the recovery
                    log.exception("recovery hook failed")
            if self._relapsed:
                continue  # offline again while re-indexing: keep polling
            self.offline = None
            log.warning("FalkorDB is back (%s)", self.store.where)
            self.window_show_message(types.ShowMessageParams(types.MessageType.Info,
                                                             "orbit-lsp: FalkorDB is back; graph features resumed."))
        self._recovery = None

    def _reconnect(self) -> bool:
        self.store.reset()
        try:
            self.store.connect()
            return True
        except FalkorDBOffline:
            return False

    # -- client capabilities -------------------------------------------------------------------
    def supports_lens_refresh(self) -> bool:
        caps = self.client_capabilities
        ws = caps.workspace if caps else None
        return bool(ws and ws.code_lens and ws.code_lens.refresh_support)

    def refresh_lenses(self) -> None:
        """Ask the client to re-request code lenses (only when it declared support)."""
        if self.supports_lens_refresh():
            self.workspace_code_lens_refresh(None)


class LspTextDocument(TextDocument):
    """pygls's document, with LSP line splitting (see ``split_lines``): its ``lines`` also
    drive how incremental changes are applied, which form feeds used to misplace."""

    @property
    def lines(self):
        return tuple(split_lines(self.source))


def use_lsp_lines(workspace) -> None:
    """Make ``workspace`` create ``LspTextDocument``s (pygls builds the workspace inside
    ``initialize`` and offers no hook for the document class)."""
    original = workspace._create_text_document

    def create(doc_uri, source=None, version=None, language_id=None):
        doc = original(doc_uri, source, version, language_id)
        doc.__class__ = LspTextDocument
        return doc

    workspace._create_text_document = create


LSP_UINTEGER_MAX = 2 ** 31 - 1  # LSP's ``uinteger`` (positions): 0 .. 2^31 - 1
ID_MAX = 2 ** 63 - 1  # ids stored by orbit (SQLite integers)


def usable_text(value: str) -> bool:
    """False for a string holding a NUL or a lone surrogate (which no file name, UTF-8 text or
    database string can hold)."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def uinteger(value: Any, what: str, upper: int = LSP_UINTEGER_MAX) -> int:
    """``value`` if it is an integer in 0 .. ``upper`` (not a bool), else InvalidParams naming
    ``what`` and the range."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= upper:
        return value
    raise JsonRpcInvalidParams(f"{what} must be an integer from 0 to {upper}")


def lsp_position(value: Any, what: str) -> types.Position:
    """An LSP position from JSON data ``{line, character}`` (a namedtuple from pygls is
    accepted): both ``uinteger`` (0 .. 2^31 - 1), else InvalidParams naming ``what``."""
    if hasattr(value, "_asdict"):
        value = value._asdict()
    if isinstance(value, types.Position):
        return value
    if not isinstance(value, dict):
        raise JsonRpcInvalidParams(f"{what} must be a position {{line, character}}")
    return types.Position(uinteger(value.get("line"), f"{what}.line"),
                          uinteger(value.get("character"), f"{what}.character"))


def raw_params(params: Any) -> dict:
    """Custom (``orbit/*``) request params as plain data. pygls hands them over as nested
    namedtuples; taking them raw (and validating in the handler) is what guarantees an
    InvalidParams answer instead of a request that never gets one. Absent params, ``null`` and
    an empty array are no params (``{}``); any other non-object raises InvalidParams."""
    def conv(v):
        if hasattr(v, "_asdict"):
            return {k: conv(x) for k, x in v._asdict().items()}
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        return v
    if params is None:
        return {}
    out = conv(params)
    if out == []:  # no params, as some clients send them (Neovim encodes an empty Lua table so)
        return {}
    if not isinstance(out, dict):
        raise JsonRpcInvalidParams("params must be an object")
    return out


def setup(server: OrbitServer) -> OrbitServer:
    """Create every feature and register its handlers on ``server``."""
    from orbit_lsp.server import (ask, changes, code_actions, diagnostics, hierarchy, hover, lenses, lifecycle,
                                  memory, propose, requests)

    for module in (lifecycle, lenses, hover, hierarchy, diagnostics, requests, ask, code_actions, memory, propose,
                   changes):
        feature = module.Feature(server)
        feature.register()
        server.features.append(feature)
    return server


def create_server() -> OrbitServer:
    return setup(OrbitServer())


def run_stdio() -> int:
    """Serve LSP over stdin/stdout. Logs go to stderr only (stdout is the LSP channel)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.getLogger("orbit_lsp").addHandler(handler)
    logging.getLogger("orbit_lsp").setLevel(os.environ.get("ORBIT_LOG_LEVEL", "WARNING").upper())
    logging.getLogger("pygls").setLevel(logging.WARNING)  # pygls logs every message at INFO
    serve_stdio(create_server())
    return 0
