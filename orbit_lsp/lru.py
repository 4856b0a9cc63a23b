"""A small thread-safe least-recently-used map, for orbit's in-process caches (answers of graph
queries, decoded per-file facts, analysed editor buffers)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable


class LRU:
    """At most ``max_entries`` values (and, with ``max_weight``, values whose weights sum to at
    most that: ``put``'s ``weight``, e.g. a list's length); the least recently used one goes
    first. A value heavier than ``max_weight`` alone is not kept. ``hits`` and ``misses`` count
    lookups."""

    def __init__(self, max_entries: int, max_weight: int | None = None):
        self.max_entries = max_entries
        self.max_weight = max_weight
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._weights: dict[Hashable, int] = {}
        self.weight = 0  # the sum of the weights of the values kept
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

    def put(self, key: Hashable, value: Any, weight: int = 1) -> None:
        with self._lock:
            self.weight -= self._weights.pop(key, 0)
            self._entries.pop(key, None)
            if self.max_weight is not None and weight > self.max_weight:
                return
            self._entries[key] = value
            self._weights[key] = weight
            self.weight += weight
            heavy = self.max_weight is not None
            while len(self._entries) > self.max_entries or (heavy and self.weight > self.max_weight):
                old, _ = self._entries.popitem(last=False)
                self.weight -= self._weights.pop(old)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._weights.clear()
            self.weight = 0
