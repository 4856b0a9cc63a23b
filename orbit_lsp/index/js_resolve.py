"""Cross-file resolution for JavaScript/TypeScript: imports, exports and call binding.

Input: the ``JsFacts`` of every JS/TS file and the set of indexed paths; output per file a
``resolve.FileEdges`` (the same shape the Python resolver produces, so the indexer and the writer
treat both alike). Specifiers are looked up with ``js_modules.JsModules``; names are followed
through imports, re-exports and ``export *`` barrels (cycles cut) to the file that defines them.

Calls bind only when the callee's value can be followed: local definitions, imported bindings
(named, default, namespace ``ns.f``), ``require`` aliases and destructuring, ``this.m()`` in a
class (and inherited methods of workspace classes), ``new C()`` (the class, and its
``constructor`` when it has one), members of object literals, JSX elements ``<C/>`` (resolved
``jsx``) and decorators (``@d`` is a call of ``d``, resolved ``decorator``; calls in decorators
belong to the decorated definition). Calls of globals (``console.log``,
``JSON.stringify``) and of external packages are known-external; everything else is counted on
the caller as unresolved, never matched by name.

Dependencies are recorded per consulted file (entity ``(file, JS_UNIT)``): an interface change
of a file re-resolves the files that consulted it.
"""

from __future__ import annotations

from pathlib import Path

from orbit_lsp.index.javascript import JsFacts
from orbit_lsp.index.js_modules import JsModules
from orbit_lsp.index.resolve import FileEdges, receiver_kind

JS_UNIT = "<js>"
CONFIG = "<config>"  # deps entity (CONFIG, "abs path\0stamp") of a config a resolution read
_MAX_DEPTH = 60
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


def configs_changed(deps_sets) -> bool:
    """True when a config or ``package.json`` that a resolution read (``CONFIG`` entities in
    ``FileEdges.deps``) differs now (edited, created or deleted)."""
    from orbit_lsp.index.js_modules import stamp

    seen: dict[str, str] = {}
    for deps in deps_sets:
        for e in deps:
            if e[0] == CONFIG:
                path, _, old = e[1].partition("\0")
                now = seen.get(path)
                if now is None:
                    now = seen[path] = stamp(path)
                if now != old:
                    return True
    return False


def changed_entities(rel: str, old, new) -> tuple[set[tuple], set[tuple]]:
    """``(changed, moved)`` entities of a JS/TS file between two versions (see
    ``resolve.changed_entities``): the whole file is one entity."""
    if old is None or new is None or old.interface() != new.interface():
        return {(rel, JS_UNIT)}, set()
    return set(), set()


class JsResolver:
    """Binds the JS/TS files of one workspace. ``facts``: path -> JsFacts; ``files``: every
    indexed path; ``root``: the workspace root (configs and ``package.json`` files are read
    from it)."""

    def __init__(self, facts: dict[str, JsFacts], files: set[str], aliases: dict[str, str] | None,
                 root: Path | str):
        self.facts = facts
        self.files = files
        self.modules = JsModules(root, files, aliases)
        self._spec_memo: dict[tuple[str, str], tuple] = {}
        self._export_memo: dict[tuple[str, str], tuple] = {}  # (file, name) -> (value, files consulted)
        self._deps: set[tuple] = set()
        self._active: set = set()
        self._cuts = 0  # evaluations cut short by a cycle so far
        self._kinds: dict[str, dict[str, str]] = {}  # file -> symbol qual -> kind

    def set_facts(self, rel: str, facts: JsFacts | None) -> None:
        self._kinds.pop(rel, None)
        if facts is None:
            self.facts.pop(rel, None)
        else:
            self.facts[rel] = facts

    def invalidate(self, entities) -> int:
        """Forget the memoised exports that consulted one of ``entities`` (specifier lookups
        depend on the module table only and stay). Returns how many were forgotten."""
        files = {e[0] for e in entities}
        stale = [k for k, (_, deps) in self._export_memo.items() if not files.isdisjoint(f for f, _ in deps)]
        for k in stale:
            del self._export_memo[k]
        return len(stale)

    # -- modules -----------------------------------------------------------------------------------
    def module(self, spec: str, importer: str) -> tuple:
        key = (importer, spec)
        hit = self._spec_memo.get(key)
        if hit is None:
            hit = self._spec_memo[key] = self.modules.resolve_with_sources(spec, importer)
        for src in hit[1]:
            self._deps.add((CONFIG, src + "\0" + self.modules.stamps.get(src, "missing")))
        return hit[0]

    def _facts(self, rel: str) -> JsFacts | None:
        self._deps.add((rel, JS_UNIT))
        return self.facts.get(rel)

    def export(self, rel: str, name: str, depth: int = 0):
        """Value of export ``name`` of file ``rel`` (``"*"``: the module namespace), following
        re-exports and ``export *`` (cycles cut), or None."""
        if name == "*":
            return ("mod", rel)
        hit = self._export_memo.get((rel, name))
        if hit is not None:
            self._deps |= hit[1]
            return hit[0]
        key = ("export", rel, name)
        if key in self._active or depth > _MAX_DEPTH:
            self._cuts += 1
            return None
        saved, self._deps = self._deps, set()
        cut_before = self._cuts
        self._active.add(key)
        try:
            val = self._export(rel, name, depth)
        finally:
            self._active.discard(key)
            deps = self._deps
            self._deps = saved | deps
        if self._cuts == cut_before:  # a value found with a cycle cut depends on where we started
            self._export_memo[(rel, name)] = (val, frozenset(deps))
        return val

    def _export(self, rel: str, name: str, depth: int):
        facts = self._facts(rel)
        if facts is None:
            return None
        ref = facts.exports.get(name)
        if ref is not None:
            return self.ev(rel, 0, ref, depth + 1)
        if name == "default" and "=" in facts.exports:
            return self.ev(rel, 0, facts.exports["="], depth + 1)  # CommonJS interop
        if "=" in facts.exports:
            v = self.ev(rel, 0, facts.exports["="], depth + 1)
            m = self.attr(v, name, depth + 1)
            if m is not None:
                return m
        if name != "default":
            for spec in facts.stars:
                m = self.module(spec, rel)
                if m[0] == "file":
                    v = self.export(m[1], name, depth + 1)
                    if v is not None:
                        return v
                elif m[0] in ("package", "builtin"):
                    return ("ext",)
        return None

    # -- evaluation ---------------------------------------------------------------------------------
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
        if depth > _MAX_DEPTH:
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
        if base is None or depth > _MAX_DEPTH:
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
        while (rel, cls_qual) not in seen and depth <= _MAX_DEPTH:
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

    def resolve_file(self, rel: str) -> FileEdges:
        """Bind the imports, calls and base classes of one JS/TS file."""
        facts = self.facts[rel]
        self._deps = set()
        out = FileEdges()
        for imp in facts.imports:
            m = self.module(imp.spec, rel)
            if m[0] == "file":
                if m[1] != rel and imp.line < out.imports.get(m[1], imp.line + 1):
                    out.imports[m[1]] = imp.line  # the first line that imports it
            elif m[0] in ("package", "builtin"):
                key = "npm:" + m[1] if m[0] == "package" else m[1]  # see resolve.package_info
                if imp.line < out.packages.get(key, imp.line + 1):
                    out.packages[key] = imp.line
            elif m[0] == "missing":
                out.unresolved_imports.append(f"{imp.line}:{imp.spec}")
        for si, sc in enumerate(facts.scopes):
            caller = sc.qual
            for site in sc.calls:
                targets, unknown = self.targets(rel, site.scope if site.scope >= 0 else si, site.ref)
                if site.decorator and unknown and not targets:
                    continue  # a decorator we cannot follow is not a call we failed to bind
                for dst_file, dst_qual, how in targets:
                    out.add_call(caller, dst_file, dst_qual, "decorator" if site.decorator else how, site)
                if unknown and site.name and not site.decorator:
                    out.unresolved.setdefault(caller, []).append(site.name)
                    out.unresolved_lines.setdefault(caller, []).append(site.line)
        for cls in facts.classes.values():
            if cls.heritage is None:
                continue
            b = self.ev(rel, cls.outer, cls.heritage)
            if b is not None and b[0] == "sym" and b[3] == "class":
                edge = (cls.qual, b[1], b[2])
                if edge not in out.inherits:
                    out.inherits.append(edge)
        out.deps = frozenset(e for e in self._deps if e[0] != rel)
        self._deps = set()
        return out
