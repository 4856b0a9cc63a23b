"""Whether a query's answer may be stale: the files it names, compared with the graph.

A query never re-indexes a workspace that has a graph (a query must start fast; ``orbit-lsp
index`` brings it up to date). So that an answer is never silently old, the files the answer
names (the symbol's, its callers', the dependents…) are read and hashed again and compared
with ``File.hash`` in the graph: one query and a few file reads, no walk of the workspace.
Files the answer does not name (a new caller in a file edited since) are not checked.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from orbit_lsp.index.fingerprint import content_hash

MOST_CHECKED = 2000  # files of one answer compared at most (the first, in path order)

# Content hashes of files by identity, for a long-lived process that answers many queries (the
# query helper, ``orbit_lsp.query_helper.server``, sets it; None everywhere else: every file is
# read and hashed). Key: (absolute path, st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns);
# any write to a file changes its ctime, which no program can set back, so an equal key means
# equal content. Files changed less than ``RECENT_NS`` before they were hashed are never
# recorded (a write within the clock's granularity could leave the key unchanged).
HASH_CACHE: dict | None = None
NEW_HASHES: list = []  # (key, hash) computed by this process while HASH_CACHE is set
RECENT_NS = 2_000_000_000


def _file_hash(path: Path) -> str:
    """``content_hash`` of the file at ``path`` (``HASH_CACHE`` when it knows the file as it is
    now). Raises ``OSError``."""
    if HASH_CACHE is None:
        with open(path, "rb") as fh:
            return content_hash(fh.read())
    st = os.stat(path)
    key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    known = HASH_CACHE.get(key)
    if known is not None:
        return known
    with open(path, "rb") as fh:
        digest = content_hash(fh.read())
    if max(st.st_mtime_ns, st.st_ctime_ns) < time.time_ns() - RECENT_NS:
        NEW_HASHES.append((key, digest))
    return digest

QUERY = "UNWIND $paths AS p MATCH (f:File {path: p}) RETURN f.path, f.hash"


def changed_files(graph, root: Path, paths, cypher: list[dict] | None = None) -> tuple[list[str], int]:
    """(workspace-relative paths among ``paths`` whose content on disk differs from the graph's
    hash of it or that are gone from disk, how many were checked). The statement run is
    appended to ``cypher`` (the command prints every statement it ran). Raises what the
    graph's queries raise (``FalkorDBOffline``, ``QueryTimeout``)."""
    wanted = sorted({p for p in paths if p})[:MOST_CHECKED]
    if not wanted:
        return [], 0
    params = {"paths": wanted}
    rows = graph.ro_query(QUERY, params).rows
    if cypher is not None:
        cypher.append({"query": QUERY, "params": params})
    changed = []
    for path, stored in rows:
        try:
            digest = _file_hash(root / path)
        except OSError:  # deleted or unreadable since it was indexed
            changed.append(path)
            continue
        if digest != stored:
            changed.append(path)
    return sorted(changed), len(wanted)


def stale_note(changed: list[str], checked: int, total: int) -> str | None:
    """The note a command prints when files of its answer changed (None when none did)."""
    if not changed:
        return None
    n = len(changed)
    shown = ", ".join(changed[:5]) + (f", … ({n - 5} more)" if n > 5 else "")
    of = f" (the first {checked} of {total} checked)" if checked < total else ""
    return (f"the graph may be stale: {n} file{'s' if n != 1 else ''} of this answer changed on disk "
            f"since {'they were' if n != 1 else 'it was'} indexed ({shown}){of}; "
            f"run 'orbit-lsp index' to update it")
