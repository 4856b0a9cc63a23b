"""Lambda parameters and comprehension targets live in scopes of their own: they never hide
the enclosing body's names (found by the peers benchmark: ``lambda self: …`` inside a method
made every ``self.x()`` of that method unresolved)."""

from __future__ import annotations

import pytest

from orbit_lsp.index.indexer import WorkspaceIndexer

SOURCE = '''
class Base:
    def check(self, n):
        return n

    def run(self):
        f = lambda self: None
        g = [self for self in range(3)]
        self.check(2)
        return f, g

    def keyed(self, items):
        return sorted(items, key=lambda item: self.check(item))


class Tool:
    def use(self):
        return 1


tool = Tool()
names = [tool for tool in range(3)]
tool.use()
pairs = {k: v for k, v in [(1, 2)]}
total = sum(x.use() for x in [Tool()])
'''


@pytest.fixture
def ix(tmp_path, store):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "mod.py").write_text(SOURCE)
    ix = WorkspaceIndexer(ws, store)
    ix.index_all()
    yield ix
    ix.graph.delete()


def _callers(ix, qual: str) -> set[str]:
    rows = ix.graph.ro_query("MATCH (c:Symbol)-[:CALLS]->(t:Symbol {qual: $q}) RETURN c.qual", {"q": qual}).rows
    return {r[0] for r in rows}


def test_lambda_parameter_does_not_hide_self(ix):
    assert "mod.Base.run" in _callers(ix, "mod.Base.check")
    unresolved = ix.graph.ro_query("MATCH (s:Symbol {qual: 'mod.Base.run'}) RETURN s.unresolved_calls").rows
    assert unresolved == [[0]]


def test_calls_inside_a_lambda_belong_to_the_enclosing_function(ix):
    assert "mod.Base.keyed" in _callers(ix, "mod.Base.check")


def test_comprehension_targets_do_not_leak(ix):
    # ``tool`` at module level is still the Tool instance after ``[tool for tool in …]``
    assert "mod" in _callers(ix, "mod.Tool.use")
    # ``x.use()`` on a comprehension target over ``[Tool()]``: the items of the list, bound
    # through the container; nothing stays unbound at module level
    rows = ix.graph.ro_query("MATCH (s:Symbol {qual: 'mod'})-[c:CALLS]->(:Symbol {qual: 'mod.Tool.use'}) "
                             "RETURN c.lines, c.resolved").rows
    assert rows == [[[23, 25], "instance"]]  # ``tool.use()`` and ``x.use()``: one edge, two sites
    n, names = ix.graph.ro_query("MATCH (s:Symbol {qual: 'mod'}) RETURN s.unresolved_calls, s.unresolved_names").rows[0]
    assert (n, names) == (0, [])


def test_name_bound_under_global_in_a_function_is_a_module_name(tmp_path, store):
    """unittest's lazy ``IsolatedAsyncioTestCase``: ``def __getattr__(name): global X; from .m
    import X`` defines the module's ``X``, so subclasses inherit from it (found by the peers
    benchmark: ~550 stdlib call sites unresolved)."""
    ws = tmp_path / "lazyws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "__init__.py").write_text(
        "def __getattr__(name):\n    global Lazy\n    from .lazy import Lazy\n    return Lazy\n")
    (ws / "pkg" / "lazy.py").write_text("class Lazy:\n    def m(self):\n        return 1\n")
    (ws / "user.py").write_text("import pkg\n\n\nclass T(pkg.Lazy):\n    def t(self):\n        return self.m()\n")
    ix = WorkspaceIndexer(ws, store)
    ix.index_all()
    try:
        assert _callers(ix, "pkg.lazy.Lazy.m") == {"user.T.t"}
        inherits = ix.graph.ro_query("MATCH (a:Symbol)-[:INHERITS]->(b:Symbol) RETURN a.qual, b.qual").rows
        assert ["user.T", "pkg.lazy.Lazy"] in inherits
    finally:
        ix.graph.delete()


def test_global_at_module_level_changes_nothing(tmp_path, store):
    """``global X`` at module level is allowed and means nothing (the module's scope is the
    global one). Reading ``X`` there used to send the name lookup back to the module scope
    forever: a full index of pylint's test data hung on ``global GLOBAL_VAR; GLOBAL_VAR.foo``
    (found by the scale benchmark). The lookup ends, with what the module binds."""
    ws = tmp_path / "globalws"
    ws.mkdir()
    (ws / "m.py").write_text("global GLOBAL_VAR\nGLOBAL_VAR.foo\n\n\nclass K:\n    def run(self):\n        return 1\n\n\n"
                             "global k\nk = K()\nk.run()\n")
    ix = WorkspaceIndexer(ws, store)
    ix.index_all()
    try:
        assert _callers(ix, "m.K.run") == {"m"}
    finally:
        ix.graph.delete()
