"""Parsing one JS/TS file with tree-sitter, mending the grammars' known gaps in modern syntax.

The PyPI grammars (``tree-sitter-typescript`` 0.23.2, ``tree-sitter-javascript`` 0.25; no newer
build parses these, see bench/RESULTS.md "TypeScript grammars") reject some valid code:

- TypeScript variance annotations on type parameters: ``interface ZodType<out O, in I>``,
  ``<in out T>``, ``<const in T>`` (tree-sitter-typescript issue 370);
- ``export type * from "./types.js"`` and ``export type * as ns from …``;
- a generic call signature opening a line after a member without ``;`` (``{ a(x: A): B`` newline
  ``<T>(x: T): T }``): TypeScript reads no type arguments across a line break, the grammar reads
  ``B<T>``; a ``;`` takes the place of the space before ``<``;
- contextual keywords as names: ``accessor() {}`` and ``abstract = 1`` in a class, ``using`` as
  an identifier (``using(x)``);
- an import type with type arguments, ``import("./x.js").FiberRef<A>`` (declaration files);
- escapes in a template literal type (``type M = `use \\`new\\``): blanked, a type's text
  is never read;
- ``accessor`` after another modifier: ``static accessor x``, ``override accessor x``;
- a declaration file's anonymous default function, ``export default function (): R;`` (what
  ``tsc`` emits for ``export default function () {}``);
- in JavaScript, reserved words as exported or imported names (``export { _null as null }``,
  ``export { function } from "./x"``), which the TypeScript grammar parses.

``parse`` parses with the file's grammar; only when the tree has errors, it looks at the tokens
around them (and, by a query, at generic types opening a line) and, for the gaps above only,
rewrites a few bytes: a modifier keyword blanked with spaces, a ``;`` in place of a space, a
keyword used as a name replaced by a placeholder of the same length, ``import("./x")`` by an
identifier of underscores. Byte length, lines and columns stay as they were. It parses again
(incrementally), up to four rounds, and keeps the result when it has fewer errors. A JavaScript
file still in error is parsed with the TSX grammar, kept when that parse is clean. Whatever stays
in error is reported by the caller as before (the error-tolerant tree still yields facts). What
was mended is told in ``Parsed`` so extraction keeps its meaning (``export type *`` is
type-only, ``restore_names`` gives placeholders their names back).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from orbit_lsp.index.js_syntax import grammar_for, language

_VARIANCE = (b"in", b"out")
_VARIANCE_BEFORE = (b"<", b",", b"const", b"in")
_PARAM_ENDS = (b",", b">", b"=", b"extends")
_MODIFIERS = frozenset({b"static", b"override", b"declare", b"public", b"private", b"protected",
                        b"readonly", b"abstract"})
_NOT_NAMES = frozenset({b"extends", b"=", b",", b">", b"(", b")", b":", b";", b"{", b"}", b"?", b"!"})
# tokens after which a type continues on the next line
_CONTINUES = frozenset({b",", b";", b"{", b"(", b"[", b"|", b"&", b"=", b":", b"=>", b"<", b"?", b"extends",
                        b"keyof", b"typeof", b"infer", b"is", b"new", b"return", b"*/"})
_MAX_ROUNDS = 4
ANON_DEFAULT = "\u0192"  # the name a mended ``export default function (…): R;`` is parsed under


@dataclass
class Parsed:
    """``tree`` the best parse; ``grammar`` the grammar that produced it (``"javascript"``,
    ``"typescript"`` or ``"tsx"``); ``source`` the bytes it was parsed from (the file's, with
    the mends); ``mended``: what was mended, as ``(kind, 1-based line)`` pairs: ``variance``,
    ``type-star`` (an ``export type *``), ``accessor``, ``signature-break``, ``template-escape``,
    ``anon-default`` (``export default function (…): R;`` parsed as a function named
    ``ANON_DEFAULT``), ``import-type`` (``import("./x").T<A>``, see ``type_imports``),
    ``keyword-name`` (see ``renames``), ``tsx-grammar`` (a JavaScript file parsed with the TSX
    grammar, line 0)."""

    tree: object
    grammar: str
    source: bytes
    mended: list[tuple[str, int]] = field(default_factory=list)
    type_imports: list[tuple[str, int]] = field(default_factory=list)  # (specifier, line) of the
    #   ``import("./x").T<A>`` types mended: no longer import() calls in the tree
    renames: dict[str, str] = field(default_factory=dict)  # placeholder -> the keyword used as a
    #   name that it stands for in the tree (``restore_names``)

    def lines_of(self, kind: str) -> set[int]:
        return {line for k, line in self.mended if k == kind}


def _edge_leaves(node, n: int, out: list) -> None:
    """The first and the last ``n`` leaves under an error-free ``node`` (all of a small one),
    in source order."""
    if node.descendant_count <= 4 * n:
        _all_leaves(node, out)
        return
    head: list = []
    stack = [node]
    while stack and len(head) < n:
        x = stack.pop()
        if x.child_count == 0:
            if x.end_byte > x.start_byte and x.type != "comment":
                head.append(x)
        else:
            stack.extend(reversed(x.children))
    tail: list = []
    stack = [node]
    while stack and len(tail) < n:
        x = stack.pop()
        if x.child_count == 0:
            if x.end_byte > x.start_byte and x.type != "comment":
                tail.append(x)
        else:
            stack.extend(x.children)
    out.extend(head)
    out.extend(t for t in reversed(tail) if t.start_byte >= head[-1].end_byte) if head else out.extend(reversed(tail))


def _all_leaves(node, out: list) -> None:
    stack = [node]
    while stack:
        x = stack.pop()
        if x.child_count == 0:
            if x.end_byte > x.start_byte and x.type != "comment":
                out.append(x)
        else:
            stack.extend(reversed(x.children))


def _leaves(node, out: list) -> None:
    """The tokens (comments aside) around the errors under ``node``, in source order: every
    token of an ERROR node, every child of a node with an error, and of an error-free child its
    first and last four (a mend reads the tokens next to what the grammar rejected; the inside
    of an error-free subtree is never needed). An explicit stack: files nest deeply."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.child_count == 0:
            if n.end_byte > n.start_byte and n.type != "comment":
                out.append(n)
        elif n.type == "ERROR":
            _all_leaves(n, out)
        elif n.has_error:
            stack.extend(reversed(n.children))
        else:
            _edge_leaves(n, 4, out)


def _is_name(tok: bytes) -> bool:
    return bool(tok) and tok not in _NOT_NAMES and (tok[:1].isalpha() or tok[:1] in b"_$#[" or tok[0] >= 0x80)


def _variance_follows(toks: list[bytes], j: int) -> bool:
    """True when ``toks[j:]`` go on as the rest of an annotated type parameter: ``[out] Name``
    then ``,`` ``>`` ``=`` or ``extends``."""
    if j < len(toks) and toks[j] == b"out":
        j += 1
    return j + 1 < len(toks) and _is_name(toks[j]) and toks[j + 1] in _PARAM_ENDS


_AFTER_MEMBER_NAME = frozenset({b"(", b"=", b";", b"}", b"?", b"!", b"<", b":"})
_AFTER_NAME = frozenset({b"(", b")", b",", b":", b".", b";", b"=", b"[", b"?", b"!", b"}", b"]"})


def _placeholder(word: bytes, src: bytes, renamed: dict) -> bytes | None:
    """A name of ``word``'s length found nowhere in ``src`` (so giving the original back can
    never touch another name), the same one for every use of ``word`` in one parse."""
    hit = renamed.get(word)
    if hit is None:
        for c in b"ZQXJKVW":
            cand = word[:-1] + bytes([c])
            if cand not in src and cand not in renamed.values():
                hit = renamed[word] = cand
                break
    return hit


def _mends(root, src: bytes, grammar: str = "typescript") -> list[tuple]:
    """The mends the erroneous top-level statements of ``root`` call for: ``(start byte, end
    byte, replacement of the same length, kind, 1-based line[, specifier])``."""
    leaves: list = []
    renamed: dict[bytes, bytes] = {}
    _leaves(root, leaves) if root.type == "ERROR" else None  # the statements hang loose under it
    for st in root.children if root.type != "ERROR" else ():
        if st.has_error:
            _leaves(st, leaves)
    toks = [src[n.start_byte:n.end_byte] for n in leaves]
    out = []
    for i, tok in enumerate(toks):
        prev = toks[i - 1] if i else b""
        nxt = toks[i + 1] if i + 1 < len(toks) else b""
        n = leaves[i]
        line = n.start_point[0] + 1
        if tok in _VARIANCE and prev in _VARIANCE_BEFORE and _variance_follows(toks, i + 1):
            out.append((n.start_byte, n.end_byte, b" " * len(tok), "variance", line))
        elif (tok == b"<" and i and leaves[i - 1].end_point[0] < n.start_point[0]
              and src[n.start_byte - n.start_point[1]:n.start_byte].strip() == b""  # first on its line
              and src[n.start_byte - 1:n.start_byte] in (b" ", b"\t") and prev not in _CONTINUES
              and src[leaves[i - 1].start_byte - 1:leaves[i - 1].end_byte] != b"=>"):  # a split ``=>``
            # a generic call signature starting a line after a member without ";" (``X\n  <A>(a:
            # A): B``): TypeScript reads no type arguments across a line break, the grammar does
            out.append((n.start_byte - 1, n.start_byte, b";", "signature-break", line))
        elif b"\\" in tok and n.parent is not None and n.parent.type == "ERROR":
            # escapes in a template literal type (``type M = `a \\`b\\``): the grammar has none
            k = tok.find(b"\\")
            while k >= 0:
                at = n.start_byte + k
                if src[at + 1:at + 2] in (b"`", b"$", b"\\", b"{"):
                    out.append((at, at + 2, b"  ", "template-escape", line))
                k = tok.find(b"\\", k + 2)
        elif tok == b"import" and nxt == b"(" and b")" in toks[i + 2:i + 6]:
            # ``import("./x").T<A>`` in a type: the grammar takes no type arguments after an
            # import type; ``import("./x")`` becomes an identifier of the same length
            # (``______________.T<A>``), the specifier is kept in ``Parsed.type_imports``
            k = toks.index(b")", i + 2)
            literal = src[leaves[i + 1].end_byte:leaves[k].start_byte].strip()
            if (len(literal) >= 2 and literal[:1] in (b'"', b"'") and literal[-1:] == literal[:1]
                    and k + 3 < len(toks) and toks[k + 1] == b"." and _is_name(toks[k + 2])
                    and b"<" in toks[k + 3:k + 10]):
                end = leaves[k].end_byte
                out.append((n.start_byte, end, b"_" * (end - n.start_byte), "import-type", line,
                            literal[1:-1].decode("utf-8", "replace")))
        elif ((tok in (b"accessor", b"abstract") and nxt in _AFTER_MEMBER_NAME)
              or (tok == b"using" and nxt in _AFTER_NAME)):
            # a contextual keyword as a name (``accessor() {}``, ``abstract = 1`` in a class,
            # ``using(x)``): the grammar reads a keyword; it is parsed under a placeholder name
            # of the same length that the file does not hold, and given back (``restore_names``)
            name = _placeholder(tok, src, renamed)
            if name is not None:
                out.append((n.start_byte, n.end_byte, name, "keyword-name", line,
                            (name.decode(), tok.decode())))
        elif tok == b"type" and prev == b"export" and nxt == b"*":
            out.append((n.start_byte, n.end_byte, b" " * len(tok), "type-star", line))
        elif tok == b"accessor" and prev in _MODIFIERS and _is_name(nxt):
            out.append((n.start_byte, n.end_byte, b" " * len(tok), "accessor", line))
        elif (tok == b"default" and prev == b"export" and nxt == b"function" and i + 2 < len(toks)
              and toks[i + 2] in (b"(", b"<")):
            # "default function (" -> "   function ƒ(": an ambient signature with a name
            start, end = n.start_byte, leaves[i + 2].start_byte
            name = ANON_DEFAULT.encode()
            new = b"function " + name
            if end - start >= len(new) and src[leaves[i + 1].end_byte:end].strip() == b"":
                out.append((start, end, b" " * (end - start - len(new)) + new, "anon-default", line))
    spans = [(root.start_byte, root.end_byte)] if root.type == "ERROR" else [
        (st.start_byte, st.end_byte) for st in root.children if st.has_error]
    if grammar != "javascript":
        out.extend(_wrapped_type_arguments(root, src, spans, {m[0] for m in out}, grammar))
    return out


_WRAPPED = "(generic_type (type_arguments . \"<\" @lt)) @g"


def _wrapped_type_arguments(root, src: bytes, spans, taken: set, grammar: str) -> list[tuple]:
    """``signature-break`` mends found by a query (in C) over the erroneous statements: a
    generic type whose ``<`` opens a later line than its name (``B`` newline ``<A>(a: A): A``,
    read by the grammar as ``B<A>`` inside an error-free subtree that ``_leaves`` skips)."""
    import tree_sitter

    query = _QUERIES.get(grammar)
    if query is None:
        query = _QUERIES[grammar] = (None, tree_sitter.Query(language(grammar), _WRAPPED))
    out = []
    for start, end in spans:
        cur = tree_sitter.QueryCursor(query[1])
        cur.set_byte_range(start, end)
        for _, caps in cur.matches(root):
            lt, g = caps["lt"][0], caps["g"][0]
            name = g.children[0]
            at = lt.start_byte - 1
            if (name.end_point[0] < lt.start_point[0] and src[at:at + 1] in (b" ", b"\t")
                    and src[lt.start_byte - lt.start_point[1]:lt.start_byte].strip() == b"" and at not in taken):
                taken.add(at)
                out.append((at, at + 1, b";", "signature-break", lt.start_point[0] + 1))
    return out


_QUERIES: dict = {}  # grammar -> (None, compiled query)


def _apply(parser, tree, src: bytes, mends) -> tuple[object, bytes]:
    import bisect

    buf = bytearray(src)
    starts = [0]  # byte offset of each line
    k = src.find(b"\n")
    while k >= 0:
        starts.append(k + 1)
        k = src.find(b"\n", k + 1)

    def point(offset: int) -> tuple[int, int]:
        row = bisect.bisect_right(starts, offset) - 1
        return row, offset - starts[row]

    # edit a copy: ``Tree.edit`` drops the tree's source (``Node.text`` is None afterwards), and
    # the tree given may be the best parse so far, kept if the mended one is no better
    tree = tree.copy()
    for start, end, new, *_ in mends:
        buf[start:end] = new
        # a same-length replacement: the edit's old and new ends coincide
        pt_s = point(start)
        pt_e = point(end)
        tree.edit(start_byte=start, old_end_byte=end, new_end_byte=end,
                  start_point=pt_s, old_end_point=pt_e, new_end_point=pt_e)
    new = bytes(buf)
    return parser.parse(new, tree), new


def _error_count(root) -> int:
    """ERROR and MISSING nodes under ``root`` (a measure to compare parses by)."""
    n, stack = 0, [root]
    while stack:
        x = stack.pop()
        if x.type == "ERROR" or x.is_missing:
            n += 1
        if x.has_error:
            stack.extend(x.children)
    return n


_LOCAL = threading.local()  # a tree-sitter Parser is not to be shared between threads


def _parser(grammar: str):
    """This thread's parser for ``grammar`` (made once: a new Parser per file costs about as
    much as parsing a small file)."""
    import tree_sitter

    cache = getattr(_LOCAL, "parsers", None)
    if cache is None:
        cache = _LOCAL.parsers = {}
    p = cache.get(grammar)
    if p is None:
        p = cache[grammar] = tree_sitter.Parser(language(grammar))
    return p


def parse(rel: str, source: bytes) -> Parsed:
    """The best tree-sitter parse of ``source`` (the bytes of workspace file ``rel``): see the
    module doc. Never raises for bad input; ``tree.root_node.has_error`` tells whether errors
    remain."""
    grammar = grammar_for(rel)
    parser = _parser(grammar)
    tree = parser.parse(source)
    if not tree.root_node.has_error:
        return Parsed(tree, grammar, source)
    best = Parsed(tree, grammar, source)
    src, mended, type_imports, renames = source, [], [], {}
    for _ in range(_MAX_ROUNDS):
        mends = [m for m in _mends(tree.root_node, src, grammar) if src[m[0]:m[1]] != m[2]]
        if not mends:
            break
        tree, src = _apply(parser, tree, src, mends)
        mended.extend(m[3:5] for m in mends)
        type_imports.extend((m[5], m[4]) for m in mends if m[3] == "import-type")
        renames.update(m[5] for m in mends if m[3] == "keyword-name")
        if not tree.root_node.has_error:
            break
    if mended and _error_count(tree.root_node) < _error_count(best.tree.root_node):
        best = Parsed(tree, grammar, src, sorted(set(mended), key=lambda m: (m[1], m[0])), type_imports, renames)
    if best.tree.root_node.has_error and grammar == "javascript":
        alt = parse("x.tsx", best.source)
        if not alt.tree.root_node.has_error:
            return Parsed(alt.tree, "tsx", alt.source, best.mended + alt.mended + [("tsx-grammar", 0)],
                          best.type_imports + alt.type_imports, {**best.renames, **alt.renames})
    return best


def restore_anonymous_default(facts) -> None:
    """Give back its name to an ``export default function (…): R;`` that ``parse`` read as a
    function named ``ANON_DEFAULT`` (``facts``: the file's ``JsFacts``, changed in place): the
    symbol becomes ``default`` and is the file's default export."""
    from dataclasses import replace

    if ANON_DEFAULT not in facts.exports:
        return
    facts.symbols[:] = [replace(s, qual="default", name="default") if s.qual == ANON_DEFAULT else s
                        for s in facts.symbols]
    del facts.exports[ANON_DEFAULT]
    facts.exports["default"] = ("def", "default")
    facts.scopes[0].names.pop(ANON_DEFAULT, None)
    for table in (facts.results, facts.params):
        if ANON_DEFAULT in table:
            table["default"] = table.pop(ANON_DEFAULT)


def restore_names(facts, renames: dict[str, str]):
    """Give back the keywords ``parse`` parsed under placeholder names (``Parsed.renames``):
    every string in ``facts`` (any dataclass, list, tuple or dict, changed in place where
    mutable) with a placeholder in it gets the original. A placeholder occurs nowhere in the
    file's source, so no other name changes. Returns ``facts``."""
    import dataclasses

    def fix(x):
        if isinstance(x, str):
            for a, b in renames.items():
                if a in x:
                    x = x.replace(a, b)
            return x
        if isinstance(x, tuple):
            return tuple(fix(i) for i in x)
        if isinstance(x, list):
            x[:] = [fix(i) for i in x]
            return x
        if isinstance(x, dict):
            items = [(fix(k), fix(v)) for k, v in x.items()]
            x.clear()
            x.update(items)
            return x
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            for f in dataclasses.fields(x):
                setattr(x, f.name, fix(getattr(x, f.name)))
            return x
        if isinstance(x, (set, frozenset)):
            return type(x)(fix(i) for i in x)
        return x

    return fix(facts) if renames else facts
