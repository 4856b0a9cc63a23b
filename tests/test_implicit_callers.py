"""Special methods that Python runs without a call expression the graph binds (``a == b`` runs
``__eq__``): their callers are a lower bound, and every surface says so instead of a bare
"0 callers" (the CLI's and MCP's notes, the lens title, the hover). Methods the graph binds
(``__init__``, ``__enter__``…) and Python 2's names (never run by Python 3) are plain answers."""

from __future__ import annotations

import textwrap

import pytest

from orbit_lsp.graph import queries
from orbit_lsp.graph.implicit import implicit_syntax
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.server.lenses import symbol_title

SOURCE = '''
class Headers:
    def __init__(self):
        self.items = {}

    def __eq__(self, other):
        return self.items == other

    def __nonzero__(self):
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def copy(self):
        return Headers()


def use():
    with Headers() as h:
        return h == Headers()
'''


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, store, settings):
    root = tmp_path_factory.mktemp("implicit") / "ws"
    root.mkdir()
    (root / "headers.py").write_text(textwrap.dedent(SOURCE).lstrip("\n"))
    ix = WorkspaceIndexer(root, store, settings)
    ix.index_all()
    yield ix
    ix.graph.delete()


def test_which_methods_run_implicitly():
    assert implicit_syntax("__eq__", "method", "a.py") == "a == b"
    assert implicit_syntax("__radd__", "method", "a.py") == "b + a (reflected)"
    assert implicit_syntax("__getitem__", "method", "pkg/a.pyi") == "x[k]"
    assert implicit_syntax("__html__", "method", "a.py") == "the code that knows this special name"
    for bound in ("__init__", "__enter__", "__exit__", "__iter__", "__next__", "__call__", "__aenter__"):
        assert implicit_syntax(bound, "method", "a.py") is None, bound
    assert implicit_syntax("__nonzero__", "method", "a.py") is None  # Python 2's __bool__
    assert implicit_syntax("copy", "method", "a.py") is None
    assert implicit_syntax("__eq__", "function", "a.py") is None  # a module-level function is called by name
    assert implicit_syntax("__eq__", "method", "a.ts") is None


def test_callers_of_an_operator_method_are_a_lower_bound(indexed):
    ans = queries.callers(indexed.graph, "headers.Headers.__eq__")
    (row,) = ans.rows
    assert row["callers"] == [] and row["implicit"] == "a == b"
    assert any("runs without a call expression (a == b)" in n and "lower bound" in n for n in ans.notes)
    # bound implicit calls are plain answers: ``with Headers()`` runs __enter__ and __exit__
    for name in ("__enter__", "__exit__"):
        ans = queries.callers(indexed.graph, f"headers.Headers.{name}")
        assert [c["qual"] for c in ans.rows[0]["callers"]] == ["headers.use"] and ans.rows[0]["implicit"] is None
        assert ans.notes == []
    ans = queries.callers(indexed.graph, "headers.Headers.__nonzero__")
    assert ans.rows[0]["callers"] == [] and ans.rows[0]["implicit"] is None and ans.notes == []


def test_lens_and_summary_say_unknown(indexed):
    rows = {r["qual"]: r for r in queries.symbol_lens_counts(
        indexed.graph, "headers.py", [("headers.Headers.__eq__", "__eq__"), ("headers.Headers.__enter__", "__enter__"),
                                      ("headers.Headers.copy", "copy")], False).rows}
    assert symbol_title("__eq__", rows["headers.Headers.__eq__"]) == (
        "callers unknown: runs on a == b, which the graph does not follow")
    assert symbol_title("__enter__", rows["headers.Headers.__enter__"]) == "1 caller"
    assert symbol_title("copy", rows["headers.Headers.copy"]) == "0 callers"
    assert symbol_title("__eq__", {"callers": 2, "implicit": "a == b"}) == "2 callers · more through a == b, not followed"
    (summary,) = queries.symbol_summary(indexed.graph, "headers.py", "headers.Headers.__eq__").rows
    assert summary["implicit"] == "a == b"
