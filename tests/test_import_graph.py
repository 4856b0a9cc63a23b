"""Dependents walked over the in-memory IMPORTS edges (``graph.imports.ImportGraph``) equal the
frontier queries of ``queries.impact`` and a plain breadth-first search, and the language
server's copy is read again when a re-index changes the IMPORTS edges."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

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
