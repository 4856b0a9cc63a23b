"""Containers for the Python resolver: the items of literals, of the stores into them
(``c[k] = v``, ``append``, ``update``…), of iteration, generators and instances that define
``__iter__``/``__getitem__``."""

from __future__ import annotations

from orbit_lsp.index.py_values import BOTTOM, STORES, _ext, _nested
from orbit_lsp.index.py_facts import UNKNOWN


class Containers:
    """Mixed into ``resolve.Resolver`` (whose state and evaluation, ``ev``, it uses)."""

    def _file_stores(self, rel: str) -> dict:
        """The container stores of a file by the last name of their container expression
        (``handlers`` for ``handlers[k] = v`` and ``self.handlers.append(v)``)."""
        got = self._stores.get(rel)
        if got is None:
            facts = self.facts.get(rel)
            got = self._stores[rel] = {}
            for si, sc in enumerate(facts.scopes if facts is not None else ()):
                for st in sc.stores:
                    cref = st[0]
                    name = cref[1] if cref[0] == "n" else cref[2] if cref[0] == "a" else None
                    if name is not None:
                        got.setdefault(name, []).append((si, st))
        return got

    def _stored(self, cont, key) -> list:
        """Values stored into container value ``cont`` in its file (``c[k] = v``, ``c.append(v)``…)
        through the name the literal was bound to: for ``key`` (None: every key)."""
        rel, name = cont[1], cont[-1]
        self._deps.add((rel, STORES))
        if name is None:
            return []
        out = []
        for si, (cref, k, vref, many) in self._file_stores(rel).get(name, ()):
            c = self.ev(rel, si, cref)
            if c is None or not (c == cont or (c[0] == "union" and cont in c[1])):
                continue
            if key is not None and k is not None and k != key:
                continue
            v = self.ev(rel, si, vref)
            out.append(self.items(v) if many else v)
        return out

    def items(self, v, key=None, index=None):
        """What iterating (or subscripting, ``key``/``index``) value ``v`` gives. None: unknown.
        Memoised and cycle-safe like ``ev`` (a container may hold itself: ``xs = [*xs]``)."""
        if v is None:
            return None
        if v is BOTTOM or v == BOTTOM:
            return BOTTOM
        return self._scc(("items", v, key, index), self._items, v, key, index)

    def _items(self, v, key, index):
        t = v[0]
        if t == "dict":
            if key is None and index is None:
                return None  # iterating a dict gives its keys
            k = key if key is not None else index
            if k != "?":
                vals = [self.ev(v[1], v[2], r) for kk, r in v[3] if kk == k] + self._stored(v, k)
                if vals:
                    return self.combine(vals)
            vals = [self.ev(v[1], v[2], r) for _, r in v[3]] + self._stored(v, None)
            return self.combine(vals) if vals else None
        if t == "dvals":
            d = v[1]
            vals = [self.ev(d[1], d[2], r) for _, r in d[3]] + self._stored(d, None)
            return self.combine(vals) if vals else None
        if t == "ditems":
            return _nested(("tup", (None, self.items(("dvals", v[1])))))
        if t == "seq":
            elts = v[3]
            if index is not None and v[4] == "tuple" and isinstance(index, int) and not any(
                    e[0] == "*" for e in elts) and -len(elts) <= index < len(elts):
                return self.ev(v[1], v[2], elts[index])
            vals = [self.items(self.ev(v[1], v[2], e[1])) if e[0] == "*" else self.ev(v[1], v[2], e)
                    for e in elts]
            vals += self._stored(v, None)
            return self.combine(vals) if vals else None
        if t == "tup":
            if isinstance(index, int) and -len(v[1]) <= index < len(v[1]):
                return v[1][index]
            return self.combine(list(v[1]))
        if t == "bag":
            return self.combine(list(v[1])) if v[1] else None
        if t == "gen":
            facts = self._facts(v[1])
            ys = facts.scopes[v[2]].yields if facts is not None else []
            return self.combine([self.ev(v[1], v[2], y) for y in ys]) if ys else None
        if t == "inst" and index is None and key is None:
            it = self.call_result(self.class_attr(v[1], v[2], "__iter__", via_instance=True), v[1], -1, UNKNOWN)
            if it is None or it == v:
                nxt = self.class_attr(v[1], v[2], "__next__", via_instance=True)
                return self.call_result(nxt, v[1], -1, UNKNOWN) if nxt is not None else None
            return self.items(it)
        if t == "inst":
            get = self.class_attr(v[1], v[2], "__getitem__", via_instance=True)
            return self.call_result(get, v[1], -1, UNKNOWN) if get is not None else None
        if t in ("ext", "builtin"):
            return _ext(v[1], "[]")  # an item of an external container is external
        if t == "union":
            return self.combine([self.items(m, key, index) for m in v[1]] + ([None] if v[2] else []))
        return None
