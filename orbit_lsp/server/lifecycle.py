"""Lifecycle: settings, indexing of the workspace folders, re-indexing on save and on changes
made outside the editor (watchdog), folders added or removed, shutdown.

After any (re-)index the ``reindexed`` hooks of the other features run (diagnostics are
re-published, code lenses refreshed) once per batch.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from pathlib import Path
from typing import Any

from lsprotocol import types
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from orbit_lsp.index.indexer import IndexReport, WorkspaceIndexer
from orbit_lsp.server.app import OrbitServer

log = logging.getLogger("orbit_lsp.server")
WATCH_DEBOUNCE_S = 0.15  # collect the events of one save (atomic saves are 2-4 events)


class _Events(FileSystemEventHandler):
    """watchdog thread -> event loop: hands every path an event names to ``Feature.on_fs``."""

    def __init__(self, feature: "Feature", loop: asyncio.AbstractEventLoop):
        self.feature = feature
        self.loop = loop

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        paths = [event.src_path] + ([event.dest_path] if getattr(event, "dest_path", "") else [])
        for p in paths:
            p = p.decode("utf-8", "surrogateescape") if isinstance(p, bytes) else p
            self.loop.call_soon_threadsafe(self.feature.on_fs, Path(p), event.is_directory)


class Feature:
    def __init__(self, server: OrbitServer):
        self.server = server
        self.observers: dict[Path, Any] = {}
        self.pending: dict[Path, bool] = {}  # path -> is_directory
        self.flush_handle: asyncio.TimerHandle | None = None
        self.init_options: dict | None = None
        self.client_config: dict | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.initial_index_done = asyncio.Event()

    def register(self) -> None:
        ls = self.server
        ls.on(types.INITIALIZE, self.initialize)
        ls.on(types.INITIALIZED, self.initialized)
        ls.on(types.WORKSPACE_DID_CHANGE_CONFIGURATION, self.did_change_configuration)
        ls.on(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS, self.did_change_folders)
        ls.on(types.TEXT_DOCUMENT_DID_SAVE, self.did_save)
        ls.on(types.SHUTDOWN, self.shutdown)
        ls.on_recovered.append(self.reopen_all)

    # -- start-up ---------------------------------------------------------------------------
    def initialize(self, params: types.InitializeParams) -> None:
        opts = params.initialization_options
        self.init_options = opts if isinstance(opts, dict) else None
        if opts is not None and not isinstance(opts, dict):
            self.server.window_show_message(types.ShowMessageParams(
                types.MessageType.Warning, "orbit-lsp: initializationOptions must be an object; using defaults"))
        self.server.apply_settings(self.init_options)

    async def initialized(self, params: types.InitializedParams) -> None:
        self.loop = asyncio.get_running_loop()
        await self._pull_configuration()
        folders = [self.server.path_of(f.uri) for f in (self.server.workspace.folders or {}).values()]
        if not folders and self.server.workspace.root_uri:
            folders = [self.server.path_of(self.server.workspace.root_uri)]
        for folder in [f for f in folders if f is not None and f.is_dir()]:
            self.server.workspaces.add(folder)
        try:
            for ix in self.server.workspaces.all():
                await self.index_folder(ix)
        finally:
            self.initial_index_done.set()
        for ix in self.server.workspaces.all():
            self.watch(ix)

    async def _pull_configuration(self) -> None:
        caps = self.server.client_capabilities
        if not (caps and caps.workspace and caps.workspace.configuration):
            return
        try:
            result = await self.server.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="orbit")]))
        except Exception as exc:  # noqa: BLE001 - a client that fails here still gets defaults
            log.info("workspace/configuration failed: %s", exc)
            return
        cfg = result[0] if result else None
        self.client_config = cfg if isinstance(cfg, dict) else None
        if cfg is not None and not isinstance(cfg, dict):
            self.server.window_show_message(types.ShowMessageParams(
                types.MessageType.Warning, "orbit-lsp: the 'orbit' settings must be an object; using defaults"))
        self.server.apply_settings(self.init_options, self.client_config)

    async def did_change_configuration(self, params: types.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if isinstance(settings, dict) and isinstance(settings.get("orbit"), dict):
            self.client_config = settings["orbit"]
            self.server.apply_settings(self.init_options, self.client_config)
        else:
            await self._pull_configuration()
        await self.reopen_all()

    # -- indexing ---------------------------------------------------------------------------
    async def index_folder(self, ix: WorkspaceIndexer) -> IndexReport | None:
        """Index (or incrementally re-open) one folder with work-done progress."""
        ls = self.server
        token = f"orbit-index-{uuid.uuid4().hex[:8]}"
        cancel = threading.Event()
        progress = None
        caps = ls.client_capabilities
        if caps and caps.window and caps.window.work_done_progress:
            try:
                await ls.work_done_progress.create_async(token)
                progress = token
            except Exception as exc:  # noqa: BLE001 - progress is a courtesy
                log.info("work done progress refused: %s", exc)
        if progress:
            fut = ls.work_done_progress.tokens.get(token)
            if fut is not None:
                fut.add_done_callback(lambda f: cancel.set() if f.cancelled() else None)
            ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(
                title=f"orbit: indexing {ix.root.name}", cancellable=True, percentage=0))
        loop = asyncio.get_running_loop()

        def report(done: int, total: int, rel: str) -> None:
            if progress:
                pct = int(100 * done / total) if total else 100
                loop.call_soon_threadsafe(ls.work_done_progress.report, token, types.WorkDoneProgressReport(
                    message=f"{done}/{total} files", percentage=pct))

        rep = await ls.index(ix.index_all, report, cancel)
        if progress:
            msg = "cancelled" if cancel.is_set() else (
                f"{rep.files} files, {rep.symbols} symbols ({rep.mode})" if rep else "FalkorDB offline")
            ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=msg))
        if rep is not None:
            self.reindexed(ix, None)
        return rep

    async def reopen_all(self) -> None:
        for ix in self.server.workspaces.all():
            await self.index_folder(ix)

    def reindexed(self, ix: WorkspaceIndexer, rels: set[str] | None) -> None:
        """Tell the other features what changed (None: the whole folder)."""
        for feature in self.server.features:
            hook = getattr(feature, "after_index", None)
            if hook is not None and feature is not self:
                hook(ix, rels)
        self.server.refresh_lenses()

    async def did_save(self, params: types.DidSaveTextDocumentParams) -> None:
        path = self.server.path_of(params.text_document.uri)
        if path is not None:
            self.on_fs(path, False)
            await self.flush()

    async def did_change_folders(self, params: types.DidChangeWorkspaceFoldersParams) -> None:
        for f in params.event.removed:
            path = self.server.path_of(f.uri)
            if path is not None:
                ix = self.server.workspaces.remove(path)
                if ix is not None:
                    self.unwatch(ix)
        for f in params.event.added:
            path = self.server.path_of(f.uri)
            if path is not None and path.is_dir():
                ix = self.server.workspaces.add(path)
                await self.index_folder(ix)
                self.watch(ix)

    # -- file events (save and watchdog) -------------------------------------------------------
    def on_fs(self, path: Path, is_dir: bool) -> None:
        """Queue a changed path; a short debounce merges the events of one save (an atomic
        save's rename dance, or a save seen both as didSave and by the watcher)."""
        owner = self.server.workspaces.owner(path)
        if owner is None:
            return
        ix, rel = owner
        if not is_dir and not ix.filter.accepts(path) and rel not in ix.state:
            return  # temporaries (mod.py~, .swp, 4913), .env files, non-source files
        self.pending[path] = is_dir or self.pending.get(path, False)
        if self.flush_handle is None and self.loop is not None:
            self.flush_handle = self.loop.call_later(WATCH_DEBOUNCE_S, lambda: asyncio.ensure_future(self.flush()))

    async def flush(self) -> None:
        """Re-index every queued path (each file once), then notify the other features."""
        if self.flush_handle is not None:
            self.flush_handle.cancel()
            self.flush_handle = None
        batch, self.pending = self.pending, {}
        touched: dict[WorkspaceIndexer, set[str]] = {}
        for path, is_dir in sorted(batch.items()):
            owner = self.server.workspaces.owner(path)
            if owner is None:
                continue
            ix, rel = owner
            if is_dir or path.is_dir():
                rep = await self.server.index(ix.index_all)
                if rep is not None:
                    touched.setdefault(ix, set()).add("")
                continue
            rep = await self.server.index(ix.reindex_file, path)
            if rep is not None and rep.mode != "unchanged":
                touched.setdefault(ix, set()).add(rel)
        for ix, rels in touched.items():
            self.reindexed(ix, None if "" in rels else rels)

    # -- watcher -------------------------------------------------------------------------------
    def watch(self, ix: WorkspaceIndexer) -> None:
        if ix.root in self.observers or self.loop is None:
            return
        try:
            observer = Observer()
            observer.schedule(_Events(self, self.loop), str(ix.root), recursive=True)
            observer.daemon = True
            observer.start()
            self.observers[ix.root] = observer
        except OSError as exc:  # e.g. inotify watch limit reached
            log.warning("cannot watch %s: %s (changes outside the editor are picked up on save)", ix.root, exc)

    def unwatch(self, ix: WorkspaceIndexer) -> None:
        observer = self.observers.pop(ix.root, None)
        if observer is not None:
            observer.stop()

    def shutdown(self, params: Any = None) -> None:
        for root in list(self.observers):
            self.observers.pop(root).stop()
