"""The workspace folders one process serves, each with its own indexer and graph.

``WorkspaceSet`` maps a file path to the folder that owns it: the deepest folder containing it.
A folder nested inside another served folder is excluded from the outer folder's walk, so a
file of a multi-root workspace is indexed once, into exactly one graph. It knows nothing of
LSP: callers hand it filesystem paths.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from orbit_lsp.config import Settings
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.index.roots import SHALLOW_EXCLUDE
from orbit_lsp.index.walk import WorkspaceFilter


def real(path: Path | str) -> Path:
    """Absolute, symlink-resolved path."""
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def _anchored_dir_pattern(rel: str) -> str:
    """A gitwildmatch pattern matching exactly the directory ``rel`` (relative, ``/``
    separators) under the root: ``/rel/`` with wildcard characters escaped."""
    escaped = "".join("\\" + ch if ch in "\\*?[]" else ch for ch in rel)
    if escaped.endswith(" "):
        escaped = escaped[:-1] + "\\ "
    return "/" + escaped + "/"


class WorkspaceSet:
    """Folders -> ``WorkspaceIndexer``; thread-safe.

    ``settings`` is the user's; each indexer gets a copy whose ``exclude`` also lists the served
    folders nested inside it. When adding or removing a folder changes what an outer folder
    must leave out, that outer folder's root is put in ``dirty`` (``take_dirty()`` hands the
    set over): its owner must re-index it (``index_all``) for the change to reach its graph.
    """

    def __init__(self, store: GraphStore, settings: Settings):
        self.store = store
        self.settings = settings
        self._folders: dict[Path, WorkspaceIndexer] = {}
        self._lock = threading.Lock()
        self._dirty: set[Path] = set()
        self._shallow: set[Path] = set()  # folders served without their subdirectories

    # -- folders ------------------------------------------------------------------------------
    def add(self, folder: Path | str, shallow: bool = False) -> WorkspaceIndexer:
        """Serve ``folder`` (idempotent). Indexing is the caller's to start. ``shallow``: only
        the folder's own files, none of its subdirectories (``roots.SHALLOW_EXCLUDE``)."""
        root = real(folder)
        with self._lock:
            ix = self._folders.get(root)
            if ix is None:
                if shallow:
                    self._shallow.add(root)
                ix = self._folders[root] = WorkspaceIndexer(root, self.store, self._settings_for(root))
                self._reconcile_locked(changed=root)
            return ix

    def remove(self, folder: Path | str) -> WorkspaceIndexer | None:
        """Stop serving ``folder``; its graph stays for the next time it is opened."""
        root = real(folder)
        with self._lock:
            ix = self._folders.pop(root, None)
            if ix is not None:
                self._dirty.discard(root)
                self._shallow.discard(root)
                self._reconcile_locked(changed=root)
            return ix

    def all(self) -> list[WorkspaceIndexer]:
        with self._lock:
            return list(self._folders.values())

    def get(self, folder: Path | str) -> WorkspaceIndexer | None:
        """The indexer serving exactly ``folder``, or None."""
        with self._lock:
            return self._folders.get(real(folder))

    def take_dirty(self) -> list[WorkspaceIndexer]:
        """Indexers whose exclusions changed since the last call (they need ``index_all``)."""
        with self._lock:
            out = [self._folders[r] for r in sorted(self._dirty) if r in self._folders]
            self._dirty.clear()
            return out

    # -- settings -----------------------------------------------------------------------------
    def update_settings(self, settings: Settings) -> None:
        """Use ``settings`` from now on, in every indexer too (its file filter is rebuilt, so
        the watcher applies a changed ``exclude`` at once)."""
        with self._lock:
            self.settings = settings
            for root, ix in self._folders.items():
                self._apply_locked(ix, self._settings_for(root))

    def _nested(self, root: Path) -> list[str]:
        """Workspace-relative paths of served folders strictly inside ``root``."""
        return sorted(os.path.relpath(other, root).replace(os.sep, "/")
                      for other in self._folders if other != root and root in other.parents)

    def is_shallow(self, folder: Path | str) -> bool:
        """Whether ``folder`` is served without its subdirectories."""
        with self._lock:
            return real(folder) in self._shallow

    def _settings_for(self, root: Path) -> Settings:
        nested = self._nested(root)
        extra = [_anchored_dir_pattern(r) for r in nested] + ([SHALLOW_EXCLUDE] if root in self._shallow else [])
        if not extra:
            return self.settings
        return self.settings.model_copy(update={"exclude": list(self.settings.exclude) + extra})

    @staticmethod
    def _apply_locked(ix: WorkspaceIndexer, settings: Settings) -> bool:
        changed = list(ix.settings.exclude) != list(settings.exclude)
        ix.settings = settings
        if changed:
            ix.filter = WorkspaceFilter(ix.root, settings.exclude)
        return changed

    def _reconcile_locked(self, changed: Path) -> None:
        """Folders containing ``changed`` now exclude (or include again) its files."""
        for root, ix in self._folders.items():
            if root != changed and root in changed.parents:
                if self._apply_locked(ix, self._settings_for(root)):
                    self._dirty.add(root)

    # -- ownership ----------------------------------------------------------------------------
    def owner(self, path: Path | str) -> tuple[WorkspaceIndexer, str] | None:
        """``(indexer, workspace-relative path)`` of the deepest folder containing ``path``, or
        None when no served folder contains it."""
        p = Path(os.path.abspath(os.fspath(path)))
        with self._lock:
            folders = list(self._folders.items())
        for candidate in (p, real(p)):
            best: WorkspaceIndexer | None = None
            for root, ix in folders:
                if (candidate == root or root in candidate.parents) and (best is None or len(root.parts) > len(best.root.parts)):
                    best = ix
            if best is not None:
                rel = best.rel_of(candidate)
                if rel is not None:
                    return best, rel
        return None
