"""Lifecycle: settings, indexing of the workspace folders, re-indexing on save and on changes
made outside the editor (watchdog), folders added or removed, shutdown.

- Settings come from ``initializationOptions``, the client's ``orbit`` configuration section
  (``workspace/configuration``) and the environment; ``workspace/didChangeConfiguration``
  re-reads them (the server registers for it when the client supports dynamic registration).
  Invalid values are named in a ``window/showMessage`` and replaced by their defaults.
- On ``initialized`` the documents already open are parsed (their first lenses say "indexing…"
  at once: ``OrbitServer.indexing``), then every workspace folder is watched and indexed, one work-done progress
  per folder (begin, ``done/total files`` reports, end with the counts and the mode:
  ``full``, ``incremental`` or ``unchanged``; cancellable). Folders added or removed at run time
  (``workspace/didChangeWorkspaceFolders``) are indexed or dropped.
- ``didSave`` and the watcher queue changed paths; a short debounce merges the events of one
  save (an atomic save is a burst of 2-6 events; a save is seen both as ``didSave`` and by the
  watcher). The indexer does nothing for content it already has, so one save is indexed once.
  A file that vanishes is removed from the graph only if it is still gone ``DELETE_GRACE_S``
  later (editors that save by renaming the old file away first). Every re-index that changed
  the graph is reported with a ``window/logMessage`` (type Log): ``orbit: re-indexed <rel>
  [<folder>] (<mode>, <ms> ms)`` or ``orbit: indexed <folder> (...)``.

After any (re-)index the ``after_index(indexer, rels)`` hooks of the other features run (``rels``
None: the whole folder) and code lenses are refreshed; when a folder stops being served their
``folder_removed(indexer)`` hooks run. All indexing runs in the server's index
thread; the event loop only queues work and awaits it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from watchdog.events import FileSystemEvent, FileSystemEventHandler

from orbit_lsp.index.cold import cold_sites
from orbit_lsp.index.indexer import IndexReport, WorkspaceIndexer
from orbit_lsp.index.isolated import index_all_isolated
from orbit_lsp.index.progress import PhaseClock, eta_text
from orbit_lsp.index.progress import words as progress_words
from orbit_lsp.index.roots import ROOT_MARKERS, in_project, too_broad
from orbit_lsp.index.watcher import (DELETE_GRACE_S, WATCH_DEBOUNCE_S, WATCH_MAX_DELAY_S, Changes, apply_changes,
                                     classify, event_paths, linked_sources, warm_links, watch_folder)
from orbit_lsp.server.app import OrbitServer, use_lsp_lines

log = logging.getLogger("orbit_lsp.server")
CLIENT_TIMEOUT_S = 10.0   # longest wait for the client's answer to a server request
LOADING_NOTICE_S = 3.0    # FalkorDB not answering after this long at start: say it is loading data
HEAD_POLL_S = 1.0         # how often the folders' git HEAD is read (a branch switch moves the graph)
OPEN_FIRST_MAX = 8        # open documents parsed before the first index starts
OPEN_FIRST_S = 1.0        # longest the first index waits for them


def _settings_object(value: Any) -> Any:
    """Settings as sent: an empty array is no settings (``None``), as clients that cannot tell
    an empty object from an empty list send it (Neovim encodes an empty Lua table as ``[]``).
    Anything else is returned as it is (the caller warns about a non-object)."""
    if isinstance(value, list) and not value:
        return None
    return value


def _report_line(rep: IndexReport) -> str:
    return f"{rep.files} files, {rep.symbols} symbols; {rep.parsed} parsed ({rep.mode})"


HOLD_ENV = "ORBIT_TEST_HOLD_INDEX"  # tests only: a folder's index waits until this file exists


def _index_all(ix: WorkspaceIndexer, report, cancel: threading.Event) -> IndexReport:
    """Index thread: ``index_all_isolated``. For tests of what the server answers while a folder
    is being indexed, the index first waits (cancellable) while the file named by the
    ``ORBIT_TEST_HOLD_INDEX`` environment variable (a path relative to the folder, or absolute)
    does not exist."""
    hold = os.environ.get(HOLD_ENV)
    release = os.path.join(ix.root, hold) if hold else None
    while release and not os.path.exists(release) and not cancel.is_set():
        time.sleep(0.02)
    rep = index_all_isolated(ix, report, cancel)
    warm_links(ix)  # here, not on the event loop at the first save
    return rep


class _Events(FileSystemEventHandler):
    """watchdog thread -> event loop: hands every path an event names to ``Feature.on_fs``.
    A directory's "modified" event (a child was added or removed) carries nothing the child's
    own event does not."""

    def __init__(self, feature: "Feature", loop: asyncio.AbstractEventLoop):
        self.feature = feature
        self.loop = loop

    def on_any_event(self, event: FileSystemEvent) -> None:
        for p in event_paths(event):
            try:
                self.loop.call_soon_threadsafe(self.feature.on_fs, p, event.is_directory)
            except RuntimeError:  # the loop is closed: the server is exiting
                return


@dataclass
class _Pending:
    kind: str  # "file", "dir" (appeared or vanished), "rescan" (a .gitignore changed)
    last: float  # monotonic time of the last event


class Feature:
    def __init__(self, server: OrbitServer):
        self.server = server
        self.observers: dict[Path, Any] = {}
        self.pending: dict[Path, _Pending] = {}
        self.burst_start: float | None = None  # first event not yet flushed
        self.flush_handle: asyncio.TimerHandle | None = None
        self.init_options: dict | None = None
        self.init_options_invalid = False
        self.client_config: dict | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.initial_index_done = asyncio.Event()
        self.cancels: set[threading.Event] = set()  # running index_all runs (set on shutdown)
        self._connected_store = None  # the GraphStore last connected to before indexing
        self.stopping = False
        self.head_task: asyncio.Future | None = None  # follows branch switches (``follow_heads``)
        self.head_lock = asyncio.Lock()  # one branch switch at a time (poll, flush, settings)

    def register(self) -> None:
        ls = self.server
        ls.on(types.INITIALIZE, self.initialize)
        ls.on(types.INITIALIZED, self.initialized)
        ls.on(types.WORKSPACE_DID_CHANGE_CONFIGURATION, self.did_change_configuration)
        ls.on(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS, self.did_change_folders)
        ls.on(types.TEXT_DOCUMENT_DID_SAVE, self.did_save)
        ls.on(types.SHUTDOWN, self.shutdown)
        ls.on_recovered.append(self.recovered)

    # -- start-up and settings ---------------------------------------------------------------
    def initialize(self, params: types.InitializeParams) -> None:
        use_lsp_lines(self.server.workspace)
        opts = _settings_object(params.initialization_options)
        self.init_options = opts if isinstance(opts, dict) else None
        self.init_options_invalid = opts is not None and not isinstance(opts, dict)
        # problems are announced in ``initialized``, once, together with the client's settings
        self.server.apply_settings(self.init_options, announce=False)

    async def initialized(self, params: types.InitializedParams) -> None:
        ls = self.server
        self.loop = asyncio.get_running_loop()
        ls.heap.start()
        if self.init_options_invalid:
            self._warn("orbit-lsp: initializationOptions must be an object; using defaults")
        folders = [ls.path_of(f.uri) for f in (ls.workspace.folders or {}).values()]
        if not folders and ls.workspace.root_uri:
            folders = [ls.path_of(ls.workspace.root_uri)]
        try:
            await self._pull_configuration()  # settings (e.g. indexHomeOrRoot) before folders are served
            for folder in folders:
                if folder is not None and folder.is_dir():
                    self.serve(folder)  # served at once (requests find their folder), indexed below
                elif folder is not None:
                    self._warn(f"orbit-lsp: workspace folder {folder} is not a directory; not indexed")
        finally:
            ls.folders_served.set()  # lens and hover requests that came meanwhile go on
        await self._parse_open_documents()
        ls.workspaces.take_dirty()  # nothing indexed yet
        await self._register_configuration_change()
        try:
            for ix in ls.workspaces.all():
                self.watch(ix)  # before indexing: nothing changed meanwhile is missed
            for ix in ls.workspaces.all():
                await self.index_folder(ix)
        finally:
            self.initial_index_done.set()
            if not self.stopping:
                self.head_task = asyncio.ensure_future(self._follow_heads())

    async def _parse_open_documents(self) -> None:
        """Parse the documents already open in folders about to be indexed (at most
        ``OPEN_FIRST_MAX``, for at most ``OPEN_FIRST_S``) before watching and indexing the
        folders compete for the CPU: their first lenses ("indexing…", ``index.cold``) are then
        answered from that parse at once."""
        ls = self.server
        loop = asyncio.get_running_loop()
        jobs = []
        for doc in list(ls.workspace.text_documents.values())[:OPEN_FIRST_MAX]:
            owner = ls.locate(doc.uri)
            if owner is not None and ls.indexing(owner[0]):
                ix, rel = owner
                data = doc.source.encode("utf-8", errors="surrogatepass")  # as ``lenses.Snapshot`` has it
                jobs.append(loop.run_in_executor(ls.file_pool, cold_sites, ix, rel, ix.root / rel, data))
        if jobs:
            await asyncio.wait(jobs, timeout=OPEN_FIRST_S)

    # -- branches ------------------------------------------------------------------------------
    async def _follow_heads(self) -> None:
        """Every ``HEAD_POLL_S``: move folders whose git branch changed to that branch's graph."""
        while not self.stopping:
            await asyncio.sleep(HEAD_POLL_S)
            try:
                await self.follow_heads()
            except Exception:  # noqa: BLE001 - keep following; the next poll tries again
                log.exception("following a branch switch failed")

    async def follow_heads(self) -> list[WorkspaceIndexer]:
        """Serve every folder whose graph changed (its git HEAD names another branch, or the
        ``graphKey`` setting changed) from its new graph, and index it: that graph is re-opened
        from its cache, and only the files that differ from it are re-indexed (a branch seen for
        the first time starts as a copy of the folder's previous graph or of a shared one:
        ``index.overlay``). Runs on the ``HEAD_POLL_S`` poll and before every batch of file
        events is applied, so a checkout's events go to the new branch's graph; events applied
        before HEAD moved (a checkout longer than ``WATCH_MAX_DELAY_S``) went to the old graph,
        whose cache records them: that branch re-indexes those files when it is opened again.
        The watcher's events wait while the folder is re-opened (it is not indexed) and find
        their files indexed already. Returns the folders moved."""
        ls = self.server
        moved = []
        async with self.head_lock:
            for ix, name in ls.workspaces.moved():
                if self.stopping:
                    break
                self._log(f"orbit: {ix.root} changed branch (graph {ix.graph.name} -> {name}); re-opening it")
                ls.first_index.setdefault(ix.root, "")  # "indexing…" from the switch on
                await ls.index(ls.workspaces.switch, ix, name)
                if ix.graph.name == name:
                    moved.append(ix)
                    await self.index_folder(ix)
                else:
                    ls.first_index.pop(ix.root, None)
        return moved

    def serve(self, folder: Path) -> WorkspaceIndexer | None:
        """Serve ``folder`` unless it is too broad (home directory, filesystem root) while the
        ``indexHomeOrRoot`` setting is off: then say so and serve nothing. With ``looseFolders:
        "shallow"`` (the Neovim plugin's default), a folder that is not in a project (no root
        marker in it or in a parent below the home directory: the editor opened a loose file
        there) is served shallow: its own files only, watched without its subdirectories
        (issue 18 item 4: a loose file used to index its whole tree in silence)."""
        ls = self.server
        why = too_broad(folder)
        if why is not None and not ls.settings.index_home_or_root:
            self._warn(f"orbit-lsp: not indexing {folder}: it is {why}. Open a project folder (one with "
                       f".git, pyproject.toml or package.json), or set orbit.indexHomeOrRoot to true.")
            return None
        shallow = why is None and ls.settings.loose_folders == "shallow" and not in_project(folder)
        ix = ls.workspaces.add(folder, shallow=shallow)
        if ix.last_index_time is None:
            ls.first_index.setdefault(ix.root, "")  # its index is queued: answers say "indexing…"
        if shallow:
            self._log(f"orbit: {folder} has no project marker ({', '.join(ROOT_MARKERS[:4])}, …): indexing "
                      f"its own files only, not its subfolders")
        return ix

    def _warn(self, message: str) -> None:
        self.server.window_show_message(types.ShowMessageParams(types.MessageType.Warning, message))

    def _log(self, message: str) -> None:
        log.info("%s", message)
        self.server.window_log_message(types.LogMessageParams(types.MessageType.Log, message))

    async def _pull_configuration(self) -> None:
        """Read the client's ``orbit`` section (when it supports ``workspace/configuration``)
        and apply the settings, announcing invalid values."""
        ls = self.server
        caps = ls.client_capabilities
        if caps and caps.workspace and caps.workspace.configuration:
            try:
                result = await asyncio.wait_for(ls.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section="orbit")])), CLIENT_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - a client that fails here still gets defaults
                log.info("workspace/configuration failed: %s", exc)
                result = None
            cfg = _settings_object(result[0]) if result else None
            if cfg is not None and not isinstance(cfg, dict):
                self._warn("orbit-lsp: the 'orbit' settings must be an object; using defaults")
            self.client_config = cfg if isinstance(cfg, dict) else None
        ls.apply_settings(self.init_options, self.client_config)

    async def _register_configuration_change(self) -> None:
        """Ask for ``workspace/didChangeConfiguration`` when the client registers it dynamically
        (VS Code sends it only then)."""
        ls = self.server
        caps = ls.client_capabilities
        dcc = caps.workspace.did_change_configuration if caps and caps.workspace else None
        if not (dcc and dcc.dynamic_registration):
            return
        try:
            await asyncio.wait_for(ls.client_register_capability_async(types.RegistrationParams(registrations=[
                types.Registration(id=f"orbit-config-{uuid.uuid4().hex[:8]}",
                                   method=types.WORKSPACE_DID_CHANGE_CONFIGURATION,
                                   register_options=types.DidChangeConfigurationRegistrationOptions(section="orbit"))])),
                CLIENT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - without it the client may still push changes
            log.info("client/registerCapability failed: %s", exc)

    async def did_change_configuration(self, params: types.DidChangeConfigurationParams) -> None:
        """Re-read the settings: from the notification when it carries an ``orbit`` object,
        else by pulling the section. Re-index when a setting that decides what is indexed
        (``exclude``, ``maxFileBytes``, the FalkorDB location) changed."""
        ls = self.server
        old = ls.settings
        settings = params.settings if params is not None else None
        if isinstance(settings, dict) and "orbit" in settings:
            cfg = _settings_object(settings["orbit"])
            if cfg is not None and not isinstance(cfg, dict):
                self._warn("orbit-lsp: the 'orbit' settings must be an object; using defaults")
                cfg = None
            self.client_config = cfg
            ls.apply_settings(self.init_options, self.client_config)
        else:
            await self._pull_configuration()
        new = ls.settings
        index_keys = ("falkordb_url", "data_dir", "exclude", "max_file_bytes", "graph_key")
        if any(getattr(old, k) != getattr(new, k) for k in index_keys):
            if (old.falkordb_url, old.data_dir) != (new.falkordb_url, new.data_dir):
                for ix in list(self.observers):
                    self.observers.pop(ix).stop()
                for ix in ls.workspaces.all():
                    self.watch(ix)
            await self.follow_heads()  # a changed graph key moves folders to another graph
            await self.reopen_all()
        elif old != new:
            ls.refresh_lenses()

    # -- indexing ---------------------------------------------------------------------------
    async def index_folder(self, ix: WorkspaceIndexer, notify: bool = True) -> IndexReport | None:
        """Index (or incrementally re-open) one folder with work-done progress. With
        ``notify`` the other features' ``after_index`` hooks run afterwards."""
        ls = self.server
        token = f"orbit-index-{uuid.uuid4().hex[:8]}"
        cancel = threading.Event()
        progress = None
        caps = ls.client_capabilities
        if caps and caps.window and caps.window.work_done_progress:
            try:
                await asyncio.wait_for(ls.work_done_progress.create_async(token), CLIENT_TIMEOUT_S)
                progress = token
            except Exception as exc:  # noqa: BLE001 - progress is a courtesy
                log.info("work done progress refused: %s", exc)
        if progress:
            fut = ls.work_done_progress.tokens.get(token)
            if fut is not None:
                fut.add_done_callback(lambda f: cancel.set() if f.cancelled() else None)
            shallow = " (no project marker: its own files only)" if ls.workspaces.is_shallow(ix.root) else ""
            ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(
                title=f"orbit: indexing {ix.root.name}", message=f"{ix.root}{shallow}", cancellable=True, percentage=0))
        loop = asyncio.get_running_loop()
        if self._connected_store is not ls.store and not await self._connect(progress):
            if progress:
                ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message="FalkorDB offline"))
                ls.work_done_progress.tokens.pop(token, None)
            return None
        last = [0.0, ""]
        clock = PhaseClock()
        first = ix.last_index_time is None  # answers say "indexing…" until this index ends
        if first:
            ls.first_index.setdefault(ix.root, "")

        def report(done: int, total: int, rel: str, phase: str = "read", work: float | None = None) -> None:  # index thread
            # every phase (reading, parsing, resolving, writing) with its own count; the
            # percentage is the whole index's share done, the message says the time left
            now = time.monotonic()
            clock.update(done, total, phase, work)
            if total == 0:  # a phase with nothing to do (a re-open that parses no file): no "0/0 files"
                return
            if (progress or first) and (now - last[0] >= 0.1 or done >= total or phase != last[1]):
                last[0], last[1] = now, phase
                word, unit = progress_words(phase)
                left = eta_text(clock.eta())
                message = f"{word} {done}/{total} {unit}" + (f" · {left}" if left else "")
                if first and ix.root in ls.first_index:
                    ls.first_index[ix.root] = message  # (one dict item set: safe from this thread)
                if progress:
                    loop.call_soon_threadsafe(ls.work_done_progress.report, token, types.WorkDoneProgressReport(
                        message=message, percentage=min(int(100 * clock.fraction), 100)))
        report.phases = True

        self.cancels.add(cancel)
        failure = "failed"
        try:
            rep = await ls.index(_index_all, ix, report, cancel)
        except Exception as exc:  # noqa: BLE001 - a bug must still end the progress and be seen
            log.exception("indexing %s failed", ix.root)
            rep, failure = None, f"failed: {type(exc).__name__}: {exc}"
            ls.window_log_message(types.LogMessageParams(types.MessageType.Error, f"orbit-lsp: indexing {ix.root} {failure}"))
        finally:
            self.cancels.discard(cancel)
            if first:
                # indexed (``last_index_time`` is set), or failed or cancelled: either way the
                # answers stop saying "indexing…"
                ls.first_index.pop(ix.root, None)
        if rep is None:
            msg = "FalkorDB offline" if ls.offline is not None else failure
        elif cancel.is_set():
            msg = f"cancelled ({_report_line(rep)})"
        else:
            msg = _report_line(rep)
        if progress:
            ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=msg))
            ls.work_done_progress.tokens.pop(token, None)
        if rep is not None:
            # the indexer's state (hundreds of thousands of objects that live as long as the
            # folder is served) leaves the cyclic collector's view: a full collection walking
            # it paused requests for 40+ ms on the standard library
            gc.freeze()
            self._log(f"orbit: indexed {ix.root} ({msg}, {rep.seconds * 1000:.0f} ms)")
            if notify and ls.workspaces.get(ix.root) is ix:  # not removed meanwhile
                self.reindexed(ix, None)
            if self.pending:
                self._schedule(WATCH_DEBOUNCE_S)  # changes seen while the folder was indexed
        elif first:
            ls.refresh_lenses()  # its "indexing…" lenses go: the folder is not indexed
        return rep

    async def _connect(self, progress: str | None) -> bool:
        """Connect to FalkorDB (starting the embedded server) in the index thread, saying so in
        the progress ``progress``: "starting FalkorDB", then, while it takes longer than
        ``LOADING_NOTICE_S``, that it is loading its data (a large snapshot takes seconds).
        False when it is offline (the server then says so and recovers by itself)."""
        ls = self.server
        store = ls.store
        what = "starting FalkorDB" if store.embedded else f"connecting to FalkorDB at {store.where}"
        ticker = None
        if progress:
            ls.work_done_progress.report(progress, types.WorkDoneProgressReport(message=f"{what}…"))
            started = time.monotonic()

            async def tick() -> None:
                await asyncio.sleep(LOADING_NOTICE_S)
                while True:
                    ls.work_done_progress.report(progress, types.WorkDoneProgressReport(
                        message=f"{what}: FalkorDB is loading its data ({time.monotonic() - started:.0f} s)…"))
                    await asyncio.sleep(1.0)

            ticker = asyncio.ensure_future(tick())
        try:
            ok = await ls.index(store.connect) is not None
        finally:
            if ticker is not None:
                ticker.cancel()
        if ok:
            self._connected_store = store
        return ok

    async def reopen_all(self) -> None:
        for ix in self.server.workspaces.all():
            await self.index_folder(ix)

    async def recovered(self) -> None:
        """FalkorDB is reachable again (graph requests are still refused): bring every graph
        up to date (the server may have lost them); the features hear of it once requests are
        answered again."""
        done = []
        for ix in self.server.workspaces.all():
            if await self.index_folder(ix, notify=False) is not None:
                done.append(ix)
        if done:
            self.loop.call_soon(lambda: [self.reindexed(ix, None) for ix in done])

    def reindexed(self, ix: WorkspaceIndexer, rels: set[str] | None) -> None:
        """Tell the other features what changed (None: the whole folder)."""
        for feature in self.server.features:
            hook = getattr(feature, "after_index", None)
            if hook is not None and feature is not self:
                try:
                    hook(ix, rels)
                except Exception:  # noqa: BLE001 - one feature's failure must not stop the others
                    log.exception("after_index hook of %s failed", type(feature).__module__)
        self.server.refresh_lenses()

    async def did_save(self, params: types.DidSaveTextDocumentParams) -> None:
        path = self.server.path_of(params.text_document.uri)
        if path is not None:
            self.on_fs(path, False)
            await self.flush()

    async def did_change_folders(self, params: types.DidChangeWorkspaceFoldersParams) -> None:
        ls = self.server
        for f in params.event.removed:
            path = ls.path_of(f.uri)
            if path is not None:
                ix = ls.workspaces.remove(path)
                if ix is not None:
                    self.unwatch(ix)
                    self._log(f"orbit: stopped serving {ix.root}")
                    for feature in ls.features:  # e.g. clear the folder's diagnostics
                        hook = getattr(feature, "folder_removed", None)
                        if hook is not None and feature is not self:
                            try:
                                hook(ix)
                            except Exception:  # noqa: BLE001
                                log.exception("folder_removed hook of %s failed", type(feature).__module__)
        added = []
        for f in params.event.added:
            path = ls.path_of(f.uri)
            if path is not None and path.is_dir():
                if ls.workspaces.get(path) is None:
                    ix = self.serve(path)
                    if ix is not None:
                        added.append(ix)
            elif path is not None:
                self._warn(f"orbit-lsp: workspace folder {path} is not a directory; not indexed")
        for ix in added:
            self.watch(ix)
        # outer folders whose nested folders changed: their graphs drop (or take back) those files
        for ix in ls.workspaces.take_dirty():
            if ix not in added:
                await self.index_folder(ix)
        for ix in added:
            await self.index_folder(ix)

    # -- file events (save and watchdog) -------------------------------------------------------
    def on_fs(self, path: Path, is_dir: bool) -> None:
        """Queue a changed path (on the event loop; cheap checks only). Directories are queued
        when they appear or vanish, files when the walk would list them or they are indexed,
        a ``.gitignore`` as a reason to bring its folder up to date."""
        if self.stopping:
            return
        owner = self.server.workspaces.owner(path)
        if owner is None:
            return
        ix, rel = owner
        kind = classify(ix, rel, path, is_dir)  # the checks the MCP server's watcher shares
        # an event names a symlink's target, never the link: re-index the links too
        for link in linked_sources(ix, rel, path, is_dir):
            self._queue(link, "file")
        if kind is not None:
            self._queue(path, kind)

    def _queue(self, path: Path, kind: str) -> None:
        now = time.monotonic()
        p = self.pending.get(path)
        if p is None:
            self.pending[path] = _Pending(kind, now)
        else:
            p.last = now
            if kind != "file":
                p.kind = kind
        if self.burst_start is None:
            self.burst_start = now
        # trailing debounce, but a steady stream of events is still indexed every WATCH_MAX_DELAY_S
        self._schedule(min(WATCH_DEBOUNCE_S, max(0.0, self.burst_start + WATCH_MAX_DELAY_S - now)))

    def _schedule(self, delay: float) -> None:
        if self.loop is None or self.stopping:
            return
        if self.flush_handle is not None:
            self.flush_handle.cancel()
        self.flush_handle = self.loop.call_later(delay, lambda: asyncio.ensure_future(self.flush()))

    async def flush(self) -> None:
        """Re-index every queued path (each file once), then notify the other features.
        Vanished files are held back until ``DELETE_GRACE_S`` after their last event; folders
        whose first index is not done yet keep their paths queued."""
        if self.flush_handle is not None:
            self.flush_handle.cancel()
            self.flush_handle = None
        if self.loop is not None and self.server.workspaces.moved():
            # a checkout: its file events belong to the new branch's graph, which is re-opened
            # first (the events then find their files indexed already)
            await self.follow_heads()
        now = time.monotonic()
        self.burst_start = None
        batch: dict[Path, _Pending] = {}
        keep: dict[Path, _Pending] = {}
        for path, p in self.pending.items():
            if p.kind == "file" and now - p.last < DELETE_GRACE_S and not os.path.lexists(path):
                keep[path] = p
            else:
                batch[path] = p
        self.pending = keep
        work: dict[WorkspaceIndexer, Changes] = {}
        for path, p in batch.items():
            owner = self.server.workspaces.owner(path)
            if owner is None:
                continue
            ix = owner[0]
            if ix.last_index_time is None:
                self.pending.setdefault(path, p)  # indexed (or re-queued) once the folder is
                continue
            w = work.setdefault(ix, Changes())
            if p.kind == "rescan":
                w.rescan = True
            else:
                (w.dirs if p.kind == "dir" else w.files).add(path)
        for ix, w in work.items():
            try:
                out = await self.server.index(self._apply, ix, w)
            except Exception as exc:  # noqa: BLE001 - a bug here must not stop later re-indexing
                log.exception("re-indexing %s failed", ix.root)
                self.server.window_log_message(types.LogMessageParams(
                    types.MessageType.Error, f"orbit-lsp: re-indexing {ix.root} failed: {type(exc).__name__}: {exc}"))
                continue
            if out is None:
                continue
            rels, reports = out
            for rel, rep in reports:
                ms = rep.seconds * 1000
                if rel is None:
                    self._log(f"orbit: indexed {ix.root} ({_report_line(rep)}, {ms:.0f} ms)")
                elif rep.removed_files and not os.path.lexists(ix.root / rel):
                    self._log(f"orbit: removed {rel} [{ix.root.name}] ({ms:.0f} ms)")
                else:
                    self._log(f"orbit: re-indexed {rel} [{ix.root.name}] ({rep.mode}, {ms:.0f} ms)")
            if rels is None or rels:
                self.reindexed(ix, rels)
        if keep:
            wait = max(p.last for p in keep.values()) + DELETE_GRACE_S - time.monotonic()
            self._schedule(max(0.01, wait))

    def _apply(self, ix: WorkspaceIndexer, w: Changes) -> tuple[set[str] | None, list[tuple[str | None, IndexReport]]]:
        """Index thread: apply one folder's queued changes (``index.watcher.apply_changes``)."""
        return apply_changes(ix, w)

    # -- watcher -------------------------------------------------------------------------------
    def watch(self, ix: WorkspaceIndexer) -> None:
        if ix.root in self.observers or self.loop is None or self.stopping:
            return
        try:
            self.observers[ix.root] = watch_folder(_Events(self, self.loop), ix.root,
                                                   recursive=not self.server.workspaces.is_shallow(ix.root))
        except OSError as exc:  # e.g. inotify watch limit reached
            log.warning("cannot watch %s: %s (changes outside the editor are picked up on save)", ix.root, exc)
            self._warn(f"orbit-lsp: cannot watch {ix.root} for changes ({exc}); files are re-indexed on save only")

    def unwatch(self, ix: WorkspaceIndexer) -> None:
        observer = self.observers.pop(ix.root, None)
        if observer is not None:
            observer.stop()

    def shutdown(self, params: Any = None) -> None:
        """Stop watching and cancel running indexing, so ``exit`` does not wait for it."""
        self.stopping = True
        self.server.heap.stop()
        self.server.selections.close()
        if self.head_task is not None:
            self.head_task.cancel()
        if self.flush_handle is not None:
            self.flush_handle.cancel()
            self.flush_handle = None
        for cancel in list(self.cancels):
            cancel.set()
        for root in list(self.observers):
            self.observers.pop(root).stop()
