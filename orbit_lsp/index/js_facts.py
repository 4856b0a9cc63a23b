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
…))`` an object literal; ``("call", ref)`` what calling ``ref`` returns; ``("t", tref)`` a value
of the declared type ``tref`` (annotations, ``as`` casts, JSDoc); ``("await", ref)``;
``("alt", (ref, …))`` one of several values (a function's ``return`` statements); ``("super",)``;
``("elem", ref)`` an element of the array ``ref`` (``xs[i]``, ``for (x of xs)``);
``("cbp", scope, callee ref, i, j[, expected tref])`` parameter ``j`` of a function passed as
argument ``i`` of a call of ``callee ref`` (evaluated in ``scope``), typed by the callee's
declared parameter type (its type parameters fixed by ``expected``, the declared type of the
variable the call initialises, when the callee returns the same generic type);
``("?",)`` unknown.

Type references (``tref``, see ``js_types``): ``("n", name)``; ``("q", value ref, name)`` a
qualified name ``ns.T``; ``("g", tref, (tref, …))`` generic arguments; ``("u", (tref, …))`` a union
or intersection; ``("arr", tref)``; ``("fn", tref, (tref, …))`` a function type (its return type, its parameters' types); ``("obj",
((name, tref), …))`` an object type literal; ``("typeof", value ref)``; ``("idx", tref, key)``;
``("this",)``; ``("ext",)`` a type of the language (``string``, literals); ``("?",)`` unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orbit_lsp.index.py_facts import CallSite, PySymbol, compact_pickle

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
    type | side | reexport | star | require | dynamic | import-equals, or type-reexport |
    type-star (``export type … from``, ``export type * from``); ``type``: ``import type``,
    ``import { type A }`` with every name a type, ``import("./x").T`` in a type."""

    spec: str
    line: int
    kind: str


@compact_pickle
@dataclass(slots=True)
class JsScope:
    """A function, method or class body (or the module, index 0). ``qual`` is the symbol its
    calls belong to (an anonymous function's calls belong to the enclosing named one);
    ``names`` maps locally bound names to refs; ``this_class`` is the class whose instance
    ``this`` is (methods, and arrow functions inside them); ``this_ref`` the value ``this`` is
    otherwise (an object literal's methods), evaluated in scope ``this_scope``. ``types`` maps
    names of the type namespace declared here to ``("def", qual)`` (an interface or a type
    alias of this file) or ``("tp", tref)`` (a type parameter and its constraint)."""

    qual: str
    parent: int
    names: dict[str, list] = field(default_factory=dict)
    calls: list[CallSite] = field(default_factory=list)
    this_class: str | None = None
    types: dict[str, tuple] = field(default_factory=dict)
    this_ref: tuple | None = None
    this_scope: int = -1

    def bind(self, name: str, ref: tuple) -> None:
        self.names.setdefault(name, []).append(ref)

    def interface(self) -> tuple:
        return (self.qual, self.parent, tuple(sorted((k, tuple(v)) for k, v in self.names.items())),
                self.this_class, tuple(sorted(self.types.items())), self.this_ref, self.this_scope)


@compact_pickle
@dataclass(slots=True)
class JsClass:
    """A class or an interface (``kind``): ``heritage`` the ref of a class's ``extends``
    (evaluated in scope ``outer``), ``members`` method name -> qual, ``fields`` property name ->
    ``(scope, ref)`` of its value (declared type ``("t", tref)``, initializer, ``this.x = …``),
    ``getters`` the members read as properties, ``supers`` type refs of an interface's
    ``extends`` and a class's ``implements`` (evaluated in scope ``scope``, the body's)."""

    qual: str
    heritage: tuple | None
    outer: int
    members: dict[str, str] = field(default_factory=dict)
    kind: str = "class"
    fields: dict[str, tuple] = field(default_factory=dict)
    getters: list[str] = field(default_factory=list)
    supers: tuple = ()
    scope: int = -1

    def interface(self) -> tuple:
        return (self.qual, self.heritage, self.outer, tuple(sorted(self.members.items())), self.kind,
                tuple(sorted(self.fields.items())), tuple(self.getters), self.supers, self.scope)


@compact_pickle
@dataclass(slots=True)
class JsFacts:
    """Everything orbit keeps of one JS/TS file. ``exports`` maps an exported name (``default``;
    ``=`` for ``module.exports = …`` / ``export =``) to a ref evaluated in the module scope;
    ``stars`` are the specifiers of ``export * from``. ``results`` maps a function or method qual
    to ``(scope, ref)``: what calling it returns (its declared return type ``("t", tref)``, else
    its ``return`` values), evaluated in its own scope ``scope``; ``params`` maps it to ``(scope,
    (tref, …))``, the declared types of its positional parameters."""

    rel: str
    lines: int
    symbols: list[PySymbol]
    scopes: list[JsScope]
    classes: dict[str, JsClass]
    imports: list[JsImport]
    exports: dict[str, tuple]
    stars: list[str]
    results: dict[str, tuple] = field(default_factory=dict)
    params: dict[str, tuple] = field(default_factory=dict)

    def interface(self) -> tuple:
        """What other files can observe when resolving against this one."""
        return (tuple(sorted((s.qual, s.kind) for s in self.symbols)),
                tuple(s.interface() for s in self.scopes),
                tuple(c.interface() for c in sorted(self.classes.values(), key=lambda c: c.qual)),
                tuple(sorted(self.exports.items())), tuple(self.stars), tuple(sorted(self.results.items())),
                tuple(sorted(self.params.items())))

