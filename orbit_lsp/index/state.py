"""What the indexer keeps per file: ``FileState`` (hash, pickled facts, resolved edges), the
``LazyFacts`` view a resolver consults, and ``StateCache``, the SQLite file
``<data_dir>/cache/<graph>.sqlite`` that keeps the states between runs (structure only, never
file contents).
"""

from __future__ import annotations

import os
import pickle
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from orbit_lsp.graph.embedded import pid_alive
from orbit_lsp.index.py_facts import PyFacts, compact_pickle
from orbit_lsp.index.parsing import gc_paused, has_class_bases, pickle_facts, unpickle_facts
from orbit_lsp.index.py_edges import FileEdges
from orbit_lsp.lru import LRU

CACHE_VERSION = 31  # 31: a star import binds what the module exports (PyFacts.star_names, its __all__), the last one wins; 30: facts streams are zstd frames, not zlib (parsing.pickle_facts); 29: FileState.seen_stat (an unchanged file is not read again: stat_signature); 28: Python facts blobs are three zlib streams (symbols, the rest, call sites: parsing.FACTS_PARTS); 27: FileState.class_bases (the subclass relation skips files without a class base); 26: graphs keep per-name counts of unbound calls (UnboundName nodes); 25: a parameter annotated with a workspace class takes its declared type over unknown values passed in (py_flow._declared_precedence); 24: facts pickles are zlib-compressed (parsing.pickle_facts); 23: CallEdge sites are tuples (FileEdges.sort_sites); 22: the Python facts classes live in py_facts (their pickled module path); 21: FileEdges and CallEdge live in py_edges (their pickled module path); 20: Python facts and FileState carry the directories a file adds to sys.path; 19: Python scopes know the pytest fixture they define (Scope.fixture); 18: library containers made empty (`OrderedDict()`, `defaultdict(list)`) are container values (ref "lc"); 17: parameter-value entities name the parameter (PVAL, file, qual, name); 16: Python attribute reads are sites (property getters); 15: a Python container literal is identified by its scope and ordinal, not its line; 14: calls on what library code returns are counted as unbound (Python); 13: Python attributes set only in subclasses are read in the base (edges change); 12: TS grammar gaps mended (js_parse), FileEdges.type_only; 11: JS/TS facts carry types (js_types: results, fields, supers, type scopes); 10: value flow (parameters, containers, lambdas as symbols, FileEdges.flows); 6: JS/TS files have facts; 7: facts kept pickled (FileState.facts_blob); 8: lambda and comprehension scopes; 9: FileState.nonascii_lines, `from pkg import name` unbound in pkg is unresolved

STAGE_BATCH = 256  # states pickled and written at once by ``StateCache.stage``
FACTS = LRU(256)  # pickled facts -> the decoded objects, most recently used (bytes cache their hash)


class DecodeCount:
    """How many facts pickles were decoded through the cache of decoded facts (``load_facts``:
    what resolution decodes; a full build's Symbol rows decode each file once more, uncounted):
    by this process (``here``), and by the forked children that reported theirs (``children``,
    ``py_parallel``). Decoding is about a third of a large workspace's resolution, and unlike
    seconds the count does not move with the machine's load: ``IndexReport.facts_decoded``,
    the scale benchmark's work measure."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.here = 0
        self.children = 0
        # a fork while another thread holds the lock would leave it held in the child forever
        os.register_at_fork(after_in_child=self._new_lock)

    def _new_lock(self) -> None:
        self._lock = threading.Lock()

    def add(self, n: int = 1, children: bool = False) -> None:
        with self._lock:
            if children:
                self.children += n
            else:
                self.here += n

    @property
    def total(self) -> int:
        return self.here + self.children


DECODES = DecodeCount()


def load_facts(blob: bytes) -> PyFacts:
    """The facts pickled in ``blob``, decoded once while they stay among the recently used.
    A ``PyFacts``' call sites are decoded only when asked for (``PyFacts.with_calls``)."""
    found, facts = FACTS.lookup(blob)
    if not found:
        facts = unpickle_facts(blob, calls=False)  # only resolving the file itself reads its calls
        DECODES.add()
        FACTS.put(blob, facts)
    return facts


SETTLED_NS = 2_000_000_000  # a file last changed this long before a walk began (ns) is settled:
#   a later write changes its signature even on file systems with 2-second timestamps (FAT)


def stat_signature(st: os.stat_result, now_ns: int) -> tuple[int, int, int, int] | None:
    """``(size, mtime ns, ctime ns, inode)`` of a file's ``os.stat``: while a file keeps it, its
    content is taken as unchanged without reading it (as git's index does). On POSIX any write
    changes the ctime, even one that restores the mtime (on Windows ``st_ctime`` is the creation
    time: there, as for git, size and mtime decide). None when the file changed less than
    ``SETTLED_NS`` before ``now_ns`` (taken before the stat): another write within the same
    timestamp tick could leave the signature as it is, so such a file is read again next time."""
    if max(st.st_mtime_ns, st.st_ctime_ns) > now_ns - SETTLED_NS:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


@compact_pickle
@dataclass(slots=True)
class FileState:
    """What the indexer knows of one file. ``facts`` is the last good parse (None for
    non-Python files or a file that never parsed), kept pickled and compressed (``facts_blob``,
    ``parsing.pickle_facts``: about a fiftieth of the memory of the objects) and decoded on use through the ``FACTS`` cache;
    ``symbols`` is how many symbols it has. ``edges`` is the file's last resolution."""

    rel: str
    lang: str
    hash: str
    lines: int
    facts_blob: bytes | None = None
    edges: FileEdges | None = None
    parse_error: str | None = None
    seen_hash: str = ""  # hash of the content last read from disk (differs from ``hash`` while
    #                      a broken file keeps its last good graph)
    symbols: int = 0
    nonascii_lines: frozenset[int] | None = None  # 1-based lines of the indexed content
    #   (``hash``) with non-ASCII characters; on any other line a graph column (UTF-8 bytes) is
    #   the LSP character in every position encoding. None: not known.
    pvals: dict | None = None  # qual of a function of this file -> (values of its parameters or
    #   None, entities consulted): what the workspace's call sites pass it (``resolve.Resolver.pval``)
    sys_path: tuple = ()  # directories its facts add to ``sys.path`` (``PyFacts.sys_path``): kept
    #   here so the module table (``indexer._module_table``) is read without decoding facts
    class_bases: bool | None = None  # whether a class of its facts has a base
    #   (``parsing.has_class_bases``): the subclass relation skips the files without one
    #   without decoding them (``LazyFacts.lacks_class_bases``). None: not known.
    seen_stat: tuple | None = None  # ``stat_signature`` of the file when ``seen_hash`` was read:
    #   an index finding the same signature again takes the content as unchanged without
    #   reading it. None: read it again.

    @property
    def facts(self) -> PyFacts | None:
        return load_facts(self.facts_blob) if self.facts_blob is not None else None

    @facts.setter
    def facts(self, value: PyFacts | None) -> None:
        if value is None:
            self.facts_blob, self.symbols, self.sys_path, self.class_bases = None, 0, (), None
        else:
            self.set_facts_blob(pickle_facts(value), value)

    def set_facts_blob(self, blob: bytes, facts: PyFacts | None = None, symbols: int | None = None,
                       sys_path: tuple = (), class_bases: bool | None = None) -> None:
        """Facts by their pickle (``facts``: the same, decoded, when at hand; ``symbols``: their
        number of symbols, when known, ``sys_path`` their ``sys_path`` and ``class_bases``
        whether a class of theirs has a base: the pickle is then not decoded)."""
        if facts is not None:
            FACTS.put(blob, facts)
        elif symbols is None:
            facts = load_facts(blob)
        self.facts_blob, self.symbols = blob, (len(facts.symbols) if facts is not None else symbols)
        self.sys_path = getattr(facts, "sys_path", ()) if facts is not None else sys_path
        self.class_bases = has_class_bases(facts) if facts is not None else class_bases


class LazyFacts:
    """``rel -> PyFacts`` of every file of an indexer's current state that has facts, decoded
    on use (what a ``Resolver`` consults after the full build: only what an edit reaches is
    decoded). ``overlay`` entries win (a buffer's unsaved facts). Writes are ignored: the
    indexer updates its state before telling the resolver (``Resolver.set_facts``)."""

    def __init__(self, state: Callable[[], dict[str, FileState]], overlay: dict | None = None,
                 where: Callable[[str], bool] | None = None):
        self._state = state
        self._overlay = dict(overlay or {})
        self._where = where

    def only(self, where: Callable[[str], bool]) -> "LazyFacts":
        """The same facts restricted to paths for which ``where(rel)`` is true."""
        return LazyFacts(self._state, {r: f for r, f in self._overlay.items() if where(r)}, where)

    def get(self, rel: str, default=None):
        if self._where is not None and not self._where(rel):
            return default
        if rel in self._overlay:
            return self._overlay[rel]
        st = self._state().get(rel)
        return st.facts if st is not None and st.facts_blob is not None else default

    def __getitem__(self, rel: str) -> PyFacts:
        got = self.get(rel)
        if got is None:
            raise KeyError(rel)
        return got

    def __contains__(self, rel: str) -> bool:
        if self._where is not None and not self._where(rel):
            return False
        if rel in self._overlay:
            return True
        st = self._state().get(rel)
        return st is not None and st.facts_blob is not None

    def lacks_class_bases(self, rel: str) -> bool:
        """True when ``rel``'s facts are known, without decoding them, to have no class with a
        base (``FileState.class_bases`` False); False when they may have one, or are not
        known."""
        if (self._where is not None and not self._where(rel)) or rel in self._overlay:
            return False
        st = self._state().get(rel)
        return st is not None and st.facts_blob is not None and st.class_bases is False

    def __setitem__(self, rel: str, facts) -> None:
        pass

    def pop(self, rel: str, default=None):
        return default


def _stage_table(pid: int) -> str:
    return f"files_next_{pid}"


class StateCache:
    """The ``FileState`` of every file of one graph between runs, in the SQLite file ``path``
    (one pickled state per file, plus meta: cache version, workspace root, root package).
    A cache of another version or root reads as empty; a torn or unreadable file too (it only
    costs a full rebuild)."""

    def __init__(self, path: Path, root: Path, flavour: str = ""):
        self.path = path
        self.root = root
        self.version = f"{CACHE_VERSION}{flavour}"  # flavour: how edges were bound (``Settings.value_flow``)

    def connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=30)
        db.execute("PRAGMA synchronous = OFF")  # a cache: a torn write only costs a full rebuild
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("CREATE TABLE IF NOT EXISTS files (rel TEXT PRIMARY KEY, state BLOB)")
        return db

    def _matches(self, meta: dict[str, str]) -> bool:
        return meta.get("version") == self.version and meta.get("root") == str(self.root)

    def load(self) -> tuple[dict[str, FileState], dict[str, str]]:
        """``(states by rel, meta)``; both empty when the cache is missing, unreadable or of
        another version or root."""
        try:
            db = self.connect()
            try:
                meta = dict(db.execute("SELECT key, value FROM meta"))
                if not self._matches(meta):
                    return {}, {}
                with gc_paused():
                    return {rel: pickle.loads(blob) for rel, blob in db.execute("SELECT rel, state FROM files")}, meta
            finally:
                db.close()
        except (sqlite3.Error, OSError, pickle.PickleError, EOFError, AttributeError, TypeError, ValueError):
            return {}, {}

    def usable(self) -> dict[str, str] | None:
        """The cache's meta when it has rows of this version and root, else None (cheap:
        nothing is unpickled)."""
        try:
            db = self.connect()
            try:
                meta = dict(db.execute("SELECT key, value FROM meta"))
                rows = db.execute("SELECT count(*) FROM files").fetchone()[0]
            finally:
                db.close()
        except (sqlite3.Error, OSError):
            return None
        return meta if self._matches(meta) and rows else None

    @staticmethod
    def pickle_states(states: dict[str, FileState]) -> Iterator[tuple[str, bytes]]:
        """``(rel, pickled state)`` of each of ``states``, pickled as they are consumed (SQLite's
        ``executemany`` takes them one at a time)."""
        return ((r, pickle.dumps(st, protocol=pickle.HIGHEST_PROTOCOL)) for r, st in states.items())

    def stage(self, states: dict[str, FileState]) -> None:
        """Pickle every state of ``states`` into a staging table of this process
        (``files_next_<pid>``), ``STAGE_BATCH`` states at a time: a full build's memory then holds
        one batch of pickles, not every file's (about 360 MB on 22,000 files). Readers keep
        seeing the previous states until ``commit_stage``. A stage never committed is dropped by
        this process's next one, or by any process's once its process is gone."""
        table = _stage_table(os.getpid())
        with gc_paused():
            db = self.connect()
            try:
                with db:
                    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                              "AND name LIKE 'files_next_%'").fetchall():
                        pid = name.rpartition("_")[2]
                        if name == table or not (pid.isdigit() and pid_alive(int(pid))):
                            db.execute(f'DROP TABLE "{name}"')  # ours, or a stage its process left
                    db.execute(f'CREATE TABLE "{table}" (rel TEXT PRIMARY KEY, state BLOB)')
                batch: list[tuple[str, bytes]] = []
                for r, st in states.items():
                    batch.append((r, pickle.dumps(st, protocol=pickle.HIGHEST_PROTOCOL)))
                    if len(batch) >= STAGE_BATCH:
                        with db:
                            db.executemany(f'INSERT INTO "{table}" VALUES (?, ?)', batch)
                        batch.clear()
                with db:
                    db.executemany(f'INSERT INTO "{table}" VALUES (?, ?)', batch)
            finally:
                db.close()

    def commit_stage(self, meta: dict[str, str]) -> bool:
        """Make the staged states (``stage``) the cache's, with ``meta`` (version and root are
        added), in one transaction. False, and nothing changed, when no stage is there."""
        table = _stage_table(os.getpid())
        db = self.connect()
        try:
            db.isolation_level = None  # explicit transaction: DDL included
            db.execute("BEGIN IMMEDIATE")
            try:
                if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone() is None:
                    db.execute("ROLLBACK")
                    return False
                db.execute("DROP TABLE files")
                db.execute(f'ALTER TABLE "{table}" RENAME TO files')
                db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                               [("version", self.version), ("root", str(self.root)), *meta.items()])
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return True
        finally:
            db.close()

    def save(self, states: dict[str, FileState], meta: dict[str, str], rels: set[str] | None = None,
             blobs: list[tuple[str, bytes]] | None = None) -> None:
        """Write every state of ``states``, or only those of ``rels`` (rows of ``rels`` absent
        from ``states`` are deleted), and ``meta`` (version and root are added). ``blobs``:
        every state already pickled."""
        with gc_paused():
            db = self.connect()
            try:
                with db:
                    if rels is None:
                        db.execute("DELETE FROM files")
                        todo = blobs if blobs is not None else self.pickle_states(states)
                    else:
                        todo = self.pickle_states({r: states[r] for r in rels if r in states})
                        db.executemany("DELETE FROM files WHERE rel = ?", [(r,) for r in rels if r not in states])
                    db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?)", todo)
                    db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                   [("version", self.version), ("root", str(self.root)), *meta.items()])
            finally:
                db.close()
