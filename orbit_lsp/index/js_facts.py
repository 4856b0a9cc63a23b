"""The facts orbit keeps of one JavaScript/TypeScript file (``JsFacts``) and their parts.

Produced by ``javascript.extract`` (syntax only, one file), consumed by ``js_resolve`` /
``js_bind`` (binding across files). Stored pickled per file.

Qualified names inside a file: ``render``, ``Cart.add``, ``outer.inner``; the graph spells them
``path#qual`` (``src/pages/home.ts#render``). A ``module`` symbol (qual ``""``) exists only in
files with calls at module level (it owns them), so a pure barrel defines nothing.

Value references (tuples): ``("n", name)`` a name; ``("a", ref, attr)`` a member; ``("new",
ref)`` an instance of the class ``ref`` (as a call site: ``new C()``); ``("jsx", ref)`` (call sites
only) a JSX element ``<C/>``; ``("this",)``; ``("def", qual)`` a definition of this
file; ``("imp", spec, name)`` an imported binding (``name`` ``"default"``, ``"*"`` for the module
namespace / ``require`` / ``import x = require()``, or an exported name); ``("obj", ((key, ref),
…))`` an object literal; ``("?",)`` unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orbit_lsp.index.python import CallSite, PySymbol, compact_pickle

UNKNOWN = ("?",)
JS_EXTS = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")


class JsSyntaxError(Exception):
    """A file tree-sitter could only parse with errors: ``lineno`` (1-based) of the first
    error, ``msg``, and ``facts``: what the error-tolerant tree still yields (used only when the
    file has no last good graph: a grammar that lags the language must not hide whole files)."""

    def __init__(self, lineno: int, msg: str, facts: "JsFacts | None" = None):
        super().__init__(f"line {lineno}: {msg}")
        self.lineno = lineno
        self.msg = msg
        self.facts = facts


@compact_pickle
@dataclass(slots=True)
class JsImport:
    """One module specifier: ``spec`` as written, ``line`` 1-based, ``kind`` one of import |
    type | side | reexport | star | require | dynamic | import-equals."""

    spec: str
    line: int
    kind: str


@compact_pickle
@dataclass(slots=True)
class JsScope:
    """A function, method or class body (or the module, index 0). ``qual`` is the symbol its
    calls belong to (an anonymous function's calls belong to the enclosing named one);
    ``names`` maps locally bound names to refs; ``this_class`` is the class whose instance
    ``this`` is (methods, and arrow functions inside them)."""

    qual: str
    parent: int
    names: dict[str, list] = field(default_factory=dict)
    calls: list[CallSite] = field(default_factory=list)
    this_class: str | None = None

    def bind(self, name: str, ref: tuple) -> None:
        self.names.setdefault(name, []).append(ref)

    def interface(self) -> tuple:
        return (self.qual, self.parent, tuple(sorted((k, tuple(v)) for k, v in self.names.items())),
                self.this_class)


@compact_pickle
@dataclass(slots=True)
class JsClass:
    """A class: ``heritage`` the ref of its ``extends`` (evaluated in scope ``outer``),
    ``members`` method/field name -> qual."""

    qual: str
    heritage: tuple | None
    outer: int
    members: dict[str, str] = field(default_factory=dict)

    def interface(self) -> tuple:
        return (self.qual, self.heritage, self.outer, tuple(sorted(self.members.items())))


@compact_pickle
@dataclass(slots=True)
class JsFacts:
    """Everything orbit keeps of one JS/TS file. ``exports`` maps an exported name (``default``;
    ``=`` for ``module.exports = …`` / ``export =``) to a ref evaluated in the module scope;
    ``stars`` are the specifiers of ``export * from``."""

    rel: str
    lines: int
    symbols: list[PySymbol]
    scopes: list[JsScope]
    classes: dict[str, JsClass]
    imports: list[JsImport]
    exports: dict[str, tuple]
    stars: list[str]

    def interface(self) -> tuple:
        """What other files can observe when resolving against this one."""
        return (tuple(sorted((s.qual, s.kind) for s in self.symbols)),
                tuple(s.interface() for s in self.scopes),
                tuple(c.interface() for c in sorted(self.classes.values(), key=lambda c: c.qual)),
                tuple(sorted(self.exports.items())), tuple(self.stars))

