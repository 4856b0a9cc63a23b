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
    # the one call that stays unbound is ``x.use()`` on a comprehension target (element types of
    # an iterable are not inferred): counted, not guessed
    n, names = ix.graph.ro_query("MATCH (s:Symbol {qual: 'mod'}) RETURN s.unresolved_calls, s.unresolved_names").rows[0]
    assert (n, names) == (1, ["use"])
