"""Anchors: a memory tied to a file (or a symbol in it) of an indexed workspace.

At anchoring time the file's content hash in the code graph (``File.hash``, written by the
indexer) is recorded with the memory. Whenever memories are listed or recalled, the recorded hash
is compared with the graph's current one: a file that was re-indexed with other contents, left
the graph, or no longer defines the anchored symbol makes the memory *possibly stale*. No indexer
hook is needed, and a broken edit (the indexer keeps the last good graph and hash) does not count
as a change.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from orbit_lsp.graph.connection import GraphStore, code_graph_name
from orbit_lsp.graph.errors import QueryRejected


class AnchorError(ValueError):
    """The file (or position) to anchor to is not in the workspace's code graph."""


@dataclass
class Anchor:
    """``root``: workspace root (absolute); ``path``: workspace-relative posix path; ``symbol``:
    qualified name of the symbol at the anchored position (None: the whole file); ``line``:
    1-based line of that symbol (None for a file); ``hash``: ``File.hash`` when anchored;
    ``graph``: the code graph's name."""

    root: str
    path: str
    hash: str | None
    graph: str
    symbol: str | None = None
    line: int | None = None

    def to_props(self) -> dict:
        """Memory node properties (``anchor_*``), None values left out."""
        return {f"anchor_{k}": v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_props(cls, props: dict) -> "Anchor | None":
        if not props.get("anchor_path"):
            return None
        return cls(root=props.get("anchor_root", ""), path=props["anchor_path"], hash=props.get("anchor_hash"),
                   graph=props.get("anchor_graph", ""), symbol=props.get("anchor_symbol"),
                   line=props.get("anchor_line"))

    def to_dict(self) -> dict:
        return {"root": self.root, "path": self.path, "symbol": self.symbol, "line": self.line}


def anchor_at(store: GraphStore, root: Path | str, path: str, line: int | None = None) -> Anchor:
    """An anchor to workspace-relative ``path`` of the workspace at ``root``; with ``line``
    (1-based), to the innermost symbol (class, function, method, variable) whose lines contain it,
    or to the file when none does. Raises ``AnchorError`` when the file is not in the graph, and
    ``FalkorDBOffline``."""
    root = os.path.realpath(os.fspath(root))
    graph = store.graph(code_graph_name(root))
    try:
        rows = graph.ro_query("MATCH (f:File {path: $p}) RETURN f.hash", {"p": path}).rows
    except QueryRejected:  # no such graph
        rows = []
    if not rows:
        raise AnchorError(f"{path} is not in the code graph of {root} (not indexed or skipped)")
    anchor = Anchor(root=root, path=path, hash=rows[0][0], graph=graph.name)
    if line is not None:
        sym = graph.ro_query(
            "MATCH (s:Symbol {file: $p}) WHERE s.kind <> 'module' AND s.line <= $line "
            "AND coalesce(s.end_line, s.line) >= $line "
            "RETURN s.qual, s.line ORDER BY s.line DESC, coalesce(s.end_line, s.line) ASC LIMIT 1",
            {"p": path, "line": line}).rows
        if sym:
            anchor.symbol, anchor.line = sym[0][0], sym[0][1]
    return anchor


def staleness(store: GraphStore, anchors: dict[int, Anchor]) -> dict[int, str]:
    """Why each anchored memory is possibly stale: ``{memory id: reason}`` for the stale ones
    only (one query per code graph). Raises ``FalkorDBOffline``."""
    by_graph: dict[str, list[tuple[int, Anchor]]] = {}
    for mid, a in anchors.items():
        by_graph.setdefault(a.graph, []).append((mid, a))
    out: dict[int, str] = {}
    for name, items in by_graph.items():
        rows = [{"id": mid, "path": a.path, "symbol": a.symbol or ""} for mid, a in items]
        try:
            found = store.graph(name).ro_query(
                "UNWIND $rows AS r MATCH (f:File {path: r.path}) "
                "OPTIONAL MATCH (f)-[:DEFINES]->(s:Symbol {qual: r.symbol}) "
                "RETURN r.id, f.hash, count(s)", {"rows": rows}).rows
        except QueryRejected:  # the workspace's graph is gone
            found = []
        current = {mid: (h, n) for mid, h, n in found}
        for mid, a in items:
            if mid not in current:
                out[mid] = f"{a.path} is no longer in the code graph"
            elif current[mid][0] != a.hash:
                out[mid] = f"{a.path} changed since the memory was anchored"
            elif a.symbol and not current[mid][1]:
                out[mid] = f"{a.symbol} is no longer defined in {a.path}"
    return out
