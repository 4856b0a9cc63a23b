"""Python extraction (``orbit_lsp.index.python``) reaches every expression: the traversal has
direct visitors for the nodes with nothing of their own to record (``if``, comparisons,
operators, subscripts, displays, ``try``...), and a call or attribute read anywhere inside them
is a site of the body it is written in. Facts pickle the same through ``copyreg`` as through
``__reduce__``."""

from __future__ import annotations

import ast
import io
import pickle

from orbit_lsp.index import python as pyx
from orbit_lsp.index.py_facts import UNKNOWN, CallSite, PyFacts, Scope

SOURCE = b'''
import os

def body(x, items):
    if c_if_test(x) > c_cmp_right(x) and not c_not(x):
        c_if_body()
    elif c_elif():
        pass
    else:
        c_else()
    while c_while_test():
        c_while_body()
    else:
        c_while_else()
    y = c_ifexp_body() if c_ifexp_test() else c_ifexp_else()
    z = -c_unary() + c_binop_right() * 2
    w = c_sub_value()[c_sub_index()]
    v = items[c_slice_lower():c_slice_upper():c_slice_step()]
    t = (c_tuple(), [c_list()], {c_set()}, {c_key(): c_value(), **c_dict_spread()})
    s = f"{c_fstring()!r:{c_format_spec()}}"
    print(*c_starred(), **c_kwargs_spread())
    try:
        c_try_body()
    except c_handler_type() as exc:
        c_handler_body()
    else:
        c_try_else()
    finally:
        c_finally()
    assert c_assert_test(), c_assert_msg()
    del items[c_del_index()]
    return x.attr_read, os.sep


async def coro(x):
    await c_await()
    async with c_async_with():
        pass
'''

EXPECTED_CALLS = {
    "c_if_test", "c_cmp_right", "c_not", "c_if_body", "c_elif", "c_else", "c_while_test", "c_while_body",
    "c_while_else", "c_ifexp_body", "c_ifexp_test", "c_ifexp_else", "c_unary", "c_binop_right", "c_sub_value",
    "c_sub_index", "c_slice_lower", "c_slice_upper", "c_slice_step", "c_tuple", "c_list", "c_set", "c_key",
    "c_value", "c_dict_spread", "c_fstring", "c_format_spec", "print", "c_starred", "c_kwargs_spread",
    "c_try_body", "c_handler_type", "c_handler_body", "c_try_else", "c_finally", "c_assert_test",
    "c_assert_msg", "c_del_index",
}


def _scope(facts: PyFacts, qual: str) -> Scope:
    return facts.scopes[facts.scope_of[qual]]


def test_calls_inside_every_kind_of_statement_and_expression_are_sites():
    facts = pyx.extract("mod.py", SOURCE)
    body = _scope(facts, "body")
    plain = {c.name for c in body.calls if not c.implicit}
    assert plain == EXPECTED_CALLS
    reads = {c.name for c in body.calls if c.implicit == "read"}
    assert reads == {"attr_read", "sep"}
    coro = _scope(facts, "coro")
    assert {c.name for c in coro.calls if not c.implicit} == {"c_await", "c_async_with"}
    assert {c.name for c in coro.calls if c.implicit == "with"} == {"__aenter__", "__aexit__"}


def test_callee_chains_are_not_reads_but_their_bases_are_visited():
    facts = pyx.extract("mod.py", b"def f(a):\n    a.b.c(g().h.i)\n    return a.x.y\n")
    sites = [(c.name, c.implicit) for c in _scope(facts, "f").calls]
    # ``a.b.c(...)``: one call, no read of ``a.b``; the argument ``g().h.i`` is one read (of ``i``,
    # whose chain holds ``h``) and the call of ``g``; ``a.x.y`` one read
    assert sorted(sites) == sorted([("c", ""), ("i", "read"), ("g", ""), ("y", "read")])
    call = next(c for c in _scope(facts, "f").calls if c.name == "c")
    assert call.ref == ("a", ("a", ("n", "a"), "b"), "c")
    assert call.args == (("a", ("a", ("c", ("n", "g"), UNKNOWN), "h"), "i"),)


def test_lambdas_in_conditions_and_operators_are_symbols():
    facts = pyx.extract("mod.py", b"def f(x):\n    if (lambda: 1)() and x[(lambda: 2)()] < -(lambda: 3)():\n"
                                  b"        pass\n")
    lambdas = [s.qual for s in facts.symbols if s.name == "<lambda>"]
    assert sorted(lambdas) == ["f.<lambda#2>", "f.<lambda#3>", "f.<lambda>"]


def test_every_node_class_of_this_python_has_a_dispatch_entry():
    def classes(cls):
        yield cls
        for sub in cls.__subclasses__():
            yield from classes(sub)

    missing = [c.__name__ for c in classes(ast.AST) if c not in pyx._DISPATCH]
    assert missing == []


def _reduce_ex_bytes(obj) -> bytes:
    """Pickle without ``copyreg``'s table: through the classes' ``__reduce__``."""
    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    p.dispatch_table = {}
    p.dump(obj)
    return buf.getvalue()


def test_copyreg_reduction_gives_the_same_bytes_as_reduce():
    facts = pyx.extract("pkg/mod.py", SOURCE)
    fast = pickle.dumps(facts, protocol=pickle.HIGHEST_PROTOCOL)
    assert fast == _reduce_ex_bytes(facts)
    back = pickle.loads(fast)
    assert back == facts
    assert type(back.scopes[facts.scope_of["body"]].calls[0]) is CallSite
