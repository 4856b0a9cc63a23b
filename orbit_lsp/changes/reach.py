"""Which tests reach given symbols: for each symbol, the tests ``orbit-lsp changes`` would select
if that symbol alone changed (the "N tests reach this" code lens and its command).

``tests_reaching(graph, targets, index, ...)`` fetches once the part of the call graph above all
the targets together (their transitive callers over ``CALLS``, up to ``test_depth`` hops, in one
query per hop), then walks it in memory from each target: the same rules as the selection of
``impact.analyse`` — a special method (``__init__``, ``__enter__``, ``__call__``…) or a property
stands for its class and subclasses, and so does a method nothing in the workspace calls, bound or
unbound (others call it on instances), a closure for the function defining it, whose callers are
walked at the method's depth, a method overriding a method of a standard-library base class
stands for its class too (the library may call it on instances), a scope using a function as a value (``refs.referrers``) one
hop above it, constructor edges to a subclass's ``__init__`` skipped; tests are
picked by ``selection.TestIndex`` (fixtures by parameter name, ``usefixtures``, ``autouse``,
setup methods, module-level code of test modules, methods called on fixture values). Raises what
graph reads raise (``FalkorDBOffline``, ``QueryTimeout``).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

from orbit_lsp.changes.impact import (DEFAULT_TEST_DEPTH, REFERENCE_DEPTH, _fixture_classes,
                                      _is_special, class_families, decorated_as_property, in_file_qual,
                                      library_classes)
from orbit_lsp.changes.refs import referrers
from orbit_lsp.changes.scan_store import store_of_graph
from orbit_lsp.changes.selection import TestIndex, is_test_support
from orbit_lsp.graph import queries
from orbit_lsp.graph.cache import ANSWERS
from orbit_lsp.graph.connection import Graph
from orbit_lsp.graph.implicit import PYTHON2
from orbit_lsp.graph.imports import ImportGraph
from orbit_lsp.index.parsing import gc_paused
from orbit_lsp.index.walk import read_workspace_file
from orbit_lsp.lru import LRU

Key = tuple[str, str]  # (workspace-relative file, graph qual)
LENS_READS = 300  # files read for functions used as values: 300 at the targets, 200 one hop up, 100 two (a lens answers fast)


class _Lines:
    """Source lines of files read on demand (the property check)."""

    def __init__(self, read: Callable[[str], bytes | None]):
        self.read = read
        self.cache: dict[str, list[str]] = {}

    def is_property(self, file: str, line: int | None) -> bool:
        if not line:
            return False
        if file not in self.cache:
            data = self.read(file)
            self.cache[file] = data.decode("utf-8", "replace").splitlines() if data is not None else []
        return decorated_as_property(self.cache[file], line)


def tests_reaching(graph: Graph, targets: list[dict], index: TestIndex, root_package: str = "",
                   read: Callable[[str], bytes | None] | None = None, test_depth: int = DEFAULT_TEST_DEPTH,
                   ans: queries.Answer | None = None,
                   importers: dict[str, tuple[str, ...]] | None = None,
                   keep: Callable[[Key, Any], Any] | None = None, count: bool = False) -> dict[Key, Any]:
    """For each target (dicts with "file", "qual" (graph qual), "name", "kind", "line"), the
    tests that reach it: ``{(file, qual): [test dict as in Selection.tests]}`` (sorted by id; a
    target no test reaches maps to []), or what ``keep(key, tests)`` makes of them, called as
    each target's tests are known (a much-used function of a large workspace is reached by
    thousands of tests: a caller that needs only their number need not hold every list at
    once). ``index`` holds the workspace's test files; ``read`` gives a file's bytes (the
    property check; default ``index.read``); ``ans`` collects the Cypher run; ``importers``:
    ``ImportGraph.importers`` of the graph when known (else read when a function is looked up
    as a value). ``count``: each target's number of tests instead of their list (what a tests
    lens shows; the entries are not made)."""
    ans = ans if ans is not None else queries.Answer()
    read = read or index.read
    lines = _Lines(read)
    info: dict[Key, dict] = {(t["file"], t["qual"]): t for t in targets}
    callers_of: dict[Key, set[Key]] = {}
    stands_for: dict[Key, set[Key]] = {}  # special method / property -> its class and subclasses (no hop)
    seen: set[Key] = set(info)
    frontier = sorted(seen)
    depth = 0
    lib_cache: dict = {}
    lens_reads = LENS_READS
    while frontier and depth < test_depth:
        methods = [k for k in frontier if info[k].get("kind") == "method"]
        implicit = [k for k in methods if _is_special(info[k]["name"]) or lines.is_property(k[0], info[k].get("line"))]
        others = [k for k in methods if k not in set(implicit) and not is_test_support(k[0])
                  and info[k]["name"] not in PYTHON2]
        if others:  # methods nothing in the workspace calls: called on instances by other code
            implicit += queries.uncalled_methods(graph, others, ans)
            # methods of a class deriving from a library class: the library calls them on instances
            library = library_classes(graph, ans, read, {(k[0], k[1].rpartition(".")[0]) for k in others}, lib_cache,
                                      root_package)
            implicit += [k for k in others if k[1].rpartition(".")[2] in library.get((k[0], k[1].rpartition(".")[0]), ())
                         and k not in set(implicit)]
        if implicit:
            classes = {k: (k[0], k[1].rpartition(".")[0]) for k in implicit}
            wanted: dict[Key, set[str]] = {}
            for m, c in classes.items():
                wanted.setdefault(c, set()).add(m[1].rpartition(".")[2])
            family: dict[tuple[Key, str], list[Key]] = {}  # per method: a subclass may override one, not another
            for c, by_name in class_families(graph, ans, wanted).items():
                for name, members in by_name.items():
                    for f, q, n, ln in members:
                        info.setdefault((f, q), {"file": f, "qual": q, "name": n, "kind": "class", "line": ln})
                    family[(c, name)] = [(f, q) for f, q, _, _ in members]
            for m, c in classes.items():
                for k in family.get((c, m[1].rpartition(".")[2]), []):
                    stands_for.setdefault(m, set()).add(k)
                    if k not in seen:
                        seen.add(k)
                        frontier.append(k)
        nested = {k: (k[0], k[1].rpartition(".")[0]) for k in frontier if info[k].get("kind") == "function"}
        if nested:  # closures stand for the function that defines them
            rows = ans.run(graph, "UNWIND $p AS p MATCH (s:Symbol {qual: p[1]}) WHERE s.file = p[0] "
                                  "AND s.kind IN ['function', 'method'] RETURN s.file, s.qual, s.name, s.kind, s.line",
                           {"p": [list(c) for c in sorted(set(nested.values()))]})
            parents = {(f, q): {"file": f, "qual": q, "name": n, "kind": k, "line": ln} for f, q, n, k, ln in rows}
            for inner, parent in nested.items():
                if parent in parents:
                    stands_for.setdefault(inner, set()).add(parent)
                    if parent not in seen:
                        seen.add(parent)
                        info[parent] = parents[parent]
                        frontier.append(parent)
        rows = ans.run(graph, "UNWIND $f AS t MATCH (c:Symbol)-[e:CALLS]->(s:Symbol {qual: t[1]}) WHERE s.file = t[0] "
                              "RETURN s.file, s.qual, c.file, c.qual, c.name, c.kind, c.line, e.resolved, e.lines",
                       {"f": [list(k) for k in frontier]})
        rows = [r[:7] for r in rows]
        if depth <= REFERENCE_DEPTH and lens_reads > 0:  # functions used as values: the referencing scopes
            syms = [dict(info[k], file=k[0], qual=k[1]) for k in frontier
                    if info[k].get("kind") in ("function", "method") and not is_test_support(k[0])]
            if syms:
                if importers is None:
                    importers = ImportGraph.load(graph).importers
                found = referrers(graph, ans, read, importers, syms, root_package, max_reads=lens_reads)
                lens_reads -= LENS_READS // (REFERENCE_DEPTH + 1)
                by_qual: dict[str, Key] = {}
                for k in frontier:  # the first of the frontier with that qual
                    by_qual.setdefault(k[1], k)
                for r in found:
                    of = by_qual[r["of"]]
                    rows.append((of[0], of[1], r["file"], r["qual"], r["name"], r["kind"], r["line"]))
        nxt = []
        for sfile, squal, cfile, cqual, cname, ckind, cline in rows:
            ck = (cfile, cqual)
            callers_of.setdefault((sfile, squal), set()).add(ck)
            if ck not in seen:
                seen.add(ck)
                info[ck] = {"file": cfile, "qual": cqual, "name": cname, "kind": ckind, "line": cline}
                nxt.append(ck)
        frontier = sorted(nxt)
        depth += 1

    # the walks below run once per target over the same caller graph (tens of thousands of
    # symbols above a much-used function): its symbols as integers, neighbours as lists sorted
    # by key, so that which of two paths as short names a test's reason does not depend on the
    # order of a set (string hashes differ from one process to the next)
    keys = list(info)
    number = {k: i for i, k in enumerate(keys)}
    callers = [()] * len(keys)
    for u, ks in callers_of.items():
        callers[number[u]] = [number[k] for k in sorted(ks)]
    stands = [()] * len(keys)
    for u, ks in stands_for.items():
        stands[number[u]] = [number[k] for k in sorted(ks)]
    method_of = [k[1].rpartition(".")[2] if info[k].get("kind") == "method" else None for k in keys]
    test_local: list = [False] * len(keys)  # symbol -> (test file, in-file qual) | None; False: not known yet
    classes_of_fixture: dict[tuple[str, str], list[tuple[str, str]]] = {}
    out: dict[Key, list[dict]] = {}
    beyond = test_depth + 1
    for t in targets:
        start = (t["file"], t["qual"])
        dist = {number[start]: 0}
        todo = deque(dist)
        while todo:  # 0-1 BFS: a class stands for its special method at the same depth
            u = todo.popleft()
            d = dist[u]
            for k in stands[u]:
                if dist.get(k, beyond) > d:
                    dist[k] = d
                    todo.appendleft(k)
            if d < test_depth:
                d += 1
                for k in callers[u]:
                    if dist.get(k, beyond) > d:
                        dist[k] = d
                        todo.append(k)
        reached: dict = {}
        for i, d in dist.items():
            local = test_local[i]
            if local is False:
                key = keys[i]
                local = test_local[i] = (key[0], in_file_qual(key[0], key[1], root_package)) \
                    if is_test_support(key[0]) else None
            if local is not None:
                how = f"changed: {t['qual']}" if d == 0 else f"calls {t['qual']} ({d} hop{'s' * (d > 1)})"
                reached[local] = (d, t["qual"], how)

        def method_hit(fx, method: str, dist=dist, target=t["qual"]):
            key = (fx.file, fx.qual)
            if key not in classes_of_fixture:
                classes_of_fixture[key] = _fixture_classes(graph, ans, fx, root_package)
            for cfile, cqual in classes_of_fixture[key]:
                i = number.get((cfile, f"{cqual}.{method}"))
                d = dist.get(i) if i is not None else None
                if d is not None and d < test_depth:
                    return d, target, f"{cqual}.{method}"
            return None

        names = {m for i in dist if (m := method_of[i]) is not None}
        selected = index.count(reached, {}, method_hit, names) if count else index.select(reached, {}, method_hit, names)
        out[start] = keep(start, selected) if keep is not None else selected
    return out


# -- per workspace, per graph generation (the language server's lenses) ----------------------------
_INDEXES = LRU(16)  # (graph name, generation) -> TestIndex | None
_LAYOUTS = LRU(16)  # graph name -> (the indexer's file names, TestIndex | None) when its lists were made
_COUNTS = LRU(65536)  # (graph name, generation, file, qual) -> number of tests reaching it | None
LISTS_KEPT = 100_000  # tests kept in lists over all symbols (a test dict is ~0.5 KB)
_LISTS = LRU(8192, max_weight=LISTS_KEPT)  # same key -> [test dict] | None (weight: its length)


def forget_answers() -> None:
    """Drop the numbers and lists of tests computed so far (benchmarks time them afresh)."""
    _COUNTS.clear()
    _LISTS.clear()


def _importers(graph: Graph) -> dict[str, tuple[str, ...]]:
    """Who imports each file (``ImportGraph.importers``)."""
    return ImportGraph.load(graph).importers


def workspace_files(graph: Graph) -> tuple[str, ...]:
    """Every file path the graph has (``File`` nodes), sorted."""
    return tuple(sorted(r[0] for r in graph.ro_query("MATCH (f:File) RETURN f.path").rows))


def test_index(ix) -> TestIndex | None:
    """The test structure of indexer ``ix``'s workspace as its graph is now (test files read
    from disk), or None when the workspace has no test file. Cached per graph generation."""
    key = (ix.graph.name, ix.generation)
    found, index = _INDEXES.lookup(key)
    if not found:
        root, limit = ix.root, getattr(getattr(ix, "settings", None), "max_file_bytes", 2_000_000)

        def read(rel: str) -> bytes | None:
            try:
                return read_workspace_file(root, root / rel, limit)
            except OSError:
                return None
        # a re-index that changed files' contents, not which files there are (a save): the
        # lists of the graph's files are those of the last index
        names = frozenset(getattr(ix, "state", None) or ())
        _, last = _LAYOUTS.lookup(ix.graph.name)
        if names and last is not None and last[0] == names:
            index = TestIndex.of_same_files(last[1], read) if last[1] is not None else None
        else:
            files = ANSWERS.get(ix.graph, ix.generation, workspace_files)
            index = (TestIndex(list(files), read, store_of_graph(ix.graph))
                     if any(is_test_support(f) for f in files) else None)
            if names:
                _LAYOUTS.put(ix.graph.name, (names, index))
        _INDEXES.put(key, index)
    return index


_HAS_TESTS = LRU(16)  # (graph name, generation) -> bool


def has_tests(ix) -> bool:
    """Whether indexer ``ix``'s workspace has a test file or a ``conftest.py``
    (``is_test_support``) among the files it indexed (its ``state``: no graph read, no file
    read; ``test_index`` is None exactly when it has none). Cached per graph generation."""
    key = (ix.graph.name, ix.generation)
    found, value = _HAS_TESTS.lookup(key)
    if not found:
        # a copy: the index thread may change ``state`` meanwhile
        value = any(is_test_support(f) for f in list(getattr(ix, "state", None) or ()))
        _HAS_TESTS.put(key, value)
    return value


def cached_counts(ix, file: str, quals: list[str]) -> dict[str, int | None]:
    """What ``test_counts`` has already computed for these quals at ``ix``'s graph generation
    (quals not computed yet are left out); reads no graph and no file."""
    gen = (ix.graph.name, ix.generation)
    out: dict[str, int | None] = {}
    for q in quals:
        found, n = _COUNTS.lookup((*gen, file, q))
        if found:
            out[q] = n
    return out


def keep_counts(ix, file: str, counts: dict[str, int | None]) -> None:
    """Keep numbers computed elsewhere (``test_counts`` in another process) for
    ``cached_counts`` at ``ix``'s graph generation."""
    gen = (ix.graph.name, ix.generation)
    for q, n in counts.items():
        _COUNTS.put((*gen, file, q), n)


def _compute(ix, file: str, quals: list[str], ans: queries.Answer,
             lists: dict[str, list[dict]] | None = None) -> dict[str, int | None]:
    """Compute the tests reaching ``quals`` of ``file`` (``tests_reaching``): their numbers
    are kept in ``_COUNTS``; with ``lists`` (qual -> tests, filled), their lists too, in
    ``_LISTS`` (within ``LISTS_KEPT``); without, only the numbers are computed (a lens's:
    the lens command lists one symbol's tests when asked). Returns the numbers (None: not in
    the graph now)."""
    gen = (ix.graph.name, ix.generation)
    rows = ans.run(ix.graph, "UNWIND $q AS q MATCH (s:Symbol {qual: q}) WHERE s.file = $f "
                             "RETURN s.qual, s.name, s.kind, s.line", {"q": quals, "f": file})
    targets = [{"file": file, "qual": q, "name": n, "kind": k, "line": ln} for q, n, k, ln in rows]

    def keep(key: Key, tests: list[dict] | int) -> int:
        if isinstance(tests, int):
            _COUNTS.put((*gen, *key), tests)
            return tests
        if lists is not None:
            lists[key[1]] = tests
        _LISTS.put((*gen, *key), tests, len(tests) + 1)
        _COUNTS.put((*gen, *key), len(tests))
        return len(tests)
    with gc_paused():  # the walks make many short-lived objects; the test files' scans stay (~10%)
        got = tests_reaching(ix.graph, targets, test_index(ix), ix.root_package, ans=ans,
                             importers=ANSWERS.get(ix.graph, ix.generation, _importers), keep=keep,
                             count=lists is None) if targets else {}
    out: dict[str, int | None] = {}
    for q in quals:
        out[q] = got.get((file, q))
        if out[q] is None:  # not in the graph now
            _COUNTS.put((*gen, file, q), None)
            _LISTS.put((*gen, file, q), None)
    return out


def test_counts(ix, file: str, quals: list[str], ans: queries.Answer | None = None) -> dict[str, int | None]:
    """For each graph qual of a symbol of ``file`` (workspace-relative), how many tests reach
    it (``tests_reaching``), or None when the symbol is not in the graph now; 0 for every qual
    when the workspace has no test. Cached per graph generation; the quals not cached are
    computed together."""
    ans = ans if ans is not None else queries.Answer()
    if test_index(ix) is None:
        return {q: 0 for q in quals}
    out = cached_counts(ix, file, list(dict.fromkeys(quals)))
    todo = [q for q in dict.fromkeys(quals) if q not in out]
    if todo:
        out.update(_compute(ix, file, todo, ans))
    return out


def tests_for(ix, file: str, quals: list[str], ans: queries.Answer | None = None) -> dict[str, list[dict] | None]:
    """For each graph qual of a symbol of ``file`` (workspace-relative), the tests that reach it
    (``tests_reaching``), or None when the symbol is not in the graph now; [] for every qual
    when the workspace has no test. Cached per graph generation within ``LISTS_KEPT`` tests
    over all symbols; the quals not cached are computed together."""
    ans = ans if ans is not None else queries.Answer()
    if test_index(ix) is None:
        return {q: [] for q in quals}
    gen = (ix.graph.name, ix.generation)
    out: dict[str, list[dict] | None] = {}
    todo = []
    for q in dict.fromkeys(quals):
        found, tests = _LISTS.lookup((*gen, file, q))
        if found:
            out[q] = tests
        else:
            todo.append(q)
    if todo:
        lists: dict[str, list[dict]] = {}
        _compute(ix, file, todo, ans, lists)
        for q in todo:
            out[q] = lists.get(q)
    return out
