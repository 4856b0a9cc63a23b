"""One writer per code graph across processes, and the generation marker that tells a writer
whether the graph is still the one it last wrote.

``GraphWriteLock`` serialises every process that writes one graph (``orbit-lsp index``, language
servers, any other front end):

- always: an exclusive ``flock`` on ``<data_dir>/locks/<graph>.lock``. It covers every process
  of the machine that uses the same data dir (the embedded FalkorDB lives there, so for the
  embedded server that is every writer). The kernel drops it when the holder dies.
- with an external FalkorDB (``Settings.falkordb_url``): also a lock key in FalkorDB itself,
  ``orbit:lock:<graph>``, set with ``SET … NX PX`` to a random token and renewed every
  ``LOCK_TTL_MS / 3`` while held, deleted only by its owner. It covers processes on other
  machines or with another data dir that share the server. A holder that stops renewing (killed,
  paused longer than ``LOCK_TTL_MS``) loses it: a paused writer that resumes after its lock
  expired may still write once; the marker below then makes the next writer rebuild.

The marker: the redis key ``orbit:generation:<graph>`` holds a random token written by the last
writer that finished, or ``dirty:<token>`` while a writer is between its first and last write
(a crash there, or a snapshot taken then, leaves it dirty). A writer keeps the token its
in-memory state corresponds to; before writing it compares it with the marker and re-reads
(re-syncs) when another process wrote since, or when FalkorDB came back from an older snapshot
(the marker is saved in the same snapshot as the graph, so it is as old as the graph).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time
import uuid
from pathlib import Path

from orbit_lsp.graph.connection import GraphStore, marker_key  # noqa: F401 (re-exported)

log = logging.getLogger("orbit_lsp.index")

LOCK_TTL_MS = 30_000
DIRTY = "dirty:"
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
_RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end"


def lock_key(graph_name: str) -> str:
    return f"orbit:lock:{graph_name}"


def lock_path(data_dir: Path | str, graph_name: str) -> Path:
    """``<data_dir>/locks/<graph>.lock``."""
    return Path(data_dir).expanduser() / "locks" / f"{graph_name}.lock"


def new_token() -> str:
    return uuid.uuid4().hex


def read_marker(store: GraphStore, graph_name: str) -> str | None:
    """The graph's generation marker (None: never written by a writer that keeps one).
    Raises ``FalkorDBOffline``."""
    value = store.execute("GET", marker_key(graph_name))
    return value.decode() if isinstance(value, bytes) else value


def write_marker(store: GraphStore, graph_name: str, value: str) -> None:
    store.execute("SET", marker_key(graph_name), value)


def forget_marker(store: GraphStore, graph_name: str) -> None:
    """Delete the graph's marker (when its graph is dropped)."""
    store.execute("DEL", marker_key(graph_name))


class GraphWriteLock:
    """Exclusive right to write graph ``graph_name`` across processes (see the module docstring).

    A context manager; re-entrant within one thread of one process (nested ``with`` blocks on the
    same object are free). Waiting is logged once; it blocks until the other writer finishes.
    ``on_wait`` is called once, before waiting, when another process holds the lock.
    Raises ``FalkorDBOffline`` (external lock key) when FalkorDB cannot be reached."""

    def __init__(self, store: GraphStore, graph_name: str, on_wait=None):
        self.store = store
        self.graph_name = graph_name
        self.path = lock_path(store.settings.data_dir, graph_name)
        self.on_wait = on_wait
        self._depth = 0
        self._fd: int | None = None
        self._token: str | None = None
        self._renewer: threading.Thread | None = None
        self._stop = threading.Event()
        self.waited = False  # whether the last acquisition had to wait for another process

    def __enter__(self) -> "GraphWriteLock":
        if self._depth == 0:
            self._acquire()
        self._depth += 1
        return self

    def __exit__(self, *exc) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._release()

    # -- file lock -------------------------------------------------------------------------------
    def _acquire(self) -> None:
        self.waited = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._waiting()
                fcntl.flock(fd, fcntl.LOCK_EX)
            if not self.store.embedded:
                self._acquire_key()
        except BaseException:
            os.close(fd)  # closing drops the flock
            raise
        self._fd = fd

    def _waiting(self) -> None:
        if not self.waited:
            self.waited = True
            log.info("another orbit process is writing graph %s; waiting for it", self.graph_name)
            if self.on_wait is not None:
                self.on_wait()

    def _release(self) -> None:
        try:
            if self._token is not None:
                self._release_key()
        finally:
            fd, self._fd = self._fd, None
            if fd is not None:
                os.close(fd)

    # -- FalkorDB-side lock (external server) -----------------------------------------------------
    def _acquire_key(self) -> None:
        token = new_token()
        key = lock_key(self.graph_name)
        while not self.store.execute("SET", key, token, "NX", "PX", LOCK_TTL_MS):
            self._waiting()
            time.sleep(0.2)
        self._token = token
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew, args=(key, token), daemon=True,
                                         name=f"orbit-lock-{self.graph_name}")
        self._renewer.start()

    def _renew(self, key: str, token: str) -> None:
        while not self._stop.wait(LOCK_TTL_MS / 3000):
            try:
                if not self.store.execute("EVAL", _RENEW, 1, key, token, LOCK_TTL_MS):
                    log.warning("lost the FalkorDB lock of graph %s", self.graph_name)
                    return
            except Exception as exc:  # noqa: BLE001 - offline: the key expires by itself
                log.warning("could not renew the FalkorDB lock of graph %s: %s", self.graph_name, exc)

    def _release_key(self) -> None:
        token, self._token = self._token, None
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)
            self._renewer = None
        with contextlib.suppress(Exception):  # offline: the key expires by itself
            self.store.execute("EVAL", _RELEASE, 1, lock_key(self.graph_name), token)
