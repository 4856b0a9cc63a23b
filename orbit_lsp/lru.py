"""A small thread-safe least-recently-used map, for orbit's in-process caches (answers of graph
queries, decoded per-file facts, analysed editor buffers)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable


class LRU:
    """At most ``max_entries`` values, and when ``max_weight`` is set, values whose weights
    (given to ``put``, e.g. a size in bytes) sum to at most that (the last value put always
    stays); the least recently used one goes first. ``hits`` and ``misses`` count lookups."""

    def __init__(self, max_entries: int, max_weight: int | None = None):
        self.max_entries = max_entries
        self.max_weight = max_weight
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._weights: dict[Hashable, int] = {}
        self.weight = 0  # sum of the weights of the values held
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def lookup(self, key: Hashable) -> tuple[bool, Any]:
        """``(found, value)``."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return True, self._entries[key]
            self.misses += 1
        return False, None

    def put(self, key: Hashable, value: Any, weight: int = 0) -> None:
        with self._lock:
            self.weight += weight - self._weights.pop(key, 0)
            if weight:
                self._weights[key] = weight
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries or (
                    self.max_weight is not None and self.weight > self.max_weight and len(self._entries) > 1):
                old, _ = self._entries.popitem(last=False)
                self.weight -= self._weights.pop(old, 0)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._weights.clear()
            self.weight = 0
