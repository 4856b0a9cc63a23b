"""Python extraction with the standard ``ast`` module: one file in, ``PyFacts`` out.

Extraction is local to the file and knows nothing of other files; binding names across files is
``resolve.py``'s job. Only structure is kept: names, qualified names, line numbers, UTF-8 byte
columns, and small *value references* that say what a name is bound to (``ref`` tuples below).
No literal values, docstrings or default arguments are ever stored.

Value references (hashable tuples, evaluated later in the scope they were found in):
``("n", name)`` a name; ``("a", base, attr)`` an attribute; ``("c", func, arg0)`` the result of a
call (``arg0`` is the first positional argument's ref, kept for ``functools.partial``);
``("s", base, key)`` a subscript (``key`` a constant or None); ``("d", ((key, ref), ...))`` a dict literal;
``("lit", type)`` a literal of a builtin type; ``("u", (ref, ...))`` one of several values (``or``, conditional expression); ``("def", qual)`` a
function or class defined in this file; ``("imod", spec)`` a module bound by ``import``;
``("ifrom", spec, name)`` a name bound by ``from … import``; ``("ann", ref)`` an instance of an
annotated type; ``("?",)`` unknown. A module ``spec`` is ``(base_dir, dotted)``: ``base_dir`` is
``None`` for absolute imports, else the workspace-relative directory a relative import starts from.
"""

from __future__ import annotations

import ast
import dataclasses
import operator
import re
from dataclasses import dataclass, field

UNKNOWN = ("?",)
_LITERALS = {ast.List: "list", ast.ListComp: "list", ast.Tuple: "tuple", ast.Set: "set",
             ast.SetComp: "set", ast.DictComp: "dict", ast.JoinedStr: "str"}
_DEF_NAME = re.compile(rb"(?:async\s+)?(?:def|class)\s+")


def compact_pickle(cls):
    """Class decorator for slotted dataclasses: pickle an instance as its class and a tuple of
    its field values (``__reduce__``) instead of the default state dict of slot names. Facts are
    pickled from parse workers and into the cache: this halves both pickling and unpickling time
    and shrinks the pickles by a third."""
    get = operator.attrgetter(*(f.name for f in dataclasses.fields(cls)))

    def __reduce__(self):
        return (type(self), get(self))

    cls.__reduce__ = __reduce__
    return cls


@compact_pickle
@dataclass(slots=True)
class PySymbol:
    """A definition: ``qual`` is the dotted name inside the file (``Agent.run``; ``""`` for the
    module itself), ``kind`` one of module|function|method|class|variable, ``line``/``end_line``
    1-based, ``col`` the UTF-8 byte column of the name on ``line``."""

    qual: str
    name: str
    kind: str
    line: int
    end_line: int
    col: int = 0


@compact_pickle
@dataclass(slots=True)
class CallSite:
    """One call: ``ref`` of the callee, position of the callee expression (1-based line, UTF-8
    byte columns), and ``name`` (last identifier, used to report unresolved calls)."""

    line: int
    col: int
    end_col: int
    ref: tuple
    name: str
    decorator: bool = False
    scope: int = -1  # scope to evaluate ``ref`` in when not the owning one (decorators)


@compact_pickle
@dataclass(slots=True)
class Scope:
    """A module, class or function body. ``names`` maps each locally bound name to the refs it is
    bound to; ``parent`` is the enclosing scope's index (-1 for the module)."""

    qual: str
    kind: str
    parent: int
    names: dict[str, list] = field(default_factory=dict)
    calls: list[CallSite] = field(default_factory=list)
    returns: list = field(default_factory=list)
    self_name: str | None = None
    self_kind: str | None = None  # "instance" (self) or "class" (cls)
    class_qual: str | None = None  # for methods: the class they belong to
    globals: set[str] = field(default_factory=set)

    def bind(self, name: str, ref: tuple) -> None:
        self.names.setdefault(name, []).append(ref)

    def interface(self) -> tuple:
        return (self.qual, self.kind, self.parent, tuple(sorted((k, tuple(v)) for k, v in self.names.items())),
                tuple(self.returns), self.self_name, self.self_kind, self.class_qual, tuple(sorted(self.globals)))


@compact_pickle
@dataclass(slots=True)
class PyClass:
    """A class: ``bases`` refs (evaluated in ``outer`` scope), its body scope index, and instance
    attributes assigned as ``self.x = …`` in its methods (``attrs[x]`` = [(method scope, ref)])."""

    qual: str
    bases: list
    outer: int
    body: int
    attrs: dict[str, list] = field(default_factory=dict)

    def interface(self) -> tuple:
        return (self.qual, tuple(self.bases), self.outer, self.body,
                tuple(sorted((k, tuple(v)) for k, v in self.attrs.items())))


@compact_pickle
@dataclass(slots=True)
class ImportSite:
    """One imported module: ``spec`` as above, ``names`` imported from it (empty for
    ``import a.b``; ``("*",)`` for a star import), ``line`` 1-based."""

    spec: tuple
    names: tuple
    line: int


@compact_pickle
@dataclass(slots=True)
class PyFacts:
    """Everything orbit keeps of one Python file."""

    rel: str
    lines: int
    symbols: list[PySymbol]
    scopes: list[Scope]
    classes: dict[str, PyClass]
    imports: list[ImportSite]
    stars: list[tuple]
    scope_of: dict[str, int]  # qual of a function/class -> its body scope index

    def interface(self) -> tuple:
        """What other files can observe when resolving against this one (everything except call
        sites and line numbers). Equal interfaces mean other files' edges cannot change."""
        return (
            tuple(sorted((s.qual, s.kind) for s in self.symbols)),
            tuple(s.interface() for s in self.scopes),
            tuple(c.interface() for c in sorted(self.classes.values(), key=lambda c: c.qual)),
            tuple(self.stars),
            tuple(sorted(self.scope_of.items())),
        )


def _dir_of(rel: str) -> str:
    return rel.rsplit("/", 1)[0] if "/" in rel else ""


# nodes with nothing to extract inside: visiting them does nothing
_LEAVES = (ast.Name, ast.Constant, ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop,
           ast.alias, ast.Pass, ast.Break, ast.Continue)
_SKIP_FIELDS = frozenset({"ctx", "op", "ops", "type_comment", "type_ignores"})


class _Extractor:
    """An ``ast.NodeVisitor`` made cheaper (the stock traversal was two thirds of the extraction
    time): ``visit_<Class>`` methods are dispatched through a per-class cache, leaves and values
    that are not nodes are skipped, and ``generic_visit`` only looks at fields that can hold
    nodes."""

    _dispatch: dict = {}  # class of a node (or of any field value) -> function(self, node)
    _child_fields: dict = {}  # node class -> names of the fields that may hold nodes

    def visit(self, node) -> None:
        f = self._dispatch.get(node.__class__) or self._dispatch_for(node.__class__)
        f(self, node)

    @classmethod
    def _dispatch_for(cls, node_cls: type):
        f = getattr(cls, "visit_" + node_cls.__name__, None) if issubclass(node_cls, ast.AST) else _no_visit
        if f is None:
            f = _no_visit if issubclass(node_cls, _LEAVES) else cls.generic_visit
        cls._dispatch[node_cls] = f
        return f

    def generic_visit(self, node: ast.AST) -> None:
        fields = self._child_fields.get(node.__class__)
        if fields is None:
            fields = self._child_fields[node.__class__] = tuple(f for f in node._fields if f not in _SKIP_FIELDS)
        dispatch = self._dispatch
        for name in fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    f = dispatch.get(item.__class__) or self._dispatch_for(item.__class__)
                    if f is not _no_visit:
                        f(self, item)
            else:
                f = dispatch.get(value.__class__) or self._dispatch_for(value.__class__)
                if f is not _no_visit:
                    f(self, value)

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
        self.cur = 0
        self.eval_scope = -1  # set while visiting decorators: they are evaluated outside the def
        self.declared_global: dict[int, set[str]] = {}  # scope index -> names it declares global

    # -- helpers --------------------------------------------------------------------------
    @property
    def scope(self) -> Scope:
        return self.scopes[self.cur]

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

    # -- refs -----------------------------------------------------------------------------
    def ref(self, node: ast.AST | None) -> tuple:
        if node is None:
            return UNKNOWN
        if isinstance(node, ast.Name):
            return ("n", node.id)
        if isinstance(node, ast.Attribute):
            return ("a", self.ref(node.value), node.attr)
        if isinstance(node, ast.Call):
            arg0 = self.ref(node.args[0]) if node.args and not isinstance(node.args[0], ast.Starred) else UNKNOWN
            return ("c", self.ref(node.func), arg0)
        if isinstance(node, ast.Subscript):
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, (str, int)) and not isinstance(key.value, bool):
                return ("s", self.ref(node.value), key.value)
            return ("s", self.ref(node.value), None)
        if isinstance(node, ast.Dict):
            items = []
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, (str, int)) and not isinstance(k.value, bool):
                    items.append((k.value, self.ref(v)))
            return ("d", tuple(items))
        if isinstance(node, ast.BoolOp):
            return ("u", tuple(self.ref(v) for v in node.values))
        if isinstance(node, ast.IfExp):
            return ("u", (self.ref(node.body), self.ref(node.orelse)))
        if isinstance(node, ast.NamedExpr):
            return self.ref(node.value)
        lit = _LITERALS.get(type(node))
        if lit is not None:
            return ("lit", lit)
        if isinstance(node, ast.Constant) and node.value is not None and not isinstance(node.value, bool):
            return ("lit", type(node.value).__name__)
        if isinstance(node, ast.Await):
            return self.ref(node.value)
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
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
        return ""

    # -- binding targets ------------------------------------------------------------------
    def bind_target(self, target: ast.AST, value: tuple) -> None:
        if isinstance(target, ast.Name):
            self._bind(target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.bind_target(elt, UNKNOWN)
        elif isinstance(target, ast.Starred):
            self.bind_target(target.value, UNKNOWN)
        elif isinstance(target, ast.Attribute):
            # self.x = value inside a method: an instance attribute of the class
            sc = self.scope
            if (sc.self_kind == "instance" and isinstance(target.value, ast.Name)
                    and target.value.id == sc.self_name and sc.class_qual in self.classes):
                self.classes[sc.class_qual].attrs.setdefault(target.attr, []).append((self.cur, value))
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
        self.visit(node.value)
        value = self.ref(node.value)
        for t in node.targets:
            self._module_variable(t, node)
            if (isinstance(t, (ast.Tuple, ast.List)) and isinstance(node.value, (ast.Tuple, ast.List))
                    and len(t.elts) == len(node.value.elts)
                    and not any(isinstance(e, ast.Starred) for e in t.elts + node.value.elts)):
                for te, ve in zip(t.elts, node.value.elts):  # a, b = x, y
                    self.bind_target(te, self.ref(ve) if isinstance(te, (ast.Name, ast.Attribute)) else UNKNOWN)
                continue
            self.bind_target(t, value if isinstance(t, (ast.Name, ast.Attribute)) else UNKNOWN)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            value = self.ref(node.value)
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
        if isinstance(node.target, ast.Name):
            self._bind(node.target.id, UNKNOWN)
        else:
            self.visit(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind(node.target.id, self.ref(node.value))

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self.bind_target(node.target, UNKNOWN)
        for stmt in node.body + node.orelse:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.bind_target(item.optional_vars, UNKNOWN)
        for stmt in node.body:
            self.visit(stmt)

    visit_AsyncWith = visit_With

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self._bind(node.name, UNKNOWN)
        for stmt in node.body:
            self.visit(stmt)

    def visit_Global(self, node: ast.Global) -> None:
        self.scope.globals.update(node.names)
        self.declared_global.setdefault(self.cur, set()).update(node.names)

    def _bind(self, name: str, ref: tuple) -> None:
        """Bind ``name`` where Python binds it: in the current body, or in the module when the
        body declared it ``global`` (``def __getattr__(name): global X; from .m import X``
        defines the module's ``X``)."""
        if name in self.declared_global.get(self.cur, ()):
            self.scopes[0].bind(name, ref)
        else:
            self.scope.bind(name, ref)

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

    def _decorators(self, node, outer: int) -> None:
        """Calls in decorators are attributed to the decorated definition (the current scope) but
        evaluated in the enclosing one; a bare ``@name`` counts as a call of ``name``."""
        self.eval_scope = outer
        for dec in node.decorator_list:
            self.visit(dec)
            if not isinstance(dec, ast.Call):
                self.scope.calls.append(CallSite(dec.lineno, dec.col_offset, dec.end_col_offset or dec.col_offset,
                                                 self.ref(dec), self._call_name(dec), True, outer))
        self.eval_scope = -1

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer = self.scope
        qual = self._qual(node.name)
        kind = "method" if outer.kind == "class" else "function"
        self._add_symbol(qual, node.name, kind, node, col=self._name_col(node))
        self._bind(node.name, ("def", qual))
        # decorators, defaults and annotations are evaluated in the enclosing scope, but calls in
        # decorators are attributed to the decorated function (see below)
        for d in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.visit(d)
        idx = len(self.scopes)
        existing = self.scope_of.get(qual)
        sc = Scope(qual, kind, self.cur)
        self.scopes.append(sc)
        if existing is None:
            self.scope_of[qual] = idx
        decos = {self._call_name(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list}
        args = node.args
        params = args.posonlyargs + args.args
        if kind == "method" and "staticmethod" not in decos and params:
            sc.self_name = params[0].arg
            sc.self_kind = "class" if ("classmethod" in decos or node.name in ("__new__", "__init_subclass__", "__class_getitem__")) else "instance"
            sc.class_qual = outer.qual
        all_params = params + args.kwonlyargs + ([args.vararg] if args.vararg else []) + ([args.kwarg] if args.kwarg else [])
        for a in all_params:
            if a.arg == sc.self_name:
                continue
            sc.bind(a.arg, self.ann_ref(a.annotation) if a is not args.vararg and a is not args.kwarg else UNKNOWN)
        prev, self.cur = self.cur, idx
        self._decorators(node, prev)
        for stmt in node.body:
            self.visit(stmt)
        self.cur = prev

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

    def visit_Lambda(self, node: ast.Lambda) -> None:
        args = node.args
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.visit(d)
        idx = self._inner_scope("lambda")
        for a in args.posonlyargs + args.args + args.kwonlyargs + [x for x in (args.vararg, args.kwarg) if x]:
            self.scopes[idx].bind(a.arg, UNKNOWN)
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
                self._bind_in(idx, gen.target)
                for cond in gen.ifs:
                    self.visit(cond)
            for attr in ("elt", "key", "value"):
                sub = getattr(node, attr, None)
                if sub is not None:
                    self.visit(sub)
        finally:
            self.eval_scope = prev

    def _bind_in(self, idx: int, target: ast.AST) -> None:
        """Bind the names of a comprehension target (``x``, ``(k, v)``, ``*rest``) in scope
        ``idx``; anything else in it (``obj.attr``, ``d[k]``) is visited as an expression."""
        if isinstance(target, ast.Name):
            self.scopes[idx].bind(target.id, UNKNOWN)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._bind_in(idx, elt)
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
        prev, self.cur = self.cur, idx
        self._decorators(node, prev)
        for stmt in node.body:
            self.visit(stmt)
        self.cur = prev

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        self.scope.calls.append(CallSite(func.lineno, func.col_offset, func.end_col_offset or func.col_offset,
                                         self.ref(func), self._call_name(func), False, self.eval_scope))
        self.generic_visit(node)


def _no_visit(self, node) -> None:
    pass


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
    return PyFacts(rel=rel, lines=n_lines, symbols=ex.symbols, scopes=ex.scopes, classes=ex.classes,
                   imports=ex.imports, stars=ex.stars, scope_of=ex.scope_of)
