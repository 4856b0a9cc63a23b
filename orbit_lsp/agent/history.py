"""SQLite history (stdlib ``sqlite3``): conversations, turns, read consents and an audit log.

One file, ``<data dir>/history.sqlite3`` (``History.default_path``), shared by every orbit process
of the user (WAL mode, a short busy timeout). Tables:

- ``conversations(id, workspace, created)``;
- ``turns(id, conversation_id, created, question, answer, model, steps_json, error)``;
- ``consents(workspace, path, decision, created)``: "always for this workspace" read consents
  (``path`` ``"*"`` = every file of the workspace);
- ``audit(id, created, kind, conversation_id, details_json)``: one row per model call, graph
  query, file read, consent decision (and, for other features, per edit decision).

Nothing secret is stored: the audit keeps tool names, arguments, Cypher text, row counts, model
names and file paths, never file contents or API keys. Times are Unix seconds (float).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

FILE_NAME = "history.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, workspace TEXT, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS turns (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    created REAL NOT NULL, question TEXT NOT NULL, answer TEXT, model TEXT,
    steps_json TEXT, error TEXT);
CREATE TABLE IF NOT EXISTS consents (
    workspace TEXT NOT NULL, path TEXT NOT NULL, decision TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (workspace, path));
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL NOT NULL, kind TEXT NOT NULL,
    conversation_id INTEGER, details_json TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS audit_kind ON audit(kind, created);
"""


class History:
    """The history database. Thread-safe (one connection guarded by a lock).

    ``History(path)`` opens (and creates) the file; ``History.open(data_dir)`` uses the default
    name under a data dir. Raises ``sqlite3.Error`` when the file cannot be opened.
    """

    def __init__(self, path: Path | str):
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=5.0, isolation_level=None)
        with self._lock:
            if str(path) != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)

    @classmethod
    def open(cls, data_dir: Path | str) -> "History":
        return cls(Path(data_dir) / FILE_NAME)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _exec(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._db.execute(sql, args)

    # -- conversations ----------------------------------------------------------------------
    def start_conversation(self, workspace: str | None) -> int:
        """A new conversation; returns its id."""
        return self._exec("INSERT INTO conversations(workspace, created) VALUES (?, ?)",
                          (workspace, time.time())).lastrowid

    def has_conversation(self, conversation_id: int) -> bool:
        return self._exec("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone() is not None

    def add_turn(self, conversation_id: int, question: str, answer: str | None, model: str | None,
                 steps: list[dict] | None = None, error: str | None = None) -> int:
        """Record one question and its outcome; returns the turn id."""
        return self._exec(
            "INSERT INTO turns(conversation_id, created, question, answer, model, steps_json, error) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (conversation_id, time.time(), question, answer, model,
             json.dumps(steps or [], default=str), error)).lastrowid

    def turns(self, conversation_id: int) -> list[dict]:
        """Turns of a conversation, oldest first: [{"id", "question", "answer", "model", "steps",
        "error", "created"}]."""
        rows = self._exec("SELECT id, question, answer, model, steps_json, error, created FROM turns "
                          "WHERE conversation_id = ? ORDER BY id", (conversation_id,)).fetchall()
        return [{"id": r[0], "question": r[1], "answer": r[2], "model": r[3],
                 "steps": json.loads(r[4] or "[]"), "error": r[5], "created": r[6]} for r in rows]

    # -- consents ----------------------------------------------------------------------------
    def remember_consent(self, workspace: str, path: str = "*", decision: str = "always") -> None:
        self._exec("INSERT OR REPLACE INTO consents(workspace, path, decision, created) VALUES (?, ?, ?, ?)",
                   (workspace, path, decision, time.time()))

    def has_consent(self, workspace: str, path: str) -> bool:
        """True when reading ``path`` of ``workspace`` was allowed "always for this workspace"."""
        row = self._exec("SELECT 1 FROM consents WHERE workspace = ? AND path IN (?, '*') AND decision = 'always'",
                         (workspace, path)).fetchone()
        return row is not None

    # -- audit -------------------------------------------------------------------------------
    def audit(self, kind: str, conversation_id: int | None = None, **details: Any) -> int:
        """Append one audit record: ``kind`` (e.g. ``"model_call"``, ``"query"``, ``"file_read"``,
        ``"consent"``, ``"edit_decision"``) and JSON-serialisable ``details``. Returns its id.
        Callers pass names, paths, Cypher and counts — never contents or secrets."""
        return self._exec("INSERT INTO audit(created, kind, conversation_id, details_json) VALUES (?, ?, ?, ?)",
                          (time.time(), kind, conversation_id, json.dumps(details, default=str))).lastrowid

    def audit_log(self, kind: str | None = None, conversation_id: int | None = None,
                  limit: int = 1000) -> list[dict]:
        """Audit records, oldest first: [{"id", "created", "kind", "conversation_id", **details}]."""
        sql, args = "SELECT id, created, kind, conversation_id, details_json FROM audit WHERE 1=1", []
        if kind is not None:
            sql += " AND kind = ?"
            args.append(kind)
        if conversation_id is not None:
            sql += " AND conversation_id = ?"
            args.append(conversation_id)
        sql += " ORDER BY id DESC LIMIT ?"
        args.append(limit)
        rows = self._exec(sql, tuple(args)).fetchall()
        return [{"id": r[0], "created": r[1], "kind": r[2], "conversation_id": r[3], **json.loads(r[4])}
                for r in reversed(rows)]
