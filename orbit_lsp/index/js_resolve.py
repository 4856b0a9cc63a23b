"""Cross-file resolution for JavaScript/TypeScript: imports, exports and call binding.

Input: the ``JsFacts`` of every JS/TS file and the set of indexed paths; output per file a
``py_edges.FileEdges`` (the same shape the Python resolver produces, so the indexer and the writer
treat both alike). Specifiers are looked up with ``js_modules.JsModules``; names are followed
through imports, re-exports and ``export *`` barrels (cycles cut) to the file that defines them.

Calls bind (``js_bind.JsBinder``) only when the callee's value can be followed: local definitions, imported bindings
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

from orbit_lsp.index.js_bind import MAX_DEPTH, JsBinder
from orbit_lsp.index.js_facts import JsFacts
from orbit_lsp.index.js_modules import JsModules
from orbit_lsp.index.py_edges import FileEdges

JS_UNIT = "<js>"
# ``JsImport.kind`` of the specifiers that exist for types only (``import type``, ``import { type
# A }``, ``export type … from``, ``import("./x").T`` in a type): an IMPORTS edge all of whose
# specifiers are of these kinds is ``type_only``
TYPE_ONLY_KINDS = frozenset({"type", "type-reexport", "type-star"})
CONFIG = "<config>"  # deps entity (CONFIG, "abs path\0stamp") of a config a resolution read


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
    ``py_interface.changed_entities``): the whole file is one entity."""
    if old is None or new is None or old.interface() != new.interface():
        return {(rel, JS_UNIT)}, set()
    return set(), set()


class JsResolver(JsBinder):
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
        if key in self._active or depth > MAX_DEPTH:
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

    def resolve_file(self, rel: str) -> FileEdges:
        """Bind the imports, calls and base classes of one JS/TS file."""
        facts = self.facts[rel]
        self._deps = set()
        out = FileEdges()
        runtime: set[str] = set()  # files imported by at least one specifier that is not type-only
        for imp in facts.imports:
            m = self.module(imp.spec, rel)
            if m[0] == "file":
                if m[1] != rel and imp.line < out.imports.get(m[1], imp.line + 1):
                    out.imports[m[1]] = imp.line  # the first line that imports it
                if imp.kind not in TYPE_ONLY_KINDS:
                    runtime.add(m[1])
            elif m[0] in ("package", "builtin"):
                key = "npm:" + m[1] if m[0] == "package" else m[1]  # see py_edges.package_info
                if imp.line < out.packages.get(key, imp.line + 1):
                    out.packages[key] = imp.line
            elif m[0] == "missing":
                out.unresolved_imports.append(f"{imp.line}:{imp.spec}")
        out.type_only = {dst for dst in out.imports if dst not in runtime}
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
            self.type_heritage(rel, cls, out)  # interfaces extended, implemented (js_bind)
            if cls.heritage is None:
                continue
            b = self.ev(rel, cls.outer, cls.heritage)
            if b is not None and b[0] == "sym" and b[3] == "class":
                edge = (cls.qual, b[1], b[2])
                if edge not in out.inherits:
                    out.inherits.append(edge)
        out.deps = frozenset(e for e in self._deps if e[0] != rel)
        self._deps = set()
        out.sort_sites()
        return out
