"""The facts Python extraction (``python.py``) keeps of one file (``PyFacts``: symbols, scopes with
the names they bind, call sites, classes, imports) and how they are pickled (``compact_pickle``).

Value references (hashable tuples, evaluated later in the scope they were found in):
``("n", name)`` a name; ``("a", base, attr)`` an attribute; ``("c", func, arg0)`` the result of a
call (``arg0`` is the first positional argument's ref, kept for ``functools.partial``);
``("s", base, key)`` a subscript (``key`` a constant or None); ``("d", ((key, ref), ...), pos)`` a
dict literal and ``("l", (ref, ...), kind, pos)`` a list/tuple/set literal (``pos`` = (scope qual,
ordinal) of the literal: a container's identity, so stores into it elsewhere in the file find it);
``("lit", type)`` a literal of a builtin type; ``("u", (ref, ...))`` one of several values (``or``,
conditional expression); ``("def", qual)`` a function, lambda or class defined in this file;
``("dec", (decorator ref, ...), ("def", qual))`` a decorated function or class;
``("prop", qual)`` a ``@property`` getter; ``("p", func_qual, name, ann, default)`` a parameter
(what call sites pass, its default, its annotation); ``("it", ref)`` an item of iterating ``ref``;
``("ix", ref, i)`` the ``i``-th item of unpacking ``ref``; ``("anv", value, ann)`` an annotated
assignment (the annotation wins where the value is unknown or external); ``("imod", spec)`` a
module bound by ``import``; ``("ifrom", spec, name)`` a name bound by ``from … import``;
``("ann", ref)`` an instance of an annotated type; ``("lc", call, literal)`` a library container
made empty (``OrderedDict()``: ``literal`` if the call's function is the library's class, else
``call``); ``("?",)`` unknown. A module ``spec`` is ``(base_dir, dotted)``: ``base_dir`` is
``None`` for absolute imports, else the workspace-relative directory a relative import starts from.
"""

from __future__ import annotations

import copyreg
import dataclasses
import operator
from dataclasses import dataclass, field

UNKNOWN = ("?",)
# library classes whose empty instances are containers (the ``"lc"`` ref): ``OrderedDict()``
LIBRARY_CONTAINER_CLASSES = frozenset({"collections.OrderedDict", "collections.defaultdict", "collections.deque",
                                       "typing.OrderedDict", "typing.DefaultDict", "typing.Deque",
                                       "weakref.WeakValueDictionary", "weakref.WeakKeyDictionary"})


def compact_pickle(cls):
    """Class decorator for slotted dataclasses: pickle an instance as its class and a tuple of
    its field values (``__reduce__``) instead of the default state dict of slot names. Facts are
    pickled from parse workers and into the cache: this halves both pickling and unpickling time
    and shrinks the pickles by a third.

    The same reduction is registered with ``copyreg`` as a function made of C parts only
    (``attrgetter`` of the class and of a property whose getter is an ``attrgetter`` of the
    fields), so ``pickle`` reduces an instance without calling Python code: the same bytes,
    pickled ~30% faster."""
    get = operator.attrgetter(*(f.name for f in dataclasses.fields(cls)))

    def __reduce__(self):
        return (type(self), get(self))

    cls.__reduce__ = __reduce__
    cls._reduce_fields = property(get)
    copyreg.pickle(cls, operator.attrgetter("__class__", "_reduce_fields"))
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
    args: tuple = ()  # refs of the positional arguments (a ``*x`` argument: ``("*", ref)``)
    kwargs: tuple = ()  # (name, ref) of the keyword arguments (``**x``: ``(None, ref)``)
    implicit: str = ""  # a call the code makes without call syntax: with | iter | raise | read (of an attribute)


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
    params: tuple = ()  # (name, kind) in order, kind pos|kwonly|var|kw (functions and lambdas)
    yields: list = field(default_factory=list)  # refs of yielded values (generators)
    stores: list = field(default_factory=list)  # (container ref, key or None, value ref, many):
    #   ``c[k] = v``, ``c.append(v)``, ``c.update(d)`` (``many``: ``v`` holds several items)
    decos: tuple = ()  # last identifiers of the decorators of a function or class
    fixture: str | None = None  # a pytest fixture: the name tests request it by (``name=``, else the function's)

    def bind(self, name: str, ref: tuple) -> None:
        self.names.setdefault(name, []).append(ref)

    def interface(self) -> tuple:
        return (self.qual, self.kind, self.parent, tuple(sorted((k, tuple(v)) for k, v in self.names.items())),
                tuple(self.returns), self.self_name, self.self_kind, self.class_qual, tuple(sorted(self.globals)),
                self.params, tuple(self.yields), tuple(self.stores), self.decos, self.fixture)


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


STAR_NAMES_UNREAD = ("*",)  # ``PyFacts.star_names`` of a module whose ``__all__`` is not a literal


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
    stars: list[tuple]  # module specs of the star imports at module level, in the order they bind
    #   (source order; a ``try`` body's after its handlers': ``python._Extractor.visit_Try``)
    scope_of: dict[str, int]  # qual of a function/class -> its body scope index
    sys_path: tuple = ()  # workspace-relative directories the file adds to ``sys.path``
    #   (``py_syspath.sys_path_dirs``; ``""`` the root). Not in ``interface``: they change
    #   other files' module lookup, which the indexer's module table follows
    star_names: tuple[str, ...] | None = None  # what ``from <this module> import *`` binds:
    #   None when the module sets no ``__all__`` (then its names without a leading underscore),
    #   else the names of its ``__all__`` (``python.star_names``; ``STAR_NAMES_UNREAD`` when
    #   ``__all__`` is computed in a way not read here: any name may be)
    pending_calls: bytes | None = field(default=None, compare=False, repr=False)  # the call sites
    #   of every scope, still compressed (``parsing.unpickle_facts(blob, calls=False)``): until
    #   ``with_calls`` the scopes' ``calls`` are empty

    def with_calls(self) -> "PyFacts":
        """These facts with every scope's call sites (decoded now if they were still pending;
        safe to call from several threads at once: each decodes the same lists)."""
        pending = self.pending_calls
        if pending is not None:
            from orbit_lsp.index.parsing import unpickle_calls

            for sc, calls in zip(self.scopes, unpickle_calls(pending)):
                sc.calls = calls
            self.pending_calls = None
        return self

    def interface(self) -> tuple:
        """What other files can observe when resolving against this one (everything except call
        sites and line numbers). Equal interfaces mean other files' edges cannot change."""
        return (
            tuple(sorted((s.qual, s.kind) for s in self.symbols)),
            tuple(s.interface() for s in self.scopes),
            tuple(c.interface() for c in sorted(self.classes.values(), key=lambda c: c.qual)),
            tuple(self.stars),
            self.star_names,
            tuple(sorted(self.scope_of.items())),
        )
