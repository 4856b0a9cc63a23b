"""What can be said exactly about a file of a folder whose first index has not finished: its own
definitions, parsed from the file as the editor holds it (nothing read from the graph, which is
not final: any file may call or import it).

- ``cold_sites``: where the code lenses of the file go (the same symbols the index will write);
- ``cold_definition_at``: the definition whose name is at a position (what a hover can show).

Both parse in memory (``buffers.analyse_buffer``: parsed once per content) and use the graph's
qualified names (``py_edges.full_qual``), so a lens made now is resolved against the graph once
the index is done. Graph positions: 1-based lines, UTF-8 byte columns.
"""

from __future__ import annotations

from pathlib import Path

from orbit_lsp.index.buffers import LENS_KINDS, analyse_buffer
from orbit_lsp.index.indexer import WorkspaceIndexer, content_hash
from orbit_lsp.index.py_edges import full_qual
from orbit_lsp.index.watcher import classify


def _root_package(ix: WorkspaceIndexer) -> str:
    """``ix.root_package`` before the index has read the folder (the root is a package when it
    holds an ``__init__.py``)."""
    if ix.state:
        return ix.root_package
    return ix.root.name if ix.root.name.isidentifier() and (ix.root / "__init__.py").is_file() else ""


def _symbols(ix: WorkspaceIndexer, rel: str, path: Path, data: bytes) -> list[dict] | None:
    """The file's definitions as graph symbols ``{"qual", "name", "kind", "line", "col"}``
    (module excepted), or None when the index would not take the file (not a source file, excluded,
    ignored, larger than ``max_file_bytes``) or it does not parse."""
    if classify(ix, rel, path, False) != "file" or len(data) > ix.settings.max_file_bytes:
        return None
    facts, _ = analyse_buffer(ix, rel, data, content_hash(data), edges=False)
    if facts is None:
        return None
    rp = _root_package(ix)
    return [{"qual": full_qual(rel, s.qual, rp), "name": s.name, "kind": s.kind, "line": s.line, "col": s.col}
            for s in facts.symbols if s.kind != "module"]


def cold_sites(ix: WorkspaceIndexer, rel: str, path: Path, data: bytes) -> dict | None:
    """Where the code lenses of ``data`` (the file ``rel`` of ``ix`` as the editor holds it) go
    while the folder has no finished index: ``{"symbols": [{"qual", "name", "kind", "line",
    "col"}], "source": "buffer" | "unparsed"}`` (functions, methods and classes, as
    ``buffers.lens_work`` answers), None when the index would not take the file."""
    if classify(ix, rel, path, False) != "file" or len(data) > ix.settings.max_file_bytes:
        return None
    syms = _symbols(ix, rel, path, data)
    if syms is None:
        return {"symbols": [], "source": "unparsed"}
    return {"symbols": [s for s in syms if s["kind"] in LENS_KINDS], "source": "buffer"}


def cold_definition_at(ix: WorkspaceIndexer, rel: str, path: Path, data: bytes, line1: int, col: int) -> dict | None:
    """The definition whose name covers (``line1``, byte ``col``) of ``data``: ``{"qual", "name",
    "kind", "line", "col", "file"}``, else None (not a definition's name, or a file the index
    would not take)."""
    for s in _symbols(ix, rel, path, data) or []:
        if s["line"] == line1 and s["col"] <= col < s["col"] + len(s["name"].encode("utf-8")):
            return {**s, "file": rel}
    return None
