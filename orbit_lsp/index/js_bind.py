"""Evaluation of JS/TS value references and binding of call sites (the half of the resolver
that follows values; ``js_resolve.JsResolver`` adds modules, exports and the per-file result).

Values (tuples): ``("sym", file, qual, kind)`` a workspace definition, ``("mod", file)`` a module
namespace, ``("inst", file, class qual)`` an instance of a workspace class or a value of a
workspace interface, ``("obj", file, scope, items)`` an object literal or a namespace,
``("union", (value, …), False)`` one of several (a union type, several ``return`` values),
``("promise", value)``, ``("arr", file, scope, tref)`` an array of ``tref`` elements, ``("map",
file, scope, tref)`` a ``Map`` of ``tref`` values, ``("extf",
file, scope, tref)`` an external function returning ``tref`` (``xs.find``), ``("fnv", file, scope, tref, (tref, …))`` a function of a declared type
(returning ``tref``, taking parameters of those types), ``("shape", file, scope, members)`` a value of an object type literal, ``("ext",)``
something outside the workspace (globals, packages, the language's own types); None when
unknown. Unknown calls are counted by the caller, never matched by name.

Types (``js_types``) come from the syntax tree only: declared types of variables, parameters,
fields and properties, return types (declared, else the values of the ``return`` statements),
``new C()``, ``this``, type parameters' constraints, union members (a call binds to each member
that has the method), interfaces (a call binds to the interface's declaration), type aliases,
types re-exported through barrels, ``as`` casts, ``x!``, ``await``, JSDoc in JavaScript. Calls
bound through them are resolved ``type`` (a declared type) or ``return`` (what a call returned).
"""

from __future__ import annotations

from orbit_lsp.index.js_facts import JsFacts
from orbit_lsp.index.py_edges import receiver_kind

MAX_DEPTH = 60
EXT = ("ext",)
_MAX_UNION = 16
# type names of the language and its standard library: a value of one of them is external
TS_TYPES = frozenset({
    "Record", "Pick", "Omit", "Exclude", "Extract", "ReturnType", "Parameters", "InstanceType",
    "ConstructorParameters", "ThisType", "Uppercase", "Lowercase", "Capitalize", "Uncapitalize", "ArrayLike",
    "Iterable", "Iterator", "IterableIterator", "AsyncIterable", "AsyncIterator", "AsyncIterableIterator",
    "Generator", "AsyncGenerator", "PropertyKey", "PropertyDescriptor", "ReadonlyMap", "ReadonlySet",
    "TemplateStringsArray", "IArguments", "RegExpMatchArray", "RegExpExecArray", "CallableFunction",
    "NewableFunction", "ReadonlyArray",
})
_SAME_TYPE = frozenset({"Partial", "Readonly", "Required", "NonNullable", "NoInfer"})  # T's members
_PROMISES = frozenset({"Promise", "PromiseLike"})
_ARRAYS = frozenset({"Array", "ReadonlyArray"})
_MAPS = frozenset({"Map", "ReadonlyMap", "WeakMap"})  # ``get`` returns a value, ``forEach`` passes it
_ELEMENT_METHODS = frozenset({"at", "shift", "pop", "find", "findLast"})  # return an element
_ELEMENT_CALLBACKS = {"forEach": 0, "map": 0, "filter": 0, "some": 0, "every": 0, "find": 0, "findIndex": 0,
                      "findLast": 0, "findLastIndex": 0, "flatMap": 0, "reduce": 1, "reduceRight": 1}
GLOBALS = frozenset({
    "Array", "ArrayBuffer", "Atomics", "BigInt", "BigInt64Array", "BigUint64Array", "Boolean", "Buffer",
    "DataView", "Date", "Error", "EvalError", "FinalizationRegistry", "Float32Array", "Float64Array",
    "Function", "Infinity", "Int16Array", "Int32Array", "Int8Array", "Intl", "JSON", "Map", "Math", "NaN",
    "Number", "Object", "Promise", "Proxy", "RangeError", "ReferenceError", "Reflect", "RegExp", "Set",
    "SharedArrayBuffer", "String", "Symbol", "SyntaxError", "TypeError", "URIError", "URL",
    "URLSearchParams", "Uint16Array", "Uint32Array", "Uint8Array", "Uint8ClampedArray", "WeakMap",
    "WeakRef", "WeakSet", "AbortController", "TextEncoder", "TextDecoder", "Headers", "Request",
    "Response", "Event", "EventTarget", "WebAssembly", "atob", "btoa", "clearInterval",
    "clearImmediate", "clearTimeout", "console", "decodeURI", "decodeURIComponent", "document",
    "encodeURI", "encodeURIComponent", "eval", "fetch", "globalThis", "isFinite", "isNaN", "module",
    "parseFloat", "parseInt", "process", "queueMicrotask", "require", "setImmediate", "setInterval",
    "setTimeout", "structuredClone", "undefined", "window", "exports", "__dirname", "__filename",
    "navigator", "location", "localStorage", "sessionStorage", "performance", "crypto", "self",
    "alert", "requestAnimationFrame", "cancelAnimationFrame", "describe", "it", "test", "expect",
    "beforeEach", "afterEach", "beforeAll", "afterAll", "jest", "vi",
})


class JsBinder:
    """Value evaluation and call binding over ``self.facts`` (path -> JsFacts). A base class:
    the subclass provides ``module(spec, importer)``, ``export(file, name, depth)`` and
    ``_facts(file)`` (which records the file as consulted), and initialises ``_active`` (a set),
    ``_cuts`` (an int), ``_kinds`` (a dict) and ``_export_memo`` (a dict: key -> (value, files
    consulted), dropped by ``invalidate``)."""

    facts: dict[str, JsFacts]

    def _memo(self, key: tuple, compute):
        """``compute()`` once per ``key`` while the files it consulted are unchanged (the memo
        is ``_export_memo``; a value found with a cycle cut is not kept)."""
        hit = self._export_memo.get(key)
        if hit is not None:
            self._deps |= hit[1]
            return hit[0]
        saved, self._deps = self._deps, set()
        cut_before = self._cuts
        try:
            val = compute()
        finally:
            deps = self._deps
            self._deps = saved | deps
        if self._cuts == cut_before:
            self._export_memo[key] = (val, frozenset(deps))
        return val

    def lookup(self, rel: str, si: int, name: str, depth: int):
        facts = self._facts(rel)
        idx = si
        while idx >= 0:
            sc = facts.scopes[idx]
            refs = sc.names.get(name)
            if refs:
                typed = [r for r in refs if r[0] == "t"]
                if typed:  # a declared type is the variable's type, whatever is assigned to it
                    refs = typed[:1]
                vals = [self.ev(rel, idx, r, depth + 1) for r in refs]
                if len(vals) == 1:
                    return vals[0]
                known = set(vals)
                # several bindings (reassignment): trusted only when they all agree
                return known.pop() if len(known) == 1 else None
            idx = sc.parent
        if name in GLOBALS:
            return ("ext",)
        return None

    def ev(self, rel: str, si: int, ref: tuple, depth: int = 0):
        """Value of ``ref`` in scope ``si`` of ``rel``: ``("sym", file, qual, kind)``, ``("mod",
        file)``, ``("inst", file, class qual)``, ``("obj", file, items)``, ``("ext",)`` or None."""
        if depth > MAX_DEPTH:
            self._cuts += 1
            return None
        key = (rel, si, ref)
        if key in self._active:
            self._cuts += 1
            return None
        self._active.add(key)
        try:
            return self._ev(rel, si, ref, depth)
        finally:
            self._active.discard(key)

    def _kind(self, rel: str, qual: str) -> str | None:
        facts = self._facts(rel)
        if facts is None:
            return None
        kinds = self._kinds.get(rel)
        if kinds is None:
            kinds = self._kinds[rel] = {}
            for sym in facts.symbols:
                kinds.setdefault(sym.qual, sym.kind)
        return kinds.get(qual)

    def _ev(self, rel: str, si: int, ref: tuple, depth: int):
        t = ref[0]
        if t == "n":
            return self.lookup(rel, si, ref[1], depth)
        if t == "def":
            kind = self._kind(rel, ref[1])
            return ("sym", rel, ref[1], kind or "function")
        if t == "imp":
            m = self.module(ref[1], rel)
            if m[0] == "file":
                return self.export(m[1], ref[2], depth + 1)
            if m[0] in ("package", "builtin"):
                return ("ext",)
            return None
        if t == "a":
            return self.attr(self.ev(rel, si, ref[1], depth + 1), ref[2], depth + 1)
        if t == "this":
            facts = self._facts(rel)
            sc = facts.scopes[si] if facts is not None else None
            if sc is None:
                return None
            if sc.this_class:
                return ("inst", rel, sc.this_class)
            return self.ev(rel, sc.this_scope, sc.this_ref, depth + 1) if sc.this_ref is not None else None
        if t == "t":
            return self.type_value(rel, si, ref[1], depth + 1)
        if t == "call":
            return self.call_result(rel, si, ref[1], depth + 1)
        if t == "await":
            v = self.ev(rel, si, ref[1], depth + 1)
            return v[1] if v is not None and v[0] == "promise" else v
        if t == "alt":
            return _union([self.ev(rel, si, r, depth + 1) for r in ref[1]])
        if t == "super":
            facts = self._facts(rel)
            cq = facts.scopes[si].this_class if facts is not None else None
            cls = facts.classes.get(cq) if cq else None
            if cls is None or cls.heritage is None:
                return None
            b = self.ev(rel, cls.outer, cls.heritage, depth + 1)
            if b is not None and b[0] == "sym" and b[3] == "class":
                return ("inst", b[1], b[2])
            return EXT if b == EXT else None
        if t == "ns":
            return ("obj", rel, ref[1], ref[2])
        if t == "elem":
            v = self.ev(rel, si, ref[1], depth + 1)
            return self.type_value(v[1], v[2], v[3], depth + 1) if v is not None and v[0] == "arr" else None
        if t == "cbp":
            return self.callback_param(rel, ref[1], ref[2], ref[3], ref[4], depth + 1, ref[5] if len(ref) > 5 else None)
        if t == "new":
            v = self.ev(rel, si, ref[1], depth + 1)
            if v is not None and v[0] == "sym" and v[3] == "class":
                return ("inst", v[1], v[2])
            if v is not None and v[0] == "ext":
                return ("ext",)
            return None
        if t == "obj":
            return ("obj", rel, si, ref[1])
        return None

    def attr(self, base, name: str, depth: int = 0):
        if base is None or depth > MAX_DEPTH:
            return None
        t = base[0]
        if t == "mod":
            return self.export(base[1], name, depth + 1)
        if t == "ext":
            return ("ext",)
        if t == "obj":
            for k, r in base[3]:
                if k == name:
                    return self.ev(base[1], base[2], r, depth + 1)
            return None
        if t == "inst":
            return self.member(base[1], base[2], name, depth + 1)
        if t == "sym" and base[3] == "class":
            return self.member(base[1], base[2], name, depth + 1)  # static members share the class body
        if t == "union":
            return _union([self.attr(v, name, depth + 1) for v in base[1]])
        if t in ("promise", "fnv", "extf"):
            return EXT  # then/catch/finally; call/apply/bind
        if t == "arr":
            return ("extf", base[1], base[2], base[3]) if name in _ELEMENT_METHODS else EXT
        if t == "map":
            return ("extf", base[1], base[2], base[3]) if name == "get" else EXT
        if t == "shape":
            for k, tref in base[3]:
                if k == name:
                    return self.type_value(base[1], base[2], tref, depth + 1)
            return None
        return None

    # -- types -------------------------------------------------------------------------------------
    def type_value(self, rel: str, si: int, tref: tuple, depth: int = 0, this=None):
        """The value of a value of type ``tref`` (written in scope ``si`` of ``rel``), or None.
        ``this``: the value the ``this`` type stands for (a method's receiver)."""
        if depth > MAX_DEPTH:
            self._cuts += 1
            return None
        t = tref[0]
        if t == "n":
            v = self.lookup_type(rel, si, tref[1], depth + 1)
            if v is None and (tref[1] in GLOBALS or tref[1] in TS_TYPES or tref[1] in _PROMISES):
                return EXT
            return v
        if t == "g":
            base, args = tref[1], tref[2]
            if base[0] == "n" and args and not self._declared_type(rel, si, base[1]):
                if base[1] in _SAME_TYPE:
                    return self.type_value(rel, si, args[0], depth + 1, this)
                if base[1] in _PROMISES:
                    inner = self.type_value(rel, si, args[0], depth + 1, this)
                    return ("promise", inner) if inner is not None else EXT
                if base[1] in _ARRAYS:
                    return ("arr", rel, si, args[0])
                if base[1] in _MAPS and len(args) == 2:
                    return ("map", rel, si, args[1])
                if base[1] == "Awaited":
                    inner = self.type_value(rel, si, args[0], depth + 1, this)
                    return inner[1] if inner is not None and inner[0] == "promise" else inner
            return self.type_value(rel, si, base, depth + 1, this)
        if t == "q":
            b = self.ev(rel, si, tref[1], depth + 1)
            if b is None:
                return None
            if b[0] == "mod":
                return self.type_export(b[1], tref[2], depth + 1)
            if b[0] == "obj":  # a namespace: its exported types are declared in its scope
                facts = self._facts(b[1])
                sc = facts.scopes[b[2]] if facts is not None and 0 <= b[2] < len(facts.scopes) else None
                if sc is not None and tref[2] in sc.types:
                    return self.lookup_type(b[1], b[2], tref[2], depth + 1)
                return self.attr(b, tref[2], depth + 1)
            return EXT if b == EXT else None
        if t == "u":
            return _union([self.type_value(rel, si, m, depth + 1, this) for m in tref[1]])
        if t == "this":
            if this is not None:
                return this
            return self.ev(rel, si, ("this",), depth + 1)
        if t == "fn":
            return ("fnv", rel, si, tref[1], tref[2] if len(tref) > 2 else ())
        if t == "obj":
            return ("shape", rel, si, tref[1])
        if t == "typeof":
            return self.ev(rel, si, tref[1], depth + 1)
        if t == "idx":
            return self.attr(self.type_value(rel, si, tref[1], depth + 1, this), tref[2], depth + 1)
        if t == "arr":
            return ("arr", rel, si, tref[1])
        if t == "ext":
            return EXT
        return None

    def _declared_type(self, rel: str, si: int, name: str) -> bool:
        """Whether ``name`` is declared as a type in scope ``si`` or around it (shadowing the
        standard library's ``Promise``, ``Partial`` …)."""
        facts = self._facts(rel)
        idx = si
        while facts is not None and idx >= 0:
            sc = facts.scopes[idx]
            if name in sc.types or name in sc.names:
                return True
            idx = sc.parent
        return False

    def lookup_type(self, rel: str, si: int, name: str, depth: int = 0):
        """The value of a value of the type named ``name`` in scope ``si``: interfaces, type
        aliases and type parameters (the type namespace) first, then classes and imports."""
        facts = self._facts(rel)
        idx = si
        while facts is not None and idx >= 0:
            sc = facts.scopes[idx]
            d = sc.types.get(name)
            if d is not None:
                if d[0] == "tp":
                    return self.type_value(rel, idx, d[1], depth + 1)
                return self._named_type(rel, d[1], depth + 1)
            for r in sc.names.get(name, ()):
                if r[0] == "def" and self._kind(rel, r[1]) == "class":
                    return ("inst", rel, r[1])
                if r[0] == "imp":
                    m = self.module(r[1], rel)
                    if m[0] == "file":
                        return self.type_export(m[1], r[2], depth + 1) if r[2] != "*" else ("mod", m[1])
                    return EXT if m[0] in ("package", "builtin") else None
                if r[0] == "ns":
                    return ("obj", rel, r[1], r[2])
            if sc.names.get(name):
                return None  # a value of that name: not a type we know
            idx = sc.parent
        return None

    def _named_type(self, rel: str, qual: str, depth: int):
        facts = self._facts(rel)
        cls = facts.classes.get(qual) if facts is not None else None
        if cls is None:
            return None
        if cls.kind == "alias":
            return self._memo(("alias", rel, qual), lambda: self.type_value(rel, cls.scope, cls.supers[0], depth + 1))
        return ("inst", rel, qual)

    def type_export(self, rel: str, name: str, depth: int = 0):
        """The type exported as ``name`` by file ``rel`` (followed through re-exports and
        ``export *``), as ``type_value`` gives it; None when unknown."""
        if depth > MAX_DEPTH:
            return None
        key = ("type-export", rel, name)
        if key in self._active:
            self._cuts += 1
            return None
        self._active.add(key)
        try:
            return self._memo(key, lambda: self._type_export(rel, name, depth))
        finally:
            self._active.discard(key)

    def _type_export(self, rel: str, name: str, depth: int):
        facts = self._facts(rel)
        if facts is None:
            return None
        ref = facts.exports.get(name)
        if ref is not None:
            if ref[0] == "n":
                return self.lookup_type(rel, 0, ref[1], depth + 1)
            if ref[0] == "imp":
                m = self.module(ref[1], rel)
                if m[0] == "file":
                    return ("mod", m[1]) if ref[2] == "*" else self.type_export(m[1], ref[2], depth + 1)
                return EXT if m[0] in ("package", "builtin") else None
            return None
        for spec in facts.stars:
            m = self.module(spec, rel)
            if m[0] == "file":
                v = self.type_export(m[1], name, depth + 1)
                if v is not None:
                    return v
            elif m[0] in ("package", "builtin"):
                return EXT
        return None

    # -- callbacks ---------------------------------------------------------------------------------
    def callback_param(self, rel: str, osi: int, fref: tuple, i: int, j: int, depth: int = 0,
                       expected: tuple | None = None):
        """The value of parameter ``j`` of a function passed as argument ``i`` of a call of
        ``fref`` (scope ``osi``): from the callee's declared type of that parameter, when it is
        a function type (directly, through an alias, a union member or a type parameter's
        constraint)."""
        if fref[0] == "a":
            recv = self.ev(rel, osi, fref[1], depth + 1)
            if recv is not None and recv[0] == "arr":  # xs.forEach((x) => …), xs.reduce((acc, x) => …)
                k = _ELEMENT_CALLBACKS.get(fref[2])
                return self.type_value(recv[1], recv[2], recv[3], depth + 1) if i == 0 and j == k else None
            if recv is not None and recv[0] == "map":  # m.forEach((value, key) => …)
                ok = fref[2] == "forEach" and i == 0 and j == 0
                return self.type_value(recv[1], recv[2], recv[3], depth + 1) if ok else None
            f = self.attr(recv, fref[2], depth + 1)
        else:
            recv, f = None, self.ev(rel, osi, fref, depth + 1)
        for g in (f[1] if f is not None and f[0] == "union" else (f,)):
            if g is None:
                continue
            if g[0] == "fnv":
                if i < len(g[4]):
                    got = self._fn_param(g[1], g[2], g[4][i], j, recv, depth + 1)
                    if got is not None:
                        return got
                continue
            if g[0] != "sym" or g[3] not in ("function", "method"):
                continue
            facts = self._facts(g[1])
            p = facts.params.get(g[2]) if facts is not None else None
            if p is None or i >= len(p[1]):
                continue
            subst = self._type_arguments(g[1], g[2], rel, osi, expected) if expected is not None else {}
            got = self._fn_param(g[1], p[0], p[1][i], j, recv, depth + 1, subst)
            if got is not None:
                return got
        return None

    def _type_arguments(self, frel: str, fqual: str, rel: str, osi: int, expected: tuple) -> dict:
        """Type parameters of function ``fqual`` fixed by the type its result is expected to
        have: the callee returns ``G<T, …>`` and the variable is declared ``G<X, …>`` ->
        ``{T: (rel, osi, X)}``."""
        facts = self._facts(frel)
        res = facts.results.get(fqual) if facts is not None else None
        if res is None or res[1][0] != "t":
            return {}
        ret = res[1][1]
        if ret[0] != "g" or expected[0] != "g" or _last_name(ret[1]) != _last_name(expected[1]):
            return {}
        return {a[1]: (rel, osi, x) for a, x in zip(ret[2], expected[2]) if a[0] == "n"}

    def _fn_param(self, rel: str, si: int, tref: tuple, j: int, recv, depth: int, subst: dict | None = None):
        for _ in range(12):
            t = tref[0]
            if t == "fn":
                ps = tref[2] if len(tref) > 2 else ()
                if j >= len(ps):
                    return None
                if subst and ps[j][0] == "n" and ps[j][1] in subst:
                    at = subst[ps[j][1]]
                    return self.type_value(at[0], at[1], at[2], depth + 1)
                return self.type_value(rel, si, ps[j], depth + 1, this=recv)
            if t == "u":
                for m in tref[1]:
                    got = self._fn_param(rel, si, m, j, recv, depth + 1, subst) if m[0] in ("fn", "n", "g", "q") else None
                    if got is not None:
                        return got
                return None
            if t == "g":
                tref = tref[1]
                continue
            if t in ("n", "q"):
                where = self.type_syntax(rel, si, tref, depth + 1)
                if where is None:
                    return None
                rel, si, tref = where
                continue
            return None
        return None

    def type_syntax(self, rel: str, si: int, tref: tuple, depth: int = 0):
        """Where a type name is defined as syntax: ``(file, scope, tref)`` of a type alias's
        aliased type or a type parameter's constraint (followed through imports, re-exports and
        namespaces); None for anything else."""
        if depth > MAX_DEPTH:
            return None
        if tref[0] == "q":
            b = self.ev(rel, si, tref[1], depth + 1)
            if b is None:
                return None
            if b[0] == "mod":
                return self._type_syntax_export(b[1], tref[2], depth + 1)
            if b[0] == "obj":
                return self.type_syntax(b[1], b[2], ("n", tref[2]), depth + 1)
            return None
        name = tref[1]
        facts = self._facts(rel)
        idx = si
        while facts is not None and idx >= 0:
            sc = facts.scopes[idx]
            d = sc.types.get(name)
            if d is not None:
                if d[0] == "tp":
                    return (rel, idx, d[1])
                cls = facts.classes.get(d[1])
                return (rel, cls.scope, cls.supers[0]) if cls is not None and cls.kind == "alias" else None
            for r in sc.names.get(name, ()):
                if r[0] == "imp":
                    m = self.module(r[1], rel)
                    return self._type_syntax_export(m[1], r[2], depth + 1) if m[0] == "file" else None
            if sc.names.get(name):
                return None
            idx = sc.parent
        return None

    def _type_syntax_export(self, rel: str, name: str, depth: int):
        key = ("type-syntax", rel, name)
        if key in self._active or depth > MAX_DEPTH:
            self._cuts += 1
            return None
        self._active.add(key)
        try:
            facts = self._facts(rel)
            if facts is None:
                return None
            ref = facts.exports.get(name)
            if ref is not None:
                if ref[0] == "n":
                    return self.type_syntax(rel, 0, ref, depth + 1)
                if ref[0] == "imp" and ref[2] != "*":
                    m = self.module(ref[1], rel)
                    return self._type_syntax_export(m[1], ref[2], depth + 1) if m[0] == "file" else None
                return None
            for spec in facts.stars:
                m = self.module(spec, rel)
                if m[0] == "file":
                    got = self._type_syntax_export(m[1], name, depth + 1)
                    if got is not None:
                        return got
            return None
        finally:
            self._active.discard(key)

    # -- calls -------------------------------------------------------------------------------------
    def call_result(self, rel: str, si: int, fref: tuple, depth: int = 0):
        """The value calling ``fref`` returns (from the callee's declared return type or its
        ``return`` values; a method returning ``this`` returns its receiver)."""
        recv = None
        if fref[0] == "a":
            recv = self.ev(rel, si, fref[1], depth + 1)
            f = self.attr(recv, fref[2], depth + 1)
        else:
            f = self.ev(rel, si, fref, depth + 1)
        return self.result_of(f, recv, depth + 1)

    def result_of(self, f, recv, depth: int = 0):
        if f is None or depth > MAX_DEPTH:
            return None
        t = f[0]
        if t == "ext":
            return EXT
        if t == "union":
            return _union([self.result_of(x, recv, depth + 1) for x in f[1]])
        if t in ("fnv", "extf"):
            return self.type_value(f[1], f[2], f[3], depth + 1, this=recv)
        if t != "sym" or f[3] not in ("function", "method"):
            return None
        facts = self._facts(f[1])
        res = facts.results.get(f[2]) if facts is not None else None
        if res is None:
            return None
        si, ref = res
        if recv is not None and recv[0] in ("inst", "union") and _mentions_this(ref):
            if ref[0] == "t":
                return self.type_value(f[1], si, ref[1], depth + 1, this=recv)
            return _union([recv if r == ("this",) else self.ev(f[1], si, r, depth + 1) for r in ref[1]])
        return self._memo(("result", f[1], f[2]), lambda: self.ev(f[1], si, ref, depth + 1))

    def member(self, rel: str, cls_qual: str, name: str, depth: int = 0):
        """A method of a workspace class or of its workspace base classes; ``("ext",)`` when
        the chain reaches an external base."""
        seen = set()
        while (rel, cls_qual) not in seen and depth <= MAX_DEPTH:
            seen.add((rel, cls_qual))
            facts = self._facts(rel)
            cls = facts.classes.get(cls_qual) if facts is not None else None
            if cls is None:
                return None
            q = cls.members.get(name)
            if q is not None:
                if name in cls.getters:  # read as a property: the getter's result
                    return self.result_of(("sym", rel, q, "method"), ("inst", rel, cls_qual), depth + 1)
                return ("sym", rel, q, "method")
            fld = cls.fields.get(name)
            if fld is not None:
                return self.ev(rel, fld[0], fld[1], depth + 1)
            if cls.kind == "alias":
                return self.attr(self._named_type(rel, cls_qual, depth + 1), name, depth + 1)
            if cls.kind == "interface":
                return self._super_member(rel, cls, name, seen, depth + 1)
            if cls.heritage is None:
                return None
            b = self.ev(rel, cls.outer, cls.heritage, depth + 1)
            if b is None:
                return None
            if b[0] == "ext":
                return ("ext",)
            if b[0] != "sym" or b[3] != "class":
                return None
            rel, cls_qual = b[1], b[2]
            depth += 1
        return None

    def _super_member(self, rel: str, cls, name: str, seen: set, depth: int):
        """``name`` in the interfaces an interface extends (the first that has it)."""
        found_ext = False
        for sup in cls.supers:
            v = self.type_value(rel, cls.scope, sup, depth + 1)
            if v is None:
                continue
            if v == EXT:
                found_ext = True
                continue
            if v[0] == "inst" and (v[1], v[2]) in seen:
                continue
            m = self.attr(v, name, depth + 1)
            if m is not None and m != EXT:
                return m
            found_ext = found_ext or m == EXT
        return EXT if found_ext else None

    def type_heritage(self, rel: str, cls, out) -> None:
        """``INHERITS`` edges of an interface to the interfaces it extends and of a class to the
        interfaces it implements (workspace ones), appended to ``out.inherits``."""
        if cls.kind == "alias":
            return
        for sup in cls.supers:
            v = self.type_value(rel, cls.scope, sup)
            if v is not None and v[0] == "inst":
                edge = (cls.qual, v[1], v[2])
                if edge not in out.inherits:
                    out.inherits.append(edge)

    # -- binding -----------------------------------------------------------------------------------
    def targets(self, rel: str, si: int, ref: tuple) -> tuple[list[tuple[str, str, str]], bool]:
        """Workspace targets ``[(file, qual, resolved)]`` of a call site and whether it stayed
        unknown."""
        if ref[0] == "jsx":  # <C/>: the component C is called
            out, unknown = self.targets(rel, si, ref[1])
            return [(f, q, "jsx") for f, q, _ in out], unknown
        if ref[0] == "new":
            v = self.ev(rel, si, ref[1])
            if v is not None and v[0] == "sym" and v[3] == "class":
                out = [(v[1], v[2], "class")]
                ctor = self.member(v[1], v[2], "constructor")
                if ctor is not None and ctor[0] == "sym":
                    out.append((ctor[1], ctor[2], "init"))
                return out, False
            return [], v is None
        v = self.ev(rel, si, ref)
        if v is None:
            return [], True
        if v[0] == "union":  # a call on a union: each member that has the method
            syms = [x for x in v[1] if x[0] == "sym" and x[3] in ("function", "method")]
            how = self._how(rel, si, ref, "")
            return [(x[1], x[2], how) for x in syms], not syms
        if v[0] == "sym":
            if v[3] in ("function", "method"):
                return [(v[1], v[2], self._how(rel, si, ref, v[1]))], False
            if v[3] == "class":
                return [(v[1], v[2], "class")], False
            return [], True
        if v[0] == "mod":  # calling a module: its ``module.exports`` / ``export =`` value
            facts = self._facts(v[1])
            if facts is not None and "=" in facts.exports:
                w = self.ev(v[1], 0, facts.exports["="])
                if w is not None and w[0] == "sym" and w[3] in ("function", "method", "class"):
                    return [(w[1], w[2], "import")], False
            return [], True
        if v[0] in ("ext", "extf"):
            return [], False
        return [], True

    def _how(self, rel: str, si: int, ref: tuple, dst_file: str) -> str:
        """How a call bound (``CALLS.resolved``): local | import | self | module | instance |
        class | attribute."""
        if ref[0] == "n":
            return "local" if dst_file == rel else "import"
        if ref[0] == "a":
            if ref[1] == ("this",):
                return "self"
            if ref[1] == ("super",):
                return "super"
            how = self._provenance(rel, si, ref[1])
            return how or receiver_kind(self.ev(rel, si, ref[1]))
        if ref[0] == "call":
            return "return"
        return "other"

    def _provenance(self, rel: str, si: int, ref: tuple, depth: int = 0) -> str | None:
        """``"return"`` when a receiver's value came from a call's result, ``"type"`` when from
        a declared type (annotation, cast, JSDoc, a callee's parameter type), else None."""
        while depth < 8:
            t = ref[0]
            if t == "call":
                return "return"
            if t in ("t", "cbp"):
                return "type"
            if t in ("a", "await", "elem"):
                ref = ref[1]
            elif t == "n":
                facts = self._facts(rel)
                idx = si
                refs = None
                while facts is not None and idx >= 0:
                    refs = facts.scopes[idx].names.get(ref[1])
                    if refs:
                        break
                    idx = facts.scopes[idx].parent
                if not refs or len(refs) != 1:
                    return None
                ref, si = refs[0], idx
            else:
                return None
            depth += 1
        return None



def _union(values: list):
    """One value for several: the only workspace value, else ``("union", …)`` of the workspace
    values (deduplicated; external members dropped beside them: ``Foo | undefined``); all
    external -> external; None when no workspace value is known and some member is unknown."""
    ws: list = []
    for v in values:
        for x in (v[1] if v is not None and v[0] == "union" else (v,)):
            if x is not None and x != EXT and x not in ws:
                ws.append(x)
    if ws:
        # the shape of the Python resolver's unions (members, "some member unknown"): py_edges.receiver_kind reads it
        return ws[0] if len(ws) == 1 else ("union", tuple(ws[:_MAX_UNION]), False)
    return EXT if values and all(v == EXT for v in values) else None


def _last_name(tref: tuple) -> str | None:
    """The name a type reference ends with (``ns.G`` -> ``G``)."""
    if tref[0] == "n":
        return tref[1]
    if tref[0] == "q":
        return tref[2]
    return None


def _mentions_this(ref: tuple) -> bool:
    """Whether a function's result ref depends on its receiver (``this`` type, ``return this``)."""
    if ref[0] == "t":
        tref = ref[1]
        return tref == ("this",) or (tref[0] == "u" and ("this",) in tref[1])
    return ref[0] == "alt" and ("this",) in ref[1]
