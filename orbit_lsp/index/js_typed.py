"""The typed half of JS/TS extraction: what declarations say about types (``TypedDeclarations``,
a base class of ``javascript._Extractor``, whose state it uses: ``scopes``, ``cur``, ``scope``,
``classes``, ``results``, ``params``, ``exports``, ``js``, ``_add``, ``_qual``, ``visit``,
``bind_pattern``…).

Interfaces, type aliases and enums, ``namespace`` blocks, parameters with declared types (and
callbacks typed by their callee), constructor parameter properties, declared variable types,
JSDoc in JavaScript files. Type syntax itself is read by ``js_types``.
"""

from __future__ import annotations

from orbit_lsp.index.js_facts import UNKNOWN, JsClass, JsScope
from orbit_lsp.index.js_syntax import text, unwrap
from orbit_lsp.index.js_types import jsdoc_tags, parameter_types, type_parameters, type_ref

_JSDOC_HOLDERS = frozenset({"variable_declarator", "lexical_declaration", "variable_declaration", "export_statement",
                            "expression_statement", "assignment_expression", "pair", "field_definition",
                            "public_field_definition"})


class TypedDeclarations:
    """Extraction of declared types and type declarations (see the module doc)."""

    def _jsdoc(self, node) -> dict:
        """The JSDoc tags of the ``/** … */`` comment right before the declaration holding
        ``node`` (JavaScript files only), else {}."""
        if not self.js or node is None:
            return {}
        n = node
        while n.parent is not None and n.parent.type in _JSDOC_HOLDERS:
            n = n.parent
        prev = n.prev_named_sibling
        if prev is None or prev.type != "comment" or prev.end_point[0] < n.start_point[0] - 1:
            return {}
        doc = text(prev)
        return jsdoc_tags(doc) if doc.startswith("/**") else {}

    def _declared_typed(self, name: str) -> bool:
        """Whether the nearest binding of ``name`` (this scope or around it) has a declared type."""
        idx = self.cur
        while idx >= 0:
            sc = self.scopes[idx]
            refs = sc.names.get(name)
            if refs:
                return any(r[0] == "t" for r in refs)
            idx = sc.parent
        return False

    def _params(self, fn, documented: dict, callback: tuple | None) -> None:
        """Bind the parameters of ``fn``: a declared type (``p: T``; JSDoc ``@param {T} p`` in
        JavaScript, ``documented``) makes the value ``("t", T)``; an untyped parameter of a
        function passed to a call (``callback``: (scope, callee ref, argument index)) is typed by
        the callee's declared parameter type (``("cbp", …)``)."""
        params = fn.child_by_field_name("parameters")
        if params is None:
            p = fn.child_by_field_name("parameter")
            if p is not None:
                tref = documented.get(text(p)) if p.type == "identifier" else None
                if tref not in (None, UNKNOWN):
                    self.bind_pattern(p, ("t", tref))
                elif callback is not None and p.type == "identifier":
                    self.bind_pattern(p, ("cbp", callback[0], callback[1], callback[2], 0) + callback[3:])
                else:
                    self.bind_pattern(p, UNKNOWN)
            return
        j = -1
        for p in params.named_children:
            pat, tref = p, None
            if p.type in ("required_parameter", "optional_parameter"):
                pat = p.child_by_field_name("pattern")
                tnode = p.child_by_field_name("type")
                tref = type_ref(tnode) if tnode is not None else None
                if pat is not None and pat.type == "this":  # ``this: T``: what ``this`` is in the body
                    if tref not in (None, UNKNOWN):
                        self.scope.this_ref, self.scope.this_scope = ("t", tref), self.cur
                    continue
            if p.type != "comment":
                j += 1
            elif p.type == "assignment_pattern":
                pat = p.child_by_field_name("left")
            if tref is None and pat is not None and pat.type == "identifier":
                tref = documented.get(text(pat))
            if tref is None and callback is not None and pat is not None and pat.type in ("identifier", "object_pattern"):
                tref = ("cbp", callback[0], callback[1], callback[2], j) + callback[3:]
            if tref not in (None, UNKNOWN) and pat is not None and pat.type in ("identifier", "object_pattern"):
                self.bind_pattern(pat, tref if tref[0] == "cbp" else ("t", tref))
                self.visit(p.child_by_field_name("value") if p is not pat else None)
                if p.type == "assignment_pattern":
                    self.visit(p.child_by_field_name("right"))
            else:
                self.bind_pattern(p, UNKNOWN)

    def _parameter_properties(self, ctor, cls: JsClass, class_scope: int) -> None:
        """``constructor(private x: T)``: ``x`` is a field of type ``T``."""
        params = ctor.child_by_field_name("parameters")
        for p in (params.named_children if params is not None else []):
            if p.type not in ("required_parameter", "optional_parameter"):
                continue
            if not any(c.type == "accessibility_modifier" or c.type == "readonly" for c in p.children):
                continue
            pat, tnode = p.child_by_field_name("pattern"), p.child_by_field_name("type")
            if pat is not None and pat.type == "identifier" and tnode is not None:
                cls.fields[text(pat)] = (class_scope, ("t", type_ref(tnode)))

    def type_declaration(self, node, kind: str) -> None:
        """An interface, type alias or enum: a symbol where declarations are symbols (the module,
        a namespace). Interfaces and object-literal type aliases also get a ``JsClass`` (kind
        ``interface``; their methods are symbols ``I.m``), other aliases one of kind ``alias``
        whose ``supers[0]`` is the aliased type."""
        n = node.child_by_field_name("name")
        if n is None or not self._declares_here():
            return
        name = text(n)
        qual = self._qual(name)
        self._add(qual, name, kind, node, n)
        if kind == "enum":
            self.scope.bind(name, ("def", qual))
            return
        self.scope.types[name] = ("def", qual)
        idx = len(self.scopes)
        scope = JsScope(qual, self.cur)
        for tname, constraint in type_parameters(node.child_by_field_name("type_parameters")):
            scope.types[tname] = ("tp", constraint)
        self.scopes.append(scope)
        if kind == "type":
            value = node.child_by_field_name("value")
            if value is None or value.type != "object_type":
                self.classes.setdefault(qual, JsClass(qual, None, self.cur, kind="alias", scope=idx,
                                                      supers=(type_ref(value),)))
                return
            body, supers = value, ()
        else:
            body = node.child_by_field_name("body")
            ext = next((c for c in node.named_children if c.type == "extends_type_clause"), None)
            supers = tuple(type_ref(c) for c in ext.named_children) if ext is not None else ()
        cls = self.classes.setdefault(qual, JsClass(qual, None, self.cur, kind="interface", scope=idx, supers=supers))
        for m in (body.named_children if body is not None else []):
            mn = m.child_by_field_name("name")
            if mn is None or mn.type != "property_identifier":
                continue
            mname = text(mn)
            tnode = m.child_by_field_name("type")
            if m.type == "property_signature" and tnode is not None and tnode.named_children \
                    and tnode.named_children[-1].type == "function_type":
                ftype = tnode.named_children[-1]
                ret = ("t", type_ref(ftype.child_by_field_name("return_type")))
                ptypes = parameter_types(ftype.child_by_field_name("parameters"))
            elif m.type == "method_signature":
                ret = ("t", type_ref(m.child_by_field_name("return_type")))
                ptypes = parameter_types(m.child_by_field_name("parameters"))
            else:
                if m.type == "property_signature":
                    cls.fields[mname] = (idx, ("t", type_ref(tnode)))
                continue
            mq = f"{qual}.{mname}"
            self._add(mq, mname, "method", m, mn)
            cls.members.setdefault(mname, mq)
            self.results.setdefault(mq, (idx, ret))
            if any(t != UNKNOWN for t in ptypes):
                self.params.setdefault(mq, (idx, ptypes))

    def namespace(self, node) -> bool:
        """``namespace N { … }``: a symbol ``N`` whose body is a scope; ``N`` is bound to the
        namespace's exports. False when it is not a named namespace."""
        n, body = node.child_by_field_name("name"), node.child_by_field_name("body")
        if n is None or n.type != "identifier" or body is None:
            return False
        name = text(n)
        qual = self._qual(name)
        self._add(qual, name, "namespace", node, n)
        idx = len(self.scopes)
        self.scopes.append(JsScope(qual, self.cur))
        self._namespaces.add(idx)
        prev, self.cur = self.cur, idx
        saved, self.exports = self.exports, {}
        try:
            self.block(body)
        finally:
            inner, self.exports = self.exports, saved
            self.cur = prev
        self.scope.bind(name, ("ns", idx, tuple(sorted(inner.items()))))
        return True

    def _declared_type(self, declarator) -> tuple | None:
        """The declared type of a variable (``let x: T``; JSDoc ``@type {T}`` in JavaScript)."""
        tnode = declarator.child_by_field_name("type")
        tref = type_ref(tnode) if tnode is not None else self._jsdoc(declarator).get("type")
        return None if tref is None or tref == UNKNOWN else tref

    def _note_callbacks(self, args, fref: tuple, expected: tuple | None = None) -> None:
        """Remember the functions passed as arguments of a call of ``fref`` (their untyped
        parameters take the callee's declared parameter types; ``expected``: the declared type
        of the variable the call initialises, which fixes the callee's type arguments)."""
        extra = (expected,) if expected is not None else ()
        for i, a in enumerate(args.named_children):
            u = unwrap(a)
            branches = [u]
            if u is not None and u.type == "ternary_expression":  # ``cond ? (x) => … : (x) => …``
                branches = [unwrap(u.child_by_field_name("consequence")), unwrap(u.child_by_field_name("alternative"))]
            for b in branches:
                if b is not None and b.type in ("arrow_function", "function_expression", "function"):
                    self._callbacks[b.id] = (self.cur, fref, i) + extra
