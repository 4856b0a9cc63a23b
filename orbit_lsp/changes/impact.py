"""The impact of a change in the code graph: changed symbols, their blast radius, the files
that depend on the changed files, the tests that reach them, and what *may* be affected through
calls the graph could not bind.

``analyse(graph, change, root_package)`` reads the graph of the change's new version (the
caller brings it up to date first: ``refresh``) and returns a plain dict (see ``analyse``), with
every Cypher statement it ran. Raises ``FalkorDBOffline`` / ``QueryTimeout`` from the graph
layer.
"""

from __future__ import annotations

import ast
import re
import time
from dataclasses import dataclass
from typing import Any

from orbit_lsp.changes.broken import Broken, removed_names
from orbit_lsp.changes.broken import find as find_broken
from orbit_lsp.changes import refs
from orbit_lsp.changes.diff import Change
from orbit_lsp.changes.scan_store import store_of_graph
from orbit_lsp.changes.selection import TestIndex, commands, is_test_support
from orbit_lsp.changes.symbols import symbol_changes
from orbit_lsp.graph import queries
from orbit_lsp.graph.connection import Graph
from orbit_lsp.graph.implicit import PYTHON2
from orbit_lsp.graph.imports import ImportGraph
from orbit_lsp.index.py_edges import full_qual, module_name
from orbit_lsp.lru import LRU
from orbit_lsp.index.fingerprint import content_digest

DEFAULT_DEPTH = 4
DEFAULT_TEST_DEPTH = 12


@dataclass
class Options:
    """``depth``: hops of the blast radius shown (callers, dependents); ``test_depth``: hops a
    test may be from a changed symbol (tests reach code through fixtures and helpers, so
    further); ``tests``: whether to select tests at all; ``coverage``: a
    ``coverage_map.CoverageMap`` of the base version that narrows the test selection (see
    ``coverage_map.analyse``); ``symbols``: when given, only these changed symbols ((file,
    qual)) are followed (removed symbols, files added, removed or renamed and names taken away
    always count; the coverage narrowing uses it for the symbols it keeps static)."""

    depth: int = DEFAULT_DEPTH
    test_depth: int = DEFAULT_TEST_DEPTH
    tests: bool = True
    coverage: Any = None
    symbols: frozenset | None = None


CALLERS_CYPHER = ("UNWIND $frontier AS t MATCH (c:Symbol)-[e:CALLS]->(s:Symbol {qual: t[1]}) WHERE s.file = t[0] "
                  "RETURN c.qual, c.name, c.kind, c.file, c.line, c.end_line, c.col, c.unresolved_calls, "
                  "s.qual, e.lines, e.resolved, s.file")


class _Rows:
    def __init__(self, rows):
        self.rows = rows


def _callers_of_all(graph: Graph, targets: list[dict], depth: int, ans: queries.Answer) -> _Rows:
    """``queries.callers_of_all`` (transitive callers with their fewest hops, the targets never
    listed; rows: symbol dict + depth, via, lines, resolved), one query per hop."""
    if not targets or depth <= 0:
        return _Rows([])
    seen = {(t["file"], t["qual"]) for t in targets}
    frontier = sorted([f, q] for f, q in seen)
    out: list[dict] = []
    for d in range(1, depth + 1):
        if not frontier:
            break
        rows = sorted(ans.run(graph, CALLERS_CYPHER, {"frontier": frontier}), key=lambda r: (r[3], r[4], r[0]))
        nxt = []
        for r in rows:
            key = (r[3], r[0])
            if key in seen:
                continue
            seen.add(key)
            row = queries._sym(r[:8])
            row.update({"depth": d, "via": r[8], "lines": r[9], "resolved": r[10]})
            out.append(row)
            nxt.append([r[3], r[0]])
        frontier = nxt
    return _Rows(out)


def refresh(ix) -> dict:
    """Bring the graph of indexer ``ix`` up to date with the workspace on disk (only files whose
    content changed are parsed). Returns {"mode", "parsed", "seconds"}."""
    rep = ix.index_all()
    return {"mode": rep.mode, "parsed": rep.parsed, "seconds": round(rep.seconds, 3)}


def in_file_qual(file: str, full: str, root_package: str) -> str:
    """The in-file qualified name of a graph symbol (``""`` for the module)."""
    mod = full_qual(file, "", root_package)
    if full == mod:
        return ""
    for prefix in (mod + ".", mod + "#", file + "#"):
        if full.startswith(prefix):
            return full[len(prefix):]
    return full


def run_time_dependents(imports: ImportGraph, path: str, max_hops: int) -> dict[str, int]:
    """``imports.dependents(path, max_hops)`` as Python imports at run time: importing
    ``pkg.mod`` runs ``pkg/__init__.py`` first, so when a package's ``__init__.py`` is a dependent
    (at h hops), every module of that package is one too (at h hops: importing any of them runs
    it), and so are their own importers; when ``path`` is a package's ``__init__.py``, its
    modules are dependents at 1 hop. ``{path: fewest hops}``, never ``path`` itself."""
    under = getattr(imports, "_modules_under", None)
    if under is None:
        files = set(imports.importers) | {f for srcs in imports.importers.values() for f in srcs}
        under = {}
        for f in files:
            d = f.rpartition("/")[0]
            while True:
                under.setdefault(d, []).append(f)
                if not d:
                    break
                d = d.rpartition("/")[0]
        imports._modules_under = under
    hops = {path: 0}
    frontier = [path]
    for hop in range(1, max_hops + 1):
        found = []
        if hop == 1 and path.endswith("/__init__.py"):  # importing any module of the package runs it
            found = [m for m in under.get(path.rpartition("/")[0], ()) if m != path and m.endswith(".py")]
            hops.update((m, 1) for m in found)
        for f in frontier:
            for d in imports.importers.get(f, ()):
                if d not in hops:
                    hops[d] = hop
                    found.append(d)
        k = 0
        while k < len(found):  # a package's __init__ reached: its modules too, at the same hop
            f = found[k]
            k += 1
            if f.endswith("/__init__.py"):
                for m in under.get(f.rpartition("/")[0], ()):
                    if m not in hops and m.endswith(".py"):
                        hops[m] = hop
                        found.append(m)
        if not found:
            break
        frontier = found
    hops.pop(path, None)
    return hops


def _public(row: dict) -> bool:
    return row["kind"] != "module" and not row["name"].startswith("_") and not is_test_support(row["file"])


def analyse(graph: Graph, change: Change, root_package: str = "", options: Options | None = None) -> dict:
    """The impact of ``change``.

    Returns {"change": {"mode", "description", "base"}, "files": [...], "symbols": [...],
    "hunks": [...] (see ``symbols.SymbolChanges``), "comment_only": [path] (Python files whose
    change is only comments, blank lines or spacing: no code change, not in "files"), "callers": [symbol dict + "depth", "via",
    "reaches"] (bound CALLS, 1..depth hops), "dependents": [{"path", "hops", "of"}] (IMPORTS,
    1..depth hops), "may_be_affected": [symbol dict + "depth", "names", "reaches"] (reached only
    through unbound call sites using a changed name), "tests": {"selected": [...],
    "may_be_affected": [...], "removed": [test id], "commands": {...}, "total": int | None},
    "totals": {...}, "notes": [...], "cypher": [{"query", "params"}], "seconds": float}.
    Symbol rows carry 1-based lines and workspace-relative paths. With ``options.coverage``
    the tests are narrowed by that coverage map and "tests" has a "coverage" entry
    (``coverage_map.analyse``)."""
    opts = options or Options()
    if opts.coverage is not None:
        from orbit_lsp.changes import coverage_map

        return coverage_map.analyse(graph, change, root_package, opts)
    t0 = time.perf_counter()
    ans = queries.Answer()
    sc, new_versions = symbol_changes(change, root_package)
    if opts.symbols is not None:
        sc.symbols = [s for s in sc.symbols if s["status"] == "removed" or (s["file"], s["qual"]) in opts.symbols]
    notes = list(change.notes) + sc.notes
    live = [s for s in sc.symbols if s["status"] != "removed"]
    targets = [{"file": s["file"], "qual": s["qual"]} for s in live if s["kind"] != "module"]
    present = set()
    if targets:
        rows = ans.run(graph, "UNWIND $t AS t MATCH (s:Symbol {qual: t[1]}) WHERE s.file = t[0] RETURN s.file, s.qual",
                       {"t": sorted([t["file"], t["qual"]] for t in targets)})
        present = {(f, q) for f, q in rows}
        stale = [t for t in targets if (t["file"], t["qual"]) not in present]
        if stale:
            notes.append(f"{len(stale)} changed symbol(s) are not in the graph yet (unsaved, or not indexed): "
                         + ", ".join(t["qual"] for t in stale[:5]) + (" …" if len(stale) > 5 else ""))
    far = max(opts.depth, opts.test_depth if opts.tests else 0)
    walk = _callers_of_all(graph, targets, far, ans).rows
    origin = {t["qual"]: t["qual"] for t in targets}
    for r in walk:  # rows come by depth: a row's via was reached before it
        r["reaches"] = origin.get(r["via"], r["via"])
        origin.setdefault(r["qual"], r["reaches"])
    # code that still uses a name the change takes away: it fails when it runs (ImportError,
    # NameError); its functions are callers at 1 hop, its modules fail at import (below)
    gone = {module_name(f["old_path"], root_package): f["old_path"] for f in sc.files
            if f["status"] in ("removed", "renamed") and f["lang"] == "python" and f["old_path"]}
    unresolved_imports = None
    taken = removed_names(change, sc.files)
    if gone or taken:
        unresolved_imports = ans.run(graph, "MATCH (f:File) WHERE f.unresolved_imports IS NOT NULL "
                                            "RETURN f.path, f.unresolved_imports ORDER BY f.path")
    broken = find_broken(graph, ans, change, sc.files, root_package, unresolved_imports, taken)
    notes += broken.notes
    walk = _with_broken_functions(graph, ans, broken, walk, far, root_package)
    walk = _through_implicit_calls(graph, ans, change, live, walk, far, root_package)
    imports = ImportGraph.load(graph)
    ans.cypher += imports.cypher
    walk = _through_references(graph, ans, change, imports, live, walk, far, root_package)
    bound = {(r["file"], r["qual"]) for r in walk} | {(t["file"], t["qual"]) for t in targets}
    callers = [r for r in walk if r["depth"] <= opts.depth]

    # files: every changed file's dependents; module-level changes and added/removed/renamed
    # files are changes *of the file* (tests that import them are selected)
    file_level: set[str] = {s["file"] for s in live if s["kind"] == "module"}
    file_level |= {f["path"] for f in sc.files if f["status"] in ("added", "renamed") and f["lang"]}
    file_level |= {f["path"] for f in sc.files if f["lang"] and f["parse_error"]}
    dep_hops: dict[str, tuple[int, str]] = {}
    test_imports: dict[str, tuple[int, str, str]] = {}
    for f in sc.files:
        if f["status"] == "removed":
            continue
        for path, hops in run_time_dependents(imports, f["path"], far).items():
            if hops <= opts.depth and (path not in dep_hops or hops < dep_hops[path][0]):
                dep_hops[path] = (hops, f["path"])
            if f["path"] in file_level and is_test_support(path):
                if path not in test_imports or hops < test_imports[path][0]:
                    test_imports[path] = (hops, f["path"], f"imports {f['path']} ({hops} hop{'s' * (hops > 1)})")
    # files that fail at import now: they still import a module the change removed or moved
    # away (now unresolved), or a name it took away from a module; their importers fail too
    failing: dict[str, tuple[str, str]] = {}  # path -> (what it still uses, how)
    if gone:
        for path, items in unresolved_imports or ():
            hit = next((gone[m] for item in items or () for m in gone
                        if (mod := str(item).partition(":")[2]) == m or mod.startswith(m + ".")), None)
            if hit is not None:
                notes.append(f"{path} still imports {hit}, which the change removes or moves")
                failing.setdefault(path, (hit, f"imports {hit}, removed or moved"))
    for path, (name, mod_path, _line, error) in broken.files.items():
        failing.setdefault(path, (mod_path, f"uses {name} of {mod_path}, removed ({error} at import)"))
    if any(p.endswith("__init__.py") for p in failing):  # a package that fails fails every module in it
        all_files = [r[0] for r in ans.run(graph, "MATCH (f:File) RETURN f.path")]
        for path, what in list(failing.items()):
            if path.endswith("__init__.py"):
                pkg = path[: -len("__init__.py")]
                for f in all_files:
                    if f.startswith(pkg) and f != path and f.endswith(".py"):
                        failing.setdefault(f, (what[0], f"in package {pkg.rstrip('/')}, whose __init__.py fails: "
                                                        + what[1]))
    for path, (hit, how) in sorted(failing.items()):
        reach = {path: 0, **run_time_dependents(imports, path, far - 1)}
        for dep, h in reach.items():
            hops = h + 1
            if hops <= opts.depth and (dep not in dep_hops or hops < dep_hops[dep][0]):
                dep_hops[dep] = (hops, hit)
            if is_test_support(dep) and (dep not in test_imports or hops < test_imports[dep][0]):
                via = how if dep == path else f"imports {path}, which {how}"
                test_imports[dep] = (hops, hit, f"{via} ({hops} hop{'s' * (hops > 1)})")
    # module-level code that reaches the change runs when its module is imported: the test
    # files importing that module (directly or not) run it at collection (not when that code
    # only makes an instance whose changed method runs later: ``cli = FlaskGroup()``)
    for r in walk:
        if r["kind"] != "module" or is_test_support(r["file"]) or r["depth"] >= far or r.get("instance_only"):
            continue
        for path, hops in run_time_dependents(imports, r["file"], far).items():
            d = r["depth"] + hops
            if is_test_support(path) and (path not in test_imports or d < test_imports[path][0]):
                test_imports[path] = (d, r["reaches"], f"imports {r['file']} ({hops} hop{'s' * (hops > 1)}), whose "
                                                       f"module-level code calls {r['reaches']}")
    changed_paths = {f["path"] for f in sc.files}
    dependents = sorted(({"path": p, "hops": h, "of": o} for p, (h, o) in dep_hops.items() if p not in changed_paths),
                        key=lambda r: (r["hops"], r["path"]))

    # may be affected: unbound call sites using a changed (or removed, or renamed-away) name
    names = {s["name"] for s in sc.symbols if s["kind"] != "module"}
    names |= {s["old_qual"].rpartition(".")[2].rpartition("#")[2] for s in sc.symbols
              if s["status"] == "renamed" and s.get("old_qual")}
    names |= {r["name"] for r in walk if r.get("resolved") == "removed name"}  # they fail as if changed
    unbound = [r for r in queries.unbound_users(graph, sorted(names), ans).rows if (r["file"], r["qual"]) not in bound]
    may_names = {(r["file"], r["qual"]): r["names"] for r in unbound}
    for r in unbound:
        r["depth"], r["reaches"] = 1, " | ".join(r["names"])
    may_walk = _callers_of_all(graph, [{"file": r["file"], "qual": r["qual"]} for r in unbound],
                                      far - 1, ans).rows if unbound and far > 1 else []
    may_origin = {r["qual"]: r["reaches"] for r in unbound}
    may_rows = list(unbound)
    for r in may_walk:
        r["depth"] += 1
        r["reaches"] = may_origin.get(r["via"], r["via"])
        may_origin.setdefault(r["qual"], r["reaches"])
        may_rows.append(r)
    if may_rows:  # special methods, properties and closures on the way, as for the bound walk
        may_rows = _through_implicit_calls(graph, ans, change, [], may_rows, far, root_package)
    may_rows = [r for r in may_rows if (r["file"], r["qual"]) not in bound]
    may_affected = [dict(r, names=may_names.get((r["file"], r["qual"]), [])) for r in may_rows
                    if r["depth"] <= opts.depth]

    tests = {"selected": [], "may_be_affected": [], "removed": [], "commands": commands([]), "total": None}
    if opts.tests:
        tests = _tests(graph, ans, change, sc, root_package, targets, walk, may_rows, test_imports, opts)

    totals = {
        "files": len(sc.files), "symbols": len(sc.symbols), "comment_only": len(sc.comment_only),
        "callers": len(callers), "dependents": len(dependents), "may_be_affected": len(may_affected),
        "public": len({(r["file"], r["qual"]) for r in callers + live if _public(r)}),
        "tests": len(tests["selected"]), "tests_may_be_affected": len(tests["may_be_affected"]),
        "callers_by_depth": [sum(1 for r in callers if r["depth"] == d) for d in range(1, opts.depth + 1)],
    }
    return {"change": {"mode": change.mode, "description": change.description, "base": change.base},
            "options": {"depth": opts.depth, "test_depth": opts.test_depth, "tests": opts.tests},
            "files": sc.files, "comment_only": sc.comment_only, "symbols": sc.symbols, "hunks": sc.hunks,
            "callers": callers, "dependents": dependents, "may_be_affected": may_affected,
            "tests": tests, "totals": totals, "notes": notes + ans.notes, "cypher": ans.cypher,
            "seconds": round(time.perf_counter() - t0, 3)}


def _with_broken_functions(graph: Graph, ans: queries.Answer, broken: Broken, walk: list[dict], far: int,
                           root_package: str) -> list[dict]:
    """``walk`` with the functions that fail when they run (they use a name the change took
    away) at 1 hop, and their callers."""
    if not broken.functions:
        return walk
    rows = ans.run(graph, f"UNWIND $t AS t MATCH (s:Symbol {{qual: t[1]}}) WHERE s.file = t[0] "
                          f"RETURN {queries.SYMBOL_FIELDS}", {"t": sorted([b["file"], b["qual"]] for b in broken.functions)})
    why = {(b["file"], b["qual"]): b for b in broken.functions}
    known = {(r["file"], r["qual"]): r for r in walk}
    starts = []
    for r in rows:
        sym = queries._sym(r)
        b = why[(sym["file"], sym["qual"])]
        old = full_qual(b["module"], b["name"], root_package)
        row = dict(sym, depth=1, via=old, lines=[b["line"]], resolved="removed name", reaches=old)
        key = (sym["file"], sym["qual"])
        if key not in known or known[key]["depth"] > 1:
            known[key] = row
            starts.append(row)
    if starts and far > 1:
        origin = {r["qual"]: r["reaches"] for r in starts}
        for r in _callers_of_all(graph, [{"file": s["file"], "qual": s["qual"]} for s in starts], far - 1, ans).rows:
            r["depth"] += 1
            r["reaches"] = origin.get(r["via"], r["via"])
            origin.setdefault(r["qual"], r["reaches"])
            key = (r["file"], r["qual"])
            if key not in known or r["depth"] < known[key]["depth"]:
                known[key] = r
    return sorted(known.values(), key=lambda r: (r["depth"], r["file"], r["line"] or 0, r["qual"]))


REFERENCE_DEPTH = 2  # functions reached within this many hops are looked up as values too


def _through_references(graph: Graph, ans: queries.Answer, change: Change, imports: ImportGraph, live: list[dict],
                        walk: list[dict], far: int, root_package: str) -> list[dict]:
    """``walk`` with the scopes that reference a changed function or method, or one reached
    within ``REFERENCE_DEPTH`` hops, as a value (``refs.referrers``): each is a caller one hop
    above the function (``"resolved": "reference"``): a function or method is walked from as
    any caller; a class body stands for its class (the places making instances are walked,
    and module-level code that only makes one is marked ``instance_only``). Module-level code
    reached this way only hands the value out when its module is imported (``cli =
    FlaskGroup()`` registers ``routes_command``): the function runs when that value is used,
    later, so it is marked ``instance_only`` too and does not select the module's importers."""
    syms = [dict(s, depth=0, reaches=s["qual"]) for s in live if s["kind"] in ("function", "method")]
    syms += [r for r in walk if r["kind"] in ("function", "method") and r["depth"] <= REFERENCE_DEPTH
             and not is_test_support(r["file"])]
    syms = [s for s in syms if not is_test_support(s["file"])]
    if not syms:
        return walk
    syms.sort(key=lambda s: s["depth"])  # nearest first: the read budget goes to them
    by_key = {}
    for s in syms:
        if (s["file"], s["qual"]) not in by_key or s["depth"] < by_key[(s["file"], s["qual"])]["depth"]:
            by_key[(s["file"], s["qual"])] = s
    found = refs.referrers(graph, ans, change.new_bytes, imports.importers, list(by_key.values()), root_package)
    known = {(r["file"], r["qual"]): r for r in walk}
    changed = {(s["file"], s["qual"]) for s in live}
    new_rows = []
    for r in found:
        key = (r["file"], r["qual"])
        src = next(s for s in by_key.values() if s["qual"] == r["of"])
        depth = src["depth"] + 1
        if key in changed or depth > far or (key in known and known[key]["depth"] <= depth):
            continue
        row = {k: r[k] for k in queries._SYMBOL_KEYS}
        row.update(depth=depth, via=r["of"], lines=[r["ref_line"]], resolved="reference", reaches=src["reaches"])
        known[key] = row
        new_rows.append(row)
    if not new_rows:
        return walk
    by_depth: dict[int, list[dict]] = {}
    for r in new_rows:
        if r["kind"] != "module":
            by_depth.setdefault(r["depth"], []).append(r)
    found_rows = []
    for depth, starts in sorted(by_depth.items()):
        origin = {s["qual"]: s["reaches"] for s in starts}
        classes = {s["qual"] for s in starts if s["kind"] == "class"}
        for r in _callers_of_all(graph, [{"file": s["file"], "qual": s["qual"]} for s in starts],
                                        far - depth, ans).rows:
            r["depth"] += depth
            r["reaches"] = origin.get(r["via"], r["via"])
            origin.setdefault(r["qual"], r["reaches"])
            if r["kind"] == "module" and r["via"] in classes:
                r["instance_only"] = True  # makes an instance at import; the value is used later
            key = (r["file"], r["qual"])
            if key not in known or r["depth"] < known[key]["depth"]:
                known[key] = r
                found_rows.append(r)
    more = _through_implicit_calls(graph, ans, change, [], new_rows + found_rows, far, root_package)
    first = {(r["file"], r["qual"]) for r in walk}
    for r in more:
        key = (r["file"], r["qual"])
        if key in first:
            continue  # reached without a reference: as found then
        if r["kind"] == "module":
            r["instance_only"] = True  # only hands the value out at import: it runs when used later
        if key not in known or r["depth"] < known[key]["depth"]:
            known[key] = r
    return sorted(known.values(), key=lambda r: (r["depth"], r["file"], r["line"] or 0, r["qual"]))


# bases whose own code calls no method a subclass defines (builtins, typing, abc): not "library"
INERT_BASES = frozenset({
    "object", "ABC", "ABCMeta", "Generic", "Protocol", "NamedTuple", "TypedDict", "Enum", "IntEnum", "Flag",
    "IntFlag", "str", "int", "float", "bytes", "bool", "dict", "list", "tuple", "set", "frozenset", "type",
    "BaseException", "Exception", "ArithmeticError", "AssertionError", "AttributeError", "EnvironmentError",
    "IOError", "ImportError", "IndexError", "KeyError", "LookupError", "NotImplementedError", "OSError",
    "RuntimeError", "TypeError", "ValueError", "UnicodeError", "Warning", "UserWarning", "DeprecationWarning",
    "RuntimeWarning"})


def library_classes(graph: Graph, ans: queries.Answer, read, classes: set[tuple[str, str]],
                    cache: dict | None = None, root_package: str = "") -> dict[tuple[str, str], frozenset[str]]:
    """Of ``classes`` ((file, graph qual)), those deriving, themselves or through workspace
    bases (``INHERITS``), from a standard-library class whose code may call their methods
    (``http.cookiejar.CookieJar``, ``collections.abc.MutableMapping``, ``json.JSONEncoder``;
    not builtins, ``typing``, ``abc``: ``INERT_BASES``), each with the names that library
    class defines (a method of the workspace class by one of those names overrides it: the
    library's own code may call it on instances). A base is found from the source: its name
    imported from a standard-library module, directly or re-exported by a workspace module
    (``from .compat import cookielib``). Bases from other packages are not known (their
    members cannot be read without importing them): not counted. ``read`` gives a file's
    bytes; ``cache`` keeps answers per class, and per ancestor class with its base names
    (``("ancestor", file, qual, bases)``: a much-used base is an ancestor of most classes,
    and its file is parsed once)."""
    cache = {} if cache is None else cache
    todo = sorted(c for c in classes if c not in cache and c[1])
    if todo:
        rows = ans.run(graph, "UNWIND $c AS c MATCH (k:Symbol {qual: c[1]}) WHERE k.file = c[0] AND k.kind = 'class' "
                              "MATCH (k)-[:INHERITS*0..8]->(a:Symbol) OPTIONAL MATCH (a)-[:INHERITS]->(b:Symbol) "
                              "RETURN c[0], c[1], a.file, a.qual, collect(b.name)", {"c": [list(c) for c in todo]})
        ancestors: dict[tuple[str, str], list[tuple[str, str, set[str]]]] = {}
        for cf, cq, af, aq, bases in rows:
            ancestors.setdefault((cf, cq), []).append((af, aq, set(bases)))
        # each ancestor once, a file's together (its parsed tree stays in ``parse_cached``'s cache)
        for af, aq, bases in sorted({(af, aq, frozenset(bases)) for c in todo for af, aq, bases in ancestors.get(c, [])},
                                    key=lambda a: (a[0], a[1], sorted(a[2]))):
            if ("ancestor", af, aq, bases) not in cache:
                cache[("ancestor", af, aq, bases)] = _library_names_kept(read, af, aq, bases, root_package)
        for c in todo:
            names: set[str] = set()
            for af, aq, bases in ancestors.get(c, []):
                names |= cache[("ancestor", af, aq, frozenset(bases))]
            cache[c] = frozenset(names)
    return {c: cache[c] for c in classes if cache.get(c)}


# (file, class qual, its workspace bases' names, root package) -> (``_library_names``, the files
# it read with their contents' digests): kept across answers while those files keep their
# contents (a lens on a file of a large class hierarchy parses each ancestor's file once a
# process, not once an answer)
_LIBRARY_NAMES = LRU(8192)


def _digest(data: bytes | None) -> bytes | None:
    return None if data is None else content_digest(data)


def _library_names_kept(read, file: str, qual: str, bases: frozenset[str], root_package: str) -> frozenset[str]:
    """``_library_names``, kept in ``_LIBRARY_NAMES``: a kept answer is given again when every
    file it read (through ``read``) has the same content now."""
    key = (file, qual, bases, root_package)
    found, kept = _LIBRARY_NAMES.lookup(key)
    if found and all(_digest(read(path)) == digest for path, digest in kept[1]):
        return kept[0]
    reads: list[tuple[str, bytes | None]] = []

    def recording(path: str) -> bytes | None:
        data = read(path)
        reads.append((path, _digest(data)))
        return data
    names = frozenset(_library_names(recording, file, qual, set(bases), root_package))
    _LIBRARY_NAMES.put(key, (names, tuple(reads)))
    return names


def _class_node(tree, file: str, qual: str, root_package: str):
    from orbit_lsp.index.py_edges import module_name

    mod = module_name(file, root_package)
    local = qual[len(mod) + 1:] if mod and qual.startswith(mod + ".") else qual
    body, node = tree.body, None
    for part in local.split("."):
        node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    return node


def _imported_as(tree, name: str, file: str, root_package: str) -> str | None:
    """The dotted name a module's top-level import binds ``name`` to (``from http import
    cookiejar as cookielib`` -> "http.cookiejar"), relative imports made absolute."""
    from orbit_lsp.changes.broken import _module_of_import

    for n in tree.body:
        if isinstance(n, ast.Import):
            for a in n.names:
                if (a.asname or a.name.split(".")[0]) == name:
                    return a.name if a.asname else a.name.split(".")[0]
        elif isinstance(n, ast.ImportFrom):
            for a in n.names:
                if (a.asname or a.name) == name:
                    return f"{_module_of_import(n, file, root_package)}.{a.name}"
    return None


def _stdlib_class(dotted: str):
    import importlib
    import sys

    parts = dotted.split(".")
    if parts[0] not in sys.stdlib_module_names:
        return None
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except Exception:  # noqa: BLE001 - any failure: not a class we can read
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr, None)
        return obj if isinstance(obj, type) else None
    return None


def _library_names(read, file: str, qual: str, workspace_bases: set[str], root_package: str) -> set[str]:
    from orbit_lsp.changes.broken import parse_cached
    from orbit_lsp.index.py_edges import module_name

    if not file.endswith(".py"):
        return set()
    tree = parse_cached(read(file))
    node = _class_node(tree, file, qual, root_package) if tree is not None else None
    if node is None:
        return set()
    names: set[str] = set()
    for b in node.bases:
        expr = b.value if isinstance(b, ast.Subscript) else b
        chain = []
        while isinstance(expr, ast.Attribute):
            chain.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            continue
        last = chain[0] if chain else expr.id
        if last in workspace_bases or last in INERT_BASES:
            continue
        dotted = _imported_as(tree, expr.id, file, root_package)
        if dotted is None:
            continue
        # re-exported by a workspace module (``from .compat import cookielib``): follow it once
        mod, _, attr = dotted.rpartition(".")
        for path in () if not mod else (mod.replace(".", "/") + ".py", "src/" + mod.replace(".", "/") + ".py",
                     mod.replace(".", "/") + "/__init__.py", "src/" + mod.replace(".", "/") + "/__init__.py"):
            if module_name(path, root_package) != mod:
                continue
            data = read(path)
            sub = parse_cached(data) if data is not None else None
            if sub is not None:
                again = _imported_as(sub, attr, path, root_package)
                if again is not None:
                    dotted = again
                break
        cls = _stdlib_class(".".join([dotted, *reversed(chain)]))
        if cls is not None:
            names |= {n for n in dir(cls) if not (n.startswith("__") and n.endswith("__"))} - set(dir(object))
    return names


IMPLICIT_ROUNDS = 3
CONSTRUCTION = frozenset({"__init__", "__new__", "__post_init__", "__init_subclass__", "__set_name__"})
PROPERTY_DECORATORS = re.compile(r"^\s*@(?:[\w.]*\.)?(?:property|cached_property|setter|getter|deleter)\b")


def _is_special(name: str) -> bool:
    """Whether Python 3 may call method ``name`` without a call expression (``__eq__`` for ``==``)."""
    return name.startswith("__") and name.endswith("__") and len(name) > 4 and name not in PYTHON2


def _is_property(change: Change, file: str, line: int | None, cache: dict) -> bool:
    """Whether the definition at ``line`` of ``file`` (new version) is decorated as a property."""
    if not line:
        return False
    if file not in cache:
        data = change.new_bytes(file)
        cache[file] = data.decode("utf-8", "replace").splitlines() if data is not None else []
    return decorated_as_property(cache[file], line)


def decorated_as_property(lines: list[str], line: int) -> bool:
    """Whether the definition at 1-based ``line`` of a file's ``lines`` (its first decorator,
    where a symbol's span starts, or its ``def`` line) has a property decorator."""
    k = line - 1
    if not (0 <= k < len(lines) and lines[k].lstrip().startswith("@")):
        k -= 1
    while 0 <= k < len(lines) and lines[k].lstrip().startswith("@"):
        if PROPERTY_DECORATORS.match(lines[k]):
            return True
        k -= 1
    return False


def class_families(graph: Graph, ans: queries.Answer, wanted: dict[tuple[str, str], set[str]]) -> dict:
    """For each class ``(file, qual)`` of ``wanted`` with the names of its methods that changed
    or were reached: the classes whose instances may run one of those methods as the class
    defines it (or inherits it): the class itself and its subclasses (``INHERITS``, up to 8
    levels), less the subclasses that override every one of the names, and those that reach
    the class only through such (``SecureCookieSessionInterface`` defines its own
    ``save_session``: its instances never run ``SessionInterface.save_session`` unless through
    ``super()``, a call the graph has). Returns ``{class key: {method name: [(file, qual, name,
    line), ...]}}``, the class first in each list."""
    if not wanted:
        return {}
    rows = ans.run(graph, "UNWIND $c AS c MATCH (k:Symbol {qual: c[1]}) WHERE k.file = c[0] AND k.kind = 'class' "
                          "OPTIONAL MATCH (s:Symbol)-[:INHERITS*1..8]->(k) "
                          "RETURN c[0], c[1], k.name, k.line, collect(DISTINCT [s.file, s.qual, s.name, s.line])",
                   {"c": sorted([f, q] for f, q in wanted)})
    subs_of: dict[tuple[str, str], list[tuple]] = {}
    heads: dict[tuple[str, str], tuple] = {}
    for cfile, cqual, cname, cline, subs in rows:
        heads[(cfile, cqual)] = (cfile, cqual, cname, cline)
        subs_of[(cfile, cqual)] = [tuple(x) for x in subs if x and x[0] is not None]
    every = sorted({(x[0], x[1]) for subs in subs_of.values() for x in subs})
    bases: dict[tuple[str, str], list[tuple[str, str]]] = {}
    defined: set[tuple[str, str]] = set()  # (file, method qual) of the subclasses' own methods
    if every:
        for f, q, bs in ans.run(graph, "UNWIND $s AS s MATCH (x:Symbol {qual: s[1]})-[:INHERITS]->(b:Symbol) "
                                       "WHERE x.file = s[0] RETURN s[0], s[1], collect([b.file, b.qual])",
                                {"s": [list(k) for k in every]}):
            bases[(f, q)] = [(b[0], b[1]) for b in bs if b and b[0] is not None]
        probes = sorted({(x[0], f"{x[1]}.{n}") for c, subs in subs_of.items() for x in subs for n in wanted[c]})
        defined = {(f, q) for f, q in ans.run(graph, "UNWIND $m AS m MATCH (x:Symbol {qual: m[1]}) WHERE x.file = m[0] "
                                                     "AND x.kind = 'method' RETURN m[0], m[1]",
                                               {"m": [list(p) for p in probes]})}
    out: dict = {}
    for c, subs in subs_of.items():
        keys = {(x[0], x[1]) for x in subs}
        out[c] = {}
        for name in wanted[c]:
            overriding: set[tuple[str, str]] = set()
            for _ in range(9):  # a subclass is out when it defines the name, or each of its bases in the family is out
                grew = False
                for k in keys - overriding:
                    inside = [b for b in bases.get(k, []) if b in keys or b == c]
                    if (k[0], f"{k[1]}.{name}") in defined or (inside and all(b in overriding for b in inside)):
                        overriding.add(k)
                        grew = True
                if not grew:
                    break
            out[c][name] = [heads[c]] + [x for x in subs if (x[0], x[1]) not in overriding]
    return out


def _through_implicit_calls(graph: Graph, ans: queries.Answer, change: Change, live: list[dict],
                            walk: list[dict], far: int, root_package: str = "") -> list[dict]:
    """The walk continued past functions called without a call expression the graph could
    bind:

    - special methods (``__init__`` on ``C()``, ``__enter__``/``__exit__`` on ``with``,
      ``__call__``, ``__iter__``…) and properties (read as attributes): a changed or reached one
      counts as a change of its class and of the class's subclasses (INHERITS), and the places
      that make instances of them (CALLS to the class) are walked from there;
    - methods nothing in the workspace calls, not even through an unbound call using their
      name (then they would be "may be affected"; the method's own ``super().name()`` does not
      count): the standard library or a framework calls
      them on instances (``http.cookiejar`` on requests' ``MockResponse.info``, click on
      ``FlaskGroup.get_command``): likewise a change of their class and subclasses;
    - closures (a function defined inside a function: a decorator's wrapper, a callback handed
      to a framework): a changed or reached one counts as a change of the function that defines
      it, whose callers receive it (``@app.errorhandler(404)`` runs ``errorhandler`` and gets
      ``decorator``), and that function's callers are walked from there.

    The class or enclosing function stands for the method at the method's depth (no hop). Rows
    get "via" the class or function and "reaches" what the method reaches; enclosing functions
    are listed as rows themselves."""
    lines_cache: dict = {}
    lib_cache: dict = {}
    known = {(r["file"], r["qual"]): r for r in walk}
    seen_classes: set[tuple[str, str]] = set()
    seen_outer: set[tuple[str, str]] = set()
    checked_uncalled: set[tuple[str, str]] = set()
    instance_only: set[str] = set()  # classes walked for a method that does not run at construction
    frontier = [(s["file"], s["qual"], s["name"], s["kind"], s.get("line"), 0, s["qual"]) for s in live]
    frontier += [(r["file"], r["qual"], r["name"], r["kind"], r["line"], r["depth"], r["reaches"]) for r in walk]
    for _ in range(IMPLICIT_ROUNDS):
        starts: dict[tuple[str, str], tuple[int, str]] = {}
        start_names: dict[tuple[str, str], set[str]] = {}  # the methods that made a class a start
        outer: dict[tuple[str, str], tuple[int, str, str]] = {}
        uncalled: dict[tuple[str, str], tuple[tuple[str, str], int, str]] = {}
        for file, qual, name, kind, line, depth, reaches in frontier:
            if kind not in ("method", "function") or depth >= far:
                continue
            parent = (file, qual.rpartition(".")[0])
            if kind == "function" and "." in qual and parent not in seen_outer \
                    and (parent not in outer or depth < outer[parent][0]):
                outer[parent] = (depth, reaches, qual)
            if kind != "method" or parent in seen_classes:
                continue
            if _is_special(name) or _is_property(change, file, line, lines_cache):
                construct = name in CONSTRUCTION
                start_names.setdefault(parent, set()).add(name)
                if parent not in starts or depth < starts[parent][0]:
                    starts[parent] = (depth, reaches, construct or (parent in starts and starts[parent][2]))
                elif construct:
                    starts[parent] = (*starts[parent][:2], True)
            elif not is_test_support(file) and (file, qual) not in checked_uncalled and name not in PYTHON2:
                uncalled.setdefault((file, qual), (parent, depth, reaches))
        if uncalled:  # methods nothing in the workspace calls: called on instances by other code
            rows = queries.uncalled_methods(graph, list(uncalled), ans)
            # methods overriding a method of a standard-library base class (``CookieJar``,
            # ``MutableMapping``, ``JSONEncoder``): the library's own code may call them on
            # instances (``Mapping.__eq__`` calls ``items``), whoever else calls them
            library = library_classes(graph, ans, change.new_bytes, {uncalled[k][0] for k in uncalled}, lib_cache,
                                      root_package)
            rows += [k for k in uncalled if k[1].rpartition(".")[2] in library.get(uncalled[k][0], ())
                     and k not in set(rows)]
            for f, q in rows:
                parent, depth, reaches = uncalled[(f, q)]
                start_names.setdefault(parent, set()).add(q.rpartition(".")[2])
                if parent not in starts or depth < starts[parent][0]:
                    starts[parent] = (depth, reaches, parent in starts and starts[parent][2])
            checked_uncalled.update(uncalled)
        by_depth: dict[int, list[dict]] = {}
        if outer:  # which of the parents are functions (a nested class's method is not a closure)
            seen_outer.update(outer)
            rows = ans.run(graph, f"UNWIND $p AS p MATCH (s:Symbol {{qual: p[1]}}) WHERE s.file = p[0] "
                                  f"AND s.kind IN ['function', 'method'] RETURN {queries.SYMBOL_FIELDS}",
                           {"p": sorted([f, q] for f, q in outer)})
            for r in rows:
                sym = queries._sym(r)
                depth, reaches, inner = outer[(sym["file"], sym["qual"])]
                key = (sym["file"], sym["qual"])
                if key not in known or max(depth, 1) < known[key]["depth"]:  # listed one hop from a changed closure
                    known[key] = dict(sym, depth=max(depth, 1), via=inner, lines=[], resolved="closure", reaches=reaches)
                by_depth.setdefault(depth, []).append({"file": sym["file"], "qual": sym["qual"], "reaches": reaches})
        if starts:
            seen_classes.update(starts)
            families = class_families(graph, ans, {c: start_names.get(c, set()) for c in starts})
            for (cfile, cqual), by_name in families.items():
                depth, reaches, construct = starts[(cfile, cqual)]
                members = list(dict.fromkeys(m[:2] for ms in by_name.values() for m in ms)) or [(cfile, cqual)]
                for f, q in members:
                    by_depth.setdefault(depth, []).append({"file": f, "qual": q, "reaches": reaches})
                    if not construct:
                        instance_only.add(q)
        if not by_depth:
            break
        frontier = []
        for depth, classes in sorted(by_depth.items()):
            reach_of = {c["qual"]: c["reaches"] for c in classes}
            found = _callers_of_all(graph, classes, far - depth, ans).rows
            origin = dict(reach_of)
            for r in found:
                r["depth"] += depth  # the class stands for the method: no hop between them
                if r["kind"] == "module" and r["via"] in instance_only:
                    r["instance_only"] = True  # makes an instance at import; the method runs later
                r["reaches"] = origin.get(r["via"], r["via"])
                origin.setdefault(r["qual"], r["reaches"])
                key = (r["file"], r["qual"])
                if key not in known or r["depth"] < known[key]["depth"]:
                    known[key] = r
                    frontier.append((r["file"], r["qual"], r["name"], r["kind"], r["line"], r["depth"], r["reaches"]))
            for c in classes:  # enclosing functions are reached: their own closures' parents next round
                k = known.get((c["file"], c["qual"]))
                if k is not None and k.get("resolved") == "closure":
                    frontier.append((k["file"], k["qual"], k["name"], k["kind"], k["line"], k["depth"], k["reaches"]))
    return sorted(known.values(), key=lambda r: (r["depth"], r["file"], r["line"] or 0, r["qual"]))


def _fixture_classes(graph: Graph, ans: queries.Answer, fx, root_package: str) -> list[tuple[str, str]]:
    """(file, qual) of the class a fixture returns an instance of (the class of that name it
    calls) and of its base classes (INHERITS, up to 8 levels)."""
    rows = ans.run(graph, "MATCH (f:Symbol {qual: $fq})-[:CALLS]->(c:Symbol {name: $name}) "
                          "WHERE f.file = $ff AND c.kind = 'class' "
                          "OPTIONAL MATCH (c)-[:INHERITS*1..8]->(b:Symbol) "
                          "RETURN c.file, c.qual, collect(DISTINCT [b.file, b.qual])",
                   {"fq": full_qual(fx.file, fx.qual, root_package), "ff": fx.file, "name": fx.returns})
    out = []
    for cfile, cqual, bases in rows:
        out.append((cfile, cqual))
        out += [(b[0], b[1]) for b in bases if b and b[0] is not None]
    return out


def _tests(graph: Graph, ans: queries.Answer, change: Change, sc, root_package: str, targets: list[dict],
           walk: list[dict], may_rows: list[dict], test_imports: dict, opts: Options) -> dict:
    files = [r[0] for r in ans.run(graph, "MATCH (f:File) RETURN f.path")]
    files += [f["path"] for f in sc.files if f["status"] != "removed"]
    removed_files = {f["path"] for f in sc.files if f["status"] == "removed"}
    removed_files |= {f["old_path"] for f in sc.files if f["status"] == "renamed"}
    index = TestIndex([f for f in files if f not in removed_files], change.new_bytes, store_of_graph(graph))

    def reached_of(rows: list[dict], extra: list[dict]) -> dict:
        out: dict = {}
        for r in extra:
            if is_test_support(r["file"]):
                key = (r["file"], in_file_qual(r["file"], r["qual"], root_package))
                out[key] = (0, r["qual"], f"changed: {r['qual']}")
        for r in rows:
            if is_test_support(r["file"]) and r["depth"] <= opts.test_depth:
                key = (r["file"], in_file_qual(r["file"], r["qual"], root_package))
                if key not in out or r["depth"] < out[key][0]:
                    out[key] = (r["depth"], r["reaches"], f"calls {r['reaches']} ({r['depth']} hop{'s' * (r['depth'] > 1)})")
        return out

    live = [s for s in sc.symbols if s["status"] != "removed"]
    # a changed test file's symbols count as reached even when the graph does not know them yet
    reached = reached_of(walk, live)
    whole = {p: v for p, v in test_imports.items()}
    for f in sc.files:  # an added or renamed test file: every test of it
        if f["status"] in ("added", "renamed") and is_test_support(f["path"]):
            whole[f["path"]] = (0, f["path"], f"{f['status']} file")
    # methods called on fixture parameters: bound through the class the fixture returns
    hits: dict[tuple[str, str], tuple[int, str]] = {(t["file"], t["qual"]): (0, t["qual"]) for t in targets}
    for r in walk:
        if r["depth"] < opts.test_depth:
            hits.setdefault((r["file"], r["qual"]), (r["depth"], r["reaches"]))
    classes: dict[tuple[str, str], list[tuple[str, str]]] = {}

    def method_hit(fx, method: str):
        key = (fx.file, fx.qual)
        if key not in classes:
            classes[key] = _fixture_classes(graph, ans, fx, root_package)
        for cfile, cqual in classes[key]:
            got = hits.get((cfile, f"{cqual}.{method}"))
            if got is not None:
                return got[0], got[1], f"{cqual}.{method}"
        return None

    selected = index.select(reached, whole, method_hit if hits else None, {q.rpartition(".")[2] for _, q in hits})
    chosen = {t["id"] for t in selected}
    may_reached = reached_of([r for r in may_rows if r["depth"] <= opts.test_depth], [])
    may = [dict(t, reason="may call " + t["reaches"] + " (unbound call)") for t in index.select(may_reached, {})
           if t["id"] not in chosen]
    removed = []
    for s in sc.symbols:
        if s["status"] == "removed" and s["kind"] in ("function", "method") and is_test_support(s["file"]):
            removed.append(s["file"] + "::" + in_file_qual(s["file"], s["qual"], root_package).replace(".", "::"))
    if opts.tests and (len(index.py_tests) + len(index.js_tests)) <= 2000:
        total = index.total()
    else:
        total = None
    return {"selected": selected, "may_be_affected": may, "removed": sorted(removed),
            "commands": commands(selected), "total": total}
