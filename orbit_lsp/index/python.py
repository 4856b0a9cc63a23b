"""Python extraction with the standard ``ast`` module: one file in, ``PyFacts`` out.

Extraction is local to the file and knows nothing of other files; binding names across files is
``resolve.py``'s job. Only structure is kept: names, qualified names, line numbers, UTF-8 byte
columns, and small *value references* that say what a name is bound to (``ref`` tuples, whose
forms ``py_facts`` lists). No literal values, docstrings or default arguments are ever stored.
"""

from __future__ import annotations

import ast
import re

from orbit_lsp.index.py_facts import STAR_NAMES_UNREAD, UNKNOWN, CallSite, ImportSite, PyClass, PyFacts, PySymbol, Scope
from orbit_lsp.index.py_syspath import OTHER_PATH_CALLS as _OTHER_PATH_CALLS
from orbit_lsp.index.py_syspath import SYS_PATH_METHODS as _SYS_PATH_METHODS
from orbit_lsp.index.py_syspath import added_by_assign as sys_path_added_by_assign
from orbit_lsp.index.py_syspath import added_by_augassign as sys_path_added_by_augassign
from orbit_lsp.index.py_syspath import added_by_call as sys_path_added_by_call
from orbit_lsp.index.py_syspath import sys_path_dirs

_LITERALS = {ast.List: "list", ast.ListComp: "list", ast.Tuple: "tuple", ast.Set: "set",
             ast.SetComp: "set", ast.DictComp: "dict", ast.JoinedStr: "str"}
_DEF_NAME = re.compile(rb"(?:async\s+)?(?:def|class)\s+")


def _dir_of(rel: str) -> str:
    return rel.rsplit("/", 1)[0] if "/" in rel else ""


# nodes with nothing to extract inside: visiting them does nothing
_LEAVES = (ast.Name, ast.Constant, ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop,
           ast.alias, ast.Pass, ast.Break, ast.Continue)
_SKIP_FIELDS = frozenset({"ctx", "op", "ops", "type_comment", "type_ignores"})
_Load = ast.Load
_Name, _Attribute, _Call, _Constant, _Subscript, _Dict, _Starred = (
    ast.Name, ast.Attribute, ast.Call, ast.Constant, ast.Subscript, ast.Dict, ast.Starred)
_Lambda, _BoolOp, _IfExp, _NamedExpr, _Await = ast.Lambda, ast.BoolOp, ast.IfExp, ast.NamedExpr, ast.Await
_DISPLAYS = {ast.List: "list", ast.Tuple: "tuple", ast.Set: "set"}
_DISPATCH: dict = {}  # class of a node -> function(extractor, node), None for nodes with nothing inside
_CHILD_FIELDS: dict = {}  # node class -> names of the fields that may hold nodes (``generic_visit``)


class _Extractor:
    """An ``ast.NodeVisitor`` made cheaper (the stock traversal was two thirds of the extraction
    time): ``visit_<Class>`` methods are dispatched through a table of every node class
    (``_DISPATCH``), leaves are skipped without a call, the common nodes with nothing to record
    of their own (``if``, comparisons, operators, subscripts...) have visitors that go straight
    to their children, and ``generic_visit`` (the rest) only looks at fields that can hold
    nodes. Children are visited in the order of their fields, as ``ast.NodeVisitor`` does
    (lambda names and container ordinals depend on it)."""

    def visit(self, node) -> None:
        f = _DISPATCH.get(node.__class__)
        if f is not None:
            f(self, node)

    def _visit_all(self, nodes) -> None:
        dispatch = _DISPATCH
        for node in nodes:
            f = dispatch.get(node.__class__)
            if f is not None:
                f(self, node)

    def generic_visit(self, node: ast.AST) -> None:
        dispatch = _DISPATCH
        for name in _CHILD_FIELDS[node.__class__]:
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    f = dispatch.get(item.__class__)
                    if f is not None:
                        f(self, item)
            else:
                f = dispatch.get(value.__class__)
                if f is not None:
                    f(self, value)

    # nodes that only hold other nodes: their children, in field order
    def _visit_value(self, node) -> None:  # Expr, Starred, Await, keyword
        value = node.value
        f = _DISPATCH.get(value.__class__)
        if f is not None:
            f(self, value)

    visit_Expr = visit_Starred = visit_Await = visit_keyword = _visit_value

    def visit_If(self, node) -> None:  # also While, IfExp
        test = node.test
        f = _DISPATCH.get(test.__class__)
        if f is not None:
            f(self, test)
        body = node.body
        if body.__class__ is list:
            self._visit_all(body)
            self._visit_all(node.orelse)
        else:
            self.visit(body)
            self.visit(node.orelse)

    visit_While = visit_IfExp = visit_If

    def visit_Compare(self, node: ast.Compare) -> None:
        left = node.left
        f = _DISPATCH.get(left.__class__)
        if f is not None:
            f(self, left)
        self._visit_all(node.comparators)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        self._visit_all((node.left, node.right))

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        operand = node.operand
        f = _DISPATCH.get(operand.__class__)
        if f is not None:
            f(self, operand)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        self._visit_all(node.values)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self._visit_all((node.value, node.slice))

    def visit_Tuple(self, node) -> None:  # also List, Set
        self._visit_all(node.elts)

    visit_List = visit_Set = visit_Tuple

    def visit_Dict(self, node: ast.Dict) -> None:
        self._visit_all(node.keys)  # None for ``**x``
        self._visit_all(node.values)

    def visit_Try(self, node) -> None:
        stars = self.stars
        start = len(stars)
        self._visit_all(node.body)
        mid = len(stars)
        self._visit_all(node.handlers)
        if start < mid < len(stars):
            # ``try: from _speedups import *`` / ``except ImportError: from _pure import *``: the
            # handler runs when the body failed, most often its star import itself, so the body's
            # take precedence: ``PyFacts.stars`` lists them after (a later star import wins)
            stars[start:] = stars[mid:] + stars[start:mid]
        self._visit_all(node.orelse)
        self._visit_all(node.finalbody)

    visit_TryStar = visit_Try

    def __init__(self, rel: str, source: bytes):
        self.rel = rel
        self.src_lines = source.splitlines()
        self.is_package = rel.endswith("/__init__.py") or rel == "__init__.py"
        self.dir = _dir_of(rel)
        self.symbols: list[PySymbol] = []
        self.seen_quals: set[str] = set()
        self.scopes: list[Scope] = [Scope("", "module", -1)]
        self.classes: dict[str, PyClass] = {}
        self.imports: list[ImportSite] = []
        self.stars: list[tuple] = []
        self.scope_of: dict[str, int] = {"": 0}
        self.cur = 0  # index of the body being visited
        self.scope = self.scopes[0]  # ... and that body (``_enter``)
        self.eval_scope = -1  # set while visiting decorators: they are evaluated outside the def
        self.lambda_quals: dict[int, str] = {}  # id of a Lambda node -> its symbol's qual
        self.lambda_counts: dict[str, int] = {}  # qual of a definition -> lambdas named under it
        self.lambda_taken: set[str] = set()  # lambda names given
        self.literal_ids: dict[int, tuple[str, int]] = {}  # id of a container literal node -> identity
        self.literal_counts: dict[int, int] = {}  # scope index -> container literals met in it
        self.declared_global: dict[int, set[str]] = {}  # scope index -> names it declares global
        self.sys_path_exprs: list[ast.AST] = []  # directory expressions added to ``sys.path``

    # -- helpers --------------------------------------------------------------------------
    def _enter(self, idx: int) -> None:
        self.cur = idx
        self.scope = self.scopes[idx]

    def _qual(self, name: str) -> str:
        q = self.scope.qual
        return f"{q}.{name}" if q else name

    def _add_symbol(self, qual: str, name: str, kind: str, node: ast.AST, col: int | None = None) -> bool:
        if qual in self.seen_quals:
            return False
        self.seen_quals.add(qual)
        line = node.lineno
        end = getattr(node, "end_lineno", None) or line
        if col is None:
            col = node.col_offset
        self.symbols.append(PySymbol(qual, name, kind, line, end, col))
        return True

    def _name_col(self, node: ast.AST) -> int:
        try:
            text = self.src_lines[node.lineno - 1]
        except IndexError:
            return node.col_offset
        m = _DEF_NAME.match(text, node.col_offset)
        return m.end() if m else node.col_offset

    def _relative_base(self, level: int) -> str | None:
        """Directory a relative import of ``level`` dots starts from, or None if it escapes the
        workspace root."""
        parts = self.dir.split("/") if self.dir else []
        up = level - 1
        if up > len(parts):
            return None
        return "/".join(parts[: len(parts) - up]) if up else "/".join(parts)

    def _plain_call_ref(self, func: ast.AST, args: list) -> tuple:
        """``("c", func, arg0)`` for a call of ``func`` with positional ``args``."""
        if args:
            arg0 = args[0]
            acls = arg0.__class__
            arg0 = ("n", arg0.id) if acls is _Name else UNKNOWN if acls is _Starred else self.ref(arg0)
        else:
            arg0 = UNKNOWN
        fcls = func.__class__
        if fcls is _Name:
            return ("c", ("n", func.id), arg0)
        if fcls is _Attribute and func.value.__class__ is _Name:
            return ("c", ("a", ("n", func.value.id), func.attr), arg0)
        return ("c", self.ref(func), arg0)

    def _literal_id(self, node: ast.AST) -> tuple[str, int]:
        """A container literal's identity: ``(qual of the scope it is written in, its ordinal
        among that scope's literals)``. Unlike its position, it stays when lines are added or
        removed above it, so an edit elsewhere in the file leaves the file's interface alone."""
        got = self.literal_ids.get(id(node))
        if got is None:
            n = self.literal_counts.get(self.cur, 0)
            self.literal_counts[self.cur] = n + 1
            got = self.literal_ids[id(node)] = (self.scope.qual, n)
        return got

    # -- refs -----------------------------------------------------------------------------
    def ref(self, node: ast.AST | None) -> tuple:
        cls = node.__class__
        if cls is _Name:
            return ("n", node.id)
        if cls is _Attribute:
            value = node.value
            vcls = value.__class__
            if vcls is _Name:
                return ("a", ("n", value.id), node.attr)
            if vcls is _Attribute:
                inner = value.value
                return ("a", ("a", ("n", inner.id) if inner.__class__ is _Name else self.ref(inner), value.attr),
                        node.attr)
            return ("a", self.ref(value), node.attr)
        if cls is _Call:
            func = node.func
            args = node.args
            if func.__class__ is _Name and func.id in _EMPTY_CONTAINERS and not args and not node.keywords:
                kind = func.id
                return ("d", (), self._literal_id(node)) if kind == "dict" else \
                    ("l", (), kind, self._literal_id(node))
            lib = _LIBRARY_CONTAINERS.get(func.id if func.__class__ is _Name else
                                          func.attr if func.__class__ is _Attribute else None)
            if lib is not None and len(args) <= lib[1] and not node.keywords \
                    and not any(a.__class__ is _Starred for a in args):
                # ``OrderedDict()``, ``defaultdict(list)``, ``deque()``: an empty container if the
                # name is the library's class (decided by the resolver), else a call
                lid = self._literal_id(node)
                literal = ("d", (), lid) if lib[0] == "dict" else ("l", (), "list", lid)
                return ("lc", self._plain_call_ref(func, args), literal)
            return self._plain_call_ref(func, args)
        if cls is _Constant:
            value = node.value
            if value is not None and value.__class__ is not bool:
                return ("lit", type(value).__name__)
            return UNKNOWN
        if cls is _Subscript:
            key = node.slice
            if key.__class__ is _Constant and isinstance(key.value, (str, int)) and not isinstance(key.value, bool):
                return ("s", self.ref(node.value), key.value)
            return ("s", self.ref(node.value), None)
        if cls is _Dict:
            items = []
            for k, v in zip(node.keys, node.values):
                if k.__class__ is _Constant and isinstance(k.value, (str, int)) and not isinstance(k.value, bool):
                    items.append((k.value, self.ref(v)))
            return ("d", tuple(items), self._literal_id(node))
        kind = _DISPLAYS.get(cls)
        if kind is not None:
            ref = self.ref
            return ("l", tuple([("*", ref(e.value)) if e.__class__ is _Starred else ref(e) for e in node.elts]),
                    kind, self._literal_id(node))
        if cls is _Lambda:
            return ("def", self._lambda_qual(node))
        if cls is _BoolOp:
            ref = self.ref
            return ("u", tuple([ref(v) for v in node.values]))
        if cls is _IfExp:
            return ("u", (self.ref(node.body), self.ref(node.orelse)))
        if cls is _NamedExpr or cls is _Await:
            return self.ref(node.value)
        lit = _LITERALS.get(cls)
        if lit is not None:
            return ("lit", lit)
        return UNKNOWN

    def ann_ref(self, node: ast.AST | None) -> tuple:
        """Instance-of ref for an annotation: a class (``Widget``, ``mod.Widget``, ``"Widget"``),
        ``Optional[X]``, ``X | None``, ``Union[X, Y]``, or a generic's origin (``list[str]``)."""
        if node is None:
            return UNKNOWN
        if isinstance(node, ast.Constant):
            if node.value is None:
                return ("lit", "NoneType")
            if isinstance(node.value, str) and len(node.value) < 200:
                try:
                    return self.ann_ref(ast.parse(node.value.strip(), mode="eval").body)
                except (SyntaxError, ValueError, RecursionError):
                    return UNKNOWN
            return UNKNOWN
        if isinstance(node, (ast.Name, ast.Attribute)):
            return ("ann", self.ref(node))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return ("u", (self.ann_ref(node.left), self.ann_ref(node.right)))
        if isinstance(node, ast.Subscript):
            origin = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if origin == "Optional":
                return ("u", (self.ann_ref(args[0]), ("lit", "NoneType")))
            if origin == "Union":
                return ("u", tuple(self.ann_ref(a) for a in args))
            if origin == "Annotated":
                return self.ann_ref(args[0])
            return ("ann", self.ref(node.value))
        return UNKNOWN

    def _call_name(self, func: ast.AST) -> str:
        """The name a call site is reported by: the called name (``f``, ``obj.m`` -> ``m``), or
        for a callee without one the name it is reached through (``handlers[0]()`` ->
        ``handlers[]``, ``make()()`` -> ``make()``, ``(lambda: 0)()`` -> ``<lambda>``)."""
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
        if isinstance(func, ast.Subscript):
            return self._call_name(func.value) + "[]"
        if isinstance(func, ast.Call):
            return self._call_name(func.func) + "()"
        if isinstance(func, ast.Lambda):
            return "<lambda>"
        if isinstance(func, ast.Await):
            return self._call_name(func.value)
        return "<expr>"

    # -- binding targets ------------------------------------------------------------------
    def bind_target(self, target: ast.AST, value: tuple) -> None:
        if isinstance(target, ast.Name):
            self._bind(target.id, _named(value, target.id))
        elif isinstance(target, (ast.Tuple, ast.List)):
            starred = any(isinstance(e, ast.Starred) for e in target.elts)
            for i, elt in enumerate(target.elts):
                # ``a, b = pair``: the i-th item; after a starred target positions are unknown
                known = value is not UNKNOWN and not starred and not isinstance(elt, ast.Starred)
                self.bind_target(elt, ("ix", value, i) if known else UNKNOWN)
        elif isinstance(target, ast.Starred):
            self.bind_target(target.value, UNKNOWN)
        elif isinstance(target, ast.Subscript):
            # c[k] = v: a store into the container c (flow-insensitive: every value c may hold)
            if value is not UNKNOWN and value[0] != "lit":
                self.scope.stores.append((self.ref(target.value), _const_key(target.slice), value, False))
            self.visit(target)
        elif isinstance(target, ast.Attribute):
            # self.x = value inside a method: an instance attribute of the class
            sc = self.scope
            if (sc.self_kind == "instance" and isinstance(target.value, ast.Name)
                    and target.value.id == sc.self_name and sc.class_qual in self.classes):
                self.classes[sc.class_qual].attrs.setdefault(target.attr, []).append(
                    (self.cur, _named(value, target.attr)))
            self.visit(target.value)
        else:
            self.visit(target)

    def _module_variable(self, target: ast.AST, node: ast.AST) -> None:
        if self.scope.kind != "module":
            return
        names = []
        stack = [target]
        while stack:
            t = stack.pop()
            if isinstance(t, ast.Name):
                names.append(t)
            elif isinstance(t, (ast.Tuple, ast.List)):
                stack.extend(t.elts)
            elif isinstance(t, ast.Starred):
                stack.append(t.value)
        for n in names:
            self._add_symbol(n.id, n.id, "variable", node, col=n.col_offset)

    # -- statements -----------------------------------------------------------------------
    def visit_Assign(self, node: ast.Assign) -> None:
        value_node = node.value
        f = _DISPATCH.get(value_node.__class__)
        if f is not None:
            f(self, value_node)
        value = self.ref(value_node)
        for t in node.targets:
            if t.__class__ is _Name:  # ``x = value``, the common case of what follows
                name = t.id
                if self.scope.kind == "module":
                    self._add_symbol(name, name, "variable", node, col=t.col_offset)
                self._bind(name, _named(value, name))
                continue
            self._module_variable(t, node)
            if ((t.__class__ is _Subscript and t.value.__class__ is _Attribute)
                    or (t.__class__ is _Attribute and t.attr == "path")):  # ``sys.path[:0] = [...]``
                self.sys_path_exprs += sys_path_added_by_assign([t], value_node)
            if (isinstance(t, (ast.Tuple, ast.List)) and isinstance(node.value, (ast.Tuple, ast.List))
                    and len(t.elts) == len(node.value.elts)
                    and not any(isinstance(e, ast.Starred) for e in t.elts + node.value.elts)):
                for te, ve in zip(t.elts, node.value.elts):  # a, b = x, y
                    self.bind_target(te, self.ref(ve))
                continue
            self.bind_target(t, value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            # ``current_app: Flask = LocalProxy(...)``: the declared type where the value is unknown
            value = ("anv", self.ref(node.value), self.ann_ref(node.annotation))
        else:
            value = self.ann_ref(node.annotation)
        if isinstance(node.target, ast.Name) and node.value is not None:
            self._module_variable(node.target, node)
        if isinstance(node.target, (ast.Name, ast.Attribute)):
            self.bind_target(node.target, value)
        else:
            self.visit(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if node.target.__class__ is _Attribute and node.target.attr == "path":  # ``sys.path += [...]``
            self.sys_path_exprs += sys_path_added_by_augassign(node.target, node.value)
        if isinstance(node.target, ast.Name):
            self._bind(node.target.id, UNKNOWN)
        else:
            self.visit(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind(node.target.id, self.ref(node.value))

    def _implicit(self, node: ast.AST, ref: tuple, name: str, kind: str) -> None:
        """A call the code makes without call syntax (``with``, ``for``, ``raise``): bound
        when its receiver is known, never counted as unbound."""
        self.scope.calls.append(CallSite(node.lineno, node.col_offset, node.end_col_offset or node.col_offset,
                                         ref, name, False, self.eval_scope, implicit=kind))

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        it = self.ref(node.iter)
        if it[0] in ("n", "a", "c", "s"):
            # iter(x) then next() on what it returns, until it stops
            dunder, step = ("__aiter__", "__anext__") if isinstance(node, ast.AsyncFor) else ("__iter__", "__next__")
            self._implicit(node.iter, ("a", it, dunder), dunder, "iter")
            self._implicit(node.iter, ("a", ("c", ("a", it, dunder), UNKNOWN), step), step, "iter")
        self.bind_target(node.target, ("it", it))
        self._visit_all(node.body)
        self._visit_all(node.orelse)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        enter, exit_ = ("__aenter__", "__aexit__") if isinstance(node, ast.AsyncWith) else ("__enter__", "__exit__")
        for item in node.items:
            self.visit(item.context_expr)
            ctx = self.ref(item.context_expr)
            if ctx[0] in ("n", "a", "c", "s"):
                self._implicit(item.context_expr, ("a", ctx, enter), enter, "with")
                self._implicit(item.context_expr, ("a", ctx, exit_), exit_, "with")
            if item.optional_vars is not None:
                # ``with X() as v``: v is what ``__enter__`` returns
                self.bind_target(item.optional_vars, ("c", ("a", ctx, enter), UNKNOWN))
        self._visit_all(node.body)

    visit_AsyncWith = visit_With

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self._bind(node.name, UNKNOWN)
        self._visit_all(node.body)

    def visit_Global(self, node: ast.Global) -> None:
        self.scope.globals.update(node.names)
        self.declared_global.setdefault(self.cur, set()).update(node.names)

    def _bind(self, name: str, ref: tuple) -> None:
        """Bind ``name`` where Python binds it: in the current body, or in the module when the
        body declared it ``global`` (``def __getattr__(name): global X; from .m import X``
        defines the module's ``X``)."""
        if self.declared_global and name in self.declared_global.get(self.cur, ()):
            self.scopes[0].bind(name, ref)
        else:
            self.scope.names.setdefault(name, []).append(ref)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.scope.globals.update(node.names)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            if not isinstance(t, ast.Name):
                self.visit(t)

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self.visit(node.value)
            self.scope.returns.append(self.ref(node.value))

    def visit_Yield(self, node: ast.Yield) -> None:
        if node.value is not None:
            self.visit(node.value)
            self.scope.yields.append(self.ref(node.value))

    def visit_YieldFrom(self, node: ast.YieldFrom) -> None:
        self.visit(node.value)
        self.scope.yields.append(("it", self.ref(node.value)))

    def visit_Raise(self, node: ast.Raise) -> None:
        # ``raise Cls``: Python instantiates the class
        if isinstance(node.exc, (ast.Name, ast.Attribute)):
            self._implicit(node.exc, self.ref(node.exc), self._call_name(node.exc), "raise")
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            spec = (None, alias.name)
            self.imports.append(ImportSite(spec, (), node.lineno))
            if alias.asname:
                self._bind(alias.asname, ("imod", spec))
            else:
                top = alias.name.split(".")[0]
                self._bind(top, ("imod", (None, top)))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self._relative_base(node.level)
            if base is None:
                spec = ("<outside>", node.module or "")
            else:
                spec = (base, node.module or "")
        else:
            spec = (None, node.module or "")
        names = tuple(a.name for a in node.names)
        self.imports.append(ImportSite(spec, names, node.lineno))
        for alias in node.names:
            if alias.name == "*":
                if self.scope.kind == "module":
                    self.stars.append(spec)
                continue
            self._bind(alias.asname or alias.name, ("ifrom", spec, alias.name))

    def _decorators(self, node, outer: int, qual: str) -> None:
        """Calls in decorators are attributed to the decorated definition (the current scope) but
        evaluated in the enclosing one. Applying a decorator is a call of it with the definition
        as its argument: a bare ``@name`` counts as a call of ``name``; ``@factory(...)`` is the
        call of ``factory`` plus the call of what it returns (both ``decorator`` sites)."""
        self.eval_scope = outer
        arg = (("def", qual),)
        for dec in node.decorator_list:
            self.visit(dec)
            name = self._call_name(dec.func if isinstance(dec, ast.Call) else dec)
            self.scope.calls.append(CallSite(dec.lineno, dec.col_offset, dec.end_col_offset or dec.col_offset,
                                             self.ref(dec), name, True, outer, args=arg))
        self.eval_scope = -1

    def _decorated(self, node, qual: str) -> tuple:
        """What the name of a definition is bound to: the definition, a ``@property`` getter, or
        what its decorators return (``("dec", …)``, see ``resolve``)."""
        plain = ("def", qual)
        decs = [d for d in node.decorator_list
                if self._call_name(d.func if isinstance(d, ast.Call) else d) not in _TRANSPARENT_DECORATORS]
        names = {self._call_name(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list}
        if names & _PROPERTY_DECORATORS:
            return ("prop", qual)
        if not decs:
            return plain
        return ("dec", tuple(self.ref(d) for d in decs), plain)

    def _params(self, sc: Scope, fqual: str, args: ast.arguments, skip: str | None) -> None:
        """Bind the parameters of a function or lambda body: each to what call sites pass (``("p",
        …)``, with its annotation and default, evaluated in the enclosing scope)."""
        pos = args.posonlyargs + args.args if args.posonlyargs else args.args
        kwonly = args.kwonlyargs
        defaults_list = args.defaults
        defaults = {a.arg: d for a, d in zip(pos[len(pos) - len(defaults_list):], defaults_list)} \
            if defaults_list else {}
        if kwonly:
            defaults.update({a.arg: d for a, d in zip(kwonly, args.kw_defaults) if d is not None})
            order = [(a.arg, "pos") for a in pos] + [(a.arg, "kwonly") for a in kwonly]
            named = pos + kwonly
        else:
            order = [(a.arg, "pos") for a in pos]
            named = pos
        if args.vararg:
            order.append((args.vararg.arg, "var"))
        if args.kwarg:
            order.append((args.kwarg.arg, "kw"))
        sc.params = tuple(order)
        bound = sc.names
        for a in named:
            name = a.arg
            if name == skip:
                continue
            d = defaults.get(name)
            if d is None:
                dref = UNKNOWN
            elif d.__class__ is _Constant and d.value is None:
                dref = ("lit", "NoneType")  # ``cb=None``: not a callable, not an unknown
            else:
                dref = self.ref(d)
            ann = a.annotation
            bound.setdefault(name, []).append(("p", fqual, name, UNKNOWN if ann is None else self.ann_ref(ann), dref))
        for a in (args.vararg, args.kwarg):
            if a is not None and a.arg != skip:
                sc.bind(a.arg, UNKNOWN)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer = self.scope
        qual = self._qual(node.name)
        kind = "method" if outer.kind == "class" else "function"
        self._add_symbol(qual, node.name, kind, node, col=self._name_col(node))
        decorated = node.decorator_list
        self._bind(node.name, self._decorated(node, qual) if decorated else ("def", qual))
        # decorators, defaults and annotations are evaluated in the enclosing scope, but calls in
        # decorators are attributed to the decorated function (see below)
        args = node.args
        if args.defaults:
            self._visit_all(args.defaults)
        if args.kw_defaults:
            self._visit_all(args.kw_defaults)  # None where a keyword-only parameter has no default
        idx = len(self.scopes)
        existing = self.scope_of.get(qual)
        sc = Scope(qual, kind, self.cur)
        self.scopes.append(sc)
        if existing is None:
            self.scope_of[qual] = idx
        decos = tuple(self._call_name(d.func if isinstance(d, ast.Call) else d) for d in decorated) \
            if decorated else ()
        sc.decos = decos
        if "fixture" in decos or "yield_fixture" in decos:
            sc.fixture = _fixture_name(decorated) or node.name
        params = args.posonlyargs + args.args if args.posonlyargs else args.args
        if kind == "method" and "staticmethod" not in decos and params:
            sc.self_name = params[0].arg
            sc.self_kind = "class" if ("classmethod" in decos or node.name in ("__new__", "__init_subclass__", "__class_getitem__")) else "instance"
            sc.class_qual = outer.qual
        self._params(sc, qual, args, sc.self_name)
        prev = self.cur
        self._enter(idx)
        if decorated:
            self._decorators(node, prev, qual)
        self._visit_all(node.body)
        self._enter(prev)

    visit_AsyncFunctionDef = visit_FunctionDef

    def _inner_scope(self, kind: str) -> int:
        """A scope of its own for a lambda's parameters or a comprehension's targets (they are
        not bound in the enclosing body: ``lambda self: …`` must not hide the method's ``self``).
        Its parent is where its expression is evaluated; calls inside it stay attributed to the
        enclosing definition and are evaluated in it (``CallSite.scope``)."""
        parent = self.eval_scope if self.eval_scope >= 0 else self.cur
        idx = len(self.scopes)
        self.scopes.append(Scope(self.scopes[parent].qual, kind, parent))
        return idx

    def _lambda_qual(self, node: ast.Lambda) -> str:
        """The qualified name of a lambda's Symbol, under the definition it is written in:
        ``main.<lambda>``, the next lambda there ``main.<lambda#2>`` (in source order). Named by
        order, not by line, so adding or removing lines above a lambda leaves its name (and the
        file's interface, and a diff's symbols) alone; its line is the Symbol's line."""
        q = self.lambda_quals.get(id(node))
        if q is None:
            parent = self.eval_scope if self.eval_scope >= 0 else self.cur
            base = self.scopes[parent].qual
            prefix = f"{base}." if base else ""
            n = self.lambda_counts.get(base, 0)
            while True:
                n += 1
                q = f"{prefix}<lambda>" if n == 1 else f"{prefix}<lambda#{n}>"
                if q not in self.seen_quals and q not in self.lambda_taken:
                    break
            self.lambda_counts[base] = n
            self.lambda_quals[id(node)] = q
            self.lambda_taken.add(q)
        return q

    def visit_Lambda(self, node: ast.Lambda) -> None:
        args = node.args
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.visit(d)
        qual = self._lambda_qual(node)
        self._add_symbol(qual, "<lambda>", "function", node)
        idx = self._inner_scope("lambda")
        self.scope_of.setdefault(qual, idx)
        sc = self.scopes[idx]
        self._params(sc, qual, args, None)
        sc.returns.append(self.ref(node.body))
        prev, self.eval_scope = self.eval_scope, idx
        try:
            self.visit(node.body)
        finally:
            self.eval_scope = prev

    def _comprehension(self, node) -> None:
        self.visit(node.generators[0].iter)  # the first iterable is evaluated outside
        idx = self._inner_scope("comprehension")
        prev, self.eval_scope = self.eval_scope, idx
        try:
            for i, gen in enumerate(node.generators):
                if i:
                    self.visit(gen.iter)
                self._bind_in(idx, gen.target, ("it", self.ref(gen.iter)))
                for cond in gen.ifs:
                    self.visit(cond)
            for attr in ("elt", "key", "value"):
                sub = getattr(node, attr, None)
                if sub is not None:
                    self.visit(sub)
        finally:
            self.eval_scope = prev

    def _bind_in(self, idx: int, target: ast.AST, value: tuple = UNKNOWN) -> None:
        """Bind the names of a comprehension target (``x``, ``(k, v)``, ``*rest``) in scope
        ``idx`` to ``value`` (items of the iterable); anything else in it (``obj.attr``, ``d[k]``)
        is visited as an expression."""
        if isinstance(target, ast.Name):
            self.scopes[idx].bind(target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            starred = any(isinstance(e, ast.Starred) for e in target.elts)
            for i, elt in enumerate(target.elts):
                known = value is not UNKNOWN and not starred
                self._bind_in(idx, elt, ("ix", value, i) if known else UNKNOWN)
        elif isinstance(target, ast.Starred):
            self._bind_in(idx, target.value)
        else:
            self.visit(target)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        qual = self._qual(node.name)
        self._add_symbol(qual, node.name, "class", node, col=self._name_col(node))
        self._bind(node.name, ("def", qual))
        for b in node.bases:
            self.visit(b)
        for kw in node.keywords:
            self.visit(kw.value)
        idx = len(self.scopes)
        self.scopes.append(Scope(qual, "class", self.cur))
        if qual not in self.classes:
            self.classes[qual] = PyClass(qual, [self.ref(b) for b in node.bases], self.cur, idx)
            self.scope_of.setdefault(qual, idx)
        prev = self.cur
        self._enter(idx)
        self.scopes[idx].decos = tuple(self._call_name(d.func if isinstance(d, ast.Call) else d)
                                       for d in node.decorator_list)
        self._decorators(node, prev, qual)
        self._visit_all(node.body)
        self._enter(prev)

    def _arg_ref(self, node: ast.AST) -> tuple:
        """Ref of an argument; a constant's is one shared tuple per type (facts stay small)."""
        if isinstance(node, ast.Constant):
            return _CONSTANT_REFS.get(type(node.value), UNKNOWN)
        return self.ref(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        """An attribute read outside a call's callee chain (``x = self.size``, ``if obj.closed``,
        ``f(self.name)``): an implicit ``read`` site, bound to the ``@property`` getter it runs
        when there is one (the callee chain's reads are found from the call site itself)."""
        value = node.value
        if node.ctx.__class__ is _Load:
            self.scope.calls.append(
                CallSite(node.lineno, node.col_offset, node.end_col_offset or node.col_offset,
                         ("a", ("n", value.id), node.attr) if value.__class__ is _Name else self.ref(node),
                         node.attr, False, self.eval_scope, implicit="read"))
            while value.__class__ is _Attribute:  # ``self.a.b``: the read of ``a`` is this site's
                value = value.value
        f = _DISPATCH.get(value.__class__)
        if f is not None:
            f(self, value)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        fcls = func.__class__
        ref = self.ref
        if fcls is _Name:
            name = func.id
            fref = ("n", name)
        elif fcls is _Attribute:
            name = func.attr
            value = func.value
            fref = ("a", ("n", value.id), name) if value.__class__ is _Name else ref(func)
        else:
            name = self._call_name(func)
            fref = ref(func)
        site = CallSite(func.lineno, func.col_offset, func.end_col_offset or func.col_offset,
                        fref, name, False, self.eval_scope)
        self.scope.calls.append(site)
        # the callee, then the arguments (lambdas among them get their quals first); the
        # attributes of the callee's chain are not read sites of their own: their property
        # reads are the call site's (``_property_reads``)
        f = func
        while f.__class__ is _Attribute:
            f = f.value
        dispatch = _DISPATCH
        v = dispatch.get(f.__class__)
        if v is not None:
            v(self, f)
        args = node.args
        for a in args:
            v = dispatch.get(a.__class__)
            if v is not None:
                v(self, a)
        keywords = node.keywords
        for k in keywords:
            a = k.value
            v = dispatch.get(a.__class__)
            if v is not None:
                v(self, a)
        if args:
            refs = []
            starred = False
            for a in args:
                c = a.__class__
                if c is _Name:
                    refs.append(("n", a.id))
                elif c is _Constant:  # one shared tuple per type (facts stay small)
                    refs.append(_CONSTANT_REFS.get(type(a.value), UNKNOWN))
                elif c is _Starred:
                    starred = True
                    refs.append(("*", ref(a.value)))
                else:
                    refs.append(ref(a))
            site.args = tuple(refs)
        if keywords:
            site.kwargs = tuple([(k.arg, self._arg_ref(k.value)) for k in keywords])
        if args and fcls is _Attribute and not starred:
            if name in _STORE_METHODS:
                self._method_store(func, node)
                if name in _SYS_PATH_METHODS:
                    self.sys_path_exprs += sys_path_added_by_call(func, node)
            elif name in _OTHER_PATH_CALLS:
                self.sys_path_exprs += sys_path_added_by_call(func, node)

    def _method_store(self, func: ast.Attribute, node: ast.Call) -> None:
        """``c.append(v)``, ``c.add(v)``, ``c.insert(i, v)``, ``c.extend(vs)``, ``c.update(d)``,
        ``c.setdefault(k, v)``: a store into the container ``c``."""
        args = node.args  # none starred (``visit_Call``)
        c = self.ref(func.value)
        m = func.attr
        if m in ("append", "add", "appendleft") and len(args) == 1:
            store = (c, None, self.ref(args[0]), False)
        elif m == "insert" and len(args) == 2:
            store = (c, None, self.ref(args[1]), False)
        elif m in ("extend", "update") and len(args) == 1:
            store = (c, None, self.ref(args[0]), True)
        elif m == "setdefault" and len(args) == 2:
            store = (c, _const_key(args[0]), self.ref(args[1]), False)
        else:
            return
        if store[2] is not UNKNOWN and store[2][0] != "lit":
            self.scope.stores.append(store)


def _node_classes(cls: type):
    yield cls
    for sub in cls.__subclasses__():
        yield from _node_classes(sub)


def _fill_dispatch() -> None:
    """``_DISPATCH`` and ``_CHILD_FIELDS`` for every node class of this Python's ``ast``."""
    for cls in _node_classes(ast.AST):
        f = getattr(_Extractor, "visit_" + cls.__name__, None)
        if f is None and not issubclass(cls, _LEAVES):
            f = _Extractor.generic_visit
        _DISPATCH[cls] = f
        _CHILD_FIELDS[cls] = tuple(f for f in cls._fields if f not in _SKIP_FIELDS)


_fill_dispatch()


_EMPTY_CONTAINERS = frozenset({"dict", "list", "set"})
# library containers made empty (name -> (kind, positional arguments allowed)): the resolver
# checks that the name is the library's class (``py_facts.LIBRARY_CONTAINER_CLASSES``)
_LIBRARY_CONTAINERS = {"OrderedDict": ("dict", 0), "defaultdict": ("dict", 1), "deque": ("list", 0),
                       "WeakValueDictionary": ("dict", 0), "WeakKeyDictionary": ("dict", 0)}
_CONSTANT_REFS = {t: ("lit", t.__name__) for t in (str, int, float, bytes, complex, bool)}
_CONSTANT_REFS[type(None)] = ("lit", "NoneType")
_STORE_METHODS = frozenset({"append", "add", "appendleft", "insert", "extend", "update", "setdefault"})
# decorators that leave the function callable as written (the binder ignores them)
_TRANSPARENT_DECORATORS = frozenset({"staticmethod", "classmethod", "abstractmethod", "override", "overload",
                                     "final", "wraps"})
_PROPERTY_DECORATORS = frozenset({"property", "cached_property", "setter", "getter", "deleter"})


def _named(value: tuple, name: str) -> tuple:
    """A container literal bound to ``name`` (``handlers = []``, ``self.handlers = []``) carries
    that name: stores into it are looked for among stores through that name (``handlers[k] =
    v``, ``self.handlers.append(v)``)."""
    if value[0] == "d" and len(value) == 3:
        return value + (name,)
    if value[0] == "l" and len(value) == 4:
        return value + (name,)
    if value[0] == "lc":
        return ("lc", value[1], _named(value[2], name))
    if value[0] == "anv":  # ``self.order: list[JSONTag] = []``
        return ("anv", _named(value[1], name), value[2])
    return value


def _fixture_name(decorators: list) -> str | None:
    """The ``name=`` a ``@pytest.fixture(name="app")`` decorator gives its fixture, or None."""
    for d in decorators:
        if isinstance(d, ast.Call) and (getattr(d.func, "attr", None) or getattr(d.func, "id", None)) in (
                "fixture", "yield_fixture"):
            for kw in d.keywords:
                if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    return kw.value.value
    return None


def _const_key(node: ast.AST):
    """A subscript or dict key as stored in refs: a str/int constant, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)) and not isinstance(node.value, bool):
        return node.value
    return None


_BLOCKS = (ast.If, ast.Try, ast.With, ast.For, ast.While) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())


def _module_statements(body: list, nested: bool = False):
    """``(statement, nested)`` for the statements that run at a module's top level: ``body``
    (``nested`` False) and, recursively, the bodies of its ``if``/``try``/``with``/``for``/
    ``while`` blocks (``nested`` True; not those of definitions)."""
    for stmt in body:
        yield stmt, nested
        if isinstance(stmt, _BLOCKS):
            for field in ("body", "orelse", "finalbody"):
                yield from _module_statements(getattr(stmt, field, None) or [], True)
            for handler in getattr(stmt, "handlers", None) or []:
                yield from _module_statements(handler.body, True)


def _literal_names(node) -> list[str] | None:
    """The strings of a list or tuple display of string constants, else None."""
    if isinstance(node, (ast.List, ast.Tuple)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return [e.value for e in node.elts]
    return None


def _is_all(node) -> bool:
    return isinstance(node, ast.Name) and node.id == "__all__"


def star_names(body: list, source: bytes) -> tuple[str, ...] | None:
    """What ``from <module> import *`` binds (``PyFacts.star_names``), from the module's
    top-level statements ``body`` and its ``source``: None when it never names ``__all__``
    (Python then binds the names without a leading underscore); else the names its
    ``__all__`` is given by literal assignments, ``+=``, ``extend`` and ``append`` at module
    level, a later assignment at the top level replacing the names before it, those in
    blocks (one branch of an ``if``) adding to them; ``STAR_NAMES_UNREAD`` when the source
    names ``__all__`` anywhere else (a computed value, a function that appends to it, a
    ``del``, a loop, even a comment): any name may be bound then."""
    names: dict[str, None] = {}
    read = 0  # the statements read, each naming ``__all__`` once
    for stmt, nested in _module_statements(body):
        cls = stmt.__class__
        got = None
        if cls is ast.Assign:
            if len(stmt.targets) != 1 or not _is_all(stmt.targets[0]):
                continue
            got = _literal_names(stmt.value)
            if got is not None and not nested:
                names.clear()  # ``__all__ = [...]`` again: what it held before is gone
        elif cls is ast.AnnAssign or cls is ast.AugAssign:
            if not _is_all(stmt.target) or stmt.value is None:
                continue
            if cls is ast.AnnAssign or isinstance(stmt.op, ast.Add):
                got = _literal_names(stmt.value)
            if got is not None and cls is ast.AnnAssign and not nested:
                names.clear()
        elif cls is ast.Expr and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute) \
                and _is_all(stmt.value.func.value):
            call, method = stmt.value, stmt.value.func.attr
            if method == "extend" and len(call.args) == 1 and not call.keywords:
                got = _literal_names(call.args[0])
            elif method == "append" and len(call.args) == 1 and not call.keywords \
                    and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
                got = [call.args[0].value]
        else:
            continue
        if got is None:
            return STAR_NAMES_UNREAD
        names.update(dict.fromkeys(got))
        read += 1
    if not read:
        return None if b"__all__" not in source else STAR_NAMES_UNREAD
    if source.count(b"__all__") != read:
        return STAR_NAMES_UNREAD  # named somewhere else too: set or changed in a way not read here
    return tuple(names)


def extract(rel: str, source: bytes, text: str | None = None) -> PyFacts:
    """Parse one file. ``rel`` is its workspace-relative path, ``source`` its bytes (``text`` the
    decoded text, when the caller already has it).

    Raises ``SyntaxError`` (with ``lineno``/``msg``) when the file does not parse; ``ValueError``
    for source with NUL bytes. Deeply nested code that exhausts the recursion limit raises
    ``RecursionError``.
    """
    tree = ast.parse(text if text is not None else source, filename=rel)
    ex = _Extractor(rel, source)
    n_lines = len(ex.src_lines)
    ex.symbols.append(PySymbol("", rel.rsplit("/", 1)[-1].removesuffix(".py"), "module", 1, max(1, n_lines), 0))
    ex.seen_quals.add("")
    for stmt in tree.body:
        ex.visit(stmt)
    # every directory followed is computed from ``__file__`` (``py_syspath``): without it, none
    sys_path = sys_path_dirs(rel, tree, ex.sys_path_exprs) if ex.sys_path_exprs and b"__file__" in source else ()
    # ``__all__``: read only where the module binds it (a pass over its top-level statements)
    exported = star_names(tree.body, source) if "__all__" in ex.scopes[0].names else None
    return PyFacts(rel=rel, lines=n_lines, symbols=ex.symbols, scopes=ex.scopes, classes=ex.classes,
                   imports=ex.imports, stars=ex.stars, scope_of=ex.scope_of, sys_path=sys_path,
                   star_names=exported)
