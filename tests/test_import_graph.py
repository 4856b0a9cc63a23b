"""Dependents walked over the in-memory IMPORTS edges (``graph.imports.ImportGraph``) equal the
frontier queries of ``queries.impact`` and a plain breadth-first search, and the language
server's copy is read again when a re-index changes the IMPORTS edges."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbit_lsp.graph import queries as Q
from orbit_lsp.graph.imports import ImportGraph
from orbit_lsp.index.buffers import file_impact, import_graph, lens_counts
from orbit_lsp.index.indexer import WorkspaceIndexer
from plain_bfs import reaching


def _random_workspace(root: Path, n: int, seed: int) -> Path:
    rng = random.Random(seed)
    root.mkdir()
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    for i in range(n):
        targets = rng.sample(range(n), rng.randint(0, 3))
        lines = [f"from pkg import m{t}" for t in targets if t != i]  # cycles allowed
        (root / "pkg" / f"m{i}.py").write_text("\n".join(lines) + f"\n\ndef f{i}():\n    return {i}\n")
    (root / "lonely.py").write_text("x = 1\n")
    return root


@pytest.fixture
def ix(tmp_path, store):
    ix = WorkspaceIndexer(_random_workspace(tmp_path / "ws", 30, seed=7), store)
    ix.index_all()
    yield ix
    ix.graph.delete()


def test_walk_in_memory_equals_frontier_queries_and_bfs(ix):
    g = ix.graph
    edges = [tuple(r) for r in g.ro_query("MATCH (a:File)-[:IMPORTS]->(b:File) RETURN a.path, b.path").rows]
    assert len(edges) > 30
    imports = ImportGraph.load(g)
    paths = [r[0] for r in g.ro_query("MATCH (f:File) RETURN f.path ORDER BY f.path").rows]
    for path in paths:
        for hops in (1, 2, 4):
            frontier = Q.impact(g, path, hops)
            walked = Q.impact(g, path, hops, imports=imports)
            expect = reaching(edges, path, hops)
            assert {r["path"]: r["hops"] for r in walked.rows} == expect
            assert (walked.rows, walked.total, walked.by_depth) == (frontier.rows, frontier.total, frontier.by_depth)
            counted = Q.impact(g, path, hops, paths=False, imports=imports)
            assert (counted.rows, counted.total, counted.by_depth) == ([], walked.total, walked.by_depth)
    # the query that read the edges is part of the answer's Cypher
    assert imports.cypher[0] in Q.impact(g, "pkg/m0.py", 4, imports=imports).cypher
    # a file that is not in the graph is unknown, not "0 dependents"
    missing = Q.impact(g, "nope.py", 4, imports=imports)
    assert not missing.found and missing.total is None and "not in the graph" in missing.notes[0]
    lonely = Q.impact(g, "lonely.py", 4, imports=imports)
    assert lonely.found and lonely.total == 0 and lonely.by_depth == []


def test_server_impact_shares_the_lens_count_and_answers_the_same(ix):
    """``file_impact`` (``orbit/impact``) reuses the existence check and walk of the count a
    file's lens shows, and answers exactly what ``queries.impact`` answers, Cypher included."""
    g = ix.graph
    imports = import_graph(ix)
    for path in [r[0] for r in g.ro_query("MATCH (f:File) RETURN f.path ORDER BY f.path").rows] + ["nope.py"]:
        count = lens_counts(ix, path, [(None, "")], 4)[0]
        served = file_impact(ix, path, 4)
        direct = Q.impact(g, path, 4, imports=imports)
        assert (served.rows, served.total, served.by_depth, served.found, served.notes, served.cypher) == \
            (direct.rows, direct.total, direct.by_depth, direct.found, direct.notes, direct.cypher)
        assert count == ({"dependents": direct.total, "hops": len(direct.by_depth)} if direct.found else None)


def test_language_server_copy_follows_reindexing(ix):
    root = ix.root
    first = import_graph(ix)
    assert import_graph(ix) is first  # read once while the IMPORTS edges stay
    # a save that leaves the imports alone keeps it
    (root / "pkg" / "m0.py").write_text((root / "pkg" / "m0.py").read_text() + "\n\ndef extra():\n    return 0\n")
    ix.reindex_file(root / "pkg" / "m0.py")
    assert import_graph(ix) is first
    # a new file importing lonely.py: read again, and lonely.py's dependents follow
    (root / "user.py").write_text("import lonely\n")
    ix.reindex_file(root / "user.py")
    assert import_graph(ix) is not first
    ans = file_impact(ix, "lonely.py", 4)
    assert [(r["path"], r["hops"]) for r in ans.rows] == [("user.py", 1)]
    assert lens_counts(ix, "lonely.py", [(None, "")], 4) == [{"dependents": 1, "hops": 1}]
    # a new file that imports nothing is in the graph at once (0 dependents, not unknown)
    (root / "alone.py").write_text("y = 2\n")
    ix.reindex_file(root / "alone.py")
    assert file_impact(ix, "alone.py", 4).found and file_impact(ix, "alone.py", 4).total == 0
    # the importer removed: lonely.py has no dependents again
    (root / "user.py").unlink()
    ix.reindex_file(root / "user.py")
    assert file_impact(ix, "lonely.py", 4).total == 0
    assert lens_counts(ix, "lonely.py", [(None, "")], 4) == [{"dependents": 0, "hops": 0}]


# -- the walks in memory, against a plain breadth-first search (no database needed) -----------

FILES = [f"f{i}.ts" for i in range(8)]


@given(st.lists(st.tuples(st.sampled_from(FILES), st.sampled_from(FILES), st.booleans()), max_size=24),
       st.sampled_from(FILES), st.integers(1, 4))
@settings(max_examples=300, deadline=None)
def test_type_only_dependents_are_those_a_run_time_walk_leaves_out(edges, path, max_hops):
    """A dependent is type-only when no chain of at most ``max_hops`` non-type-only edges
    reaches ``path`` (``IMPORTS.type_only``): the full walk minus the run-time walk, each a plain
    BFS here. The ImportGraph skips its second walk when no type-only edge joins two files of
    the first; that shortcut must never change the answer."""
    edges = [(a, b, t) for a, b, t in edges if a != b]
    kind: dict[tuple[str, str], bool] = {}
    for a, b, t in edges:  # one edge per pair: type-only only if every import of the pair is
        kind[(a, b)] = kind.get((a, b), True) and t
    importers: dict[str, list[str]] = {}
    types: dict[str, set[str]] = {}
    for (a, b), t in kind.items():
        importers.setdefault(b, []).append(a)
        if t:
            types.setdefault(b, set()).add(a)
    g = ImportGraph({b: tuple(a) for b, a in importers.items()}, {b: frozenset(a) for b, a in types.items()})
    every = reaching(kind, path, max_hops)
    run_time = reaching([e for e, t in kind.items() if not t], path, max_hops)
    assert dict(g.dependents(path, max_hops)) == every
    assert dict(g.dependents(path, max_hops, run_time=True)) == run_time
    assert g.type_only_dependents(path, max_hops) == set(every) - set(run_time)


def test_walks_are_remembered_read_only_and_bounded():
    from orbit_lsp.graph import imports as I

    g = ImportGraph({f"m{i}.py": (f"m{i + 1}.py",) for i in range(I.WALKS_KEPT + 10)})
    first = g.dependents("m0.py", 3)
    assert dict(first) == {"m1.py": 1, "m2.py": 2, "m3.py": 3}
    assert g.dependents("m0.py", 3) is first  # a lens count and the impact after it share the walk
    with pytest.raises(TypeError):
        first["m9.py"] = 1  # type: ignore[index]  # shared: nobody may change it
    assert dict(g.dependents("m0.py", 1)) == {"m1.py": 1}  # another depth is another walk
    for i in range(I.WALKS_KEPT + 5):
        g.dependents(f"m{i}.py", 2)
    assert len(g._walks) == I.WALKS_KEPT
    assert g.dependents("m0.py", 3) is not first and dict(g.dependents("m0.py", 3)) == dict(first)


def test_a_summary_walk_lists_the_first_files_of_each_hop_and_counts_all():
    """``impact`` over an ``ImportGraph`` with ``shown`` (what a hover asks): the first
    ``shown`` dependents of each hop by path, and every dependent counted by hop."""
    g = ImportGraph({"core.py": ("c.py", "a.py", "b.py"), "b.py": ("e.py", "d.py"), "e.py": ("core.py",)})
    ans = Q._walked(Q.Answer(), "core.py", 3, True, g, shown=2)
    assert ans.rows == [{"path": "a.py", "hops": 1}, {"path": "b.py", "hops": 1},
                        {"path": "d.py", "hops": 2}, {"path": "e.py", "hops": 2}]
    assert ans.by_depth == [3, 2] and ans.total == 5
    full = Q._walked(Q.Answer(), "core.py", 3, True, g)
    assert [r["path"] for r in full.rows] == ["a.py", "b.py", "c.py", "d.py", "e.py"]
    assert full.by_depth == ans.by_depth
    # the walk by queries (no ImportGraph) lists through the same ``_dependents``: the same rows
    # from the same {path: hops}, and no type-only marks on a shortened list
    by_path = {"c.py": 1, "a.py": 1, "b.py": 1, "e.py": 2, "d.py": 2}
    queried = Q._dependents(Q.Answer(), by_path, True, {"a.py"}, shown=2)
    assert queried.rows == ans.rows and queried.by_depth == ans.by_depth
