"""The full (cold) build of a workspace's graph: resolve every file and write a fresh graph
into a scratch graph (``build_graph_name``) renamed over the workspace's graph when complete.

``FullBuild`` is a part of ``indexer.WorkspaceIndexer`` (a mixin: it uses the indexer's
``state``, ``store``, ``graph``, ``_resolver``, ``_file_row`` and ``_store_param_values``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from orbit_lsp.graph import writelock
from orbit_lsp.graph.errors import RESTARTED_WHILE_WRITING, FalkorDBOffline
from orbit_lsp.graph.schema import UNBOUND_MARKER, ensure_indexes
from orbit_lsp.graph.writer import BATCH as SYMBOL_BATCH, GraphWriter
from orbit_lsp.index.report import (GENERATIONS, IndexReport, Progress, report_progress, tally_symbol,
                                   unresolved_sites)
from orbit_lsp.index.languages import is_js
from orbit_lsp.index.parsing import unpickle_symbols
from orbit_lsp.index.py_parallel import default_workers
from orbit_lsp.index.py_edges import full_qual, package_info
from orbit_lsp.index.state import DECODES, FACTS

log = logging.getLogger("orbit_lsp.index")

# decoded facts a full build keeps at once, in ``state.FACTS`` and in the resolver's own
# ``Resolver.facts_seen_max`` (each up to this many): decoded facts are ~12x their pickle (~190
# KB a file on the stdlib). Below the working set of a resolution, decoding thrashes. On the
# 22,506-file scale corpus (in-process builds, one after the other, 2026-12-02): with 1,024 and
# a memo budget of 125,000, 46,477 decodes, resolve 136 s, peak RSS 1,878 MiB; 512 and 60,000:
# 52,443, 124 s, 1,743 MiB; 256 and 30,000: 60,533, 161 s, 1,675 MiB
BUILD_DECODED_FACTS = 512
# memoised evaluations a full build keeps a generation (``resolve.Resolver.memo_budget``): the
# memo grows by ~160 entries a file (~300 bytes each with its key) without a bound (see above)
BUILD_MEMO_BUDGET = 60_000
UNRESOLVED_FIELDS = ("unresolved_calls", "unresolved_names", "unresolved_sites")
WRITES_IN_FLIGHT = 8  # batches of edge rows (``writer.BATCH`` each) built ahead of the writers
# threads sending the writes: while FalkorDB runs one batch (it writes a graph one query at a
# time), another turns the next into query text, which FalkorDB otherwise waits for. On the
# scale corpus, in-process full builds one after the other (2026-12-03): the write phase 11.4 s
# with one thread (10.9 in a run before), 8.7 s with two
WRITER_THREADS = 2
BUILD_GRAPH_PREFIX = "orbit_build_"  # scratch graph of a full build: orbit_build_<code graph name>


def return_free_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere
    nothing): what a full build freed (the resolver's memo, decoded facts, rows) otherwise
    stays in the process's resident memory for as long as the language server runs."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _drop_scratch(target) -> None:
    """Delete the scratch graph of a build that stopped (the next build would; until then it
    holds FalkorDB memory), quietly: the build's own error is the one to report."""
    try:
        target.delete()
    except Exception:  # noqa: BLE001 - FalkorDB offline, or the error that stopped the build
        log.debug("could not delete the scratch graph %s", target.name, exc_info=True)


def build_graph_name(graph_name: str) -> str:
    """Name of the scratch graph a full build of ``graph_name`` is written into before it is
    renamed over it."""
    return BUILD_GRAPH_PREFIX + graph_name


class FullBuild:
    """The full build of a ``WorkspaceIndexer`` (``_full_build``)."""

    def _full_build(self, rep: IndexReport, progress: Progress | None = None) -> None:
        """Resolve every file and write a fresh graph. Facts stay pickled in the state: the
        symbol rows decode one file at a time, and the resolver reads them through
        ``LazyFacts``, whose cache of decoded facts (``state.FACTS``) holds at most
        ``BUILD_DECODED_FACTS`` files during the build — so memory is bounded by the pickles,
        not by every file's decoded facts at once (about 100 KB a file: gigabytes on 20,000
        files). Later edits resolve through ``LazyFacts`` as well. The resolver's memo is bounded
        too (``BUILD_MEMO_BUDGET`` entries a generation, see ``Resolver._age_memo``), and the
        Symbol rows are built a batch at a time in the writer's thread.

        The writes run in background threads and overlap this thread's work: File and Symbol
        nodes (which need no resolution) are written while the files are resolved, so FalkorDB
        works on another core meanwhile; then the edges, by the node ids those writes returned,
        at most ``WRITES_IN_FLIGHT`` batches ahead of ``WRITER_THREADS`` writers (in any order:
        each batch stands alone once the nodes exist), while another thread
        stages the per-file states in the cache a batch at a time (``StateCache.stage``).
        Timings: ``resolve`` is this thread's; ``cache`` the staging thread's (it overlaps the
        edge rows); ``write`` is the rest of the build's wall time."""
        import concurrent.futures as cf

        t = time.perf_counter()
        decoded_before = DECODES.total
        return_free_memory()  # the sources just parsed (hundreds of MB on a large workspace)
        rp = self.root_package
        target = self.store.graph(build_graph_name(self.graph.name))
        target.delete()  # a build that stopped half-way (we hold the graph's write lock)
        ensure_indexes(target)
        server = self.store.server_id
        w = GraphWriter(target)
        rels = sorted(self.state)
        have = [r for r in rels if self.state[r].facts_blob is not None]
        bg = cf.ThreadPoolExecutor(max_workers=WRITER_THREADS, thread_name_prefix="orbit-graph-write")
        jobs: list[cf.Future] = []
        swapped = False
        try:
            file_rows = [self._file_row(r, resolved=False) for r in rels]
            blobs_of = [(r, self.state[r].facts_blob) for r in have]  # the state's own bytes

            def nodes(file_rows: list) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
                # in this (the writer's) thread, a batch at a time: every symbol's row at once
                # was ~450 bytes a symbol held through the whole resolution
                file_ids = {r: i for r, i in zip(rels, w.create_files(file_rows)) if i is not None}
                sym_ids: dict[str, dict[str, int]] = {}  # file -> qual -> node id
                keys: list[tuple[str, str]] = []
                rows: list[list] = []

                def flush() -> None:
                    for (r, qual), i in zip(keys, w.create_unresolved_symbols(rows, file_ids)):
                        if i is not None:
                            ids = sym_ids.get(r)
                            if ids is None:
                                ids = sym_ids[r] = {}
                            ids[qual] = i
                    keys.clear()
                    rows.clear()

                for r, blob in blobs_of:
                    for sy in unpickle_symbols(blob):  # one file at a time, not cached
                        keys.append((r, sy.qual))
                        rows.append([r, full_qual(r, sy.qual, rp), sy.name, sy.kind, sy.line, sy.end_line, sy.col])
                    if len(rows) >= SYMBOL_BATCH:
                        flush()
                flush()
                return file_ids, sym_ids

            node_job = bg.submit(nodes, file_rows)
            del file_rows
            jobs.append(node_job)
            t_res = time.perf_counter()
            facts = None
            resolver = self._resolver()  # over LazyFacts
            resolver.python.facts_seen_max = BUILD_DECODED_FACTS
            pythonpath = resolver.python.pythonpath
            resolver.python.memo_budget = BUILD_MEMO_BUDGET
            resolver.python.workers = self.resolve_workers or default_workers(sum(not is_js(r) for r in have))
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
            # the cache's states are pickled in a thread of their own while this one builds the
            # edge rows and the writer threads wait on FalkorDB (committed by _persist, once
            # every write succeeded)
            stager = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="orbit-cache-stage")
            try:
                staged = stager.submit(self._timed_stage)

                def submit(fn, *args) -> None:
                    # at most WRITES_IN_FLIGHT batches of rows wait for the writers: every edge's
                    # row at once was ~250 MB on 700,000 calls
                    if len(jobs) > WRITES_IN_FLIGHT:
                        jobs[-WRITES_IN_FLIGHT - 1].result()
                    jobs.append(bg.submit(fn, *args))

                self._write_edges_by_id(w, rels, file_ids, sym_ids, submit)
                rep.timings["cache"] = staged.result()
            finally:
                stager.shutdown(wait=True)
            done_before = sum(j.done() for j in jobs)
            report_progress(progress, done_before, len(jobs), "", "write")
            for i, job in enumerate(jobs, 1):
                job.result()
                if i > done_before:
                    report_progress(progress, i, len(jobs), "", "write")
            if self.store.server_id != server:
                # FalkorDB restarted during the build: the scratch graph lost its first writes
                raise FalkorDBOffline(self.store.where, RESTARTED_WHILE_WRITING)
            self._swap_in(target)
            self._cache_staged = True
            swapped = True
        finally:
            bg.shutdown(wait=True, cancel_futures=True)
            if not swapped:
                _drop_scratch(target)
        return_free_memory()
        rep.written_files = len(rels)
        rep.facts_decoded = DECODES.total - decoded_before
        rep.mode = "full"
        self.imports_generation = next(GENERATIONS)
        self._touched_all = True
        self._written_root_package = rp
        self._written_pythonpath = pythonpath
        rep.timings["write"] = (time.perf_counter() - t - rep.timings["resolve"] - rep.timings["flow"]
                                - rep.timings["cache"])

    def _timed_stage(self) -> float:
        """Stage every file's state in the cache (``StateCache.stage``); the seconds it took."""
        t = time.perf_counter()
        self._cache.stage(self.state)
        return time.perf_counter() - t

    def _swap_in(self, built) -> None:
        """Replace the workspace's graph by the fully written ``built`` graph and set a new
        generation marker, in one transaction: readers see the old graph or the new one."""
        token = writelock.new_token()
        self.store.atomically(("RENAME", built.name, self.graph.name),
                              ("SET", writelock.marker_key(self.graph.name), token))
        self._token = token
        self._meta_dirty = True

    def _write_edges_by_id(self, w: GraphWriter, rels: list[str], file_ids: dict[str, int],
                           sym_ids: dict[str, dict[str, int]], submit: Callable) -> None:
        """The resolution results of a full build: unresolved counts on the nodes, then IMPORTS,
        USES_PACKAGE, CALLS and INHERITS edges by node id. Rows are built here and handed to
        ``submit`` one batch at a time, so the server writes one while the next is built."""
        from orbit_lsp.graph.writer import BATCH, BULK_EDGES

        sym_unres: list[list] = []
        calls: list[list] = []
        tally: dict[str, list[int]] = {}
        no_ids: dict[str, int] = {}  # a file without symbol nodes
        for rel in rels:
            e = self.state[rel].edges
            if e is None:
                continue
            mine = sym_ids.get(rel, no_ids)
            for qual, names in e.unresolved.items():
                sid = mine.get(qual)
                if sid is not None and names:
                    distinct = sorted(set(names))
                    sites = unresolved_sites(names, e.unresolved_lines.get(qual))
                    sym_unres.append([sid, len(names), distinct, sites])
                    tally_symbol(tally, distinct, names if sites is not None else None)
            for (src, dst_file, dst), c in sorted(e.calls.items()):
                a = mine.get(src)
                b = sym_ids.get(dst_file, no_ids).get(dst)
                if a is not None and b is not None:
                    calls.append([a, b, c.lines[0], c.lines, c.cols, c.end_cols, c.resolved])
            if len(calls) >= BULK_EDGES:
                submit(w.create_calls_by_id, calls)
                calls = []
            if len(sym_unres) >= BATCH:
                submit(w.update_symbols_by_id, sym_unres, UNRESOLVED_FIELDS)
                sym_unres = []
        submit(w.create_calls_by_id, calls)
        submit(w.update_symbols_by_id, sym_unres, UNRESOLVED_FIELDS)
        # and the node that marks a graph keeping these counts (``queries.unbound_counts``)
        submit(w.create_unbound_names, [[UNBOUND_MARKER, 0, 0]] + [[n, *t] for n, t in sorted(tally.items())])
        # the file-level rows are few (one a file, or one an import): built at once
        file_unres, imports, pkgs, inherits = [], [], [], []
        for rel in rels:
            e = self.state[rel].edges
            if e is None:
                continue
            fid = file_ids.get(rel)
            if e.unresolved_imports and fid is not None:
                file_unres.append([fid, list(e.unresolved_imports)])
            if fid is not None:
                for dst, line in sorted(e.imports.items()):
                    did = file_ids.get(dst)
                    if did is not None:
                        imports.append([fid, did, line, dst in e.type_only])
            for name, line in sorted(e.packages.items()):
                n, stdlib, dist = package_info(name)
                pkgs.append([rel, n, stdlib, dist, line])
            for src, dst_file, dst in sorted(e.inherits):
                a, b = sym_ids.get(rel, no_ids).get(src), sym_ids.get(dst_file, no_ids).get(dst)
                if a is not None and b is not None:
                    inherits.append([a, b])
        submit(w.update_files_by_id, file_unres, ("unresolved_imports",))
        submit(w.create_imports_by_id, imports)
        submit(w.create_package_uses, pkgs, file_ids)
        submit(w.create_inherits_by_id, inherits)
