"""Cross-file resolution for Python: module lookup, name binding and call binding.

Input: the ``PyFacts`` of every Python file of a workspace and the set of all indexed paths.
Output, per file, a ``FileEdges``: ``IMPORTS`` targets, packages, ``CALLS`` and ``INHERITS`` edges,
and the unresolved calls of each caller. A call is bound only when the value of the called
expression can be followed through scopes, imports, re-exports, classes (C3 method resolution
order over workspace classes), instances, return values, ``functools.partial``, containers,
parameters, decorators, properties and annotations; otherwise it is counted as unresolved on its
caller (with its line) and never matched by name.

**Value flow.** A parameter holds what the workspace's call sites pass to it (besides its
default and its annotation): every bound call site records, per target function, a *flow*
``(caller file, scope, argument refs, keyword refs, skip)`` (``FileEdges.flows``); the resolver
keeps every file's flows in ``param_in`` and evaluates a parameter as the union of the
arguments flowing into it, kept in a table of parameter values (``pval``). Binding calls and
collecting flows feed each other, so resolution runs to a fixpoint (``resolve_fixpoint``): the
files whose evaluation consulted a parameter's values (entity ``(PVAL, file, qual, parameter)``)
are resolved again when those values change.

Each evaluation records which parts of which files it consulted (``deps``: *entities*
``(file, unit)``, a unit being one top-level name and everything defined under it, see
``interface_units``). When a file's interface changes, only the units that differ are
invalidated: memoised values and files whose resolution consulted them, nothing else (adding a
function to a module does not re-resolve the files that only use its other names).
"""

from __future__ import annotations

import builtins
import sys

from orbit_lsp.index.py_binding import CallBinding
from orbit_lsp.index.py_classes import ClassModel
from orbit_lsp.index.py_containers import Containers
from orbit_lsp.index.py_fixtures import PytestFixtures
from orbit_lsp.index.py_flow import ParameterFlow
from orbit_lsp.index.py_modules import ModuleLookup
from orbit_lsp.index.py_values import _MAX_DEPTH, BOTTOM, HAS_FACTS, _ext, _nested, _unit
from orbit_lsp.index.py_facts import LIBRARY_CONTAINER_CLASSES, UNKNOWN, PyFacts

_WEAK_REFERENCES = frozenset({"weakref.ref", "weakref.WeakMethod", "weakref.proxy"})
_BUILTINS = frozenset(dir(builtins)) | {"__name__", "__file__", "__doc__", "__spec__", "__path__",
                                         "__package__", "__loader__", "__builtins__", "__debug__",
                                         "__annotations__", "__dict__", "__module__", "__qualname__"}
if sys.getrecursionlimit() < 10_000:
    sys.setrecursionlimit(10_000)  # each evaluation level of _MAX_DEPTH uses a few frames


_MAX_SCC_PASSES = 12  # passes over one component of mutually dependent evaluations (``_scc``)
_SEQ_BUILTINS = frozenset({"list", "tuple", "set", "frozenset", "sorted", "reversed", "iter"})
_UNSEEN = object()  # ``Resolver._facts``: a file not read yet
_FACTS_SEEN_MAX = 2048  # files whose facts ``Resolver._facts`` keeps at once
_CONSTANT_REFS = frozenset(("lit", "d", "l", "prop"))  # refs whose value is the ref itself (``ev``)


class Resolver(CallBinding, ParameterFlow, PytestFixtures, ClassModel, Containers, ModuleLookup):
    """Binds names across the files of one workspace.

    ``facts``: path -> PyFacts for every Python file that parsed; ``files``: every indexed path
    (any language); ``aliases``: in-workspace symlinked directory -> its target directory;
    ``sys_paths``: path -> the directories that file adds to ``sys.path`` (``PyFacts.sys_path``;
    None: read from ``facts``, which must then be a plain dict); ``pythonpath``: pytest's
    ``pythonpath`` directories (roots for every file). See ``py_modules.ModuleLookup``.
    """

    def __init__(self, facts: dict[str, PyFacts], files: set[str], aliases: dict[str, str] | None = None,
                 root_package: str = "", value_flow: bool = True, sys_paths: dict[str, tuple] | None = None,
                 pythonpath: tuple[str, ...] = ()):
        self.facts = facts
        self.files = files
        self.aliases = dict(aliases or {})
        self.root_package = root_package
        if sys_paths is None:
            sys_paths = {r: f.sys_path for r, f in facts.items() if getattr(f, "sys_path", ())}
        self.sys_paths = sys_paths
        self.pythonpath = tuple(pythonpath)
        self._scoped_paths: dict[str, list[str]] | None = None  # see ``ModuleLookup.scoped_paths``
        self._extra_roots_of: dict[str, tuple[str, ...]] = {}
        self._roots_of: dict[str, tuple[str, ...]] = {}  # file -> ``roots_for`` it
        self._found: dict[tuple, tuple] = {}  # (spec, importer or None) -> ``find_module``'s answer
        self.value_flow = value_flow  # False: parameters hold only their defaults and annotations
        # processes a round of ``resolve_fixpoint`` may use (``py_parallel.resolve_files``; a full
        # build sets it): 1 resolves in this process only
        self.workers = 1
        self.dirs: set[str] = {""}
        for f in files:
            parts = f.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                self.dirs.add("/".join(parts[:i]))
        self.src_root = "src" if "src" in self.dirs and "src/__init__.py" not in files else None
        self.memo: dict = {}  # (file, scope, ref) -> (value, entities consulted, depth used)
        self._bases_only = False  # evaluating class bases (``ClassModel._bases_memo``)
        self.facts_seen_max = _FACTS_SEEN_MAX  # files whose facts ``_facts`` keeps at once
        # a bounded memo (a full build sets ``memo_budget``: entries a generation): see ``_age_memo``
        self.memo_budget: int | None = None
        self._old_memo: dict = {}
        self._interned: dict[frozenset, tuple[frozenset, list]] = {}  # deps set -> (itself, memo keys)
        # whether ``_interned`` lists the memo keys each deps set serves (what ``invalidate``
        # forgets by). A process that never invalidates (a full build's resolution child) turns
        # it off: ``_age_memo`` then starts the interning afresh instead of rebuilding it over
        # every kept entry (~3% of a resolution's time), and ``invalidate`` forgets everything
        self.memo_keys = True
        # (key, stack depth) -> (value, entities, depth used, cuts) of the evaluations that did
        # not settle (``_scc``): emptied whenever what they read may change (facts, a memoised
        # value forgotten, a parameter value, the subclass relation) and with each memo generation
        self._unsettled: dict[tuple, tuple] = {}
        # entity -> interned deps sets naming it; None until the first ``invalidate`` needs it
        # (a full build never invalidates: indexing every deps set cost it up to a sixth of its time)
        self._sets_with: dict[tuple, list[frozenset]] | None = None
        self._kinds: dict[str, dict[str, str]] = {}  # file -> symbol qual -> kind (first symbol)
        self._units: dict[str, list] = {}  # file -> entity (file, unit) of each scope (None for the module)
        self._deps: set[tuple] = set()
        self._stack: list = []  # evaluations in progress (``_scc``), outermost first
        self._on_stack: dict = {}  # key -> its index in ``_stack``
        self._low = 0  # lowest stack index a cycle of the current evaluation reached
        self._back: set = set()  # keys a cycle came back to in their current pass
        self._prov: dict = {}  # key -> its value in the previous pass of its component
        self._members: dict = {}  # key -> (value, low, deps, depth) of component members this pass
        self._member_order: list = []
        self._changed = False  # a provisional value moved in the current pass of a component
        self._cut = 0
        self._sub = 0  # deepest evaluation below the current one
        self.param_in: dict[tuple, set] = {}  # (file, function qual) -> flows into its parameters
        self._widened: dict[tuple, set] = {}  # functions widened in this resolve_fixpoint (``_widen``)
        self._change_count: dict[tuple, int] = {}
        self._flows_in: dict[tuple, tuple] = {}  # (parameters, what to evaluate) per function (``_plan``)
        # the last resolve_fixpoint: rounds, seconds of the first and of the later rounds, and how
        # many files the later rounds resolved again
        self.flow_stats: dict = {"rounds": 0, "first_s": 0.0, "more_s": 0.0, "again": 0}
        self.pval: dict[tuple, dict] = {}  # (file, qual) -> {parameter: value} from the flows into it
        self.pdeps: dict[tuple, frozenset] = {}  # (file, qual) -> entities its value consulted
        self._pdep_rev: dict[tuple, set] = {}  # entity -> functions whose parameter values consulted it
        self._preaders: dict[tuple, set] = {}  # function -> functions whose values read one of its parameters
        self._pending: set[tuple] = set()  # functions whose parameter values must be recomputed
        self.pval_changed: set[tuple] = set()  # functions whose parameter values changed (caller clears)
        self._stores: dict[str, list] = {}  # file -> [(scope, store)] of its container stores
        self._fixtures: dict[str, dict] = {}  # file -> {fixture name: [function scope index]}
        self._facts_seen: dict = {}  # file -> its facts as last read (``_facts``)
        self._subclasses: dict[tuple, list] | None = None  # class -> its direct workspace subclasses
        # (the relation they were found in, (file, class, attribute) -> where subclasses define
        # it, interned entity sets): ``ClassModel._subclass_definitions``
        self._subclass_defs: tuple = (None, {}, {})
        self._class_outlines: dict[str, dict] = {}  # file -> class -> ``ClassModel._class_outline``
        self._inherits: dict[str, tuple] = {}  # file -> (its (class, base) pairs, entities consulted)
        # file -> the files whose ``_inherits`` entities include one of it (a superset; None until
        # first needed: ``ClassModel._inherit_consulters_index``)
        self._inherit_consulters: dict[str, set[str]] | None = None
        self._inherits_stale: set[str] = set()  # files whose pairs must be computed again
        self._checked_everyone: tuple | None = None  # (files with facts, their order): ``_ensure_subclasses``

    # -- keeping the resolver across edits -------------------------------------------------------
    def set_facts(self, rel: str, facts: PyFacts | None) -> None:
        """Replace one file's facts (None: it has none). Memoised values stay valid only for
        the entities that did not change; call ``invalidate`` with those that did."""
        if facts is None:
            self.facts.pop(rel, None)
        else:
            self.facts[rel] = facts
        self._kinds.pop(rel, None)
        self._units.pop(rel, None)
        self._stores.pop(rel, None)
        self._fixtures.pop(rel, None)
        self._facts_seen.pop(rel, None)
        self._subclass_defs = (None, {}, {})
        self._class_outlines.pop(rel, None)
        self._unsettled = {}
        self._inherits_stale.add(rel)

    def invalidate(self, entities) -> int:
        """Forget every memoised value that consulted one of ``entities`` (see
        ``changed_entities``), and recompute (in the next ``resolve_fixpoint``) the parameter
        values that did. Returns how many memoised values were forgotten. The others stay:
        re-resolving a file after an edit elsewhere re-evaluates only what the edit can affect."""
        n = 0
        entities = list(entities)
        self._unsettled = {}
        self.invalidate_params(entities)
        if not self.memo_keys:  # which entries consulted them is not known: all of them go
            n = len(self.memo) + len(self._old_memo)
            self.memo, self._old_memo, self._interned, self._sets_with = {}, {}, {}, None
            return n
        if self._sets_with is None:
            self._sets_with = self._index_deps_sets(self._interned)
        for f in entities:
            for fs in self._sets_with.pop(f, ()):
                ent = self._interned.pop(fs, None)
                if ent is None:
                    continue  # already dropped through another of its files
                for key in ent[1]:
                    for memo in (self.memo, self._old_memo):
                        hit = memo.get(key)
                        if hit is not None and hit[1] is ent[0]:
                            del memo[key]
                            n += 1
        return n

    def _from_old_memo(self, key: tuple):
        """The memo entry of ``key`` from the previous generation (moved back into the memo),
        or None."""
        hit = self._old_memo.pop(key, None)
        if hit is not None:
            self.memo[key] = hit
        return hit

    def _age_memo(self) -> None:
        """Start a new generation of the memo (``memo_budget`` set, more entries than that
        since the last aging): entries not used since the last aging are dropped, the others
        wait in ``_old_memo`` and move back when used. A memoised value is what evaluating it
        again gives: class bases, which are evaluated without the subclass relation, are
        memoised apart and thrown away (``ClassModel._bases_memo``), so nothing needs to stay
        for good and a bounded memo binds exactly as an unbounded one. The invalidation index
        (once built) is rebuilt over what is kept. Only between files (no evaluation in
        progress)."""
        old = self.memo
        self.memo, self._old_memo = {}, old
        self._unsettled = {}  # (bounded with the memo, as the walks of subclass hierarchies)
        self._subclass_defs = (None, {}, {})
        if not self.memo_keys:  # nothing to look memo keys up by: the sets are interned anew
            self._interned, self._sets_with = {}, None
            return
        interned: dict = {}
        for key, hit in old.items():
            fs = hit[1]
            ent = interned.get(fs)
            if ent is None:
                ent = interned[fs] = (fs, [])
            elif ent[0] is not fs:  # one object per deps set, as ``invalidate`` expects
                old[key] = (hit[0], ent[0], hit[2])
            ent[1].append(key)
        self._interned = interned
        if self._sets_with is not None:
            self._sets_with = self._index_deps_sets(interned)

    @staticmethod
    def _index_deps_sets(interned: dict) -> dict[tuple, list[frozenset]]:
        """Entity -> the interned deps sets (keys of ``interned``) that name it, in the order
        they were interned: what ``invalidate`` looks memoised values up by."""
        sets_with: dict[tuple, list[frozenset]] = {}
        for fs in interned:
            for f in fs:
                sets_with.setdefault(f, []).append(fs)
        return sets_with

    def _remember(self, key: tuple, val, deps: set[tuple], used: int) -> None:
        fs = frozenset(deps)
        ent = self._interned.get(fs)
        if ent is None:  # deps sets are few and shared: intern them (memory), index them by file
            ent = self._interned[fs] = (fs, [])
            if self._sets_with is not None:
                for f in fs:
                    self._sets_with.setdefault(f, []).append(fs)
        if self.memo_keys:
            ent[1].append(key)
        self.memo[key] = (val, ent[0], used)

    # -- evaluation -----------------------------------------------------------------------
    def _facts(self, rel: str) -> PyFacts | None:
        facts = self._facts_seen.get(rel, _UNSEEN)
        if facts is _UNSEEN:  # ``self.facts`` may decode on use (``LazyFacts``): once per file
            if len(self._facts_seen) >= self.facts_seen_max:
                self._facts_seen.clear()  # bounded: a full build decodes a bounded number at once
            facts = self._facts_seen[rel] = self.facts.get(rel)
        if facts is None:
            self._deps.add((rel, HAS_FACTS))
        return facts

    def _scope_entities(self, rel: str, facts: PyFacts) -> list:
        ents = self._units.get(rel)
        if ents is None:
            ents = self._units[rel] = [None] + [(rel, _unit(sc.qual)) for sc in facts.scopes[1:]]
        return ents

    def _kind(self, rel: str, facts: PyFacts, qual: str) -> str | None:
        self._deps.add((rel, _unit(qual)))
        kinds = self._kinds.get(rel)
        if kinds is None:
            kinds = self._kinds[rel] = {}
            for s in facts.symbols:
                kinds.setdefault(s.qual, s.kind)
        return kinds.get(qual)

    def ev(self, rel: str, si: int, ref: tuple):
        """Value of ``ref`` evaluated in scope ``si`` of file ``rel`` (None = unknown; ``BOTTOM``
        = no value, only for a binding that can hold nothing but itself).

        Results are memoised with the entities they consulted and the evaluation depth they
        needed; a memoised result is reused only where a fresh evaluation would fit in
        ``_MAX_DEPTH`` too. Evaluations that depend on each other (``x = f(x)``, a container
        storing its own items) are solved together (``_scc``), so what a call binds to never
        depends on what was evaluated before it (an incremental graph equals a full rebuild)."""
        t = ref[0]
        if t in _CONSTANT_REFS:  # values that consult nothing: not worth a memo entry
            if t == "lit":
                return ("builtin", ref[1])
            if t == "d":
                return ("dict", rel, si, ref[1], ref[2] if len(ref) > 2 else None, ref[3] if len(ref) > 3 else None)
            if t == "l":
                return ("seq", rel, si, ref[1], ref[2], ref[3], ref[4] if len(ref) > 4 else None)
            return ("propv", rel, ref[1])
        key = (rel, si, ref)
        hit = self.memo.get(key)  # the memoised case of ``_scc``, inlined: most evaluations
        if hit is None and self._old_memo:
            hit = self._from_old_memo(key)
        if hit is not None and len(self._stack) + hit[2] <= _MAX_DEPTH:
            self._deps |= hit[1]
            if hit[2] > self._sub:
                self._sub = hit[2]
            return hit[0]
        return self._scc_unmemoised(key, self._ev, rel, si, ref)

    def _scc(self, key, compute, *args):
        """Evaluate ``compute(*args)`` for ``key`` with memoisation and cycles solved as strongly
        connected components (Tarjan's low links): a key met again while it is being evaluated
        gives its value so far (``BOTTOM`` first); the evaluation where the cycle closes (the
        component's root) is repeated until its value stops changing, and only then are the
        root and every member of its component memoised, with the component's entities. The
        result is the least fixpoint of the component's equations, whatever the entry point."""
        hit = self.memo.get(key)
        if hit is None and self._old_memo:
            hit = self._from_old_memo(key)
        if hit is not None:
            val, deps, used = hit
            if len(self._stack) + used <= _MAX_DEPTH:
                self._deps |= deps
                if used > self._sub:
                    self._sub = used
                return val
        return self._scc_unmemoised(key, compute, *args)

    def _scc_unmemoised(self, key, compute, *args):
        """``_scc`` for a ``key`` whose memo entry is missing or too deep to reuse here (what
        ``ev`` has looked up already)."""
        idx = self._on_stack.get(key)
        if idx is not None:  # a cycle back to an evaluation in progress
            if idx < self._low:
                self._low = idx
            self._back.add(key)
            return self._prov.get(key, BOTTOM)
        done = self._members.get(key)
        if done is not None:  # finished in this pass of its component's root
            val, low, deps, used = done
            if low < self._low:
                self._low = low
            self._deps |= deps
            if used > self._sub:
                self._sub = used
            return val
        if len(self._stack) >= _MAX_DEPTH:
            self._cut += 1
            return None
        my = len(self._stack)
        again = self._unsettled.get((key, my))
        if again is not None:  # evaluated here before and did not settle: the same again
            val, deps, used, cut = again
            self._deps |= deps
            self._cut += cut
            if used > self._sub:
                self._sub = used
            return val
        self._stack.append(key)
        self._on_stack[key] = my
        saved_deps, saved_cut, saved_sub, saved_low = self._deps, self._cut, self._sub, self._low
        saved_changed = self._changed
        start = len(self._member_order)
        deps: set = set()
        cut = used = 0
        low = my
        changed = False
        try:
            for _ in range(_MAX_SCC_PASSES):
                self._deps, self._cut, self._sub, self._low, self._changed = set(), 0, 0, my, False
                val = compute(*args)
                deps, cut, used, low, changed = self._deps, self._cut, self._sub + 1, self._low, self._changed
                if key in self._back:  # reached again through a cycle: what the next pass starts from
                    if self._prov.get(key, BOTTOM) != val:
                        changed = True
                    self._prov[key] = val
                if low < my or not changed:
                    break  # a member (its root decides) or a root whose component settled
                for m in self._member_order[start:]:  # another pass over the component
                    self._members.pop(m, None)
                del self._member_order[start:]
            else:
                cut += 1  # did not settle: not memoised
        finally:
            self._stack.pop()
            del self._on_stack[key]
            saved_deps |= deps  # in place: the caller's set
            self._deps = saved_deps
            self._cut = saved_cut + cut
            self._sub = used if used > saved_sub else saved_sub
            self._low = low if low < saved_low else saved_low
            self._changed = saved_changed or (changed and low < my)
        if low < my:  # a member of a component whose root is further down
            self._members[key] = (val, low, deps, used)
            self._member_order.append(key)
            return val
        # the root of a settled component: it and its members are exact now
        order = self._member_order
        if len(order) > start:
            members = order[start:]
            del order[start:]
            for m in members:
                mval = self._members.pop(m)[0]
                if not cut:
                    self._remember(m, mval, deps, used)
            for m in members:
                self._prov.pop(m, None)
                self._back.discard(m)
        if self._prov:
            self._prov.pop(key, None)
        if self._back:
            self._back.discard(key)
        if not cut:
            self._remember(key, val, deps, used)
        else:
            self._unsettled[(key, my)] = (val, frozenset(deps), used, cut)
        return val

    @staticmethod
    def combine(values: list):
        if len(values) == 1:  # the common case: one binding (what the loop below gives it)
            v = values[0]
            if v is not None and v[0] != "union" and v != BOTTOM:
                return v
        out: dict = {}  # members in first-seen order, deduplicated in linear time
        unknown = False
        bottom = False
        for v in values:
            if v is None:
                unknown = True
            elif v == BOTTOM:
                bottom = True
            elif v[0] == "union":
                for m in v[1]:
                    out[m] = None
                unknown = unknown or v[2]
            else:
                out[v] = None
        out = list(out)
        if not out:
            return BOTTOM if bottom and not unknown else None
        if len(out) == 1 and not unknown:
            return out[0]
        return ("union", tuple(out), unknown)

    def _ev(self, rel: str, si: int, ref: tuple):
        t = ref[0]
        if t == "n":
            return self.lookup_name(rel, si, ref[1])
        if t == "a":
            base = self.ev(rel, si, ref[1])
            return BOTTOM if base == BOTTOM else self.attr_of(base, ref[2])
        if t == "c":
            f = self.ev(rel, si, ref[1])
            if f == BOTTOM:
                return BOTTOM
            if ref[2] != UNKNOWN and f is not None and f[0] == "sym" and f[3] in ("function", "method"):
                got = self._passed_through(f, rel, si, ref)
                if got is not None:
                    return got
            return self.call_result(f, rel, si, ref[2])
        if t == "lc":  # ``OrderedDict()``: an empty container if it is the library's class
            f = self.ev(rel, si, ref[1][1])
            if f is not None and f[0] == "ext" and f[1] in LIBRARY_CONTAINER_CLASSES:
                return self.ev(rel, si, ref[2])
            return BOTTOM if f == BOTTOM else self.call_result(f, rel, si, ref[1][2])
        if t == "s":
            base = self.ev(rel, si, ref[1])
            k = ref[2]
            return self.items(base, key=k if isinstance(k, str) else None,
                              index=k if isinstance(k, int) else ("?" if k is None else None))
        if t == "p":
            return self._param(rel, si, ref)
        if t == "it":
            return self.items(self.ev(rel, si, ref[1]))
        if t == "ix":
            return self.items(self.ev(rel, si, ref[1]), index=ref[2])
        if t == "anv":
            # ``x: Flask = LocalProxy(...)``: the declared type where the value is unknown or external
            val = self.ev(rel, si, ref[1])
            if val is not None and val != BOTTOM and val[0] not in ("ext", "builtin"):
                return val
            ann = self.ev(rel, si, ref[2])
            return ann if ann is not None else val
        if t == "dec":
            return self._decorated(rel, si, ref)
        if t == "u":
            return self.combine([self.ev(rel, si, r) for r in ref[1]])
        if t == "def":
            facts = self._facts(rel)
            kind = (self._kind(rel, facts, ref[1]) or "function") if facts else "function"
            return ("sym", rel, ref[1], kind)
        if t == "imod":
            m = self.find_module(ref[1], rel)
            return m if m[0] in ("mod", "ext") else None
        if t == "ifrom":
            m = self.find_module(ref[1], rel)
            if m[0] == "mod":
                return self.module_attr(m, ref[2])
            if m[0] == "ext":
                return ("ext", f"{m[1]}.{ref[2]}")
            return None
        if t == "ann":
            v = self.ev(rel, si, ref[1])
            if v is not None and v[0] == "sym" and v[3] == "class":
                return ("inst", v[1], v[2])
            if v is not None and v[0] in ("ext", "builtin"):
                return _ext(v[1], "()")  # an instance of an external type
            return None
        return None

    def _decorated(self, rel: str, si: int, ref: tuple):
        """A decorated definition: what its decorators return, applied innermost first. A
        decorator that returns its argument, or a function made with ``functools.wraps``, keeps
        the definition; one outside the workspace (or whose result is unknown) is taken to keep
        it too (``lru_cache``, ``app.route``: calls reach the function as written)."""
        v = self.ev(rel, si, ref[2])
        for dref in reversed(ref[1]):
            d = self.ev(rel, si, dref)
            got = self._apply_decorator(d, v)
            if got is not None:
                v = got
        return v

    def _apply_decorator(self, d, v):
        if d is None or d[0] != "sym" or d[3] not in ("function", "method"):
            if d is not None and d[0] == "sym" and d[3] == "class":
                return ("inst", d[1], d[2])  # a class used as a decorator: its instance
            return None
        facts = self._facts(d[1])
        fsi = facts.scope_of.get(d[2]) if facts is not None else None
        if fsi is None:
            return None
        self._deps.add((d[1], _unit(d[2])))
        sc = facts.scopes[fsi]
        first = next((n for n, k in sc.params if k == "pos"), None)
        out = []
        for r in sc.returns:
            if r[0] == "p" and r[2] == first and r[1] == d[2]:
                out.append(v)  # returns its argument
                continue
            w = self.ev(d[1], fsi, r)
            if w is None or w[0] in ("ext", "builtin"):
                w = v  # ``update_wrapper(wrapper, f)``, ``cast(F, …)``: taken to keep the function
            elif w[0] == "sym" and w[3] in ("function", "method"):
                wf = self._facts(w[1])
                wsi = wf.scope_of.get(w[2]) if wf is not None else None
                if wsi is not None and "wraps" in wf.scopes[wsi].decos:
                    w = v  # functools.wraps: calls of the name are calls of the function as written
            out.append(w)
        if not out:
            return None
        return self.combine(out)

    def lookup_name(self, rel: str, si: int, name: str):
        facts = self._facts(rel)
        if facts is None:
            return None
        deps = self._deps
        ents = self._units.get(rel) or self._scope_entities(rel, facts)
        idx, first = si, True
        while idx >= 0:
            sc = facts.scopes[idx]
            deps.add(ents[idx] if idx else (rel, name))
            if idx and name in sc.globals:  # ``global`` at module level changes nothing
                idx = 0
                first = True
                continue
            if (first or sc.kind != "class") and name in sc.names:
                return self.combine([self.ev(rel, idx, r) for r in sc.names[name]])
            if sc.self_name == name and sc.class_qual is not None:
                if sc.self_kind == "class":
                    return ("sym", rel, sc.class_qual, "class")
                return ("inst", rel, sc.class_qual)
            first = False
            idx = sc.parent
        v = self._star_lookup(rel, facts, name)
        if v is not None:
            return v
        if name in _BUILTINS:
            return ("builtin", name)
        return None

    def attr_of(self, base, attr: str):
        if base is None:
            return None
        if base == BOTTOM:
            return BOTTOM
        t = base[0]
        if t == "mod":
            return self.module_attr(base, attr)
        if t == "sym":
            if base[3] == "class":
                return self.class_attr(base[1], base[2], attr, via_instance=False)
            return None
        if t == "inst":
            return self.class_attr(base[1], base[2], attr, via_instance=True)
        if t == "super":
            return self.class_attr(base[1], base[2], attr, via_instance=base[3], skip_first=True)
        if t == "ext":
            return _ext(base[1], "." + attr)
        if t == "builtin":
            return _ext(f"builtins.{base[1]}", "." + attr)
        if t == "dict":
            if attr in ("values", "items", "get", "pop", "setdefault", "copy"):
                return ("dmeth", base, attr)
            return ("ext", f"builtins.dict.{attr}")
        if t == "seq":
            if attr in ("pop", "copy"):
                return ("dmeth", base, attr)
            return ("ext", f"builtins.{base[4]}.{attr}")
        if t == "union":
            return self.combine([self.attr_of(m, attr) for m in base[1]] + ([None] if base[2] else []))
        return None

    def _enclosing_method(self, rel: str, si: int):
        facts = self._facts(rel)
        idx = si
        while facts is not None and idx >= 0:
            sc = facts.scopes[idx]
            if idx:
                self._deps.add(self._scope_entities(rel, facts)[idx])
            if sc.class_qual is not None:
                return sc
            idx = sc.parent
        return None

    def _passed_through(self, f, rel: str, si: int, ref: tuple):
        """What call ``ref`` (``("c", func, arg0)``) of function ``f`` returns when ``f`` returns
        the parameter that ``arg0`` is passed to (``def ensure_sync(self, func): … return
        func``): at this call, that return is ``arg0`` itself, not everything any call site
        passes (what the parameter holds). Other returns of ``f`` are evaluated as usual. None
        when ``f`` does not return its first argument unchanged, or when it is not known
        whether the call passes the instance first (``Class.method(obj, x)``)."""
        facts = self._facts(f[1])
        fsi = facts.scope_of.get(f[2]) if facts is not None else None
        if fsi is None:
            return None
        sc = facts.scopes[fsi]
        if sc.yields or not sc.returns:
            return None
        pos = [n for n, k in sc.params if k == "pos"]
        if sc.self_name is not None and pos and pos[0] == sc.self_name:
            if ref[1][0] != "a":
                return None
            if sc.self_kind == "instance":
                base = self.ev(rel, si, ref[1][1])
                members = base[1] if base is not None and base[0] == "union" else (base,)
                if not members or any(m is None or m[0] not in ("inst", "super") for m in members):
                    return None  # ``Class.method(obj, x)``: ``arg0`` is the instance
            pos = pos[1:]
        if not pos:
            return None
        name = pos[0]
        own = sc.names.get(name)
        if own is None or len(own) != 1 or own[0][0] != "p":
            return None  # the parameter is rebound in the body
        self._deps.add((f[1], _unit(f[2])))
        passed = [r for r in sc.returns if r == ("n", name)]
        if not passed:
            return None
        vals = [self.ev(rel, si, ref[2])]
        vals += [self.ev(f[1], fsi, r) for r in sc.returns if r != ("n", name)]
        return self.combine(vals)

    def call_result(self, f, rel: str, si: int, arg0: tuple):
        if f is None:
            return None
        if f == BOTTOM:
            return BOTTOM
        t = f[0]
        if t == "sym":
            if f[3] == "class":
                return ("inst", f[1], f[2])
            if f[3] in ("function", "method"):
                facts = self._facts(f[1])
                if facts is None:
                    return None
                self._deps.add((f[1], _unit(f[2])))  # its body scope and returns are in its unit
                fsi = facts.scope_of.get(f[2])
                if fsi is None:
                    return None
                sc = facts.scopes[fsi]
                if sc.yields:
                    return ("gen", f[1], fsi)
                rets = sc.returns
                if not rets:
                    return None
                return self.combine([self.ev(f[1], fsi, r) for r in rets])
            return None
        if t == "dmeth":
            c, m = f[1], f[2]
            if m == "copy":
                return c
            if c[0] == "seq":
                return self.items(c)
            if m == "values":
                return _nested(("bag", (self.items(("dvals", c)),)))
            if m == "items":
                return _nested(("bag", (("tup", (None, self.items(("dvals", c)))),)))
            return self.items(("dvals", c))  # get, pop, setdefault
        if t == "builtin" and f[1] in _SEQ_BUILTINS and arg0 != UNKNOWN:
            return _nested(("bag", (self.items(self.ev(rel, si, arg0)),)))
        if t == "builtin" and f[1] == "enumerate" and arg0 != UNKNOWN:
            return _nested(("bag", (("tup", (("builtin", "int"), self.items(self.ev(rel, si, arg0)))),)))
        if t == "ext" and f[1] == "typing.cast" and arg0 != UNKNOWN:
            return self.ev(rel, si, ("ann", arg0))
        if t == "builtin" and f[1] == "super":
            sc = self._enclosing_method(rel, si)
            if sc is None:
                return None
            return ("super", rel, sc.class_qual, sc.self_kind == "instance")
        if t == "ext" and f[1] == "functools.partial":
            inner = self.ev(rel, si, arg0)
            return _nested(("partial", inner)) if inner is not None else None
        if t == "ext" and f[1] in _WEAK_REFERENCES and arg0 != UNKNOWN:
            # ``weakref.ref(app)()`` is ``app`` (or None); ``weakref.proxy(app)`` acts as ``app``
            inner = self.ev(rel, si, arg0)
            if inner is None or f[1] == "weakref.proxy":
                return inner
            return _nested(("wref", inner))
        if t == "wref":
            return f[1]
        if t in ("ext", "builtin"):
            return _ext(f[1], "()")  # what external code returns is external
        if t == "union":
            return self.combine([self.call_result(m, rel, si, arg0) for m in f[1]] + ([None] if f[2] else []))
        return None
