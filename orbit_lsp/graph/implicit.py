"""Python special methods that run without a call expression the graph binds (``a == b`` runs
``__eq__``): for them "0 callers" is not an answer, the callers are not all known.

The graph binds some implicit calls: constructing a class (``__init__``), calling an instance
(``__call__``), ``with`` (``__enter__``/``__exit__``), ``for`` (``__iter__``/``__next__``) and
their ``async`` forms, and property reads. Every other special method of Python 3's data model
runs on syntax or built-ins the graph does not follow (operators, subscripts, ``len``, ``repr``,
``str``, ``hash``, truth tests, pickling…). Python 2's names (``__nonzero__``…) never run."""

from __future__ import annotations

# special methods the graph binds where the receiver's value is known
BOUND = frozenset({"__init__", "__call__", "__enter__", "__exit__", "__aenter__", "__aexit__", "__iter__",
                   "__next__", "__aiter__", "__anext__"})
# Python 2's special method names: Python 3 never runs them implicitly (``__nonzero__`` is ``__bool__``)
PYTHON2 = frozenset({"__nonzero__", "__unicode__", "__cmp__", "__div__", "__rdiv__", "__idiv__", "__coerce__",
                     "__getslice__", "__setslice__", "__delslice__", "__long__", "__oct__", "__hex__"})

_OPERATORS = {"add": "+", "sub": "-", "mul": "*", "matmul": "@", "truediv": "/", "floordiv": "//", "mod": "%",
              "divmod": "divmod()", "pow": "**", "lshift": "<<", "rshift": ">>", "and": "&", "xor": "^", "or": "|"}
_SYNTAX = {
    "__eq__": "a == b", "__ne__": "a != b", "__lt__": "a < b", "__le__": "a <= b", "__gt__": "a > b",
    "__ge__": "a >= b", "__hash__": "hash(x), dict keys, set members", "__bool__": "if x, bool(x), not x",
    "__len__": "len(x), if x", "__contains__": "k in x", "__getitem__": "x[k]", "__setitem__": "x[k] = v",
    "__delitem__": "del x[k]", "__missing__": "x[k] on a dict subclass", "__repr__": "repr(x), f'{x!r}'",
    "__str__": "str(x), f'{x}', print(x)", "__format__": "f'{x}', format(x)", "__bytes__": "bytes(x)",
    "__getattr__": "x.name where name is missing", "__getattribute__": "x.name", "__setattr__": "x.name = v",
    "__delattr__": "del x.name", "__get__": "reading a descriptor", "__set__": "setting a descriptor",
    "__delete__": "deleting a descriptor", "__set_name__": "class creation", "__init_subclass__": "subclass creation",
    "__class_getitem__": "C[T]", "__new__": "C()", "__del__": "garbage collection", "__neg__": "-x", "__pos__": "+x",
    "__invert__": "~x", "__abs__": "abs(x)", "__int__": "int(x)", "__float__": "float(x)", "__complex__": "complex(x)",
    "__index__": "operator.index(x), slicing", "__round__": "round(x)", "__trunc__": "math.trunc(x)",
    "__floor__": "math.floor(x)", "__ceil__": "math.ceil(x)", "__reversed__": "reversed(x)",
    "__length_hint__": "operator.length_hint(x)", "__copy__": "copy.copy(x)", "__deepcopy__": "copy.deepcopy(x)",
    "__reduce__": "pickling", "__reduce_ex__": "pickling", "__getstate__": "pickling, copying",
    "__setstate__": "unpickling, copying", "__getnewargs__": "pickling", "__getnewargs_ex__": "pickling",
    "__instancecheck__": "isinstance()", "__subclasscheck__": "issubclass()", "__await__": "await x",
    "__fspath__": "os.fspath(x), open(x)", "__sizeof__": "sys.getsizeof(x)", "__dir__": "dir(x)",
    "__post_init__": "a dataclass's __init__", "__prepare__": "class creation", "__buffer__": "memoryview(x)",
}
for _op, _sign in _OPERATORS.items():
    _SYNTAX[f"__{_op}__"] = f"a {_sign} b" if _sign[0] != "d" else "divmod(a, b)"
    _SYNTAX[f"__r{_op}__"] = f"b {_sign} a (reflected)" if _sign[0] != "d" else "divmod(b, a)"
    _SYNTAX[f"__i{_op}__"] = f"a {_sign}= b" if _sign[0] != "d" else "divmod(a, b)"


def implicit_syntax(name: str, kind: str | None, file: str | None) -> str | None:
    """What runs Python method ``name`` without a call expression the graph binds (``a == b``
    for ``__eq__``), or None: not a method of a Python file, not a special method, one the graph
    binds (``BOUND``), or a Python 2 name. Special names outside the data model (a framework's
    ``__html__``) are said to run through the code that knows them."""
    if kind != "method" or not file or not file.endswith((".py", ".pyi")):
        return None
    if not (name.startswith("__") and name.endswith("__") and len(name) > 4) or name in BOUND or name in PYTHON2:
        return None
    return _SYNTAX.get(name, "the code that knows this special name")


def implicit_note(qual: str, syntax: str) -> str:
    """The note an answer about the callers of such a method carries."""
    return (f"{qual} runs without a call expression ({syntax}); the graph does not follow those, "
            f"so its callers are not all known: the count is a lower bound")
