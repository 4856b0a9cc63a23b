"""Tree-sitter grammars for JavaScript/TypeScript and small readers of their syntax nodes.

Grammars: ``tree-sitter-javascript`` for ``.js .jsx .mjs .cjs``, ``tree-sitter-typescript``
(``tsx`` for ``.tsx``) for ``.ts .mts .cts``. Only structure is read (names, 1-based lines,
UTF-8 byte columns, string literal values); no regular expression ever reads the source.
"""

from __future__ import annotations

from functools import lru_cache


# node types --------------------------------------------------------------------------------------
FUNCS = frozenset({"function_declaration", "generator_function_declaration", "function_expression",
                    "generator_function", "function", "arrow_function"})
FUNC_DECLS = frozenset({"function_declaration", "generator_function_declaration"})
CLASSES = frozenset({"class_declaration", "abstract_class_declaration", "class"})
WRAPPERS = frozenset({"parenthesized_expression", "as_expression", "satisfies_expression",
                       "non_null_expression", "await_expression", "type_assertion"})
SKIP = frozenset({"comment", "import_alias", "type_annotation", "type_arguments", "type_parameters",
                   "predefined_type", "type_identifier", "interface_body", "string", "number",
                   "regex", "property_identifier"})
TYPE_DECLS = {"interface_declaration": "interface", "type_alias_declaration": "type", "enum_declaration": "enum"}


@lru_cache(maxsize=None)
def language(kind: str):
    import tree_sitter

    if kind == "javascript":
        import tree_sitter_javascript as g

        return tree_sitter.Language(g.language())
    import tree_sitter_typescript as g

    return tree_sitter.Language(g.language_tsx() if kind == "tsx" else g.language_typescript())


def grammar_for(rel: str) -> str:
    """``"javascript"``, ``"typescript"`` or ``"tsx"`` for a file name."""
    low = rel.lower()
    if low.endswith(".tsx"):
        return "tsx"
    if low.endswith((".ts", ".mts", ".cts")):
        return "typescript"
    return "javascript"


def string_value(node) -> str | None:
    """The value of a ``string`` or substitution-free ``template_string`` node, else None."""
    if node is None:
        return None
    if node.type == "string":
        parts = []
        for ch in node.named_children:
            if ch.type == "string_fragment":
                parts.append(ch.text.decode("utf-8", "replace"))
            elif ch.type == "escape_sequence":
                t = ch.text.decode("utf-8", "replace")
                parts.append(t[1:] if len(t) == 2 and t[1] in "'\"\\/" else t)
            else:
                return None
        return "".join(parts)
    if node.type == "template_string":
        if any(ch.type == "template_substitution" for ch in node.named_children):
            return None
        return node.text.decode("utf-8", "replace")[1:-1]
    return None


def text(node) -> str:
    return node.text.decode("utf-8", "replace")


def export_name(node) -> str | None:
    """An imported or exported name: an identifier, or a string (``export { x as "a-b" }``)."""
    return string_value(node) if node.type == "string" else text(node)


def specifiers(clause, kind: str):
    """``(name, as)`` of each ``kind`` (``import_specifier`` | ``export_specifier``) of an
    import or export clause; ``as`` is the alias, else the name."""
    for s in clause.named_children:
        if s.type != kind:
            continue
        n, a = s.child_by_field_name("name"), s.child_by_field_name("alias")
        if n is not None:
            name = export_name(n)
            yield name, (export_name(a) if a is not None else name)


def unwrap(node):
    while node is not None and node.type in WRAPPERS:
        inner = node.named_children[0] if node.named_children else None
        if node.type == "type_assertion" and len(node.named_children) > 1:
            inner = node.named_children[1]
        node = inner
    return node


def require_spec(node) -> str | None:
    """The literal specifier of ``require("x")``, else None."""
    if node is None or node.type != "call_expression":
        return None
    fn = node.child_by_field_name("function")
    if fn is None or fn.type != "identifier" or fn.text != b"require":
        return None
    args = node.child_by_field_name("arguments")
    if args is None or len(args.named_children) != 1:
        return None
    return string_value(args.named_children[0])


def dynamic_import(node) -> tuple[bool, str | None]:
    """(is ``import(…)``, its literal specifier or None)."""
    if node is None or node.type != "call_expression":
        return False, None
    fn = node.child_by_field_name("function")
    if fn is None or fn.type != "import":
        return False, None
    args = node.child_by_field_name("arguments")
    if args is None or not args.named_children:
        return True, None
    return True, string_value(args.named_children[0])


def pattern_names(pat) -> list[str]:
    out, stack = [], [pat]
    while stack:
        p = stack.pop()
        if p is None:
            continue
        if p.type in ("identifier", "shorthand_property_identifier_pattern"):
            out.append(text(p))
        elif p.type == "pair_pattern":
            stack.append(p.child_by_field_name("value"))
        elif p.type in ("assignment_pattern", "object_assignment_pattern"):
            stack.append(p.child_by_field_name("left"))
        else:
            stack.extend(p.named_children)
    return out


def cjs_export_target(left) -> str | None:
    """``"="`` for ``module.exports``, ``"name"`` for ``exports.name`` / ``module.exports.name``."""
    if left is None or left.type != "member_expression":
        return None
    obj, prop = left.child_by_field_name("object"), left.child_by_field_name("property")
    if prop is None or prop.type != "property_identifier":
        return None
    if obj.type == "identifier" and obj.text == b"module" and prop.text == b"exports":
        return "="
    if obj.type == "identifier" and obj.text == b"exports":
        return text(prop)
    if obj.type == "member_expression" and cjs_export_target(obj) == "=":
        return text(prop)
    return None


def end_col(node) -> int:
    """UTF-8 end column of a node on its first line (its start column when it spans lines)."""
    return node.end_point[1] if node.end_point[0] == node.start_point[0] else node.start_point[1]


def last_name(fn) -> str:
    fn = unwrap(fn)
    if fn is None:
        return ""
    if fn.type == "identifier":
        return text(fn)
    if fn.type == "member_expression":
        p = fn.child_by_field_name("property")
        return text(p) if p is not None else ""
    return ""


_IMPORT_CALLS = ("(call_expression function: (import) "
                 "arguments: (arguments . [(string) (template_string)] @spec)) @call")


@lru_cache(maxsize=None)
def _import_query(kind: str):
    import tree_sitter

    return tree_sitter.Query(language(kind), _IMPORT_CALLS)


def literal_import_calls(root, kind: str) -> list:
    """``(call node, specifier node)`` of every ``import(…)`` call with a literal first
    argument, in source order (a tree-sitter query: the walk happens in C)."""
    import tree_sitter

    out = []
    for _, caps in tree_sitter.QueryCursor(_import_query(kind)).matches(root):
        out.append((caps["call"][0], caps["spec"][0]))
    out.sort(key=lambda cs: cs[0].start_byte)
    return out


def first_error(node):
    """(row, message) of the first ERROR or MISSING node under ``node``."""
    cursor = [node]
    while cursor:
        n = cursor.pop()
        if n.is_missing:
            return n.start_point[0], f"missing {n.type}"
        if n.type == "ERROR":
            return n.start_point[0], "syntax error"
        if n.has_error:
            cursor.extend(reversed(n.children))
    return node.start_point[0], "syntax error"


