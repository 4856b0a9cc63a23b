"""Classes for the Python resolver: bases, the C3 method resolution order, attribute lookup on
classes and instances (properties included), and the subclass relation (attributes that only
subclasses set, read in a base)."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING

from orbit_lsp.index.py_values import (
    _MAX_DEPTH,
    _OBJECT_ATTRS,
    ALL_CLASSES,
    BOTTOM,
    HAS_FACTS,
    _NoC3,
    _unit,
    consulters_of,
    note_consulter,
)
from orbit_lsp.index import py_parallel
from orbit_lsp.index.py_facts import UNKNOWN

if TYPE_CHECKING:
    from orbit_lsp.index.py_edges import FileEdges

_NO_PAIRS = ((), frozenset())  # ``_file_inherits`` of a file without a class base


class ClassModel:
    """Mixed into ``resolve.Resolver`` (whose state and evaluation, ``ev``, it uses)."""

    def implied(self, entities) -> set[tuple]:
        """After ``set_facts`` and ``invalidate(entities)``: ``{ALL_CLASSES}`` when the subclass
        relation changed (a class gained or lost a workspace base, also through a base name
        imported from a file that changed), having forgotten what consulted it; else empty.
        The indexer adds it to the entities that decide which files are resolved again."""
        entities = set(entities)
        redo = set(self._inherits_stale)
        if entities:  # (a body-only edit changes no entity)
            # the files that consulted one of them, through the index of the files consulted
            # (a pass over every file's pairs was most of an edit's time on 20,000 files)
            inherits = self._inherits
            near = consulters_of(self._inherit_consulters_index(), entities)
            redo.update(r for r in near if r in inherits and not inherits[r][1].isdisjoint(entities))
        self._inherits_stale = set()
        moved = False
        with self._bases_memo():
            for r in sorted(redo):
                before = self._inherits.pop(r, ((), frozenset()))[0]
                if r in self.facts:
                    self._set_inherits(r, self._file_inherits(r))
                if self._inherits.get(r, ((), None))[0] != before:
                    moved = True
        if not moved:
            return set()
        self._subclasses = None
        self.invalidate((ALL_CLASSES,))
        return {ALL_CLASSES}

    def _set_inherits(self, rel: str, pairs_and_deps: tuple) -> None:
        """``_inherits[rel] = pairs_and_deps`` (``_file_inherits``' shape), noted in the index of
        the files consulted once it exists."""
        self._inherits[rel] = pairs_and_deps
        if self._inherit_consulters is not None:
            note_consulter(self._inherit_consulters, rel, pairs_and_deps[1])

    def _inherit_consulters_index(self) -> dict[str, set[str]]:
        """File -> the files whose subclass pairs (``_inherits``) consulted an entity of it
        (``py_values.entity_file``), made on first use and kept up by ``_set_inherits``. A
        superset: entries are never taken away, and the exact test is the caller's."""
        if self._inherit_consulters is None:
            index: dict[str, set[str]] = {}
            for r, (_, deps) in self._inherits.items():
                note_consulter(index, r, deps)
            self._inherit_consulters = index
        return self._inherit_consulters

    def seed_inherits(self, rel: str, edges: FileEdges) -> None:
        """A file's (class, base) pairs from the edges an earlier resolver computed (the
        ``inherits`` of its ``FileEdges``, and what it consulted then: ``deps``)."""
        pairs = tuple(sorted(((rel, q), (bf, bq)) for q, bf, bq in edges.inherits))
        deps = edges.inherit_deps if edges.inherit_deps is not None else edges.deps
        self._set_inherits(rel, (pairs, frozenset(deps) | {(rel, HAS_FACTS)}))
        self._inherits_stale.discard(rel)

    @contextlib.contextmanager
    def _bases_memo(self):
        """Evaluate class bases (``_file_inherits``) apart: with a memo of their own, thrown
        away afterwards, and no attribute set only in subclasses (``subclass_attr`` answers None:
        the relation is what is being built). A base such as ``class E(self.enum_type)`` is then
        the same whether the relation existed when it was evaluated (an edit) or not (a full
        build), and no value evaluated without the relation stays memoised for later use."""
        saved = self.memo, self._old_memo, self._interned, self._sets_with, self._unsettled, self._bases_only
        self.memo, self._old_memo, self._interned, self._sets_with, self._unsettled = {}, {}, {}, None, {}
        self._bases_only = True
        try:
            yield
        finally:
            (self.memo, self._old_memo, self._interned, self._sets_with, self._unsettled,
             self._bases_only) = saved

    def _file_inherits(self, rel: str) -> tuple:
        """``((((rel, class), (file, base)), ...) sorted, entities consulted)`` of one file.
        The outline of each of its classes that has a workspace base is taken now, while its
        facts are decoded: the walks down the hierarchy (``_subclass_definitions``) read it."""
        saved, self._deps = self._deps, set()
        try:
            pairs = set()
            for q, c in self.facts[rel].classes.items():
                if c.bases:
                    for b in self._bases(rel, q) or ():
                        pairs.add(((rel, q), b))
            out = tuple(sorted(pairs)), frozenset(self._deps)
        finally:
            self._deps = saved
        for (_, q), _ in out[0]:
            self._class_outline(rel, q)
        return out

    def _ensure_subclasses(self, everyone) -> None:
        """The subclass relation over ``everyone`` (every file with facts), computing the pairs
        of the files that have none yet (evaluated before any other evaluation of a run, so no
        cycle runs through it)."""
        checked = self._checked_everyone
        if checked is not None and checked[0] is everyone:
            # the same files as last time, all of them computed then: only those made stale
            # since (``set_facts``) are computed again (``implied`` re-adds what it pops)
            order = checked[1]
            todo = sorted((r for r in self._inherits_stale if r in order), key=order.__getitem__)
        else:
            todo = [r for r in everyone if r in self._inherits_stale or r not in self._inherits]
            self._checked_everyone = (everyone, {r: i for i, r in enumerate(everyone)})
        # files known to have no class with a base add no pair: not decoded (``_file_inherits``
        # would decode each to find that out; on the scale corpus three quarters of the
        # subclass finders' time was such decoding)
        lacks = getattr(self.facts, "lacks_class_bases", None)
        if lacks is not None and todo:
            rest = []
            for r in todo:
                if lacks(r):
                    self._inherits_stale.discard(r)
                    self._set_inherits(r, _NO_PAIRS)
                else:
                    rest.append(r)
            todo = rest
        if py_parallel.in_short_lived_children(len(todo), self.workers):
            # a large workspace: in short-lived children (``py_parallel``), whose memory (the
            # bases' memo, every file's facts decoded) goes when they end
            for r in todo:
                self._inherits_stale.discard(r)
            have = [r for r in todo if r in self.facts]
            for r, pairs_and_deps in py_parallel.inherits_in_children(self, have, self.workers).items():
                self._set_inherits(r, pairs_and_deps)
        elif todo:
            with self._bases_memo():
                # last to first: a run resolves its files first to last next, and finds the
                # facts this pass decoded last still among the recently decoded (``state.FACTS``)
                for r in reversed(todo):
                    self._inherits_stale.discard(r)
                    if r in self.facts:
                        self._set_inherits(r, self._file_inherits(r))
        if self._subclasses is None:
            subs: dict[tuple, list] = {}
            for r in sorted(self._inherits):
                for sub, base in self._inherits[r][0]:
                    subs.setdefault(base, []).append(sub)
            self._subclasses = subs
            self._unsettled = {}  # evaluated without the relation

    def subclass_attr(self, rel: str, qual: str, attr: str):
        """An attribute read on an instance of class ``qual`` that neither it nor its bases
        define: what the workspace subclasses that define it assign (``self.x = …`` in a
        subclass, read in a base's method: ``self`` is an instance of the subclass there), every
        subclass down the hierarchy. A class-body value below a subclass that assigns the
        attribute on its instances is shadowed by that assignment and left out. None when no
        subclass defines it."""
        if self._bases_only:
            return None
        self._deps.add(ALL_CLASSES)
        if self._subclasses is None:
            return None
        units, found = self._subclass_definitions(rel, qual, attr)
        self._deps |= units
        vals = []
        for r, si, refs, in_body in found:
            if in_body:
                vals.append(self._through_instance(self.combine([self.ev(r, si, x) for x in refs])))
            else:
                vals.append(self.combine([self.ev(r, msi, x) for msi, x in refs]))
        return self.combine(vals) if vals else None

    def _subclass_definitions(self, rel: str, qual: str, attr: str) -> tuple[frozenset, tuple]:
        """Where the workspace subclasses of class ``qual`` of ``rel`` define ``attr``, in the
        order ``subclass_attr`` combines them: ``(entities consulted, ((file, scope index, refs,
        in_body), ...))``, ``in_body`` for a class-body binding (its scope is the body), else
        ``self.x = …`` assignments (``refs`` of ``(method scope, ref)``). What it depends on
        (the subclass relation, the facts of the subclasses' files) does not change while the
        relation stands and no file's facts are replaced (``set_facts``), so it is kept per
        ``(rel, qual, attr)`` until then: the walk down a large hierarchy (every model of a
        Django project) is made once, not at every read of an attribute through ``self``."""
        if self._subclass_defs[0] is not self._subclasses:
            self._subclass_defs = (self._subclasses, {}, {})
        _, by_attr, units_of = self._subclass_defs
        key = (rel, qual, attr)
        hit = by_attr.get(key)
        if hit is not None:
            return hit
        saved, self._deps = self._deps, set()  # what the walk consults (``_facts``: HAS_FACTS)
        try:
            found = []
            seen, todo = {(rel, qual)}, [((rel, qual), False)]
            while todo:
                cls_key, shadowed = todo.pop()
                for r, q in self._subclasses.get(cls_key, ()):
                    if (r, q) in seen:
                        continue
                    seen.add((r, q))
                    outline = self._class_outline(r, q)
                    if outline is None:
                        continue
                    self._deps.add((r, _unit(q)))
                    body_si, body_names, attr_names = outline
                    in_body = attr in body_names and not shadowed
                    in_attrs = attr in attr_names
                    if in_body or in_attrs:  # decoded only for a class that defines it
                        facts = self._facts(r)
                        if in_body:
                            found.append((r, body_si, tuple(facts.scopes[body_si].names[attr]), True))
                        if in_attrs:
                            found.append((r, None, tuple(facts.classes[q].attrs[attr]), False))
                    todo.append(((r, q), shadowed or in_attrs))
            units = frozenset(self._deps)
        finally:
            self._deps = saved
        # the walk visits the same classes for every attribute: one set of entities per class
        units = units_of.setdefault(units, units)
        hit = by_attr[key] = (units, tuple(found))
        return hit

    def _class_outline(self, r: str, q: str) -> tuple | None:
        """``(body scope index, names its body binds, attributes its methods set on self)`` of
        class ``q`` of file ``r`` (names as tuples of interned strings: a few hundred bytes a
        class), or None when the file has no facts (consulted: ``(r, HAS_FACTS)``) or no such
        class. Kept per file until its facts are replaced (``set_facts``): a walk down a
        hierarchy of thousands of classes (every model of transformers) reads them without
        decoding every subclass's file again."""
        outlines = self._class_outlines.get(r)
        if outlines is None:
            facts = self._facts(r)
            if facts is None:
                return None
            outlines = self._class_outlines[r] = {}
        elif q in outlines:
            return outlines[q]
        facts = self._facts(r)
        cls = facts.classes.get(q) if facts is not None else None
        if cls is None:
            outline = None
        else:
            outline = (cls.body, tuple(map(sys.intern, facts.scopes[cls.body].names)),
                       tuple(map(sys.intern, cls.attrs)))
        outlines[q] = outline
        return outline

    def _bases(self, r: str, q: str) -> list[tuple[str, str]] | None:
        """The workspace classes among the bases of class ``q`` of file ``r``, in order (None:
        not a class of that file)."""
        facts = self._facts(r)
        if facts is None:
            return None
        self._deps.add((r, _unit(q)))
        cls = facts.classes.get(q)
        if cls is None:
            return None
        bases = []
        for b in cls.bases:
            v = self.ev(r, cls.outer, b)
            for m in (v[1] if v and v[0] == "union" else [v]):
                if m and m[0] == "sym" and m[3] == "class" and (m[1], m[2]) not in bases:
                    bases.append((m[1], m[2]))
        return bases

    def mro(self, rel: str, qual: str) -> list[tuple[str, str]]:
        """The method resolution order of a workspace class over workspace classes: C3
        linearisation, as Python computes ``__mro__`` (``class D(B, C)`` with ``B(A)``, ``C(A)``:
        D, B, C, A). A hierarchy C3 rejects (Python raises TypeError) falls back to a depth-first
        order without repeats."""
        key = ("mro", rel, qual)
        hit = self.memo.get(key)  # memoised with what it consulted; the memoised case of ``_scc``, inlined
        if hit is None and self._old_memo:
            hit = self._from_old_memo(key)
        if hit is not None and len(self._stack) + hit[2] <= _MAX_DEPTH:
            self._deps |= hit[1]
            if hit[2] > self._sub:
                self._sub = hit[2]
            got = hit[0]
        else:
            got = self._scc(key, self._mro, rel, qual)
        return list(got) if isinstance(got, tuple) and got != BOTTOM else []

    def _mro(self, rel: str, qual: str) -> tuple:
        try:
            return tuple(self._c3(rel, qual, {}, set()))
        except _NoC3:
            return tuple(self._dfs_mro(rel, qual))

    def _c3(self, r: str, q: str, memo: dict, active: set) -> list[tuple[str, str]]:
        key = (r, q)
        if key in memo:
            return memo[key]
        if key in active:
            raise _NoC3  # a cycle of bases
        bases = self._bases(r, q)
        if bases is None:
            return []
        active.add(key)
        seqs = [list(self._c3(br, bq, memo, active)) for br, bq in bases]
        active.discard(key)
        seqs = [x for x in seqs if x] + [list(bases)]
        out = [key]
        while True:
            seqs = [x for x in seqs if x]
            if not seqs:
                break
            for x in seqs:
                head = x[0]
                if not any(head in y[1:] for y in seqs):
                    break
            else:
                raise _NoC3
            out.append(head)
            for x in seqs:
                if x[0] == head:
                    del x[0]
        memo[key] = out
        return out

    def _dfs_mro(self, rel: str, qual: str) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        stack = [(rel, qual)]
        seen = set()
        while stack:
            r, q = stack.pop(0)
            if (r, q) in seen:
                continue
            seen.add((r, q))
            bases = self._bases(r, q)
            if bases is None:
                continue
            out.append((r, q))
            stack = bases + stack
        return out

    def _mro_complete(self, mro: list[tuple[str, str]]) -> bool:
        """True when every base of every class in ``mro`` is a workspace class (or ``object``),
        so an attribute missing from all of them can only come from ``object``."""
        for r, q in mro:
            facts = self._facts(r)
            cls = facts.classes[q]
            for b in cls.bases:
                v = self.ev(r, cls.outer, b)
                if v == ("builtin", "object"):
                    continue
                if not (v and v[0] == "sym" and v[3] == "class"):
                    return False
        return True

    def class_attr(self, rel: str, qual: str, attr: str, via_instance: bool, skip_first: bool = False,
                   subclasses: bool = True):
        """Attribute ``attr`` of class ``qual`` (read on an instance when ``via_instance``): the
        first class of the MRO (after the first when ``skip_first``) that defines it. Read on an
        instance and defined nowhere there, it is what the workspace's subclasses assign
        (``subclass_attr``: ``self`` may be a subclass's), unless ``subclasses`` is False (an
        instance known to be of exactly this class, such as the one ``K()`` constructs)."""
        mro = self.mro(rel, qual)
        for i, (r, q) in enumerate(mro):
            if skip_first and i == 0:
                continue
            facts = self._facts(r)
            cls = facts.classes[q]
            body = facts.scopes[cls.body]
            if attr in body.names:  # the class's unit: recorded by mro()
                v = self.combine([self.ev(r, cls.body, x) for x in body.names[attr]])
                if via_instance:
                    v = self._through_instance(v)
                return v
            if via_instance and attr in cls.attrs:
                return self.combine([self.ev(r, msi, x) for msi, x in cls.attrs[attr]])
        if attr in _OBJECT_ATTRS and self._mro_complete(mro):
            return ("ext", f"builtins.object.{attr}")
        if via_instance and subclasses and not skip_first and mro:
            return self.subclass_attr(rel, qual, attr)
        return None

    def _through_instance(self, v):
        """A class attribute read through an instance: a ``@property`` gives what its getter
        returns."""
        if v is None:
            return None
        if v[0] == "propv":
            return self.call_result(("sym", v[1], v[2], "method"), v[1], -1, UNKNOWN)
        if v[0] == "union" and any(m[0] == "propv" for m in v[1]):
            return self.combine([self._through_instance(m) for m in v[1]] + ([None] if v[2] else []))
        return v

    def property_getter(self, base, attr: str):
        """``(file, qual)`` of the ``@property`` getter that reading ``attr`` on value ``base``
        runs, or None."""
        if base is None or base[0] not in ("inst", "super"):
            return None
        for r, q in self.mro(base[1], base[2])[1 if base[0] == "super" else 0:]:
            facts = self._facts(r)
            body = facts.scopes[facts.classes[q].body]
            refs = body.names.get(attr)
            if refs is not None:
                for x in refs:
                    if x[0] == "prop":
                        return (r, x[1])
                return None
        return None
