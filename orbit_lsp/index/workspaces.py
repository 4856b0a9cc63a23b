"""The workspace folders one process serves, each with its own indexer and graph.

``WorkspaceSet`` maps a file path to the folder that owns it (the deepest folder containing it,
so nested folders of a multi-root workspace never index a file twice into two graphs). It knows
nothing of LSP: callers hand it filesystem paths.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from orbit_lsp.config import Settings
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.index.indexer import WorkspaceIndexer


def real(path: Path | str) -> Path:
    """Absolute, symlink-resolved path."""
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


class WorkspaceSet:
    """Folders -> ``WorkspaceIndexer``; thread-safe."""

    def __init__(self, store: GraphStore, settings: Settings):
        self.store = store
        self.settings = settings
        self._folders: dict[Path, WorkspaceIndexer] = {}
        self._lock = threading.Lock()

    def add(self, folder: Path | str) -> WorkspaceIndexer:
        """Serve ``folder`` (idempotent). Indexing is the caller's to start."""
        root = real(folder)
        with self._lock:
            ix = self._folders.get(root)
            if ix is None:
                ix = self._folders[root] = WorkspaceIndexer(root, self.store, self.settings)
            return ix

    def remove(self, folder: Path | str) -> WorkspaceIndexer | None:
        """Stop serving ``folder``; its graph stays for the next time it is opened."""
        with self._lock:
            return self._folders.pop(real(folder), None)

    def all(self) -> list[WorkspaceIndexer]:
        with self._lock:
            return list(self._folders.values())

    def owner(self, path: Path | str) -> tuple[WorkspaceIndexer, str] | None:
        """``(indexer, workspace-relative path)`` of the deepest folder containing ``path``, or
        None when no served folder contains it."""
        p = Path(os.path.abspath(os.fspath(path)))
        best: WorkspaceIndexer | None = None
        with self._lock:
            folders = list(self._folders.items())
        for candidate in (p, real(p)):
            for root, ix in folders:
                if (candidate == root or root in candidate.parents) and (best is None or len(root.parts) > len(best.root.parts)):
                    best = ix
            if best is not None:
                rel = best.rel_of(candidate)
                if rel is not None:
                    return best, rel
        return None
