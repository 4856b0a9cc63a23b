"""Answers of named queries, kept while the graph they were read from is unchanged.

An editor asks the same things again and again: code lenses of a file on every scroll and
edit, a hover where the mouse rests, the impact of the file open in front. ``QueryCache`` keeps
recent ``queries`` answers keyed by graph, *generation* and arguments; the generation is a
counter its owner bumps on every change it makes to the graph (``WorkspaceIndexer.generation``),
so an answer is never served across a re-index. Changes made to the same graph by another
process are not seen until this one's generation moves: only the process that indexes a
workspace should cache its answers (the language server does both).

Answers are shared, not copied: callers must not mutate them.
"""

from __future__ import annotations

from typing import Any, Callable

from orbit_lsp.graph.connection import Graph
from orbit_lsp.lru import LRU


class QueryCache(LRU):
    """A thread-safe LRU of query answers (``max_entries`` of them)."""

    def __init__(self, max_entries: int = 256):
        super().__init__(max_entries)

    def get(self, graph: Graph, generation: int, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(graph, *args)``, from the cache when it was computed at this ``generation`` of
        ``graph`` (``args`` must be hashable). Errors (``FalkorDBOffline``…) are not cached."""
        key = (graph.name, generation, fn.__module__, fn.__qualname__, args)
        found, value = self.lookup(key)
        if not found:
            value = fn(graph, *args)
            self.put(key, value)
        return value


ANSWERS = QueryCache()  # the process's cache (the language server's requests share it)
