"""JavaScript/TypeScript extraction: one file's syntax tree in, ``JsFacts`` out.

Like ``python.py`` this is local to the file: it records definitions, module specifiers and
call sites with small *value references* (see ``js_facts``); binding them across files is
``js_resolve.py``/``js_bind.py``'s job, finding the file a specifier names is ``js_modules.py``'s.
Grammars and node readers: ``js_syntax.py``; declared types and type declarations:
``js_typed.py`` (a base class of the extractor here).
"""

from __future__ import annotations

from orbit_lsp.index import js_parse
from orbit_lsp.index.js_facts import (  # noqa: F401 - re-exported: the fact model's historical home
    JS_EXTS, UNKNOWN, JsClass, JsFacts, JsImport, JsScope, JsSyntaxError)
from orbit_lsp.index.js_syntax import (  # noqa: F401 - grammar_for and string_value re-exported
    CLASSES, FUNC_DECLS, FUNCS, SKIP, TYPE_DECLS, WRAPPERS, cjs_export_target, dynamic_import, end_col,
    export_name, first_error, grammar_for, last_name, literal_import_calls, pattern_names,
    require_spec, specifiers, string_value, text, unwrap)
from orbit_lsp.index.js_typed import TypedDeclarations
from orbit_lsp.index.js_types import parameter_types, type_parameters, type_ref
from orbit_lsp.index.py_facts import CallSite, PySymbol

_MAX_RETURNS = 8  # return values kept per function (a longer list is as good as unknown)
_KEYED = frozenset({"Map", "WeakMap"})  # ``new Map<K, V>()`` is read as a value of that type


class _Extractor(TypedDeclarations):
    def __init__(self, rel: str, js: bool = False):
        self.rel = rel
        self.type_stars: set[int] = set()  # lines of ``export type *`` the parse mended (js_parse)
        self.js = js  # a JavaScript file: JSDoc types count (TypeScript ignores them in .ts files)
        self.results: dict[str, tuple] = {}
        self.params: dict[str, tuple] = {}
        self._callbacks: dict[int, tuple] = {}  # node id of a function passed to a call -> (scope, callee ref, i, expected)
        self._expected: dict[int, tuple] = {}  # node id of a call initialising a declared variable -> the type
        self._returns: dict[int, list] = {}  # scope index -> refs of its ``return`` values
        self._namespaces: set[int] = set()  # scope indexes of ``namespace`` bodies
        self.symbols: list[PySymbol] = []
        self.seen: set[str] = set()
        self.scopes: list[JsScope] = [JsScope("", -1)]
        self.classes: dict[str, JsClass] = {}
        self.imports: list[JsImport] = []
        self.exports: dict[str, tuple] = {}
        self.stars: list[str] = []
        self.cur = 0
        self._pending: dict[int, tuple] = {}  # node id of a function value -> its ("def", qual)
        self._values_import_calls: set[int] = set()  # node ids of the import() calls seen as values
        self._eval_scope = -1  # while visiting decorators: the scope they are evaluated in

    # -- helpers ------------------------------------------------------------------------------
    @property
    def scope(self) -> JsScope:
        return self.scopes[self.cur]

    def _qual(self, name: str) -> str:
        q = self.scope.qual
        return f"{q}.{name}" if q else name

    def _add(self, qual: str, name: str, kind: str, node, name_node=None) -> bool:
        at = name_node if name_node is not None else node
        sym = PySymbol(qual, name, kind, node.start_point[0] + 1, node.end_point[0] + 1, at.start_point[1])
        if qual in self.seen:
            if kind in ("function", "class"):  # ``interface F`` merged with ``function F``: the callable wins
                for i, old in enumerate(self.symbols):
                    if old.qual == qual and old.kind in ("interface", "type"):
                        self.symbols[i] = sym
                        return True
            return False
        self.seen.add(qual)
        self.symbols.append(sym)
        return True

    def _import(self, spec: str | None, node, kind: str) -> None:
        if kind == "dynamic":
            self._values_import_calls.add(node.id)
        if spec:
            self.imports.append(JsImport(spec, node.start_point[0] + 1, kind))

    # -- refs ---------------------------------------------------------------------------------
    def ref(self, node) -> tuple:
        while node is not None and node.type in WRAPPERS:
            kids = node.named_children
            t = node.type
            if t == "as_expression" and len(kids) > 1:  # ``x as T`` (``as const`` keeps x)
                tref = type_ref(kids[1])
                return UNKNOWN if tref == UNKNOWN else ("t", tref)
            if t == "type_assertion" and len(kids) > 1:  # ``<T>x``
                tref = type_ref(kids[0].named_children[0] if kids[0].named_children else None)
                return UNKNOWN if tref == UNKNOWN else ("t", tref)
            if t == "await_expression":
                inner = self.ref(kids[0] if kids else None)
                return UNKNOWN if inner == UNKNOWN else ("await", inner)
            node = kids[0] if kids else None  # parentheses, ``satisfies``, ``x!``
        if node is None:
            return UNKNOWN
        t = node.type
        if t in ("identifier", "shorthand_property_identifier"):
            return ("n", text(node))
        if t == "this":
            return ("this",)
        if t == "super":
            return ("super",)
        if t == "member_expression":
            prop = node.child_by_field_name("property")
            if prop is None or prop.type not in ("property_identifier", "private_property_identifier"):
                return UNKNOWN
            return ("a", self.ref(node.child_by_field_name("object")), text(prop))
        if t == "subscript_expression":
            key = string_value(node.child_by_field_name("index"))
            obj = self.ref(node.child_by_field_name("object"))
            if key is None:  # ``xs[i]``: an element
                return UNKNOWN if obj == UNKNOWN else ("elem", obj)
            return ("a", obj, key)
        if t == "new_expression":
            ctor, targs = node.child_by_field_name("constructor"), node.child_by_field_name("type_arguments")
            if ctor is not None and ctor.type == "identifier" and targs is not None and text(ctor) in _KEYED:
                # new Map<K, V>(): its values are typed (the binder checks the name is the global one)
                return ("t", ("g", ("n", text(ctor)), tuple(type_ref(a) for a in targs.named_children)))
            return ("new", self.ref(ctor))
        if t == "ternary_expression":  # either branch
            alts = (self.ref(node.child_by_field_name("consequence")), self.ref(node.child_by_field_name("alternative")))
            return ("alt", alts) if UNKNOWN not in alts else UNKNOWN
        if t == "binary_expression" and node.child_by_field_name("operator") is not None \
                and node.child_by_field_name("operator").type in ("||", "??"):  # ``a ?? b``: either
            alts = (self.ref(node.child_by_field_name("left")), self.ref(node.child_by_field_name("right")))
            return ("alt", alts) if UNKNOWN not in alts else UNKNOWN
        if t == "call_expression":
            spec = require_spec(node)
            if spec is not None:
                return ("imp", spec, "*")
            dyn, spec = dynamic_import(node)
            if dyn:
                return ("imp", spec, "*") if spec else UNKNOWN
            fn = self.ref(node.child_by_field_name("function"))
            return UNKNOWN if fn == UNKNOWN else ("call", fn)
        if t == "object":
            items = []
            for ch in node.named_children:
                if ch.type == "pair":
                    k = ch.child_by_field_name("key")
                    key = text(k) if k is not None and k.type == "property_identifier" else string_value(k)
                    if key is not None:
                        items.append((key, self._value_ref(ch.child_by_field_name("value"))))
                elif ch.type == "shorthand_property_identifier":
                    items.append((text(ch), ("n", text(ch))))
                elif ch.type == "method_definition":
                    n = ch.child_by_field_name("name")
                    if n is not None and n.type == "property_identifier":
                        items.append((text(n), self._pending.get(ch.id, UNKNOWN)))
            return ("obj", tuple(items))
        return UNKNOWN

    def _value_ref(self, node) -> tuple:
        """Ref of a value; a function value already visited as a definition is ``("def", qual)``."""
        inner = unwrap(node)
        if inner is not None and inner.id in self._pending:
            return self._pending[inner.id]
        return self.ref(node)

    def _declares_here(self) -> bool:
        """Whether declarations in the current scope are symbols (the module, a namespace)."""
        return self.cur == 0 or self.cur in self._namespaces

    # -- binding patterns -----------------------------------------------------------------------
    def bind_pattern(self, pat, value: tuple) -> None:
        if pat is None:
            return
        t = pat.type
        if t in ("identifier", "shorthand_property_identifier_pattern"):
            self.scope.bind(text(pat), value)
        elif t == "object_pattern":
            for ch in pat.named_children:
                if ch.type == "shorthand_property_identifier_pattern":
                    self.scope.bind(text(ch), ("a", value, text(ch)) if value != UNKNOWN else UNKNOWN)
                elif ch.type == "pair_pattern":
                    k = ch.child_by_field_name("key")
                    key = text(k) if k is not None and k.type == "property_identifier" else string_value(k)
                    sub = ("a", value, key) if key is not None and value != UNKNOWN else UNKNOWN
                    self.bind_pattern(ch.child_by_field_name("value"), sub)
                elif ch.type == "object_assignment_pattern":
                    self.bind_pattern(ch.child_by_field_name("left"), UNKNOWN)
                    self.visit(ch.child_by_field_name("right"))
                elif ch.type == "rest_pattern":
                    for g in ch.named_children:
                        self.bind_pattern(g, UNKNOWN)
        elif t == "array_pattern":
            for ch in pat.named_children:
                self.bind_pattern(ch, UNKNOWN)
        elif t in ("assignment_pattern", "object_assignment_pattern"):
            self.bind_pattern(pat.child_by_field_name("left"), UNKNOWN)
            self.visit(pat.child_by_field_name("right"))
        elif t == "rest_pattern":
            for ch in pat.named_children:
                self.bind_pattern(ch, UNKNOWN)
        elif t in ("required_parameter", "optional_parameter"):
            self.bind_pattern(pat.child_by_field_name("pattern"), UNKNOWN)
            self.visit(pat.child_by_field_name("value"))

    # -- definitions ----------------------------------------------------------------------------
    def function(self, fn, name: str | None, kind: str = "function", name_node=None, this_class=None,
                 decorators=()) -> tuple:
        """Visit a function; a named one becomes a symbol. Returns its ref (``("def", qual)`` or
        unknown)."""
        outer = self.scope
        ref = UNKNOWN
        if name:
            qual = self._qual(name) if kind != "method" else name
            self._add(qual, name.rsplit(".", 1)[-1], kind, fn, name_node)
            ref = ("def", qual)
            owner = qual
        else:
            owner = outer.qual
        scope = JsScope(owner, self.cur, this_class=this_class)
        if this_class is None and fn.type == "arrow_function":
            scope.this_class = outer.this_class  # arrows keep the enclosing ``this``
            if outer.this_class is None:
                scope.this_ref, scope.this_scope = ("this",), self.cur
        idx = len(self.scopes)
        self.scopes.append(scope)
        prev, self.cur = self.cur, idx
        for tname, constraint in type_parameters(fn.child_by_field_name("type_parameters")):
            scope.types[tname] = ("tp", constraint)
        doc = self._jsdoc(fn)
        self.decorators(decorators, prev)
        self._params(fn, doc.get("params", {}), self._callbacks.pop(fn.id, None))
        body = fn.child_by_field_name("body")
        if body is not None:
            if body.type == "statement_block":
                self.block(body)
            else:
                self.visit(body)
        self.cur = prev
        rets = self._returns.pop(idx, [])
        if ref != UNKNOWN:
            rt = fn.child_by_field_name("return_type")
            if rt is not None:
                result = ("t", type_ref(rt))
            elif "returns" in doc:
                result = ("t", doc["returns"])
            elif body is not None and body.type != "statement_block":
                result = ("alt", (self._value_ref(body),))
            else:
                result = ("alt", tuple(rets[:_MAX_RETURNS])) if rets and len(rets) <= _MAX_RETURNS else None
            if result is not None:
                self.results.setdefault(ref[1], (idx, result))
            ptypes = parameter_types(fn.child_by_field_name("parameters"), doc.get("params"))
            if any(t != UNKNOWN for t in ptypes):
                self.params.setdefault(ref[1], (idx, ptypes))
        return ref

    def decorators(self, decs, eval_idx: int) -> None:
        """Calls in decorators belong to the decorated definition (the current scope) but are
        evaluated where the decorator is written (scope ``eval_idx``); a bare ``@name`` counts as
        a call of ``name`` (JavaScript calls it with the target)."""
        saved, self._eval_scope = self._eval_scope, eval_idx
        for d in decs:
            e = unwrap(d.named_children[0]) if d.named_children else None
            if e is None:
                continue
            if e.type == "call_expression":
                self.visit(e)
            elif e.type in ("identifier", "member_expression"):
                self.scope.calls.append(CallSite(e.start_point[0] + 1, e.start_point[1], end_col(e), self.ref(e),
                                                 last_name(e), True, eval_idx))
            else:
                self.visit(e)
        self._eval_scope = saved

    def klass(self, node, name: str | None, name_node=None) -> tuple:
        if not name:
            name = "default" if node.parent is not None and node.parent.type == "export_statement" else None
        if not name:
            self.visit_children(node)
            return UNKNOWN
        qual = self._qual(name)
        self._add(qual, name, "class", node, name_node)
        heritage = None
        supers: tuple = ()
        for ch in node.named_children:
            if ch.type == "class_heritage":
                ext = next((c for c in ch.named_children if c.type == "extends_clause"), None)
                if ext is not None:
                    v = ext.child_by_field_name("value") or (ext.named_children[0] if ext.named_children else None)
                    heritage = self.ref(v)
                    self.visit(v)
                elif ch.named_children and ch.named_children[0].type != "implements_clause":
                    heritage = self.ref(ch.named_children[0])  # JS grammar: class_heritage holds the expression
                    self.visit(ch.named_children[0])
                impl = next((c for c in ch.named_children if c.type == "implements_clause"), None)
                if impl is not None:
                    supers = tuple(type_ref(c) for c in impl.named_children)
        idx = len(self.scopes)
        cls = self.classes.setdefault(qual, JsClass(qual, heritage, self.cur, scope=idx, supers=supers))
        if cls.kind != "class":  # ``interface C`` merged with ``class C``: one class with both's members
            merged = JsClass(qual, heritage, self.cur, dict(cls.members), scope=idx, supers=supers + cls.supers,
                             fields=dict(cls.fields))
            cls = self.classes[qual] = merged
        self.scopes.append(JsScope(qual, self.cur, this_class=qual))
        prev, self.cur = self.cur, idx
        for tname, constraint in type_parameters(node.child_by_field_name("type_parameters")):
            self.scope.types[tname] = ("tp", constraint)
        decs = [c for c in node.children if c.type == "decorator"]
        if node.parent is not None and node.parent.type == "export_statement":
            decs = [c for c in node.parent.children if c.type == "decorator"] + decs
        self.decorators(decs, prev)
        body = node.child_by_field_name("body")
        pending: list = []  # decorators written before the next member
        for m in (body.named_children if body is not None else []):
            t = m.type
            if t == "decorator":
                pending.append(m)
                continue
            decs, pending = pending + [c for c in m.children if c.type == "decorator"], []
            if t in ("method_definition", "abstract_method_signature", "method_signature"):
                n = m.child_by_field_name("name")
                if n is None or n.type not in ("property_identifier", "private_property_identifier"):
                    self.visit_children(m)
                    continue
                mname = text(n)
                mq = f"{qual}.{mname}"
                cls.members.setdefault(mname, mq)
                if any(c.type == "get" for c in m.children) and mname not in cls.getters:
                    cls.getters.append(mname)
                if m.child_by_field_name("body") is not None:
                    self.function(m, mq, "method", n, this_class=qual, decorators=decs)
                    if mname == "constructor":
                        self._parameter_properties(m, cls, idx)
                else:
                    self._add(mq, mname, "method", m, n)
                    self.decorators(decs, prev)
                    rt = m.child_by_field_name("return_type")
                    if rt is not None:
                        self.results.setdefault(mq, (idx, ("t", type_ref(rt))))
                    ptypes = parameter_types(m.child_by_field_name("parameters"))
                    if any(t != UNKNOWN for t in ptypes):
                        self.params.setdefault(mq, (idx, ptypes))
            elif t in ("field_definition", "public_field_definition"):
                n = m.child_by_field_name("property") or m.child_by_field_name("name")
                v = unwrap(m.child_by_field_name("value"))
                if n is not None and n.type in ("property_identifier", "private_property_identifier") \
                        and v is not None and v.type in FUNCS:
                    mname = text(n)
                    mq = f"{qual}.{mname}"
                    cls.members.setdefault(mname, mq)
                    self.function(v, mq, "method", n, this_class=qual, decorators=decs)
                else:
                    self.decorators(decs, prev)  # a decorated field: the class owns the calls
                    if v is not None:
                        self.visit(v)
                    if n is not None and n.type in ("property_identifier", "private_property_identifier"):
                        tnode = m.child_by_field_name("type")
                        tref = type_ref(tnode) if tnode is not None else self._jsdoc(m).get("type")
                        if tref is not None:
                            cls.fields[text(n)] = (idx, ("t", tref))
                        elif v is not None:
                            cls.fields[text(n)] = (idx, self._value_ref(v))
            elif t == "class_static_block":
                self.visit_children(m)
        self.cur = prev
        return ("def", qual)

    # -- statements -----------------------------------------------------------------------------
    def block(self, node) -> None:
        for ch in node.named_children:
            self.visit(ch)

    def visit_children(self, node) -> None:
        for ch in node.named_children:
            self.visit(ch)

    def declarator(self, d, exported: bool) -> None:
        name_node = d.child_by_field_name("name")
        value = d.child_by_field_name("value")
        v = unwrap(value)
        if name_node is not None and name_node.type == "identifier":
            name = text(name_node)
            if v is not None and v.type in FUNCS:
                ref = self.function(v, name, "function", name_node)
                self.scope.bind(name, ref)
            elif v is not None and v.type == "class":
                ref = self.klass(v, name, name_node)
                self.scope.bind(name, ref)
            else:
                declared = self._declared_type(d)
                if declared is not None and v is not None and v.type == "call_expression":
                    self._expected[v.id] = declared  # ``const x: C<T> = make((inst) => …)``
                self._visit_value(v, name if self.cur == 0 else None)
                ref = ("t", declared) if declared is not None else self._value_ref(value) if v is not None else UNKNOWN
                if self.cur == 0 and not _is_import_ref(ref):  # ``const x = require(…)`` is an import
                    self._add(name, name, "variable", d, name_node)
                self.scope.bind(name, ref)
            if exported:
                self.exports[name] = ("n", name)
        else:
            self._visit_value(v)
            declared = self._declared_type(d)
            ref = ("t", declared) if declared is not None else self.ref(value) if v is not None else UNKNOWN
            self.bind_pattern(name_node, ref)
            if exported:
                for ident in pattern_names(name_node):
                    self.exports[ident] = ("n", ident)

    def _visit_value(self, v, prefix: str | None = None) -> None:
        if v is None:
            return
        if v.type == "object":
            self.object_literal(v, prefix)
        else:
            self.visit(v)

    def object_literal(self, node, prefix: str | None) -> None:
        """Visit an object literal; at module level, named function members become symbols
        (``prefix.key``; ``key`` with ``prefix == ""``: the members of ``module.exports = {…}``).
        ``this`` in its methods (not arrows) is the object."""
        methods: list[int] = []
        for ch in node.named_children:
            if ch.type == "pair":
                k = ch.child_by_field_name("key")
                key = text(k) if k is not None and k.type == "property_identifier" else string_value(k)
                v = unwrap(ch.child_by_field_name("value"))
                if v is None:
                    continue
                if v.type in FUNCS:
                    q = (f"{prefix}.{key}" if prefix else key) if key is not None and prefix is not None \
                        and self.cur == 0 else None
                    if v.type != "arrow_function":
                        methods.append(len(self.scopes))
                    self._pending[v.id] = self.function(v, q if q not in self.seen else None, "function", k)
                elif v.type == "object":
                    self.object_literal(v, f"{prefix}.{key}" if prefix and key else None)
                else:
                    self.visit(v)
            elif ch.type == "method_definition":
                n = ch.child_by_field_name("name")
                q = None
                if n is not None and n.type == "property_identifier" and prefix is not None and self.cur == 0:
                    q = f"{prefix}.{text(n)}" if prefix else text(n)
                methods.append(len(self.scopes))
                self._pending[ch.id] = self.function(ch, q if q not in self.seen else None, "function", n)
            else:
                self.visit(ch)
        if methods:
            this = self.ref(node)
            for idx in methods:
                self.scopes[idx].this_ref, self.scopes[idx].this_scope = this, self.cur

    def visit(self, node) -> None:  # noqa: C901 - one dispatch over node types
        if node is None:
            return
        t = node.type
        if t in ("import_statement",):
            self.import_statement(node)
        elif t == "export_statement":
            self.export_statement(node)
        elif t in ("lexical_declaration", "variable_declaration"):
            for d in node.named_children:
                if d.type == "variable_declarator":
                    self.declarator(d, False)
        elif t in FUNC_DECLS or t == "function_signature":
            n = node.child_by_field_name("name")
            name = text(n) if n is not None else None
            if t == "function_signature":
                if name:
                    q = self._qual(name)
                    self._add(q, name, "function", node, n)
                    self.scope.bind(name, ("def", q))
                    idx = len(self.scopes)
                    sig = JsScope(q, self.cur)
                    for tname, constraint in type_parameters(node.child_by_field_name("type_parameters")):
                        sig.types[tname] = ("tp", constraint)
                    self.scopes.append(sig)
                    rt = node.child_by_field_name("return_type")
                    if rt is not None:
                        self.results.setdefault(q, (idx, ("t", type_ref(rt))))
                    ptypes = parameter_types(node.child_by_field_name("parameters"))
                    if any(t != UNKNOWN for t in ptypes):
                        self.params.setdefault(q, (idx, ptypes))
                return
            ref = self.function(node, name, "function", n)
            if name:
                self.scope.bind(name, ref)
        elif t in ("class_declaration", "abstract_class_declaration"):
            n = node.child_by_field_name("name")
            name = text(n) if n is not None else None
            ref = self.klass(node, name, n)
            if name:
                self.scope.bind(name, ref)
        elif t in TYPE_DECLS:
            self.type_declaration(node, TYPE_DECLS[t])
        elif t == "internal_module":
            if not self.namespace(node):
                self.visit_children(node)
        elif t == "for_in_statement":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            op = node.child_by_field_name("operator")
            self.visit(right)
            if left is not None and left.type in ("identifier", "object_pattern", "array_pattern"):
                elem = self.ref(right) if op is not None and op.type == "of" else UNKNOWN
                self.bind_pattern(left, ("elem", elem) if elem != UNKNOWN else UNKNOWN)
            else:
                self.visit(left)
            self.visit(node.child_by_field_name("body"))
        elif t == "return_statement":
            self.visit_children(node)
            if node.named_children:
                self._returns.setdefault(self.cur, []).append(self._value_ref(node.named_children[0]))
        elif t in FUNCS:
            n = node.child_by_field_name("name")
            self.function(node, None)
        elif t == "class":
            n = node.child_by_field_name("name")
            self.klass(node, text(n) if n is not None else None, n)
        elif t == "call_expression":
            self.call(node)
        elif t == "new_expression":
            ctor = node.child_by_field_name("constructor")
            cref = self.ref(ctor)
            self.scope.calls.append(CallSite(ctor.start_point[0] + 1, ctor.start_point[1], end_col(ctor),
                                             ("new", cref), last_name(ctor), False, self._eval_scope))
            args = node.child_by_field_name("arguments")
            if cref != UNKNOWN and args is not None:
                self._note_callbacks(args, ("a", cref, "constructor"))
            self.visit_children(node)
        elif t in ("jsx_opening_element", "jsx_self_closing_element"):
            # <Button …/>: React calls the component; lower-case names are host elements
            n = node.child_by_field_name("name")
            if n is not None and (n.type == "member_expression" or (n.type == "identifier" and text(n)[:1].isupper())):
                self.scope.calls.append(CallSite(n.start_point[0] + 1, n.start_point[1], end_col(n),
                                                 ("jsx", self.ref(n)), last_name(n), False, self._eval_scope))
            for ch in node.named_children:
                if ch is not n and ch.type != "identifier":
                    self.visit(ch)
        elif t == "assignment_expression":
            self.assignment(node)
        elif t in SKIP:
            return
        else:
            self.visit_children(node)

    def call(self, node) -> None:
        fn = node.child_by_field_name("function")
        args = node.child_by_field_name("arguments")
        spec = require_spec(node)
        if spec is not None:
            self._import(spec, node, "require")
            return
        dyn, spec = dynamic_import(node)
        if dyn:
            self._import(spec, node, "dynamic")
            self.visit_children(args) if args is not None else None
            return
        f = unwrap(fn)
        # import("./x").then((m) => m.f()): ``m`` is the module namespace
        if f is not None and f.type == "member_expression":
            obj = unwrap(f.child_by_field_name("object"))
            prop = f.child_by_field_name("property")
            d, dspec = dynamic_import(obj)
            if d and dspec and prop is not None and prop.text == b"then" and args is not None and args.named_children:
                cb = unwrap(args.named_children[0])
                self._import(dspec, obj, "dynamic")
                if cb is not None and cb.type in ("arrow_function", "function_expression", "function"):
                    self._then_callback(cb, ("imp", dspec, "*"))
                    for a in args.named_children[1:]:
                        self.visit(a)
                    return
        if fn is not None and fn.type not in ("import", "super"):
            fref = self.ref(fn)
            self.scope.calls.append(CallSite(fn.start_point[0] + 1, fn.start_point[1], end_col(fn),
                                             fref, last_name(fn), False, self._eval_scope))
            if fref != UNKNOWN and args is not None:
                self._note_callbacks(args, fref, self._expected.pop(node.id, None))
        self.visit(fn)
        if args is not None:
            self.visit_children(args)

    def _then_callback(self, cb, value: tuple) -> None:
        outer = self.scope
        idx = len(self.scopes)
        self.scopes.append(JsScope(outer.qual, self.cur,
                                   this_class=outer.this_class if cb.type == "arrow_function" else None))
        prev, self.cur = self.cur, idx
        params = cb.child_by_field_name("parameters")
        plist = params.named_children if params is not None else [cb.child_by_field_name("parameter")]
        for i, p in enumerate(x for x in plist if x is not None):
            if i == 0:
                pat = p.child_by_field_name("pattern") if p.type in ("required_parameter", "optional_parameter") else p
                self.bind_pattern(pat, value)
            else:
                self.bind_pattern(p, UNKNOWN)
        body = cb.child_by_field_name("body")
        if body is not None:
            self.block(body) if body.type == "statement_block" else self.visit(body)
        self.cur = prev

    def _export_definition(self, v, key: str, at) -> bool:
        """Define the function or class expression ``v`` exported as ``key`` (``module.exports =
        function f() {}``, ``export default class {}``): a named one is also bound in the
        module, an anonymous one is called ``default`` (``at``: where its name would be).
        False when ``v`` is neither."""
        n = v.child_by_field_name("name")
        name = text(n) if n is not None else "default"
        if v.type in FUNCS:
            ref = self.function(v, name, "function", n or at)
            if n is not None:
                self.scope.bind(name, ref)
        elif v.type in CLASSES:
            ref = self.klass(v, name, n)
        else:
            return False
        self.exports[key] = ref
        return True

    def assignment(self, node) -> None:
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        r = unwrap(right)
        target = cjs_export_target(left)
        if target is not None and self.cur == 0:
            if target == "=":
                # module.exports = …
                if r is not None and self._export_definition(r, "=", left):
                    pass
                elif r is not None and r.type == "object":
                    self.object_literal(r, "")
                    self.exports["="] = self.ref(r)
                else:
                    self.visit(r)
                    self.exports["="] = self.ref(r)
            else:
                if r is not None and r.type in FUNCS:
                    ref = self.function(r, target, "function", left.child_by_field_name("property"))
                elif r is not None and r.type == "class":
                    ref = self.klass(r, target, left.child_by_field_name("property"))
                else:
                    self.visit(r)
                    ref = self.ref(r)
                self.exports[target] = ref
            return
        # this.x = … and plain assignments: visit both sides, bind simple names
        self.visit(left) if left is not None and left.type != "identifier" else None
        if r is not None and r.type in FUNCS:
            ref = self.function(r, None)
        else:
            self.visit(r)
            ref = self.ref(r)
        if left is not None and left.type == "identifier":
            if not self._declared_typed(text(left)):  # a declared type wins over what is assigned
                self.scope.bind(text(left), ref)
        elif left is not None and left.type == "member_expression" and self.scope.this_class is not None:
            obj, prop = left.child_by_field_name("object"), left.child_by_field_name("property")
            cls = self.classes.get(self.scope.this_class)
            if obj is not None and obj.type == "this" and prop is not None and cls is not None \
                    and prop.type in ("property_identifier", "private_property_identifier"):
                declared = self._jsdoc(node).get("type")
                if declared not in (None, UNKNOWN):
                    ref = ("t", declared)
                if ref != UNKNOWN and text(prop) not in cls.members:
                    cls.fields.setdefault(text(prop), (self.cur, ref))  # a declared field wins

    # -- modules --------------------------------------------------------------------------------
    def import_statement(self, node) -> None:
        spec = string_value(node.child_by_field_name("source"))
        type_only = any(ch.type == "type" for ch in node.children)
        clause = next((c for c in node.named_children if c.type in ("import_clause", "import_require_clause")), None)
        if clause is None:
            self._import(spec, node, "side")
            return
        if clause.type == "import_require_clause":
            ident = next((c for c in clause.named_children if c.type == "identifier"), None)
            src = clause.child_by_field_name("source")
            spec = string_value(src)
            self._import(spec, node, "import-equals")
            if ident is not None and spec:
                self.scope.bind(text(ident), ("imp", spec, "*"))
            return
        if not type_only:  # ``import { type A, type B }``: every name a type (ts-syntax)
            named = [c for c in clause.named_children]
            type_only = len(named) == 1 and named[0].type == "named_imports" and _all_types(named[0], "import_specifier")
        self._import(spec, node, "type" if type_only else "import")
        if not spec:
            return
        for ch in clause.named_children:
            if ch.type == "identifier":
                self.scope.bind(text(ch), ("imp", spec, "default"))
            elif ch.type == "namespace_import":
                ident = next((c for c in ch.named_children if c.type == "identifier"), None)
                if ident is not None:
                    self.scope.bind(text(ident), ("imp", spec, "*"))
            elif ch.type == "named_imports":
                for imported, local in specifiers(ch, "import_specifier"):
                    self.scope.bind(local, ("imp", spec, imported))

    def export_statement(self, node) -> None:
        src = node.child_by_field_name("source")
        tokens = {c.type for c in node.children if not c.is_named}
        if src is not None:
            spec = string_value(src)
            if not spec:
                return
            clause = next((c for c in node.named_children if c.type == "export_clause"), None)
            ns = next((c for c in node.named_children if c.type == "namespace_export"), None)
            if clause is not None:  # ``export type {…} from`` / every name ``type``: type-only (ts-syntax)
                type_only = "type" in tokens or _all_types(clause, "export_specifier")
                self._import(spec, node, "type-reexport" if type_only else "reexport")
                for name, out in specifiers(clause, "export_specifier"):
                    self.exports[out] = ("imp", spec, name)
            elif ns is not None:
                self._import(spec, node, "type-reexport" if node.start_point[0] + 1 in self.type_stars else "reexport")
                ident = next((c for c in ns.named_children if c.type in ("identifier", "string")), None)
                if ident is not None:
                    self.exports[export_name(ident)] = ("imp", spec, "*")
            else:
                self._import(spec, node, "type-star" if node.start_point[0] + 1 in self.type_stars else "star")
                if "type" not in tokens or "*" in tokens:
                    self.stars.append(spec)
            return
        decl = node.child_by_field_name("declaration")
        value = node.child_by_field_name("value")
        if decl is not None:
            t = decl.type
            if t in ("lexical_declaration", "variable_declaration"):
                for d in decl.named_children:
                    if d.type == "variable_declarator":
                        self.declarator(d, True)
                return
            self.visit(decl)
            if t == "ambient_declaration":  # ``export declare function f(): R;`` (.d.ts; ts-syntax)
                inner = next((c for c in decl.named_children if c.type != "comment"), None)
                if inner is not None and inner.type in ("lexical_declaration", "variable_declaration"):
                    for d in inner.named_children:
                        n = d.child_by_field_name("name") if d.type == "variable_declarator" else None
                        if n is not None and n.type == "identifier":
                            self.exports[text(n)] = ("n", text(n))
                    return
                decl = inner if inner is not None else decl
            n = decl.child_by_field_name("name")
            if n is not None:
                name = text(n)
                key = "default" if "default" in tokens else name
                self.exports[key] = ("n", name)
            elif "default" in tokens and t in FUNC_DECLS:
                pass
            return
        if value is not None or "default" in tokens:
            v = unwrap(value) if value is not None else None
            if v is None:
                # ``export default function () {}`` / ``export default class {}`` without a name
                anon = next((c for c in node.named_children if c.type in FUNCS or c.type in CLASSES), None)
                v = anon
            if v is not None and self._export_definition(v, "default", v):
                pass
            elif v is not None:
                self._visit_value(v)
                self.exports["default"] = self.ref(v)
            return
        if "=" in tokens:  # TS ``export = x``
            expr = next((c for c in node.named_children), None)
            self.visit(expr)
            self.exports["="] = self.ref(expr)
            return
        clause = next((c for c in node.named_children if c.type == "export_clause"), None)
        if clause is not None:
            for name, out in specifiers(clause, "export_specifier"):
                self.exports[out] = ("n", name)
            return
        self.visit_children(node)


def _all_types(clause, kind: str) -> bool:
    """True when every specifier of an import/export clause is marked ``type`` (and there is one)."""
    specs = [s for s in clause.named_children if s.type == kind]
    return bool(specs) and all(any(c.type == "type" for c in s.children) for s in specs)


def _is_import_ref(ref: tuple) -> bool:
    while ref[0] == "a":
        ref = ref[1]
    return ref[0] == "imp"



def extract(rel: str, source: bytes) -> JsFacts:
    """Parse one JS/TS file (``rel`` workspace-relative, ``source`` its bytes).

    Raises ``JsSyntaxError`` when the tree has an ERROR or MISSING node (the caller keeps the
    file's last good facts, or takes the partial ones the error carries when there are none),
    ``RecursionError`` for absurdly deep nesting."""
    parsed = js_parse.parse(rel, source)  # with the grammars' gaps mended (ts-syntax)
    root = parsed.tree.root_node
    ex = _Extractor(rel, js=grammar_for(rel) == "javascript")
    ex.type_stars = parsed.lines_of("type-star")
    for ch in root.named_children:
        ex.visit(ch)
    n_lines = source.count(b"\n") + (0 if source.endswith(b"\n") or not source else 1)
    if ex.scopes[0].calls or any(sc.calls for sc in ex.scopes if sc.qual == ""):
        # a module symbol owns the calls made at module level
        ex.symbols.insert(0, PySymbol("", rel.rsplit("/", 1)[-1], "module", 1, max(1, n_lines), 0))
    # ``import("./x")`` in type positions (``let a: import("./x").T``, ``typeof import("./x")``)
    # is a type-only dependency: every literal import() call the walk above did not see as a value
    for call, spec in literal_import_calls(root, parsed.grammar):
        if call.id not in ex._values_import_calls:
            ex._import(string_value(spec), call, "type")
    for spec, line in parsed.type_imports:  # ``import("./x").T<A>`` types the parse mended (ts-syntax)
        ex.imports.append(JsImport(spec, line, "type"))
    facts = JsFacts(rel=rel, lines=n_lines, symbols=ex.symbols, scopes=ex.scopes, classes=ex.classes,
                    imports=ex.imports, exports=ex.exports, stars=ex.stars, results=ex.results, params=ex.params)
    if parsed.mended:
        js_parse.restore_anonymous_default(facts)
        js_parse.restore_names(facts, parsed.renames)
    if root.has_error:
        row, msg = first_error(root)
        raise JsSyntaxError(row + 1, f"{msg} (tree-sitter)", facts)
    return facts
