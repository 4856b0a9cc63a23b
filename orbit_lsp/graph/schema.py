"""Graph schema: labels, edge types and the range indexes created before the first write.

Nodes: ``File {path, lang, lines, hash, parse_error, unresolved_imports}``,
``Symbol {name, qual, kind, line, end_line, file, unresolved_calls, unresolved_names}``,
``Package {name, stdlib, dist}``, ``UnboundName {name, symbols, sites}`` (per name, how many symbols
make unbound calls using it and how many such calls: ``index.report.unbound_tally``).
Edges: ``(File)-[:DEFINES]->(Symbol)``, ``(File)-[:IMPORTS {line, type_only}]->(File)``,
``(File)-[:USES_PACKAGE]->(Package)``, ``(Symbol)-[:CALLS {line, resolved}]->(Symbol)``,
``(Symbol)-[:INHERITS]->(Symbol)``.
"""

from __future__ import annotations

from orbit_lsp.graph.connection import Graph

INDEXES: tuple[tuple[str, str], ...] = (
    ("File", "path"),
    ("Symbol", "qual"),
    ("Symbol", "name"),
    ("Symbol", "file"),
    ("Package", "name"),
    ("Symbol", "unresolved_names"),  # array property: "who may call a name" is an index lookup
    ("UnboundName", "name"),
)
# the name of the ``UnboundName`` node that marks a graph keeping those counts (written by every
# full build): no call uses it; FalkorDB's index does not find an empty string
UNBOUND_MARKER = "()"


def existing_indexes(graph: Graph) -> set[tuple[str, str]]:
    """(label, property) pairs that have a range index. Empty for a graph that does not exist."""
    if not graph.exists():
        return set()
    res = graph.ro_query("CALL db.indexes() YIELD label, properties RETURN label, properties")
    return {(label, prop) for label, props in res.rows for prop in props}


def ensure_indexes(graph: Graph) -> list[str]:
    """Create the missing range indexes (idempotent). Returns the Cypher statements it ran."""
    have = existing_indexes(graph)
    ran = []
    for label, prop in INDEXES:
        if (label, prop) in have:
            continue
        cypher = f"CREATE INDEX FOR (n:{label}) ON (n.{prop})"
        graph.query(cypher)
        ran.append(cypher)
    return ran
