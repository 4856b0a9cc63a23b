"""``SelectionWorker``: the tests lenses' selections computed in a child process of lower
CPU priority.

A "N tests reach this" selection on a much-used function of a large workspace reads thousands
of test files and walks millions of test entries: seconds to minutes of pure Python. Run in a
thread of the server, it holds the GIL, and every hover, lens and call hierarchy waits for it
between two graph reads (a hover measured alone at 60 ms took 250–560 ms while selections ran).
In a child process it takes no GIL from the server, and with a higher ``nice`` value the
operating system gives the server's requests the CPU first on a busy machine.

The child (``python -m orbit_lsp.server.worker``) runs ``changes.reach.test_counts`` and
``tests_for`` on its own FalkorDB connection to the same graph, with its own caches (the
selections' test index, scans and lists live there, not in the server). It is started on the
first call, serves one call at a time (the caller is the server's one slow-pool thread), is
started again on the next call when it died (that call fails with the reason), and stops when
the server closes it or exits (it watches its parent). Errors raised in the child
(``FalkorDBOffline``, ``QueryTimeout``…) are raised again in the caller.

Protocol: ``multiprocessing.connection.Connection`` messages (pickles) over the child's
stdin/stdout pipes; the child's own fd 1 is its stderr (nothing it prints can reach the pipe).
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from orbit_lsp.changes.reach import keep_counts
from orbit_lsp.config import Settings

log = logging.getLogger(__name__)

NICE = 10  # added to the child's nice value: background work yields the CPU to requests
PARENT_CHECK_S = 1.0  # how often the child checks that the server is still there
START_TIMEOUT_S = 60.0  # the child's first answer (imports) must come within this


class WorkerStopped(RuntimeError):
    """The child process ended (killed, out of memory, crashed) before answering; the message
    says how. The next call starts a new one."""


@dataclass(frozen=True)
class IndexView:
    """What a selection reads of a ``WorkspaceIndexer`` (``changes.reach`` takes either): the
    graph (by name, through the child's own store), its generation (the caches' key), the
    workspace root, the root package of the graph's quals, the settings the graph is reached
    with, and the indexer's file names (``state``) — None when unchanged since the last call
    for this graph (22,506 names are ~1 MB to send)."""

    graph_name: str
    generation: int
    root: Path
    root_package: str
    settings: Settings
    names: frozenset[str] | None


class _ChildIndex:
    """``IndexView`` in the child with a live ``graph`` (the attributes ``changes.reach``
    reads of an indexer)."""

    def __init__(self, view: IndexView, graph, names: frozenset[str]):
        self.graph = graph
        self.generation = view.generation
        self.root = view.root
        self.root_package = view.root_package
        self.settings = view.settings
        self.state = names


class SelectionWorker:
    """The parent's handle on the child process. ``call`` blocks (one caller at a time: the
    server's slow pool has one thread); ``close`` ends the child."""

    def __init__(self, nice: int = NICE):
        self.nice = nice
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._sent_names: dict[str, tuple[int, frozenset[str]]] = {}  # graph name -> (generation, names) the child has
        self._lock = threading.Lock()
        self.started = 0  # child processes started (a restart after a death counts)

    @property
    def pid(self) -> int | None:
        """The running child's process id (None before the first call or after ``close``)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def test_counts(self, ix, file: str, quals: list[str]) -> dict[str, int | None]:
        """``changes.reach.test_counts(ix, file, quals)`` computed in the child; the numbers
        are also kept in this process (``reach.cached_counts``)."""
        counts = self.call("test_counts", ix, file, quals)
        keep_counts(ix, file, counts)
        return counts

    def tests_for(self, ix, file: str, quals: list[str]) -> dict[str, list[dict] | None]:
        """``changes.reach.tests_for(ix, file, quals)`` computed in the child; their numbers
        are also kept in this process (``reach.cached_counts``)."""
        tests = self.call("tests_for", ix, file, quals)
        keep_counts(ix, file, {q: None if t is None else len(t) for q, t in tests.items()})
        return tests

    def call(self, name: str, ix, *args: Any) -> Any:
        """Run ``changes.reach.<name>(ix, *args)`` in the child and return its result, or raise
        what it raised; ``WorkerStopped`` when the child ended before answering."""
        with self._lock:
            conn = self._ensure_started()
            graph_name, generation = ix.graph.name, ix.generation
            sent = self._sent_names.get(graph_name)
            if sent is not None and sent[0] == generation:
                names, send_names = sent[1], None  # the names cannot have changed within a generation
            else:
                names = frozenset(getattr(ix, "state", None) or ())
                send_names = None if sent is not None and sent[1] == names else names
            view = IndexView(graph_name, generation, Path(ix.root), ix.root_package, ix.settings, send_names)
            try:
                conn.send((name, view, args))
                self._sent_names[graph_name] = (generation, names)
                ok, value = conn.recv()
            except (EOFError, OSError) as exc:
                raise WorkerStopped(self._stopped(exc)) from None
            if ok:
                return value
            raise value

    def _ensure_started(self) -> Connection:
        if self._proc is not None and self._proc.poll() is None and self._conn is not None:
            return self._conn
        self._discard()
        env = dict(os.environ, ORBIT_WORKER_NICE=str(self.nice))
        self._proc = subprocess.Popen([sys.executable, "-m", "orbit_lsp.server.worker"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, env=env, close_fds=True)
        self.started += 1
        # the parent reads the child's stdout and writes its stdin: one duplex-like pair
        self._conn = _PipePair(self._proc.stdout.fileno(), self._proc.stdin.fileno())
        if not self._conn.poll(START_TIMEOUT_S):
            raise WorkerStopped(self._stopped(TimeoutError(f"no start within {START_TIMEOUT_S:.0f} s")))
        try:
            hello = self._conn.recv()
        except (EOFError, OSError) as exc:
            raise WorkerStopped(self._stopped(exc)) from None
        if hello != "ready":
            raise WorkerStopped(self._stopped(RuntimeError(f"unexpected first message {hello!r}")))
        return self._conn

    def _stopped(self, exc: BaseException) -> str:
        """Why the child ended (its exit status when known), and forget it."""
        proc = self._proc
        code = None
        if proc is not None:
            try:
                code = proc.wait(2)
            except subprocess.TimeoutExpired:
                code = None
        self._discard()
        how = f"exit status {code}" if code is not None and code >= 0 else \
            f"killed by signal {-code}" if code is not None else f"{type(exc).__name__}: {exc}"
        log.warning("selection worker stopped (%s)", how)
        return f"the selection process stopped ({how}); it is started again on the next request"

    def _discard(self) -> None:
        proc, self._proc = self._proc, None
        conn, self._conn = self._conn, None
        self._sent_names.clear()
        if conn is not None:
            conn.close()
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            if proc.poll() is None:
                proc.kill()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    pass

    def close(self) -> None:
        """End the child (killed: its work only reads). Not waiting for a running call: the
        caller's ``recv`` then fails with ``WorkerStopped``."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
        if self._lock.acquire(timeout=5):
            try:
                self._discard()
            finally:
                self._lock.release()


class _PipePair:
    """A ``Connection``-like pair of one-way pipe connections (read end, write end)."""

    def __init__(self, read_fd: int, write_fd: int):
        self._in = Connection(os.dup(read_fd), writable=False)
        self._out = Connection(os.dup(write_fd), readable=False)

    def send(self, obj: Any) -> None:
        self._out.send(obj)

    def recv(self) -> Any:
        return self._in.recv()

    def poll(self, timeout: float) -> bool:
        return self._in.poll(timeout)

    def close(self) -> None:
        for c in (self._in, self._out):
            try:
                c.close()
            except OSError:
                pass


# -- the child ------------------------------------------------------------------------------------
def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(PARENT_CHECK_S)
        if os.getppid() != parent:
            os._exit(0)  # the server is gone: nobody waits for this work


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives a pickle round trip, else a RuntimeError with its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any exception type may fail to pickle
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def serve() -> None:
    """The child's loop: answer ``(name, IndexView, args)`` messages on stdin with
    ``(True, result)`` or ``(False, exception)`` on the original stdout until stdin closes."""
    in_fd, out_fd = os.dup(0), os.dup(1)
    os.dup2(2, 1)  # prints go to stderr, never into the pipe
    sys.stdout = sys.stderr
    conn_in, conn_out = Connection(in_fd, writable=False), Connection(out_fd, readable=False)
    try:
        os.nice(int(os.environ.get("ORBIT_WORKER_NICE", NICE)))
    except (OSError, ValueError):
        pass
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()

    from orbit_lsp.changes import reach
    from orbit_lsp.graph.connection import GraphStore

    calls = {"test_counts": reach.test_counts, "tests_for": reach.tests_for}
    stores: dict[str, GraphStore] = {}
    names: dict[str, frozenset[str]] = {}
    conn_out.send("ready")
    while True:
        try:
            name, view, args = conn_in.recv()
        except EOFError:
            return
        try:
            key = view.settings.model_dump_json()
            store = stores.get(key)
            if store is None:
                store = stores[key] = GraphStore(view.settings)
            if view.names is not None:
                names[view.graph_name] = view.names
            ix = _ChildIndex(view, store.graph(view.graph_name), names.get(view.graph_name, frozenset()))
            reply = (True, calls[name](ix, *args))
        except Exception as exc:  # noqa: BLE001 - handed back to the caller
            reply = (False, _portable(exc))
        conn_out.send(reply)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    serve()
