"""Which code graph a workspace uses: one per workspace folder *and git branch*, or one named by an
explicit graph key (shared by a team: a CI job indexes ``--graph-key main`` once).

- ``graph_name(root, key=None)``: the graph of workspace ``root``. With ``key``: the shared
  graph of that key (``shared_graph_name``). Else, in a git work tree (found by walking up from
  ``root`` to a ``.git`` directory or ``gitdir:`` file, so linked worktrees and submodules
  work): ``orbit_code_<16 hex>`` hashed from the real path of ``root`` and the branch HEAD
  names (a detached HEAD is the one branch ``DETACHED``: checking out commits one after another
  reuses one graph). Outside git: the hash of the path alone (``root_graph_name``, the name
  every workspace had before branches).
- ``shared_graph_name(key)``: ``orbit_code_key_<readable part>_<8 hex>``, the same on every
  machine (a CI runner and an editor compute the same name from ``main``).
- ``git_head(folder)``: ``GitHead`` (the git dir holding HEAD, the common dir holding refs, the
  branch or None when detached) or None outside git; ``branch_exists`` and ``default_branch``
  read the refs (loose and packed).

Only files are read (``.git``, ``HEAD``, ``refs/…``, ``packed-refs``): no ``git`` process, so a
graph name costs a few ``stat`` calls and one small read.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

CODE_GRAPH_PREFIX = "orbit_code_"
SHARED_GRAPH_PREFIX = CODE_GRAPH_PREFIX + "key_"
DETACHED = "(detached)"  # the branch label of a detached HEAD
MAX_KEY = 200
_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


def _real(path: Path | str) -> str:
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def _hash16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def root_graph_name(workspace: Path | str) -> str:
    """``orbit_code_<id>`` derived from the real path of ``workspace`` alone: its graph outside
    git, and its identity wherever one id per folder is wanted (memories' projects)."""
    return CODE_GRAPH_PREFIX + _hash16(_real(workspace))


def check_key(key: str) -> str:
    """``key`` stripped, or ``ValueError`` naming what is wrong (empty, longer than ``MAX_KEY``
    characters, control characters)."""
    if not isinstance(key, str) or not key.strip():
        raise ValueError("a graph key must not be empty")
    key = key.strip()
    if len(key) > MAX_KEY:
        raise ValueError(f"a graph key has at most {MAX_KEY} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in key):
        raise ValueError("a graph key must not contain control characters")
    return key


def shared_graph_name(key: str) -> str:
    """The graph of explicit key ``key`` (see the module docstring). Raises ``ValueError`` for
    a bad key (``check_key``)."""
    key = check_key(key)
    slug = _SLUG.sub("-", key).strip("-")[:48] or "key"
    return f"{SHARED_GRAPH_PREFIX}{slug}_{hashlib.sha256(key.encode('utf-8')).hexdigest()[:8]}"


def branch_graph_name(workspace: Path | str, branch: str) -> str:
    """The graph of ``workspace`` on ``branch`` (``DETACHED`` for a detached HEAD)."""
    return CODE_GRAPH_PREFIX + _hash16(_real(workspace) + "\0branch\0" + branch)


@dataclass(frozen=True)
class GitHead:
    """What HEAD says for a work tree: ``git_dir`` (holds ``HEAD``; a linked worktree's own
    directory under ``.git/worktrees``), ``common_dir`` (holds ``refs`` and ``packed-refs``),
    ``branch`` (``refs/heads/`` stripped, slashes kept; None when detached) and ``commit``
    (the detached commit, else None)."""

    git_dir: Path
    common_dir: Path
    branch: str | None
    commit: str | None

    @property
    def head_file(self) -> Path:
        return self.git_dir / "HEAD"

    @property
    def label(self) -> str:
        """The branch, or ``DETACHED``."""
        return self.branch if self.branch is not None else DETACHED


def find_git_dir(folder: Path | str) -> Path | None:
    """The git dir of the work tree containing ``folder`` (``.git`` directory, or the target of
    a ``.git`` file's ``gitdir:`` line), None outside git."""
    d = Path(_real(folder))
    for cand in (d, *d.parents):
        dotgit = cand / ".git"
        try:
            if dotgit.is_dir():
                return dotgit if (dotgit / "HEAD").is_file() else None
            if dotgit.is_file():
                text = dotgit.read_text(encoding="utf-8", errors="replace").strip()
                if text.startswith("gitdir:"):
                    target = Path(text[len("gitdir:"):].strip())
                    target = target if target.is_absolute() else cand / target
                    return Path(_real(target)) if (target / "HEAD").is_file() else None
                return None
        except OSError:
            return None
    return None


def git_head(folder: Path | str) -> GitHead | None:
    """HEAD of the work tree containing ``folder`` (see ``GitHead``), None outside git or when
    HEAD cannot be read."""
    git_dir = find_git_dir(folder)
    if git_dir is None:
        return None
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8", errors="surrogateescape").strip()
    except OSError:
        return None
    common = git_dir
    try:
        rel = (git_dir / "commondir").read_text(encoding="utf-8").strip()
        common = Path(_real(rel if os.path.isabs(rel) else git_dir / rel))
    except OSError:
        pass
    if head.startswith("ref:"):
        ref = head[4:].strip()
        branch = ref[len("refs/heads/"):] if ref.startswith("refs/heads/") else ref
        return GitHead(git_dir, common, branch, None)
    return GitHead(git_dir, common, None, head or None)


def _ref_exists(common_dir: Path, ref: str) -> bool:
    if (common_dir / ref).is_file():
        return True
    try:
        with open(common_dir / "packed-refs", encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref:
                    return True
    except OSError:
        pass
    return False


def branch_exists(head: GitHead, branch: str) -> bool:
    """Whether the repository has local branch ``branch`` (a loose or packed ref). An unborn
    branch (HEAD names it, no commit yet) exists when HEAD of this work tree names it."""
    if branch == DETACHED:
        return True
    return head.branch == branch or _ref_exists(head.common_dir, "refs/heads/" + branch)


def default_branch(head: GitHead) -> str | None:
    """The remote's default branch as the clone recorded it (``refs/remotes/origin/HEAD`` ->
    ``main``), None when unknown."""
    try:
        text = (head.common_dir / "refs" / "remotes" / "origin" / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    prefix = "ref: refs/remotes/origin/"
    return text[len(prefix):] if text.startswith(prefix) else None


@dataclass(frozen=True)
class GraphKey:
    """How a workspace's graph is named: ``name`` (the graph), ``root`` (real path), ``branch``
    (a branch, ``DETACHED``, or None outside git and for explicit keys) and ``key`` (the
    explicit key, else None)."""

    name: str
    root: str
    branch: str | None
    key: str | None

    def to_dict(self) -> dict:
        return {"graph": self.name, "root": self.root, "branch": self.branch, "key": self.key}


def workspace_key(root: Path | str, key: str | None = None) -> GraphKey:
    """The graph of workspace ``root`` (see the module docstring). Raises ``ValueError`` for a
    bad explicit ``key``."""
    real = _real(root)
    if key is not None and key.strip():
        return GraphKey(shared_graph_name(key), real, None, check_key(key))
    head = git_head(real)
    if head is None:
        return GraphKey(root_graph_name(real), real, None, None)
    return GraphKey(branch_graph_name(real, head.label), real, head.label, None)


def graph_name(root: Path | str, key: str | None = None) -> str:
    """``workspace_key(root, key).name``."""
    return workspace_key(root, key).name
