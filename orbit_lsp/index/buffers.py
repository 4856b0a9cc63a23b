"""What the graph says about a file as an editor holds it: the indexed file, or an unsaved buffer
that differs from it (parsed and bound in memory against the indexed workspace, nothing written).

- ``lens_work``: where the code lenses of a buffer go (symbols from the graph, lines from the
  buffer), and ``lens_counts``: the counts one lens shows;
- ``targets_at``: what sits at a position of a buffer (definition, call, import), and
  ``summaries_at``: the impact summaries of it (what a hover shows);
- ``analyse_buffer``: a buffer's facts and, optionally, its bindings (recent ones cached per
  indexer generation, so hovering around an unsaved buffer parses and resolves it once);
- ``index_lock``: reads that never see a re-index half done;
- ``import_graph``: the workspace's IMPORTS edges in memory (``graph.imports``), read again only
  when they change, and ``file_impact``, a file's dependents walked over them.

Graph positions throughout: 1-based lines, UTF-8 byte columns.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Iterator

from orbit_lsp.graph import queries
from orbit_lsp.graph.cache import ANSWERS
from orbit_lsp.graph.imports import ImportGraph
from orbit_lsp.index.py_facts import PyFacts
from orbit_lsp.index.indexer import LazyFacts, WorkspaceIndexer, content_hash
from orbit_lsp.index.languages import PARSED_LANGS, WorkspaceResolver, is_js, parse_file
from orbit_lsp.index.py_edges import FileEdges, full_qual, package_info
from orbit_lsp.index.walk import LANGS
from orbit_lsp.lru import LRU

LENS_KINDS = frozenset({"function", "method", "class"})
LOCK_WAIT_S = 0.3  # longest wait for a re-index in progress before reading from the buffer alone
BUFFERS = LRU(16)  # (root, rel, hash, generation) -> (facts, edges)


# -- reading the graph consistently with the buffer ----------------------------------------------------
@contextlib.contextmanager
def index_lock(ix: WorkspaceIndexer) -> Iterator[bool]:
    """Hold the indexer's lock while reading, so a re-index in progress is never seen half done.
    Yields False when it stayed busy for ``LOCK_WAIT_S`` (then callers trust only the buffer)."""
    got = ix.lock.acquire(timeout=LOCK_WAIT_S)
    try:
        yield got
    finally:
        if got:
            ix.lock.release()


def import_graph(ix: WorkspaceIndexer) -> ImportGraph:
    """The IMPORTS edges of ``ix``'s graph, read once per ``ix.imports_generation`` (a value
    that changes whenever a re-index changes them). Raises what graph reads raise."""
    return ANSWERS.get(ix.graph, ix.imports_generation, ImportGraph.load)


def file_impact(ix: WorkspaceIndexer, rel: str, max_hops: int) -> queries.Answer:
    """``queries.impact`` of a file of ``ix`` (with paths), walked over ``import_graph(ix)``;
    cached per ``ix.generation``. The file's existence check and its walk are those of its
    count (``file_impact_count``, what its code lens shows): opening the impact of a file whose
    lens was just shown runs no query."""
    gen, imports = ix.generation, import_graph(ix)  # one state of the graph for both parts
    counted = _impact_count(ix, gen, imports, rel, max_hops)
    if not counted.found:
        return counted
    listed = ANSWERS.get(ix.graph, gen, queries.known_impact, rel, max_hops, True, imports)
    return dataclasses.replace(listed, cypher=counted.cypher)  # the existence check is part of the answer


def file_impact_count(ix: WorkspaceIndexer, rel: str, max_hops: int) -> queries.Answer:
    """``queries.impact`` of a file of ``ix`` without paths (``total`` and ``by_depth`` only),
    walked over ``import_graph(ix)``; cached per ``ix.generation``."""
    return _impact_count(ix, ix.generation, import_graph(ix), rel, max_hops)


def _impact_count(ix: WorkspaceIndexer, gen: int, imports: ImportGraph, rel: str, max_hops: int) -> queries.Answer:
    return ANSWERS.get(ix.graph, gen, queries.impact, rel, max_hops, False, imports)


def analyse_buffer(ix: WorkspaceIndexer, rel: str, data: bytes, h: str, edges: bool) -> tuple[PyFacts | None, FileEdges | None]:
    """Facts of a buffer (parsed in memory, nothing written) and, when ``edges``, its imports and
    calls bound against the indexed workspace. (None, None) for a file that is not Python or
    does not parse. Call with the indexer's lock held when ``edges`` (reads its state)."""
    if LANGS.get(Path(rel).suffix.lower()) not in PARSED_LANGS:
        return None, None
    key = (str(ix.root), rel, h, ix.generation)  # the bindings depend on the other files' graph
    _, hit = BUFFERS.lookup(key)
    if hit is not None and (hit[0] is None or hit[1] is not None or not edges):
        return hit
    facts = hit[0] if hit is not None else None
    if facts is None:
        facts = parse_file(rel, data)[0]  # a JS/TS buffer with errors: what tree-sitter still reads
        if facts is None:
            BUFFERS.put(key, (None, None))
            return None, None
    bound = None
    if edges:
        state = dict(ix.state)
        table = LazyFacts(lambda: state, {rel: facts})
        sys_paths = ix.sys_paths(state)
        sys_paths.pop(rel, None)
        if getattr(facts, "sys_path", ()):
            sys_paths[rel] = facts.sys_path  # the buffer's own ``sys.path`` additions
        resolver = WorkspaceResolver(table, set(state) | {rel}, dict(ix.aliases), ix.root_package, ix.root,
                                     value_flow=ix.value_flow, sys_paths=sys_paths, pythonpath=ix.pythonpath())
        resolver.seed(state.items())  # what parameters receive, which class derives from which
        resolver.set_facts(rel, facts)  # the buffer's classes and bases, not the saved file's
        bound = resolver.resolve_file(rel)
    BUFFERS.put(key, (facts, bound))
    return facts, bound


def _graph_prefix(symbols: list[dict], rel: str) -> str:
    """Prefix turning an in-file qualified name into the graph's (``pkg.mod.``)."""
    if is_js(rel):
        return rel + "#"  # JS/TS quals are ``path#qual``
    mod = next((s["qual"] for s in symbols if s["kind"] == "module"), None)
    if not mod or mod == rel:
        return ""
    return mod + "."


def lens_work(ix: WorkspaceIndexer, rel: str, data: bytes) -> dict | None:
    """Query-thread part of a lens request: where the lenses of a buffer go (their counts are
    read when the client resolves each lens: ``lens_counts``). None when the file is not in the
    graph; else ``{"symbols": [{"qual", "name", "kind", "line", "col"}], "source": "graph" |
    "buffer" | "unparsed"}`` (functions, methods and classes the graph has); ``line``/``col``
    are positions in ``data`` (1-based, UTF-8 bytes)."""
    h = content_hash(data)
    with index_lock(ix) as locked:
        ans = ANSWERS.get(ix.graph, ix.generation, queries.file_lens_sites, rel)
        if not ans.found:
            return None
        rec = ans.rows[0]
        if locked and rec["hash"] == h:  # the answer's own dicts (shared: never changed)
            return {"symbols": [s for s in rec["symbols"] if s["kind"] in LENS_KINDS], "source": "graph"}
        facts, _ = analyse_buffer(ix, rel, data, h, edges=False)
    if facts is None:
        return {"symbols": [], "source": "unparsed"}
    prefix = _graph_prefix(rec["symbols"], rel)
    known = {s["qual"]: s for s in rec["symbols"]}
    syms = []
    for ps in facts.symbols:
        g = known.get(prefix + ps.qual)
        if ps.kind in LENS_KINDS and g is not None and g["kind"] == ps.kind:
            syms.append({**g, "line": ps.line, "col": ps.col})
    return {"symbols": syms, "source": "buffer"}


def lens_counts(ix: WorkspaceIndexer, rel: str, targets: list[tuple[str | None, str]], max_hops: int) -> list[dict | None]:
    """Query-thread part of resolving code lenses of one file, in one go: for each (qualified
    name, short name) target, in order, a file lens's (qualified name None) ``{"dependents":
    int, "hops": int}`` (files importing ``rel`` within ``max_hops``, over the in-memory IMPORTS
    edges; ``hops`` the largest minimal hop count), or a symbol lens's ``{"callers": int,
    "recursive": bool, "unresolved_elsewhere": int}`` (see ``queries.symbol_lens_counts``).
    Read from the graph as it is now: None for a file or symbol no longer there. Raises what
    graph reads raise."""
    out: dict[str | None, dict | None] = {}
    if any(q is None for q, _ in targets):
        ans = file_impact_count(ix, rel, max_hops)
        out[None] = {"dependents": ans.total, "hops": len(ans.by_depth)} if ans.found else None
    symbols = [(q, n) for q, n in targets if q is not None]
    if symbols:
        # not cached: hundreds of resolved lenses would push other answers out
        indexed = ANSWERS.get(ix.graph, ix.generation, queries.unresolved_indexed)
        for row in queries.symbol_lens_counts(ix.graph, rel, symbols, indexed).rows:
            out[row["qual"]] = {k: v for k, v in row.items() if k != "qual"}
    return [out.get(q) for q, _ in targets]


def targets_at(ix: WorkspaceIndexer, rel: str, data: bytes, line1: int, col: int) -> queries.Answer | None:
    """What sits at a position of a buffer: an ``Answer`` whose rows are ``queries.target_at``
    rows (symbol rows carry the graph's symbol dict) and whose ``cypher`` lists the queries run.
    When the buffer equals the indexed file this is ``target_at``; when it differs, the buffer is
    parsed and bound in memory and its definitions, call sites and imports are looked up at the
    position, then matched to the graph by qualified name. None when the file is not in the
    graph."""
    h = content_hash(data)
    with index_lock(ix) as locked:
        ans = queries.file_record(ix.graph, rel)
        if not ans.found:
            return None
        if locked and ans.rows[0]["hash"] == h:
            at = queries.target_at(ix.graph, rel, line1, col)
            at.cypher = ans.cypher + at.cypher
            return at
        ans.rows = []
        if not locked:  # resolving needs the indexer's state: give up on calls and imports
            facts, edges = analyse_buffer(ix, rel, data, h, edges=False)
        else:
            facts, edges = analyse_buffer(ix, rel, data, h, edges=True)
        if facts is None:
            return ans
        rp = ix.root_package
        wanted: list[tuple[str, str, str]] = []  # (file, qual, how)
        for s in facts.symbols:
            if s.kind != "module" and s.line == line1 and s.col <= col < s.col + len(s.name.encode("utf-8")):
                wanted.append((rel, full_qual(rel, s.qual, rp), "definition"))
                break
        if not wanted and edges is not None:
            hits = []
            for e in edges.calls.values():
                for ln, c, end in zip(e.lines, e.cols, e.end_cols):
                    if ln == line1 and c <= col < max(end, c + 1):
                        hits.append((end - c, e.resolved == "init", e.dst_file, full_qual(e.dst_file, e.dst_qual, rp)))
            if hits:
                hits.sort()
                wanted.append((hits[0][2], hits[0][3], "call"))
        out: list[dict] = []
        for file, qual, how in wanted:
            found = queries.find_symbols(ix.graph, qual, ans).rows
            sym = next((s for s in found if s["file"] == file and s["qual"] == qual), None)
            if sym is not None:
                out.append({"type": "symbol", "symbol": sym, "how": how})
        if not wanted and edges is not None:
            for dst, ln in sorted(edges.imports.items()):
                if ln == line1 and dst in ix.state:
                    out.append({"type": "file", "path": dst})
            for name, ln in sorted(edges.packages.items()):
                if ln == line1:
                    out.append({"type": "package", "name": package_info(name)[0]})
        ans.rows = out
        return ans


MAX_CALLERS = 10  # callers listed in a symbol summary
MAX_TARGETS = 4  # summaries at one position (an import line naming several modules)
SHOWN_PER_HOP = 5  # dependents listed at each hop of a summary (the rest are counted)


def summaries_at(ix: WorkspaceIndexer, rel: str, data: bytes, line1: int, col: int, max_hops: int) -> list[dict] | None:
    """The impact summaries of what sits at a position of a buffer (what a hover shows), each
    ``{"type": "symbol", "how", **queries.symbol_summary row}``, ``{"type": "file",
    **queries.file_summary row}`` or ``{"type": "package", "name", "about", "users": [path]}``;
    the dependents listed are the first ``SHOWN_PER_HOP`` of each hop (``dependents_by_hop``
    counts them all). None when the file is not in the graph."""
    found = targets_at(ix, rel, data, line1, col)
    if found is None:
        return None
    out = []
    for t in found.rows[:MAX_TARGETS]:
        if t["type"] == "symbol":
            s = t["symbol"]
            ans = ANSWERS.get(ix.graph, ix.generation, queries.symbol_summary, s["file"], s["qual"], max_hops,
                              MAX_CALLERS, import_graph(ix), SHOWN_PER_HOP)
            if ans.found:
                out.append({"type": "symbol", "how": t.get("how"), **ans.rows[0]})
        elif t["type"] == "file":
            ans = ANSWERS.get(ix.graph, ix.generation, queries.file_summary, t["path"], max_hops, import_graph(ix),
                              SHOWN_PER_HOP)
            if ans.found:
                out.append({"type": "file", **ans.rows[0]})
        elif t["type"] == "package":
            ans = ANSWERS.get(ix.graph, ix.generation, queries.package_users, t["name"])
            out.append({"type": "package", "name": t["name"], "about": ans.notes[:1],
                        "users": [r["path"] for r in ans.rows]})
    return out
