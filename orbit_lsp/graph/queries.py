"""Named, parameterised read queries on a code graph.

Every function returns an ``Answer``: ``rows`` (list of dicts), ``cypher`` (every statement it
ran, in order, with the parameters of each) and ``notes`` (ambiguities, truncation). Traversals
that go several hops run one query per hop over a frontier (``WHERE x.path IN $frontier``):
measured faster than one variable-length path query and exact about minimal hop counts.
All raise ``FalkorDBOffline`` / ``QueryTimeout`` from the graph layer.
"""

from __future__ import annotations

import heapq
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from operator import itemgetter

from orbit_lsp.graph.connection import Graph
from orbit_lsp.graph.implicit import implicit_note, implicit_syntax
from orbit_lsp.graph.imports import ImportGraph
from orbit_lsp.graph.schema import UNBOUND_MARKER

MAX_HOPS = 4
_JS_EXTS = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")  # files with type-only imports


@dataclass
class Answer:
    """``found`` is False when the file or symbol asked about is not in the graph (an unknown
    target, as opposed to a known one with no rows)."""

    rows: list[dict] = field(default_factory=list)
    cypher: list[dict] = field(default_factory=list)  # [{"query": str, "params": dict}]
    notes: list[str] = field(default_factory=list)
    found: bool = True
    total: int | None = None  # rows there were before a limit cut them (None: all are here)
    by_depth: list[int] | None = None  # traversals: how many were found at depth 1, 2, …
    unbound: dict | None = None  # unbound call sites using a symbol's name (``unbound_sites``)
    breaks: list | None = None  # call_chain without a path: unbound calls that may close it

    def run(self, graph: Graph, query: str, params: dict | None = None, timeout_ms: int | None = None) -> list[list]:
        """Run a read query, record it, return its raw rows."""
        params = params or {}
        res = graph.ro_query(query, params, timeout_ms=timeout_ms)
        self.cypher.append({"query": query, "params": params})
        return res.rows

    def to_dict(self) -> dict:
        return {"rows": self.rows, "cypher": self.cypher, "notes": self.notes}


# -- symbols ----------------------------------------------------------------------------------
SYMBOL_FIELDS = ("s.qual AS qual, s.name AS name, s.kind AS kind, s.file AS file, s.line AS line, "
                 "s.end_line AS end_line, s.col AS col, s.unresolved_calls AS unresolved_calls")
_SYMBOL_KEYS = ("qual", "name", "kind", "file", "line", "end_line", "col", "unresolved_calls")


def _sym(row) -> dict:
    return dict(zip(_SYMBOL_KEYS, row))


def find_symbols(graph: Graph, text: str, ans: Answer | None = None) -> Answer:
    """Symbols matching ``text``, the same way in Python and JS/TS: an exact qualified name
    (``pkg.mod.f``, ``src/a.ts#Cart.add``), else the exact short name (``add``), else
    ``FILE#NAME`` with FILE the file's path or a suffix of it on a ``/`` (``a.ts#Cart.add``) and
    NAME its in-file qualified name or a ``.``-suffix of it, else a qualified name ending in
    ``.text`` or ``#text`` (``Class.method``, ``Cart.add``). Module symbols are included only
    when asked by qualified name.
    ``rows``: symbol dicts sorted by (file, line)."""
    ans = ans or Answer()
    rows = ans.run(graph, f"MATCH (s:Symbol {{qual: $q}}) RETURN {SYMBOL_FIELDS} ORDER BY file, line", {"q": text})
    if not rows:
        rows = ans.run(graph, f"MATCH (s:Symbol {{name: $n}}) WHERE s.kind <> 'module' "
                              f"RETURN {SYMBOL_FIELDS} ORDER BY file, line", {"n": text})
    if not rows and "#" in text:
        file, _, name = text.rpartition("#")
        if file and name:
            rows = ans.run(graph, f"MATCH (s:Symbol) WHERE (s.file = $f OR s.file ENDS WITH $sf) "
                                  f"AND (s.qual ENDS WITH $hq OR s.qual ENDS WITH $dq) "
                                  f"RETURN {SYMBOL_FIELDS} ORDER BY file, line",
                           {"f": file, "sf": "/" + file.lstrip("/"), "hq": "#" + name, "dq": "." + name})
    elif not rows and "." in text:
        rows = ans.run(graph, f"MATCH (s:Symbol) WHERE s.qual ENDS WITH $suffix OR s.qual ENDS WITH $hsuffix "
                              f"RETURN {SYMBOL_FIELDS} ORDER BY file, line", {"suffix": "." + text, "hsuffix": "#" + text})
    ans.rows = [_sym(r) for r in rows]
    return ans


def suggest_symbols(graph: Graph, text: str, ans: Answer | None = None, limit: int = 5) -> list[str]:
    """Qualified names of the symbols closest to ``text``, a name that ``find_symbols`` did not
    find (at most ``limit``, best first): the symbols with its last name (after ``#`` or ``.``),
    exactly or case-insensitively, else with a similar name (``difflib``, among the names with
    the same first letter), ranked by the similarity of their qualified name to ``text``."""
    import difflib
    import re

    ans = ans or Answer()
    last = re.split(r"[#./]", text.strip())[-1]
    if not last:
        return []
    rows = ans.run(graph, "MATCH (s:Symbol {name: $n}) WHERE s.kind <> 'module' RETURN s.qual LIMIT 500", {"n": last})
    if not rows:
        names = [r[0] for r in ans.run(graph, "MATCH (s:Symbol) WHERE s.kind <> 'module' AND toLower(left(s.name, 1)) = $c "
                                              "RETURN DISTINCT s.name", {"c": last[:1].lower()}, timeout_ms=30_000)]
        low = {n.lower(): n for n in names}
        close = [low[n] for n in difflib.get_close_matches(last.lower(), list(low), n=limit, cutoff=0.7)]
        if close:
            rows = ans.run(graph, "UNWIND $names AS n MATCH (s:Symbol {name: n}) WHERE s.kind <> 'module' "
                                  "RETURN s.qual LIMIT 500", {"names": close})
    want = text.strip().lower()

    def score(q: str) -> tuple:
        return (-difflib.SequenceMatcher(None, want, q.lower()).ratio(), q)

    return sorted({r[0] for r in rows}, key=score)[:limit]


def not_found_note(graph: Graph, text: str, ans: Answer, what: str = "") -> str:
    """"no symbol named 'X' in the graph" (``what``: a label in parentheses), with the closest
    qualified names (``suggest_symbols``) when there are any."""
    note = f"no symbol named '{text}'" + (f" ({what})" if what else " in the graph")
    close = suggest_symbols(graph, text, ans)
    return note + ("; closest: " + ", ".join(close) if close else "")


def symbol_at(graph: Graph, path: str, line: int) -> Answer:
    """The innermost symbol of file ``path`` whose definition spans 1-based ``line``
    (modules excluded unless nothing else matches). ``rows``: zero or one symbol dict."""
    ans = Answer()
    rows = ans.run(graph, f"MATCH (s:Symbol {{file: $p}}) WHERE s.line <= $line AND s.end_line >= $line "
                          f"RETURN {SYMBOL_FIELDS} ORDER BY s.line DESC, s.end_line ASC", {"p": path, "line": line})
    syms = [_sym(r) for r in rows]
    non_module = [s for s in syms if s["kind"] != "module"]
    ans.rows = (non_module or syms)[:1]
    return ans


def _walk_calls(graph: Graph, start: dict | list[dict], depth: int, incoming: bool, ans: Answer) -> list[dict]:
    """Frontier BFS over CALLS from one symbol or several (by (file, qual)); returns rows with
    their minimal depth from the nearest start (starts are never listed)."""
    if incoming:
        q = ("UNWIND $frontier AS t MATCH (c:Symbol)-[e:CALLS]->(s:Symbol {qual: t[1]}) WHERE s.file = t[0] "
             "RETURN c.qual, c.name, c.kind, c.file, c.line, c.end_line, c.col, c.unresolved_calls, "
             "s.qual, e.lines, e.resolved")
    else:
        q = ("UNWIND $frontier AS t MATCH (s:Symbol {qual: t[1]})-[e:CALLS]->(c:Symbol) WHERE s.file = t[0] "
             "RETURN c.qual, c.name, c.kind, c.file, c.line, c.end_line, c.col, c.unresolved_calls, "
             "s.qual, e.lines, e.resolved")
    starts = start if isinstance(start, list) else [start]
    seen = {(s["file"], s["qual"]) for s in starts}
    frontier = sorted([f, q] for f, q in seen)
    out: list[dict] = []
    for d in range(1, depth + 1):
        if not frontier:
            break
        rows = ans.run(graph, q, {"frontier": frontier})
        nxt = []
        for r in sorted(rows, key=lambda r: (r[3], r[4], r[0])):
            key = (r[3], r[0])
            if key in seen:
                continue
            seen.add(key)
            row = _sym(r[:8])
            row.update({"depth": d, "via": r[8], "lines": r[9], "resolved": r[10]})
            out.append(row)
            nxt.append([r[3], r[0]])
        frontier = nxt
    return out


def callers(graph: Graph, symbol: str, depth: int = 1) -> Answer:
    """Who calls ``symbol`` (name or qualified name), transitively up to ``depth`` hops.

    One answer per candidate when the name is ambiguous: ``rows`` = [{"target": symbol dict,
    "callers": [symbol dict + depth, via, lines, resolved], "unresolved_elsewhere": int}];
    ``unresolved_elsewhere`` counts the symbols with call sites whose target could not be
    bound and that use the same name (they *may* call it: the count is then a lower bound);
    ``unbound`` lists those sites (``unbound_sites``: total, and the first with file and line);
    ``implicit`` is the syntax that runs a special method without a call expression the graph
    binds (``a == b`` for ``__eq__``; ``graph.implicit``), else None: its callers are then a
    lower bound, and a note says so.
    """
    ans = find_symbols(graph, symbol)
    targets = ans.rows
    if len(targets) > 1:
        ans.notes.append(f"'{symbol}' matches {len(targets)} symbols; answering for each")
    if not targets:
        ans.notes.append(not_found_note(graph, symbol, ans))
    ans.rows = []
    for t in targets:
        found = _walk_calls(graph, t, depth, True, ans)
        here = {(c["file"], ln) for c in found if c["depth"] == 1 for ln in (c.get("lines") or [])}
        unresolved, unbound = _unbound_of(graph, t["name"], ans, bound=here)
        syntax = implicit_syntax(t["name"], t["kind"], t["file"])
        if syntax:
            ans.notes.append(implicit_note(t["qual"], syntax))
        ans.rows.append({"target": t, "callers": found, "unresolved_elsewhere": unresolved, "unbound": unbound,
                         "implicit": syntax})
    return ans


def callers_of_all(graph: Graph, targets: list[dict], depth: int, ans: Answer | None = None) -> Answer:
    """Transitive callers of a set of symbols (``targets``: dicts with "file" and "qual"), each
    with its minimal depth from the nearest target, up to ``depth`` hops; the targets are never
    listed. ``rows``: symbol dict + depth, via (the qual it calls on the way), lines, resolved."""
    ans = ans or Answer()
    ans.rows = _walk_calls(graph, list(targets), depth, True, ans) if targets and depth > 0 else []
    return ans


def unbound_users(graph: Graph, names: list[str], ans: Answer | None = None) -> Answer:
    """Symbols with a call that could not be bound whose name is one of ``names`` (they *may*
    call a symbol of that name). ``rows``: symbol dict + "names" (which of ``names`` they use),
    sorted by (file, line)."""
    ans = ans or Answer()
    if not names:
        return ans
    rows = ans.run(graph, f"UNWIND $names AS n MATCH (s:Symbol) WHERE n IN s.unresolved_names "
                          f"RETURN {SYMBOL_FIELDS}, collect(n)", {"names": sorted(set(names))})
    ans.rows = sorted(({**_sym(r[:8]), "names": sorted(r[8])} for r in rows),
                      key=lambda r: (r["file"], r["line"] or 0, r["qual"]))
    return ans


def callees(graph: Graph, symbol: str, depth: int = 1) -> Answer:
    """What ``symbol`` calls, transitively up to ``depth`` hops; same shape as ``callers``
    with ``callees`` instead of ``callers`` and the target's own unresolved call count."""
    ans = find_symbols(graph, symbol)
    targets = ans.rows
    if len(targets) > 1:
        ans.notes.append(f"'{symbol}' matches {len(targets)} symbols; answering for each")
    if not targets:
        ans.notes.append(not_found_note(graph, symbol, ans))
    ans.rows = [{"target": t, "callees": _walk_calls(graph, t, depth, False, ans)} for t in targets]
    return ans


def call_chain(graph: Graph, source: str, target: str, max_len: int = 10) -> Answer:
    """Shortest CALLS path from ``source`` to ``target`` (names or qualified names).

    ``rows``: one per (source candidate, target candidate) pair that is connected:
    {"from": qual, "to": qual, "path": [{"qual", "file", "line"}...]}, shortest first. Notes say
    when a name matched several symbols (every pair is tried) or when no path exists.
    """
    ans = Answer()
    srcs = find_symbols(graph, source, ans).rows
    dsts = find_symbols(graph, target, ans).rows
    for label, name, cands in (("source", source, srcs), ("target", target, dsts)):
        if not cands:
            ans.notes.append(not_found_note(graph, name, ans, label))
        elif len(cands) > 1:
            ans.notes.append(f"{label} '{name}' matches {len(cands)} symbols: "
                             + ", ".join(c["qual"] for c in cands))
    q = ("MATCH (a:Symbol {qual: $a}) WHERE a.file = $af MATCH (b:Symbol {qual: $b}) WHERE b.file = $bf "
         f"WITH shortestPath((a)-[:CALLS*1..{int(max_len)}]->(b)) AS p WHERE p IS NOT NULL "
         "RETURN [n IN nodes(p) | [n.qual, n.file, n.line]]")
    rows = []
    for s in srcs:
        for t in dsts:
            if (s["file"], s["qual"]) == (t["file"], t["qual"]):
                continue
            for r in ans.run(graph, q, {"a": s["qual"], "af": s["file"], "b": t["qual"], "bf": t["file"]}):
                rows.append({"from": s["qual"], "to": t["qual"],
                             "path": [{"qual": n[0], "file": n[1], "line": n[2]} for n in r[0]]})
    rows.sort(key=lambda r: (len(r["path"]), r["from"], r["to"]))
    ans.breaks = []
    if srcs and dsts and not rows:
        ans.notes.append(f"no CALLS path of at most {max_len} hops")
        ans.breaks = chain_breaks(graph, srcs, dsts, max_len, ans)
        for b in ans.breaks[:3]:
            ans.notes.append(f"the path may be broken by an unbound call: '{b['name']}' at {b['file']}:{b['line']} "
                             f"(in {b['caller']}, reached from {b['from']} in {b['hops_from']} hops) may call "
                             f"{b['callee']}, which reaches {b['to']} in {b['hops_to']} hops")
        if len(ans.breaks) > 3:
            ans.notes.append(f"{len(ans.breaks) - 3} more unbound calls may close the path")
    ans.rows = rows
    return ans


def _reach(graph: Graph, starts: list[dict], max_len: int, forward: bool, ans: Answer) -> dict[int, int]:
    """Node ids reachable from ``starts`` over CALLS (forward, or backward) within ``max_len``
    hops, each with its minimal hop count (the starts at 0); a plain breadth-first walk."""
    ids = [r[0] for s in starts for r in ans.run(graph, "MATCH (t:Symbol {qual: $q}) WHERE t.file = $p RETURN id(t)",
                                                {"q": s["qual"], "p": s["file"]})]
    hops = {i: 0 for i in ids}
    step = ("UNWIND $f AS i MATCH (t) WHERE id(t) = i MATCH (t)-[:CALLS]->(n:Symbol) RETURN collect(DISTINCT id(n))"
            if forward else
            "UNWIND $f AS i MATCH (t) WHERE id(t) = i MATCH (n:Symbol)-[:CALLS]->(t) RETURN collect(DISTINCT id(n))")
    frontier = ids
    for d in range(1, max_len + 1):
        if not frontier:
            break
        found = [i for i in ans.run(graph, step, {"f": frontier})[0][0] if i not in hops]
        for i in found:
            hops[i] = d
        frontier = found
    return hops


def chain_breaks(graph: Graph, srcs: list[dict], dsts: list[dict], max_len: int, ans: Answer) -> list[dict]:
    """Where a missing call path may be broken: unbound call sites in symbols the sources reach
    whose name is the name of a symbol that reaches a target (within ``max_len`` hops in all).
    ``[{"from", "to", "caller", "file", "line", "name", "callee", "hops_from", "hops_to"}]``,
    shortest first."""
    ahead = _reach(graph, srcs, max_len, True, ans)
    behind = _reach(graph, dsts, max_len, False, ans)
    if not ahead or not behind:
        return []
    rows = ans.run(graph, "UNWIND $ids AS i MATCH (c) WHERE id(c) = i AND c.unresolved_calls > 0 "
                          "RETURN id(c), c.qual, c.file, c.unresolved_names, c.unresolved_sites",
                   {"ids": sorted(ahead)})
    names = sorted({n for r in rows for n in (r[3] or [])})
    if not names:
        return []
    near = ans.run(graph, "UNWIND $ids AS i MATCH (s) WHERE id(s) = i AND s.name IN $names "
                          "RETURN id(s), s.name, s.qual", {"ids": sorted(behind), "names": names})
    callee_of: dict[str, list] = {}
    for i, name, qual in near:
        callee_of.setdefault(name, []).append((behind[i], qual))
    src, dst = srcs[0]["qual"], dsts[0]["qual"]
    out = []
    for cid, cqual, cfile, cnames, csites in rows:
        for site in csites or [f"{n}@" for n in cnames or []]:
            name, _, line = site.rpartition("@")
            for hops_to, callee in sorted(callee_of.get(name, ())):
                out.append({"from": src, "to": dst, "caller": cqual, "file": cfile,
                            "line": int(line) if line else None, "name": name, "callee": callee,
                            "hops_from": ahead[cid], "hops_to": hops_to})
    out.sort(key=lambda b: (b["hops_from"] + 1 + b["hops_to"], b["file"], b["line"] or 0, b["callee"]))
    return out


# -- files --------------------------------------------------------------------------------------
def impact(graph: Graph, path: str, max_hops: int = MAX_HOPS, paths: bool = True,
           imports: ImportGraph | None = None, shown: int | None = None) -> Answer:
    """Files that depend on ``path`` through 1..``max_hops`` IMPORTS edges, each with its
    minimal hop count. ``rows``: [{"path", "hops"}] sorted by (hops, path), with ``"type_only":
    True`` on a dependent whose every way there within ``max_hops`` has a type-only edge
    (``IMPORTS.type_only``: it depends on the file's types only, not at run time); the file itself is
    never listed. ``total`` is their number and ``by_depth`` how many at each hop; with
    ``paths`` False only those two are computed (``rows`` stays empty). A note says when
    ``path`` is not in the graph.

    Without ``imports``: one query per hop over a frontier of node ids (an id seek per node,
    one list back; about half the server time of matching the frontier by path and returning
    paths), then one query for the paths of everything found. With ``imports`` (the graph's
    IMPORTS edges as read by ``ImportGraph.load`` since they last changed): one query for the
    file's existence, the walk in memory; ``cypher`` then also lists the query that read the
    edges. ``shown``: ``rows`` lists only the first ``shown`` dependents of each hop by path,
    without ``type_only`` (what a hover shows: sorting and listing thousands was half its time
    on a file 2,500 files depend on); ``total`` and ``by_depth`` count all."""
    ans = Answer()
    if imports is not None:
        if not ans.run(graph, "MATCH (f:File {path: $p}) RETURN count(f)", {"p": path})[0][0]:
            return _not_in_graph(ans, path)
        return _walked(ans, path, max_hops, paths, imports, shown)
    # the file and its direct importers in one query (and whether a type-only edge is among them:
    # only JS/TS files import each other for types, so a Python file's walk does not ask)
    typed = "sum(CASE WHEN e.type_only THEN 1 ELSE 0 END)" if path.lower().endswith(_JS_EXTS) else "sum(0)"
    start = ans.run(graph, "MATCH (f:File {path: $p}) OPTIONAL MATCH (d)-[e:IMPORTS]->(f) "
                           f"RETURN id(f), collect(DISTINCT id(d)), {typed}", {"p": path})
    if not start:
        return _not_in_graph(ans, path)
    q = ("UNWIND $frontier AS i MATCH (f) WHERE id(f) = i MATCH (d)-[e:IMPORTS]->(f) "
         f"RETURN collect(DISTINCT id(d)), {typed}")
    hops, typed = _frontier_walk(graph, ans, start[0][0], (start[0][1], start[0][2]), q, max_hops)
    type_only: set = set()
    if typed and hops and paths and shown is None:  # walk again without the type-only edges: who is left out
        q_run = ("UNWIND $frontier AS i MATCH (f) WHERE id(f) = i MATCH (d)-[e:IMPORTS]->(f) "
                 "WHERE e.type_only IS NULL OR NOT e.type_only RETURN collect(DISTINCT id(d)), sum(0)")
        first = (ans.run(graph, q_run, {"frontier": [start[0][0]]}) or [([], 0)])[0]
        run_time, _ = _frontier_walk(graph, ans, start[0][0], first, q_run, max_hops)
        type_only = set(hops) - set(run_time)
    if hops and paths:
        path_of = dict(ans.run(graph, "UNWIND $frontier AS i MATCH (f) WHERE id(f) = i RETURN id(f), f.path",
                               {"frontier": sorted(hops)}))
        return _dependents(ans, {path_of[i]: h for i, h in hops.items() if i in path_of}, True,
                           {path_of[i] for i in type_only if i in path_of}, shown)
    return _dependents(ans, hops, False)


def _frontier_walk(graph: Graph, ans: Answer, start: int, first: tuple, q: str, max_hops: int) -> tuple[dict, bool]:
    """``impact``'s walk by node ids: ``first`` (importers of ``start``, type-only edges among
    them) then one query ``q`` per hop. Returns ({id: minimal hops}, whether a type-only edge
    was met)."""
    seen = {start}
    hops: dict[int, int] = {}
    frontier: list[int] = []
    typed = False
    for hop in range(1, max_hops + 1):
        found, n_typed = first if hop == 1 else (ans.run(graph, q, {"frontier": frontier}) or [([], 0)])[0]
        typed = typed or bool(n_typed)
        found = sorted(set(found) - seen)
        if not found:
            break
        hops.update((i, hop) for i in found)
        seen.update(found)
        frontier = found
    return hops, typed


def known_impact(graph: Graph, path: str, max_hops: int, paths: bool, imports: ImportGraph | None,
                 shown: int | None = None) -> Answer:
    """``impact`` of a file its caller has just found in the graph (with ``imports``, no query
    is run: ``cypher`` lists the one that read the edges; ``shown`` as in ``impact``)."""
    if imports is None:
        return impact(graph, path, max_hops, paths, shown=shown)
    return _walked(Answer(), path, max_hops, paths, imports, shown)


def _walked(ans: Answer, path: str, max_hops: int, paths: bool, imports: ImportGraph,
            shown: int | None = None) -> Answer:
    """Fill ``ans`` with ``impact``'s answer walked over ``imports`` (its ``cypher`` gains the
    query that read the edges; ``shown`` as in ``impact``)."""
    ans.cypher += imports.cypher
    found = imports.dependents(path, max_hops)
    typed = imports.type_only_dependents(path, max_hops, found) if paths and shown is None else ()
    return _dependents(ans, found, paths, typed, shown)


def _not_in_graph(ans: Answer, path: str) -> Answer:
    ans.notes.append(f"{path} is not in the graph (not indexed or skipped)")
    ans.found = False
    return ans


def _dependents(ans: Answer, hops: dict, paths: bool, type_only=(), shown: int | None = None) -> Answer:
    """Fill ``impact``'s answer from {dependent: minimal hops} (keys are paths when ``paths``);
    ``type_only``: the dependents that depend on types only; ``shown``: list only the first
    ``shown`` of each hop (by path; ``type_only`` is not marked then)."""
    by_depth = [0] * max(hops.values(), default=0)
    for h in hops.values():
        by_depth[h - 1] += 1
    ans.by_depth, ans.total = by_depth, len(hops)
    if paths and shown is not None:
        by_hop: dict[int, list[str]] = {}
        for p, h in hops.items():
            by_hop.setdefault(h, []).append(p)
        ans.rows = [{"path": p, "hops": h} for h in sorted(by_hop) for p in heapq.nsmallest(shown, by_hop[h])]
    elif paths:
        order = sorted(hops.items(), key=itemgetter(1, 0))  # (hops, path)
        ans.rows = [{"path": p, "hops": h} for p, h in order]
        if type_only:
            for r in ans.rows:
                if r["path"] in type_only:
                    r["type_only"] = True
    return ans


def file_context(graph: Graph, path: str) -> Answer:
    """One file's neighbourhood. ``rows``: [{"path", "lang", "lines", "parse_error",
    "unresolved_imports", "imports": [path], "importers": [path], "packages": [name],
    "symbols": int}] (empty when the file is not in the graph)."""
    ans = Answer()
    rows = ans.run(graph, "MATCH (f:File {path: $p}) "
                          "OPTIONAL MATCH (f)-[:IMPORTS]->(i:File) WITH f, collect(DISTINCT i.path) AS imports "
                          "OPTIONAL MATCH (d:File)-[:IMPORTS]->(f) WITH f, imports, collect(DISTINCT d.path) AS importers "
                          "OPTIONAL MATCH (f)-[:USES_PACKAGE]->(p:Package) WITH f, imports, importers, collect(DISTINCT p.name) AS pkgs "
                          "OPTIONAL MATCH (f)-[:DEFINES]->(s:Symbol) "
                          "RETURN f.path, f.lang, f.lines, f.parse_error, f.unresolved_imports, imports, importers, pkgs, count(s)",
                   {"p": path})
    ans.rows = [{"path": r[0], "lang": r[1], "lines": r[2], "parse_error": r[3], "unresolved_imports": r[4] or [],
                 "imports": sorted(r[5]), "importers": sorted(r[6]), "packages": sorted(r[7]), "symbols": r[8]}
                for r in rows]
    if not rows:
        ans.notes.append(f"{path} is not in the graph (not indexed or skipped)")
        ans.found = False
    return ans


def package_users(graph: Graph, name: str) -> Answer:
    """Files that import package ``name``. ``rows``: [{"path", "line"}]; a note carries whether
    it is a standard-library module and its distribution name."""
    ans = Answer()
    info = ans.run(graph, "MATCH (p:Package {name: $n}) RETURN p.stdlib, p.dist", {"n": name})
    if not info:
        ans.notes.append(f"no file uses a package named '{name}'")
        return ans
    stdlib, dist = info[0]
    ans.notes.append(("standard library" if stdlib else "third-party") + (f", distribution {dist}" if dist else ""))
    rows = ans.run(graph, "MATCH (f:File)-[u:USES_PACKAGE]->(:Package {name: $n}) RETURN f.path, u.line ORDER BY f.path",
                   {"n": name})
    ans.rows = [{"path": r[0], "line": r[1]} for r in rows]
    return ans


def file_symbols(graph: Graph, path: str) -> Answer:
    """Code-lens data of one file in one aggregated query. ``rows``: symbol dicts with
    ``callers`` (distinct direct callers) and ``unresolved_elsewhere`` (unbound call sites in the
    workspace using the symbol's name), sorted by line."""
    ans = Answer()
    rows = ans.run(graph, f"MATCH (s:Symbol {{file: $p}}) OPTIONAL MATCH (c:Symbol)-[:CALLS]->(s) "
                          f"WITH s, count(DISTINCT c) AS callers "
                          f"RETURN {SYMBOL_FIELDS}, callers ORDER BY line", {"p": path})
    unresolved = _unresolved_named(graph, [r[1] for r in rows if r[2] != "module"], ans)
    out = []
    for r in rows:
        d = _sym(r[:8])
        d["callers"] = r[8]
        d["unresolved_elsewhere"] = unresolved.get(d["name"], 0)
        out.append(d)
    ans.rows = out
    return ans


def most_depended_on(graph: Graph, limit: int = 10) -> Answer:
    """Files with the most direct importers. ``rows``: [{"path", "importers"}]."""
    ans = Answer()
    rows = ans.run(graph, "MATCH (d:File)-[:IMPORTS]->(f:File) RETURN f.path, count(d) AS n "
                          "ORDER BY n DESC, f.path LIMIT $limit", {"limit": limit})
    ans.rows = [{"path": r[0], "importers": r[1]} for r in rows]
    return ans


def counts(graph: Graph) -> Answer:
    """Node and edge counts. ``rows``: [{"files", "symbols", "packages", "imports", "calls",
    "inherits", "uses_package"}]."""
    ans = Answer()
    out = {}
    for key, q in (("files", "MATCH (n:File) RETURN count(n)"), ("symbols", "MATCH (n:Symbol) RETURN count(n)"),
                   ("packages", "MATCH (n:Package) RETURN count(n)"),
                   ("imports", "MATCH ()-[e:IMPORTS]->() RETURN count(e)"),
                   ("calls", "MATCH ()-[e:CALLS]->() RETURN count(e)"),
                   ("inherits", "MATCH ()-[e:INHERITS]->() RETURN count(e)"),
                   ("uses_package", "MATCH ()-[e:USES_PACKAGE]->() RETURN count(e)")):
        out[key] = ans.run(graph, q)[0][0]
    ans.rows = [out]
    return ans


def export(graph: Graph, ans: Answer | None = None) -> dict:
    """The whole graph as plain data: {"files": [...], "symbols": [...], "packages": [...],
    "unbound_names": [{"name", "symbols", "sites"}] (``unbound_counts``; with the marker node,
    ``schema.UNBOUND_MARKER``), "edges": [{"type", "from", "to", ...properties}]} with nodes
    identified by path (files),
    ``file::qual`` (symbols) or name (packages); lists are sorted, so two exports of equal
    graphs are equal. The queries run are recorded in ``ans`` when one is given."""
    ans = ans if ans is not None else Answer()
    t = 120_000
    files = [r[0] for r in ans.run(graph, "MATCH (f:File) RETURN properties(f)", timeout_ms=t)]
    symbols = [r[0] for r in ans.run(graph, "MATCH (s:Symbol) RETURN properties(s)", timeout_ms=t)]
    packages = [r[0] for r in ans.run(graph, "MATCH (p:Package) RETURN properties(p)", timeout_ms=t)]
    unbound = [r[0] for r in ans.run(graph, "MATCH (u:UnboundName) RETURN properties(u)", timeout_ms=t)]
    edges = []
    for etype, q in (
        ("DEFINES", "MATCH (a:File)-[e:DEFINES]->(b:Symbol) RETURN a.path, b.file + '::' + b.qual, properties(e)"),
        ("IMPORTS", "MATCH (a:File)-[e:IMPORTS]->(b:File) RETURN a.path, b.path, properties(e)"),
        ("USES_PACKAGE", "MATCH (a:File)-[e:USES_PACKAGE]->(b:Package) RETURN a.path, b.name, properties(e)"),
        ("CALLS", "MATCH (a:Symbol)-[e:CALLS]->(b:Symbol) RETURN a.file + '::' + a.qual, b.file + '::' + b.qual, properties(e)"),
        ("INHERITS", "MATCH (a:Symbol)-[e:INHERITS]->(b:Symbol) RETURN a.file + '::' + a.qual, b.file + '::' + b.qual, properties(e)"),
    ):
        for a, b, props in ans.run(graph, q, timeout_ms=t):
            edges.append({"type": etype, "from": a, "to": b, **props})
    key = lambda d: sorted((k, repr(v)) for k, v in d.items())  # noqa: E731
    return {"files": sorted(files, key=key), "symbols": sorted(symbols, key=key),
            "packages": sorted(packages, key=key), "unbound_names": sorted(unbound, key=key),
            "edges": sorted(edges, key=key)}


# -- positions (editor features) ------------------------------------------------------------------
def target_at(graph: Graph, path: str, line: int, byte_col: int) -> Answer:
    """What sits at a position of file ``path`` (1-based ``line``, UTF-8 ``byte_col``):

    - the name of a definition -> ``{"type": "symbol", "symbol": {...}, "how": "definition"}``;
    - the callee of a bound call -> ``{"type": "symbol", "symbol": {...}, "how": "call"}``
      (for an instantiation, the class rather than its ``__init__``);
    - an import statement -> ``{"type": "file", "path": …}`` for each imported workspace file
      and ``{"type": "package", "name": …}`` for each package.
    ``rows`` is empty when nothing orbit knows is there (``found`` stays True: the file is known).
    """
    ans = Answer()
    defs = ans.run(graph, f"MATCH (s:Symbol {{file: $p, line: $line}}) WHERE s.kind <> 'module' "
                          f"RETURN {SYMBOL_FIELDS}", {"p": path, "line": line})
    for r in defs:
        s = _sym(r)
        if s["col"] <= byte_col < s["col"] + len(s["name"].encode("utf-8")):
            ans.rows = [{"type": "symbol", "symbol": s, "how": "definition"}]
            return ans
    calls = ans.run(graph, "MATCH (c:Symbol {file: $p})-[e:CALLS]->(s:Symbol) WHERE $line IN e.lines "
                           f"RETURN e.lines, e.cols, e.end_cols, e.resolved, {SYMBOL_FIELDS}",
                    {"p": path, "line": line})
    hits = []
    for lines, cols, ends, resolved, *sym in calls:
        for ln, c, e in zip(lines, cols, ends):
            if ln == line and c <= byte_col < max(e, c + 1):
                hits.append((e - c, resolved == "init", _sym(sym)))
    if hits:
        hits.sort(key=lambda h: (h[0], h[1], h[2]["qual"]))
        ans.rows = [{"type": "symbol", "symbol": hits[0][2], "how": "call"}]
        return ans
    for (dst,) in ans.run(graph, "MATCH (:File {path: $p})-[e:IMPORTS {line: $line}]->(f:File) RETURN f.path ORDER BY f.path",
                          {"p": path, "line": line}):
        ans.rows.append({"type": "file", "path": dst})
    for (name,) in ans.run(graph, "MATCH (:File {path: $p})-[e:USES_PACKAGE {line: $line}]->(k:Package) RETURN k.name ORDER BY k.name",
                           {"p": path, "line": line}):
        ans.rows.append({"type": "package", "name": name})
    return ans


SORT_ALL_MAX = 1000  # most callers sorted to pick the first few (caller lists with a limit)


def symbol_callers(graph: Graph, path: str, qual: str, ans: Answer | None = None,
                   limit: int | None = None) -> Answer:
    """Direct callers of one symbol (by file and qualified name) with their call sites:
    ``rows`` = caller symbol dicts + ``lines``, ``cols``, ``end_cols`` (UTF-8 byte columns in the
    caller's file), ``resolved``; sorted by (file, line).

    ``limit``: at most that many rows; when there are more, ``total`` is their number (the
    CALLS in-degree: the callers themselves never cross the wire) and a note says so. The rows
    kept are the first by (file, line) up to ``SORT_ALL_MAX`` callers; past it, sorting them all
    to keep a few costs more than the rest of the request (8 ms for 12,000 callers), and the
    rows are the first the traversal meets (sorted among themselves), as the note says."""
    ans = ans or Answer()
    params: dict = {"q": qual, "p": path}
    ret = f"RETURN {SYMBOL_FIELDS}, e.lines, e.cols, e.end_cols, e.resolved"
    total = None
    if limit is None:
        cypher = f"MATCH (s:Symbol)-[e:CALLS]->(t:Symbol {{qual: $q}}) WHERE t.file = $p {ret} ORDER BY file, line, qual"
    else:
        limit = max(0, int(limit))
        # one CALLS edge per caller and callee: the in-degree is the number of callers
        found = ans.run(graph, "MATCH (t:Symbol {qual: $q}) WHERE t.file = $p RETURN indegree(t, 'CALLS')", params)
        total = found[0][0] if found else 0
        order = "ORDER BY s.file, s.line " if total <= SORT_ALL_MAX else ""  # sort two properties, then project
        cypher = f"MATCH (s:Symbol)-[e:CALLS]->(t:Symbol {{qual: $q}}) WHERE t.file = $p WITH s, e {order}LIMIT $limit {ret}"
        params = {**params, "limit": limit}
    rows = sorted(ans.run(graph, cypher, params), key=lambda r: (r[3], r[4] or 0, r[0]))
    if total is not None and total > limit:
        ans.total = total
        which = f"the first {limit}" if total <= SORT_ALL_MAX else f"{limit} of them (the first found: too many to sort)"
        ans.notes.append(f"{qual} has {total} direct callers; showing {which}")
    ans.rows = [{**_sym(r[:8]), "lines": r[8], "cols": r[9], "end_cols": r[10], "resolved": r[11]} for r in rows]
    return ans


def symbol_impact(graph: Graph, path: str, qual: str, max_hops: int = MAX_HOPS, limit: int | None = None) -> Answer:
    """Transitive callers of one symbol (by file and qualified name; same-named symbols elsewhere
    are never mixed in), up to ``max_hops`` CALLS edges back, each with its minimal depth.

    ``rows``: caller symbol dicts + ``depth``, sorted by (depth, file, line, qual); at most
    ``limit`` of them (the first by file and line at each depth; at a depth with more than
    ``SORT_ALL_MAX`` callers, the first found there, as a note says), ``total`` always set to
    how many there are and ``by_depth`` to how many at each depth. ``found`` is False when the
    symbol is not in the graph. Hops go over node ids (one list back per hop, as ``impact``);
    only the listed callers' properties cross the wire, so a symbol with ten thousand callers
    costs their ids, not their rows. A symbol calling itself is not its own caller. A note says
    when calls that could not be bound use the symbol's name (the list is then a lower bound)."""
    ans = Answer()
    start = ans.run(graph, "MATCH (t:Symbol {qual: $q}) WHERE t.file = $p RETURN id(t)", {"q": qual, "p": path})
    if not start:
        ans.notes.append(f"no symbol {qual} in {path}")
        ans.found = False
        ans.total, ans.by_depth = 0, []
        return ans
    q = ("UNWIND $frontier AS i MATCH (t) WHERE id(t) = i MATCH (c:Symbol)-[:CALLS]->(t) "
         "RETURN collect(DISTINCT id(c))")
    seen = {start[0][0]}
    levels: list[list[int]] = []
    frontier = [start[0][0]]
    for _ in range(max_hops):
        found = sorted(set(ans.run(graph, q, {"frontier": frontier})[0][0]) - seen)
        if not found:
            break
        levels.append(found)
        seen.update(found)
        frontier = found
    ans.by_depth = [len(ids) for ids in levels]
    ans.total = sum(ans.by_depth)
    budget = ans.total if limit is None else max(0, int(limit))
    unsorted = False
    for depth, ids in enumerate(levels, 1):
        if budget <= 0:
            break
        if len(ids) > SORT_ALL_MAX and budget < len(ids):
            # sorting thousands of callers to list a few costs more than the walk: the first
            # found (by node id), sorted among themselves
            unsorted = True
            rows = sorted(ans.run(graph, f"UNWIND $ids AS i MATCH (s) WHERE id(s) = i RETURN {SYMBOL_FIELDS}",
                                  {"ids": ids[:budget]}), key=lambda r: (r[3], r[4] or 0, r[0]))
        else:
            rows = ans.run(graph, f"UNWIND $ids AS i MATCH (s) WHERE id(s) = i RETURN {SYMBOL_FIELDS} "
                                  "ORDER BY file, line, qual LIMIT $limit", {"ids": ids, "limit": budget})
        ans.rows += [{**_sym(r), "depth": depth} for r in rows]
        budget -= len(rows)
    if len(ans.rows) < ans.total:
        which = (f"{len(ans.rows)} of them (a depth with more than {SORT_ALL_MAX}: the first found there)"
                 if unsorted else f"the first {len(ans.rows)}")
        ans.notes.append(f"{qual} has {ans.total} callers within {max_hops} hops; showing {which}")
    name = qual.rpartition(".")[2]
    ans.unbound = unbound_sites(graph, name, ans)
    if ans.unbound["total"]:
        first = ", ".join(f"{x['file']}:{x['line']}" for x in ans.unbound["sites"][:3])
        more = f" (and {ans.unbound['total'] - 3} more)" if ans.unbound["total"] > 3 else ""
        ans.notes.append(f"{ans.unbound['total']} call sites that could not be bound use the name '{name}': "
                         f"they may call it too: {first}{more}")
    return ans


def symbol_callees(graph: Graph, path: str, qual: str, ans: Answer | None = None) -> Answer:
    """Direct callees of one symbol, same shape as ``symbol_callers`` (sites are in ``path``)."""
    ans = ans or Answer()
    rows = ans.run(graph, f"MATCH (t:Symbol {{qual: $q}})-[e:CALLS]->(s:Symbol) WHERE t.file = $p "
                          f"RETURN {SYMBOL_FIELDS}, e.lines, e.cols, e.end_cols, e.resolved ORDER BY file, line",
                   {"q": qual, "p": path})
    ans.rows = [{**_sym(r[:8]), "lines": r[8], "cols": r[9], "end_cols": r[10], "resolved": r[11]} for r in rows]
    return ans


MAX_IMPLEMENTATION_DEPTH = 16  # INHERITS hops followed down from an interface or a base class


def symbol_implementations(graph: Graph, path: str, qual: str, ans: Answer | None = None) -> Answer:
    """Implementations of one symbol (graph ``qual`` ``file#Type.member`` or ``file#Type``,
    defined in ``path``): for a method of an interface or class, the same-named methods of the
    types below it (``INHERITS``: extends, implements; up to ``MAX_IMPLEMENTATION_DEPTH`` hops);
    for an interface or class, the classes below it. ``rows``: symbol dicts, sorted by (file,
    line); empty when the symbol has none or is not in the graph."""
    ans = ans or Answer()
    ans.rows = []  # a caller's Answer may hold the rows of its own lookup
    found = ans.run(graph, "MATCH (s:Symbol {qual: $q}) WHERE s.file = $p RETURN s.kind", {"q": qual, "p": path})
    if not found:
        return ans
    hops = f"[:INHERITS*1..{MAX_IMPLEMENTATION_DEPTH}]"
    if found[0][0] in ("interface", "class"):
        rows = ans.run(graph, f"MATCH (s:Symbol)-{hops}->(t:Symbol {{qual: $q}}) WHERE t.file = $p "
                              f"AND s.kind = 'class' RETURN DISTINCT {SYMBOL_FIELDS}", {"q": qual, "p": path})
    else:
        # a member of a class or interface (``file#Type.m`` in JS/TS, ``pkg.mod.Type.m`` in Python)
        owner, _, name = qual.rpartition(".")
        kind = ans.run(graph, "MATCH (o:Symbol {qual: $o}) WHERE o.file = $p RETURN o.kind",
                       {"o": owner, "p": path}) if owner else []
        if not kind or kind[0][0] not in ("interface", "class"):
            return ans
        rows = ans.run(graph, f"MATCH (d:Symbol)-{hops}->(t:Symbol {{qual: $o}}) WITH DISTINCT d "
                              f"MATCH (s:Symbol {{qual: d.qual + $m}}) RETURN {SYMBOL_FIELDS}",
                       {"o": owner, "m": "." + name})
    ans.rows = sorted((_sym(r) for r in rows), key=lambda r: (r["file"], r["line"] or 0, r["qual"]))
    return ans


# -- workspace symbols and diagnostics (editor features) ------------------------------------------
def workspace_symbols(graph: Graph, text: str, limit: int = 200) -> Answer:
    """Symbols (modules excluded) whose name contains ``text``, case-insensitively; an empty
    ``text`` matches every symbol. Best matches first: exact name (rank 0), then name prefix
    (1), then the rest (2), each by (lower-cased name, file, line). A ``text`` with ``.`` or
    ``#`` is matched against qualified names (``Cart.add``, ``cart.ts#Cart.add``, in Python and
    JS/TS alike): ending with it after a ``.`` or ``#`` ranks 0, holding it so 1, the rest 2.

    ``rows``: symbol dicts + ``rank``, at most ``limit``; a note says when more matched.
    One scan of the Symbol nodes (~30-60 ms on a 80k-symbol graph)."""
    ans = Answer()
    limit = max(0, int(limit))
    q = (text or "").lower()
    if not q:
        cypher = ("MATCH (s:Symbol) WHERE s.kind <> 'module' WITH s, toLower(s.name) AS n, 2 AS rank "
                  f"ORDER BY n, s.file, s.line LIMIT $limit RETURN {SYMBOL_FIELDS}, rank")
    elif "." in q or "#" in q:  # a qualified name, or its end: ``Cart.add``, ``cart.ts#Cart.add``
        cypher = ("MATCH (s:Symbol) WHERE s.kind <> 'module' WITH s, toLower(s.name) AS n, toLower(s.qual) AS ql "
                  "WHERE ql CONTAINS $q WITH s, n, CASE WHEN ql = $q OR ql ENDS WITH $dq OR ql ENDS WITH $hq THEN 0 "
                  "WHEN ql CONTAINS $dq OR ql CONTAINS $hq THEN 1 ELSE 2 END AS rank "
                  f"ORDER BY rank, n, s.file, s.line LIMIT $limit RETURN {SYMBOL_FIELDS}, rank")
    else:
        cypher = ("MATCH (s:Symbol) WHERE s.kind <> 'module' WITH s, toLower(s.name) AS n WHERE n CONTAINS $q "
                  "WITH s, n, CASE WHEN n = $q THEN 0 WHEN n STARTS WITH $q THEN 1 ELSE 2 END AS rank "
                  f"ORDER BY rank, n, s.file, s.line LIMIT $limit RETURN {SYMBOL_FIELDS}, rank")
    rows = ans.run(graph, cypher, {"q": q, "dq": "." + q, "hq": "#" + q, "limit": limit + 1})
    if len(rows) > limit:
        ans.notes.append(f"more than {limit} symbols match '{text}'; showing the first {limit}")
        rows = rows[:limit]
    ans.rows = [{**_sym(r[:8]), "rank": r[8]} for r in rows]
    return ans


def _strongly_connected(nodes: list[str], adj: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative: import graphs can be deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    comps: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack.add(v)
            succ = adj.get(v, [])
            recursed = False
            while i < len(succ):
                w = succ[i]
                i += 1
                if w not in index:
                    work.append((v, i))
                    work.append((w, 0))
                    recursed = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if recursed:
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return comps


def import_cycles(graph: Graph, type_only: bool = False) -> Answer:
    """Import cycles between workspace files: every IMPORTS edge in one query, then strongly
    connected components (Tarjan) in Python. An edge whose two ends are in the same component
    lies on a cycle. Type-only edges (``IMPORTS.type_only``: TypeScript ``import type`` and the
    like, gone at run time) are left out unless ``type_only``: a cycle only through them is none.

    ``rows``: one per such edge, sorted by (path, line, imports): {"path", "line" (1-based
    line of the import in ``path``), "imports" (the imported file), "cycle": [path, imports, …,
    path] (the shortest cycle through that edge), "component": [every file of the component]};
    ``notes``: one line per component.

    Edges travel as node ids (half the transfer of paths: ~20 ms for the 9k IMPORTS edges of the
    standard library); paths are looked up in a second query only when there is a cycle. A write
    between the two queries can make one answer stale (an edge whose file vanished is dropped);
    callers re-run after every index anyway."""
    ans = Answer()
    where = "" if type_only else " WHERE e.type_only IS NULL OR NOT e.type_only"
    edges = ans.run(graph, f"MATCH (a:File)-[e:IMPORTS]->(b:File){where} RETURN id(a), id(b), e.line",
                    timeout_ms=60_000)
    adj: dict = {}
    for a, b, _line in edges:
        if a != b:
            adj.setdefault(a, []).append(b)
    comps = [c for c in _strongly_connected(sorted(adj), adj) if len(c) > 1]
    if not comps:
        return ans
    path_of = dict(ans.run(graph, "MATCH (f:File) RETURN id(f), f.path", timeout_ms=60_000))
    in_cycle = {n for c in comps for n in c}
    padj: dict[str, list[str]] = {}
    line_of: dict[tuple[str, str], int] = {}
    comp_of: dict[str, list[str]] = {}
    for c in comps:
        members = sorted(path_of[n] for n in c if n in path_of)
        for m in members:
            comp_of[m] = members
    for a, b, line in edges:
        if a in in_cycle and b in in_cycle and a != b and a in path_of and b in path_of:
            pa, pb = path_of[a], path_of[b]
            if comp_of.get(pa) is not comp_of.get(pb):
                continue
            padj.setdefault(pa, []).append(pb)
            line_of[(pa, pb)] = min(line_of.get((pa, pb), line or 0), line or 0)
    for a in padj:
        padj[a] = sorted(set(padj[a]))

    def tree(src: str) -> dict[str, str]:
        """BFS parents from ``src`` over the cycle edges."""
        parent: dict[str, str] = {src: src}
        frontier = [src]
        while frontier:
            nxt = []
            for u in frontier:
                for w in padj.get(u, ()):
                    if w not in parent:
                        parent[w] = u
                        nxt.append(w)
            frontier = nxt
        return parent

    trees: dict[str, dict[str, str]] = {}  # one BFS per imported file, shared by its importers
    out = []
    for a in sorted(padj):
        for b in padj[a]:
            parent = trees.get(b)
            if parent is None:
                parent = trees[b] = tree(b)
            if a not in parent:
                continue  # only after a concurrent write: the component fell apart
            back = [a]
            while back[-1] != b:
                back.append(parent[back[-1]])
            out.append({"path": a, "line": line_of[(a, b)], "imports": b, "cycle": [a] + back[::-1],
                        "component": comp_of[a]})
    out.sort(key=lambda r: (r["path"], r["line"], r["imports"]))
    ans.rows = out
    for members in sorted({id(m): m for m in comp_of.values()}.values()):
        ans.notes.append(f"import cycle among {len(members)} files: " + ", ".join(members))
    return ans


def file_problems(graph: Graph) -> Answer:
    """Files with a syntax error or unresolved workspace imports, in one query.

    ``rows``: [{"path", "parse_error": "line N: message" | None, "unresolved_imports":
    ["line:module", …], "has_graph": bool}] sorted by path; ``has_graph`` says whether the file
    has a graph at all (False: it never parsed, so no last good graph is kept)."""
    ans = Answer()
    rows = ans.run(graph, "MATCH (f:File) WHERE f.parse_error IS NOT NULL OR f.unresolved_imports IS NOT NULL "
                          "OPTIONAL MATCH (f)-[:DEFINES]->(m:Symbol {kind: 'module'}) "
                          "RETURN f.path, f.parse_error, f.unresolved_imports, count(m) ORDER BY f.path")
    ans.rows = [{"path": r[0], "parse_error": r[1], "unresolved_imports": list(r[2] or []), "has_graph": r[3] > 0}
                for r in rows]
    return ans


# -- code lenses and hover (editor features) --------------------------------------------------------
def file_record(graph: Graph, path: str) -> Answer:
    """The ``File`` node of ``path``. ``rows``: [{"path", "lang", "lines", "hash", "parse_error"}]
    (empty, and ``found`` False, when the file is not in the graph)."""
    ans = Answer()
    rows = ans.run(graph, "MATCH (f:File {path: $p}) RETURN f.path, f.lang, f.lines, f.hash, f.parse_error", {"p": path})
    ans.rows = [dict(zip(("path", "lang", "lines", "hash", "parse_error"), r)) for r in rows]
    if not rows:
        ans.notes.append(f"{path} is not in the graph (not indexed or skipped)")
        ans.found = False
    return ans


def file_packages(graph: Graph, path: str, ans: Answer | None = None) -> Answer:
    """Packages ``path`` uses. ``rows``: [{"name", "stdlib", "dist", "line"}] sorted by name
    (``line``: the first import of it)."""
    ans = ans or Answer()
    ans.rows = _packages(ans.run(graph, PACKAGES_QUERY, {"p": path}))
    return ans


PACKAGES_QUERY = ("MATCH (:File {path: $p})-[u:USES_PACKAGE]->(k:Package) "
                  "RETURN k.name, k.stdlib, k.dist, min(u.line) ORDER BY k.name")


def _packages(rows: list[list]) -> list[dict]:
    return [{"name": r[0], "stdlib": bool(r[1]), "dist": r[2] or "", "line": r[3]} for r in rows]


def unresolved_indexed(graph: Graph, ans: Answer | None = None) -> bool:
    """Whether ``Symbol.unresolved_names`` has its range index (graphs this version writes do;
    see ``_unresolved_query``). One ``CALL db.indexes()``, recorded in ``ans`` when given."""
    return any(r[0] == "Symbol" and "unresolved_names" in r[1]
               for r in (ans or Answer()).run(graph, "CALL db.indexes() YIELD label, properties RETURN label, properties"))


def _unresolved_query(indexed: bool, source: str) -> str:
    """Cypher giving ``n, count`` for each name ``n`` of ``source`` (a clause binding ``n``) that
    symbols' unbound calls use. With the index on ``Symbol.unresolved_names`` (array properties
    are indexable) one index lookup per name: ~1 ms for 244 names on a stdlib-size graph;
    without it one scan over every symbol with unbound calls, ~42 ms (per-name lookups without
    the index would scan once per name: seconds)."""
    if indexed:
        return f"{source} MATCH (c:Symbol) WHERE n IN c.unresolved_names RETURN n, count(c)"
    return (f"{source} WITH collect(n) AS names MATCH (c:Symbol) WHERE c.unresolved_calls > 0 "
            "UNWIND c.unresolved_names AS n WITH n, names WHERE n IN names RETURN n, count(*)")


def uncalled_methods(graph: Graph, methods: list[tuple[str, str]], ans: Answer) -> list[tuple[str, str]]:
    """Of ``methods`` ``[(file, qual)]``, those nothing in the workspace calls: no ``CALLS`` edge
    into them and no unbound call site of another symbol using their name (code outside the
    workspace calls them on instances). In the order found. Two queries: the methods without a
    caller, then one lookup per name of theirs (``_unresolved_query``); a pattern matching every
    symbol's unbound names against each method took 4 s for 60 methods on a 500,000-symbol graph.
    The counts are read from the names' ``UnboundName`` nodes (``_unresolved_named``)."""
    if not methods:
        return []
    rows = ans.run(graph, "UNWIND $m AS m MATCH (s:Symbol {qual: m[1]}) WHERE s.file = m[0] "
                          "OPTIONAL MATCH (c:Symbol)-[:CALLS]->(s) WITH s, count(c) AS n WHERE n = 0 "
                          "RETURN s.file, s.qual, s.name", {"m": sorted([f, q] for f, q in methods)})
    if not rows:
        return []
    names = sorted({r[2] for r in rows if r[2]})
    used = _unresolved_named(graph, names, ans)
    once = [n for n in names if used.get(n) == 1]  # the one user may be the method itself (``u <> s``)
    sole: dict[str, tuple[str, str]] = {}
    if once:
        sole = {n: (f, q) for n, f, q in ans.run(graph, "UNWIND $names AS n MATCH (c:Symbol) WHERE n IN c.unresolved_names "
                                                        "RETURN n, c.file, c.qual", {"names": once})}
    return [(f, q) for f, q, n in rows if not used.get(n) or (used[n] == 1 and sole.get(n) == (f, q))]


MAX_UNBOUND_SITES = 10  # unbound call sites listed by an answer (the total is always given)


def unbound_counts(graph: Graph, names: list[str], ans: Answer) -> dict[str, tuple[int, int]] | None:
    """``{name: (symbols, sites)}`` for ``names``, from the graph's ``UnboundName`` nodes: how
    many symbols make calls that could not be bound using the name, and how many such calls
    (``index.report.unbound_tally``); names no symbol uses are left out. One index lookup per
    name, whatever the number of calls. None for a graph written before the nodes existed
    (without the node named ``schema.UNBOUND_MARKER``): count by scanning the symbols."""
    return _unbound_counts_of(ans.run(graph, *_unbound_counts_read(names)))


def _unbound_counts_read(names: list[str]) -> tuple[str, dict]:
    """The read of ``unbound_counts`` (query, params): the names' ``UnboundName`` nodes and the
    marker's."""
    return ("UNWIND $names AS n MATCH (u:UnboundName {name: n}) RETURN n, u.symbols, u.sites",
            {"names": sorted(set(names) | {UNBOUND_MARKER})})


def _unbound_counts_of(rows: list[list]) -> dict[str, tuple[int, int]] | None:
    """``unbound_counts``'s answer from the rows of ``_unbound_counts_read``."""
    counts = {n: (int(k or 0), int(c or 0)) for n, k, c in rows}
    if counts.pop(UNBOUND_MARKER, None) is None:
        return None
    return {n: kc for n, kc in counts.items() if kc[0] > 0}


_UNREAD = object()  # ``counts`` not read by the caller (``unbound_counts`` gives None for "not kept")


def unbound_sites(graph: Graph, name: str, ans: Answer, limit: int = MAX_UNBOUND_SITES,
                  bound: set | None = None, counts=_UNREAD) -> dict:
    """The call sites that could not be bound and use ``name`` (they may call any symbol of that
    name): ``{"total": int, "sites": [{"file", "caller", "line"}]}``, the first ``limit`` by
    file and line, or, when more than ``SORT_ALL_MAX`` symbols make such calls, the first sites
    of the first ``limit`` of those symbols met (sorting them all to list a few costs more than
    the rest of a hover). Read from ``Symbol.unresolved_sites`` (``"name@line"``); graphs
    written before it existed give the callers without a line (``line`` None). ``bound``:
    (file, line) sites already bound to the symbol asked about (a site bound to it and to an
    unknown value too): left out, they are counted among its callers. The total is read from
    the name's ``UnboundName`` node (``unbound_counts``; ``assertEqual`` has 36,704 such sites
    on the scale corpus), or counted by FalkorDB when sites are left out or the graph has no
    such nodes. ``counts``: ``unbound_counts`` of the name when the caller has read them."""
    callers = "MATCH (c:Symbol) WHERE $n IN c.unresolved_names "
    sites = ("WITH c, [x IN coalesce(c.unresolved_sites, []) WHERE x STARTS WITH $at "
             "| toInteger(substring(x, size($at)))] AS ls "
             "UNWIND CASE WHEN size(ls) = 0 THEN [null] ELSE ls END AS ln "
             "WITH c, ln WHERE ln IS NULL OR NOT (c.file + '@' + toString(ln)) IN $bound ")
    first = "RETURN c.file, c.qual, ln, c.line ORDER BY c.file, coalesce(ln, c.line, 0), c.qual LIMIT $limit"
    params = {"n": name, "at": name + "@", "bound": sorted(f"{f}@{ln}" for f, ln in (bound or ())),
              "limit": max(0, int(limit))}
    # every caller has a site, so the first sites by file are in the first ``limit`` files
    first_files = (callers + "WITH DISTINCT c.file AS f ORDER BY f LIMIT $limit WITH collect(f) AS fs "
                   "MATCH (c:Symbol) WHERE c.file IN fs AND $n IN c.unresolved_names " + sites + first)
    if params["bound"]:
        counts = None
    elif counts is _UNREAD:
        counts = unbound_counts(graph, [name], ans)
    if counts is not None:
        symbols, total = counts.get(name, (0, 0))
        if not total:
            return {"total": 0, "sites": []}
        listed = (callers + "WITH c LIMIT $limit " + sites + first) if symbols > SORT_ALL_MAX else first_files
        return _sites_found(total, ans.run(graph, listed, params))
    if params["bound"]:
        count = callers + sites + "RETURN count(*)"
        listed = callers + sites + first
    else:
        # each caller counts its sites (one when it has no line), not one row per site
        count = (callers + "WITH size([x IN coalesce(c.unresolved_sites, []) WHERE x STARTS WITH $at]) AS k "
                 "RETURN sum(CASE WHEN k = 0 THEN 1 ELSE k END)")
        listed = first_files
    # the number and the first sites: two reads FalkorDB runs at once (each scans the symbols)
    counted, rows = _Reads(graph, [(count, params), (listed, params)]).rows(ans)
    return _sites_found(int(counted[0][0] or 0), rows)


def _sites_found(total: int, rows: list[list]) -> dict:
    """``unbound_sites``'s answer from its total and its ``(file, caller, line, caller's line)`` rows."""
    return {"total": total,
            "sites": [{"file": f, "caller": q, "line": ln if ln is not None else cline} for f, q, ln, cline in rows]}


def _unbound_of(graph: Graph, name: str, ans: Answer, limit: int = MAX_UNBOUND_SITES,
                bound: set | None = None) -> tuple[int, dict]:
    """``(symbols, sites)`` of ``name``: how many symbols make calls that could not be bound
    using it (``_unresolved_named``) and those calls (``unbound_sites``), from one read of its
    ``UnboundName`` counts."""
    counts = unbound_counts(graph, [name], ans)
    symbols = _unresolved_named(graph, [name], ans, counts).get(name, 0)
    sites = unbound_sites(graph, name, ans, limit, bound, counts) if symbols else {"total": 0, "sites": []}
    return symbols, sites


def _unresolved_named(graph: Graph, names: list[str], ans: Answer, counts=_UNREAD,
                      indexed: bool | None = None) -> dict[str, int]:
    """For each name: how many symbols have a call that could not be bound using that name
    (names without such calls are left out). ``counts``: ``unbound_counts`` of ``names`` when
    the caller has read them; ``indexed``: ``unresolved_indexed(graph)`` when the caller knows
    it (a graph without the counts is then looked up among the symbols without asking again)."""
    if not names:
        return {}
    if counts is _UNREAD:
        counts = unbound_counts(graph, names, ans)
    if counts is not None:
        return {n: k for n, (k, _) in counts.items()}
    if indexed is None:
        indexed = unresolved_indexed(graph, ans)
    q = _unresolved_query(indexed, "UNWIND $names AS n")
    return {n: c for n, c in ans.run(graph, q, {"names": sorted(set(names))}) if c}


_BACKGROUND = ThreadPoolExecutor(max_workers=3, thread_name_prefix="orbit-read")


class _Reads:
    """Independent read queries of one answer, started at once in background threads (FalkorDB
    serves reads on several threads, and the caller goes on with its own work meanwhile): the
    answer waits for the slowest query instead of their sum."""

    def __init__(self, graph: Graph, statements: list[tuple[str, dict]]):
        self.statements = statements
        self.futures = [_BACKGROUND.submit(graph.ro_query, q, p) for q, p in statements]

    def rows(self, ans: Answer) -> list[list[list]]:
        """Rows of each query, in order, recorded in ``ans``; raises the first error met (after
        every query has ended)."""
        results = [f.exception() or f.result() for f in self.futures]
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]
        ans.cypher += [{"query": q, "params": p} for q, p in self.statements]
        return [r.rows for r in results]


def file_lens_sites(graph: Graph, path: str) -> Answer:
    """Where the code lenses of one file go, in two queries whatever the number of symbols (the
    counts are read per lens, when the client resolves it: ``symbol_lens_counts``, ``impact``):
    the file's record and its symbols.

    ``rows``: [{"path", "hash", "lang", "lines", "parse_error", "symbols": [{"qual", "name",
    "kind", "line", "col"}]}] (symbols sorted by (line, qual), modules included; 1-based lines,
    UTF-8 byte columns); empty with ``found`` False when the file is not in the graph."""
    p = {"p": path}
    # the symbols read in a background thread while the file record is read here
    reads = _Reads(graph, [("MATCH (s:Symbol {file: $p}) RETURN s.qual, s.name, s.kind, s.line, s.col", p)])
    ans = file_record(graph, path)
    [rows] = reads.rows(ans if ans.found else Answer())
    if not ans.found:
        return ans
    rows.sort(key=lambda r: (r[3] or 0, r[0]))
    symbols = [{"qual": q, "name": n, "kind": k, "line": line, "col": col} for q, n, k, line, col in rows]
    ans.rows = [{**ans.rows[0], "symbols": symbols}]
    return ans


def symbol_lens_counts(graph: Graph, path: str, targets: list[tuple[str, str]], indexed: bool) -> Answer:
    """The counts of some code lenses of ``path``'s symbols, in two queries read side by side
    whatever their number: each symbol's distinct direct callers (the CALLS in-degree, the
    symbol itself excluded: the graph has at most one CALLS edge per caller and callee), whether
    it calls itself, and how many symbols have unbound calls using its name. ``targets``:
    (qualified name, short name as the lens saw it; checked against the graph) pairs;
    ``indexed``: ``unresolved_indexed(graph)``, for a graph without ``UnboundName`` nodes (the
    counts are then looked up per name among the symbols: 11 ms for ``unittest/case.py``'s 111
    names on the scale corpus, against 0.7 ms from the nodes).

    ``rows``: [{"qual", "callers": int, "recursive": bool, "unresolved_elsewhere": int,
    "implicit": str | None (``graph.implicit.implicit_syntax``)}], one per target found in
    ``path``'s part of the graph (the others are left out)."""
    ans = Answer()
    names = sorted({n for _, n in targets})
    syms, unbound = _Reads(graph, [
        ("UNWIND $quals AS q MATCH (s:Symbol {qual: q}) WHERE s.file = $p OPTIONAL MATCH (s)-[r:CALLS]->(s) "
         "RETURN s.qual, s.name, s.kind, indegree(s, 'CALLS'), count(r)", {"quals": sorted({q for q, _ in targets}), "p": path}),
        _unbound_counts_read(names)]).rows(ans)
    counts = _unbound_counts_of(unbound)  # None: a graph of an older version, counted among the symbols
    unresolved = _unresolved_named(graph, names, ans, counts, indexed)
    other = sorted({name for _, name, kind, _, _ in syms if kind != "module" and name not in names})
    if other:  # a lens whose data names the symbol otherwise (not one this server made): read now
        unresolved.update(_unresolved_named(graph, other, ans, None if counts is None else _UNREAD, indexed))
    ans.rows = [{"qual": qual, "callers": indegree - (1 if own else 0), "recursive": bool(own),
                 "unresolved_elsewhere": unresolved.get(name, 0) if kind != "module" else 0,
                 "implicit": implicit_syntax(name, kind, path)}
                for qual, name, kind, indegree, own in syms]
    return ans


def symbol_summary(graph: Graph, path: str, qual: str, max_hops: int = MAX_HOPS, limit: int = 10,
                   imports: ImportGraph | None = None, shown: int | None = None) -> Answer:
    """Impact summary of one symbol (by file and qualified name; same-named symbols elsewhere are
    never mixed in): its direct callers, the unbound call sites that use its name, its
    decorators, and its file's dependents and packages.

    ``rows``: [{"symbol": symbol dict, "callers_total": int (distinct direct callers, the symbol
    itself excluded), "callers": the first ``limit`` of them by (file, line), each a symbol dict +
    "lines" (call lines in the caller's file), "recursive": bool, "unresolved_elsewhere": int,
    "implicit": the syntax that runs a special method the graph does not follow, or None,
    "decorators": [qual], "dependents": [{"path", "hops"}] (with ``shown``: the first
    ``shown`` of each hop, as ``impact``), "dependents_by_hop": [how many at hop 1, 2, …],
    "packages": [{"name", "stdlib", "dist", "line"}]}]; empty with ``found`` False when the
    symbol is not in the graph.
    Only ``limit`` callers cross the wire: a symbol with a thousand callers costs a count. They
    are the first by (file, line) up to ``SORT_ALL_MAX`` callers, else the first the traversal
    meets (sorted by file and line among themselves)."""
    ans = Answer()
    rows = ans.run(graph, f"MATCH (s:Symbol {{qual: $q}}) WHERE s.file = $p RETURN {SYMBOL_FIELDS}", {"q": qual, "p": path})
    if not rows:
        ans.notes.append(f"no symbol {qual} in {path}")
        ans.found = False
        return ans
    sym = _sym(rows[0])
    params = {"q": qual, "p": path}
    # reads that need nothing from each other run at once (FalkorDB serves them on several
    # threads) while the unbound sites are counted here:
    reads = _Reads(graph, [
        # the CALLS in-degree is the number of distinct callers: one edge per caller and callee
        ("MATCH (t:Symbol {qual: $q}) WHERE t.file = $p OPTIONAL MATCH (t)-[r:CALLS]->(t) "
         "RETURN indegree(t, 'CALLS'), count(r)", params),
        # calls in decorator expressions are attributed to the decorated function and sit on the
        # lines above its name (``@trace("hot")`` binds to the factory ``trace``)
        ("MATCH (s:Symbol {qual: $q})-[e:CALLS]->(d:Symbol) WHERE s.file = $p AND (e.resolved = 'decorator' "
         "OR any(l IN e.lines WHERE l < s.line)) RETURN DISTINCT d.qual ORDER BY d.qual", params),
        (PACKAGES_QUERY, {"p": path})])
    unresolved, unbound = _unbound_of(graph, sym["name"], ans, limit=5)
    [[(total, own)], decorator_rows, package_rows] = reads.rows(ans)
    # the first callers by (file, line); past SORT_ALL_MAX callers, sorting them all to list a
    # few costs more than the rest of the hover: the first ones the traversal meets are listed
    order = "ORDER BY s.file, s.line, s.qual " if total <= SORT_ALL_MAX else ""
    first = ans.run(graph, "MATCH (s:Symbol)-[e:CALLS]->(t:Symbol {qual: $q}) WHERE t.file = $p AND s <> t "
                           f"WITH s, e {order}LIMIT $limit RETURN {SYMBOL_FIELDS}, e.lines",
                    {**params, "limit": max(0, int(limit))})
    first = sorted(first, key=lambda r: (r[3], r[4] or 0, r[0]))
    decorators = [r[0] for r in decorator_rows]
    imp = known_impact(graph, path, max_hops, True, imports, shown)
    ans.cypher += imp.cypher
    pk = _packages(package_rows)
    ans.rows = [{"symbol": sym, "callers_total": total - (1 if own else 0),
                 "callers": [{**_sym(r[:8]), "lines": r[8]} for r in first],
                 "recursive": bool(own), "unresolved_elsewhere": unresolved, "unbound": unbound,
                 "decorators": decorators, "implicit": implicit_syntax(sym["name"], sym["kind"], sym["file"]),
                 "dependents": imp.rows, "dependents_by_hop": imp.by_depth, "packages": pk}]
    return ans


def file_summary(graph: Graph, path: str, max_hops: int = MAX_HOPS, imports: ImportGraph | None = None,
                 shown: int | None = None) -> Answer:
    """Impact summary of one file: ``rows`` = [{"path", "dependents": [{"path", "hops"}] (with
    ``shown``: the first ``shown`` of each hop, as ``impact``),
    "dependents_by_hop": [how many at hop 1, 2, …], "packages": [{"name", "stdlib", "dist",
    "line"}], "symbols": int (modules excluded)}]; empty with ``found`` False when the file is
    not in the graph."""
    ans = impact(graph, path, max_hops, imports=imports, shown=shown)
    if not ans.found:
        return ans
    deps = ans.rows
    pk = file_packages(graph, path, ans).rows
    n = ans.run(graph, "MATCH (s:Symbol {file: $p}) WHERE s.kind <> 'module' RETURN count(s)", {"p": path})[0][0]
    ans.rows = [{"path": path, "dependents": deps, "dependents_by_hop": ans.by_depth, "packages": pk, "symbols": n}]
    return ans
