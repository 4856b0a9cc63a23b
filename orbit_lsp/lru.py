"""A small thread-safe least-recently-used map, for orbit's in-process caches (answers of graph
queries, decoded per-file facts, analysed editor buffers)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable


class LRU:
    """At most ``max_entries`` values; the least recently used one goes first. ``hits`` and
    ``misses`` count lookups."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
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

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
