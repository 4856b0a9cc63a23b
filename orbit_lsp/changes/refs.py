"""Functions used as values: the scopes that reference a function or method without calling it
(``staticmethod(_lazy_sha1)`` in a class body, ``self.add_command(routes_command)``,
``max_age=self.get_send_file_max_age``). The value may be called anywhere later, by workspace
code or by a library it is handed to (click, werkzeug, itsdangerous); but it can only be called
after a reference to it was evaluated, so the code that runs the referencing scope is where a
change of the function can show: the referencing scope counts as a caller of it.

Only references that name the function for certain are taken (never a name alone):

- a top-level function ``f`` of module ``m``: the bare name ``f`` in ``m`` itself, or in a module
  that imports it at its top level (``from m import f``, ``from m import f as g``), in a scope
  that does not bind that name itself;
- a method ``C.f``: ``self.f`` / ``cls.f`` (the first parameter of a method) in the methods of
  ``C`` and of its subclasses (``INHERITS``).

A reference inside a lambda or a comprehension belongs to the function around it; one in a
decorator, a default value or a class's bases to the scope around the definition. Source is
read from the change's new version; files are parsed once per content (``PARSED``). The
importers of a module imported by more than ``MAX_IMPORTERS`` files are not read (only the
module itself is): a bound on the time, at the cost of missing such references.
"""

from __future__ import annotations

import ast
from typing import Callable

from orbit_lsp.changes.broken import _bound_in_scopes, _module_of_import, _parents, parse_cached
from orbit_lsp.graph import queries
from orbit_lsp.graph.connection import Graph
from orbit_lsp.index.py_edges import full_qual, module_name
from orbit_lsp.lru import LRU
from orbit_lsp.index.fingerprint import content_digest

PARSED = LRU(512)  # content digest -> Parsed | None
MAX_IMPORTERS = 200  # importers of a module read for references to one of its functions, at most


class Parsed:
    """One parsed file: its tree, each node's parent, and the value uses by name: ``names``
    (bare names read and not called) and ``attrs`` (``x.name`` read and not called, ``x`` a
    bare name), each name -> [node]; ``bound`` caches ``_bound_in_scopes``."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.parents = _parents(tree)
        self.names: dict[str, list[ast.Name]] = {}
        self.attrs: dict[str, list[ast.Attribute]] = {}
        self.bound: dict[tuple[str, str], bool] = {}
        called = {id(n.func) for n in self.parents if isinstance(n, ast.Call)}
        for node in self.parents:
            if id(node) in called:
                continue
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.names.setdefault(node.id, []).append(node)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name):
                self.attrs.setdefault(node.attr, []).append(node)

    def bound_in_scopes(self, scope: str, name: str) -> bool:
        key = (scope, name)
        if key not in self.bound:
            self.bound[key] = _bound_in_scopes(self.tree, scope, name)
        return self.bound[key]


def _tree(data: bytes) -> Parsed | None:
    key = content_digest(data)
    found, got = PARSED.lookup(key)
    if not found:
        tree = parse_cached(data)
        got = Parsed(tree) if tree is not None else None
        PARSED.put(key, got)
    return got


def _scope(node: ast.AST, parents: dict) -> tuple[str, str]:
    """(in-file qual, kind) of the scope a node is evaluated in: "" / "module", a class body,
    or a function or method (lambdas and comprehensions count as the function around them)."""
    names: list[str] = []
    kinds: list[str] = []
    child, cur = node, parents.get(node)
    while cur is not None:
        if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and child in cur.body:
            names.append(cur.name)
            kinds.append("class" if isinstance(cur, ast.ClassDef) else "function")
        child, cur = cur, parents.get(cur)
    if not names:
        return "", "module"
    kind = kinds[0]
    if kind == "function" and len(kinds) > 1 and kinds[1] == "class":
        kind = "method"
    return ".".join(reversed(names)), kind


def _top_imports(tree: ast.Module, importer: str, module: str, name: str, root_package: str) -> set[str]:
    """The names module ``importer`` binds at its top level to ``module``'s ``name``."""
    out = set()
    for node in tree.body:
        stmts = [node]
        if isinstance(node, (ast.If, ast.Try)):
            stmts = [*node.body, *getattr(node, "orelse", [])]
        for s in stmts:
            if isinstance(s, ast.ImportFrom) and _module_of_import(s, importer, root_package) == module:
                out |= {a.asname or a.name for a in s.names if a.name == name}
    return out


def referrers(graph: Graph, ans: queries.Answer, read: Callable[[str], bytes | None],
              importers: dict[str, tuple[str, ...]], syms: list[dict], root_package: str,
              max_reads: int = 1000) -> list[dict]:
    """The scopes referencing each of ``syms`` (rows with "file", "qual" (graph qual), "name",
    "kind") as a value. Returns graph symbol rows (``queries.SYMBOL_FIELDS`` keys) + "of" (the
    qual referenced) and "ref_line"; one row per (scope, symbol referenced). At most
    ``max_reads`` files are read (a bound on the time; ``syms`` come nearest first)."""
    found: dict[tuple[str, str], tuple[str, int]] = {}  # (file, scope graph qual) -> (qual of, line)
    methods = [s for s in syms if s["kind"] == "method"]
    subclasses: dict[tuple[str, str], list[tuple[str, str]]] = {}
    if methods:
        classes = sorted({(s["file"], s["qual"].rpartition(".")[0]) for s in methods})
        rows = ans.run(graph, "UNWIND $c AS c MATCH (k:Symbol {qual: c[1]}) WHERE k.file = c[0] "
                              "OPTIONAL MATCH (s:Symbol)-[:INHERITS*1..8]->(k) "
                              "RETURN c[0], c[1], collect(DISTINCT [s.file, s.qual])", {"c": [list(c) for c in classes]})
        for cfile, cqual, subs in rows:
            subclasses[(cfile, cqual)] = [(cfile, cqual)] + [(x[0], x[1]) for x in subs if x and x[0] is not None]

    def note(file: str, scope: str, of: str, line: int) -> None:
        key = (file, full_qual(file, scope, root_package))
        if key not in found or line < found[key][1]:
            found[key] = (of, line)

    reads = 0

    def read_counted(path: str) -> bytes | None:
        nonlocal reads
        reads += 1
        return read(path) if reads <= max_reads else None

    for s in syms:
        name = s["name"]
        if not name.isidentifier() or reads > max_reads:
            continue
        mod = module_name(s["file"], root_package)
        local = s["qual"][len(mod) + 1:] if s["qual"].startswith(mod + ".") else None
        if s["kind"] == "function" and local == name:  # a top-level function
            users = importers.get(s["file"], ())
            if len(users) > MAX_IMPORTERS:
                users = ()  # a module nearly everything imports: its own file only (bounded time)
            for path in (s["file"], *users):
                data = read_counted(path) if path.endswith(".py") else None
                if data is None or name.encode() not in data:
                    continue
                got = _tree(data)
                if got is None:
                    continue
                aliases = {name} if path == s["file"] else _top_imports(got.tree, path, mod, name, root_package)
                for alias in aliases:
                    for node in got.names.get(alias, ()):
                        scope, kind = _scope(node, got.parents)
                        if kind in ("function", "method") and got.bound_in_scopes(scope, alias):
                            continue  # the name is a local of that function
                        note(path, scope, s["qual"], node.lineno)
        elif s["kind"] == "method":
            for cfile, cqual in subclasses.get((s["file"], s["qual"].rpartition(".")[0]), []):
                data = read_counted(cfile)
                if data is None or name.encode() not in data:
                    continue
                got = _tree(data)
                if got is None:
                    continue
                cls_local = cqual[len(module_name(cfile, root_package)) + 1:]
                for node in got.attrs.get(name, ()):
                    scope, _kind = _scope(node, got.parents)
                    method = _method_of(got.tree, cls_local, scope)
                    if method is None or _first_param(method) != node.value.id:
                        continue
                    note(cfile, scope, s["qual"], node.lineno)
    if not found:
        return []
    rows = ans.run(graph, f"UNWIND $t AS t MATCH (s:Symbol {{qual: t[1]}}) WHERE s.file = t[0] "
                          f"RETURN {queries.SYMBOL_FIELDS}", {"t": sorted([f, q] for f, q in found)})
    out = []
    for r in rows:
        sym = queries._sym(r)
        of, line = found[(sym["file"], sym["qual"])]
        out.append(dict(sym, of=of, ref_line=line))
    return sorted(out, key=lambda r: (r["file"], r["line"] or 0, r["qual"]))


def _method_of(tree: ast.Module, cls_local: str, scope: str):
    """The method of class ``cls_local`` (in-file qual) that ``scope`` is or is nested in."""
    if not scope.startswith(cls_local + "."):
        return None
    body = tree.body
    node = None
    for part in cls_local.split("."):
        node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    first = scope[len(cls_local) + 1:].split(".")[0]
    return next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == first), None)


def _first_param(fn) -> str | None:
    if any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list):
        return None
    params = [*fn.args.posonlyargs, *fn.args.args]
    return params[0].arg if params else None
