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

import threading
from collections import OrderedDict
from typing import Any, Callable

from orbit_lsp.graph.connection import Graph


class QueryCache:
    """A thread-safe LRU of query answers (``max_entries`` of them)."""

    def __init__(self, max_entries: int = 256):
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, graph: Graph, generation: int, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(graph, *args)``, from the cache when it was computed at this ``generation`` of
        ``graph`` (``args`` must be hashable). Errors (``FalkorDBOffline``…) are not cached."""
        key = (graph.name, generation, fn.__module__, fn.__qualname__, args)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return self._entries[key]
            self.misses += 1
        value = fn(graph, *args)
        self.put_key(key, value)
        return value

    def lookup(self, key: tuple) -> tuple[bool, Any]:
        """``(found, value)`` for a key of the caller's own making (see ``put_key``)."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return True, self._entries[key]
            self.misses += 1
        return False, None

    def put_key(self, key: tuple, value: Any) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


ANSWERS = QueryCache()  # the process's cache (the language server's requests share it)
