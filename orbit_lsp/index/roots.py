"""What a folder is before it is indexed: a project (it has a root marker), a loose folder (no
marker: an editor opened a lone file there), or a folder too broad to index by default (the
user's home directory, the filesystem root).

- ``has_root_marker(folder)``: one of ``ROOT_MARKERS`` is directly in ``folder``;
  ``in_project(folder)``: ``folder`` or a parent below the home directory has one.
- ``too_broad(folder)``: ``"your home directory"`` / ``"the filesystem root"`` or None.
- ``SHALLOW_EXCLUDE``: the gitignore-style pattern that keeps a loose folder's walk to its own
  files (every subdirectory excluded).

It knows nothing of LSP or of the indexer: front ends decide what to do with the answers.
"""

from __future__ import annotations

import os
from pathlib import Path

# files or directories whose presence says "this folder is a project root"
ROOT_MARKERS = (".git", ".hg", ".svn", "pyproject.toml", "setup.py", "setup.cfg", "requirements.txt",
                "Pipfile", "tox.ini", "package.json", "tsconfig.json", "jsconfig.json", "deno.json")

# excludes every directory under the root (anchored ``/*/``): only the root's own files are walked
SHALLOW_EXCLUDE = "/*/"


def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def has_root_marker(folder: Path | str) -> bool:
    """Whether ``folder`` itself holds one of ``ROOT_MARKERS`` (file or directory)."""
    f = Path(folder)
    return any(os.path.lexists(f / m) for m in ROOT_MARKERS)


def too_broad(folder: Path | str, home: Path | str | None = None) -> str | None:
    """Why ``folder`` is not indexed without an explicit setting: ``"your home directory"``
    (``home``, default ``Path.home()``), ``"the filesystem root"`` (``/`` or a drive root), or
    None. Compared after resolving symlinks."""
    real = _real(folder)
    if real == Path(real.anchor):
        return "the filesystem root"
    try:
        home_dir = _real(home if home is not None else Path.home())
    except RuntimeError:  # no home directory can be determined
        return None
    if real == home_dir:
        return "your home directory"
    return None


def in_project(folder: Path | str, home: Path | str | None = None) -> bool:
    """Whether ``folder`` is (inside) a project: it or one of its parents has a root marker.
    The home directory and the filesystem root never count as projects (a dotfiles ``.git`` in
    the home directory does not make every folder below it one)."""
    f = _real(folder)
    try:
        home_dir = _real(home if home is not None else Path.home())
    except RuntimeError:
        home_dir = None
    for d in (f, *f.parents):
        if d == Path(d.anchor) or d == home_dir:
            return False
        if has_root_marker(d):
            return True
    return False
