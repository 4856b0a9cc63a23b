"""Small workspaces for tests that assert the edges of a few lines of code: ``{path: text}``
written under a directory (each text dedented) and indexed into the session's embedded
FalkorDB. The ``index_files`` fixture (conftest.py) deletes their graphs and caches after the
test."""

from __future__ import annotations

import textwrap
from pathlib import Path

from orbit_lsp.config import Settings
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.index.indexer import WorkspaceIndexer


def write_files(root: Path, files: dict[str, str]) -> None:
    """Write each ``{relative path: text}`` under ``root`` (dedented, leading newlines dropped)."""
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))


def build(root: Path, store: GraphStore, files: dict[str, str], **settings) -> WorkspaceIndexer:
    """Write ``files`` under ``root`` and index them: with the store's settings, or with those
    settings changed by keyword (``value_flow=True``)."""
    write_files(root, files)
    chosen = Settings(data_dir=store.settings.data_dir, falkordb_url=None, **settings) if settings else None
    ix = WorkspaceIndexer(root, store, chosen)
    ix.index_all()
    return ix
