"""Call binding for the Python resolver: the workspace targets of a call site's value
(``call_targets``), how each edge was bound (``CALLS.resolved``), and the resolution of one file
into its ``FileEdges`` (``resolve_file``): calls, property reads, functions handed to code that
calls them, unbound call sites, and the value flows of its call sites."""

from __future__ import annotations

from orbit_lsp.index.py_edges import FileEdges, receiver_kind
from orbit_lsp.index.py_values import EXT_ANY
from orbit_lsp.index.py_facts import UNKNOWN

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


class CallBinding:
    """Mixed into ``resolve.Resolver`` (whose state and evaluation, ``ev``, it uses)."""

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
        facts = self._facts(rel)
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
            facts = self._facts(rel)
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
        if self.memo_budget is not None and len(self.memo) > self.memo_budget:
            self._age_memo()
        facts = self._facts(rel)  # (through the resolver's own table: ``self.facts`` decodes on use)
        if facts is None:
            raise KeyError(rel)
        facts = facts.with_calls()
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
