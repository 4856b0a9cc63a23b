"""A graph's IMPORTS edges held in memory, read backwards: who imports each file.

``impact`` on a heavily imported file walks most of the graph: four frontier queries,
3–5 ms on a stdlib-size graph, paid by every code lens, hover and ``orbit/impact``. The edges
themselves change far less often than anything else (only when some file's imports change),
so a process that knows when they change (the language server: ``WorkspaceIndexer.
imports_generation``) reads them once, in one query, and walks them in memory: ~12 ms to
read the 9,000 IMPORTS edges of the standard library, then ~0.25 ms per traversal.

Whoever holds an ``ImportGraph`` must drop it when the IMPORTS edges change (key it by the
generation, as ``graph.cache.QueryCache`` does); one-shot readers (the CLI, the agent) use the
frontier queries of ``queries.impact`` instead, which read only what they reach.
"""

from __future__ import annotations

from orbit_lsp.graph.connection import Graph

IMPORTERS_CYPHER = ("MATCH (b:File)<-[:IMPORTS]-(a:File) WITH b, collect(a.path) AS importers "
                    "RETURN collect([b.path, importers])")


class ImportGraph:
    """The reverse IMPORTS adjacency of one graph: ``importers[path]`` = the paths of the files
    with an IMPORTS edge to ``path``. ``cypher`` is the query it was read with
    (``[{"query", "params"}]``)."""

    def __init__(self, importers: dict[str, tuple[str, ...]]):
        self.importers = importers
        self.cypher = [{"query": IMPORTERS_CYPHER, "params": {}}]

    @classmethod
    def load(cls, graph: Graph) -> "ImportGraph":
        """Read every IMPORTS edge of ``graph`` (one query, one row). Raises what
        ``Graph.ro_query`` raises (``FalkorDBOffline``, ``QueryTimeout``)."""
        rows = graph.ro_query(IMPORTERS_CYPHER).rows
        pairs = rows[0][0] if rows and rows[0][0] else []
        return cls({dst: tuple(srcs) for dst, srcs in pairs})

    def dependents(self, path: str, max_hops: int) -> dict[str, int]:
        """Files that reach ``path`` through 1..``max_hops`` IMPORTS edges: {path: minimal hop
        count}; never ``path`` itself; empty for a file nothing imports (or one not in the
        graph: callers check existence)."""
        hops: dict[str, int] = {}
        seen = {path}
        frontier = [path]
        for hop in range(1, max_hops + 1):
            found = []
            for f in frontier:
                for d in self.importers.get(f, ()):
                    if d not in seen:
                        seen.add(d)
                        found.append(d)
            if not found:
                break
            hops.update((d, hop) for d in found)
            frontier = found
        return hops
