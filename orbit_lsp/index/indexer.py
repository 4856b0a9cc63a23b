"""The workspace indexer: files on disk -> code graph, fully or one file at a time.

``WorkspaceIndexer`` keeps, per file, its content hash, its extracted facts and its resolved
edges (in memory, and in ``<data_dir>/cache/<graph>.sqlite`` between runs; the cache holds only
structure, never file contents). Re-indexing one file replaces that file's subgraph and re-binds
the calls *into* it from other files, so an incremental graph equals a full rebuild:

- interface unchanged (same symbols, bindings and classes): the file's Symbol nodes are updated
  in place, only its own outgoing edges are rewritten;
- interface changed: its new symbols are created, vanished ones deleted, and every file whose
  resolution consulted a part of its interface that changed (``FileEdges.deps``, entities such
  as one name of one scope) is re-resolved with the resolver kept from the last build, whose
  memoised values that consulted those parts are forgotten;
- a file added or removed (the module table changed): every file is re-resolved from the cached
  facts and those whose edges changed are rewritten.

A file that fails to parse keeps its last good graph; the error is stored on its File node
(``parse_error``) and returned. Indexing is serialised by a lock; callers may use threads.

Writers of one graph are serialised across processes (``graph.writelock.GraphWriteLock``) and
every write is checked against the graph's generation marker: a writer whose state is older
than the graph (another process wrote since, or FalkorDB came back from an older snapshot)
re-syncs from the cache and the disk before writing. A full build is written into a scratch
graph and renamed over the workspace's graph in one step, and an incremental update is sent in
one MULTI/EXEC, so readers see the old graph or the new one, never a half-written one. On open, a graph that disagrees with the cache (marker,
file hashes, duplicate File paths, more Symbol nodes than the files have symbols) is rebuilt.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import os
import pickle
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from orbit_lsp.config import Settings
from orbit_lsp.graph import writelock
from orbit_lsp.graph import keys
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.graph.errors import FalkorDBOffline, QueryRejected
from orbit_lsp.graph.schema import ensure_indexes
from orbit_lsp.graph.writer import GraphWriter
from orbit_lsp.index.languages import PARSED_LANGS, WorkspaceResolver, changed_entities, configs_changed, parse_file
from orbit_lsp.index.resolve import full_qual, package_info
from orbit_lsp.index.parsing import (  # noqa: F401 (re-exported: imported from here by callers)
    content_hash,
    count_lines,
    gc_paused,
    nonascii_lines,
    parse_many,
    parse_python,
)
from orbit_lsp.index.state import CACHE_VERSION, FACTS, FileState, LazyFacts, StateCache  # noqa: F401 (re-exported)
from orbit_lsp.index.walk import LANGS, WorkspaceFilter, classify_file, is_dotenv, read_regular_file, walk_workspace

log = logging.getLogger("orbit_lsp.index")

Progress = Callable[[int, int, str], None]  # (done, total, rel)
# A callback whose ``phases`` attribute is true is phase-aware: it is called for every phase as
# ``progress(done, total, rel, phase)``, each phase counting from 0 to its own total (files for
# read, parse and resolve; write batches for write; ``rel`` "" when no file is meant). Any
# other callback is called, as always, for the read phase only.
from orbit_lsp.index.progress import PHASES  # noqa: E402 (its place: the comment above)


def report_progress(progress, done: int, total: int, rel: str, phase: str = "read") -> None:
    """Call ``progress`` (may be None) for ``phase`` if it takes that phase (see ``PHASES``)."""
    if progress is None:
        return
    if getattr(progress, "phases", False):
        progress(done, total, rel, phase)
    elif phase == "read":
        progress(done, total, rel)


_GENERATIONS = itertools.count(1)
# decoded facts a full build keeps at once (``state.FACTS`` is raised to this while it
# resolves): a resolution consults a file's own facts and those of what it imports, so a few
# thousand recently used files cover the packages being resolved; more only costs memory
BUILD_DECODED_FACTS = 2048
BUILD_GRAPH_PREFIX = "orbit_build_"  # scratch graph of a full build: orbit_build_<code graph name>


def build_graph_name(graph_name: str) -> str:
    """Name of the scratch graph a full build of ``graph_name`` is written into before it is
    renamed over it."""
    return BUILD_GRAPH_PREFIX + graph_name


def _import_edges(st) -> tuple:
    """A file's IMPORTS edges as written (targets with lines, which are type-only), for change
    detection."""
    e = st.edges if st is not None else None
    return (e.imports, e.type_only) if e is not None else ({}, set())


@dataclass
class IndexReport:
    """Summary of an indexing run: counts, seconds, and per-phase timings."""

    files: int = 0
    parsed: int = 0
    reused: int = 0
    symbols: int = 0
    imports: int = 0
    calls: int = 0
    packages: int = 0
    inherits: int = 0
    unresolved_calls: int = 0
    call_sites: int = 0  # bound call sites (the lines of every CALLS edge)
    flow_rounds: int = 0  # resolution rounds until value flows settled (full build)
    flow_files: int = 0  # files resolved again in those rounds after the first
    written_files: int = 0
    removed_files: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    parse_errors: dict[str, str] = field(default_factory=dict)
    mode: str = "full"  # full | incremental | unchanged | cancelled
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # re-syncs and rebuilds and why
    parsed_paths: list[str] = field(default_factory=list)  # files read and parsed again (index_all)


def unresolved_sites(names: list[str], lines: list[int] | None) -> list[str] | None:
    """``Symbol.unresolved_sites``: ``"name@line"`` of each unbound call site of a caller, ordered
    by line (None when the lines are not known: edges resolved by an older version)."""
    if not lines or len(lines) != len(names):
        return None
    return [f"{n}@{ln}" for ln, n in sorted(zip(lines, names))]


class WorkspaceIndexer:
    """Indexes one workspace root into its graph ``orbit_code_<id>``.

    Raises ``FalkorDBOffline`` from any method that writes when FalkorDB is unreachable.
    """

    def __init__(self, root: Path | str, store: GraphStore, settings: Settings | None = None,
                 graph_name: str | None = None):
        self.root = Path(os.path.realpath(os.fspath(root)))
        self.store = store
        self.settings = settings or store.settings
        # the folder's graph on its git branch, or the explicit key's (``graph.keys``)
        self.graph = store.graph(graph_name or keys.graph_name(self.root, self.settings.graph_key))
        self.state: dict[str, FileState] = {}
        self.aliases: dict[str, str] = {}
        self.filter = WorkspaceFilter(self.root, self.settings.exclude, self.settings.build_output())
        self.lock = threading.RLock()
        self._last_index_time: float | None = None
        self.generation = next(_GENERATIONS)  # a new value for every change made to the graph
        self.imports_generation = next(_GENERATIONS)  # a new value when IMPORTS edges change
        self.skipped: dict[str, str] = {}
        self._written_root_package = ""  # root_package the graph's qualified names were built with
        self._touched: set[str] = set()  # files whose state changed since the cache was saved
        self._touched_all = False
        self._cache_blobs: list[tuple[str, bytes]] | None = None  # a full build's pickled state
        # the resolver of the last build or update, with its memo, and the module table it was
        # built on: re-indexing a file reuses it (see ``_update``)
        self._live: tuple[tuple, WorkspaceResolver] | None = None
        self.write_lock = writelock.GraphWriteLock(store, self.graph.name)
        self.__token: str | None = None
        self._cache_token: str | None = None  # the marker the loaded cache was saved with
        self._meta_dirty = False  # the cache meta (marker) must be saved

    # -- writing across processes -------------------------------------------------------------
    @property
    def _token(self) -> str | None:
        """The graph's generation marker that ``self.state`` matches (None: not known). Also
        kept by the store, which checks it when FalkorDB restarts."""
        return self.__token

    @_token.setter
    def _token(self, value: str | None) -> None:
        self.__token = value
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
                    raise FalkorDBOffline(self.store.where, "the server restarted while orbit was writing "
                                          "the graph; the next index brings it up to date") from exc
                raise
            if self.store.server_id != server:
                self._token = None
                raise FalkorDBOffline(self.store.where, "the server restarted while orbit was writing the "
                                      "graph; the next index brings it up to date")

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
        self.generation = next(_GENERATIONS)

    # -- cache ------------------------------------------------------------------------------
    @property
    def cache_path(self) -> Path:
        """SQLite file holding one pickled ``FileState`` per file (structure only)."""
        return Path(self.settings.data_dir) / "cache" / f"{self.graph.name}.sqlite"

    @property
    def _cache(self) -> StateCache:
        return StateCache(self.cache_path, self.root, "" if self.settings.value_flow else "-names")

    def _cache_db(self) -> sqlite3.Connection:
        return self._cache.connect()

    def _load_cache(self) -> dict[str, FileState]:
        states, meta = self._cache.load()
        self._cache_token = meta.get("graph_token")
        if meta:
            self._written_root_package = meta.get("root_package", "")
        return states

    _pickle_states = staticmethod(StateCache.pickle_states)

    def save_cache(self, rels: set[str] | None = None, blobs: list[tuple[str, bytes]] | None = None) -> None:
        """Persist per-file state for the next run's incremental open: every file, or only
        ``rels`` (rows of files no longer indexed are deleted). ``blobs``: every file's state,
        already pickled (by a full build, while its writes were in flight)."""
        with self.lock:
            self._cache.save(self.state, {"root_package": self._written_root_package,
                                          "graph_token": self._token or ""}, rels, blobs)
            self._meta_dirty = False

    def _persist(self) -> None:
        """Save what changed since the last save (everything after a full build)."""
        blobs, self._cache_blobs = self._cache_blobs, None
        if self._touched_all:
            self.save_cache(blobs=blobs)
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

    # -- helpers ----------------------------------------------------------------------------
    def nonascii_lines(self, rel: str) -> frozenset[int] | None:
        """The 1-based lines with non-ASCII characters in the content ``rel``'s graph was built
        from (empty for an ASCII file): on every other line its byte columns are LSP characters
        in every encoding, without reading the file. None when not known (not indexed)."""
        st = self.state.get(rel)
        return st.nonascii_lines if st is not None else None

    def rel_of(self, path: Path | str) -> str | None:
        """Workspace-relative path (``/`` separators) of ``path``, or None when outside."""
        p = os.path.abspath(os.fspath(path))
        root = str(self.root)
        if not (p == root or p.startswith(root.rstrip(os.sep) + os.sep)):
            real = os.path.realpath(p)
            if not real.startswith(root.rstrip(os.sep) + os.sep):
                return None
            p = real
        rel = os.path.relpath(p, root).replace(os.sep, "/")
        # a path through an in-workspace symlinked directory maps to its first-reached spelling
        for link, target in self.aliases.items():
            if rel.startswith(link + "/"):
                rel = (target + rel[len(link):]).lstrip("/")
        return rel

    def _read(self, rel: str) -> bytes | None:
        path = self.root / rel
        if is_dotenv(rel) or is_dotenv(os.path.realpath(path)):
            return None
        try:
            size = path.stat().st_size
            if size > self.settings.max_file_bytes:
                self.skipped[rel] = f"larger than {self.settings.max_file_bytes} bytes"
                return None
            data = read_regular_file(path)  # never blocks on a FIFO or device swapped in
        except OSError:
            return None
        reason = classify_file(path, data, self.settings.max_file_bytes)
        if reason:
            self.skipped[rel] = reason
            log.info("skipped %s: %s", rel, reason)
            return None
        return data

    def _new_state(self, rel: str, data: bytes, h: str, old: FileState | None,
                   parsed: tuple | None = None) -> FileState:
        lang = LANGS.get(os.path.splitext(rel)[1].lower(), "")
        st = FileState(rel, lang, h, count_lines(data), seen_hash=h, nonascii_lines=nonascii_lines(data))
        if lang in PARSED_LANGS:
            nsyms = None
            if parsed is not None:
                facts, blob, err, nsyms = parsed
            else:
                try:
                    facts, err = parse_file(rel, data)
                except Exception as exc:  # noqa: BLE001 - a bug on one file must not stop the index
                    log.exception("extracting %s failed", rel)
                    facts, err = None, f"line 0: orbit could not extract this file ({type(exc).__name__}: {exc})"
                blob = None
            if err is None:
                if blob is not None:
                    st.set_facts_blob(blob, facts, nsyms)
                else:
                    st.facts = facts
            else:
                st.parse_error = err
                log.warning("parse error in %s: %s", rel, err)
                if old is not None and old.facts_blob is not None:
                    # keep the last good graph
                    st.facts_blob, st.symbols, st.lines, st.hash = old.facts_blob, old.symbols, old.lines, old.hash
                    st.nonascii_lines = old.nonascii_lines
                elif facts is not None:
                    st.facts = facts  # no last graph: what an error-tolerant parser (JS/TS) still found
        return st

    @property
    def root_package(self) -> str:
        """The root directory's name when the root is itself a package (has ``__init__.py``)."""
        return self.root.name if "__init__.py" in self.state and self.root.name.isidentifier() else ""

    def _resolver(self, facts: dict | None = None) -> WorkspaceResolver:
        """A resolver over the current state: facts decoded on use (``LazyFacts``), or the
        given ``facts`` (a full build decodes every file once)."""
        table = facts if facts is not None else LazyFacts(lambda: self.state)
        return WorkspaceResolver(table, set(self.state), self.aliases, self.root_package, self.root,
                                 value_flow=self.settings.value_flow)

    def _module_table(self) -> tuple:
        """What a ``Resolver`` is built on besides the facts: indexed paths, aliases, root package."""
        return frozenset(self.state), tuple(sorted(self.aliases.items())), self.root_package

    # -- full / re-open -----------------------------------------------------------------------
    def needs_full_build(self) -> bool:
        """Whether ``index_all`` would build the graph from scratch: no graph, or no usable
        cache (another version, another root, no rows). Cheap: no file is read. (A cache whose
        hashes disagree with the graph also leads to a full build; that is found only by
        ``index_all`` itself.)"""
        if not self.graph.exists():
            return True
        meta = self._cache.usable()
        if meta is None:
            return True
        marker = writelock.read_marker(self.store, self.graph.name)
        return marker is not None and marker != meta.get("graph_token")

    def index_all(self, progress: Progress | None = None, cancel: threading.Event | None = None,
                  rebuild: bool = False) -> IndexReport:
        """Walk the workspace and bring the graph up to date.

        First run (or a graph that disagrees with the cache, or ``rebuild``): full build, into a
        scratch graph renamed over the workspace's graph when complete. Later runs parse only
        files whose content hash changed and rewrite only what changed. Waits while another
        process writes the same graph. Returns an ``IndexReport`` (``notes``: why the graph was
        rebuilt or re-read); raises ``FalkorDBOffline``.
        """
        from orbit_lsp.index import overlay

        with self._writing():
            note = None if rebuild else overlay.seed(self)  # a shared graph or state to start from
            rep = self._index_all(progress, cancel, rebuild)
            if note:
                rep.notes.insert(0, note)
            overlay.after_index(self, rep)  # a shared graph publishes its per-file state
            return rep

    def use_graph(self, graph_name: str) -> None:
        """Index into ``graph_name`` from now on (the folder's git branch changed): the state of
        the previous graph is forgotten; the next ``index_all`` re-opens the new graph from its
        cache (only files that differ from it are re-indexed) or builds it. Until then
        ``last_index_time`` is None (the folder is not indexed)."""
        with self.lock:
            if graph_name == self.graph.name:
                return
            on_wait = self.write_lock.on_wait
            self._token = None  # forgets the old graph's expected marker
            self.graph = self.store.graph(graph_name)
            self.write_lock = writelock.GraphWriteLock(self.store, graph_name, on_wait=on_wait)
            self.state = {}
            self._live = None
            self._cache_token = None
            self._cache_blobs = None
            self._touched, self._touched_all, self._meta_dirty = set(), False, False
            self._written_root_package = ""
            self.imports_generation = next(_GENERATIONS)
            self.last_index_time = None

    def _index_all(self, progress: Progress | None = None, cancel: threading.Event | None = None,
                   rebuild: bool = False) -> IndexReport:
        with self.lock, gc_paused():
            t0 = time.perf_counter()
            rep = IndexReport()
            timings = rep.timings
            known = self._token  # the graph as this indexer last saw it
            self._live = None  # the state is rebuilt from the disk and the cache
            walk = walk_workspace(self.root, self.settings.max_file_bytes, self.settings.exclude,
                                  classify=False,  # _read classifies the bytes it reads
                                  build_output=self.settings.build_output())
            self.aliases = walk.aliases
            self.skipped = dict(walk.skipped)
            timings["walk"] = time.perf_counter() - t0

            graph_files = self._graph_files()
            cache = self._load_cache() if graph_files is not None else {}
            why = None
            if graph_files is not None and rebuild:
                why = "a rebuild was asked for"
            elif graph_files is not None and cache:
                why = self._graph_disagrees(graph_files, cache)
            if why is not None:
                rep.notes.append(f"rebuilding graph {self.graph.name}: {why}")
                log.warning("%s", rep.notes[-1])
            consistent = graph_files is not None and bool(cache) and why is None
            if consistent and configs_changed(st.edges.deps for st in cache.values() if st.edges is not None):
                consistent = False  # a tsconfig/jsconfig/package.json changed: resolve everything again
            if not consistent:
                cache_for_parse = {} if rebuild else cache  # --rebuild parses every file again
                cache = {}
            t1 = time.perf_counter()
            new_state: dict[str, FileState] = {}
            total = len(walk.files)
            to_parse: list[tuple[str, bytes, FileState | None]] = []
            for i, sf in enumerate(walk.files):
                if cancel is not None and cancel.is_set():
                    break
                rel = sf.rel
                data = self._read(rel)
                if data is None:
                    continue
                old = cache.get(rel) if consistent else cache_for_parse.get(rel)
                h = content_hash(data)
                if old is not None and old.seen_hash == h:
                    new_state[rel] = old
                    rep.reused += 1
                else:
                    to_parse.append((rel, data, h, old))
                if progress is not None and (i % 200 == 0 or i == total - 1):
                    report_progress(progress, i + 1, total, rel)
            if cancel is not None and cancel.is_set():
                # cancelled before anything was written: the graph keeps its last state (files
                # not read yet must not look deleted)
                rep.mode = "cancelled"
                rep.seconds = time.perf_counter() - t0
                return rep
            rep.parsed_paths = sorted(rel for rel, _, _, _ in to_parse)
            py = [(rel, data) for rel, data, _, _ in to_parse
                  if LANGS.get(os.path.splitext(rel)[1].lower()) == "python"]
            report_progress(progress, 0, len(to_parse), "", "parse")
            # a full build keeps only the compact pickles of what this process parses too (the
            # decoded objects of a large workspace are gigabytes: ``_full_build`` decodes on use)
            parsed = parse_many(py, progress=lambda n: report_progress(progress, n, len(to_parse), "", "parse"),
                                keep=consistent)
            others = 0
            for rel, data, h, old in to_parse:
                st = new_state[rel] = self._new_state(rel, data, h, old, parsed.get(rel))
                rep.parsed += 1
                if rel not in parsed:  # JavaScript/TypeScript: parsed here, after the Python files
                    others += 1
                    if others % 200 == 0:
                        report_progress(progress, len(py) + others, len(to_parse), rel, "parse")
                if st.parse_error:
                    rep.parse_errors[rel] = st.parse_error
            report_progress(progress, len(to_parse), len(to_parse), "", "parse")
            timings["parse"] = time.perf_counter() - t1
            rep.skipped = sorted(self.skipped.items())

            del parsed, py, to_parse  # the sources read: not needed past here
            if not consistent:
                self.state = new_state
                self._full_build(rep, progress)
            else:
                old_state = cache
                self.state = new_state
                removed = set(old_state) - set(new_state)
                added = set(new_state) - set(old_state)
                changed = {r for r in new_state if r in old_state and new_state[r] is not old_state[r]}
                if not (removed or added or changed):
                    rep.mode = "unchanged"
                    self._token = self._cache_token or None
                    if self._token is None:  # a graph from before generation markers: adopt it
                        self._end_write(writelock.new_token())
                else:
                    rep.mode = "incremental"
                    self._update(old_state, changed | added, removed, rep)
            if self._token != known:
                # another process (or a child build) rewrote the graph: its IMPORTS edges too
                self.imports_generation = next(_GENERATIONS)
            self._count(rep)
            package_info("")  # loads the environment's distribution table now, not on the first edit
            rep.files = len(self.state)
            rep.seconds = time.perf_counter() - t0
            self.last_index_time = time.time()
            t2 = time.perf_counter()
            self._persist()
            timings["cache"] = timings.get("cache", 0.0) + time.perf_counter() - t2
            return rep

    def _count(self, rep: IndexReport) -> None:
        rep.symbols = rep.imports = rep.calls = rep.inherits = rep.unresolved_calls = rep.call_sites = 0
        pk = set()
        for st in self.state.values():
            rep.symbols += st.symbols
            if st.edges is not None:
                rep.imports += len(st.edges.imports)
                rep.calls += len(st.edges.calls)
                rep.inherits += len(st.edges.inherits)
                rep.unresolved_calls += sum(len(v) for v in st.edges.unresolved.values())
                rep.call_sites += sum(len(c.lines) for c in st.edges.calls.values())
                pk.update(st.edges.packages)
        rep.packages = len(pk)

    def _full_build(self, rep: IndexReport, progress: Progress | None = None) -> None:
        """Resolve every file and write a fresh graph. Facts stay pickled in the state: the
        symbol rows decode one file at a time, and the resolver reads them through
        ``LazyFacts``, whose cache of decoded facts (``state.FACTS``) holds at most
        ``BUILD_DECODED_FACTS`` files during the build — so memory is bounded by the pickles,
        not by every file's decoded facts at once (about 100 KB a file: gigabytes on 20,000
        files). Later edits resolve through ``LazyFacts`` as well.

        The writes run in a background thread, in order, and overlap this thread's work: File
        and Symbol nodes (which need no resolution) are written while the files are resolved,
        so FalkorDB works on another core meanwhile; the edges, by the node ids those writes
        returned, while the per-file state is pickled for the cache. Timings: ``resolve`` and
        ``cache`` are this thread's; ``write`` is the time spent waiting for writes beyond them."""
        import concurrent.futures as cf

        t = time.perf_counter()
        rp = self.root_package
        target = self.store.graph(build_graph_name(self.graph.name))
        target.delete()  # a build that stopped half-way (we hold the graph's write lock)
        ensure_indexes(target)
        server = self.store.server_id
        w = GraphWriter(target)
        rels = sorted(self.state)
        have = [r for r in rels if self.state[r].facts_blob is not None]
        bg = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="orbit-graph-write")
        jobs: list[cf.Future] = []
        try:
            file_rows = [self._file_row(r, resolved=False) for r in rels]
            sym_keys: list[tuple[str, str]] = []
            sym_rows: list[list] = []
            for r in have:
                facts = pickle.loads(self.state[r].facts_blob)  # one file at a time, not cached
                for sy in facts.symbols:
                    sym_keys.append((r, sy.qual))
                    sym_rows.append([r, full_qual(r, sy.qual, rp), sy.name, sy.kind, sy.line, sy.end_line, sy.col, 0, [],
                                     None])

            def nodes() -> tuple[dict[str, int], dict[tuple[str, str], int]]:
                file_ids = {r: i for r, i in zip(rels, w.create_files(file_rows)) if i is not None}
                sym_ids = w.create_symbols(sym_rows, file_ids)
                return file_ids, {k: i for k, i in zip(sym_keys, sym_ids) if i is not None}

            node_job = bg.submit(nodes)
            jobs.append(node_job)
            t_res = time.perf_counter()
            facts = None
            resolver = self._resolver()  # over LazyFacts
            report_progress(progress, 0, len(have), "", "resolve")
            cap = FACTS.max_entries
            FACTS.max_entries = max(cap, BUILD_DECODED_FACTS)
            try:
                resolved = resolver.resolve_many(
                    have, lambda r: None, have,
                    progress=lambda i, n, rel: report_progress(progress, i, n, rel, "resolve"))
            finally:
                FACTS.max_entries = cap
                FACTS.clear()
            for rel, st in self.state.items():
                st.edges = resolved.get(rel)
                st.pvals = None
            self._store_param_values(resolver, None)
            flow = resolver.python.flow_stats
            rep.timings["flow"] = flow["more_s"]  # value-flow rounds after the first resolution
            rep.flow_rounds, rep.flow_files = flow["rounds"], flow["again"]
            rep.timings["resolve"] = time.perf_counter() - t_res - flow["more_s"]
            # the first edit builds a resolver of its own: keeping this one would keep the whole
            # workspace's memo (hundreds of MB on the stdlib)
            del resolver
            self._live = None
            file_ids, sym_ids = node_job.result()
            self._write_edges_by_id(w, rels, file_ids, sym_ids, lambda fn, *a: jobs.append(bg.submit(fn, *a)))
            t_cache = time.perf_counter()
            blobs = self._pickle_states(self.state)
            rep.timings["cache"] = time.perf_counter() - t_cache
            done_before = sum(j.done() for j in jobs)  # one writer thread: a prefix of the jobs
            report_progress(progress, done_before, len(jobs), "", "write")
            for i, job in enumerate(jobs, 1):
                job.result()
                if i > done_before:
                    report_progress(progress, i, len(jobs), "", "write")
            if self.store.server_id != server:
                # FalkorDB restarted during the build: the scratch graph lost its first writes
                raise FalkorDBOffline(self.store.where, "the server restarted while orbit was writing the "
                                      "graph; the next index brings it up to date")
            self._swap_in(target)
            self._cache_blobs = blobs  # saved by _persist, only once every write succeeded
        finally:
            bg.shutdown(wait=True, cancel_futures=True)
        rep.written_files = len(rels)
        rep.mode = "full"
        self.imports_generation = next(_GENERATIONS)
        self._touched_all = True
        self._written_root_package = rp
        rep.timings["write"] = (time.perf_counter() - t - rep.timings["resolve"] - rep.timings["flow"]
                                - rep.timings["cache"])

    def _swap_in(self, built) -> None:
        """Replace the workspace's graph by the fully written ``built`` graph and set a new
        generation marker, in one transaction: readers see the old graph or the new one."""
        token = writelock.new_token()
        self.store.atomically(("RENAME", built.name, self.graph.name),
                              ("SET", writelock.marker_key(self.graph.name), token))
        self._token = token
        self._meta_dirty = True

    def _write_edges_by_id(self, w: GraphWriter, rels: list[str], file_ids: dict[str, int],
                           sym_ids: dict[tuple[str, str], int], submit: Callable) -> None:
        """The resolution results of a full build: unresolved counts on the nodes, then IMPORTS,
        USES_PACKAGE, CALLS and INHERITS edges by node id. Rows are built here and handed to
        ``submit`` one batch at a time, so the server writes one while the next is built."""
        from orbit_lsp.graph.writer import BATCH

        file_unres, sym_unres, imports, pkgs, inherits = [], [], [], [], []
        calls: list[list] = []
        for rel in rels:
            st = self.state[rel]
            e = st.edges
            if e is None:
                continue
            fid = file_ids.get(rel)
            if e.unresolved_imports and fid is not None:
                file_unres.append([fid, list(e.unresolved_imports)])
            for qual, names in e.unresolved.items():
                sid = sym_ids.get((rel, qual))
                if sid is not None and names:
                    sym_unres.append([sid, len(names), sorted(set(names)),
                                      unresolved_sites(names, e.unresolved_lines.get(qual))])
            if fid is not None:
                for dst, line in sorted(e.imports.items()):
                    did = file_ids.get(dst)
                    if did is not None:
                        imports.append([fid, did, line, dst in e.type_only])
            for name, line in sorted(e.packages.items()):
                n, stdlib, dist = package_info(name)
                pkgs.append([rel, n, stdlib, dist, line])
            for (src, dst_file, dst), c in sorted(e.calls.items()):
                a, b = sym_ids.get((rel, src)), sym_ids.get((dst_file, dst))
                if a is not None and b is not None:
                    calls.append([a, b, c.lines[0], c.lines, c.cols, c.end_cols, c.resolved])
                    if len(calls) >= BATCH:
                        submit(w.create_calls_by_id, calls)
                        calls = []
            for src, dst_file, dst in sorted(e.inherits):
                a, b = sym_ids.get((rel, src)), sym_ids.get((dst_file, dst))
                if a is not None and b is not None:
                    inherits.append([a, b])
        submit(w.create_calls_by_id, calls)
        submit(w.update_files_by_id, file_unres, ("unresolved_imports",))
        submit(w.update_symbols_by_id, sym_unres, ("unresolved_calls", "unresolved_names", "unresolved_sites"))
        submit(w.create_imports_by_id, imports)
        submit(w.create_package_uses, pkgs, file_ids)
        submit(w.create_inherits_by_id, inherits)

    def _store_param_values(self, resolver, rels: set[str] | None) -> None:
        """Keep the resolver's parameter values of the functions of ``rels`` (None: every file)
        in their files' states (``FileState.pvals``), for a later resolver to start from."""
        py = resolver.python
        py.pval_changed = set()
        by_file: dict[str, dict] = {}
        for (rel, qual) in py.pval.keys() | py.pdeps.keys():  # valueless ones keep what they consulted
            if rels is None or rel in rels:
                by_file.setdefault(rel, {})[qual] = (py.pval.get((rel, qual)), py.pdeps.get((rel, qual), frozenset()))
        for rel in (self.state if rels is None else rels):
            st = self.state.get(rel)
            if st is not None:
                st.pvals = by_file.get(rel) or None

    # -- rows ---------------------------------------------------------------------------------
    def _file_row(self, rel: str, resolved: bool = True, state: FileState | None = None) -> list:
        """``FILE_FIELDS`` of one file (``resolved=False``: before its resolution, without
        unresolved imports), from its current state or ``state``."""
        st = state if state is not None else self.state[rel]
        unresolved = st.edges.unresolved_imports if resolved and st.edges is not None else None
        return [rel, st.lang, st.lines, st.hash, st.parse_error or None, list(unresolved) if unresolved else None]

    def _symbol_rows(self, rel: str, state: FileState | None = None) -> list[list]:
        """``SYMBOL_FIELDS`` of every symbol of one file, from its current state or ``state``."""
        st = state if state is not None else self.state[rel]
        if st.facts is None:
            return []
        unresolved = st.edges.unresolved if st.edges is not None else {}
        lines = st.edges.unresolved_lines if st.edges is not None else {}
        rp = self.root_package
        rows = []
        for s in st.facts.symbols:
            names = unresolved.get(s.qual, [])
            rows.append([rel, full_qual(rel, s.qual, rp), s.name, s.kind, s.line, s.end_line, s.col,
                         len(names), sorted(set(names)), unresolved_sites(names, lines.get(s.qual)) if names else None])
        return rows

    def _write_edges(self, w: GraphWriter, rels: list[str]) -> None:
        """Outgoing edges of ``rels``, endpoints by property (incremental updates)."""
        imports, pkgs, calls, inherits = [], [], [], []
        rp = self.root_package
        for rel in rels:
            e = self.state[rel].edges
            if e is None:
                continue
            for dst, line in sorted(e.imports.items()):
                if dst in self.state:
                    imports.append([rel, dst, line, dst in e.type_only])
            for name, line in sorted(e.packages.items()):
                n, stdlib, dist = package_info(name)
                pkgs.append([rel, n, stdlib, dist, line])
            for (src, dst_file, dst), c in sorted(e.calls.items()):
                if dst_file not in self.state:
                    continue
                calls.append([rel, full_qual(rel, src, rp), dst_file, full_qual(dst_file, dst, rp),
                              c.lines[0], c.lines, c.cols, c.end_cols, c.resolved])
            for src, dst_file, dst in sorted(e.inherits):
                inherits.append([rel, full_qual(rel, src, rp), dst_file, full_qual(dst_file, dst, rp)])
        w.create_imports(imports)
        w.create_package_uses(pkgs)
        w.create_calls(calls)
        w.create_inherits(inherits)

    # -- incremental ---------------------------------------------------------------------------
    def _update(self, old_state: dict[str, FileState], changed: set[str], removed: set[str],
                rep: IndexReport) -> None:
        """Bring the graph from ``old_state`` to ``self.state``; ``changed`` are files whose
        state object is new (content changed or added).

        Symbols of changed files are updated in place: only symbols that disappeared are
        deleted (with the edges into them) and new ones created, so CALLS/INHERITS edges from
        other files into surviving symbols stay. Files are re-resolved when the module table
        changed (all of them) or when they consulted a part of a changed file's interface that
        changed (``resolve.changed_entities``); only those whose edges differ are rewritten.

        The resolver of the previous build or update is kept while the module table stays the
        same: the changed files' facts are swapped in and only the memoised values that
        consulted a file whose interface changed are forgotten, so re-resolving the dependents
        re-evaluates what the edit can affect, not everything they reach."""
        if self.root_package != self._written_root_package:
            # the root became (or stopped being) a package: every qualified name changes
            self._full_build(rep)
            return
        t = time.perf_counter()
        added = {r for r in changed if r not in old_state}
        iface_changed: set[tuple] = set()  # entities (see resolve.interface_units) that changed
        moved: set[tuple] = set()  # entities whose scopes only moved
        for rel in changed - added:
            ob, nb = old_state[rel].facts_blob, self.state[rel].facts_blob
            if ob is nb or ob == nb:
                continue
            old, new = old_state[rel].facts, self.state[rel].facts
            if old is None or new is None or old.interface() != new.interface():
                c, m = changed_entities(rel, old, new)
                iface_changed |= c
                moved |= m
        table = self._module_table()
        if self._live is not None and self._live[0] == table:
            resolver = self._live[1]
            for rel in changed:
                resolver.set_facts(rel, self.state[rel].facts)
            resolver.invalidate(iface_changed | moved)
            iface_changed |= resolver.python.implied(iface_changed)  # the subclass relation
        else:
            resolver = self._resolver()
            # the value flows of the graph as it stands (see resolve.resolve_fixpoint)
            resolver.seed((r, st) for r, st in old_state.items() if r in self.state)
            for rel in changed:  # the seed holds their previous edges
                resolver.set_facts(rel, self.state[rel].facts)
            resolver.invalidate(iface_changed | moved)
            iface_changed |= resolver.python.implied(iface_changed)  # the subclass relation
        if set(old_state) != set(self.state):
            resolver.python.recompute_params()
        self._live = (table, resolver)
        if set(old_state) != set(self.state):
            candidates = set(self.state)
        else:
            candidates = set(changed)
            if iface_changed:
                for rel, st in self.state.items():
                    if st.edges is not None and not st.edges.deps.isdisjoint(iface_changed):
                        candidates.add(rel)
        rebind: set[str] = set()
        redeps: set[str] = set()  # same edges, other files consulted: only the cache changes
        with_facts = [r for r, st in self.state.items() if st.facts_blob is not None]
        resolved = resolver.resolve_many(
            [r for r in candidates if self.state[r].facts_blob is not None],
            lambda r: old_state[r].edges if r in old_state else None, with_facts, removed)
        candidates |= set(resolved)  # reached through value flows
        pval_files = {k[0] for k in resolver.python.pval_changed} | changed
        for rel in sorted(candidates):
            st = self.state[rel]
            new_edges = resolved.get(rel) if st.facts_blob is not None else None
            old_edges = old_state[rel].edges if rel in old_state else None
            if rel in changed or old_edges is None or new_edges is None or old_edges.key() != new_edges.key():
                rebind.add(rel)
            elif new_edges.deps != old_edges.deps or new_edges.flows != old_edges.flows:
                redeps.add(rel)
            else:
                continue
            if st is old_state.get(rel):  # a new object: old_state keeps the old edges
                st = self.state[rel] = dataclasses.replace(st, edges=new_edges)
            st.edges = new_edges
        for rel in sorted(pval_files & set(self.state)):
            if self.state[rel] is old_state.get(rel):
                self.state[rel] = dataclasses.replace(self.state[rel])
        self._store_param_values(resolver, pval_files)
        redeps |= pval_files & set(self.state)  # the cache keeps parameter values per file
        rep.timings["resolve"] = time.perf_counter() - t
        t = time.perf_counter()
        token = self._begin_write()
        w = GraphWriter(self.graph)
        ensure_indexes(self.graph)
        # one MULTI/EXEC: readers in other processes see the graph before or after the update
        with w.transaction():
            if removed:
                w.delete_files(sorted(removed))
            # symbols of changed or re-bound files: delete vanished, create new, update those whose
            # properties differ (lines, unresolved calls)
            gone_rows, new_rows, keep_rows = [], [], []
            for rel in sorted((changed | rebind) - added):
                old_rows = {row[1]: row for row in self._symbol_rows(rel, old_state[rel])}
                rows = self._symbol_rows(rel)
                new_quals = {row[1] for row in rows}
                gone_rows.extend([rel, q] for q in sorted(old_rows.keys() - new_quals))
                for row in rows:
                    old_row = old_rows.get(row[1])
                    if old_row is None:
                        new_rows.append(row)
                    elif old_row != row:
                        keep_rows.append(row)
            w.delete_symbol_rows(gone_rows)
            w.delete_outgoing(sorted(r for r in rebind if r not in added))
            w.create_files([self._file_row(r) for r in sorted(added)])
            w.update_files([row for row in (self._file_row(r) for r in sorted((rebind | changed) - added))
                            if row != self._file_row(row[0], state=old_state[row[0]])])
            w.create_symbols(new_rows + [row for r in sorted(added) for row in self._symbol_rows(r)])
            w.update_symbols(keep_rows)
            self._write_edges(w, sorted(rebind))
            # packages that may have lost their last user
            dropped = {n for r in rebind | removed if r in old_state and old_state[r].edges is not None
                       for n in old_state[r].edges.packages}
            dropped -= {n for r in rebind if self.state[r].edges is not None for n in self.state[r].edges.packages}
            if dropped:
                w.delete_unused_packages(sorted(package_info(n)[0] for n in dropped))
        rep.written_files = len(rebind | changed)
        if removed or any(_import_edges(old_state[r] if r in old_state else None) != _import_edges(self.state[r])
                          for r in rebind | changed):
            self.imports_generation = next(_GENERATIONS)
        rep.removed_files = len(removed)
        self._end_write(token)
        rep.timings["write"] = time.perf_counter() - t
        self._touched |= rebind | changed | removed | redeps

    def prepare_edits(self) -> float:
        """Build now the resolver the next re-index would otherwise build first: seeded with the
        value flows, parameter values and subclass relation of the graph as it stands (see
        ``_update``), so the first edit after opening a folder costs what later ones do. For
        long-lived processes (the language server calls it after its first index); a one-shot
        command has no use for it. Returns the seconds it took (0.0 when already prepared)."""
        with self.lock, gc_paused():
            if self._live is not None:
                return 0.0
            t = time.perf_counter()
            table = self._module_table()
            resolver = self._resolver()
            resolver.seed(self.state.items())
            resolver.prepare([r for r, st in self.state.items() if st.facts_blob is not None])
            self._live = (table, resolver)
            return time.perf_counter() - t

    def reindex_file(self, path: Path | str) -> IndexReport:
        """Re-index one file after it changed on disk (saved, created, or deleted).

        A deleted or no-longer-indexable file leaves the graph. A content hash equal to the
        indexed one does nothing (so one save seen twice is indexed once). Returns an
        ``IndexReport`` whose ``parse_errors`` holds the syntax error, if any.
        """
        with self._writing():
            try:
                if not self.in_sync():
                    return self._resync("before re-indexing a file")
                return self._reindex_file(path)
            finally:
                self._persist()

    def _reindex_file(self, path: Path | str) -> IndexReport:
        with self.lock, gc_paused():
            t0 = time.perf_counter()
            rep = IndexReport(mode="incremental")
            rel = self.rel_of(path)
            if rel is None:
                rep.mode = "unchanged"
                return rep
            abs_path = self.root / rel
            accepted = self.filter.accepts(abs_path) and abs_path.is_file()
            data = self._read(rel) if accepted else None
            old = self.state.get(rel)
            if data is None:
                if old is None:
                    rep.mode = "unchanged"
                    return rep
                old_state = dict(self.state)
                del self.state[rel]
                self._update(old_state, set(), {rel}, rep)
            else:
                self.skipped.pop(rel, None)
                h = content_hash(data)
                if old is not None and old.seen_hash == h:
                    rep.mode = "unchanged"
                    return rep
                new = self._new_state(rel, data, h, old)
                if new.parse_error:
                    rep.parse_errors[rel] = new.parse_error
                if old is not None and new.parse_error and new.facts_blob is old.facts_blob:
                    # keep the last good graph; only record the error
                    new.edges, new.pvals = old.edges, old.pvals
                    self.state[rel] = new
                    self._touched.add(rel)
                    token = self._begin_write()
                    GraphWriter(self.graph).update_files([self._file_row(rel)])
                    self._end_write(token)
                    rep.seconds = time.perf_counter() - t0
                    self.last_index_time = time.time()
                    return rep
                old_state = dict(self.state)
                self.state[rel] = new
                self._update(old_state, {rel}, set(), rep)
            rep.files = len(self.state)
            rep.seconds = time.perf_counter() - t0
            self.last_index_time = time.time()
            return rep

    def remove_file(self, path: Path | str) -> IndexReport:
        """Remove a file (and, for a directory, every file under it) from the graph."""
        with self._writing():
            try:
                if not self.in_sync():
                    return self._resync("before removing a file")
                return self._remove_file(path)
            finally:
                self._persist()

    def _remove_file(self, path: Path | str) -> IndexReport:
        with self.lock:
            rep = IndexReport(mode="incremental")
            rel = self.rel_of(path)
            if rel is None:
                return rep
            gone = {r for r in self.state if r == rel or r.startswith(rel.rstrip("/") + "/")}
            if not gone:
                rep.mode = "unchanged"
                return rep
            old_state = dict(self.state)
            for r in gone:
                del self.state[r]
            self._update(old_state, set(), gone, rep)
            self.last_index_time = time.time()
            return rep
