"""Keeping a workspace graph current from file-system events, for any long-lived front end.

The pieces the language server (``orbit_lsp.server.lifecycle``) and the MCP server
(``orbit_lsp.mcp``) share:

- ``classify(ix, path, is_dir)``: whether an event's path matters and how — ``"file"`` (a source
  file the walk lists or the graph has), ``"dir"`` (a walked directory appeared or vanished),
  ``"rescan"`` (a ``.gitignore`` or JS/TS config changed: bring the whole folder up to date) or
  None (ignored: the root itself, ``.git``/``node_modules``/caches, ignored directories,
  temporaries, ``.env`` files, non-source files).
- ``linked_sources(ix, rel, path, is_dir)``: the indexed files that are symlinks (or lie under a
  symlinked directory) whose real target is ``path``: an event names the target (``bin/tool``),
  never the link (``tests/tool.py -> ../bin/tool``), so the link's path is queued as well
  (``warm_links(ix)`` after an index: the links are then kept up to date file by file).
- ``Changes`` and ``apply_changes(ix, changes)``: apply one folder's queued changes with the
  indexer's content-hash check (a file whose bytes the graph already has costs a read and a
  hash), in the caller's index thread.
- ``FolderWatcher``: a watchdog observer on one folder whose events are classified, debounced
  and applied in a background thread (the MCP server's watcher; the language server drives the
  same functions from its event loop). ``flush()`` applies what is pending at once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from watchdog.events import (DirCreatedEvent, DirDeletedEvent, DirMovedEvent, FileClosedEvent, FileCreatedEvent,
                             FileDeletedEvent, FileModifiedEvent, FileMovedEvent, FileSystemEvent,
                             FileSystemEventHandler)
from watchdog.observers import Observer

from orbit_lsp.index.js_modules import is_js_config
from orbit_lsp.index.py_syspath import PYTEST_CONFIGS
from orbit_lsp.index.walk import EXCLUDED_DIRS, LANGS

if TYPE_CHECKING:
    from orbit_lsp.index.indexer import IndexReport, WorkspaceIndexer

log = logging.getLogger("orbit_lsp.index")

WATCH_DEBOUNCE_S = 0.15   # quiet time that ends a burst of events (one save)
WATCH_MAX_DELAY_S = 1.0   # a steady stream of events still gets indexed this often
DELETE_GRACE_S = 0.6      # a vanished file must stay away this long to leave the graph
BULK_FILES = 32           # more changed paths than this in one folder: one incremental index_all
PROBE = "__orbit_probe__.py"  # a file name used to ask the filter whether a directory is walked


def classify(ix: "WorkspaceIndexer", rel: str, path: Path, is_dir: bool) -> str | None:
    """How an event on ``path`` (``rel``: its path relative to ``ix.root``) matters to the
    folder's graph: ``"file"``, ``"dir"``, ``"rescan"`` or None (see the module docstring).
    Cheap checks only (no reads)."""
    if rel in ("", ".") or any(part in EXCLUDED_DIRS for part in rel.split("/")):
        return None
    if is_dir:
        return "dir" if ix.filter.accepts(path / PROBE) else None
    if path.name == ".gitignore" or is_js_config(path.name) or ("/" not in rel and path.name in PYTEST_CONFIGS):
        return "rescan"  # what is walked, or how JS/TS or Python (pytest ``pythonpath``) imports resolve, may have changed
    if rel in ix.state:
        return "file"
    if os.path.splitext(path.name)[1].lower() in LANGS and ix.filter.accepts(path):
        return "file"
    return None  # temporaries (mod.py~, .swp, 4913), .env files, non-source files


@dataclass
class _Links:
    """The indexed files reached through a symlink, for one indexer: ``rels`` the indexed files
    it was computed for, ``real_dirs`` lexical directory -> its real path, ``real_of`` rel ->
    the real path of a file reached through a link, ``dirty`` the rels of files and
    directories an event may have turned into links, or back (looked at again, with every
    indexed file under them)."""

    rels: frozenset[str] = frozenset()
    real_dirs: dict[str, str] = field(default_factory=dict)
    real_of: dict[str, str] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)


_LINKS: "weakref.WeakKeyDictionary[WorkspaceIndexer, _Links]" = weakref.WeakKeyDictionary()
_LINKS_LOCK = threading.Lock()


def _real_of(root: str, real_root: str, real_dirs: dict[str, str], rel: str) -> str | None:
    """The real path of indexed file ``rel`` when it is reached through a symlink (the file
    itself or a directory on its way), else None: one ``lstat``, one ``realpath`` per new
    directory."""
    d, _, name = rel.rpartition("/")
    real_dir = real_dirs.get(d)
    if real_dir is None:
        lexical_dir = os.path.join(root, *d.split("/")) if d else root
        real_dir = real_dirs[d] = os.path.realpath(lexical_dir)
    lexical = os.path.join(real_dir, name)
    try:
        real = os.path.realpath(lexical) if os.path.islink(lexical) else lexical
    except OSError:
        return None
    return real if real != os.path.join(real_root, *rel.split("/")) else None


def _under(rel: str, prefixes: set[str]) -> bool:
    return any(rel == p or rel.startswith(p + "/") for p in prefixes)


def _link_map(ix: "WorkspaceIndexer") -> dict[str, list[str]]:
    """Real path -> rels of the indexed files reached through a symlink. Kept per indexer and
    brought up to date with the files indexed or dropped since and those under the paths of
    events that may have made or removed a link (``linked_sources``): a save in a workspace
    of 20,000 files does not ``lstat`` every one of them on the event loop."""
    rels = frozenset(ix.state)
    root = os.fspath(ix.root)
    real_root = os.path.realpath(root)
    with _LINKS_LOCK:
        links = _LINKS.get(ix)
        if links is None:
            links = _LINKS[ix] = _Links()
        todo = set(rels - links.rels)
        removed = links.rels - rels
        if links.dirty:
            dirty = links.dirty
            links.dirty = set()
            for d in [d for d in links.real_dirs if _under(d, dirty)]:
                del links.real_dirs[d]
            todo |= {r for r in rels if _under(r, dirty)}
        if todo or removed:
            real_of = {r: real for r, real in links.real_of.items() if r not in removed and r not in todo}
            for rel in todo:
                real = _real_of(root, real_root, links.real_dirs, rel)
                if real is not None:
                    real_of[rel] = real
            links.rels, links.real_of = rels, real_of
        found: dict[str, list[str]] = {}
        for rel, real in links.real_of.items():
            found.setdefault(real, []).append(rel)
    return found


def warm_links(ix: "WorkspaceIndexer") -> None:
    """Bring ``ix``'s links up to date now, in the caller's thread (the index thread, after an
    index), so that the first event after it does not look at every file."""
    _link_map(ix)


def linked_sources(ix: "WorkspaceIndexer", rel: str, path: Path, is_dir: bool = False) -> list[Path]:
    """Paths (under ``ix.root``) of the indexed files that are links, or lie under linked
    directories, whose real file is ``path`` (``rel``: its path relative to ``ix.root``; see
    the module docstring); usually none. Call it for every event: the indexed files under a
    directory, a symlink or a file reached through one that an event names are looked at again
    (a link made, removed or replaced); an event on a directory gives none itself."""
    if rel not in ("", ".") and not any(part in EXCLUDED_DIRS for part in rel.split("/")):
        with _LINKS_LOCK:
            links = _LINKS.get(ix)
            if links is not None and (is_dir or rel in links.real_of or os.path.islink(path)):
                links.dirty.add(rel)
    if is_dir:
        return []
    links_of = _link_map(ix)
    if not links_of:
        return []
    found = links_of.get(os.path.realpath(os.fspath(path)), ())
    return [ix.root / r for r in found]


@dataclass
class Changes:
    """Changes of one folder to apply in the index thread."""
    files: set[Path] = field(default_factory=set)
    dirs: set[Path] = field(default_factory=set)  # directories that appeared or vanished
    rescan: bool = False  # what the walk lists may have changed: bring the whole folder up to date


def files_under(ix: "WorkspaceIndexer", d: Path) -> list[Path]:
    """Source files the walk would list under directory ``d`` (symlinks not followed)."""
    out = []
    for top, dirs, files in os.walk(d, followlinks=False):
        dirs[:] = [x for x in dirs if x not in EXCLUDED_DIRS and ix.filter.accepts(Path(top) / x / PROBE)]
        out.extend(Path(top) / f for f in files if os.path.splitext(f)[1].lower() in LANGS)
    return out


def apply_changes(ix: "WorkspaceIndexer", w: Changes) -> tuple[set[str] | None, list[tuple[str | None, "IndexReport"]]]:
    """Index thread: apply one folder's queued changes. Returns the changed rels (None: the
    whole folder was brought up to date) and ``(rel, report)`` for each change made (``rel``
    None: a whole-folder index). Raises what the indexer raises (``FalkorDBOffline``, …)."""
    if w.rescan:
        rep = ix.index_all()
        return None, ([(None, rep)] if rep.mode != "unchanged" else [])
    files = set(w.files)
    gone: set[str] = set()
    for d in w.dirs:
        if d.is_dir():
            files.update(files_under(ix, d))
        else:
            rel = ix.rel_of(d)
            if rel:
                gone.update(r for r in list(ix.state) if r == rel or r.startswith(rel + "/"))
    by_rel: dict[str, Path] = {}
    for f in sorted(files):
        rel = ix.rel_of(f)
        if rel is not None and rel not in by_rel and rel not in gone:
            by_rel[rel] = ix.root / rel
    for rel in gone:
        by_rel[rel] = ix.root / rel
    if len(by_rel) > BULK_FILES:
        rep = ix.index_all()
        return None, ([(None, rep)] if rep.mode != "unchanged" else [])
    changed: set[str] = set()
    reports = []
    for rel, path in sorted(by_rel.items()):
        rep = ix.reindex_file(path)
        if rep.mode != "unchanged":
            changed.add(rel)
            reports.append((rel, rep))
    return changed, reports


# the events a folder is watched for (watchdog's ``event_filter``, which on Linux is also the
# inotify mask): not "opened" and "closed without a write", which say nothing of a change. With
# them, reading a large folder (the indexer reads every file; so do grep and editors) filled the
# kernel's event queue (16,384 by default) within a second: watchdog then reports an overflow and
# walks the whole tree again to restore its watches, every second of the index (the language
# server's first lenses with counts on 22,506 files: 230 s with them, 124 s without; RESULTS.md)
WATCHED_EVENTS = (FileCreatedEvent, FileDeletedEvent, FileModifiedEvent, FileMovedEvent, FileClosedEvent,
                  DirCreatedEvent, DirDeletedEvent, DirMovedEvent)


def watch_folder(handler: FileSystemEventHandler, root: Path, recursive: bool = True) -> Observer:
    """A started daemon observer sending ``handler`` the ``WATCHED_EVENTS`` under ``root``.
    Raises ``OSError`` when the folder cannot be watched (e.g. the inotify watch limit)."""
    observer = Observer()
    observer.schedule(handler, str(root), recursive=recursive, event_filter=list(WATCHED_EVENTS))
    observer.daemon = True
    observer.start()
    return observer


def event_paths(event: FileSystemEvent) -> list[Path]:
    """The paths an event names; none for what carries nothing (opened, closed without a write,
    a directory's "modified": a child's own event says more)."""
    if event.event_type in ("opened", "closed_no_write"):
        return []
    if event.is_directory and event.event_type == "modified":
        return []
    raw = [event.src_path] + ([event.dest_path] if getattr(event, "dest_path", "") else [])
    return [Path(p.decode("utf-8", "surrogateescape") if isinstance(p, bytes) else p) for p in raw]


@dataclass
class _Pending:
    kind: str
    last: float  # monotonic time of the last event


class FolderWatcher(FileSystemEventHandler):
    """Watches one folder (``ix.root``) and keeps its graph current from a background thread.

    ``apply(changes) -> (rels, reports)`` runs the work (the caller serialises it with its other
    indexer use, e.g. under a lock, and handles ``FalkorDBOffline``: the changes are then
    re-queued and retried); ``on_applied(rels, reports)`` is told what changed. ``start()``
    raises ``OSError`` when the folder cannot be watched (e.g. the inotify limit)."""

    def __init__(self, ix: "WorkspaceIndexer", apply: Callable[[Changes], tuple],
                 on_applied: Callable[[set[str] | None, list], None] | None = None):
        super().__init__()
        self.ix = ix
        self._apply = apply
        self._on_applied = on_applied
        self._pending: dict[Path, _Pending] = {}
        self._burst_start: float | None = None
        self._cond = threading.Condition()
        self._stopping = False
        self._observer = None
        self._thread: threading.Thread | None = None
        self._flush_lock = threading.Lock()  # one flush at a time (the thread or a caller)

    # -- events ------------------------------------------------------------------------------
    def on_any_event(self, event: FileSystemEvent) -> None:
        for p in event_paths(event):
            self.queue(p, event.is_directory)

    def queue(self, path: Path, is_dir: bool) -> None:
        """Queue a changed path (any thread)."""
        rel = self.ix.rel_of(path)
        if rel is None:
            return
        kind = classify(self.ix, rel, path, is_dir)
        for link in linked_sources(self.ix, rel, path, is_dir):
            self.queue(link, False)
        if kind is None:
            return
        with self._cond:
            now = time.monotonic()
            p = self._pending.get(path)
            if p is None:
                self._pending[path] = _Pending(kind, now)
            else:
                p.last = now
                if kind != "file":
                    p.kind = kind
            if self._burst_start is None:
                self._burst_start = now
            self._cond.notify_all()

    @property
    def pending(self) -> int:
        """Paths queued and not yet applied."""
        with self._cond:
            return len(self._pending)

    # -- applying ----------------------------------------------------------------------------
    def _take(self, force: bool) -> Changes | None:
        """The queued changes ready to apply (vanished files wait ``DELETE_GRACE_S`` after their
        last event unless ``force``), removed from the queue."""
        with self._cond:
            now = time.monotonic()
            batch: dict[Path, _Pending] = {}
            keep: dict[Path, _Pending] = {}
            for path, p in self._pending.items():
                if not force and p.kind == "file" and now - p.last < DELETE_GRACE_S and not os.path.lexists(path):
                    keep[path] = p
                else:
                    batch[path] = p
            self._pending = keep
            self._burst_start = None if not keep else self._burst_start
        if not batch:
            return None
        w = Changes()
        for path, p in batch.items():
            if p.kind == "rescan":
                w.rescan = True
            else:
                (w.dirs if p.kind == "dir" else w.files).add(path)
        return w

    def _requeue(self, w: Changes) -> None:
        with self._cond:
            now = time.monotonic()
            if w.rescan:
                self._pending.setdefault(self.ix.root / ".gitignore", _Pending("rescan", now))
            for d in w.dirs:
                self._pending.setdefault(d, _Pending("dir", now))
            for f in w.files:
                self._pending.setdefault(f, _Pending("file", now))

    def flush(self, force: bool = True) -> tuple[set[str] | None, list]:
        """Apply what is queued now, in the calling thread. Returns ``(rels, reports)`` as
        ``apply_changes`` (``(set(), [])`` when nothing was queued). On an error the changes
        stay queued and the error is raised."""
        with self._flush_lock:
            w = self._take(force)
            if w is None:
                return set(), []
            try:
                rels, reports = self._apply(w)
            except BaseException:
                self._requeue(w)
                raise
        if self._on_applied is not None and (rels is None or rels):
            try:
                self._on_applied(rels, reports)
            except Exception:  # noqa: BLE001 - a listener's failure must not stop re-indexing
                log.exception("watcher listener failed")
        return rels, reports

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not self._pending:
                    self._cond.wait()
                if self._stopping:
                    return
                now = time.monotonic()
                last = max(p.last for p in self._pending.values())
                start = self._burst_start if self._burst_start is not None else now
                due = min(last + WATCH_DEBOUNCE_S, start + WATCH_MAX_DELAY_S)
                if now < due:
                    self._cond.wait(due - now)
                    continue
            try:
                self.flush(force=False)
            except Exception as exc:  # noqa: BLE001 - kept queued; retried after a pause
                log.info("re-indexing %s failed: %s", self.ix.root, exc)
                with self._cond:
                    self._cond.wait(2.0)
                continue
            with self._cond:  # vanished files held back: wake up once their grace is over
                if self._pending and all(p.kind == "file" for p in self._pending.values()):
                    self._cond.wait(DELETE_GRACE_S)

    # -- start and stop ----------------------------------------------------------------------
    def start(self) -> None:
        self._observer = watch_folder(self, self.ix.root)
        self._thread = threading.Thread(target=self._run, name="orbit-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._observer is not None:
            self._observer.stop()
