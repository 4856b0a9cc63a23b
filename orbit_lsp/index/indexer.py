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

Layout: this module holds ``WorkspaceIndexer`` itself (reading, parsing, re-opening); its parts
are ``sync.GraphSync`` (write lock, generation marker, state cache), ``full_build.FullBuild``
(the cold build) and ``incremental.Incremental`` (``_update``, ``reindex_file``,
``remove_file``); ``report`` holds ``IndexReport`` and the progress convention.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from orbit_lsp.config import Settings
from orbit_lsp.graph import writelock
from orbit_lsp.graph import keys
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.index.languages import PARSED_LANGS, WorkspaceResolver, configs_changed
from orbit_lsp.index.py_syspath import pytest_pythonpath
from orbit_lsp.index.py_edges import full_qual, package_info
from orbit_lsp.index.parsing import (  # noqa: F401 (re-exported: imported from here by callers)
    content_hash,
    count_lines,
    gc_paused,
    nonascii_lines,
    Parsed,
    parse_many,
    parse_one,
    parse_python,
    refuse_in_a_starting_worker,
)
from orbit_lsp.index.state import CACHE_VERSION, FACTS, FileState, LazyFacts, StateCache, stat_signature  # noqa: F401 (re-exported)
from orbit_lsp.index.walk import LANGS, WorkspaceFilter, classify_file, is_dotenv, read_regular_file, walk_workspace
log = logging.getLogger("orbit_lsp.index")

from orbit_lsp.index.full_build import (  # noqa: F401 (re-exported: imported from here by callers)
    BUILD_DECODED_FACTS,
    BUILD_GRAPH_PREFIX,
    FullBuild,
    build_graph_name,
)
from orbit_lsp.index.incremental import Incremental
from orbit_lsp.index.progress import PHASES  # noqa: F401 (re-exported)
from orbit_lsp.index.report import (  # noqa: F401 (re-exported)
    GENERATIONS as _GENERATIONS,
    IndexReport,
    Progress,
    report_progress,
    unresolved_sites,
)
from orbit_lsp.index.sync import GraphSync


class WorkspaceIndexer(GraphSync, FullBuild, Incremental):
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
        # processes a full build resolves with (None: ``py_parallel.default_workers`` of its size)
        self.resolve_workers: int | None = None
        # Python files of the last walk (None: none yet; then the cache's): see ``value_flow``
        self._python_files: int | None = None
        self._last_index_time: float | None = None
        self.generation = next(_GENERATIONS)  # a new value for every change made to the graph
        self.imports_generation = next(_GENERATIONS)  # a new value when IMPORTS edges change
        self.skipped: dict[str, str] = {}
        self._written_root_package = ""  # root_package the graph's qualified names were built with
        self._written_pythonpath: tuple[str, ...] = ()  # pytest ``pythonpath`` the graph's edges used
        self._facts_files: tuple | None = None  # (module table, files with facts, as a set): ``_with_facts``
        self._consult: tuple | None = None  # (the state dict, file -> files consulting it): ``_consulters``
        self._touched: set[str] = set()  # files whose state changed since the cache was saved
        self._touched_all = False
        self._cache_staged = False  # a full build staged every state in the cache (StateCache.stage)
        # the resolver of the last build or update, with its memo, and the module table it was
        # built on: re-indexing a file reuses it (see ``_update``)
        self._live: tuple[tuple, WorkspaceResolver] | None = None
        self.write_lock = writelock.GraphWriteLock(store, self.graph.name)
        self._marker_token: str | None = None  # see GraphSync._token
        self._cache_token: str | None = None  # the marker the loaded cache was saved with
        self._meta_dirty = False  # the cache meta (marker) must be saved
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

    def _stat(self, rel: str) -> os.stat_result | None:
        """The ``os.stat`` of file ``rel`` when it may be read, else None: a ``.env`` file or a
        link to one, a file that cannot be stat-ed, or one larger than ``max_file_bytes``
        (recorded in ``skipped``)."""
        path = self.root / rel
        # only a link's target can make another name a ``.env`` file (the check is on the
        # basename): one lstat, not a realpath walk of every directory, per file
        if is_dotenv(rel) or (os.path.islink(path) and is_dotenv(os.path.realpath(path))):
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        if st.st_size > self.settings.max_file_bytes:
            self.skipped[rel] = f"larger than {self.settings.max_file_bytes} bytes"
            return None
        return st

    def _read(self, rel: str, st: os.stat_result | None = None) -> bytes | None:
        """The bytes of file ``rel`` when it is indexable (see ``_stat``, which ``st`` is when
        given; ``walk.classify_file``: a skipped file's reason is recorded), else None."""
        if st is None and self._stat(rel) is None:
            return None
        path = self.root / rel
        try:
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
                   parsed: Parsed | None = None, seen_stat: tuple | None = None) -> FileState:
        """The state of file ``rel`` read as ``data`` (content hash ``h``; ``old``: its state
        before, whose facts a file that no longer parses keeps; ``seen_stat``: the
        ``stat_signature`` taken before reading it), from ``parsed`` when ``parse_many`` parsed
        it, else parsed here."""
        lang = LANGS.get(os.path.splitext(rel)[1].lower(), "")
        if parsed is None:
            if lang not in PARSED_LANGS:
                return FileState(rel, lang, h, count_lines(data), seen_hash=h, nonascii_lines=nonascii_lines(data),
                                 seen_stat=seen_stat)
            parsed = parse_one(rel, data)
        st = FileState(rel, lang, h, parsed.lines, seen_hash=h, nonascii_lines=parsed.nonascii_lines,
                       seen_stat=seen_stat)
        if parsed.error is not None:
            st.parse_error = parsed.error
            log.warning("parse error in %s: %s", rel, parsed.error)
            if old is not None and old.facts_blob is not None:
                # keep the last good graph
                st.facts_blob, st.symbols, st.lines, st.hash = old.facts_blob, old.symbols, old.lines, old.hash
                st.nonascii_lines, st.sys_path, st.class_bases = old.nonascii_lines, old.sys_path, old.class_bases
                return st
        if parsed.blob is not None:  # with an error: what an error-tolerant parser (JS/TS) still found
            st.set_facts_blob(parsed.blob, parsed.facts, parsed.symbols, parsed.sys_path, parsed.class_bases)
        return st

    @property
    def root_package(self) -> str:
        """The root directory's name when the root is itself a package (has ``__init__.py``)."""
        return self.root.name if "__init__.py" in self.state and self.root.name.isidentifier() else ""

    @property
    def value_flow(self) -> bool:
        """Whether parameters hold what the workspace's call sites pass them: the setting
        ``value_flow``, for a workspace of at most ``value_flow_max_files`` Python files (0: any
        size). The size is the last full walk's (``index_all``), before any the cache's; files
        added or removed one at a time since do not switch the mode (the graph, the cache and
        the resolver of edits stay in one mode until the next walk)."""
        if not self.settings.value_flow:
            return False
        cap = self.settings.value_flow_max_files
        if not cap:
            return True
        if self._python_files is None:
            self._python_files = self._cached_python_files()
        return self._python_files <= cap

    def _resolver(self, facts: dict | None = None) -> WorkspaceResolver:
        """A resolver over the current state: facts decoded on use (``LazyFacts``), or the
        given ``facts`` (a full build decodes every file once)."""
        table = facts if facts is not None else LazyFacts(lambda: self.state)
        return WorkspaceResolver(table, set(self.state), self.aliases, self.root_package, self.root,
                                 value_flow=self.value_flow, sys_paths=self.sys_paths(),
                                 pythonpath=self.pythonpath())

    def sys_paths(self, state: dict[str, FileState] | None = None) -> dict[str, tuple]:
        """Path -> the directories that Python file adds to ``sys.path`` (``py_syspath``), for
        the files of ``state`` (default: the current state) that add any."""
        return {r: st.sys_path for r, st in (self.state if state is None else state).items() if st.sys_path}

    def pythonpath(self) -> tuple[str, ...]:
        """pytest's ``pythonpath`` directories, as the configuration file at the root says now."""
        return pytest_pythonpath(self.root)

    def _module_table(self, live: tuple | None = None) -> tuple:
        """What a ``Resolver`` is built on besides the facts: indexed paths, aliases, root
        package, the directories files add to ``sys.path``, pytest's ``pythonpath``. ``live``:
        the ``(table, resolver)`` of the last update, when the caller knows that no file was
        added or removed and no ``sys.path`` addition changed since: its table is reused when
        the aliases, the root package and ``pythonpath`` are the same too (no pass over every
        file's state)."""
        pythonpath = self.pythonpath()
        aliases = tuple(sorted(self.aliases.items()))
        if live is not None:
            old = live[0]
            if old[1] == aliases and old[2] == self.root_package and old[4] == pythonpath:
                return old
        return (frozenset(self.state), aliases, self.root_package, tuple(sorted(self.sys_paths().items())),
                pythonpath)

    def _with_facts(self, table: tuple, changed: set[str]) -> list[str]:
        """The files that have facts, in state order: kept with the module table it was made for
        and made again when the table changes or a changed file gained or lost its facts."""
        cached = self._facts_files
        if cached is not None and cached[0] is table and all(
                (self.state[r].facts_blob is not None) == (r in cached[2]) for r in changed if r in self.state):
            return cached[1]
        files = [r for r, st in self.state.items() if st.facts_blob is not None]
        self._facts_files = (table, files, frozenset(files))
        return files

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
        rebuilt or re-read); raises ``FalkorDBOffline``, or ``RuntimeError`` in a worker process
        that is importing the main module (``parsing.refuse_in_a_starting_worker``).
        """
        from orbit_lsp.index import overlay

        refuse_in_a_starting_worker()
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
            self._cache_staged = False
            self._touched, self._touched_all, self._meta_dirty = set(), False, False
            self._written_root_package = ""
            self._written_pythonpath = ()
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
            # the mode of this indexer's last walk (None: none yet; the cache is not read for it)
            flow_before = None if self._python_files is None else self.value_flow
            self._python_files = sum(sf.lang == "python" for sf in walk.files)
            if self.settings.value_flow and not self.value_flow:
                rep.notes.append(f"parameter values are off: {self._python_files:,} Python files, more than "
                                 f"valueFlowMaxFiles ({self.settings.value_flow_max_files:,})")
            elif flow_before is False and self.value_flow:
                rep.notes.append(f"parameter values are on again: {self._python_files:,} Python files")
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
            to_parse: list[tuple[str, bytes, str, FileState | None, tuple | None]] = []
            resigned: set[str] = set()  # unchanged files whose stat signature is new: saved below
            now_ns = time.time_ns()  # before any stat: a file changed from here on is not settled
            first_phase = "check" if consistent else "read"  # a re-open compares; a full build reads all
            source_bytes = [0]  # of the sources to parse, once ``read_sources`` has ended

            def read_sources():
                """Read the walk's files (not those whose stat signature is as when last read),
                noting in ``to_parse`` those whose content changed, and yield the sources among
                them to parse: ``parse_many``'s workers parse the first ones while this reads on."""
                for i, sf in enumerate(walk.files):
                    if cancel is not None and cancel.is_set():
                        return
                    rel = sf.rel
                    fst = self._stat(rel)
                    if fst is None:
                        continue
                    old = cache.get(rel) if consistent else cache_for_parse.get(rel)
                    sig = stat_signature(fst, now_ns)
                    if old is not None and sig is not None and old.seen_stat == sig:
                        new_state[rel] = old  # unchanged since it was last read: not read again
                        rep.reused += 1
                    else:
                        data = self._read(rel, fst)
                        if data is None:
                            continue
                        rep.read += 1
                        h = content_hash(data)
                        if old is not None and old.seen_hash == h:
                            new_state[rel] = old
                            rep.reused += 1
                            if old.seen_stat != sig:
                                old.seen_stat = sig
                                resigned.add(rel)
                        else:
                            to_parse.append((rel, data, h, old, sig))
                            if LANGS.get(os.path.splitext(rel)[1].lower()) in PARSED_LANGS:
                                source_bytes[0] += len(data)
                                yield rel, data
                    if progress is not None and (i % 200 == 0 or i == total - 1):
                        report_progress(progress, i + 1, total, rel, first_phase)
                report_progress(progress, 0, len(to_parse), "", "parse")

            # a full build keeps only the compact pickles of what this process parses too (the
            # decoded objects of a large workspace are gigabytes: ``_full_build`` decodes on use)
            parsed = parse_many(read_sources(), keep=consistent, stop=cancel,
                                progress=lambda n, nbytes: report_progress(progress, n, len(to_parse), "", "parse",
                                                                           work=nbytes / (source_bytes[0] or 1)))
            if cancel is not None and cancel.is_set():
                # cancelled before anything was written: the graph keeps its last state (files
                # not read yet must not look deleted)
                rep.mode = "cancelled"
                rep.seconds = time.perf_counter() - t0
                return rep
            rep.parsed_paths = sorted(rel for rel, *_ in to_parse)
            for rel, data, h, old, sig in to_parse:
                st = new_state[rel] = self._new_state(rel, data, h, old, parsed.get(rel), sig)
                rep.parsed += 1
                if st.parse_error:
                    rep.parse_errors[rel] = st.parse_error
            report_progress(progress, len(to_parse), len(to_parse), "", "parse")
            timings["parse"] = time.perf_counter() - t1
            rep.skipped = sorted(self.skipped.items())

            del parsed, to_parse  # the sources read: not needed past here
            self._touched |= resigned  # saved with the cache even when nothing else changed
            if not consistent:
                self.state = new_state
                self._full_build(rep, progress)
            else:
                old_state = cache
                self.state = new_state
                removed = set(old_state) - set(new_state)
                added = set(new_state) - set(old_state)
                changed = {r for r in new_state if r in old_state and new_state[r] is not old_state[r]}
                if not (removed or added or changed) and self.pythonpath() == self._written_pythonpath:
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
