"""One workspace graph kept current for the MCP server: indexed on start, watched while served,
refused with "FalkorDB offline" while the database is unreachable, and brought up to date again
when it answers.

``LiveWorkspace(root, settings)``:

- ``start()`` starts the watcher (``index.watcher.FolderWatcher``, the language server's
  classification and hash check) and then the first index in a background thread (a full build
  runs in a child process, ``index.isolated``; an indexed workspace is re-opened incrementally).
- ``before_answer(wait_s)`` is called before every tool call: it raises ``FalkorDBOffline`` (the
  one seen last) while offline, ``NotReady`` when the first index has not finished within
  ``wait_s`` seconds, else applies the queued file changes at once (so an edit the watcher saw is
  in the graph before the answer) and returns ``Freshness``. When the folder's git branch changed
  since the last answer (``follow_head``), its branch's graph is re-opened first.
- ``went_offline(exc)`` starts the recovery thread: every ``RETRY_S`` seconds it reconnects
  (which restarts the embedded server) and brings the graph up to date (the server may have lost
  it), then answers are served again.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from orbit_lsp.config import Settings
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.graph.errors import FalkorDBOffline, GraphError
from orbit_lsp.graph.imports import ImportGraph
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.index.isolated import index_all_isolated
from orbit_lsp.index.watcher import Changes, FolderWatcher, apply_changes

log = logging.getLogger("orbit_lsp.mcp")
RETRY_S = 2.0  # how often an offline FalkorDB is probed


class NotReady(Exception):
    """The first index of the workspace is still running (the message says how far)."""


@dataclass
class Freshness:
    """How current the graph an answer read is: ``synced`` (``time.time()`` of the last time
    this process brought the graph up to date with the files), ``pending`` (changed paths seen
    by the watcher and not yet applied: only vanished files within their grace period),
    ``reindexed`` (files re-indexed just before this answer; -1: the whole folder)."""

    synced: float | None
    pending: int
    reindexed: int

    def to_dict(self) -> dict:
        when = (dt.datetime.fromtimestamp(self.synced, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                if self.synced else None)
        return {"updated": when, "pending_files": self.pending, "reindexed_now": self.reindexed}

    def text(self) -> str:
        if self.synced is None:
            return "graph: never indexed by this server"
        age = max(0.0, time.time() - self.synced)
        when = dt.datetime.fromtimestamp(self.synced, dt.timezone.utc).strftime("%H:%M:%S UTC")
        parts = [f"graph updated {when} ({age:.0f} s ago)"]
        if self.reindexed:
            parts.append("whole folder re-indexed first" if self.reindexed < 0
                         else f"{self.reindexed} changed file(s) re-indexed first")
        parts.append(f"{self.pending} file change(s) pending" if self.pending else "no changes pending")
        return "; ".join(parts)


class LiveWorkspace:
    """See the module docstring. ``store``: a ``GraphStore`` to share (default: a new one)."""

    def __init__(self, root: Path | str, settings: Settings, store: GraphStore | None = None):
        self.settings = settings
        self.store = store or GraphStore(settings)
        self.ix = WorkspaceIndexer(root, self.store, settings)
        self.root = self.ix.root
        self._lock = threading.Lock()  # the indexer's writers: first index, watcher, recovery
        self.ready = threading.Event()
        self.progress: tuple[int, int] = (0, 0)
        self.failure: str | None = None  # the first index failed for another reason than offline
        self.offline: FalkorDBOffline | None = None
        self._recovery: threading.Thread | None = None
        self._stopping = threading.Event()
        self.watcher = FolderWatcher(self.ix, self._apply)
        self._imports: tuple[int, ImportGraph] | None = None
        self._imports_lock = threading.Lock()

    @property
    def graph(self):
        return self.ix.graph

    def imports(self) -> ImportGraph:
        """The graph's IMPORTS edges in memory (``graph.imports``), read again whenever the
        indexer changed them (``imports_generation``): impact walks then cost no query per hop.
        Raises what ``ImportGraph.load`` raises."""
        with self._imports_lock:
            gen = self.ix.imports_generation
            if self._imports is None or self._imports[0] != gen:
                self._imports = (gen, ImportGraph.load(self.graph))
            return self._imports[1]

    # -- start and stop ----------------------------------------------------------------------
    def start(self) -> None:
        try:
            self.watcher.start()  # before indexing: nothing changed meanwhile is missed
        except OSError as exc:  # e.g. the inotify watch limit
            log.warning("cannot watch %s: %s; files changed later are not re-indexed", self.root, exc)
        threading.Thread(target=self._first_index, name="orbit-mcp-index", daemon=True).start()

    def stop(self) -> None:
        self._stopping.set()
        self.watcher.stop()

    def _first_index(self) -> None:
        def progress(done: int, total: int, rel: str) -> None:
            self.progress = (done, total)

        try:
            with self._lock:
                rep = index_all_isolated(self.ix, progress)
            log.info("indexed %s: %s files, %s symbols (%s)", self.root, rep.files, rep.symbols, rep.mode)
        except FalkorDBOffline as exc:
            self.went_offline(exc)  # the recovery indexes the folder
        except GraphError as exc:
            self.failure = f"indexing failed: {type(exc).__name__}: {exc}"
            log.error("%s", self.failure)
        except Exception as exc:  # noqa: BLE001 - reported in every answer instead of a silent hang
            self.failure = f"indexing failed: {type(exc).__name__}: {exc}"
            log.exception("indexing %s failed", self.root)
        finally:
            self.ready.set()

    # -- answers -----------------------------------------------------------------------------
    def before_answer(self, wait_s: float = 20.0) -> Freshness:
        """See the module docstring. Raises ``FalkorDBOffline`` or ``NotReady``."""
        if self.offline is not None:
            raise self.offline
        if not self.ready.wait(wait_s):
            done, total = self.progress
            raise NotReady(f"the workspace is still being indexed ({done}/{total} files); ask again in a few seconds")
        if self.offline is not None:
            raise self.offline
        if self.failure and self.ix.last_index_time is None:
            raise NotReady(self.failure)
        if self.follow_head():
            return self.before_answer(wait_s)
        try:
            rels, _ = self.watcher.flush(force=False)
        except FalkorDBOffline as exc:
            self.went_offline(exc)
            raise
        reindexed = -1 if rels is None else len(rels)
        return Freshness(self.ix.last_index_time, self.watcher.pending, reindexed)

    def follow_head(self) -> bool:
        """When the folder's git HEAD names another branch than its graph's (``graph.keys``):
        serve that branch's graph, re-opened in the background (only files that differ from its
        cache are re-indexed; a new branch starts from a shared graph or is built). True when
        it moved."""
        from orbit_lsp.graph import keys

        name = keys.graph_name(self.root, self.settings.graph_key)
        if name == self.ix.graph.name:
            return False
        with self._lock:
            if name == self.ix.graph.name:
                return False
            log.info("%s changed branch: graph %s -> %s", self.root, self.ix.graph.name, name)
            self.ready.clear()
            self.ix.use_graph(name)
            self._imports = None
        threading.Thread(target=self._first_index, name="orbit-mcp-index", daemon=True).start()
        return True

    def _apply(self, changes: Changes):
        if self.follow_head():  # a checkout: the new branch's graph is re-opened, covering them
            return set(), []
        with self._lock:
            if self.ix.last_index_time is None:  # the first index (or the recovery) covers them
                return set(), []
            try:
                return apply_changes(self.ix, changes)
            except FalkorDBOffline as exc:
                self.went_offline(exc)
                raise

    # -- FalkorDB offline --------------------------------------------------------------------
    def went_offline(self, exc: FalkorDBOffline) -> None:
        """Refuse answers with ``exc`` and poll until FalkorDB answers again (any thread)."""
        if self.offline is None:
            log.warning("%s", exc)
        self.offline = exc
        if self._recovery is None or not self._recovery.is_alive():
            self._recovery = threading.Thread(target=self._recover, name="orbit-mcp-recover", daemon=True)
            self._recovery.start()

    def _recover(self) -> None:
        while not self._stopping.wait(RETRY_S):
            self.store.reset()
            try:
                self.store.connect()
                with self._lock:
                    rep = self.ix.index_all()  # the server may have lost the graph, files may have changed
            except FalkorDBOffline as exc:
                self.offline = exc
                continue
            except Exception:  # noqa: BLE001 - keep trying; the answers say offline meanwhile
                log.exception("re-indexing after FalkorDB came back failed")
                continue
            log.warning("FalkorDB is back (%s); %s re-opened (%s)", self.store.where, self.root, rep.mode)
            self.offline = None
            self.ready.set()
            return

