"""Where a change comes from: unified diffs (from git or given as text) and the two versions of
every changed file.

A ``Change`` is a list of ``FileDiff`` (one per changed file, with its hunks as line numbers)
plus a way to read each file's old and new bytes (``old_bytes`` / ``new_bytes``). Producers:

- ``from_git(root, mode, base)``: ``git diff`` of the working tree against ``HEAD``
  (``mode="worktree"``, untracked files count as added), of the index against ``HEAD``
  (``"staged"``), or of the working tree against the merge base of ``base`` and ``HEAD``
  (``"base"``: what a pull request changes);
- ``from_text(root, text)``: a unified diff given as text (stdin); the new version is the
  working tree, the old one is rebuilt from it by undoing the hunks;
- ``with_buffers(change, root, buffers)``: the same change with unsaved editor buffers as the
  new version of their files.

Paths are workspace-relative with ``/`` (``git diff --relative`` run in the workspace root).
Raises ``ChangeError`` (a message for the user) when git fails or the diff cannot be read.
"""

from __future__ import annotations

import difflib
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

GIT_TIMEOUT_S = 60


class ChangeError(Exception):
    """The change cannot be computed (not a git repository, unknown ref, unreadable diff)."""


class NotAGitWorkTree(ChangeError):
    """The workspace is not inside a git work tree: its change can only be given as a diff."""


@dataclass
class Hunk:
    """One hunk: ``old``/``new`` = (start, length) as in its header (1-based), ``removed``/
    ``added`` the old/new line numbers of its non-blank ``-``/``+`` lines, ``at`` the new line
    a pure deletion sits before (for context)."""

    old: tuple[int, int]
    new: tuple[int, int]
    removed: list[int] = field(default_factory=list)
    added: list[int] = field(default_factory=list)
    removed_text: list[str] = field(default_factory=list)  # every '-' line, in order (blank ones too)
    added_text: list[str] = field(default_factory=list)
    old_text: list[str] = field(default_factory=list)  # the old side in order: context and '-' lines


@dataclass
class FileDiff:
    """One file of a diff. ``old_path`` is None for an added file, ``new_path`` None for a
    removed one; both set and different for a rename."""

    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)
    binary: bool = False

    @property
    def status(self) -> str:
        """added | removed | renamed | modified"""
        if self.old_path is None:
            return "added"
        if self.new_path is None:
            return "removed"
        return "renamed" if self.old_path != self.new_path else "modified"

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""


@dataclass
class Change:
    """A set of file diffs and the readers of both versions. ``old_bytes(path)`` /
    ``new_bytes(path)`` return None when that version does not exist or cannot be read.
    ``description`` says what is compared (``"working tree vs HEAD"``)."""

    files: list[FileDiff]
    old_bytes: Callable[[str], bytes | None]
    new_bytes: Callable[[str], bytes | None]
    mode: str
    description: str
    base: str | None = None  # the commit the old version is read from (None: rebuilt from the diff)
    notes: list[str] = field(default_factory=list)


# -- parsing ------------------------------------------------------------------------------------
def _strip(path: str | None) -> str | None:
    if path is None or path == "/dev/null":
        return None
    return path[2:] if path.startswith(("a/", "b/")) else path


def parse_diff(text: str) -> list[FileDiff]:
    """The files and hunks of a unified diff (git's format, renames included). Raises
    ``ChangeError`` on text that is not a unified diff."""
    # imported here: the server registers orbit/changes at start-up, and an environment made
    # before this dependency was added still starts (only this request then fails)
    from unidiff import PatchSet
    from unidiff.errors import UnidiffParseError

    try:
        patch = PatchSet(text)
    except UnidiffParseError as exc:
        raise ChangeError(f"cannot read the diff: {exc}") from None
    out = []
    for pf in patch:
        old = None if pf.is_added_file else _strip(pf.source_file)
        new = None if pf.is_removed_file else _strip(pf.target_file)
        fd = FileDiff(old, new, binary=not len(pf) and "Binary files" in str(pf.patch_info or ""))
        for h in pf:
            hk = Hunk((h.source_start, h.source_length), (h.target_start, h.target_length))
            for line in h:
                if line.line_type in ("-", " "):
                    hk.old_text.append(line.value)
                if line.line_type == "-":
                    hk.removed_text.append(line.value)
                    if line.value.strip():
                        hk.removed.append(line.source_line_no)
                elif line.line_type == "+":
                    hk.added_text.append(line.value)
                    if line.value.strip():
                        hk.added.append(line.target_line_no)
            fd.hunks.append(hk)
        out.append(fd)
    return out


def diff_texts(old_path: str | None, new_path: str | None, old: bytes | None, new: bytes | None) -> FileDiff:
    """The ``FileDiff`` between two versions of a file (difflib, no context), as git would
    report it; None bytes stand for a missing version."""
    a = _lines(old) if old is not None else []
    b = _lines(new) if new is not None else []
    fd = FileDiff(old_path if old is not None else None, new_path if new is not None else None)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        hk = Hunk((i1 + 1 if i2 > i1 else i1, i2 - i1), (j1 + 1 if j2 > j1 else j1, j2 - j1))
        hk.removed_text, hk.added_text = a[i1:i2], b[j1:j2]
        hk.old_text = list(hk.removed_text)
        hk.removed = [i1 + 1 + k for k, t in enumerate(hk.removed_text) if t.strip()]
        hk.added = [j1 + 1 + k for k, t in enumerate(hk.added_text) if t.strip()]
        fd.hunks.append(hk)
    return fd


def _lines(data: bytes) -> list[str]:
    return data.decode("utf-8", "replace").splitlines(keepends=True)


def undo_hunks(new: bytes, hunks: list[Hunk]) -> bytes:
    """The old version of a file from its new version and the hunks between them."""
    lines = _lines(new)
    for hk in sorted(hunks, key=lambda h: h.new[0], reverse=True):
        start, length = hk.new
        first = start - 1 if length else start  # a pure deletion sits after line `start`
        lines[first:first + length] = [t if t.endswith("\n") else t + "\n" for t in hk.old_text]
    return "".join(lines).encode()


# -- git ----------------------------------------------------------------------------------------
def git(root: Path, *args: str, check: bool = True, binary: bool = False):
    """Run git in ``root``; stdout as text (bytes with ``binary``). Raises ``ChangeError``."""
    try:
        res = subprocess.run(["git", "-c", "core.quotepath=off", *args], cwd=root, capture_output=True,
                             timeout=GIT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise ChangeError("git is not installed (needed to read the change)") from None
    except subprocess.TimeoutExpired:
        raise ChangeError(f"git {args[0]} took more than {GIT_TIMEOUT_S} s") from None
    if check and res.returncode != 0:
        msg = res.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ChangeError(f"git {args[0]} failed: {msg[-1] if msg else 'exit ' + str(res.returncode)}")
    return res.stdout if binary else res.stdout.decode("utf-8", "replace")


DIFF_ARGS = ("diff", "--no-color", "--no-ext-diff", "-M", "-U0", "--relative")


def _show(root: Path, spec: str) -> Callable[[str], bytes | None]:
    """Reader of a path at a git revision (``HEAD``, a commit id, or ``""`` for the index)."""
    def read(path: str) -> bytes | None:
        res = subprocess.run(["git", "show", f"{spec}:./{path}"], cwd=root, capture_output=True,
                             timeout=GIT_TIMEOUT_S, stdin=subprocess.DEVNULL)
        return res.stdout if res.returncode == 0 else None
    return read


def _disk(root: Path) -> Callable[[str], bytes | None]:
    def read(path: str) -> bytes | None:
        try:
            return (root / path).read_bytes()
        except OSError:
            return None
    return read


def from_git(root: Path | str, mode: str = "worktree", base: str | None = None) -> Change:
    """The change of the workspace ``root`` by git: ``mode`` worktree (working tree and index vs
    HEAD, untracked files as added), staged (index vs HEAD) or base (working tree vs the merge
    base of ``base`` and HEAD). Raises ``ChangeError``."""
    root = Path(root)
    if git(root, "rev-parse", "--is-inside-work-tree", check=False).strip() != "true":
        raise NotAGitWorkTree(f"{root} is not inside a git work tree")
    has_head = bool(git(root, "rev-parse", "--verify", "--quiet", "HEAD", check=False).strip())
    empty_tree = git(root, "hash-object", "-t", "tree", "/dev/null").strip()
    notes: list[str] = []
    if mode == "staged":
        old_rev = "HEAD" if has_head else empty_tree
        text = git(root, *DIFF_ARGS, "--cached", old_rev)
        new_bytes = _show(root, "")
        desc = "staged changes vs HEAD"
    elif mode == "base":
        if not base:
            raise ChangeError("--base needs a ref")
        if not git(root, "rev-parse", "--verify", "--quiet", base + "^{commit}", check=False).strip():
            raise ChangeError(f"unknown ref '{base}'")
        old_rev = git(root, "merge-base", base, "HEAD", check=False).strip() or base
        text = git(root, *DIFF_ARGS, old_rev)
        new_bytes = _disk(root)
        desc = f"working tree vs merge base of {base} and HEAD ({old_rev[:12]})"
    elif mode == "worktree":
        old_rev = "HEAD" if has_head else empty_tree
        text = git(root, *DIFF_ARGS, old_rev)
        new_bytes = _disk(root)
        desc = "working tree vs HEAD"
    else:
        raise ChangeError(f"unknown change mode '{mode}'")
    files = parse_diff(text)
    if mode == "worktree":  # untracked files are added files
        listed = {f.path for f in files}
        for rel in git(root, "ls-files", "--others", "--exclude-standard", "-z").split("\0"):
            if rel and rel not in listed and (root / rel).is_file():
                files.append(diff_texts(None, rel, None, new_bytes(rel)))
    old_bytes = _show(root, old_rev) if has_head or mode == "base" else (lambda p: None)
    return Change(files, old_bytes, new_bytes, mode, desc, base=old_rev if has_head else None, notes=notes)


def from_text(root: Path | str, text: str) -> Change:
    """The change a unified diff describes, its new version being the working tree of ``root``.
    Raises ``ChangeError``."""
    root = Path(root)
    files = parse_diff(text)
    if not files and text.strip():
        raise ChangeError("the input is not a unified diff (no file header found)")
    disk = _disk(root)
    by_old = {f.old_path: f for f in files if f.old_path}

    def old_bytes(path: str) -> bytes | None:
        fd = by_old.get(path)
        if fd is None:
            return None
        if fd.new_path is None:
            return "".join(t if t.endswith("\n") else t + "\n" for h in fd.hunks for t in h.old_text).encode()
        new = disk(fd.new_path)
        return undo_hunks(new, fd.hunks) if new is not None else None

    return Change(files, old_bytes, disk, "diff", "the given diff, applied to the working tree")


def with_buffers(change: Change, buffers: dict[str, bytes]) -> Change:
    """``change`` with unsaved editor buffers (workspace-relative path -> bytes) as the new
    version of their files: each buffered file is diffed again against its old version."""
    if not buffers:
        return change
    files = {f.path: f for f in change.files}
    renamed_from = {f.new_path: f.old_path for f in change.files if f.new_path}
    for rel, data in sorted(buffers.items()):
        old_path = renamed_from.get(rel, rel) if rel in files else rel
        old = change.old_bytes(old_path) if old_path else None
        fd = diff_texts(old_path, rel, old, data)
        if fd.hunks or fd.status != "modified":
            files[rel] = fd
        else:
            files.pop(rel, None)
    base_new = change.new_bytes

    def new_bytes(path: str) -> bytes | None:
        return buffers[path] if path in buffers else base_new(path)

    out = Change(list(files.values()), change.old_bytes, new_bytes, change.mode,
                 change.description + f", with {len(buffers)} unsaved buffer(s)", change.base, list(change.notes))
    return out


def rel_posix(path: str) -> str:
    return path.replace(os.sep, "/")
