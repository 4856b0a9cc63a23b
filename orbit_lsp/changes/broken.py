"""Code a change breaks without touching it: the users of a module-level name the change takes
away (a function or class removed or renamed, a constant deleted).

Python looks such a name up when the using code runs, and fails:

- ``from mod import name`` raises ``ImportError`` when that statement runs: at import of the
  importing module when the statement is at its top level (or in a class body), and then every
  module importing that one fails too, transitively (a package's ``__init__.py`` failing fails
  every module of the package); when the importing function runs when it is inside one;
- a bare ``name(...)`` left in the module itself raises ``NameError`` when that code runs (the
  function's own scopes do not bind it).

Not counted (Python does not fail there): an import inside ``try`` whose handler catches
``ImportError`` (or ``Exception``, ``BaseException``, bare ``except``), inside
``if TYPE_CHECKING:``, and modules whose new version may still provide the name (a module
``__getattr__``, a star import).

Facts used: the graph's ``File.unresolved_imports`` (``"line:module.name"``, written by the
resolver for a ``from`` import of a name the module certainly does not bind) and
``Symbol.unresolved_sites`` (``"name@line"``); the import statements and scopes themselves are
read from the new version's source with ``ast``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from orbit_lsp.changes.diff import Change
from orbit_lsp.graph import queries
from orbit_lsp.graph.connection import Graph
from orbit_lsp.index.py_edges import full_qual, module_name
from orbit_lsp.lru import LRU
from orbit_lsp.index.fingerprint import content_digest

CATCHES_IMPORT_ERROR = frozenset({"ImportError", "Exception", "BaseException"})


@dataclass
class Broken:
    """``files``: path -> (removed name, module path it was taken from, line of the use, how)
    for modules whose import now fails; ``functions``: symbol rows (file, qual, name, kind,
    line) + "name" of the removed name they use, "module" it was taken from, "why";
    ``notes`` for the user."""

    files: dict[str, tuple[str, str, int, str]] = field(default_factory=dict)
    functions: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _walk_if(tree: ast.Module, kinds: tuple) -> list:
    """The nodes of ``kinds`` in ``tree`` (walked once per tree, kept)."""
    got = _KIND_NODES.lookup(id(tree))
    if got[0] and got[1][0] is tree:
        return [n for n in got[1][1] if isinstance(n, kinds)]
    nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.NamedExpr, ast.Global))]
    _KIND_NODES.put(id(tree), (tree, nodes))
    return [n for n in nodes if isinstance(n, kinds)]


_KIND_NODES = LRU(256)


def top_level_names(tree: ast.Module) -> tuple[set[str], bool]:
    """Names a module binds at its top level (definitions, assignments, imports, in ``if`` /
    ``try`` / ``with`` / loops too), and whether it may bind others that cannot be listed (a
    star import or a module ``__getattr__``)."""
    names: set[str] = set()
    opaque = False

    def targets(node: ast.expr) -> None:
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                names.add(n.id)

    def body(stmts: list[ast.stmt]) -> None:
        nonlocal opaque
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(s.name)
                opaque |= s.name == "__getattr__"
            elif isinstance(s, ast.Assign):
                for t in s.targets:
                    targets(t)
            elif isinstance(s, (ast.AnnAssign, ast.AugAssign)) and s.target is not None:
                targets(s.target)
            elif isinstance(s, (ast.For, ast.AsyncFor)):
                targets(s.target)
                body(s.body)
                body(s.orelse)
            elif isinstance(s, (ast.With, ast.AsyncWith)):
                for item in s.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars)
                body(s.body)
            elif isinstance(s, ast.Import):
                names.update(a.asname or a.name.split(".")[0] for a in s.names)
            elif isinstance(s, ast.ImportFrom):
                for a in s.names:
                    if a.name == "*":
                        opaque = True
                    else:
                        names.add(a.asname or a.name)
            elif isinstance(s, (ast.If, ast.While)):
                body(s.body)
                body(s.orelse)
            elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
                body(s.body)
                for h in s.handlers:
                    if h.name:
                        names.add(h.name)
                    body(h.body)
                body(s.orelse)
                body(s.finalbody)
            elif isinstance(s, ast.Match):
                for case in s.cases:
                    body(case.body)
            elif isinstance(s, ast.Global):
                names.update(s.names)
        # walrus targets at top level
    body(tree.body)
    for n in _walk_if(tree, (ast.NamedExpr, ast.Global)):
        if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
            names.add(n.target.id)
        elif isinstance(n, ast.Global):
            names.update(n.names)  # a function may bind it at module level when it runs
    return names, opaque


TREES = LRU(64)  # content digest -> ast.Module | None: the change's files are parsed once (a large module's tree is megabytes)


def parse_cached(data: bytes | None) -> ast.Module | None:
    """``ast.parse(data)`` (None when it does not parse), kept per content: the trees are
    only read, never changed."""
    if data is None:
        return None
    key = content_digest(data)
    found, tree = TREES.lookup(key)
    if not found:
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError, RecursionError):
            tree = None
        TREES.put(key, tree)
    return tree


_parse = parse_cached


def removed_names(change: Change, files: list[dict]) -> dict[str, set[str]]:
    """For each modified Python file of ``files`` (``SymbolChanges.files`` rows), the names its
    old version bound at the top level and its new version certainly does not."""
    out: dict[str, set[str]] = {}
    for f in files:
        if f["status"] != "modified" or f["lang"] != "python" or f["parse_error"]:
            continue
        if not _removes_top_level_line(change, f["path"]):
            continue  # every line it takes away is indented: no top-level binding goes
        old, new = _parse(change.old_bytes(f["path"])), _parse(change.new_bytes(f["path"]))
        if old is None or new is None:
            continue
        old_names, _ = top_level_names(old)
        new_names, opaque = top_level_names(new)
        gone = old_names - new_names
        if gone and not opaque:
            out[f["path"]] = gone
    return out


def _removes_top_level_line(change: Change, path: str) -> bool:
    """Whether the change takes away a line that may bind a top-level name (an unindented
    line, or a definition or import at any depth: under a module-level ``if``/``try``)."""
    fd = next((x for x in change.files if x.path == path), None)
    if fd is None:
        return True
    return any(t[:1] not in ("", " ", "\t", "#", "\n", "\r", ")", "]", "}")
               or t.lstrip().startswith(("def ", "async def ", "class ", "import ", "from "))
               for hk in fd.hunks for t in hk.removed_text)


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    out = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            out[child] = node
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return any(isinstance(n, (ast.Name, ast.Attribute)) and (getattr(n, "id", None) or getattr(n, "attr", None))
               == "TYPE_CHECKING" for n in ast.walk(test))


def _context(node: ast.AST, parents: dict, caught: frozenset[str] | None = None) -> tuple[str, str] | None:
    """Where ``node`` runs: ("module", "") at import of its module (top level, class bodies),
    ("function", in-file qual) when that function runs; None when Python does not fail there
    (guarded by a ``try`` catching ``ImportError`` — for a ``NameError``, ``caught`` names what
    counts — or under ``if TYPE_CHECKING``)."""
    caught = CATCHES_IMPORT_ERROR if caught is None else caught
    qual: list[str] = []  # enclosing functions and classes of the scope, innermost first
    in_function = False
    child, cur = node, parents.get(node)
    while cur is not None:
        if not in_function:  # a try or an if outside the function does not guard what it runs later
            if isinstance(cur, ast.Try) and child in cur.body:
                for h in cur.handlers:
                    if h.type is None:
                        return None
                    kinds = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
                    if any((k.attr if isinstance(k, ast.Attribute) else getattr(k, "id", "")) in caught for k in kinds):
                        return None
            if isinstance(cur, ast.If) and child in cur.body and _is_type_checking(cur.test):
                return None
            if isinstance(cur, ast.Lambda):
                return None  # runs when the lambda is called: not a symbol of the graph
        if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and child in cur.body:
            # (decorators, defaults and bases run in the enclosing scope: not in the body)
            if isinstance(cur, ast.ClassDef):
                if in_function:
                    qual.append(cur.name)
            else:
                in_function = True
                qual.append(cur.name)
        child, cur = cur, parents.get(cur)
    if not in_function:
        return ("module", "")
    return ("function", ".".join(reversed(qual)))


def _module_of_import(node: ast.ImportFrom, importer: str, root_package: str) -> str:
    if not node.level:
        return node.module or ""
    pkg = module_name(importer, root_package)
    if not importer.endswith("__init__.py"):
        pkg = pkg.rpartition(".")[0]
    for _ in range(node.level - 1):
        pkg = pkg.rpartition(".")[0]
    return f"{pkg}.{node.module}" if node.module and pkg else (node.module or pkg)


def _bound_in_scopes(tree: ast.Module, qual: str, name: str) -> bool:
    """Whether the function at in-file ``qual`` or a function enclosing it binds ``name``
    (parameter, assignment, import, nested definition, ``global``/``nonlocal``)."""
    parts = qual.split(".")
    body = tree.body
    for i, part in enumerate(parts):
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and n.name == part), None)
        if node is None:
            return True  # not found: assume bound (never claim a NameError we cannot show)
        if not isinstance(node, ast.ClassDef) and _binds(node, name):
            return True
        body = node.body
    return False


def _binds(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    a = fn.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs] + [x for x in (a.vararg, a.kwarg) if x]
    if any(p.arg == name for p in params):
        return True
    todo = list(fn.body)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if n.name == name:
                return True
            todo.extend(n.decorator_list)
            continue  # their bodies are their own scopes
        if isinstance(n, ast.Lambda):
            continue
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del)):
            return True
        if isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
            return True
        if isinstance(n, (ast.Import, ast.ImportFrom)) and any(
                (x.asname or x.name.split(".")[0]) == name or x.name == "*" for x in n.names):
            return True
        if isinstance(n, ast.ExceptHandler) and n.name == name:
            return True
        todo.extend(ast.iter_child_nodes(n))
    return False


def find(graph: Graph, ans: queries.Answer, change: Change, files: list[dict], root_package: str,
         unresolved_imports: list | None = None, gone: dict[str, set[str]] | None = None) -> Broken:
    """What the change breaks through names it takes away (see the module's docstring).
    ``files``: ``SymbolChanges.files``; ``unresolved_imports``: the rows of
    ``MATCH (f:File) WHERE f.unresolved_imports IS NOT NULL RETURN f.path, f.unresolved_imports``
    when already read (else read here when needed); ``gone``: ``removed_names(change, files)``
    when already known."""
    out = Broken()
    gone = removed_names(change, files) if gone is None else gone
    if not gone:
        return out
    by_module = {module_name(p, root_package): p for p in gone}
    trees: dict[str, tuple[ast.Module, dict] | None] = {}

    def tree_of(path: str):
        if path not in trees:
            t = _parse(change.new_bytes(path))
            trees[path] = (t, _parents(t)) if t is not None else None
        return trees[path]

    seen_fn: set[tuple[str, str]] = set()

    def add_function(path: str, qual: str, name: str, mod_path: str, line: int, why: str) -> None:
        full = full_qual(path, qual, root_package)
        if (path, full) in seen_fn:
            return
        seen_fn.add((path, full))
        out.functions.append({"file": path, "qual": full, "line": line, "name": name, "module": mod_path,
                              "why": why})

    # 1. importers: ``from mod import name`` the resolver could not bind
    if unresolved_imports is None:
        unresolved_imports = ans.run(graph, "MATCH (f:File) WHERE f.unresolved_imports IS NOT NULL "
                                            "RETURN f.path, f.unresolved_imports ORDER BY f.path")
    names = set().union(*gone.values())
    for path, items in unresolved_imports:
        if not path.endswith(".py"):
            continue
        lines = set()
        for item in items or ():
            line, _, spec = str(item).partition(":")
            if spec.rpartition(".")[2] in names and line.isdigit():
                lines.add(int(line))
        if not lines or tree_of(path) is None:
            continue
        tree, parents = tree_of(path)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.lineno not in lines:
                continue
            mod = _module_of_import(node, path, root_package)
            mod_path = by_module.get(mod)
            if mod_path is None:
                continue
            for alias in node.names:
                if alias.name not in gone[mod_path]:
                    continue
                where = _context(node, parents)
                if where is None:
                    continue
                if where[0] == "module":
                    if path not in out.files:
                        out.files[path] = (alias.name, mod_path, node.lineno, "ImportError")
                        out.notes.append(f"{path}:{node.lineno} imports {alias.name} from {mod_path}, which the "
                                         f"change removes: importing {path} fails (ImportError)")
                else:
                    add_function(path, where[1], alias.name, mod_path, node.lineno,
                                 f"imports {alias.name} from {mod_path}, removed (ImportError when it runs)")
    # 2. bare calls of the name left in its own module: NameError when they run
    rows = ans.run(graph, "UNWIND $f AS f MATCH (s:Symbol) WHERE s.file = f AND s.unresolved_sites IS NOT NULL "
                          "RETURN s.file, s.qual, s.kind, s.unresolved_sites", {"f": sorted(gone)})
    for path, qual, kind, sites in rows:
        got = tree_of(path)
        if got is None:
            continue
        tree, parents = got
        text = (change.new_bytes(path) or b"").decode("utf-8", "replace").splitlines()
        for site in sites or ():
            name, _, line = str(site).rpartition("@")
            if name not in gone[path] or not line.isdigit() or not 0 < int(line) <= len(text):
                continue
            ln = int(line)
            if not re.search(rf"(?<![\w.]){re.escape(name)}\s*\(", text[ln - 1]):
                continue
            call = next((n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                         and n.func.id == name and n.lineno == ln), None)
            if call is None:
                continue
            where = _context(call, parents, frozenset({"NameError", "Exception", "BaseException"}))
            if where is None:
                continue
            if where[0] == "module":
                if path not in out.files:
                    out.files[path] = (name, path, ln, "NameError")
                    out.notes.append(f"{path}:{ln} calls {name}, which the change removes from it: importing "
                                     f"{path} fails (NameError)")
            elif not _bound_in_scopes(tree, where[1], name):
                add_function(path, where[1], name, path, ln, f"calls {name}, removed from its module (NameError)")
    return out
