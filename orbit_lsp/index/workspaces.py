"""The workspace folders one process serves, each with its own indexer and graph, and the
registry of every workspace orbit has indexed or served.

``WorkspaceSet`` maps a file path to the folder that owns it: the deepest folder containing it.
A folder nested inside another served folder is excluded from the outer folder's walk, so a
file of a multi-root workspace is indexed once, into exactly one graph. It knows nothing of
LSP: callers hand it filesystem paths.

``WorkspaceRegistry`` (``<data dir>/workspaces.json``) remembers, for each workspace root, its
graph name, when the command line last indexed it and when any orbit process last used it
(``orbit-lsp workspaces list|drop|prune`` reads it). Graph names are hashes of the root and its
git branch (``graph.keys``), so this file is the only way back from a graph to its folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orbit_lsp.config import Settings
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.index.roots import SHALLOW_EXCLUDE

if TYPE_CHECKING:  # imported where used: the command line's registry reads must not load the indexer
    from orbit_lsp.index.indexer import WorkspaceIndexer

log = logging.getLogger("orbit_lsp.index")

REGISTRY_FILE = "workspaces.json"
REGISTRY_MAX = 1000  # most workspaces remembered (the least recently used are forgotten)


def real(path: Path | str) -> Path:
    """Absolute, symlink-resolved path."""
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def _anchored_dir_pattern(rel: str) -> str:
    """A gitwildmatch pattern matching exactly the directory ``rel`` (relative, ``/``
    separators) under the root: ``/rel/`` with wildcard characters escaped."""
    escaped = "".join("\\" + ch if ch in "\\*?[]" else ch for ch in rel)
    if escaped.endswith(" "):
        escaped = escaped[:-1] + "\\ "
    return "/" + escaped + "/"


@dataclass
class WorkspaceRecord:
    """One registered code graph: ``root`` (real path of its workspace), ``graph`` (its name),
    ``indexed`` (when ``orbit-lsp`` last indexed it, ``time.time()``; None: never by the command
    line), ``used`` (when any orbit process last indexed, served or queried it), ``branch`` (the
    git branch it is the graph of, ``graph.keys.DETACHED``, or None: no git / not known) and
    ``key`` (the explicit graph key it was opened with, else None)."""

    root: str
    graph: str
    indexed: float | None = None
    used: float | None = None
    branch: str | None = None
    key: str | None = None

    def to_dict(self) -> dict:
        return {"root": self.root, "graph": self.graph, "indexed": self.indexed, "used": self.used,
                "branch": self.branch, "key": self.key}


class WorkspaceRegistry:
    """``<data_dir>/workspaces.json``: ``{"version": 3, "graphs": {graph: {"root", "branch", "key",
    "indexed", "used"}}}``, one entry per code graph (a folder has one per git branch). The
    earlier formats (``{"version": 2, "workspaces": {root: {"graph", …}}}`` and ``{root: indexed
    time}``) are read too. Updates are serialised across processes with a ``flock`` on
    ``workspaces.json.lock`` and written atomically. A convenience: failing to read or write it
    is logged, never raised."""

    def __init__(self, data_dir: Path | str):
        self.path = Path(data_dir).expanduser() / REGISTRY_FILE

    def load(self) -> dict[str, WorkspaceRecord]:
        """Graph name -> record; empty when the file is missing or unreadable."""
        from orbit_lsp.graph.keys import root_graph_name

        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        out: dict[str, WorkspaceRecord] = {}
        if not isinstance(data, dict):
            return out

        def num(v) -> float | None:
            return None if v is None else float(v)

        if data.get("version") == 3:
            for graph, v in (data.get("graphs") or {}).items() if isinstance(data.get("graphs"), dict) else ():
                try:
                    if isinstance(v, dict) and v.get("root"):
                        out[str(graph)] = WorkspaceRecord(str(v["root"]), str(graph), num(v.get("indexed")),
                                                          num(v.get("used")), v.get("branch"), v.get("key"))
                except (TypeError, ValueError):
                    continue
            return out
        items = data.get("workspaces") if data.get("version") == 2 else data
        for root, v in (items or {}).items() if isinstance(items, dict) else ():
            try:
                if isinstance(v, dict):  # version 2: root -> {graph, indexed, used}
                    rec = WorkspaceRecord(str(root), str(v.get("graph") or root_graph_name(root)),
                                          num(v.get("indexed")), num(v.get("used")))
                else:  # first format: root -> when the command line indexed it
                    rec = WorkspaceRecord(str(root), root_graph_name(root), float(v), float(v))
                out[rec.graph] = rec
            except (TypeError, ValueError):
                continue
        return out

    def by_root(self) -> dict[str, list[WorkspaceRecord]]:
        """Root -> its records (one per graph: per branch), most recently used first."""
        out: dict[str, list[WorkspaceRecord]] = {}
        for rec in self.load().values():
            out.setdefault(rec.root, []).append(rec)
        for recs in out.values():
            recs.sort(key=lambda r: r.used or r.indexed or 0.0, reverse=True)
        return out

    @contextlib.contextmanager
    def _locked(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _save(self, records: dict[str, WorkspaceRecord]) -> None:
        keep = sorted(records.values(), key=lambda r: r.used or r.indexed or 0.0, reverse=True)[:REGISTRY_MAX]
        doc = {"version": 3, "graphs": {r.graph: {"root": r.root, "branch": r.branch, "key": r.key,
                                                  "indexed": r.indexed, "used": r.used}
                                        for r in sorted(keep, key=lambda r: (r.root, r.graph))}}
        tmp = self.path.with_name(f"{self.path.name}.tmp{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(json.dumps(doc, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)

    def record(self, root: Path | str, indexed: bool = False, graph: str | None = None,
               key: str | None = None) -> None:
        """Note that the graph ``graph`` of ``root`` was used now (``indexed``: indexed by the
        command line now). ``graph`` None: the graph of ``root`` on its checked-out branch (or
        of ``key``); its branch is read from git when ``graph`` is that branch's graph."""
        from orbit_lsp.graph import keys

        path = str(real(root))
        gk = keys.workspace_key(path, key)
        name = graph or gk.name
        branch = gk.branch if name == gk.name else None
        now = time.time()
        try:
            with self._locked():
                records = self.load()
                rec = records.get(name) or WorkspaceRecord(path, name)
                rec.root = path
                rec.used = now
                if name == gk.name:
                    rec.branch, rec.key = branch, gk.key
                if indexed:
                    rec.indexed = now
                records[name] = rec
                self._save(records)
        except OSError as exc:
            log.info("could not record workspace %s in %s: %s", path, self.path, exc)

    def forget(self, graphs: list[str]) -> None:
        """Remove the records of ``graphs`` from the registry."""
        try:
            with self._locked():
                records = self.load()
                if any(g in records for g in graphs):
                    for g in graphs:
                        records.pop(g, None)
                    self._save(records)
        except OSError as exc:
            log.info("could not update %s: %s", self.path, exc)


class WorkspaceSet:
    """Folders -> ``WorkspaceIndexer``; thread-safe.

    ``settings`` is the user's; each indexer gets a copy whose ``exclude`` also lists the served
    folders nested inside it. When adding or removing a folder changes what an outer folder
    must leave out, that outer folder's root is put in ``dirty`` (``take_dirty()`` hands the
    set over): its owner must re-index it (``index_all``) for the change to reach its graph.
    """

    def __init__(self, store: GraphStore, settings: Settings):
        self.store = store
        self.settings = settings
        self._folders: dict[Path, WorkspaceIndexer] = {}
        self._lock = threading.Lock()
        self._dirty: set[Path] = set()
        self._shallow: set[Path] = set()  # folders served without their subdirectories

    # -- folders ------------------------------------------------------------------------------
    def add(self, folder: Path | str, shallow: bool = False) -> WorkspaceIndexer:
        """Serve ``folder`` (idempotent). Indexing is the caller's to start. ``shallow``: only
        the folder's own files, none of its subdirectories (``roots.SHALLOW_EXCLUDE``)."""
        root = real(folder)
        with self._lock:
            ix = self._folders.get(root)
            if ix is None:
                if shallow:
                    self._shallow.add(root)
                from orbit_lsp.index.indexer import WorkspaceIndexer

                ix = self._folders[root] = WorkspaceIndexer(root, self.store, self._settings_for(root),
                                                            graph_name=self._graph_name_locked(root, warn=True))
                self._reconcile_locked(changed=root)
                WorkspaceRegistry(self.settings.data_dir).record(root, graph=ix.graph.name,
                                                                 key=self.settings.graph_key)
            return ix

    def _graph_name_locked(self, root: Path, warn: bool = False) -> str:
        """The graph ``root`` should be served from now: the explicit key's
        (``Settings.graph_key``) unless another served folder has it already (two folders never
        share a graph), else the folder's on its checked-out git branch (``graph.keys``)."""
        from orbit_lsp.graph import keys

        key = self.settings.graph_key
        if key:
            name = keys.shared_graph_name(key)
            if not any(ix.graph.name == name for r, ix in self._folders.items() if r != root):
                return name
            if warn:
                log.warning("graph key %r is used by another served folder already; %s gets a graph of its own",
                            key, root)
        return keys.graph_name(root)

    def moved(self) -> list[tuple[WorkspaceIndexer, str]]:
        """Served folders whose graph is no longer the one they should use: their git HEAD now
        names another branch (``git checkout``/``switch``), or the graph key setting changed.
        ``(indexer, graph name to use)``; cheap (reads each folder's HEAD file)."""
        with self._lock:
            out = []
            for root, ix in self._folders.items():
                name = self._graph_name_locked(root)
                if name != ix.graph.name:
                    out.append((ix, name))
            return out

    def switch(self, ix: WorkspaceIndexer, graph_name: str) -> None:
        """Serve ``ix``'s folder from ``graph_name`` (``WorkspaceIndexer.use_graph``: waits for a
        running index of the folder). Its owner must then index it (``index_all``): only files
        that differ from that graph's cache are re-indexed."""
        ix.use_graph(graph_name)
        WorkspaceRegistry(self.settings.data_dir).record(ix.root, graph=graph_name, key=self.settings.graph_key)

    def remove(self, folder: Path | str) -> WorkspaceIndexer | None:
        """Stop serving ``folder``; its graph stays for the next time it is opened."""
        root = real(folder)
        with self._lock:
            ix = self._folders.pop(root, None)
            if ix is not None:
                self._dirty.discard(root)
                self._shallow.discard(root)
                self._reconcile_locked(changed=root)
            return ix

    def all(self) -> list[WorkspaceIndexer]:
        with self._lock:
            return list(self._folders.values())

    def get(self, folder: Path | str) -> WorkspaceIndexer | None:
        """The indexer serving exactly ``folder``, or None."""
        with self._lock:
            return self._folders.get(real(folder))

    def take_dirty(self) -> list[WorkspaceIndexer]:
        """Indexers whose exclusions changed since the last call (they need ``index_all``)."""
        with self._lock:
            out = [self._folders[r] for r in sorted(self._dirty) if r in self._folders]
            self._dirty.clear()
            return out

    # -- settings -----------------------------------------------------------------------------
    def update_settings(self, settings: Settings) -> None:
        """Use ``settings`` from now on, in every indexer too (its file filter is rebuilt, so
        the watcher applies a changed ``exclude`` at once)."""
        with self._lock:
            self.settings = settings
            for root, ix in self._folders.items():
                self._apply_locked(ix, self._settings_for(root))

    def nested_in(self, root: Path) -> list[str]:
        """Workspace-relative paths (``/`` separators) of the served folders strictly inside
        folder ``root``: their files are theirs (``owner``), not ``root``'s."""
        with self._lock:
            return self._nested(root)

    def _nested(self, root: Path) -> list[str]:
        """Workspace-relative paths of served folders strictly inside ``root``."""
        return sorted(os.path.relpath(other, root).replace(os.sep, "/")
                      for other in self._folders if other != root and root in other.parents)

    def is_shallow(self, folder: Path | str) -> bool:
        """Whether ``folder`` is served without its subdirectories."""
        with self._lock:
            return real(folder) in self._shallow

    def _settings_for(self, root: Path) -> Settings:
        nested = self._nested(root)
        extra = [_anchored_dir_pattern(r) for r in nested] + ([SHALLOW_EXCLUDE] if root in self._shallow else [])
        if not extra:
            return self.settings
        return self.settings.model_copy(update={"exclude": list(self.settings.exclude) + extra})

    @staticmethod
    def _apply_locked(ix: WorkspaceIndexer, settings: Settings) -> bool:
        changed = list(ix.settings.exclude) != list(settings.exclude)
        ix.settings = settings
        if changed:
            from orbit_lsp.index.walk import WorkspaceFilter

            ix.filter = WorkspaceFilter(ix.root, settings.exclude, settings.build_output())
        return changed

    def _reconcile_locked(self, changed: Path) -> None:
        """Folders containing ``changed`` now exclude (or include again) its files."""
        for root, ix in self._folders.items():
            if root != changed and root in changed.parents:
                if self._apply_locked(ix, self._settings_for(root)):
                    self._dirty.add(root)

    # -- ownership ----------------------------------------------------------------------------
    def owner(self, path: Path | str) -> tuple[WorkspaceIndexer, str] | None:
        """``(indexer, workspace-relative path)`` of the deepest folder containing ``path``, or
        None when no served folder contains it."""
        p = Path(os.path.abspath(os.fspath(path)))
        with self._lock:
            folders = list(self._folders.items())
        # the path as given, then (a link into a folder) its real path: realpath is a system
        # call per component, paid only when the path as given is in no folder
        return _deepest_owner(p, folders) or _deepest_owner(real(p), folders)


def _deepest_owner(path: Path, folders: list[tuple[Path, WorkspaceIndexer]]) -> tuple[WorkspaceIndexer, str] | None:
    """``(indexer, relative path)`` of the deepest of ``folders`` holding ``path``, else None."""
    best: WorkspaceIndexer | None = None
    for root, ix in folders:
        if (path == root or root in path.parents) and (best is None or len(root.parts) > len(best.root.parts)):
            best = ix
    if best is None:
        return None
    rel = best.rel_of(path)
    return (best, rel) if rel is not None else None


# -- sizes and dropping (``orbit-lsp workspaces``) ----------------------------------------------

@dataclass
class GraphSize:
    """``files``/``nodes``/``edges``: counts (None when the graph could not be read); ``memory_mb``:
    FalkorDB's ``GRAPH.MEMORY USAGE`` total in MB (None when the server lacks the command);
    ``cache_bytes``: size of the graph's cache files under ``<data dir>/cache``."""

    nodes: int | None = None
    edges: int | None = None
    memory_mb: float | None = None
    cache_bytes: int = 0
    files: int | None = None

    def to_dict(self) -> dict:
        return {"files": self.files, "nodes": self.nodes, "edges": self.edges, "memory_mb": self.memory_mb,
                "cache_bytes": self.cache_bytes}


NODE_COUNT = "MATCH (n) RETURN count(n)"
EDGE_COUNT = "MATCH ()-[r]->() RETURN count(r)"
FILE_COUNT = "MATCH (f:File) RETURN count(f)"


def cache_files(data_dir: Path | str, graph_name: str) -> list[Path]:
    """The cache files of ``graph_name`` (``<data dir>/cache/<graph>.sqlite`` and its journal)."""
    folder = Path(data_dir).expanduser() / "cache"
    return sorted(p for p in folder.glob(f"{graph_name}.sqlite*") if p.is_file())


def graph_size(store: GraphStore, graph_name: str, timeout_ms: int | None = None) -> GraphSize:
    """Sizes of one graph (see ``GraphSize``). Raises ``FalkorDBOffline``."""
    from orbit_lsp.graph.errors import QueryRejected, QueryTimeout

    size = GraphSize(cache_bytes=sum(p.stat().st_size for p in cache_files(store.settings.data_dir, graph_name)))
    g = store.graph(graph_name)
    try:
        size.nodes = int(g.ro_query(NODE_COUNT, timeout_ms=timeout_ms).rows[0][0])
        size.edges = int(g.ro_query(EDGE_COUNT, timeout_ms=timeout_ms).rows[0][0])
        size.files = int(g.ro_query(FILE_COUNT, timeout_ms=timeout_ms).rows[0][0])
    except (QueryRejected, QueryTimeout) as exc:
        log.info("could not count graph %s: %s", graph_name, exc)
    try:
        reply = store.execute("GRAPH.MEMORY", "USAGE", graph_name)
        fields = dict(zip(reply[0::2], reply[1::2])) if isinstance(reply, list) else {}
        total = fields.get("total_graph_sz_mb", fields.get(b"total_graph_sz_mb"))
        size.memory_mb = float(total) if total is not None else None
    except (QueryRejected, TypeError, ValueError) as exc:  # an older FalkorDB without the command
        log.info("GRAPH.MEMORY USAGE %s: %s", graph_name, exc)
    return size


def drop_graph(store: GraphStore, graph_name: str) -> int:
    """Delete code graph ``graph_name``, the scratch graph of an unfinished build of it, its
    generation marker, its published state (``index.overlay``) and its cache files, holding its write lock (waits for a writer to
    finish). Returns the cache bytes freed. Refuses anything but a code graph (``ValueError``).
    Raises ``FalkorDBOffline``."""
    from orbit_lsp.graph import writelock
    from orbit_lsp.graph.connection import CODE_GRAPH_PREFIX
    from orbit_lsp.index.indexer import build_graph_name

    from orbit_lsp.index import overlay

    if not graph_name.startswith(CODE_GRAPH_PREFIX):
        raise ValueError(f"{graph_name} is not a code graph")
    freed = 0
    with writelock.GraphWriteLock(store, graph_name):
        store.graph(graph_name).delete()
        store.graph(build_graph_name(graph_name)).delete()
        writelock.forget_marker(store, graph_name)
        overlay.forget(store, graph_name)
        for p in cache_files(store.settings.data_dir, graph_name):
            try:
                n = p.stat().st_size
                p.unlink()
                freed += n
            except OSError as exc:
                log.warning("could not remove %s: %s", p, exc)
    return freed
