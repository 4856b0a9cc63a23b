"""Batched, parameterised writes of the code graph.

Every write is an ``UNWIND $rows AS r …`` query, one per node or edge type, in batches of
``BATCH`` rows; endpoints are matched by indexed properties (``File.path``, ``Symbol.qual`` then
``Symbol.file``). Values only ever travel as parameters, never spliced into Cypher text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from orbit_lsp.graph.connection import WRITE_TIMEOUT_MS, Graph

BATCH = 5000


def _batched(rows: Sequence[dict], size: int = BATCH) -> Iterable[Sequence[dict]]:
    for i in range(0, len(rows), size):
        yield rows[i : i + size]


class GraphWriter:
    """Writes rows into one code graph. Rows are plain dicts (shapes in each method)."""

    def __init__(self, graph: Graph, timeout_ms: int = WRITE_TIMEOUT_MS):
        self.graph = graph
        self.timeout_ms = timeout_ms
        self.queries = 0

    def _run(self, cypher: str, rows: Sequence, key: str = "rows") -> None:
        for chunk in _batched(list(rows)):
            self.graph.query(cypher, {key: list(chunk)}, timeout_ms=self.timeout_ms)
            self.queries += 1

    # -- deletions ----------------------------------------------------------------------------
    def delete_files(self, paths: Sequence[str]) -> None:
        """Remove files, their symbols and every edge touching them."""
        self._run("UNWIND $rows AS p MATCH (s:Symbol {file: p}) DETACH DELETE s", paths)
        self._run("UNWIND $rows AS p MATCH (f:File {path: p}) DETACH DELETE f", paths)

    def delete_symbols(self, paths: Sequence[str]) -> None:
        """Remove the symbols of ``paths`` (keeping the File nodes and their IMPORTS edges)."""
        self._run("UNWIND $rows AS p MATCH (s:Symbol {file: p}) DETACH DELETE s", paths)

    def delete_symbol_rows(self, rows: Sequence[dict]) -> None:
        """Remove single symbols, rows: {file, qual}."""
        self._run("UNWIND $rows AS r MATCH (s:Symbol {qual: r.qual}) WHERE s.file = r.file DETACH DELETE s", rows)

    def delete_outgoing(self, paths: Sequence[str]) -> None:
        """Remove the edges that ``paths`` own: IMPORTS/USES_PACKAGE out of the files and
        CALLS/INHERITS out of their symbols."""
        self._run("UNWIND $rows AS p MATCH (:File {path: p})-[e:IMPORTS|USES_PACKAGE]->() DELETE e", paths)
        self._run("UNWIND $rows AS p MATCH (:Symbol {file: p})-[e:CALLS|INHERITS]->() DELETE e", paths)

    def delete_unused_packages(self) -> None:
        self.graph.query("MATCH (p:Package) WHERE NOT ()-[:USES_PACKAGE]->(p) DELETE p",
                         timeout_ms=self.timeout_ms)
        self.queries += 1

    # -- nodes -----------------------------------------------------------------------------
    def create_files(self, rows: Sequence[dict]) -> None:
        """rows: {path, lang, lines, hash, parse_error, unresolved_imports}"""
        self._run("UNWIND $rows AS r CREATE (f:File) SET f = r", rows)

    def update_files(self, rows: Sequence[dict]) -> None:
        """rows: same shape as ``create_files``; matched by path."""
        self._run("UNWIND $rows AS r MATCH (f:File {path: r.path}) SET f = r", rows)

    def create_symbols(self, rows: Sequence[dict]) -> None:
        """rows: {file, qual, name, kind, line, end_line, col, unresolved_calls, unresolved_names};
        each Symbol is created together with its DEFINES edge."""
        self._run("UNWIND $rows AS r MATCH (f:File {path: r.file}) CREATE (f)-[:DEFINES]->(s:Symbol) SET s = r",
                  rows)

    def update_symbols(self, rows: Sequence[dict]) -> None:
        """rows: same shape as ``create_symbols``; matched by (qual, file)."""
        self._run("UNWIND $rows AS r MATCH (s:Symbol {qual: r.qual}) WHERE s.file = r.file SET s = r", rows)

    # -- edges -----------------------------------------------------------------------------
    def create_imports(self, rows: Sequence[dict]) -> None:
        """rows: {src, dst, line}"""
        self._run("UNWIND $rows AS r MATCH (a:File {path: r.src}) MATCH (b:File {path: r.dst}) "
                  "CREATE (a)-[:IMPORTS {line: r.line}]->(b)", rows)

    def create_package_uses(self, rows: Sequence[dict]) -> None:
        """rows: {src, name, stdlib, dist, line}; Package nodes are merged by name."""
        if not rows:
            return
        pkgs = {r["name"]: {"name": r["name"], "stdlib": r["stdlib"], "dist": r["dist"]} for r in rows}
        self._run("UNWIND $rows AS r MERGE (p:Package {name: r.name}) SET p.stdlib = r.stdlib, p.dist = r.dist",
                  sorted(pkgs.values(), key=lambda p: p["name"]))
        self._run("UNWIND $rows AS r MATCH (a:File {path: r.src}) MATCH (p:Package {name: r.name}) "
                  "CREATE (a)-[:USES_PACKAGE {line: r.line}]->(p)", rows)

    def create_calls(self, rows: Sequence[dict]) -> None:
        """rows: {src, src_file, dst, dst_file, line, lines, cols, end_cols, resolved}"""
        self._run("UNWIND $rows AS r MATCH (a:Symbol {qual: r.src}) WHERE a.file = r.src_file "
                  "MATCH (b:Symbol {qual: r.dst}) WHERE b.file = r.dst_file "
                  "CREATE (a)-[:CALLS {line: r.line, lines: r.lines, cols: r.cols, end_cols: r.end_cols, "
                  "resolved: r.resolved}]->(b)", rows)

    def create_inherits(self, rows: Sequence[dict]) -> None:
        """rows: {src, src_file, dst, dst_file}"""
        self._run("UNWIND $rows AS r MATCH (a:Symbol {qual: r.src}) WHERE a.file = r.src_file "
                  "MATCH (b:Symbol {qual: r.dst}) WHERE b.file = r.dst_file CREATE (a)-[:INHERITS]->(b)", rows)
