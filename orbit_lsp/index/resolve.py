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
files whose evaluation consulted a function's parameter values (entity ``(PVAL, file, qual)``)
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
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from orbit_lsp.index.python import UNKNOWN, PyFacts, compact_pickle

_JS_EXTS = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")
_BUILTINS = frozenset(dir(builtins)) | {"__name__", "__file__", "__doc__", "__spec__", "__path__",
                                         "__package__", "__loader__", "__builtins__", "__debug__",
                                         "__annotations__", "__dict__", "__module__", "__qualname__"}
STDLIB = frozenset(sys.stdlib_module_names)
_OBJECT_ATTRS = frozenset(dir(object))
_MAX_DEPTH = 400  # a safety net against runaway recursion, far above real alias chains
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


STARS = "*"  # entity of a file's star imports
HAS_FACTS = "<facts>"  # entity of whether a file has facts at all
STORES = "#stores"  # entity of every container store in a file (``c[k] = v``, ``c.append(v)``)
ALL_CLASSES = ("*", "#classes")  # entity: the subclass relation of the whole workspace
PVAL = "~param"  # entities ``(PVAL, file, qual)``: the values of a function's parameters
MAX_PARAM_VALUES = 8  # a parameter receiving more workspace values than this is taken as unknown
MAX_PARAM_CHANGES = 2 * MAX_PARAM_VALUES + 4  # changes of one function's parameter values per run
#   before it is widened (``Resolver._widen``)
MAX_PARAM_PASSES = 64  # passes of parameter values among themselves per round (``_propagate_params``)
MAX_FLOW_ROUNDS = 12  # a safety net for the value-flow fixpoint (real code converges in a few)
_MAX_SCC_PASSES = 12  # passes over one component of mutually dependent evaluations (``_scc``)
BOTTOM = ("bottom",)  # no value (yet): a binding that only holds itself; never "unknown"
TOO_MANY = ("too-many",)  # a parameter value past MAX_PARAM_VALUES: unknown for binding, and
#   what a parameter receives when it is passed one (the top of parameter values)
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


def _unit(qual: str) -> str:
    """The top-level name a qualified name belongs to (``Agent.run`` -> ``Agent``)."""
    return qual.partition(".")[0]


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
                            STORES: [tuple((norm(si), tuple(sc.stores)) for si, sc in enumerate(scopes) if sc.stores)]}
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
             tuple(sc.returns), sc.params, tuple(sc.yields), sc.decos))
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


def canonical_path(path: str, aliases: dict[str, str]) -> str:
    """``path`` with in-workspace symlinked directories (``aliases``: link -> target, both
    workspace-relative) replaced by their targets, links to links followed (8 at most)."""
    for _ in range(8):
        for link, target in aliases.items():
            if path == link or path.startswith(link + "/"):
                path = (target + path[len(link):]).lstrip("/")
                break
        else:
            return path
    return path


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


EXT_ANY = ("ext", "<external>")  # a value derived from an external one: all alike for binding
_MAX_NESTING = 4  # containers of containers (``bag``, ``tup``, ``partial``) deeper than this are unknown


def _ext(name: str, suffix: str) -> tuple:
    """The external value ``name`` + ``suffix`` (``json.loads`` + ``()``). Names derived from a
    derived name (``str().decode()``) collapse into ``EXT_ANY``: their spelling never binds a
    call, and ``x = x.decode()`` would otherwise make new names without end."""
    if "(" in name or "[" in name or name == EXT_ANY[1] or name.count(".") >= 4:
        return EXT_ANY
    return ("ext", name + suffix)


def _workspace_part(v):
    """The workspace values of a parameter's value in one form (members in one order; the
    unknown flag kept beside them), or None when it holds none."""
    v = _canonical(v)
    if v is None or v == EXT_ANY or v == BOTTOM:
        return None
    if v == TOO_MANY:
        return TOO_MANY
    if v[0] == "union":
        members = tuple(m for m in v[1] if m != EXT_ANY)
        if not members:
            return None  # nothing from the workspace
        if len(members) > MAX_PARAM_VALUES:
            return TOO_MANY  # too many values to be of use: unknown, for good

        return members[0] if len(members) == 1 and not v[2] else ("union", members, v[2])
    return v


def _canonical(v):
    """A parameter value in one form: values from outside the workspace (which bind nothing)
    as one ``EXT_ANY``, a union's members in one order (equal however its flows were
    evaluated)."""
    if v is None:
        return None
    if v[0] in ("ext", "builtin"):
        return EXT_ANY
    if v[0] == "union":
        if TOO_MANY in v[1]:
            return TOO_MANY  # a parameter that receives one holding too many values holds too many
        members = {EXT_ANY if m[0] in ("ext", "builtin") else m for m in v[1]}
        if len(members) == 1 and not v[2]:
            return next(iter(members))
        return ("union", tuple(sorted(members, key=repr)), v[2])
    return v


def _depth(v, limit: int) -> int:
    if limit < 0 or v is None or v[0] not in ("bag", "tup", "partial", "union"):
        return 0
    members = (v[1],) if v[0] == "partial" else v[1]
    return 1 + max((_depth(m, limit - 1) for m in members), default=0)


def _nested(v):
    """A constructed container value, or None (unknown) past ``_MAX_NESTING`` levels
    (``x = enumerate(x)`` would nest without end)."""
    return None if _depth(v, _MAX_NESTING + 1) > _MAX_NESTING else v


class _NoC3(Exception):
    """The bases admit no C3 linearisation (or form a cycle)."""


_CONSTANT_REFS = frozenset(("lit", "d", "l", "prop"))  # refs whose value is the ref itself (``ev``)


class Resolver:
    """Binds names across the files of one workspace.

    ``facts``: path -> PyFacts for every Python file that parsed; ``files``: every indexed path
    (any language); ``aliases``: in-workspace symlinked directory -> its target directory.
    """

    def __init__(self, facts: dict[str, PyFacts], files: set[str], aliases: dict[str, str] | None = None,
                 root_package: str = "", value_flow: bool = True):
        self.facts = facts
        self.files = files
        self.aliases = dict(aliases or {})
        self.root_package = root_package
        self.value_flow = value_flow  # False: parameters hold only their defaults and annotations
        self.dirs: set[str] = {""}
        for f in files:
            parts = f.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                self.dirs.add("/".join(parts[:i]))
        self.src_root = "src" if "src" in self.dirs and "src/__init__.py" not in files else None
        self.memo: dict = {}  # (file, scope, ref) -> (value, entities consulted, depth used)
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
        self._flows_in: dict[tuple, tuple] = {}  # the same flows in a fixed order (``_compute_pval``)
        # the last resolve_fixpoint: rounds, seconds of the first and of the later rounds, and how
        # many files the later rounds resolved again
        self.flow_stats: dict = {"rounds": 0, "first_s": 0.0, "more_s": 0.0, "again": 0}
        self.pval: dict[tuple, dict] = {}  # (file, qual) -> {parameter: value} from the flows into it
        self.pdeps: dict[tuple, frozenset] = {}  # (file, qual) -> entities its value consulted
        self._pdep_rev: dict[tuple, set] = {}  # entity -> functions whose parameter values consulted it
        self._pending: set[tuple] = set()  # functions whose parameter values must be recomputed
        self.pval_changed: set[tuple] = set()  # functions whose parameter values changed (caller clears)
        self._stores: dict[str, list] = {}  # file -> [(scope, store)] of its container stores
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
                    hit = self.memo.get(key)
                    if hit is not None and hit[1] is ent[0]:
                        del self.memo[key]
                        n += 1
        return n

    def implied(self, entities) -> set[tuple]:
        """After ``set_facts`` and ``invalidate(entities)``: ``{ALL_CLASSES}`` when the subclass
        relation changed (a class gained or lost a workspace base, also through a base name
        imported from a file that changed), having forgotten what consulted it; else empty.
        The indexer adds it to the entities that decide which files are resolved again."""
        entities = set(entities)
        redo = set(self._inherits_stale)
        redo.update(r for r, (_, deps) in self._inherits.items() if not deps.isdisjoint(entities))
        self._inherits_stale = set()
        moved = False
        for r in sorted(redo):
            before = self._inherits.pop(r, ((), frozenset()))[0]
            if r in self.facts:
                self._inherits[r] = self._file_inherits(r)
            if self._inherits.get(r, ((), None))[0] != before:
                moved = True
        if not moved:
            return set()
        self._subclasses = None
        self.invalidate((ALL_CLASSES,))
        return {ALL_CLASSES}

    def seed_inherits(self, rel: str, edges: FileEdges) -> None:
        """A file's (class, base) pairs from the edges an earlier resolver computed (the
        ``inherits`` of its ``FileEdges``, and what it consulted then: ``deps``)."""
        pairs = tuple(sorted(((rel, q), (bf, bq)) for q, bf, bq in edges.inherits))
        self._inherits[rel] = (pairs, frozenset(edges.deps) | {(rel, HAS_FACTS)})
        self._inherits_stale.discard(rel)

    def _file_inherits(self, rel: str) -> tuple:
        saved, self._deps = self._deps, set()
        try:
            pairs = set()
            for q, c in self.facts[rel].classes.items():
                if c.bases:
                    for b in self._bases(rel, q) or ():
                        pairs.add(((rel, q), b))
            return tuple(sorted(pairs)), frozenset(self._deps)
        finally:
            self._deps = saved

    def _ensure_subclasses(self, everyone) -> None:
        """The subclass relation over ``everyone`` (every file with facts), computing the pairs
        of the files that have none yet (evaluated before any other evaluation of a run, so no
        cycle runs through it)."""
        for r in everyone:
            if r in self._inherits_stale or r not in self._inherits:
                self._inherits_stale.discard(r)
                if r in self.facts:
                    self._inherits[r] = self._file_inherits(r)
        if self._subclasses is None:
            subs: dict[tuple, list] = {}
            for r in sorted(self._inherits):
                for sub, base in self._inherits[r][0]:
                    subs.setdefault(base, []).append(sub)
            self._subclasses = subs

    def subclass_attr(self, rel: str, qual: str, attr: str):
        """An attribute read on an instance of class ``qual`` that neither it nor its bases
        define: what the workspace subclasses that define it assign (``self.x = …`` in a
        subclass, read in a base's method: ``self`` is an instance of the subclass there), every
        subclass down the hierarchy. A class-body value below a subclass that assigns the
        attribute on its instances is shadowed by that assignment and left out. None when no
        subclass defines it."""
        self._deps.add(ALL_CLASSES)
        if self._subclasses is None:
            return None
        vals, seen, todo = [], {(rel, qual)}, [((rel, qual), False)]
        while todo:
            cls_key, shadowed = todo.pop()
            for r, q in self._subclasses.get(cls_key, ()):
                if (r, q) in seen:
                    continue
                seen.add((r, q))
                facts = self._facts(r)
                cls = facts.classes.get(q) if facts is not None else None
                if cls is None:
                    continue
                self._deps.add((r, _unit(q)))
                body = facts.scopes[cls.body]
                if attr in body.names and not shadowed:
                    vals.append(self._through_instance(self.combine([self.ev(r, cls.body, x) for x in body.names[attr]])))
                if attr in cls.attrs:
                    vals.append(self.combine([self.ev(r, msi, x) for msi, x in cls.attrs[attr]]))
                todo.append(((r, q), shadowed or attr in cls.attrs))
        return self.combine(vals) if vals else None

    def _remember(self, key: tuple, val, deps: set[tuple], used: int) -> None:
        fs = frozenset(deps)
        ent = self._interned.get(fs)
        if ent is None:  # deps sets are few and shared: intern them (memory), index them by file
            ent = self._interned[fs] = (fs, [])
            for f in fs:
                self._sets_with.setdefault(f, []).append(fs)
        ent[1].append(key)
        self.memo[key] = (val, ent[0], used)

    # -- value flow between files: parameters hold what call sites pass ------------------------
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
        for e in self.pdeps.pop(key, ()):
            ks = self._pdep_rev.get(e)
            if ks is not None:
                ks.discard(key)
        if val is None:
            self.pval.pop(key, None)  # no workspace value (yet): what it consulted is still kept,
        else:  # so it is computed again when that changes
            self.pval[key] = val
        if not deps:
            return
        self.pdeps[key] = deps
        for e in deps:
            self._pdep_rev.setdefault(e, set()).add(key)

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
            ordered = self._flows_in.get(key)
            if ordered is None:  # the order of a union's members: the same whatever came first
                ordered = self._flows_in[key] = tuple(sorted(flows, key=repr))
            all_params = facts.scopes[fsi].params
            params = [n for n, k in all_params if k in ("pos", "kwonly")]
            positional = [n for n, k in all_params if k == "pos"]
            got: dict[str, list] = {}
            for flow in ordered:
                for name in params:
                    r = self._arg_for(positional, name, flow)
                    if r is None:
                        continue
                    got.setdefault(name, []).append(self.ev(flow[0], flow[1], r) if r != UNKNOWN else None)
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
        ``(PVAL, file, qual)``) and never recurses into call sites. Each round resolves the
        files to resolve, updates the flows they contribute, recomputes the parameter values
        whose flows or consulted entities changed, and re-resolves the files that consulted a
        value that changed. Values only grow, except after an edit removed a flow or a value:
        then every value that depended on it, transitively, is reset and derived again from the
        flows that remain (delete and re-derive), so the result equals a build from scratch.

        ``previous(rel)``: the edges whose flows ``param_in`` holds now (None: none);
        ``everyone``: every file with facts. Returns the new edges of every file resolved."""
        import time

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
            fresh = {}
            n = len(todo)
            for i, rel in enumerate(sorted(todo), 1):
                fresh[rel] = self.resolve_file(rel)
                if progress is not None and round_no == 0 and (i % 200 == 0 or i == n):
                    progress(i, n, rel)
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
            changed = self._propagate_params(rederiving)
            todo = set()
            if changed:
                ents = {(PVAL,) + k for k in changed}
                for rel in everyone:
                    e = out[rel] if rel in out else previous(rel)
                    if e is None or not e.deps.isdisjoint(ents):
                        todo.add(rel)
            self.pval_changed |= changed
            stats["rounds"] += 1
            stats["first_s" if round_no == 0 else "more_s"] += time.perf_counter() - t
        stats["widened"] = len(self._widened)
        return out

    def _propagate_params(self, rederiving: set[tuple]) -> set[tuple]:
        """Recompute the pending parameter values, and those that read a value that changed,
        until none changes (at most ``MAX_PARAM_PASSES`` passes; what is still pending then waits
        for the next round). A value that lost a member resets every value derived from it,
        which is then derived again (added to ``rederiving``). Memoised evaluations that read a
        changed value are forgotten. Returns the functions whose values changed."""
        changed_all: set[tuple] = set()
        for _ in range(MAX_PARAM_PASSES):
            if not self._pending:
                break
            changed, shrunk = set(), set()
            batch = sorted(self._pending)
            self._pending = set()
            for key in batch:
                old = self.pval.get(key)
                val, deps = self._compute_pval(key)
                val = self._widened_value(key, val)
                own = (PVAL,) + key
                for _ in range(MAX_FLOW_ROUNDS):
                    # a function that passes its own parameters on (recursion) reads its own
                    # value: settle it here
                    if own not in deps or val == self.pval.get(key) or (
                            key not in rederiving and not self._grows(self.pval.get(key), val)):
                        break
                    self._set_pval(key, val, deps)
                    self.invalidate((own,))
                    val, deps = self._compute_pval(key)
                    val = self._widened_value(key, val)
                val = self._widen(key, old, val)
                if val != old:
                    if key not in rederiving and not self._grows(old, val):
                        shrunk.add(key)
                    changed.add(key)
                self._set_pval(key, val, deps)
            if shrunk:  # delete and re-derive what depended on a lost value
                frontier = list(shrunk)
                reset = set(shrunk)
                while frontier:
                    k = frontier.pop()
                    for k2 in self._pdep_rev.get((PVAL,) + k, ()):
                        if k2 not in reset:
                            reset.add(k2)
                            frontier.append(k2)
                for k in reset - shrunk:
                    self._set_pval(k, None, frozenset())
                    self._pending.add(k)
                changed |= reset
                rederiving |= reset
            if changed:  # forget what read them; values that read them are recomputed next pass
                self.invalidate({(PVAL,) + k for k in changed})
            changed_all |= changed
        return changed_all

    def _widen(self, key: tuple, old: dict | None, val: dict | None) -> dict | None:
        """Widening, so that the fixpoint ends: a function whose parameter values changed more
        than ``MAX_PARAM_CHANGES`` times in one ``resolve_fixpoint`` gets TOO_MANY for each
        parameter that changed, and keeps it for the rest of the run (values that are only
        partly monotone, e.g. through TOO_MANY read as unknown, could otherwise oscillate)."""
        if val == old or key in self._widened:
            return val
        n = self._change_count[key] = self._change_count.get(key, 0) + 1
        if n <= MAX_PARAM_CHANGES:
            return val
        old_, new_ = old or {}, val or {}
        self._widened[key] = {k for k in old_.keys() | new_.keys() if old_.get(k) != new_.get(k)}
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
        """A parameter: what the workspace's call sites pass (``pval``), its default and its
        annotation."""
        _, fqual, name, ann, default = ref
        facts = self._facts(rel)
        sc = facts.scopes[si]
        vals = []
        if ann != UNKNOWN:
            vals.append(self.ev(rel, si, ann))
        if default != UNKNOWN:
            vals.append(self.ev(rel, sc.parent, default))
        if not self.value_flow:
            return self.combine(vals) if vals else None
        self._deps.add((PVAL, rel, fqual))
        got = self.pval.get((rel, fqual))
        if got is not None and name in got:
            vals.append(got[name])  # TOO_MANY is a value: unknown for binding, passed on as such
        return self.combine(vals) if vals else None

    # -- containers -------------------------------------------------------------------------
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

    # -- module lookup ----------------------------------------------------------------------
    def _canon(self, path: str) -> str:
        return canonical_path(path, self.aliases)

    def _module_at(self, path: str):
        """('mod', key) for a module at ``path`` (no extension), or None."""
        path = self._canon(path)
        if path + ".py" in self.files:
            return ("mod", path + ".py")
        init = (path + "/__init__.py") if path else "__init__.py"
        if init in self.files:
            return ("mod", init)
        if path in self.dirs:
            return ("mod", path + "/" if path else "")
        return None

    def _package_root(self, rel: str) -> str:
        parts = rel.split("/")[:-1]
        while parts and "/".join(parts) + "/__init__.py" in self.files:
            parts.pop()
        return "/".join(parts)

    def roots_for(self, rel: str) -> list[str]:
        roots = [""]
        if self.src_root:
            roots.append(self.src_root)
        pr = self._package_root(rel)
        if pr not in roots:
            roots.append(pr)
        return roots

    def find_module(self, spec: tuple, importer: str):
        """Resolve a module spec: ('mod', key) | ('ext', dotted) | ('missing', text)."""
        base, dotted = spec
        sub = dotted.replace(".", "/")
        if base == "<outside>":
            return ("missing", "." + dotted)
        if base is not None:
            path = f"{base}/{sub}" if base and sub else (base or sub)
            m = self._module_at(path)
            return m if m else ("missing", dotted or ".")
        if not dotted:
            return ("missing", "")
        top = sub.split("/")[0]
        if self.root_package and top == self.root_package:
            # the workspace root is this package: ``rootpkg.a.b`` is ``a/b`` under the root
            inner = sub[len(top) + 1:]
            m = self._module_at(inner)
            return m if m else ("missing", dotted)
        top_seen = False
        for root in self.roots_for(importer):
            path = f"{root}/{sub}" if root else sub
            m = self._module_at(path)
            if m:
                return m
            top_path = f"{root}/{top}" if root else top
            if self._module_at(top_path):
                top_seen = True
        if top_seen:
            return ("missing", dotted)
        return ("ext", dotted)

    @staticmethod
    def module_file(mod) -> str | None:
        key = mod[1]
        return key if key.endswith(".py") else None

    def submodule(self, mod, name: str):
        key = mod[1]
        if key.endswith("/__init__.py") or key == "__init__.py":
            base = key[: -len("__init__.py")].rstrip("/")
        elif key.endswith("/") or key == "":
            base = key.rstrip("/")
        else:
            return None
        return self._module_at(f"{base}/{name}" if base else name)

    # -- evaluation -----------------------------------------------------------------------
    def _facts(self, rel: str) -> PyFacts | None:
        facts = self.facts.get(rel)
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
            return BOTTOM if f == BOTTOM else self.call_result(f, rel, si, ref[2])
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
            if name in sc.globals:
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

    def _star_lookup(self, rel: str, facts: PyFacts, name: str):
        self._deps.add((rel, STARS))
        if not facts.stars:
            return None
        key = ("*", rel, name)
        if key in self._active:  # star-import cycle
            self._cut += 1
            return None
        self._active.add(key)
        try:
            for spec in facts.stars:
                m = self.find_module(spec, rel)
                if m[0] == "mod":
                    v = self.module_binding(m, name)
                    if v is not None and v != BOTTOM:
                        return v
                elif m[0] == "ext":
                    return None  # could come from the external module: unknown
            return None
        finally:
            self._active.discard(key)

    def module_binding(self, mod, name: str):
        key = self.module_file(mod)
        if key is None:
            return None
        facts = self._facts(key)
        if facts is None:
            return None
        top = facts.scopes[0]
        self._deps.add((key, name))
        if name in top.names:
            return self.combine([self.ev(key, 0, r) for r in top.names[name]])
        return self._star_lookup(key, facts, name)

    def _may_bind(self, mod, name: str) -> bool:
        """Whether module ``mod`` binds ``name`` at its top level, or may: a definition,
        assignment or import of it there, a star import (what it brings is not looked at
        here), a module ``__getattr__``, ``*`` itself, or no facts to tell (a file that never
        parsed). False only when ``from mod import name`` certainly finds nothing in ``mod``'s
        own file."""
        key = self.module_file(mod)
        facts = self._facts(key) if key is not None else None
        if facts is None or name == "*":
            return True
        for unit in (name, "__getattr__", STARS):
            self._deps.add((key, unit))
        top = facts.scopes[0].names
        return name in top or "__getattr__" in top or bool(facts.stars)

    def module_attr(self, mod, name: str):
        v = self.module_binding(mod, name)
        if v is not None and v != BOTTOM:
            return v
        # ``from . import utils`` in a package's __init__ binds its own submodule
        return self.submodule(mod, name) or v

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
            facts = self.facts[r]
            cls = facts.classes[q]
            for b in cls.bases:
                v = self.ev(r, cls.outer, b)
                if v == ("builtin", "object"):
                    continue
                if not (v and v[0] == "sym" and v[3] == "class"):
                    return False
        return True

    def class_attr(self, rel: str, qual: str, attr: str, via_instance: bool, skip_first: bool = False):
        mro = self.mro(rel, qual)
        for i, (r, q) in enumerate(mro):
            if skip_first and i == 0:
                continue
            facts = self.facts[r]
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
        if via_instance and not skip_first and mro:
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
            body = self.facts[r].scopes[self.facts[r].classes[q].body]
            refs = body.names.get(attr)
            if refs is not None:
                for x in refs:
                    if x[0] == "prop":
                        return (r, x[1])
                return None
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
                init = self.class_attr(v[1], v[2], "__init__", via_instance=True)
                if init is not None and init[0] == "sym" and init[3] == "method":
                    out.append((init[1], init[2], "init"))
                return out, False
            if v[3] in ("function", "method"):
                return [(v[1], v[2], how)], False
            return [], True
        if t == "partial":
            return self.call_targets(v[1], "partial")
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
        facts = self.facts[rel]
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
        for cls in facts.classes.values():
            for b in cls.bases:
                v = self.ev(rel, cls.outer, b)
                for m in (v[1] if v and v[0] == "union" else [v]):
                    if m and m[0] == "sym" and m[3] == "class":
                        edge = (cls.qual, m[1], m[2])
                        if edge not in out.inherits:
                            out.inherits.append(edge)
        out.deps = frozenset(e for e in self._deps if e[0] != rel)
        out.flows = {k: tuple(sorted(v, key=repr)) for k, v in flows.items()}
        self._deps = set()
        return out

    def _site(self, rel: str, si: int, site) -> tuple:
        """What one call site binds to: ``(targets [(file, qual, resolved)], unbound: bool,
        flows [(file, qual, args, kwargs, skip)])``. Not memoised itself (the values it reads
        are): a site is evaluated once per resolution of its file, and a memo entry per site
        cost a third of the resolution time."""
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
            if site.args or site.kwargs:
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

    def _import_edges(self, rel: str, imp, out: FileEdges) -> None:
        spec, names, line = imp.spec, imp.names, imp.line
        if spec[0] is None and spec[1].split(".")[0] == "__future__":
            return
        m = self.find_module(spec, rel)
        if m[0] == "ext":
            top = spec[1].split(".")[0]
            out.packages.setdefault(top, line)
            return
        if m[0] == "missing":
            dots = "" if spec[0] is None else "."
            out.unresolved_imports.append(f"{line}:{dots}{spec[1]}")
            return
        targets = []
        if not names:
            targets.append(self.module_file(m))
        else:
            for n in names:
                sub = self.submodule(m, n) if n != "*" else None
                if sub is not None and self.module_file(sub):
                    targets.append(self.module_file(sub))
                elif self.module_file(m) and self._may_bind(m, n):
                    targets.append(self.module_file(m))
                else:
                    out.unresolved_imports.append(f"{line}:{spec[1]}.{n}")
        for t in targets:
            if t and t != rel:
                out.imports.setdefault(t, line)
