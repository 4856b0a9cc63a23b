"""Type references read from TypeScript type syntax and from JSDoc tags (``js_facts`` describes
their shape). Syntax only: what a name denotes is decided when binding (``js_bind``).

``type_ref(node)`` reads a tree-sitter type node (the child of a ``type_annotation``, a
``return_type``, an ``as`` cast…). ``jsdoc_tags(comment)`` reads the ``@type``, ``@param``,
``@returns`` / ``@return`` tags of a ``/** … */`` comment (``tree-sitter-jsdoc``); their ``{…}``
type expressions are parsed by the TypeScript grammar itself (as the type of a declaration).
"""

from __future__ import annotations

import logging
from functools import lru_cache

from orbit_lsp.index.js_facts import UNKNOWN
from orbit_lsp.index.js_syntax import language, string_value, text

EXT = ("ext",)
_LANGUAGE_TYPES = frozenset({"string", "number", "boolean", "bigint", "symbol", "void", "undefined", "null",
                             "never", "object"})
_MAX_MEMBERS = 64  # object type literals: members kept


def _value_ref(node) -> tuple:
    """A value reference of the dotted names a type can mention (``ns.x`` in ``ns.T`` /
    ``typeof ns.x``)."""
    if node is None:
        return UNKNOWN
    t = node.type
    if t in ("identifier", "type_identifier", "property_identifier"):
        return ("n", text(node))
    if t == "this":
        return ("this",)
    if t in ("nested_identifier", "member_expression"):
        obj = node.child_by_field_name("object") or (node.named_children[0] if node.named_children else None)
        prop = node.child_by_field_name("property") or (node.named_children[-1] if node.named_children else None)
        if obj is None or prop is None or obj is prop:
            return UNKNOWN
        base = _value_ref(obj)
        return UNKNOWN if base == UNKNOWN else ("a", base, text(prop))
    return UNKNOWN


def type_ref(node) -> tuple:
    """The type reference of a type node (None -> unknown)."""
    if node is None:
        return UNKNOWN
    t = node.type
    if t == "type_annotation" or t == "parenthesized_type" or t == "readonly_type" or t == "asserts_annotation":
        return type_ref(node.named_children[-1]) if node.named_children else UNKNOWN
    if t == "type_identifier" or t == "identifier":
        return ("n", text(node))
    if t == "nested_type_identifier":
        mod, name = node.child_by_field_name("module"), node.child_by_field_name("name")
        base = _value_ref(mod)
        return UNKNOWN if base == UNKNOWN or name is None else ("q", base, text(name))
    if t == "generic_type":
        base = type_ref(node.child_by_field_name("name"))
        args = node.child_by_field_name("type_arguments")
        targs = tuple(type_ref(a) for a in args.named_children) if args is not None else ()
        return base if base == UNKNOWN else ("g", base, targs)
    if t in ("union_type", "intersection_type"):
        out: list = []
        for ch in node.named_children:
            r = type_ref(ch)
            if r[0] == "u":
                out.extend(r[1])
            else:
                out.append(r)
        return ("u", tuple(out))
    if t == "array_type":
        return ("arr", type_ref(node.named_children[0]) if node.named_children else UNKNOWN)
    if t == "this_type":
        return ("this",)
    if t == "predefined_type":
        return EXT if text(node) in _LANGUAGE_TYPES else UNKNOWN  # any, unknown: nothing known
    if t in ("literal_type", "template_literal_type", "tuple_type"):
        return EXT
    if t == "function_type":
        return ("fn", type_ref(node.child_by_field_name("return_type")),
                parameter_types(node.child_by_field_name("parameters")))
    if t == "type_query":
        inner = node.named_children[0] if node.named_children else None
        return ("typeof", _value_ref(inner))
    if t == "lookup_type":
        kids = node.named_children
        if len(kids) == 2 and kids[1].type == "literal_type" and kids[1].named_children:
            key = string_value(kids[1].named_children[0])
            if key is not None:
                return ("idx", type_ref(kids[0]), key)
        return UNKNOWN
    if t == "object_type":
        return ("obj", tuple(object_type_members(node)[:_MAX_MEMBERS]))
    return UNKNOWN


def object_type_members(node) -> list[tuple[str, tuple]]:
    """``(name, tref)`` of the properties and methods of an ``object_type`` or
    ``interface_body`` (a method ``m(): R`` is ``("fn", R)``)."""
    out = []
    for m in node.named_children:
        n = m.child_by_field_name("name")
        if n is None or n.type != "property_identifier":
            continue
        if m.type == "property_signature":
            out.append((text(n), type_ref(m.child_by_field_name("type"))))
        elif m.type == "method_signature":
            out.append((text(n), ("fn", type_ref(m.child_by_field_name("return_type")),
                                  parameter_types(m.child_by_field_name("parameters")))))
    return out


def parameter_types(params, documented: dict | None = None) -> tuple:
    """The declared types of the positional parameters of a ``formal_parameters`` node (unknown
    where none is declared; ``documented``: JSDoc ``@param`` types by name); a rest parameter
    ends the list."""
    out: list = []
    if params is None:
        return ()
    for p in params.named_children:
        if p.type not in ("required_parameter", "optional_parameter"):
            if p.type in ("identifier", "assignment_pattern") and documented:
                name = p if p.type == "identifier" else p.child_by_field_name("left")
                out.append(documented.get(text(name), UNKNOWN) if name is not None else UNKNOWN)
                continue
            if p.type == "rest_pattern" or p.type == "comment":
                break
            out.append(UNKNOWN)
            continue
        pat = p.child_by_field_name("pattern")
        if pat is not None and pat.type == "rest_pattern":
            break
        if pat is not None and pat.type == "this":
            continue  # ``this: T`` is no positional parameter
        tnode = p.child_by_field_name("type")
        if tnode is not None:
            out.append(type_ref(tnode))
        elif documented and pat is not None and pat.type == "identifier":
            out.append(documented.get(text(pat), UNKNOWN))
        else:
            out.append(UNKNOWN)
    return tuple(out)


def type_parameters(node) -> list[tuple[str, tuple]]:
    """``(name, constraint tref)`` of a ``type_parameters`` node (no constraint: unknown)."""
    out = []
    if node is None:
        return out
    for p in node.named_children:
        if p.type != "type_parameter":
            continue
        n = p.child_by_field_name("name")
        c = p.child_by_field_name("constraint")
        if n is not None:
            out.append((text(n), type_ref(c.named_children[-1]) if c is not None and c.named_children else UNKNOWN))
    return out


# -- JSDoc ----------------------------------------------------------------------------------------
@lru_cache(maxsize=4096)
def parse_type_text(src: str) -> tuple:
    """The tref of a type written as text (a JSDoc ``{…}``), parsed by the TypeScript grammar."""
    import tree_sitter

    if not src or "\n" in src and len(src) > 2000:
        return UNKNOWN
    code = f"let _: {src};".encode("utf-8")
    tree = tree_sitter.Parser(language("typescript")).parse(code)
    if tree.root_node.has_error:
        return UNKNOWN
    decl = tree.root_node.named_children[0] if tree.root_node.named_children else None
    d = decl.named_children[0] if decl is not None and decl.named_children else None
    return type_ref(d.child_by_field_name("type")) if d is not None else UNKNOWN


@lru_cache(maxsize=1)
def _jsdoc_language():
    """The JSDoc grammar, or None when ``tree-sitter-jsdoc`` is not installed (an environment
    older than this dependency: JSDoc types are then not read, and that is logged once)."""
    import tree_sitter

    try:
        import tree_sitter_jsdoc
    except ImportError:
        logging.getLogger("orbit_lsp.index").warning(
            "tree-sitter-jsdoc is not installed: JSDoc types are not used for call binding "
            "(reinstall orbit-lsp to get it)")
        return None
    return tree_sitter.Language(tree_sitter_jsdoc.language())


def jsdoc_tags(comment: str) -> dict:
    """``{"type": tref, "returns": tref, "this": tref, "params": {name: tref}}`` (present keys
    only) of a ``/** … */`` comment, read with the ``tree-sitter-jsdoc`` grammar."""
    import tree_sitter

    out: dict = {}
    lang = _jsdoc_language() if comment.startswith("/**") else None
    if lang is None:
        return out
    tree = tree_sitter.Parser(lang).parse(comment.encode("utf-8"))
    for tag in tree.root_node.named_children:
        if tag.type != "tag":
            continue
        kids = {c.type: c for c in tag.named_children}
        name, typ = kids.get("tag_name"), kids.get("type")
        if name is None or typ is None:
            continue
        tag_name = text(name)[1:]
        tref = parse_type_text(" ".join(text(typ).split()))
        if tag_name == "type":
            out["type"] = tref
        elif tag_name in ("returns", "return"):
            out["returns"] = tref
        elif tag_name == "this":
            out["this"] = tref
        elif tag_name in ("param", "arg", "argument"):
            ident = kids.get("identifier")
            if ident is None and "optional_identifier" in kids:
                ident = next((c for c in kids["optional_identifier"].named_children if c.type == "identifier"), None)
            if ident is not None:
                out.setdefault("params", {})[text(ident)] = tref
    return out
