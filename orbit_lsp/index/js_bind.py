"""Evaluation of JS/TS value references and binding of call sites (the half of the resolver
that follows values; ``js_resolve.JsResolver`` adds modules, exports and the per-file result).

Values (tuples): ``("sym", file, qual, kind)`` a workspace definition, ``("mod", file)`` a module
namespace, ``("inst", file, class qual)`` an instance of a workspace class, ``("obj", file,
scope, items)`` an object literal, ``("ext",)`` something outside the workspace (globals,
packages); None when unknown. Unknown calls are counted by the caller, never matched by name.
"""

from __future__ import annotations

from orbit_lsp.index.js_facts import JsFacts
from orbit_lsp.index.resolve import receiver_kind

MAX_DEPTH = 60
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
    ``_cuts`` (an int) and ``_kinds`` (a dict)."""

    facts: dict[str, JsFacts]

    def lookup(self, rel: str, si: int, name: str, depth: int):
        facts = self._facts(rel)
        idx = si
        while idx >= 0:
            sc = facts.scopes[idx]
            refs = sc.names.get(name)
            if refs:
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
            cls = facts.scopes[si].this_class if facts is not None else None
            return ("inst", rel, cls) if cls else None
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
        return None

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
                return ("sym", rel, q, "method")
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
        if v[0] == "ext":
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
            return receiver_kind(self.ev(rel, si, ref[1]))
        return "other"

