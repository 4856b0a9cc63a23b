"""Value flow between files for the Python resolver: parameters hold what the workspace's call
sites pass (``Resolver.pval``), computed to a fixpoint with the resolution of calls
(``resolve_fixpoint``), with delete-and-re-derive after an edit removed a flow and widening so
that the fixpoint always ends."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from orbit_lsp.index.py_values import (
    MAX_FLOW_ROUNDS,
    MAX_PARAM_CHANGES,
    MAX_PARAM_PASSES,
    PVAL,
    TOO_MANY,
    _unit,
    _workspace_part,
)
from orbit_lsp.index.py_parallel import resolve_files
from orbit_lsp.index.py_facts import UNKNOWN

if TYPE_CHECKING:
    from orbit_lsp.index.py_edges import FileEdges


class ParameterFlow:
    """Mixed into ``resolve.Resolver`` (whose state and evaluation, ``ev``, it uses)."""

    def apply_flows(self, old: dict | None, new: dict | None, pending: bool = True) -> set[tuple]:
        """Replace one file's flows (``FileEdges.flows``: ``old`` by ``new``) in ``param_in``.
        Returns the functions ``(file, qual)`` whose incoming flows changed; their parameter
        values are recomputed by the next ``resolve_fixpoint``."""
        old, new = old or {}, new or {}
        changed = set()
        for k in old.keys() | new.keys():
            a, b = old.get(k, ()), new.get(k, ())
            if a == b:
                continue
            cur = self.param_in.setdefault(k, set())
            cur.difference_update(a)
            cur.update(b)
            if not cur:
                del self.param_in[k]
            self._flows_in.pop(k, None)
            changed.add(k)
        if pending:
            self._pending |= changed
        return changed

    def recompute_params(self) -> None:
        """Recompute every parameter value in the next ``resolve_fixpoint`` (the module table
        changed: values may name modules that are gone)."""
        self._pending |= set(self.pval) | set(self.param_in)

    def seed_params(self, values) -> None:
        """Parameter values computed by an earlier resolver (``param_values``): a resolver that
        starts from a kept graph needs them to bind as that graph was bound."""
        for key, (val, deps) in values:
            self._set_pval(key, val, deps)

    def param_values(self, keys=None):
        """``((file, qual), (values by parameter name, entities consulted))`` of every function
        with a parameter value, or of ``keys`` (absent ones: ``(key, None)``)."""
        if keys is None:
            return [(k, (v, self.pdeps.get(k, frozenset()))) for k, v in self.pval.items()]
        return [(k, (self.pval[k], self.pdeps.get(k, frozenset())) if k in self.pval else None) for k in keys]

    def _set_pval(self, key: tuple, val: dict | None, deps: frozenset) -> None:
        self._unsettled = {}  # (evaluations that did not settle may have read the value)
        if deps and self.pdeps.get(key) == deps:  # the same entities consulted: indexed already
            if val is None:
                self.pval.pop(key, None)
            else:
                self.pval[key] = val
            return
        readers = self._preaders
        for e in self.pdeps.pop(key, ()):
            ks = self._pdep_rev.get(e)
            if ks is not None:
                ks.discard(key)
            if e[0] == PVAL:
                ks = readers.get(e[1:3])
                if ks is not None:
                    ks.discard(key)
        if val is None:
            self.pval.pop(key, None)  # no workspace value (yet): what it consulted is still kept,
        else:  # so it is computed again when that changes
            self.pval[key] = val
        if not deps:
            return
        self.pdeps[key] = deps
        rev = self._pdep_rev
        for e in deps:
            ks = rev.get(e)
            if ks is None:
                rev[e] = {key}
            else:
                ks.add(key)
            if e[0] == PVAL:
                readers.setdefault(e[1:3], set()).add(key)

    @staticmethod
    def _pval_entities(key: tuple, old: dict | None, new: dict | None) -> set[tuple]:
        """Entities ``(PVAL, file, qual, parameter)`` of function ``key`` whose values differ
        between ``old`` and ``new``: what an evaluation that read them may now get otherwise."""
        old, new = old or {}, new or {}
        return {(PVAL,) + key + (n,) for n in old.keys() | new.keys() if old.get(n) != new.get(n)}

    def _compute_pval(self, key: tuple) -> tuple[dict | None, frozenset]:
        """What each parameter of function ``key`` receives from the flows into it: {name:
        value} (None: no flows), and the entities the arguments' evaluation consulted."""
        flows = self.param_in.get(key)
        rel, qual = key
        saved, self._deps = self._deps, set()
        try:
            facts = self._facts(rel)
            self._deps.add((rel, _unit(qual)))  # its parameters
            fsi = facts.scope_of.get(qual) if facts is not None and flows else None
            if fsi is None:
                return None, frozenset(self._deps)
            params = facts.scopes[fsi].params
            plan = self._flows_in.get(key)
            if plan is None or plan[0] is not params:
                plan = self._flows_in[key] = (params, self._plan(params, flows))
            got: dict[str, list] = {}
            ev = self.ev
            for name, frel, fsi_, r in plan[1]:
                v = ev(frel, fsi_, r) if r is not UNKNOWN else None
                vs = got.get(name)
                if vs is None:
                    got[name] = [v]
                else:
                    vs.append(v)
            # what a parameter receives from outside the workspace binds nothing: one value for all
            # only workspace values are kept: a parameter that receives nothing but external
            # values, literals or unknowns is no better known than one never called (``_param``
            # then answers unknown, as without flows), and changes among those never propagate
            kept = {}
            for n, vs in got.items():
                v = _workspace_part(self.combine(vs))
                if v is not None:
                    kept[n] = v
            return kept or None, frozenset(self._deps)
        finally:
            self._deps = saved

    @classmethod
    def _plan(cls, all_params, flows) -> tuple:
        """What ``_compute_pval`` evaluates for a function with parameters ``all_params`` and
        incoming ``flows``: ``(parameter name, file, scope, ref)`` per argument passed, in a fixed
        order (flows sorted, so a union's members come in the same order whatever came first).
        Literal arguments are left out: they never hold a workspace value, and only workspace
        values are kept (``_workspace_part``)."""
        params = [n for n, k in all_params if k in ("pos", "kwonly")]
        positional = [n for n, k in all_params if k == "pos"]
        out = []
        for flow in sorted(flows, key=repr):
            for name in params:
                r = cls._arg_for(positional, name, flow)
                if r is None or (r[0] == "lit" and r is not UNKNOWN):
                    continue
                out.append((name, flow[0], flow[1], UNKNOWN if r == UNKNOWN else r))
        return tuple(out)

    @staticmethod
    def _member_set(v) -> tuple[set, bool]:
        if v is None:
            return set(), True
        if v[0] == "union":
            return set(v[1]), v[2]
        return {v}, False

    def _grows(self, old: dict | None, new: dict | None) -> bool:
        """True when every value of ``old`` is still in ``new`` (parameter values only grew)."""
        if not old:
            return True
        if not new:
            return False
        for name, v in old.items():
            if name not in new:
                return False
            if new[name] == TOO_MANY:
                continue  # unknown holds every value
            if v == TOO_MANY:
                return False
            a, ua = self._member_set(v)
            b, ub = self._member_set(new[name])
            if not a <= b or (ua and not ub):
                return False
        return True

    def invalidate_params(self, entities) -> None:
        """Parameter values whose evaluation consulted ``entities`` are recomputed by the next
        ``resolve_fixpoint``."""
        for e in entities:
            self._pending |= self._pdep_rev.get(e, set())

    def resolve_fixpoint(self, rels, previous: Callable[[str], FileEdges | None], everyone,
                         progress: Callable[[int, int, str], None] | None = None) -> dict[str, FileEdges]:
        """Resolve ``rels``, then follow the value flows to a fixpoint.

        Parameter values live in a table (``pval``): evaluating a parameter reads it (entity
        ``(PVAL, file, qual, parameter)``) and never recurses into call sites. Each round resolves the
        files to resolve, updates the flows they contribute, recomputes the parameter values
        whose flows or consulted entities changed, and re-resolves the files that consulted a
        value that changed. Values only grow, except after an edit removed a flow or a value:
        then every value that depended on it, transitively, is reset and derived again from the
        flows that remain (delete and re-derive), so the result equals a build from scratch.

        ``previous(rel)``: the edges whose flows ``param_in`` holds now (None: none);
        ``everyone``: every file with facts. Returns the new edges of every file resolved."""

        out: dict[str, FileEdges] = {}
        todo = set(rels)
        rederiving: set[tuple] = set()  # values reset in this run: they only grow from here
        stats = self.flow_stats = {"rounds": 0, "first_s": 0.0, "more_s": 0.0, "again": 0, "widened": 0}
        self._widened, self._change_count = {}, {}  # see ``_widen``
        self._ensure_subclasses(everyone)
        for round_no in range(MAX_FLOW_ROUNDS):
            if not todo and not self._pending:
                break
            t = time.perf_counter()
            fresh = resolve_files(self, sorted(todo), self.workers, progress if round_no == 0 else None)
            for rel, e in fresh.items():
                before = out[rel] if rel in out else previous(rel)
                self.apply_flows(before.flows if before is not None else None, e.flows)
            out.update(fresh)
            if round_no:
                stats["again"] += len(todo)
            if not self.value_flow:  # one pass: nothing reads parameter values
                self._pending = set()
                stats["rounds"] += 1
                stats["first_s"] += time.perf_counter() - t
                break
            # parameter values whose flows or inputs changed, propagated among themselves to a
            # fixpoint before any file is resolved again: a value passed on through a chain of
            # parameters arrives in this round, not one hop per round
            changed, ents = self._propagate_params(rederiving)
            todo = set()
            if ents:
                for rel in everyone:
                    e = out[rel] if rel in out else previous(rel)
                    if e is None or not e.deps.isdisjoint(ents):
                        todo.add(rel)
            self.pval_changed |= changed
            stats["rounds"] += 1
            stats["first_s" if round_no == 0 else "more_s"] += time.perf_counter() - t
        stats["widened"] = len(self._widened)
        return out

    def _propagate_params(self, rederiving: set[tuple]) -> tuple[set[tuple], set[tuple]]:
        """Recompute the pending parameter values, and those that read a value that changed,
        until none changes (at most ``MAX_PARAM_PASSES`` passes; what is still pending then waits
        for the next round). A value that lost a member resets every value derived from it,
        which is then derived again (added to ``rederiving``). Memoised evaluations that read a
        changed value are forgotten. Returns the functions whose values changed, and the
        entities ``(PVAL, file, qual, parameter)`` whose values differ from before the call
        (what a file resolved before it read and may now read otherwise)."""
        changed_all: set[tuple] = set()
        before: dict[tuple, dict | None] = {}  # value of each function touched, before the call
        for _ in range(MAX_PARAM_PASSES):
            if not self._pending:
                break
            changed, shrunk = set(), set()
            lost: set[tuple] = set()  # entities whose values changed in this pass
            batch = sorted(self._pending)
            self._pending = set()
            for key in batch:
                old = self.pval.get(key)
                if key not in before:
                    before[key] = old
                val, deps = self._compute_pval(key)
                val = self._widened_value(key, val)
                own = (PVAL,) + key
                moves, moved = 0, set()  # changes made while settling, and the parameters they changed
                for _ in range(MAX_FLOW_ROUNDS):
                    # a function that passes its own parameters on (recursion) reads its own
                    # value: settle it here
                    cur = self.pval.get(key)
                    if val == cur or not any(e[:3] == own for e in deps) or (
                            key not in rederiving and not self._grows(cur, val)):
                        break
                    self._set_pval(key, val, deps)
                    ents = self._pval_entities(key, cur, val)
                    moves += 1
                    moved |= {e[3] for e in ents}
                    self.invalidate(ents)
                    val, deps = self._compute_pval(key)
                    val = self._widened_value(key, val)
                if moves and val != self.pval.get(key):
                    moves += 1  # settling did not settle: the value moved on and comes back
                    moved |= {e[3] for e in self._pval_entities(key, self.pval.get(key), val)}
                else:
                    moves = 0
                val = self._widen(key, old, val, moves, moved)
                cur = self.pval.get(key)
                if val != old:
                    if key not in rederiving and not self._grows(old, val):
                        shrunk.add(key)
                    changed.add(key)
                if val != cur:
                    lost |= self._pval_entities(key, cur, val)
                self._set_pval(key, val, deps)
            if shrunk:  # delete and re-derive what depended on a lost value
                frontier = list(shrunk)
                reset = set(shrunk)
                while frontier:
                    k = frontier.pop()
                    for k2 in self._preaders.get(k, ()):
                        if k2 not in reset:
                            reset.add(k2)
                            frontier.append(k2)
                for k in reset - shrunk:
                    if k not in before:
                        before[k] = self.pval.get(k)
                    lost |= self._pval_entities(k, self.pval.get(k), None)
                    self._set_pval(k, None, frozenset())
                    self._pending.add(k)
                changed |= reset
                rederiving |= reset
            if lost:  # forget what read them; values that read them are recomputed next pass
                self.invalidate(lost)
            changed_all |= changed
        ents: set[tuple] = set()
        for k, v in before.items():
            ents |= self._pval_entities(k, v, self.pval.get(k))
        return changed_all, ents

    def _widen(self, key: tuple, old: dict | None, val: dict | None, moves: int = 0,
               moved: set = frozenset()) -> dict | None:
        """Widening, so that the fixpoint ends: a function whose parameter values changed more
        than ``MAX_PARAM_CHANGES`` times in one ``resolve_fixpoint`` gets TOO_MANY for each
        parameter that changed, and keeps it for the rest of the run (values that are only
        partly monotone, e.g. through TOO_MANY read as unknown, could otherwise oscillate).
        ``moves``: changes made while settling a function that reads its own parameters which
        did not settle (its value went round and came back: ``1 -> 8 -> TOO_MANY -> 1``), and
        ``moved`` the parameters they changed; they count as changes too."""
        if key in self._widened or (val == old and not moves):
            return val
        n = self._change_count[key] = self._change_count.get(key, 0) + moves + (val != old)
        if n <= MAX_PARAM_CHANGES:
            return val
        old_, new_ = old or {}, val or {}
        names = {k for k in old_.keys() | new_.keys() if old_.get(k) != new_.get(k)} | set(moved)
        if not names:
            return val
        self._widened[key] = names
        return self._widened_value(key, val)

    def _widened_value(self, key: tuple, val: dict | None) -> dict | None:
        names = self._widened.get(key)
        if not names:
            return val
        out = dict(val or {})
        for k in names:
            out[k] = TOO_MANY
        return out

    @staticmethod
    def _arg_for(positional: list[str], name: str, flow: tuple):
        """The ref a call site (``flow``) passes for parameter ``name`` (``positional``: the
        function's positional parameter names): a ref, UNKNOWN (through ``*args``/``**kwargs``
        at the call), or None (not passed: its default applies)."""
        _, _, args, kwargs, skip = flow
        if name in positional and positional.index(name) >= skip:
            i = positional.index(name) - skip
            for j, a in enumerate(args):
                if a[0] == "*":
                    return UNKNOWN
                if j == i:
                    return a
        spread = False
        for k, r in kwargs:
            if k == name:
                return r
            if k is None:
                spread = True
        return UNKNOWN if spread else None

    def _param(self, rel: str, si: int, ref: tuple):
        """A parameter: what the workspace's call sites pass (``pval``), its default, its
        annotation and, for a test or a fixture, the fixture of its name (``fixture_value``)."""
        _, fqual, name, ann, default = ref
        facts = self._facts(rel)
        sc = facts.scopes[si]
        vals = []
        declared = self.ev(rel, si, ann) if ann != UNKNOWN else None
        if declared is not None:
            vals.append(declared)
        if default != UNKNOWN:
            vals.append(self.ev(rel, sc.parent, default))
        fixture = self.fixture_value(rel, si, name)
        if fixture is not None:
            vals.append(fixture)
        if not self.value_flow:
            return self.combine(vals) if vals else None
        self._deps.add((PVAL, rel, fqual, name))
        got = self.pval.get((rel, fqual))
        if got is not None and name in got:
            vals.append(got[name])  # TOO_MANY is a value: unknown for binding, passed on as such
        if not vals:
            return None
        value = self.combine(vals)
        if declared is not None and declared[0] == "inst":
            return _declared_precedence(value)
        return value


def _declared_precedence(value):
    """The value of a parameter annotated with a workspace class (``store: GraphStore``), as
    pyright's binder takes it: the declared type wins over what is not known of the values passed
    in. Whatever reaches the parameter is of that type, so an unknown part, an external value
    (a library's duck, a mock) or ``TOO_MANY`` adds nothing to the declared instance; the
    workspace values that flow in stay (a subclass's instance binds its override)."""
    if value[0] != "union":
        return value
    kept = tuple(m for m in value[1] if m != TOO_MANY and m[0] not in ("ext", "builtin"))
    return kept[0] if len(kept) == 1 else ("union", kept, False)
