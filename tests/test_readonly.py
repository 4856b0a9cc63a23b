"""The read-only guard for model-written Cypher (orbit_lsp.graph.readonly), against the real
embedded FalkorDB: shared cases 026 (write attempts) and 028 (million-row results)."""

from __future__ import annotations

import json
import threading
import time

import pytest
import redis

from conftest import shared_case
from orbit_lsp.graph.errors import QueryRejected, QueryTimeout
from orbit_lsp.graph.readonly import (
    MAX_NESTING,
    MAX_QUERY_CHARS,
    ReadOnlyResult,
    cap_query,
    check_params,
    check_readonly_text,
    forget_resultset_size,
    nesting_depth,
    run_readonly,
    server_resultset_size,
)


def _statements(text: str) -> list[str]:
    """Statements of a shared-case .cypher file (full-line // comments, ';' at line ends)."""
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    return [s.strip() for s in body.split(";") if s.strip()]


def _load(graph, path) -> None:
    for stmt in _statements(path.read_text()):
        graph.query(stmt)


def _fingerprint(graph, case) -> list:
    return [graph.ro_query(s).rows for s in _statements((case / "fingerprint.cypher").read_text())]


def _cmdstat(store, name: str) -> int:
    stats = store.connect().connection.info("commandstats")
    return int(stats.get(f"cmdstat_{name}", {}).get("calls", 0))


# --------------------------------------------------------------------------- text checks (offline)

@pytest.mark.parametrize("text", [
    "LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row",
    "load csv from 'file:///etc/passwd' as row return row",
    "LoAd\n\t CsV WITH HEADERS FROM 'https://x/y.csv' AS r RETURN r",
    "LOAD/* hidden */CSV FROM 'file:///etc/passwd' AS row RETURN row",
    "LOAD // line comment\n CSV FROM 'file:///etc/passwd' AS row RETURN row",
    "ＬＯＡＤ ＣＳＶ FROM 'file:///etc/passwd' AS row RETURN row",
    "MATCH (n) WITH n LIMIT 1 LOAD CSV FROM 'file:///x' AS r RETURN r",
])
def test_load_csv_refused_by_orbit(text):
    with pytest.raises(QueryRejected, match="LOAD CSV") as exc:
        check_readonly_text(text)
    assert exc.value.query == text


@pytest.mark.parametrize("text", [
    "MATCH (s:Symbol) RETURN s.qual; CREATE (:Junk)",
    "RETURN 1;RETURN 2",
    "RETURN 1; // comment\n MATCH (n) DETACH DELETE n",
])
def test_multiple_statements_refused(text):
    with pytest.raises(QueryRejected, match="more than one statement"):
        check_readonly_text(text)


@pytest.mark.parametrize("text", ["", "   \n", "// nothing", "/* x */ ;", ";"])
def test_empty_refused(text):
    with pytest.raises(QueryRejected, match="empty"):
        check_readonly_text(text)


@pytest.mark.parametrize("text", [
    "RETURN 1;",
    "RETURN 1; // trailing comment",
    "RETURN 'a; CREATE (:Junk)' AS s",
    "RETURN 1 AS `x;y`",
    "RETURN 1 /* a; b */",
    "MATCH (s:Symbol) WHERE s.name = 'CREATE' RETURN s // SET DELETE",
    "RETURN 'it\\'s; fine' AS s",
])
def test_harmless_text_passes(text):
    check_readonly_text(text)


@pytest.mark.parametrize("cypher,executed", [
    ("MATCH (n) RETURN n", "MATCH (n) RETURN n LIMIT 11"),
    ("MATCH (n) RETURN n.x ORDER BY n.x DESC SKIP 2", "MATCH (n) RETURN n.x ORDER BY n.x DESC SKIP 2 LIMIT 11"),
    ("MATCH (n) RETURN n LIMIT 1000", "MATCH (n) RETURN n LIMIT 11"),
    ("MATCH (n) RETURN n LIMIT 5", "MATCH (n) RETURN n LIMIT 5"),
    ("MATCH (n) RETURN n LIMIT 1000 // all of them\n", "MATCH (n) RETURN n LIMIT 11"),
    ("MATCH (n) RETURN n; /* done */", "MATCH (n) RETURN n LIMIT 11"),
    ("MATCH (n) RETURN n // LIMIT 3", "MATCH (n) RETURN n LIMIT 11"),
    ("MATCH (n {s: 'RETURN x LIMIT 3'}) RETURN n", "MATCH (n {s: 'RETURN x LIMIT 3'}) RETURN n LIMIT 11"),
    ("MATCH (n) WITH n LIMIT 100000 RETURN n.return", "MATCH (n) WITH n LIMIT 100000 RETURN n.return LIMIT 11"),
    ("MATCH (n) RETURN [x IN n.l WHERE x > 1 | x] AS l, EXISTS { MATCH (n)-->() RETURN 1 } AS e",
     "MATCH (n) RETURN [x IN n.l WHERE x > 1 | x] AS l, EXISTS { MATCH (n)-->() RETURN 1 } AS e LIMIT 11"),
    ("CALL db.labels()", "CALL db.labels() YIELD label RETURN label LIMIT 11"),
    ("CALL db.labels() YIELD label AS l WHERE l <> 'x'", "CALL db.labels() YIELD label AS l WHERE l <> 'x' RETURN l LIMIT 11"),
    ("MATCH (n) RETURN n LIMIT $k", "CALL {\nMATCH (n) RETURN n LIMIT $k\n}\nRETURN * LIMIT 11"),
    ("CYPHER k=2 MATCH (n) RETURN n LIMIT $k", "CYPHER k=2 CALL {\nMATCH (n) RETURN n LIMIT $k\n}\nRETURN * LIMIT 11"),
    ("CREATE (:Junk)", "CREATE (:Junk)"),
    ("CALL db.idx.fulltext.drop('Symbol')", "CALL db.idx.fulltext.drop('Symbol')"),
])
def test_cap_query_rewrites(cypher, executed):
    assert cap_query(cypher, 11) == executed


def test_unknown_procedure_without_yield_refused():
    with pytest.raises(QueryRejected, match="YIELD"):
        cap_query("CALL my.proc()", 11)


# --------------------------------------------------------------------------- nesting (issue 20 item 1)

# FalkorDB 4.16's parser is exponential in expression nesting and ignores the query timeout while
# parsing: each of these ran for minutes (bench/cypher_nesting.py measures the growth).
RUNAWAY = [
    "RETURN " + "NOT " * 25 + "true",
    "RETURN " + "(" * 25 + "1" + ")" * 25,
    "RETURN " + "[" * 25 + "1" + "]" * 25,
    "RETURN " + "{a: " * 25 + "1" + "}" * 25,
    "RETURN " + "- " * 25 + "1",
    "RETURN " + "NOT toBoolean(" * 14 + "true" + ")" * 14,
    "RETURN " + "CASE WHEN true THEN " * 22 + "1" + " END" * 22,
    "MATCH (n) WHERE " + "NOT (" * 12 + "n.x = 1" + ")" * 12 + " RETURN n",
]


@pytest.mark.parametrize("text", RUNAWAY)
def test_deep_nesting_refused_before_sending(text, graph):
    graph.query("CREATE (:Probe {v: 1})")
    before = _cmdstat(graph.store, "graph.RO_QUERY")
    with pytest.raises(QueryRejected, match=rf"levels deep.*at most {MAX_NESTING}.*flatten it") as exc:
        run_readonly(graph, text, timeout_ms=1000)
    assert exc.value.query == text
    assert _cmdstat(graph.store, "graph.RO_QUERY") == before  # nothing reached the server
    assert run_readonly(graph, "MATCH (p:Probe) RETURN p.v").rows == [[1]]


@pytest.mark.parametrize("text,depth", [
    ("RETURN " + "NOT " * 25 + "true", 25),
    ("RETURN NOT NOT true AND NOT NOT false", 2),
    ("RETURN " + "NOT toBoolean(" * 3 + "true" + ")" * 3, 6),  # NOT f(NOT f(…)): both nest
    ("MATCH (a)<-[:R]-(b)<-[:R]-(c)<--(d)-->(e)--(f) RETURN a", 2),  # arrows are not signs
    ("RETURN 1 - -1 - -1 - -1 - -1", 1),
    ("RETURN '((((((((((((((((((((' AS s, `((((((((((((` AS q // ((((((((((((((", 0),
    ("MATCH (n) WHERE n.x IS NOT NULL RETURN -n.z", 1),
    ("RETURN " + "CASE WHEN true THEN " * 4 + "1" + " END" * 4, 4),
])
def test_nesting_depth_counts_what_the_parser_pays_for(text, depth):
    assert nesting_depth(text) == depth


def test_real_queries_nest_well_below_the_bound(graph):
    graph.query("CREATE (:File {path: 'a.py'})-[:DEFINES]->(:Symbol {name: 'f', kind: 'function'})")
    q = ("MATCH (f:File)-[:DEFINES]->(s:Symbol) WHERE NOT (s.kind IN ['class']) AND NOT s.name STARTS WITH '_' "
         "RETURN f.path AS path, [x IN collect({name: s.name, k: CASE WHEN s.kind = 'function' THEN -1 "
         "ELSE (1 + (2 * 3)) END}) WHERE x.k < 0 | x.name] AS names")
    assert nesting_depth(q) <= MAX_NESTING // 2
    assert run_readonly(graph, q).rows == [["a.py", ["f"]]]
    at_bound = "RETURN " + "(" * MAX_NESTING + "1" + ")" * MAX_NESTING + " AS one"
    assert run_readonly(graph, at_bound).rows == [[1]]


def test_query_length_bounded():
    long = "RETURN 1 AS x" + " " * MAX_QUERY_CHARS
    with pytest.raises(QueryRejected, match=f"at most {MAX_QUERY_CHARS}"):
        check_readonly_text(long)
    check_readonly_text("RETURN 1 AS x" + " " * (MAX_QUERY_CHARS - 20))


@pytest.mark.parametrize("text,reason", [
    ("RETURN 1\x00", "NUL"),
    ("RETURN '\ud800' AS s", "surrogate"),
])
def test_unsendable_characters_refused(text, reason, graph):
    graph.query("CREATE (:Probe)")
    with pytest.raises(QueryRejected, match=reason):
        run_readonly(graph, text)


@pytest.mark.parametrize("params,reason", [
    ({"a`b": 1}, "backtick"),
    ({"m": {"k`) RETURN 1 //": 1}}, "backtick"),
    ({"": 1}, "non-empty"),
    ({"s": "a\x00b"}, "NUL"),
    ({"s": "\udc80"}, "surrogate"),
    ({"f": float("nan")}, "cannot express"),
    ({"x": object()}, "not a JSON value"),
    ({"deep": json.loads("[" * 25 + "1" + "]" * 25)}, "nests"),
    ({"big": "x" * 70_000}, "longer than"),
    (["not", "a", "map"], "JSON object"),
])
def test_bad_parameters_refused_with_reason(params, reason, graph):
    graph.query("CREATE (:Probe)")
    with pytest.raises(QueryRejected, match=reason):
        run_readonly(graph, "RETURN 1 AS one", params)
    assert run_readonly(graph, "MATCH (p:Probe) RETURN count(p)").rows == [[1]]


def test_ordinary_parameters_pass(graph):
    graph.query("CREATE (:Probe {v: 'it\\'s'})")
    params = {"v": "it's", "names": ["a", "b"], "m": {"@type": [1, 2.5, None, True]}}
    check_params(params)
    r = run_readonly(graph, "MATCH (p:Probe {v: $v}) RETURN size($names) AS n, $m AS m", params)
    assert r.rows == [[2, {"@type": [1, 2.5, None, True]}]]


# --------------------------------------------------------------------------- against the server

@pytest.fixture
def small(graph, case_dir):
    _load(graph, case_dir("026") / "setup.cypher")
    return graph


def test_query_shapes_return_exact_rows(small):
    g = small
    r = run_readonly(g, "MATCH (s:Symbol) RETURN s.qual AS q, s.line AS l ORDER BY l DESC")
    assert (r.header, r.rows, r.truncated) == (["q", "l"], [["app.main", 3], ["util.helper", 1]], False)
    # trailing comment and ';' are dropped, the last column keeps its name
    r = run_readonly(g, "MATCH (s:Symbol) RETURN s.line, s.qual ORDER BY s.line; // done")
    assert r.header == ["s.line", "s.qual"] and r.rows == [[1, "util.helper"], [3, "app.main"]]
    # UNION is wrapped; the columns come back in the query's order, not sorted by name
    r = run_readonly(g, "MATCH (f:File) RETURN f.path AS z, 1 AS a UNION MATCH (p:Package) RETURN p.name AS z, 2 AS a")
    assert r.executed.startswith("CALL {")
    assert r.header == ["z", "a"]
    assert sorted(r.rows) == [["app.py", 1], ["requests", 2], ["util.py", 1]]
    # LIMIT given as a parameter
    r = run_readonly(g, "MATCH (s:Symbol) RETURN s.qual ORDER BY s.qual LIMIT $k", {"k": 1})
    assert r.rows == [["app.main"]] and not r.truncated
    r = run_readonly(g, "CYPHER k=1 MATCH (s:Symbol) RETURN s.qual ORDER BY s.qual DESC LIMIT $k")
    assert r.rows == [["util.helper"]] and not r.truncated
    # procedures with and without YIELD
    r = run_readonly(g, "CALL db.relationshipTypes()")
    assert r.header == ["relationshipType"] and len(r.rows) == 4
    r = run_readonly(g, "CALL db.labels() YIELD label WHERE label <> 'Package'")
    assert sorted(x[0] for x in r.rows) == ["File", "Symbol"]
    r = run_readonly(g, "MATCH (a:File {path: 'app.py'}) CALL algo.BFS(a, 2, 'IMPORTS')")
    assert r.header == ["nodes", "edges"] and len(r.rows) == 1


def test_cap_and_truncation_flags(small):
    g = small
    r = run_readonly(g, "MATCH (n) RETURN n.path ORDER BY n.path", row_cap=2)
    assert len(r.rows) == 2 and r.truncated and r.row_cap == 2
    assert r.executed.endswith("LIMIT 3")
    d = r.to_dict()
    assert d["truncated"] is True and d["rows_returned"] == 2 and d["row_cap"] == 2
    assert "Truncated" in d["note"] and "count(*)" in d["note"]
    r = run_readonly(g, "MATCH (f:File) RETURN f.path", row_cap=2)  # exactly cap rows: complete
    assert len(r.rows) == 2 and not r.truncated and r.to_dict()["note"].startswith("Complete")
    r = run_readonly(g, "MATCH (n) RETURN n LIMIT 3", row_cap=2)  # user's LIMIT = cap+1
    assert len(r.rows) == 2 and r.truncated


def test_to_dict_is_json(small):
    r = run_readonly(small, "MATCH p = (f:File)-[i:IMPORTS]->(g:File) RETURN f, i, p, {k: [1, 2.5]} AS m")
    d = json.loads(json.dumps(r.to_dict()))
    f, i, p, m = d["rows"][0]
    assert f["labels"] == ["File"] and f["properties"]["path"] == "app.py"
    assert i["type"] == "IMPORTS" and i["src"] == f["id"]
    assert len(p["nodes"]) == 2 and len(p["edges"]) == 1
    assert m == {"k": [1, 2.5]}
    assert isinstance(r, ReadOnlyResult) and d["elapsed_ms"] >= 0


def test_write_refused_by_server_with_reason(small):
    text = "MATCH (s:Symbol) SET s.name = 'pwned' RETURN s.qual"
    with pytest.raises(QueryRejected, match="read-only") as exc:
        run_readonly(small, text)
    assert exc.value.query == text
    assert small.ro_query("MATCH (s:Symbol {name: 'pwned'}) RETURN count(s)").rows == [[0]]


def test_timeout_propagates_without_retry(graph, case_dir):
    _load(graph, case_dir("028") / "setup.cypher")
    before = _cmdstat(graph.store, "graph.RO_QUERY")
    with pytest.raises(QueryTimeout, match="50 ms timeout"):
        run_readonly(graph, "MATCH (a:Symbol), (b:Symbol), (c:Symbol) RETURN count(*)", timeout_ms=50)
    assert _cmdstat(graph.store, "graph.RO_QUERY") == before + 1


# --------------------------------------------------------------------------- shared case 026

class _Monitor:
    """Records every command the server receives (redis MONITOR on a second connection)."""

    STOP = "orbit-readonly-monitor-stop"

    def __init__(self, socket_path: str):
        self.client = redis.Redis(unix_socket_path=socket_path)
        self.commands: list[str] = []
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        with self.client.monitor() as m:
            self._ready.set()
            for cmd in m.listen():
                self.commands.append(cmd["command"])
                if self.STOP in cmd["command"]:
                    return

    def __enter__(self):
        self._thread.start()
        assert self._ready.wait(5)
        return self

    def __exit__(self, *exc):
        self.client.echo(self.STOP)
        self._thread.join(5)
        self.client.close()


def test_case_026_write_attempts(store, graph, case_dir):
    if not store.embedded:
        pytest.skip("MONITOR check needs the private embedded test server")
    case = case_dir("026")
    _load(graph, case / "setup.cypher")
    queries = json.loads((case / "queries.json").read_text())["queries"]
    before_fp = _fingerprint(graph, case)
    graphs_before = set(store.list_graphs())
    writes_before = _cmdstat(store, "graph.QUERY")

    results, refused = {}, {}
    with _Monitor(store.where) as mon:
        for q in queries:
            if q["expect"] == "reject":
                with pytest.raises(QueryRejected) as exc:
                    run_readonly(graph, q["cypher"], row_cap=200, timeout_ms=1000)
                assert exc.value.query == q["cypher"], q["id"]
                assert str(exc.value).strip(), q["id"]
                refused[q["id"]] = str(exc.value)
            else:
                results[q["id"]] = run_readonly(graph, q["cypher"], row_cap=200, timeout_ms=1000)

    # the reasons
    for wid in [f"W{i:02d}" for i in range(1, 13)]:
        assert "read-only" in refused[wid], (wid, refused[wid])
    assert "more than one statement" in refused["W13"]
    assert "LOAD CSV" in refused["W15"]

    # the allowed queries and their rows
    assert results["R01"].rows == [] and not results["R01"].truncated
    assert results["R02"].rows == [["app.py", "util.py"]]
    assert sorted(r[0] for r in results["R03"].rows) == ["File", "Package", "Symbol"]
    assert results["R04"].rows == [["app.main", "util.helper"]]

    # nothing written
    assert _fingerprint(graph, case) == before_fp
    assert before_fp[0] == [[5]] and before_fp[1] == [[5]]
    assert set(store.list_graphs()) == graphs_before
    assert _cmdstat(store, "graph.QUERY") == writes_before

    # model text only ever went out as GRAPH.RO_QUERY; W13 and W15 never reached the server
    graph_cmds = [c for c in mon.commands if c.upper().startswith("GRAPH.")]
    assert graph_cmds, mon.commands
    assert all(c.upper().startswith(("GRAPH.RO_QUERY", "GRAPH.CONFIG", "GRAPH.LIST")) for c in graph_cmds), graph_cmds
    sent = " ".join(mon.commands)
    assert "etc/passwd" not in sent
    assert "RETURN s.qual; CREATE" not in sent
    for q in queries:
        if q["id"] in ("W13", "W14", "W15"):
            continue  # W14 is sent (refused by the server) but MONITOR escapes its full-width letters
        assert any(c.startswith("GRAPH.RO_QUERY") and q["cypher"].split("//")[0].strip()[:30] in c
                   for c in graph_cmds), q["id"]


# --------------------------------------------------------------------------- shared case 028

@pytest.fixture(scope="module")
def million(store):
    """Case 028 loaded once for this module (read-only tests only)."""
    case = shared_case("028")
    g = store.graph("orbit_test_readonly_028")
    g.delete()
    _load(g, case / "setup.cypher")
    yield g, json.loads((case / "queries.json").read_text())
    g.delete()


@pytest.mark.parametrize("qid", ["M1", "M2", "M3"])
def test_case_028_capped(million, qid):
    g, spec = million
    q = next(x for x in spec["queries"] if x["id"] == qid)
    t0 = time.perf_counter()
    r = run_readonly(g, q["cypher"], row_cap=200)
    assert time.perf_counter() - t0 < 3.0
    assert len(r.rows) == 200 and r.truncated
    d = r.to_dict()
    assert d["truncated"] is True and d["rows_returned"] == 200 and d["row_cap"] == 200
    assert "201" in r.executed


def test_case_028_count_control(million):
    g, spec = million
    r = run_readonly(g, spec["control"]["cypher"], row_cap=200)
    assert r.rows == spec["control"]["expect_rows"] and not r.truncated


def test_server_resultset_size_flagged(million):
    g, _ = million
    db = g.store.connect()
    old = db.config_get("RESULTSET_SIZE")
    try:
        db.config_set("RESULTSET_SIZE", 100)
        forget_resultset_size(g.store)
        assert server_resultset_size(g.store) == 100
        r = run_readonly(g, "MATCH (s:Symbol) RETURN s.qual", row_cap=200)
        assert len(r.rows) == 100 and r.truncated
        d = r.to_dict()
        assert d["truncated"] is True and "RESULTSET_SIZE" in d["note"]
        # a result below the server limit is still complete
        r = run_readonly(g, "MATCH (s:Symbol) RETURN s.qual LIMIT 10", row_cap=200)
        assert len(r.rows) == 10 and not r.truncated
    finally:
        db.config_set("RESULTSET_SIZE", old)
        forget_resultset_size(g.store)
    if int(old) == -1:
        assert server_resultset_size(g.store) is None
