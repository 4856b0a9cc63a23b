"""The indexer's side of one graph across processes and runs: the cross-process write lock
and the graph's generation marker (``_writing``, ``_begin_write``/``_end_write``, ``in_sync``,
``_resync``), and the per-file state cache (``<data_dir>/cache/<graph>.sqlite``: load, save,
and the check that the graph still agrees with it).

``GraphSync`` is a part of ``indexer.WorkspaceIndexer`` (a mixin: it uses the indexer's
``store``, ``graph``, ``state``, ``lock`` and ``_index_all``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
from pathlib import Path

from orbit_lsp.graph import writelock
from orbit_lsp.graph.errors import RESTARTED_WHILE_WRITING, FalkorDBOffline, QueryRejected
from orbit_lsp.index.full_build import build_graph_name
from orbit_lsp.index.report import GENERATIONS, IndexReport
from orbit_lsp.index.state import FileState, StateCache

log = logging.getLogger("orbit_lsp.index")


def _read_dirs(text: str | None) -> tuple[str, ...]:
    """The directories of a cache meta value written by ``json.dumps`` (a list of strings);
    () for none or a value that is not one."""
    try:
        got = json.loads(text) if text else []
    except ValueError:
        return ()
    return tuple(d for d in got if isinstance(d, str)) if isinstance(got, list) else ()


class GraphSync:
    """Write locking, generation markers and the state cache of a ``WorkspaceIndexer``."""

    # -- writing across processes -------------------------------------------------------------
    @property
    def _token(self) -> str | None:
        """The graph's generation marker that ``self.state`` matches (None: not known). Also
        kept by the store, which checks it when FalkorDB restarts."""
        return self._marker_token

    @_token.setter
    def _token(self, value: str | None) -> None:
        self._marker_token = value
        if value is None:
            self.store.expected_markers.pop(self.graph.name, None)
        else:
            self.store.expected_markers[self.graph.name] = value

    @contextlib.contextmanager
    def _writing(self):
        """This process's lock, then the cross-process lock of the graph. A FalkorDB that
        restarted while we held them (another server process, or a write that found its graph
        gone: "empty key") is reported as ``FalkorDBOffline``; the in-memory state is then no
        longer trusted (the next write re-syncs)."""
        with self.lock, self.write_lock:
            self.store.connect()
            server = self.store.server_id
            try:
                yield
            except FalkorDBOffline:
                self._token = None
                raise
            except QueryRejected as exc:
                if self.store.server_id != server or "empty key" in str(exc):
                    self._token = None
                    raise FalkorDBOffline(self.store.where, RESTARTED_WHILE_WRITING) from exc
                raise
            if self.store.server_id != server:
                self._token = None
                raise FalkorDBOffline(self.store.where, RESTARTED_WHILE_WRITING)

    def drop(self) -> None:
        """Remove this workspace's graph, the scratch graph of an interrupted build, the graph's
        generation marker and its cache file (after a writer in another process finished).
        The lock file stays (removing it could split a waiting writer from the next). Raises
        ``FalkorDBOffline``."""
        with self._writing():
            self.graph.delete()
            self.store.graph(build_graph_name(self.graph.name)).delete()
            writelock.forget_marker(self.store, self.graph.name)
            self.cache_path.unlink(missing_ok=True)
            self.state = {}
            self._live = None
            self._token = None
            self._touched, self._touched_all, self._meta_dirty = set(), False, False

    def _begin_write(self) -> str:
        """Mark the graph as being written (``dirty:<token>``); returns the new token."""
        token = writelock.new_token()
        writelock.write_marker(self.store, self.graph.name, writelock.DIRTY + token)
        self._token = None
        return token

    def _end_write(self, token: str) -> None:
        writelock.write_marker(self.store, self.graph.name, token)
        self._token = token
        self._meta_dirty = True

    def in_sync(self) -> bool:
        """Whether the graph is still the one this indexer last wrote or read (its generation
        marker is unchanged). Raises ``FalkorDBOffline``."""
        return self._token is not None and writelock.read_marker(self.store, self.graph.name) == self._token

    def _resync(self, why: str) -> IndexReport:
        note = f"graph {self.graph.name} changed since this process last read it ({why}); re-reading it"
        log.info(note)
        rep = self._index_all()
        rep.notes.insert(0, note)
        return rep

    @property
    def last_index_time(self) -> float | None:
        """When this indexer last brought (part of) the graph up to date (``time.time()``), None
        before its first index. Setting it bumps ``generation``: results computed from the graph
        before are stale (see ``graph.cache.QueryCache``). Generations are unique in the process,
        so two indexers of one graph (settings changed) never share one."""
        return self._last_index_time

    @last_index_time.setter
    def last_index_time(self, value: float | None) -> None:
        self._last_index_time = value
        self.generation = next(GENERATIONS)

    # -- cache ------------------------------------------------------------------------------
    @property
    def cache_path(self) -> Path:
        """SQLite file holding one pickled ``FileState`` per file (structure only)."""
        return Path(self.settings.data_dir) / "cache" / f"{self.graph.name}.sqlite"

    @property
    def _cache(self) -> StateCache:
        return StateCache(self.cache_path, self.root, "" if self.value_flow else "-names")

    def _cached_python_files(self) -> int:
        """Python files in the cache of this graph (any version), 0 without one: the size
        ``value_flow`` goes by before the first walk."""
        if not self.cache_path.exists():
            return 0
        try:
            with contextlib.closing(sqlite3.connect(f"file:{self.cache_path}?mode=ro", uri=True)) as db:
                return db.execute("SELECT count(*) FROM files WHERE rel LIKE '%.py'").fetchone()[0]
        except sqlite3.Error:
            return 0

    def _cache_db(self) -> sqlite3.Connection:
        return self._cache.connect()

    def _load_cache(self) -> dict[str, FileState]:
        states, meta = self._cache.load()
        self._cache_token = meta.get("graph_token")
        if meta:
            self._written_root_package = meta.get("root_package", "")
            self._written_pythonpath = _read_dirs(meta.get("pythonpath"))
        return states

    def _cache_meta(self) -> dict[str, str]:
        return {"root_package": self._written_root_package,
                "pythonpath": json.dumps(list(self._written_pythonpath)),
                "graph_token": self._token or ""}

    def save_cache(self, rels: set[str] | None = None) -> None:
        """Persist per-file state for the next run's incremental open: every file, or only
        ``rels`` (rows of files no longer indexed are deleted)."""
        with self.lock:
            self._cache.save(self.state, self._cache_meta(), rels)
            self._meta_dirty = False

    def _persist(self) -> None:
        """Save what changed since the last save (everything after a full build: the states
        it staged while its writes were in flight, ``StateCache.stage``)."""
        staged, self._cache_staged = self._cache_staged, False
        if self._touched_all:
            with self.lock:
                if staged and self._cache.commit_stage(self._cache_meta()):
                    self._meta_dirty = False
                else:
                    self.save_cache()
        elif self._touched or self._meta_dirty:
            self.save_cache(self._touched)
        self._touched_all = False
        self._touched = set()

    def _graph_files(self) -> list[tuple[str, str]] | None:
        """``(path, hash)`` of every File node (a path twice when the graph holds it twice),
        None when there is no graph."""
        if not self.graph.exists():
            return None
        return [(p, h) for p, h in self.graph.query("MATCH (f:File) RETURN f.path, f.hash").rows]

    def _graph_disagrees(self, files: list[tuple[str, str]], cache: dict[str, FileState]) -> str | None:
        """Why the graph does not match ``cache`` (None: it does): the marker, the File nodes
        (duplicates, paths, hashes), the number of Symbol nodes."""
        marker = writelock.read_marker(self.store, self.graph.name)
        if marker is not None and marker.startswith(writelock.DIRTY):
            return "a writer stopped before it finished"
        if marker is not None and marker != self._cache_token:
            return "written by another process or restored from an older snapshot"
        if marker is None and self._cache_token:
            return "its generation marker is missing"
        hashes = dict(files)
        if len(hashes) != len(files):
            return f"{len(files) - len(hashes)} duplicate File nodes"
        if set(hashes) != set(cache) or any(hashes[r] != cache[r].hash for r in cache):
            return "file hashes differ from the cache"
        symbols = self.graph.query("MATCH (s:Symbol) RETURN count(s)").rows[0][0]
        expected = sum(st.symbols for st in cache.values())
        if symbols != expected:
            return f"{symbols} Symbol nodes where the files define {expected}"
        return None
