"""Edges by node id through FalkorDB's GRAPH.BULK (``graph.bulk``, ``GraphWriter._edges_by_id``):
the same edges and properties as the Cypher they replace, a Cypher fallback for rows the binary
section cannot encode, and for a server that refuses the command (an ACL user without it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orbit_lsp.config import Settings
from orbit_lsp.graph.bulk import edge_section, site_edge_section
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.graph.queries import export
from orbit_lsp.graph.writer import CALL_PROPS, GraphWriter
from orbit_lsp.index.indexer import WorkspaceIndexer

# rows [src, dst, line, lines, cols, end_cols, resolved] over nodes 0..3 of ``_nodes``
_CALLS = [
    [0, 1, 3, [3], [4], [9], "import"],
    [1, 2, 10, [10, 12, 40], [0, 8, 2], [5, 13, 7], "self"],
    [2, 0, -1, [], [], [], "naïve → ünïcode"],  # negative, empty arrays, non-ASCII text
    [3, 3, 2**62, [2**62], [0], [1], None],  # 64-bit integers; None: the property is left out
]


def _nodes(graph) -> list[int]:
    return [r[0] for r in graph.query("UNWIND range(0, 3) AS i CREATE (s:Symbol {qual: 'q' + toString(i)}) "
                                      "RETURN id(s) ORDER BY id(s)").rows]


def _edges(graph, etype: str) -> list:
    rows = graph.query(f"MATCH (a)-[e:{etype}]->(b) RETURN a.qual, b.qual, properties(e)").rows
    return sorted([a, b, sorted(p.items())] for a, b, p in rows)


def _write(graph, rows, bulk: bool):
    ids = _nodes(graph)
    w = GraphWriter(graph)
    w.bulk = bulk
    w.create_calls_by_id([[ids[r[0]], ids[r[1]], *r[2:]] for r in rows])
    w.create_imports_by_id([[ids[0], ids[1], 7, True], [ids[1], ids[0], 8, False]])
    w.create_inherits_by_id([[ids[2], ids[3]]])
    return w


@pytest.fixture
def two_graphs(store):
    import uuid

    gs = [store.graph(f"orbit_test_bulk_{uuid.uuid4().hex[:10]}_{i}") for i in range(2)]
    yield gs
    for g in gs:
        g.delete()


def test_bulk_edges_equal_the_cypher_edges(two_graphs):
    bulk, cypher = two_graphs
    w = _write(bulk, _CALLS, bulk=True)
    _write(cypher, _CALLS, bulk=False)
    assert w.bulk  # the embedded server has the command: nothing fell back
    for etype in ("CALLS", "IMPORTS", "INHERITS"):
        assert _edges(bulk, etype) == _edges(cypher, etype), etype
    calls = _edges(bulk, "CALLS")
    assert ["q1", "q2", [("cols", [0, 8, 2]), ("end_cols", [5, 13, 7]), ("line", 10), ("lines", [10, 12, 40]),
                         ("resolved", "self")]] in calls
    assert ["q3", "q3", [("cols", [0]), ("end_cols", [1]), ("line", 2**62), ("lines", [2**62])]] in calls
    # the graph answers queries over them as over any edge (matrices in sync)
    assert bulk.query("MATCH (:Symbol {qual: 'q0'})-[:CALLS]->(b) RETURN b.qual").rows == [["q1"]]
    assert bulk.query("MATCH (a)-[:CALLS*2]->(:Symbol {qual: 'q0'}) RETURN a.qual").rows == [["q1"]]


def test_rows_the_section_cannot_encode_are_written_with_cypher(two_graphs):
    bulk, cypher = two_graphs
    odd = _CALLS + [[0, 2, 1, [1.5], [0], [1], "float lines"]]  # not a call row's integers
    for bad in ([0, 2, 1, [1], [0], [1], "nul\0inside"], [1, 3, 2**64, [1], [0], [1], "big"], odd[-1]):
        with pytest.raises(ValueError):
            site_edge_section("CALLS", CALL_PROPS, [bad])
    with pytest.raises(ValueError):
        edge_section("CALLS", CALL_PROPS, [[0, 1, 2**64, [], [], [], "big"]])
    w = _write(bulk, odd, bulk=True)
    _write(cypher, odd, bulk=False)
    assert w.bulk
    assert _edges(bulk, "CALLS") == _edges(cypher, "CALLS")
    assert ["q0", "q2", [("cols", [0]), ("end_cols", [1]), ("line", 1), ("lines", [1.5]), ("resolved", "float lines")]] \
        in _edges(bulk, "CALLS")


@pytest.mark.parametrize("rows, error", [
    ([[-1, 0]], ValueError),  # not a node id
    ([[0, "1"]], ValueError),
    ([[0, 1, 2]], ValueError),  # wider than the header
    ([[0, 1]], None),
])
def test_edge_section_checks_ids_and_width(rows, error):
    if error is None:
        assert edge_section("INHERITS", (), rows) == b"INHERITS\0\0\0\0\0" + (0).to_bytes(8, "little") + \
            (1).to_bytes(8, "little")
    else:
        with pytest.raises(error):
            edge_section("INHERITS", (), rows)
    with pytest.raises(TypeError):
        edge_section("CALLS", ("line",), [[0, 1, {"a": 1}]])
    with pytest.raises(ValueError):
        edge_section("CA\0LLS", (), [])


def _workspace(root: Path) -> Path:
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text("class Base:\n    def run(self):\n        return helper()\n\n\n"
                                 "def helper():\n    return 1\n")
    (pkg / "app.py").write_text("from pkg.base import Base, helper\nimport os\n\n\n"
                                "class App(Base):\n    def start(self):\n        self.run()\n"
                                "        helper(); helper()\n        return os.getcwd()\n\n\n"
                                "def main():\n    App().start()\n    unknown_name()\n")
    return root


def test_a_server_that_refuses_graph_bulk_gets_the_same_graph_by_cypher(tmp_path, store):
    """An external FalkorDB whose ACL user may not run GRAPH.BULK: the full build falls back to
    Cypher and writes the graph the embedded server's bulk build writes."""
    from lsp_harness import ExternalFalkorDB

    ws = _workspace(tmp_path / "ws")
    fdb = ExternalFalkorDB(tmp_path / "fdb").start()
    admin = GraphStore(Settings(data_dir=tmp_path / "admin", falkordb_url=fdb.url))
    limited = embedded_build = None
    try:
        admin.execute("ACL", "SETUSER", "indexer", "on", ">secret", "~*", "&*", "+@all", "-graph.bulk")
        url = fdb.url.replace("redis://", "redis://indexer:secret@")
        limited = GraphStore(Settings(data_dir=tmp_path / "limited", falkordb_url=url))
        refused = WorkspaceIndexer(ws, limited)
        refused.index_all()
        embedded_build = WorkspaceIndexer(ws, store)
        embedded_build.index_all()
        got, want = export(refused.graph), export(embedded_build.graph)
        assert got == want
        assert any(e["type"] == "CALLS" for e in got["edges"])
        assert any(e["type"] == "INHERITS" for e in got["edges"])
        stats = admin.execute("INFO", "commandstats")
        # refused, then not tried again by that build's writer (each of its two threads may
        # have sent one before the first refusal came back)
        assert stats["cmdstat_graph.BULK"]["rejected_calls"] in (1, 2)
        assert stats["cmdstat_graph.BULK"]["calls"] == 0
    finally:
        if embedded_build is not None:
            embedded_build.graph.delete()
            embedded_build.cache_path.unlink(missing_ok=True)
        if limited is not None:
            limited.close()
        admin.close()
        fdb.kill()
        shutil.rmtree(tmp_path / "fdb", ignore_errors=True)


def test_edges_by_id_are_not_sent_to_a_server_that_restarted_since_the_nodes(tmp_path):
    """The server trusts a section's node ids: after a restart (here from a snapshot taken
    before the nodes were written), nothing is sent and the writer says FalkorDB restarted."""
    from lsp_harness import kill9_embedded

    from orbit_lsp.graph import embedded
    from orbit_lsp.graph.errors import FalkorDBOffline

    store = GraphStore(Settings(data_dir=tmp_path / "d", falkordb_url=None))
    try:
        graph = store.graph("orbit_test_bulk_restart")
        graph.query("CREATE (:File {path: 'seed'})")
        store.execute("SAVE")  # the server comes back with this graph, without the nodes below
        w = GraphWriter(graph)
        ids = w.create_files([[f"m{i}.py", "python", 1, "h", None, None] for i in range(3)])
        kill9_embedded(store)
        for _ in range(2):  # the first try finds the connection gone, the second a new server
            with pytest.raises(FalkorDBOffline) as exc:
                w.create_imports_by_id([[ids[0], ids[1], 1, False], [ids[1], ids[2], 2, True]])
        assert "restarted" in str(exc.value)
        assert graph.query("MATCH ()-[e]->() RETURN count(e)").rows == [[0]]
        assert graph.query("MATCH (f:File) RETURN f.path").rows == [["seed"]]
    finally:
        store.close()
        embedded.stop(tmp_path / "d")
