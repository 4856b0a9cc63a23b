"""Test-file scans kept between processes: ``ScanStore``, one SQLite file in the data folder's
``cache`` (``<data_dir>/cache/test-scans.sqlite``), shared by every workspace and process.

A tests lens, ``orbit-lsp changes`` and the MCP server's test selection read every test file of
the workspace: a pattern scan of its bytes (``selection.FileMarks``) and, for test modules
and ``conftest.py`` files that may matter, an ``ast`` scan (``selection.scan_python``). In one
process they are kept by content (``selection.SCANS``/``MARKS``); this store keeps them for the
next process too, so the first answer of a new server, worker or command reads the test files
but parses and scans only those whose content it has not seen (on the 5,001 test files of the
scale corpus, the first tests lenses of a process: 12.9 s without the store, 4.3 s with it).

A row is keyed by what the scan depends on: its kind (``marks``, ``scan``), the file's
workspace-relative path (test ids carry it), the 16-byte digest of the file's bytes
(``fingerprint.content_digest``) and the digest of the scanning code (``selection.py``, this
module, the Python version): a new version of orbit never reads another version's rows, and
deletes them when it opens the store. Values are pickles read back through an unpickler that
builds only the scan classes and sets (``_ScanUnpickler``), then checked field by field
(``_loads``): a row that holds anything else is dropped and the file scanned again.

The store is a cache: a store that cannot be opened, is locked past ``BUSY_TIMEOUT_S``, or is
not a database is left alone for the rest of the process (answers are computed as without
it); one that is not a database is replaced once. Rows are written in batches
(``FLUSH_ROWS``, and at ``flush``); at most ``MAX_ROWS`` are kept (the oldest written go first).
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import hashlib
import io
import logging
import pickle
import sqlite3
import sys
import threading
import time
from pathlib import Path

from orbit_lsp.changes import selection
from orbit_lsp.changes.selection import FileMarks, Fixture, PyTestFile, TestItem
from orbit_lsp.index import py_fixtures

log = logging.getLogger(__name__)

STORE_FILE = "test-scans.sqlite"
BUSY_TIMEOUT_S = 2.0  # another process writing: wait this long, then do without the store
FLUSH_ROWS = 256  # rows written at once
MAX_ROWS = 100_000  # rows kept (0.4-3 KB each: at most ~150 MB); past it the oldest written go
PRUNE_TO = 75_000  # rows left after pruning


def _code_digest() -> str:
    """Digest of the code that makes the stored values: ``selection.py``, the test-file rules it
    applies (``index/py_fixtures.py``), this module, and the Python version (its ``ast``)."""
    h = hashlib.blake2b(digest_size=8)
    h.update(sys.version.encode())
    for module in (selection.__file__, py_fixtures.__file__, __file__):
        try:
            h.update(Path(module).read_bytes())
        except OSError:  # (a frozen build without sources: the package's version decides)
            from orbit_lsp import __version__

            h.update(__version__.encode())
    return h.hexdigest()


class _ScanUnpickler(pickle.Unpickler):
    """Builds the scan dataclasses, frozensets and sets, nothing else (a row another program
    wrote into the file cannot run code)."""

    ALLOWED = {(c.__module__, c.__qualname__): c for c in (FileMarks, PyTestFile, TestItem, Fixture, frozenset, set)}

    def find_class(self, module: str, name: str):
        cls = self.ALLOWED.get((module, name))
        if cls is not None:
            return cls
        raise pickle.UnpicklingError(f"a test scan may not hold {module}.{name}")


def _loads(kind: str, path: str, blob: bytes):
    """The value of a row, checked to be what ``kind`` makes for ``path`` (its classes, its
    fields and their types); raises ``pickle.UnpicklingError`` otherwise."""
    value = _ScanUnpickler(io.BytesIO(blob)).load()
    if not (_marks_ok(value) if kind == "marks" else _scan_ok(value, path)):
        raise pickle.UnpicklingError(f"a stored {kind} is not one {kind} makes")
    return value


def _names(value) -> bool:
    return type(value) is frozenset and all(type(n) is str for n in value)


def _optional_str(value) -> bool:
    return value is None or type(value) is str


def _attr_calls_ok(value) -> bool:
    return type(value) is dict and all(type(k) is str and _names(v) for k, v in value.items())


@functools.cache
def _field_names(cls) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def _fields_ok(obj, cls) -> bool:
    """``obj`` is exactly a ``cls`` with its dataclass fields and nothing else."""
    return type(obj) is cls and vars(obj).keys() == _field_names(cls)


def _marks_ok(m) -> bool:
    return _fields_ok(m, FileMarks) and _names(m.methods) and _names(m.receivers) and type(m.fixtures) is bool


def _scan_ok(tf, path: str) -> bool:
    if not (_fields_ok(tf, PyTestFile) and tf.path == path and type(tf.items) is list
            and type(tf.fixtures) is list and type(tf.class_setup) is list and type(tf.module_setup) is set):
        return False
    if not all(type(q) is str for q in tf.module_setup):
        return False
    if not all(type(c) is tuple and len(c) == 2 and all(type(x) is str for x in c) for c in tf.class_setup):
        return False
    for it in tf.items:
        if not (_fields_ok(it, TestItem) and type(it.id) is str and it.file == path and type(it.qual) is str
                and _optional_str(it.cls) and type(it.line) is int and _names(it.uses)
                and _attr_calls_ok(it.attr_calls)):
            return False
    for fx in tf.fixtures:
        if not (_fields_ok(fx, Fixture) and type(fx.name) is str and fx.file == path and type(fx.qual) is str
                and _optional_str(fx.cls) and _names(fx.uses) and type(fx.autouse) is bool
                and _optional_str(fx.returns) and _attr_calls_ok(fx.attr_calls)):
            return False
    return True


class ScanStore:
    """The rows of ``path`` (see the module's docstring). Thread-safe; every method returns
    or does nothing when the store is unusable."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.version = _code_digest()
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._failed = False
        self._pending: list[tuple[str, str, bytes, str, bytes]] = []
        self.hits = self.misses = self.written = 0  # rows found, not found, written by this process

    # -- connection ---------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection | None:
        if self._db is not None or self._failed:
            return self._db
        try:
            self._db = self._open_when_free()
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc) or "malformed" in str(exc):
                log.warning("%s is not a usable database (%s): made anew", self.path, exc)
                try:
                    for stale in (self.path, *(self.path.with_name(self.path.name + x) for x in ("-wal", "-shm"))):
                        stale.unlink(missing_ok=True)
                    self._db = self._open_when_free()
                except (sqlite3.Error, OSError) as again:
                    self._give_up(again)
            else:
                self._give_up(exc)
        except OSError as exc:
            self._give_up(exc)
        return self._db

    def _open_when_free(self) -> sqlite3.Connection:
        """``_open``, tried again for up to ``BUSY_TIMEOUT_S`` while another process holds the
        file's lock (switching a new file to WAL fails at once, without SQLite's busy wait,
        when another process is making it too)."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                return self._open()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode = WAL")  # readers never wait for a writer
            db.execute("PRAGMA synchronous = NORMAL")  # a cache: a lost last batch is scanned again
            # a rowid table: a row replaced gets a new rowid, so rowids follow the writes (``_prune``)
            db.execute("CREATE TABLE IF NOT EXISTS scans (kind TEXT, path TEXT, digest BLOB, version TEXT, "
                       "value BLOB, UNIQUE (kind, path, digest, version))")
            db.execute("DELETE FROM scans WHERE version != ?", (self.version,))
        except BaseException:
            db.close()
            raise
        return db

    def _give_up(self, exc: BaseException) -> None:
        log.info("test scans are not kept between processes (%s: %s)", self.path, exc)
        self._failed = True
        self._pending.clear()
        self._disconnect()

    def _disconnect(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
            self._db = None

    # -- rows ---------------------------------------------------------------------------------
    def get(self, kind: str, path: str, digest: bytes):
        """The value stored for a file of content ``digest`` at ``path``, or None."""
        with self._lock:
            db = self._connect()
            if db is None:
                return None
            try:
                row = db.execute("SELECT value FROM scans WHERE kind = ? AND path = ? AND digest = ? AND version = ?",
                                 (kind, path, digest, self.version)).fetchone()
            except sqlite3.Error as exc:
                self._give_up(exc)
                return None
        if row is None:
            self.misses += 1
            return None
        try:
            value = _loads(kind, path, row[0])
        except Exception as exc:  # noqa: BLE001 - a row that is not ours: scanned again
            log.warning("a stored test scan of %s was refused (%s): scanned again", path, exc)
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, kind: str, path: str, digest: bytes, value) -> None:
        """Keep ``value`` for ``path`` at ``digest`` (written with the next batch)."""
        blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            if self._failed:
                return
            self._pending.append((kind, path, digest, self.version, blob))
            if len(self._pending) >= FLUSH_ROWS:
                self._flush_locked()

    def flush(self) -> None:
        """Write the rows kept since the last write."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if not self._pending:
            return
        db = self._connect()
        if db is None:
            return
        rows, self._pending = self._pending, []
        try:
            with db:  # one transaction
                db.execute("BEGIN IMMEDIATE")
                db.executemany("INSERT OR REPLACE INTO scans VALUES (?, ?, ?, ?, ?)", rows)
            self.written += len(rows)
            self._prune(db)
        except sqlite3.Error as exc:
            self._give_up(exc)

    def _prune(self, db: sqlite3.Connection) -> None:
        """At most ``MAX_ROWS`` rows: past it, the rows written longest ago go, down to
        ``PRUNE_TO`` (rare: a workspace's test files are a few thousand rows of each kind)."""
        n = db.execute("SELECT count(*) FROM scans").fetchone()[0]
        if n <= MAX_ROWS:
            return
        with db:
            db.execute("BEGIN IMMEDIATE")
            db.execute("DELETE FROM scans WHERE rowid IN (SELECT rowid FROM scans ORDER BY rowid LIMIT ?)",
                       (n - PRUNE_TO,))

    def clear(self) -> None:
        """Delete every row (and forget those not written yet)."""
        with self._lock:
            self._pending.clear()
            db = self._connect()
            if db is None:
                return
            try:
                with db:
                    db.execute("BEGIN IMMEDIATE")
                    db.execute("DELETE FROM scans")
            except sqlite3.Error as exc:
                self._give_up(exc)

    def rows(self) -> int:
        """How many rows of this version of the scanning code the store holds (0 when unusable)."""
        with self._lock:
            db = self._connect()
            if db is None:
                return 0
            try:
                return db.execute("SELECT count(*) FROM scans WHERE version = ?", (self.version,)).fetchone()[0]
            except sqlite3.Error as exc:
                self._give_up(exc)
                return 0

    def close(self) -> None:
        """Write what is pending and close the connection. A store this process never opened
        is not opened now (its data dir may be gone: a process's exit closes every store): what
        is pending then is dropped."""
        with self._lock:
            if self._db is not None:
                self._flush_locked()
            self._pending.clear()
            self._disconnect()


_STORES: dict[Path, ScanStore] = {}
_STORES_LOCK = threading.Lock()


def store_for(data_dir: Path | str | None) -> ScanStore | None:
    """The process's ``ScanStore`` of data folder ``data_dir`` (None: no store). Its pending
    rows are written when the process exits normally (if it was opened before)."""
    if data_dir is None:
        return None
    path = Path(data_dir).expanduser() / "cache" / STORE_FILE
    with _STORES_LOCK:
        store = _STORES.get(path)
        if store is None:
            store = _STORES[path] = ScanStore(path)
            if len(_STORES) == 1:
                atexit.register(_close_all)
    return store


def store_of_graph(graph) -> ScanStore | None:
    """``store_for`` the data folder of ``graph``'s store settings (None when it has none)."""
    settings = getattr(getattr(graph, "store", None), "settings", None)
    return store_for(getattr(settings, "data_dir", None))


def _close_all() -> None:
    with _STORES_LOCK:
        stores = list(_STORES.values())
    for store in stores:
        store.close()
