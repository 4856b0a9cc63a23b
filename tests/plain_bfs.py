"""The reference the graph traversals are tested against: a plain breadth-first search."""

from __future__ import annotations

from collections import deque
from typing import Hashable, Iterable


def reaching(edges: Iterable[tuple[Hashable, Hashable]], start: Hashable, hops: int) -> dict:
    """Nodes with a path of 1..``hops`` edges ``(a, b)`` (a → b) to ``start``: {node: fewest
    edges}. ``start`` itself is never listed."""
    into: dict = {}
    for a, b in edges:
        into.setdefault(b, set()).add(a)
    depth = {start: 0}
    todo = deque([start])
    while todo:
        cur = todo.popleft()
        if depth[cur] < hops:
            for d in sorted(into.get(cur, ())):
                if d not in depth:
                    depth[d] = depth[cur] + 1
                    todo.append(d)
    del depth[start]
    return depth
