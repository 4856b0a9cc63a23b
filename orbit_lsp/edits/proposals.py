"""Proposal store: every edit orbit proposes, with its diff and what became of it.

SQLite (stdlib) in ``<data_dir>/proposals.sqlite3``, one table ``proposals``:

- ``id`` (int), ``workspace`` (absolute root), ``path`` (workspace-relative posix), ``title``;
- ``diff``: unified diff of the proposed change (``a/<path>`` → ``b/<path>``), never applied by
  the store itself;
- ``base_version``: the editor's document version the edit was computed against (None when the
  document was not open), ``base_hash``: sha256 hex of the text it was computed against;
- ``status``: ``proposed`` → ``applied`` | ``rejected`` | ``stale`` (a final status never
  changes again), ``reason`` (why rejected/stale; the client's failure reason when it gave one);
- ``created``, ``updated``: UTC ISO-8601 timestamps.

Thread-safe (one connection per call). Raises ``sqlite3.Error`` on a broken database and
``ValueError`` for an unknown status or a change of a final status.
"""

from __future__ import annotations

import difflib
import hashlib
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

STATUSES = ("proposed", "applied", "rejected", "stale")
FILE_NAME = "proposals.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS proposals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace TEXT NOT NULL,
    path TEXT NOT NULL,
    title TEXT NOT NULL,
    diff TEXT NOT NULL,
    base_version INTEGER,
    base_hash TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('proposed', 'applied', 'rejected', 'stale')),
    reason TEXT,
    created TEXT NOT NULL,
    updated TEXT NOT NULL
)
"""


@dataclass
class Proposal:
    id: int
    workspace: str
    path: str
    title: str
    diff: str
    base_version: int | None
    base_hash: str
    status: str
    reason: str | None
    created: str
    updated: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def unified_diff(path: str, old: str, new: str) -> str:
    """Unified diff (3 lines of context) from ``old`` to ``new`` text of ``path``."""
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"a/{path}", f"b/{path}"))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class ProposalStore:
    """Proposals in the SQLite file ``path`` (created with its directory on first use)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as db, db:
            db.execute(_SCHEMA)

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> "ProposalStore":
        return cls(Path(data_dir) / FILE_NAME)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=10)
        db.row_factory = sqlite3.Row
        return db

    def create(self, workspace: str, path: str, title: str, old: str, new: str,
               base_version: int | None, status: str = "proposed", reason: str | None = None) -> Proposal:
        """Store a proposal to change ``path`` from text ``old`` to ``new``; returns it."""
        if status not in STATUSES:
            raise ValueError(f"unknown proposal status {status!r}")
        now = _now()
        with closing(self._connect()) as db, db:
            cur = db.execute(
                "INSERT INTO proposals (workspace, path, title, diff, base_version, base_hash, status, reason, "
                "created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (workspace, path, title, unified_diff(path, old, new), base_version, text_hash(old), status,
                 reason, now, now))
            pid = cur.lastrowid
        return self.get(pid)

    def get(self, pid: int) -> Proposal | None:
        with closing(self._connect()) as db:
            row = db.execute("SELECT * FROM proposals WHERE id = ?", (pid,)).fetchone()
        return Proposal(**dict(row)) if row else None

    def mark(self, pid: int, status: str, reason: str | None = None) -> Proposal:
        """Move proposal ``pid`` from ``proposed`` to a final ``status``. Raises ValueError for an
        unknown id or status, or when the proposal already has a final status."""
        if status not in STATUSES or status == "proposed":
            raise ValueError(f"a proposal can only be marked applied, rejected or stale, not {status!r}")
        with closing(self._connect()) as db, db:
            cur = db.execute("UPDATE proposals SET status = ?, reason = ?, updated = ? WHERE id = ? AND status = 'proposed'",
                             (status, reason, _now(), pid))
            if cur.rowcount != 1:
                old = db.execute("SELECT status FROM proposals WHERE id = ?", (pid,)).fetchone()
                raise ValueError(f"proposal {pid} " + (f"is already {old[0]}" if old else "does not exist"))
        return self.get(pid)

    def list(self, workspace: str | None = None, status: str | None = None) -> list[Proposal]:
        """Proposals, newest first, optionally of one workspace and/or status."""
        q, args = "SELECT * FROM proposals WHERE 1 = 1", []
        if workspace is not None:
            q += " AND workspace = ?"
            args.append(workspace)
        if status is not None:
            q += " AND status = ?"
            args.append(status)
        with closing(self._connect()) as db:
            return [Proposal(**dict(r)) for r in db.execute(q + " ORDER BY id DESC", args)]
