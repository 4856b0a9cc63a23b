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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, TypeVar

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from orbit_lsp import __version__
from orbit_lsp.config import Settings, settings_from_sources
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.graph.errors import FalkorDBOffline, GraphError
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.index.workspaces import WorkspaceSet

log = logging.getLogger("orbit_lsp.server")
T = TypeVar("T")

REQUEST_FAILED = -32803  # LSP ErrorCodes.RequestFailed
OFFLINE_RETRY_S = 2.0


class OrbitServer(LanguageServer):
    """pygls server plus orbit's state: settings, the graph store, the served workspaces, one
    thread for indexing (writes are serialised) and a pool for queries."""

    def __init__(self) -> None:
        super().__init__("orbit-lsp", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.settings: Settings = Settings.from_env()
        self.store = GraphStore(self.settings)
        self.workspaces = WorkspaceSet(self.store, self.settings)
        self.index_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="orbit-index")
        self.query_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="orbit-query")
        self.offline: FalkorDBOffline | None = None
        self._recovery: asyncio.Task | None = None
        self.on_recovered: list[Callable[[], Any]] = []
        self.features: list[Any] = []

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

    # -- settings -------------------------------------------------------------------------
    def apply_settings(self, *layers: dict | None) -> list[str]:
        """Rebuild settings from the environment and ``layers``; returns the problems found
        (each already shown to the user). A changed FalkorDB location or data dir gets a new
        store; served folders keep their indexers (their settings are updated)."""
        settings, problems = settings_from_sources(*layers)
        for p in problems:
            self.window_show_message(types.ShowMessageParams(types.MessageType.Warning,
                                                             f"orbit-lsp: invalid setting {p}"))
        old = self.settings
        self.settings = settings
        if (settings.falkordb_url, settings.data_dir) != (old.falkordb_url, old.data_dir):
            self.store.close()
            self.store = GraphStore(settings)
            folders = [ix.root for ix in self.workspaces.all()]
            self.workspaces = WorkspaceSet(self.store, settings)
            for f in folders:
                self.workspaces.add(f)
        else:
            self.store.settings = settings
            self.workspaces.settings = settings
            for ix in self.workspaces.all():
                ix.settings = settings
        return problems

    # -- paths and positions --------------------------------------------------------------
    @staticmethod
    def path_of(uri: str) -> Path | None:
        """Filesystem path of a ``file:`` URI (percent-decoding, drive letters), else None."""
        try:
            p = to_fs_path(uri)
        except Exception:  # noqa: BLE001 - a malformed URI is the client's: answer "no file"
            return None
        return Path(p) if p else None

    @staticmethod
    def uri_of(path: Path | str) -> str:
        return from_fs_path(os.fspath(path)) or ""

    def locate(self, uri: str) -> tuple[WorkspaceIndexer, str] | None:
        """(indexer, workspace-relative path) of a document, or None outside every folder."""
        path = self.path_of(uri)
        return self.workspaces.owner(path) if path is not None else None

    def line_text(self, path: Path, line0: int) -> str:
        """Text of 0-based line ``line0`` of ``path``: from the open document when there is one
        (what the client sees), else from disk. Used only to convert columns; never stored."""
        uri = self.uri_of(path)
        doc = self.workspace.text_documents.get(uri)
        if doc is not None:
            lines = doc.lines
        else:
            try:
                with open(path, "rb") as fh:
                    lines = fh.read().decode("utf-8", errors="replace").splitlines()
            except OSError:
                return ""
        return lines[line0].rstrip("\r\n") if 0 <= line0 < len(lines) else ""

    def to_position(self, path: Path, line1: int, byte_col: int) -> types.Position:
        """LSP position (0-based, negotiated encoding) of a graph position (1-based line,
        UTF-8 byte column)."""
        text = self.line_text(path, line1 - 1)
        prefix = text.encode("utf-8")[:max(0, byte_col)].decode("utf-8", errors="ignore")
        return types.Position(line=max(0, line1 - 1), character=self.workspace.position_codec.client_num_units(prefix))

    def to_graph_position(self, path: Path, pos: types.Position) -> tuple[int, int]:
        """(1-based line, UTF-8 byte column) of an LSP position."""
        text = self.line_text(path, pos.line)
        codec = self.workspace.position_codec
        chars = codec.position_from_client_units([text + "\n"], pos).character if text else pos.character
        return pos.line + 1, len(text[:chars].encode("utf-8"))

    def name_range(self, path: Path, line1: int, byte_col: int, name: str) -> types.Range:
        """Range of identifier ``name`` starting at a graph position."""
        start = self.to_position(path, line1, byte_col)
        return types.Range(start, types.Position(start.line, start.character + self.workspace.position_codec.client_num_units(name)))

    # -- running work off the event loop --------------------------------------------------
    async def query(self, fn: Callable[..., T], *args, **kwargs) -> T:
        """Run a graph read in the query pool. Raises a JSON-RPC error (RequestFailed) saying
        "FalkorDB offline" when the store is unreachable, and for other graph errors."""
        if self.offline is not None:
            raise JsonRpcException(str(self.offline), code=REQUEST_FAILED)
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.query_pool, functools.partial(fn, *args, **kwargs))
        except FalkorDBOffline as exc:
            self.went_offline(exc)
            raise JsonRpcException(str(exc), code=REQUEST_FAILED) from exc
        except GraphError as exc:
            raise JsonRpcException(f"{type(exc).__name__}: {exc}", code=REQUEST_FAILED) from exc

    async def index(self, fn: Callable[..., T], *args, **kwargs) -> T | None:
        """Run indexing work in the (single) index thread; None when FalkorDB is offline (the
        work is redone after recovery by a full incremental re-open)."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.index_pool, functools.partial(fn, *args, **kwargs))
        except FalkorDBOffline as exc:
            self.went_offline(exc)
            return None

    # -- FalkorDB offline ---------------------------------------------------------------------
    def went_offline(self, exc: FalkorDBOffline) -> None:
        """Tell the user once, refuse graph requests, and poll until FalkorDB answers again."""
        if self.offline is not None:
            return
        self.offline = exc
        log.warning("%s", exc)
        self.window_show_message(types.ShowMessageParams(types.MessageType.Error,
                                                         f"orbit-lsp: {exc}. Graph features are paused until it is back."))
        self._recovery = asyncio.get_running_loop().create_task(self._recover())  # on the event loop

    async def _recover(self) -> None:
        loop = asyncio.get_running_loop()
        while self.offline is not None:
            await asyncio.sleep(OFFLINE_RETRY_S)
            self.store.reset()
            ok = await loop.run_in_executor(self.query_pool, self._reconnect)
            if ok:
                self.offline = None
                self.window_show_message(types.ShowMessageParams(types.MessageType.Info,
                                                                 "orbit-lsp: FalkorDB is back; graph features resumed."))
                for callback in list(self.on_recovered):
                    result = callback()
                    if asyncio.iscoroutine(result):
                        await result

    def _reconnect(self) -> bool:
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


def raw_params(params: Any) -> dict:
    """Custom (``orbit/*``) request params as plain data. pygls hands them over as nested
    namedtuples; taking them raw (and validating in the handler) is what guarantees an
    InvalidParams answer instead of a request that never gets one."""
    def conv(v):
        if hasattr(v, "_asdict"):
            return {k: conv(x) for k, x in v._asdict().items()}
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        return v
    if params is None:
        return {}
    out = conv(params)
    if not isinstance(out, dict):
        raise JsonRpcInvalidParams("params must be an object")
    return out


def setup(server: OrbitServer) -> OrbitServer:
    """Create every feature and register its handlers on ``server``."""
    from orbit_lsp.server import diagnostics, hierarchy, hover, lenses, lifecycle, requests

    for module in (lifecycle, lenses, hover, hierarchy, diagnostics, requests):
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
    create_server().start_io()
    return 0
