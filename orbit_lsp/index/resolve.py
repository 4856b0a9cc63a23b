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
from dataclasses import dataclass, field
from functools import lru_cache

from orbit_lsp.index.py_classes import ClassModel
from orbit_lsp.index.py_containers import Containers
from orbit_lsp.index.py_fixtures import PytestFixtures
from orbit_lsp.index.py_flow import ParameterFlow
from orbit_lsp.index.py_modules import ModuleLookup, canonical_path  # noqa: F401 (re-exported: js_modules)
from orbit_lsp.index.py_values import (
    ALL_CLASSES,
    _MAX_DEPTH,
    BOTTOM,
    EXT_ANY,
    FIXTURES,
    HAS_FACTS,
    STARS,
    STORES,
    _ext,
    _nested,
    _unit,
)
from orbit_lsp.index.python import LIBRARY_CONTAINER_CLASSES, UNKNOWN, PyFacts, compact_pickle

_JS_EXTS = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")
_WEAK_REFERENCES = frozenset({"weakref.ref", "weakref.WeakMethod", "weakref.proxy"})
_BUILTINS = frozenset(dir(builtins)) | {"__name__", "__file__", "__doc__", "__spec__", "__path__",
                                         "__package__", "__loader__", "__builtins__", "__debug__",
                                         "__annotations__", "__dict__", "__module__", "__qualname__"}
STDLIB = frozenset(sys.stdlib_module_names)
if sys.getrecursionlimit() < 10_000:
    sys.setrecursionlimit(10_000)  # each evaluation level of _MAX_DEPTH uses a few frames


@lru_cache(maxsize=1)
def _distributions() -> dict[str, list[str]]:
    try:
        from importlib.metadata import packages_distributions

        return packages_distributions()
    except Exception:  # noqa: BLE001 - broken metadata in the environment must not stop indexing
        return {}


def package_info(top: str) -> tuple[str, bool, str]:
    """``(name, stdlib, dist)`` of a top-level import name; ``dist`` is the distribution name
    when the running environment knows it, else ``""``. A Node built-in (``node:fs``, from
    JS/TS files) is ``stdlib``; an npm package comes as ``npm:<name>`` (kept apart from Python
    names such as ``queue`` or ``test``): its name is ``<name>``, so is its ``dist``."""
    if top.startswith("node:"):
        return top, True, ""
    if top.startswith("npm:"):
        return top[4:], False, top[4:]
    dists = _distributions().get(top) or []
    return top, top in STDLIB, dists[0] if dists else ""


def module_name(rel: str, root_package: str = "") -> str:
    """Dotted module name of a workspace path: ``app/jenkins/build_tree.py`` ->
    ``app.jenkins.build_tree``; ``pkg/__init__.py`` -> ``pkg``; a leading ``src/`` is dropped
    (``src`` layouts). When the workspace root is itself a package (``root_package``, its
    directory name), names are prefixed with it, as Python would import them."""
    path = rel[:-3] if rel.endswith(".py") else rel
    if path.endswith("/__init__") or path == "__init__":
        path = path[: -len("__init__")].rstrip("/")
    if path.startswith("src/"):
        path = path[4:]
    dotted = path.replace("/", ".")
    if root_package:
        return f"{root_package}.{dotted}" if dotted else root_package
    return dotted


_MAX_SCC_PASSES = 12  # passes over one component of mutually dependent evaluations (``_scc``)
# builtins and library functions that call a function they are given: name -> (positional index
# or None, keyword) of that function, and the positional index of the iterable whose items it
# receives (None: nothing known)
_CALLERS_OF_ARGS = {
    "map": (0, None, 1), "filter": (0, None, 1), "sorted": (None, "key", 0), "min": (None, "key", 0),
    "max": (None, "key", 0), "functools.reduce": (0, None, None), "threading.Thread": (None, "target", None),
    "threading.Timer": (1, "function", None), "atexit.register": (0, None, None),
    "builtins.list.sort": (None, "key", None), "itertools.starmap": (0, None, None),
    "functools.cmp_to_key": (0, None, None), "contextlib.contextmanager": (0, None, None),
}
_SEQ_BUILTINS = frozenset({"list", "tuple", "set", "frozenset", "sorted", "reversed", "iter"})



def interface_units(facts: PyFacts | None) -> dict[str, tuple[list, tuple]]:
    """What other files' resolution can consult in one file, grouped by *unit*: a top-level name
    (what scope 0 binds it to, and the scopes, classes and symbols defined under it), plus
    ``STARS`` (the star imports) and ``HAS_FACTS``. Returns unit -> (content, scope indices);
    a unit absent from the dict is one that nothing defines (a lookup that found nothing).

    Scope indices in the content are relative to the unit's first scope, so a unit that only
    moved (a definition inserted above it) keeps its content; its indices tell that it moved."""
    if facts is None:
        return {}
    scopes = facts.scopes
    unit_of = [None] + [_unit(sc.qual) for sc in scopes[1:]]
    where: dict[str, list[int]] = {}
    for si in range(1, len(scopes)):
        where.setdefault(unit_of[si], []).append(si)

    def norm(i: int):  # a scope index as (unit, offset in the unit); the module scope is 0
        return i if i <= 0 else (unit_of[i], i - where[unit_of[i]][0])

    out: dict[str, list] = {HAS_FACTS: [True], STARS: [tuple(facts.stars)],
                            STORES: [tuple((norm(si), tuple(sc.stores)) for si, sc in enumerate(scopes) if sc.stores)],
                            FIXTURES: [tuple((sc.fixture, sc.qual) for sc in scopes if sc.fixture)]}
    top = scopes[0]
    for name, refs in top.names.items():
        out.setdefault(name, []).append(("bind", name in top.globals, tuple(refs)))
    for name in top.globals:
        if name not in top.names:
            out.setdefault(name, []).append(("global",))
    for si in range(1, len(scopes)):
        sc = scopes[si]
        out.setdefault(unit_of[si], []).append(
            ("scope", norm(si), sc.qual, sc.kind, norm(sc.parent), sc.self_name, sc.self_kind, sc.class_qual,
             tuple(sorted((k, tuple(v)) for k, v in sc.names.items())), tuple(sorted(sc.globals)),
             tuple(sc.returns), sc.params, tuple(sc.yields), sc.decos, sc.fixture))
    for q, c in facts.classes.items():
        attrs = tuple(sorted((k, tuple((norm(msi), r) for msi, r in v)) for k, v in c.attrs.items()))
        out.setdefault(_unit(q), []).append(("class", q, tuple(c.bases), norm(c.outer), norm(c.body), attrs))
    seen: set[str] = set()
    for sym in facts.symbols:
        if sym.qual not in seen:
            seen.add(sym.qual)
            out.setdefault(_unit(sym.qual), []).append(("kind", sym.qual, sym.kind))
    for q, i in facts.scope_of.items():
        out.setdefault(_unit(q), []).append(("body", q, norm(i)))
    return {u: (content, tuple(where.get(u, ()))) for u, content in out.items()}


def changed_entities(rel: str, old: PyFacts | None, new: PyFacts | None) -> tuple[set[tuple], set[tuple]]:
    """Entities ``(rel, unit)`` of a file that changed between two versions: ``(changed, moved)``,
    ``changed`` those whose content differs (other files' resolution may differ), ``moved``
    those whose scopes only moved (memoised values, keyed by scope index, are stale; other
    files' edges are not)."""
    a, b = interface_units(old), interface_units(new)
    changed, moved = set(), set()
    for u in a.keys() | b.keys():
        x, y = a.get(u), b.get(u)
        if x is None or y is None or x[0] != y[0]:
            changed.add((rel, u))
        elif x[1] != y[1]:
            moved.add((rel, u))
    return changed, moved


def full_qual(rel: str, qual: str, root_package: str = "") -> str:
    """Workspace-wide qualified name of a symbol (``module.Class.method``; JS/TS:
    ``path#Class.method``, the file's own module symbol ``path``)."""
    if rel.lower().endswith(_JS_EXTS):
        return f"{rel}#{qual}" if qual else rel
    mod = module_name(rel, root_package)
    if not qual:
        return mod or rel
    return f"{mod}.{qual}" if mod else qual


def receiver_kind(value) -> str:
    """``CALLS.resolved`` of a call through an attribute, by what its receiver evaluates to:
    module | class | instance, else attribute (both languages' resolvers). A union whose
    members are all of one of those kinds (instances of several classes) is of that kind."""
    if value is not None and value[0] == "union" and value[1] and not value[2]:
        kinds = {receiver_kind(m) for m in value[1]}
        return kinds.pop() if len(kinds) == 1 else "attribute"
    if value is not None:
        if value[0] == "mod":
            return "module"
        if value[0] == "sym" and value[3] == "class":
            return "class"
        if value[0] == "inst":
            return "instance"
    return "attribute"



@compact_pickle
@dataclass(slots=True)
class CallEdge:
    src_qual: str
    dst_file: str
    dst_qual: str
    resolved: str
    lines: list[int] = field(default_factory=list)
    cols: list[int] = field(default_factory=list)
    end_cols: list[int] = field(default_factory=list)


@compact_pickle
@dataclass(slots=True)
class FileEdges:
    """Resolution result of one file (in-file quals; the writer adds module names)."""

    imports: dict[str, int] = field(default_factory=dict)  # dst path -> first line
    packages: dict[str, int] = field(default_factory=dict)  # top-level name -> first line
    calls: dict[tuple, CallEdge] = field(default_factory=dict)  # (src, dst_file, dst) -> edge
    inherits: list[tuple[str, str, str]] = field(default_factory=list)  # (src, dst_file, dst)
    unresolved: dict[str, list[str]] = field(default_factory=dict)  # caller qual -> called names
    unresolved_imports: list[str] = field(default_factory=list)  # "line:module"
    deps: frozenset[tuple] = frozenset()  # (file, unit) of other files consulted (``interface_units``)
    unresolved_lines: dict[str, list[int]] = field(default_factory=dict)  # caller qual -> line of
    #   each unbound call site, in the order of ``unresolved``
    flows: dict[tuple, tuple] = field(default_factory=dict)  # (dst file, dst qual) -> flows into its
    #   parameters from this file's call sites (see the module doc)
    type_only: set[str] = field(default_factory=set)  # dst paths of ``imports`` imported for types
    #   only (TypeScript ``import type`` …: no run-time dependency; IMPORTS.type_only)
    inherit_deps: frozenset | None = None  # entities the evaluation of its classes' bases consulted
    #   (``ClassModel.seed_inherits``; None: not recorded, in edges cached by an older version)

    def add_call(self, caller: str, dst_file: str, dst_qual: str, resolved: str, site) -> None:
        """Record one bound call site (``site``: ``line``, ``col``, ``end_col``) on the edge from
        ``caller`` to ``dst_file``'s ``dst_qual`` (one edge per pair, its sites in lists)."""
        k = (caller, dst_file, dst_qual)
        e = self.calls.get(k)
        if e is None:
            e = self.calls[k] = CallEdge(caller, dst_file, dst_qual, resolved)
        e.lines.append(site.line)
        e.cols.append(site.col)
        e.end_cols.append(site.end_col)

    def sort_sites(self) -> None:
        """Put every edge's call sites in source order (by line, then column): extraction that
        visits nested functions after their parent's other calls appends them out of order."""
        for e in self.calls.values():
            if any(e.lines[i] > e.lines[i + 1] for i in range(len(e.lines) - 1)):
                order = sorted(range(len(e.lines)), key=lambda i: (e.lines[i], e.cols[i]))
                e.lines[:] = [e.lines[i] for i in order]
                e.cols[:] = [e.cols[i] for i in order]
                e.end_cols[:] = [e.end_cols[i] for i in order]

    def key(self) -> tuple:
        """Comparable form (everything but ``deps``)."""
        return (tuple(sorted(self.imports.items())), tuple(sorted(self.packages.items())),
                tuple(sorted((k, tuple(e.lines), tuple(e.cols), tuple(e.end_cols), e.resolved)
                             for k, e in self.calls.items())),
                tuple(sorted(self.inherits)),
                tuple(sorted((k, tuple(v)) for k, v in self.unresolved.items())),
                tuple(self.unresolved_imports),
                tuple(sorted((k, tuple(v)) for k, v in self.unresolved_lines.items())),
                tuple(sorted(self.type_only)))


class _Cut(Exception):
    pass




_UNSEEN = object()  # ``Resolver._facts``: a file not read yet
_FACTS_SEEN_MAX = 2048  # files whose facts ``Resolver._facts`` keeps at once
_CONSTANT_REFS = frozenset(("lit", "d", "l", "prop"))  # refs whose value is the ref itself (``ev``)


class Resolver(ParameterFlow, PytestFixtures, ClassModel, Containers, ModuleLookup):
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
        self._scoped_paths: dict[str, list[str]] | None = None  # see ``ModuleLookup._extra_roots``
        self._extra_roots_of: dict[str, tuple[str, ...]] = {}
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
        self._memo_pinned = 0
        self._interned: dict[frozenset, tuple[frozenset, list]] = {}  # deps set -> (itself, memo keys)
        self._sets_with: dict[tuple, list[frozenset]] = {}  # entity -> interned deps sets naming it
        self._kinds: dict[str, dict[str, str]] = {}  # file -> symbol qual -> kind (first symbol)
        self._units: dict[str, list] = {}  # file -> entity (file, unit) of each scope (None for the module)
        self._deps: set[tuple] = set()
        self._active: set = set()  # star-import lookups in progress
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
        self._inherits: dict[str, tuple] = {}  # file -> (its (class, base) pairs, entities consulted)
        self._inherits_stale: set[str] = set()  # files whose pairs must be computed again

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
        self._inherits_stale.add(rel)

    def invalidate(self, entities) -> int:
        """Forget every memoised value that consulted one of ``entities`` (see
        ``changed_entities``), and recompute (in the next ``resolve_fixpoint``) the parameter
        values that did. Returns how many memoised values were forgotten. The others stay:
        re-resolving a file after an edit elsewhere re-evaluates only what the edit can affect."""
        n = 0
        entities = list(entities)
        self.invalidate_params(entities)
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
        again gives, except one that consulted the subclass relation (``ALL_CLASSES``) while a
        run was still building it (``_ensure_subclasses``): those stay, so a bounded memo binds
        exactly as an unbounded one. The invalidation index is rebuilt over what is kept. Only
        between files (no evaluation in progress)."""
        pinned, old = {}, {}
        for key, hit in self.memo.items():
            (pinned if ALL_CLASSES in hit[1] else old)[key] = hit
        for key, hit in self._old_memo.items():
            if ALL_CLASSES in hit[1]:
                pinned[key] = hit
        self.memo, self._old_memo, self._memo_pinned = pinned, old, len(pinned)
        interned: dict = {}
        sets_with: dict = {}
        for memo in (pinned, old):
            for key, hit in memo.items():
                fs = hit[1]
                ent = interned.get(fs)
                if ent is None:
                    ent = interned[fs] = (fs, [])
                    for f in fs:
                        sets_with.setdefault(f, []).append(fs)
                elif ent[0] is not fs:  # one object per deps set, as ``invalidate`` expects
                    memo[key] = (hit[0], ent[0], hit[2])
                ent[1].append(key)
        self._interned, self._sets_with = interned, sets_with

    def _remember(self, key: tuple, val, deps: set[tuple], used: int) -> None:
        fs = frozenset(deps)
        ent = self._interned.get(fs)
        if ent is None:  # deps sets are few and shared: intern them (memory), index them by file
            ent = self._interned[fs] = (fs, [])
            for f in fs:
                self._sets_with.setdefault(f, []).append(fs)
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
        return self._scc(key, self._ev, rel, si, ref)

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
        members = self._member_order[start:]
        del self._member_order[start:]
        for m in members:
            mval = self._members.pop(m)[0]
            if not cut:
                self._remember(m, mval, deps, used)
        for m in members + [key]:
            self._prov.pop(m, None)
            self._back.discard(m)
        if not cut:
            self._remember(key, val, deps, used)
        return val

    @staticmethod
    def combine(values: list):
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

    # -- call binding -----------------------------------------------------------------------
    def call_targets(self, v, how: str) -> tuple[list[tuple[str, str, str]], bool]:
        """Workspace targets ``[(file, qual, resolved)]`` of calling value ``v``, and whether
        part of the call stayed unknown."""
        if v is None:
            return [], True
        t = v[0]
        if t == "sym":
            if v[3] == "class":
                out = [(v[1], v[2], "class")]
                # ``K()`` runs K's own __init__ (through its MRO), never a subclass's
                init = self.class_attr(v[1], v[2], "__init__", via_instance=True, subclasses=False)
                if init is not None and init[0] == "sym" and init[3] == "method":
                    out.append((init[1], init[2], "init"))
                return out, False
            if v[3] in ("function", "method"):
                return [(v[1], v[2], how)], False
            return [], True
        if t == "partial":
            return self.call_targets(v[1], "partial")
        if t == "wref":
            return [], False  # dereferencing a weak reference runs no workspace code
        if t == "propv":
            return [(v[1], v[2], how)], False
        if t == "inst":
            call = self.class_attr(v[1], v[2], "__call__", via_instance=True)
            if call is not None and call[0] == "sym":
                return [(call[1], call[2], "instance")], False
            return [], True
        if t == "union":
            got: dict = {}
            unknown = v[2]
            for m in v[1]:
                o, u = self.call_targets(m, how)
                for x in o:
                    got.setdefault(x, None)
                unknown = unknown or u
            return list(got), unknown
        if v == EXT_ANY:
            # derived from an external value (what a library call returns, an item of a library
            # container): it may well be a workspace object (``ctx.ensure_object(ScriptInfo)``,
            # ``OrderedDict`` of adapters), so the call is unknown, counted, not taken as external
            return [], True
        if t in ("ext", "builtin", "mod", "dmeth", "bottom"):
            return [], False  # outside the workspace (a builtin container's method included)
        return [], True

    _BINDING_HOW = {"p": "param", "it": "container", "ix": "container", "s": "container", "c": "return",
                    "dec": "decorated"}

    def _bound_how(self, rel: str, si: int, name: str) -> str | None:
        """``param``, ``container``, ``return`` or ``decorated`` when ``name`` is bound, where it
        is found, through a value flow of that kind; else None."""
        facts = self.facts[rel]
        idx = si
        while idx >= 0:
            sc = facts.scopes[idx]
            refs = sc.names.get(name)
            if refs:
                for r in refs:
                    how = self._BINDING_HOW.get(r[0])
                    if how is not None:
                        return how
                return None
            idx = sc.parent
        return None

    def _how(self, rel: str, si: int, ref: tuple, target_file: str, dst_qual: str = "") -> str:
        t = ref[0]
        if t == "n":
            how = self._bound_how(rel, si, ref[1])
            if how is not None:
                return how
            return "local" if target_file == rel else "import"
        if t == "a":
            base = ref[1]
            facts = self.facts[rel]
            if base[0] == "n":
                idx = si
                while idx >= 0:
                    sc = facts.scopes[idx]
                    if sc.self_name == base[1] and base[1] not in sc.names:
                        if dst_qual.rpartition(".")[2] != ref[2]:
                            return "attribute"  # a value stored on the instance or class
                        return "self" if sc.self_kind == "instance" else "class"
                    idx = sc.parent
            if base[0] == "c" and base[1] == ("n", "super"):
                return "super"
            kind = receiver_kind(self.ev(rel, si, base))
            if kind in ("instance", "attribute") and dst_qual.rpartition(".")[2] != ref[2]:
                return "attribute"  # a value stored in an attribute (``self.notifier = notify``)
            if kind in ("instance", "attribute") and base[0] == "n":
                how = self._bound_how(rel, si, base[1])
                if how in ("param", "container"):
                    return how  # the receiver came through a parameter or a container
            return kind
        if t == "c":
            return "return"
        if t == "s":
            return "container"
        return "other"

    def resolve_file(self, rel: str) -> FileEdges:
        """Bind the imports, calls and bases of one file, and collect the flows of its call
        sites into workspace functions (``FileEdges.flows``). The values its call sites read
        are memoised, so resolving a file again after a change elsewhere re-evaluates only
        what the change can affect."""
        if self.memo_budget is not None and len(self.memo) > self._memo_pinned + self.memo_budget:
            self._age_memo()
        facts = self.facts[rel]
        if self._subclasses is None:  # resolved on its own (an unsaved buffer): every file seeded
            self._ensure_subclasses(sorted(set(self._inherits) | self._inherits_stale | {rel}))
        self._deps = set()
        out = FileEdges()
        flows: dict[tuple, set] = {}
        for imp in facts.imports:
            self._import_edges(rel, imp, out)
        for own, sc in enumerate(facts.scopes):
            caller = sc.qual
            for site in sc.calls:
                si = site.scope if site.scope >= 0 else own
                targets, unbound, into = self._site(rel, si, site)
                for dst_file, dst_qual, how in targets:
                    out.add_call(caller, dst_file, dst_qual, how, site)
                if unbound:
                    out.unresolved.setdefault(caller, []).append(site.name)
                    out.unresolved_lines.setdefault(caller, []).append(site.line)
                for dst_file, dst_qual, args, kwargs, skip in into:
                    flows.setdefault((dst_file, dst_qual), set()).add((rel, si, args, kwargs, skip))
        saved, self._deps = self._deps, set()
        for cls in facts.classes.values():
            for b in cls.bases:
                v = self.ev(rel, cls.outer, b)
                for m in (v[1] if v and v[0] == "union" else [v]):
                    if m and m[0] == "sym" and m[3] == "class":
                        edge = (cls.qual, m[1], m[2])
                        if edge not in out.inherits:
                            out.inherits.append(edge)
        out.inherit_deps = frozenset(self._deps)
        self._deps = saved | self._deps
        out.deps = frozenset(e for e in self._deps if e[0] != rel)
        out.flows = {k: tuple(sorted(v, key=repr)) for k, v in flows.items()}
        self._deps = set()
        out.sort_sites()
        return out

    def _site(self, rel: str, si: int, site) -> tuple:
        """What one call site binds to: ``(targets [(file, qual, resolved)], unbound: bool,
        flows [(file, qual, args, kwargs, skip)])``. Not memoised itself (the values it reads
        are): a site is evaluated once per resolution of its file, and a memo entry per site
        cost a third of the resolution time."""
        if site.implicit == "read":  # an attribute read: the @property getters it runs, if any
            return tuple(self._property_reads(rel, si, site.ref)), False, ()
        v = self.ev(rel, si, site.ref)
        targets, unknown = self.call_targets(v, "")
        if site.implicit:
            # with/for/raise: bound when the receiver is a workspace value, never counted
            return tuple((f, q, "implicit") for f, q, _ in targets), False, ()
        if site.decorator and unknown and not targets:
            return (), False, ()  # a decorator we cannot follow is not a call we failed to bind
        out, into = [], []
        for dst_file, dst_qual, resolved in targets:
            if not resolved:
                resolved = self._how(rel, si, site.ref, dst_file, dst_qual)
            out.append((dst_file, dst_qual, "decorator" if site.decorator else resolved))
            if self.value_flow and (site.args or site.kwargs):  # flows feed parameter values only
                skip = self._flow_skip(rel, si, site, v, dst_file, dst_qual, resolved)
                if skip is not None:
                    into.append((dst_file, dst_qual, site.args, site.kwargs, skip))
        if site.ref[0] == "a":
            out += self._property_reads(rel, si, site.ref[1])
        if v is not None and v[0] in ("builtin", "ext") and (site.args or site.kwargs):
            called, items = self._called_by_library(rel, si, site, v)
            out += called
            into += items
        return tuple(out), bool(unknown and site.name and not site.decorator), tuple(into)

    def _flow_skip(self, rel: str, si: int, site, v, dst_file: str, dst_qual: str, resolved: str) -> int | None:
        """How many leading parameters of a bound call site's target its arguments skip (``self``
        of a bound method, ``cls`` of a classmethod), or None when nothing flows."""
        if resolved == "class" or resolved == "partial":
            return None  # the class itself takes no parameters (``init`` does); partial shifts them
        facts = self._facts(dst_file)
        fsi = facts.scope_of.get(dst_qual) if facts is not None else None
        if fsi is None:
            return None
        target = facts.scopes[fsi]
        if not target.params:
            return None
        skip = 0
        if resolved == "init":
            skip = 1
        elif target.self_name is not None:
            # a method: bound (``obj.m(x)``, ``self.m(x)``, a classmethod) skips its first parameter
            if target.self_kind == "class":
                skip = 1
            elif site.ref[0] == "a":
                base = self.ev(rel, si, site.ref[1])
                members = base[1] if base is not None and base[0] == "union" else [base]
                skip = 1 if any(m is not None and m[0] in ("inst", "super") for m in members) else 0
            elif v is not None and v[0] not in ("sym",):
                skip = 1
        return skip

    def _property_reads(self, rel: str, si: int, ref: tuple) -> list[tuple]:
        """``property`` targets: the ``@property`` getters read on the way to a callee
        (``self.console.print()`` runs the ``console`` getter)."""
        out = []
        while ref[0] == "a":
            getter = self.property_getter(self.ev(rel, si, ref[1]), ref[2])
            if getter is not None:
                out.append((getter[0], getter[1], "property"))
            ref = ref[1]
        return out

    def _called_by_library(self, rel: str, si: int, site, v) -> tuple[list, list]:
        """A function handed to a builtin or library function that calls it (``map(f, xs)``,
        ``sorted(xs, key=f)``, ``Thread(target=f)``): ``implicit`` targets, and the flows of the
        items it is called with into its first parameter."""
        spec = _CALLERS_OF_ARGS.get(v[1])
        if spec is None:
            return [], []
        pos, kw, items_at = spec
        fref = None
        if pos is not None and pos < len(site.args) and site.args[pos][0] != "*":
            fref = site.args[pos]
        if fref is None and kw is not None:
            fref = next((r for k, r in site.kwargs if k == kw), None)
        if fref is None or fref == UNKNOWN:
            return [], []
        targets, _ = self.call_targets(self.ev(rel, si, fref), "implicit")
        called, items = [], []
        for dst_file, dst_qual, _how in targets:
            called.append((dst_file, dst_qual, "implicit"))
            if items_at is not None and items_at < len(site.args) and site.args[items_at][0] != "*":
                facts = self._facts(dst_file)
                fsi = facts.scope_of.get(dst_qual) if facts is not None else None
                if fsi is not None and facts.scopes[fsi].params:
                    items.append((dst_file, dst_qual, (("it", site.args[items_at]),), (), 0))
        return called, items
