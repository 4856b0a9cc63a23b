"""Caller lists with a limit: the listed callers are the first ones by (file, line), the total is
always the true number, and transitive callers match a plain breadth-first search over the CALLS
edges (FalkorDB's variable-length matches are not trusted for this)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orbit_lsp.graph import queries as Q
from orbit_lsp.index.indexer import WorkspaceIndexer
from plain_bfs import reaching


def _workspace(root: Path) -> Path:
    root.mkdir()
    (root / "core.py").write_text("def target():\n    return target() if False else 1\n")
    callers = "\n".join(f"def c{i}():\n    return target()\n" for i in range(5))
    (root / "direct.py").write_text("from core import target\n\n" + callers)
    (root / "upper.py").write_text(
        "from direct import c0, c3\n\n"
        "def u1():\n    return c0()\n\n"
        "def u2():\n    return c3() + c0()\n\n"
        "def top():\n    return u1()\n")
    (root / "other.py").write_text("def target():\n    return 2\n\ndef lonely():\n    return target()\n")
    return root


@pytest.fixture
def ix(tmp_path, store):
    ix = WorkspaceIndexer(_workspace(tmp_path / "ws"), store)
    ix.index_all()
    yield ix
    ix.graph.delete()


def _bfs_callers(ix: WorkspaceIndexer, file: str, qual: str, hops: int) -> dict[tuple[str, str], int]:
    edges = ix.graph.ro_query("MATCH (a:Symbol)-[:CALLS]->(b:Symbol) RETURN a.file, a.qual, b.file, b.qual").rows
    return reaching((((af, aq), (bf, bq)) for af, aq, bf, bq in edges), (file, qual), hops)


def test_symbol_callers_limit_lists_first_by_file_and_line_and_counts_all(ix):
    full = Q.symbol_callers(ix.graph, "core.py", "core.target")
    assert full.total is None
    assert [r["qual"] for r in full.rows] == ["core.target", "direct.c0", "direct.c1", "direct.c2",
                                              "direct.c3", "direct.c4"]  # the recursive call included
    cut = Q.symbol_callers(ix.graph, "core.py", "core.target", limit=2)
    assert [r["qual"] for r in cut.rows] == ["core.target", "direct.c0"]
    assert cut.total == 6 and any("6 direct callers" in n for n in cut.notes)
    assert cut.rows[1]["lines"] == full.rows[1]["lines"] and cut.rows[1]["cols"] == full.rows[1]["cols"]
    exact = Q.symbol_callers(ix.graph, "core.py", "core.target", limit=6)
    assert exact.total is None and len(exact.rows) == 6


def test_symbol_impact_matches_breadth_first_search(ix):
    ans = Q.symbol_impact(ix.graph, "core.py", "core.target", max_hops=4)
    expect = _bfs_callers(ix, "core.py", "core.target", 4)
    assert {(r["file"], r["qual"]): r["depth"] for r in ans.rows} == expect
    assert ans.total == len(expect) == 8 and ans.by_depth == [5, 2, 1]
    # same-named symbols elsewhere are never mixed in
    assert not any(r["file"] == "other.py" for r in ans.rows)
    assert [(r["depth"], r["qual"]) for r in ans.rows] == sorted((d, q) for (_, q), d in expect.items())


def test_symbol_impact_limit_keeps_the_true_total(ix):
    ans = Q.symbol_impact(ix.graph, "core.py", "core.target", max_hops=4, limit=6)
    assert [r["qual"] for r in ans.rows] == ["direct.c0", "direct.c1", "direct.c2", "direct.c3", "direct.c4",
                                             "upper.u1"]
    assert ans.total == 8 and ans.by_depth == [5, 2, 1]
    assert any("8 callers within 4 hops; showing the first 6" in n for n in ans.notes)
    two = Q.symbol_impact(ix.graph, "core.py", "core.target", max_hops=1)
    assert two.total == 5 and two.by_depth == [5]


def test_symbol_impact_unknown_and_uncalled(ix):
    missing = Q.symbol_impact(ix.graph, "core.py", "core.nothing")
    assert not missing.found and missing.total == 0
    top = Q.symbol_impact(ix.graph, "upper.py", "upper.top")
    assert top.found and top.total == 0 and top.rows == [] and top.by_depth == []


def test_lens_counts_are_distinct_callers(ix):
    """Lens and hover counts use the CALLS in-degree: equal to the distinct callers because the
    graph holds at most one CALLS edge per (caller, callee), several call sites in its lists."""
    dup = ix.graph.ro_query("MATCH (a)-[e:CALLS]->(b) WITH a, b, count(e) AS n WHERE n > 1 RETURN count(*)").rows
    assert dup == [[0]]
    [target] = Q.symbol_lens_counts(ix.graph, "core.py", [("core.target", "target")], Q.unresolved_indexed(ix.graph)).rows
    assert target["callers"] == 5 and target["recursive"] is True
    summary = Q.symbol_summary(ix.graph, "core.py", "core.target").rows[0]
    assert summary["callers_total"] == 5 and summary["recursive"] is True
    c0 = Q.symbol_summary(ix.graph, "direct.py", "direct.c0").rows[0]
    assert c0["callers_total"] == 2 and c0["recursive"] is False
    imp = Q.impact(ix.graph, "core.py", paths=False)
    assert imp.rows == [] and imp.total == 2 and imp.by_depth == [1, 1]


def test_answer_cache_is_keyed_by_the_indexers_generation(ix):
    """An answer is reused while the indexer has not changed the graph, never after."""
    from orbit_lsp.graph.cache import QueryCache

    cache = QueryCache(max_entries=8)
    first = cache.get(ix.graph, ix.generation, Q.symbol_callers, "core.py", "core.target")
    again = cache.get(ix.graph, ix.generation, Q.symbol_callers, "core.py", "core.target")
    assert again is first and (cache.hits, cache.misses) == (1, 1)
    gen = ix.generation
    (ix.root / "more.py").write_text("from core import target\n\ndef extra():\n    return target()\n")
    ix.reindex_file(ix.root / "more.py")
    assert ix.generation != gen
    fresh = cache.get(ix.graph, ix.generation, Q.symbol_callers, "core.py", "core.target")
    assert fresh is not first and "more.extra" in [r["qual"] for r in fresh.rows]
    other = WorkspaceIndexer(ix.root, ix.store)  # another indexer of the same graph
    assert other.generation not in (gen, ix.generation)


def test_imports_generation_moves_only_when_imports_change(ix):
    """Import-cycle diagnostics are recomputed only when IMPORTS edges changed."""
    g = ix.imports_generation
    direct = ix.root / "direct.py"
    direct.write_text(direct.read_text() + "\ndef c9():\n    return 9\n")
    ix.reindex_file(direct)
    assert ix.imports_generation == g  # a new function: same imports
    direct.write_text("import upper\n" + direct.read_text())
    ix.reindex_file(direct)
    assert ix.imports_generation != g  # a new import (and a cycle: direct <-> upper)
    g = ix.imports_generation
    (ix.root / "other.py").unlink()
    ix.reindex_file(ix.root / "other.py")
    assert ix.imports_generation != g  # a file left the graph


def test_hover_summary_of_a_large_fan_in_lists_real_callers(ix, monkeypatch):
    """Past SORT_ALL_MAX callers the summary lists the first ones the traversal meets (no sort
    of them all): still real callers, sorted among themselves, with the true total."""
    monkeypatch.setattr(Q, "SORT_ALL_MAX", 2)
    row = Q.symbol_summary(ix.graph, "core.py", "core.target", limit=3).rows[0]
    callers = [(c["file"], c["line"], c["qual"]) for c in row["callers"]]
    assert row["callers_total"] == 5 and len(callers) == 3 and callers == sorted(callers)
    assert {q for _, _, q in callers} <= {f"direct.c{i}" for i in range(5)}


def test_caller_list_past_sort_all_max_keeps_real_callers_and_the_true_total(ix, monkeypatch):
    """Past SORT_ALL_MAX callers a capped caller list (the call hierarchy's) is the first callers
    the traversal meets, not the first by (file, line): real callers, sorted among themselves,
    the true total, and a note that says which ones they are."""
    monkeypatch.setattr(Q, "SORT_ALL_MAX", 2)
    cut = Q.symbol_callers(ix.graph, "core.py", "core.target", limit=3)
    got = [(r["file"], r["line"], r["qual"]) for r in cut.rows]
    assert cut.total == 6 and len(got) == 3 and got == sorted(got)
    assert {q for _, _, q in got} <= {"core.target"} | {f"direct.c{i}" for i in range(5)}
    assert any("6 direct callers; showing 3 of them (the first found" in n for n in cut.notes)
    # every listed caller carries its call sites
    assert all(r["lines"] and len(r["lines"]) == len(r["cols"]) == len(r["end_cols"]) for r in cut.rows)
    # within SORT_ALL_MAX: the first by (file, line)
    monkeypatch.setattr(Q, "SORT_ALL_MAX", 1000)
    first = Q.symbol_callers(ix.graph, "core.py", "core.target", limit=3)
    assert [r["qual"] for r in first.rows] == ["core.target", "direct.c0", "direct.c1"]
    assert any("showing the first 3" in n for n in first.notes)


def test_symbol_impact_past_sort_all_max_lists_real_callers_at_their_depth(ix, monkeypatch):
    monkeypatch.setattr(Q, "SORT_ALL_MAX", 2)
    ans = Q.symbol_impact(ix.graph, "core.py", "core.target", max_hops=4, limit=3)
    expect = _bfs_callers(ix, "core.py", "core.target", 4)
    assert ans.total == len(expect) == 8 and ans.by_depth == [5, 2, 1]
    assert len(ans.rows) == 3 and all(expect[(r["file"], r["qual"])] == r["depth"] == 1 for r in ans.rows)
    got = [(r["file"], r["line"], r["qual"]) for r in ans.rows]
    assert got == sorted(got)
    assert any("8 callers within 4 hops; showing 3 of them" in n for n in ans.notes)


UNCALLED = {"m.py": '''
class A:
    def called(self):
        pass

    def lonely(self):
        pass

    def recursive(self, other):
        other.recursive(None)

    def named_elsewhere(self):
        pass

    def use(self):
        self.called()


def f(x):
    x.named_elsewhere()
'''}


@pytest.mark.parametrize("kept", ["counts", "index", "scan"])
def test_uncalled_methods_have_no_caller_and_no_unbound_site_elsewhere_using_their_name(index_files, kept,
                                                                                         monkeypatch):
    """What "nothing in the workspace calls it" means for the test selection's class stand-in:
    no CALLS edge in, and no unbound call site *of another symbol* using the name (``other.recursive``
    inside ``recursive`` itself does not count; ``x.named_elsewhere()`` in ``f`` does). The same
    answer from the per-name counts (``UnboundName``) and, for graphs of older versions without
    them, with and without the index on ``Symbol.unresolved_names``."""
    ix = index_files(UNCALLED)
    if kept != "counts":
        ix.graph.query("MATCH (u:UnboundName) DELETE u")
        monkeypatch.setattr(Q, "unresolved_indexed", lambda graph, ans=None: kept == "index")
    methods = [("m.py", f"m.A.{n}") for n in ("called", "lonely", "recursive", "named_elsewhere", "use")]
    ans = Q.Answer()
    assert sorted(Q.uncalled_methods(ix.graph, methods, ans)) == [("m.py", "m.A.lonely"), ("m.py", "m.A.recursive"),
                                                                   ("m.py", "m.A.use")]
    counted_among_symbols = [c for c in ans.cypher if "RETURN n, count(c)" in c["query"] or "RETURN n, count(*)" in c["query"]]
    assert bool(counted_among_symbols) == (kept != "counts")
    assert ans.cypher and Q.uncalled_methods(ix.graph, [], ans) == []


def _unbound_by_python(graph, name: str, limit: int, bound: set | None = None) -> dict:
    """``unbound_sites`` computed from the raw ``unresolved_sites`` rows (``"name@line"``) by
    the rule its docstring states: the oracle of the Cypher that counts and sorts them."""
    rows = graph.ro_query("MATCH (c:Symbol) WHERE $n IN c.unresolved_names "
                          "RETURN c.file, c.qual, c.line, c.unresolved_sites", {"n": name}).rows
    sites = []
    for file, caller, cline, raw in rows:
        lines = [int(x.rpartition("@")[2]) for x in (raw or []) if x.rpartition("@")[0] == name]
        for ln in lines or [None]:
            if bound and ln is not None and (file, ln) in bound:
                continue
            sites.append({"file": file, "caller": caller, "line": ln if ln is not None else cline})
    sites.sort(key=lambda x: (x["file"], x["line"] or 0, x["caller"]))
    return {"total": len(sites), "sites": sites[:limit]}


@pytest.mark.parametrize("graph_kind", ["counts", "no counts", "many callers"])
def test_unbound_sites_are_counted_and_sorted_as_the_rule_says(tmp_path, store, graph_kind, monkeypatch):
    """The total and the first sites, read with the per-name counts (``UnboundName``), on a
    graph without them (written before they existed: counted by scanning), and with more
    callers than are sorted (``SORT_ALL_MAX``): the first sites of the first callers met."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "engine.py").write_text("class Engine:\n    def run(self):\n        return 1\n")
    for k in range(3):  # several unbound x.run() per function, in several files
        (root / f"use{k}.py").write_text("".join(
            f"def f{i}(x, y):\n    x.run()\n    y.run()\n    return x.stop()\n\n" for i in range(4 - k)))
    (root / "mixed.py").write_text("from engine import Engine\n\n"
                                   "def g(x):\n    e = x if x else Engine()\n    return e.run()\n")
    ix = WorkspaceIndexer(root, store)
    try:
        ix.index_all()
        q = Q.Answer()
        assert Q.unbound_counts(ix.graph, ["run", "stop", "nothing"], q) == {"run": (10, 19), "stop": (9, 9)}
        if graph_kind == "no counts":
            ix.graph.query("MATCH (u:UnboundName) DELETE u")
            assert Q.unbound_counts(ix.graph, ["run"], q) is None
        if graph_kind == "many callers":
            monkeypatch.setattr(Q, "SORT_ALL_MAX", 1)
        for limit in (0, 3, 100):
            got = Q.unbound_sites(ix.graph, "run", q, limit=limit)
            want = _unbound_by_python(ix.graph, "run", limit)
            if graph_kind != "many callers":
                assert got == want
                continue
            every = _unbound_by_python(ix.graph, "run", 1000)["sites"]
            assert got["total"] == want["total"] and len(got["sites"]) == min(limit, want["total"])
            assert all(x in every for x in got["sites"])
            assert got["sites"] == sorted(got["sites"], key=lambda x: (x["file"], x["line"], x["caller"]))
        assert Q.unbound_sites(ix.graph, "run", q)["total"] >= 18  # 2 per function of use*.py
        some = {("use0.py", 2), ("use1.py", 3), ("mixed.py", 5)}
        assert Q.unbound_sites(ix.graph, "run", q, limit=100, bound=some) == _unbound_by_python(ix.graph, "run", 100,
                                                                                                  some)
        assert Q.unbound_sites(ix.graph, "nothing", q) == {"total": 0, "sites": []}
    finally:
        ix.graph.delete()
