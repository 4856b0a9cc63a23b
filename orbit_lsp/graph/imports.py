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

import threading
from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType

from orbit_lsp.graph.connection import Graph

WALKS_KEPT = 16  # walks an ImportGraph remembers: a lens count and the impact asked after it share one
# (a walk of a file 2,722 files depend on holds ~150 KB)

IMPORTERS_CYPHER = ("MATCH (b:File)<-[e:IMPORTS]-(a:File) WITH b, collect(a.path) AS importers, "
                    "collect(CASE WHEN e.type_only THEN a.path END) AS types "
                    "RETURN collect([b.path, importers, types])")


class ImportGraph:
    """The reverse IMPORTS adjacency of one graph: ``importers[path]`` = the paths of the files
    with an IMPORTS edge to ``path``, ``type_importers[path]`` those whose edge is type-only
    (``IMPORTS.type_only``). ``cypher`` is the query it was read with (``[{"query", "params"}]``)."""

    def __init__(self, importers: dict[str, tuple[str, ...]],
                 type_importers: dict[str, frozenset[str]] | None = None):
        self.importers = importers
        self.type_importers = type_importers or {}
        self.cypher = [{"query": IMPORTERS_CYPHER, "params": {}}]
        self._walks: OrderedDict[tuple[str, int, bool], Mapping[str, int]] = OrderedDict()
        self._walks_lock = threading.Lock()

    @classmethod
    def load(cls, graph: Graph) -> "ImportGraph":
        """Read every IMPORTS edge of ``graph`` (one query, one row). Raises what
        ``Graph.ro_query`` raises (``FalkorDBOffline``, ``QueryTimeout``)."""
        rows = graph.ro_query(IMPORTERS_CYPHER).rows
        pairs = rows[0][0] if rows and rows[0][0] else []
        return cls({dst: tuple(srcs) for dst, srcs, _ in pairs},
                   {dst: frozenset(types) for dst, _, types in pairs if types})

    def dependents(self, path: str, max_hops: int, run_time: bool = False) -> Mapping[str, int]:
        """Files that reach ``path`` through 1..``max_hops`` IMPORTS edges: {path: minimal hop
        count}, read-only (the walk is remembered: the last ``WALKS_KEPT`` are shared by every
        caller); never ``path`` itself; empty for a file nothing imports (or one not in the
        graph: callers check existence). ``run_time``: through edges that are not type-only."""
        key = (path, max_hops, run_time)
        with self._walks_lock:
            known = self._walks.get(key)
            if known is not None:
                self._walks.move_to_end(key)
                return known
        hops = MappingProxyType(self._walk(path, max_hops, run_time))
        with self._walks_lock:
            self._walks[key] = hops
            while len(self._walks) > WALKS_KEPT:
                self._walks.popitem(last=False)
        return hops

    def _walk(self, path: str, max_hops: int, run_time: bool) -> dict[str, int]:
        hops: dict[str, int] = {}
        seen = {path}
        frontier = [path]
        for hop in range(1, max_hops + 1):
            found = []
            for f in frontier:
                types = self.type_importers.get(f, ()) if run_time else ()
                for d in self.importers.get(f, ()):
                    if d not in seen and d not in types:
                        seen.add(d)
                        found.append(d)
            if not found:
                break
            hops.update((d, hop) for d in found)
            frontier = found
        return hops

    def type_only_dependents(self, path: str, max_hops: int, hops: Mapping[str, int] | None = None) -> set[str]:
        """The dependents of ``path`` (``hops``: ``dependents(path, max_hops)`` when known) that
        reach it within ``max_hops`` only through a type-only edge somewhere on the way. The
        walk without type-only edges is made only when one of them joins two files of the walk
        (the importer a dependent, the imported file ``path`` or a dependent): else nothing
        is left out and the answer is empty."""
        hops = self.dependents(path, max_hops) if hops is None else hops
        if not self.type_importers or not hops:
            return set()
        if not any((f == path or f in hops) and any(d in hops for d in ds) for f, ds in self.type_importers.items()):
            return set()
        return set(hops) - set(self.dependents(path, max_hops, run_time=True))
