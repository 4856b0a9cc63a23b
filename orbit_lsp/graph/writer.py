"""Batched, parameterised writes of the code graph.

Every write is an ``UNWIND $rows AS r …`` query, one per node or edge type, in batches of
``BATCH`` rows (but the edges of a full build: ``GRAPH.BULK``, see below). Rows are lists whose
columns are named by the ``*_FIELDS`` tuples below (lists travel as compact JSON arrays, ~30 %
less text for the server to parse than maps). Values only ever travel as parameters, never
spliced into Cypher text.

Two ways to name an endpoint:

- by indexed properties (``File.path``, ``Symbol.qual`` then ``Symbol.file``): for incremental
  updates of an existing graph;
- by the node ids that ``create_files``/``create_unresolved_symbols`` return, within one full build of a
  fresh graph: a ``NodeByIdSeek`` instead of an index lookup and a filter, and no strings to
  send (measured on the standard library: CALLS edges 2.6 s -> 0.6 s). Ids are never kept beyond
  the build that created the nodes (FalkorDB reuses the ids of deleted nodes). Edges by id go
  through ``GRAPH.BULK`` (``graph.bulk``), no Cypher at all, where the server has it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence

from orbit_lsp.graph.bulk import edge_section, site_edge_section
from orbit_lsp.graph.connection import WRITE_TIMEOUT_MS, Graph
from orbit_lsp.graph.errors import CommandUnavailable

BATCH = 5000
BULK_EDGES = 20_000  # edges a GRAPH.BULK command (``_edges_by_id``): the scale corpus's 714,882 CALLS
#   cost the server 1.2 s of CPU in commands of 5,000, 0.7 s in commands of 50,000 (2026-12-04)

FILE_FIELDS = ("path", "lang", "lines", "hash", "parse_error", "unresolved_imports")
SYMBOL_FIELDS = ("file", "qual", "name", "kind", "line", "end_line", "col", "unresolved_calls", "unresolved_names",
                 "unresolved_sites")  # unresolved_sites: "name@line" of each unbound call site, by line
# CALLS rows by property: src_file, src, dst_file, dst, then CALL_PROPS; by id: src_id, dst_id, then CALL_PROPS
CALL_PROPS = ("line", "lines", "cols", "end_cols", "resolved")


def _props(fields: Sequence[str], start: int = 0) -> str:
    return ", ".join(f"{f}: r[{i}]" for i, f in enumerate(fields, start))


def _sets(var: str, fields: Sequence[str], start: int = 0) -> str:
    # a null value removes the property, so this equals ``SET var = {every field}``
    return ", ".join(f"{var}.{f} = r[{i}]" for i, f in enumerate(fields, start))


_CALL_PROPS = "{" + _props(CALL_PROPS, 4) + "}"
_CALL_PROPS_BY_ID = "{" + _props(CALL_PROPS, 2) + "}"


def _batched(rows: Sequence, size: int = BATCH) -> Iterable[Sequence]:
    for i in range(0, len(rows), size):
        yield rows[i : i + size]


class GraphWriter:
    """Writes rows into one code graph (row shapes in each method)."""

    def __init__(self, graph: Graph, timeout_ms: int = WRITE_TIMEOUT_MS):
        self.graph = graph
        self.timeout_ms = timeout_ms
        self.queries = 0
        self._queued: list[tuple[str, dict]] | None = None
        self.bulk = True  # edges by id through GRAPH.BULK (``_edges_by_id``)
        self._ids_server: str | None = None  # the server (run id) whose nodes ``_run_ids`` returned

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Queue the writes made in the block and send them in one ``MULTI``/``EXEC`` when it
        ends (``Graph.query_all``): readers in other processes never see them half applied.
        Inside, writes return nothing (``create_*`` return no node ids); an exception in the
        block sends nothing."""
        self._queued = []
        try:
            yield
            queued, self._queued = self._queued, None
            self.graph.query_all(queued, timeout_ms=self.timeout_ms)
        finally:
            self._queued = None

    def _run(self, cypher: str, rows: Sequence, key: str = "rows") -> list[list]:
        out: list[list] = []
        if self._queued is not None:
            for chunk in _batched(list(rows)):
                self._queued.append((cypher, {key: list(chunk)}))
                self.queries += 1
            return out
        for chunk in _batched(list(rows)):
            out += self.graph.query(cypher, {key: list(chunk)}, timeout_ms=self.timeout_ms).rows
            self.queries += 1
        return out

    def _run_ids(self, cypher: str, rows: Sequence) -> list[int | None]:
        """Run a creating query over ``rows`` that returns ``(row index, id)``: the new node ids
        aligned with ``rows`` (None where nothing was created)."""
        rows = list(rows)
        ids: list[int | None] = [None] * len(rows)
        if self._queued is not None:  # ids are not known inside a transaction
            self._run(cypher, [[*r, i] for i, r in enumerate(rows)])
            return ids
        for start in range(0, len(rows), BATCH):
            chunk = [[*r, start + i] for i, r in enumerate(rows[start : start + BATCH])]
            for i, nid in self.graph.query(cypher, {"rows": chunk}, timeout_ms=self.timeout_ms).rows:
                ids[i] = nid
            self.queries += 1
            server = self.graph.store.server_id
            if self._ids_server is None:
                self._ids_server = server
            elif server != self._ids_server:
                self._ids_server = "(several servers)"  # ids of two servers: none is trusted
        return ids

    # -- deletions ----------------------------------------------------------------------------
    def delete_files(self, paths: Sequence[str]) -> None:
        """Remove files, their symbols and every edge touching them."""
        self._run("UNWIND $rows AS p MATCH (s:Symbol {file: p}) DETACH DELETE s", paths)
        self._run("UNWIND $rows AS p MATCH (f:File {path: p}) DETACH DELETE f", paths)

    def delete_symbols(self, paths: Sequence[str]) -> None:
        """Remove the symbols of ``paths`` (keeping the File nodes and their IMPORTS edges)."""
        self._run("UNWIND $rows AS p MATCH (s:Symbol {file: p}) DETACH DELETE s", paths)

    def delete_symbol_rows(self, rows: Sequence[list]) -> None:
        """Remove single symbols, rows: [file, qual]."""
        self._run("UNWIND $rows AS r MATCH (s:Symbol {qual: r[1]}) WHERE s.file = r[0] DETACH DELETE s", rows)

    def delete_outgoing(self, paths: Sequence[str]) -> None:
        """Remove the edges that ``paths`` own: IMPORTS/USES_PACKAGE out of the files and
        CALLS/INHERITS out of their symbols."""
        self._run("UNWIND $rows AS p MATCH (:File {path: p})-[e:IMPORTS|USES_PACKAGE]->() DELETE e", paths)
        self._run("UNWIND $rows AS p MATCH (:Symbol {file: p})-[e:CALLS|INHERITS]->() DELETE e", paths)

    def delete_unused_packages(self, names: Sequence[str] | None = None) -> None:
        """Remove Package nodes no file uses any more: any, or only those named ``names``."""
        if names is None:
            self.graph.query("MATCH (p:Package) WHERE NOT ()-[:USES_PACKAGE]->(p) DELETE p",
                             timeout_ms=self.timeout_ms)
            self.queries += 1
        else:
            self._run("UNWIND $rows AS n MATCH (p:Package {name: n}) WHERE NOT ()-[:USES_PACKAGE]->(p) DELETE p",
                      names)

    # -- nodes -----------------------------------------------------------------------------
    def create_files(self, rows: Sequence[list]) -> list[int | None]:
        """rows: ``FILE_FIELDS`` (None leaves a property out). Returns the new node ids."""
        return self._run_ids(f"UNWIND $rows AS r CREATE (f:File {{{_props(FILE_FIELDS)}}}) "
                             f"RETURN r[{len(FILE_FIELDS)}], id(f)", rows)

    def update_files(self, rows: Sequence[list]) -> None:
        """rows: ``FILE_FIELDS``; matched by path, every property replaced."""
        self._run(f"UNWIND $rows AS r MATCH (f:File {{path: r[0]}}) SET {_sets('f', FILE_FIELDS[1:], 1)}", rows)

    def update_files_by_id(self, rows: Sequence[list], fields: Sequence[str]) -> None:
        """rows: [node id, *values of ``fields``]: set those properties only."""
        self._run(f"UNWIND $rows AS r WITH r, r[0] AS fid MATCH (f) WHERE id(f) = fid SET {_sets('f', fields, 1)}",
                  rows)

    def create_symbols(self, rows: Sequence[list]) -> list[int | None]:
        """rows: ``SYMBOL_FIELDS``; each Symbol is created together with its DEFINES edge from
        its File, found by path. Returns the new node ids."""
        return self._run_ids(f"UNWIND $rows AS r MATCH (f:File {{path: r[0]}}) "
                             f"CREATE (f)-[:DEFINES]->(s:Symbol {{{_props(SYMBOL_FIELDS)}}}) "
                             f"RETURN r[{len(SYMBOL_FIELDS)}], id(s)", rows)

    def create_unresolved_symbols(self, rows: Sequence[list], file_ids: dict[str, int]) -> list[int | None]:
        """A full build's symbols before their calls are resolved, rows: ``SYMBOL_FIELDS`` up to
        ``col`` (``[file, qual, name, kind, line, end_line, col]``), each created with its
        DEFINES edge from its File, found by id through ``file_ids`` (path -> id); ``file`` is
        that File's path and there are no unbound calls yet (``unresolved_calls`` 0,
        ``unresolved_names`` []: set by ``update_symbols_by_id`` after the resolution). Rows
        carry neither, which halves the parameter text (~50 bytes a symbol). Returns the new
        node ids (None for a row whose file has no id)."""
        rows = [[file_ids.get(r[0]), *r[1:]] for r in rows]
        return self._run_ids("UNWIND $rows AS r WITH r, r[0] AS fid MATCH (f) WHERE id(f) = fid "
                             "CREATE (f)-[:DEFINES]->(s:Symbol {file: f.path, qual: r[1], name: r[2], kind: r[3], "
                             "line: r[4], end_line: r[5], col: r[6], unresolved_calls: 0, unresolved_names: []}) "
                             "RETURN r[7], id(s)", rows)

    def update_symbols(self, rows: Sequence[list]) -> None:
        """rows: ``SYMBOL_FIELDS``; matched by (qual, file), every property replaced."""
        self._run(f"UNWIND $rows AS r MATCH (s:Symbol {{qual: r[1]}}) WHERE s.file = r[0] "
                  f"SET {_sets('s', SYMBOL_FIELDS[2:], 2)}", rows)

    def update_symbols_by_id(self, rows: Sequence[list], fields: Sequence[str]) -> None:
        """rows: [node id, *values of ``fields``]: set those properties only."""
        self._run(f"UNWIND $rows AS r WITH r, r[0] AS sid MATCH (s) WHERE id(s) = sid SET {_sets('s', fields, 1)}",
                  rows)

    def create_unbound_names(self, rows: Sequence[list]) -> None:
        """rows: [name, symbols, sites] (``index.report.unbound_tally``) of a graph that has none."""
        self._run("UNWIND $rows AS r CREATE (:UnboundName {name: r[0], symbols: r[1], sites: r[2]})", rows)

    def add_unbound_names(self, rows: Sequence[list]) -> None:
        """rows: [name, symbols, sites] to add to each name's counts (negative for symbols
        removed or changed); a name no symbol uses any more loses its node."""
        self._run("UNWIND $rows AS r MERGE (u:UnboundName {name: r[0]}) "
                  "SET u.symbols = coalesce(u.symbols, 0) + r[1], u.sites = coalesce(u.sites, 0) + r[2]", rows)
        self._run("UNWIND $rows AS r MATCH (u:UnboundName {name: r[0]}) WHERE u.symbols <= 0 DELETE u", rows)

    # -- edges -----------------------------------------------------------------------------
    def create_imports(self, rows: Sequence[list]) -> None:
        """rows: [src path, dst path, line, type_only]"""
        self._run("UNWIND $rows AS r MATCH (a:File {path: r[0]}) MATCH (b:File {path: r[1]}) "
                  "CREATE (a)-[:IMPORTS {line: r[2], type_only: r[3]}]->(b)", rows)

    def create_imports_by_id(self, rows: Sequence[list]) -> None:
        """rows: [src id, dst id, line, type_only]"""
        self._edges_by_id("IMPORTS", ("line", "type_only"), rows, edge_section,
                          "UNWIND $rows AS r WITH r, r[0] AS a_id, r[1] AS b_id MATCH (a) WHERE id(a) = a_id "
                          "MATCH (b) WHERE id(b) = b_id CREATE (a)-[:IMPORTS {line: r[2], type_only: r[3]}]->(b)")

    def create_package_uses(self, rows: Sequence[list], file_ids: dict[str, int] | None = None) -> None:
        """rows: [src path, name, stdlib, dist, line]; Package nodes are merged by name; the
        files are found by path, or by id through ``file_ids``."""
        if not rows:
            return
        pkgs = {r[1]: [r[1], r[2], r[3]] for r in rows}
        self._run("UNWIND $rows AS r MERGE (p:Package {name: r[0]}) SET p.stdlib = r[1], p.dist = r[2]",
                  sorted(pkgs.values()))
        if file_ids is None:
            self._run("UNWIND $rows AS r MATCH (a:File {path: r[0]}) MATCH (p:Package {name: r[1]}) "
                      "CREATE (a)-[:USES_PACKAGE {line: r[4]}]->(p)", rows)
        else:
            self._run("UNWIND $rows AS r WITH r, r[0] AS a_id MATCH (a) WHERE id(a) = a_id "
                      "MATCH (p:Package {name: r[1]}) CREATE (a)-[:USES_PACKAGE {line: r[2]}]->(p)",
                      [[file_ids[r[0]], r[1], r[4]] for r in rows if r[0] in file_ids])

    def create_calls(self, rows: Sequence[list]) -> None:
        """rows: [src file, src qual, dst file, dst qual, *CALL_PROPS]"""
        self._run("UNWIND $rows AS r MATCH (a:Symbol {qual: r[1]}) WHERE a.file = r[0] "
                  "MATCH (b:Symbol {qual: r[3]}) WHERE b.file = r[2] "
                  f"CREATE (a)-[:CALLS {_CALL_PROPS}]->(b)", rows)

    def create_calls_by_id(self, rows: Sequence[list]) -> None:
        """rows: [src id, dst id, *CALL_PROPS]"""
        self._edges_by_id("CALLS", CALL_PROPS, rows, site_edge_section,
                          "UNWIND $rows AS r WITH r, r[0] AS a_id, r[1] AS b_id MATCH (a) WHERE id(a) = a_id "
                          f"MATCH (b) WHERE id(b) = b_id CREATE (a)-[:CALLS {_CALL_PROPS_BY_ID}]->(b)")

    def create_inherits(self, rows: Sequence[list]) -> None:
        """rows: [src file, src qual, dst file, dst qual]"""
        self._run("UNWIND $rows AS r MATCH (a:Symbol {qual: r[1]}) WHERE a.file = r[0] "
                  "MATCH (b:Symbol {qual: r[3]}) WHERE b.file = r[2] CREATE (a)-[:INHERITS]->(b)", rows)

    def create_inherits_by_id(self, rows: Sequence[list]) -> None:
        """rows: [src id, dst id]"""
        self._edges_by_id("INHERITS", (), rows, edge_section,
                          "UNWIND $rows AS r WITH r[0] AS a_id, r[1] AS b_id MATCH (a) WHERE id(a) = a_id "
                          "MATCH (b) WHERE id(b) = b_id CREATE (a)-[:INHERITS]->(b)")

    def _edges_by_id(self, rel_type: str, props: Sequence[str], rows: Sequence[list], encode: Callable,
                     cypher: str) -> None:
        """Create ``rel_type`` edges from rows ``[src id, dst id, *values of props]``: with
        ``GRAPH.BULK`` (sections made by ``encode``, one of ``graph.bulk``'s; the ids are this
        build's: nothing is sent to a server that restarted since it returned this writer's
        node ids, ``FalkorDBOffline``), else with ``cypher`` — inside a transaction, for a batch
        of rows ``encode`` cannot encode, and from the first time the server does not know the
        command or does not let this user run it (it is then not tried again by this writer)."""
        if not rows:
            return
        if self._queued is not None or not self.bulk:
            self._run(cypher, rows)
            return
        for chunk in _batched(list(rows), BULK_EDGES):
            if not self.bulk:  # refused by the server for an earlier chunk (or by another thread)
                self._run(cypher, chunk)
                continue
            try:
                section = encode(rel_type, props, chunk)
            except (TypeError, ValueError):
                self._run(cypher, chunk)
                continue
            try:
                self.graph.bulk_edges(section, len(chunk), self._ids_server)
            except CommandUnavailable:
                self.bulk = False
                self._run(cypher, chunk)
                continue
            self.queries += 1
