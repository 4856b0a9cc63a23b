"""The query helper process (``python -m orbit_lsp.query_helper.server``; started by
``orbit_lsp.launch``, see the package docstring).

One per user, interpreter and orbit installation (``protocol.helper_key``). It

1. takes ``q-<key>.lock`` in the helper directory (a second helper started at the same time
   waits up to 3 s for it, then leaves), records why in ``q-<key>.failed`` if its imports fail
   (clients then stop starting it for 10 minutes unless the code changes);
2. imports what the queries need, once, and binds ``q-<key>.sock`` (mode 0600, in a 0700
   directory of this user), writing its pid to ``q-<key>.pid``;
3. for each connection from a process of the same user (``SO_PEERCRED``; others are closed
   unanswered) reads one request and forks: the child takes the client's directory,
   environment and umask, runs ``orbit_lsp.cli`` with stdout/stderr captured, and sends the
   output and exit status (or declines: see ``_serve``); the content hashes its children
   computed to tell stale files (``cli.freshness.HASH_CACHE``) come back through
   ``q-<key>.hashes`` and are handed to the next children (``HashJournal``);
4. exits when no query came for ``ORBIT_HELPER_IDLE_S`` seconds (default 600), when a client
   runs other code than it loaded (it answers that client ``M`` first), when orbit's code on
   disk changes (checked every 30 s), or when its socket is removed or replaced.

Its stderr is ``q-<key>.log`` (start-up failures; with ``ORBIT_HELPER_DEBUG=1`` one line per
query). It never writes to the client's terminal and holds no FalkorDB connection itself.
"""

from __future__ import annotations

import errno
import fcntl
import gc
import io
import os
import signal
import socket
import sys
import time

from orbit_lsp.query_helper import protocol

STAMP_CHECK_S = 30.0
LOCK_WAIT_S = 3.0
REQUEST_TIMEOUT_S = 2.0
LOG_MAX_BYTES = 1 << 20

# What a query imports, loaded once before the first fork (the children then import nothing).
WARM_MODULES = (
    "pydantic", "redis", "falkordb", "orbit_lsp.config", "orbit_lsp.cli", "orbit_lsp.cli.context",
    "orbit_lsp.cli.workspace", "orbit_lsp.cli.freshness", "orbit_lsp.cli.progress", "orbit_lsp.cli.cmd_queries",
    "orbit_lsp.graph.connection", "orbit_lsp.graph.queries", "orbit_lsp.graph.readonly", "orbit_lsp.graph.keys",
    "orbit_lsp.graph.embedded", "orbit_lsp.graph.errors", "orbit_lsp.index.workspaces",
    "orbit_lsp.index.fingerprint", "urllib.parse", "json", "argparse", "pathspec", "fcntl", "uuid", "tempfile",
    "difflib", "email.parser",
)


def _debug() -> bool:
    return bool(os.environ.get("ORBIT_HELPER_DEBUG"))


def _log(text: str) -> None:
    try:
        os.write(2, f"{time.strftime('%Y-%m-%d %H:%M:%S')} orbit-lsp query helper {os.getpid()}: {text}\n"
                 .encode("utf-8", "replace"))
    except OSError:
        pass


def _take_lock(path: str) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.05)


# The parser of every command, built once (building it is ~10 ms of a query); each child parses
# its query's arguments with its own copy.
_PARSER = None


def _warm() -> None:
    global _PARSER
    import importlib

    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    from orbit_lsp import cli

    _PARSER = cli.build_parser()  # also every command module and argparse's own lazy imports
    try:
        from orbit_lsp.config import Settings

        Settings.from_env()
    except Exception:  # noqa: BLE001 - a bad setting is the client's to report
        pass
    _cache_redis_version()


def _cache_redis_version() -> None:
    """redis-py looks its own version up in the installed metadata for every client it creates
    (``redis.utils.get_lib_version``, read again by each connection's ``CLIENT SETINFO``): ~4 ms
    each, three clients a query. The answer cannot change while this process lives (a change of
    site-packages ends it: ``protocol.code_stamp``), so it is computed once here."""
    try:
        import redis.utils
    except ImportError:
        return
    lookup = getattr(redis.utils, "get_lib_version", None)
    if callable(lookup):
        version = lookup()
        redis.utils.get_lib_version = lambda: version


class _Sink(io.RawIOBase):
    """The raw end of a captured stream: appends ``(kind, bytes)`` in the order written."""

    def __init__(self, chunks: list, kind: bytes, tty: bool):
        super().__init__()
        self._chunks, self._kind, self._tty = chunks, kind, tty

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._tty

    def write(self, data) -> int:
        data = bytes(data)
        if data:
            self._chunks.append((self._kind, data))
        return len(data)


def _capture(chunks: list, kind: bytes, info: dict) -> io.TextIOWrapper:
    return io.TextIOWrapper(_Sink(chunks, kind, bool(info.get("tty"))), encoding=info.get("encoding") or "utf-8",
                            errors=info.get("errors") or "strict", write_through=True)


def _output_frames(chunks: list) -> bytes:
    merged: list[list] = []
    for kind, data in chunks:
        if merged and merged[-1][0] == kind:
            merged[-1][1].append(data)
        else:
            merged.append([kind, [data]])
    return b"".join(protocol.frame(kind, b"".join(parts)) for kind, parts in merged)


def _serve(conn: socket.socket, req: dict) -> None:
    """In the forked child: answer one query like ``orbit_lsp.cli.main`` would in the client's
    process, or decline (``F``) what the in-process path must do: arguments that do not parse
    or ask for help, commands other than ``protocol.QUERY_COMMANDS``, a workspace with no graph
    yet (indexing), any failure of the helper itself."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    conn.sendall(protocol.json_frame(b"A", {"pid": os.getpid()}))
    started, before = time.perf_counter(), set(sys.modules)
    chunks: list = []
    argv = list(req.get("argv") or [])

    def decline(reason: str) -> None:
        if _debug():
            _log(f"declined {argv[:2]}: {reason}")
        conn.sendall(protocol.json_frame(b"F", {"reason": reason}))

    try:
        from orbit_lsp import cli
        from orbit_lsp.cli import freshness, workspace
        from orbit_lsp.cli.errors import InProcessOnly, UsageError

        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        os.umask(int(req["umask"]))
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - for the process's life
        out, err = _capture(chunks, b"O", req["stdout"]), _capture(chunks, b"E", req["stderr"])
        sys.stdout, sys.stderr = out, err
        try:  # the parser of every command: on arguments that parse, the same result as cli's own
            args = (_PARSER or cli.build_parser()).parse_args(argv)
        except (SystemExit, UsageError):
            decline("arguments for the in-process path (help, version or a usage error)")
            return
        if args.command not in protocol.QUERY_COMMANDS or args.stdio:
            decline(f"not a query: {args.command}")
            return
        workspace.INDEX_ON_DEMAND = False
        freshness.HASH_CACHE = _HASHES.known
        try:
            rc = cli.run(args)
        except InProcessOnly as exc:
            decline(str(exc))
            return
        out.flush()
        err.flush()
    except BaseException as exc:  # noqa: BLE001 - whatever it is, the in-process path answers
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        decline(f"helper error: {type(exc).__name__}: {exc}")
        return
    conn.sendall(_output_frames(chunks) + protocol.json_frame(b"X", {"rc": int(rc)}))
    _HASHES.journal(freshness.NEW_HASHES)  # after the answer: the client does not wait for it
    if _debug():
        new = sorted(set(sys.modules) - before)
        _log(f"served {argv[:2]} rc {rc} in {(time.perf_counter() - started) * 1000:.1f} ms"
             + (f"; imported {len(new)} modules: {', '.join(new[:20])}" if new else ""))


class HashJournal:
    """Content hashes the children computed (``cli.freshness.HASH_CACHE``), kept by the helper
    for the next children: a child appends its new ones to ``q-<key>.hashes`` (one ``write``
    of tab-separated lines) after answering; the helper reads what was added before each fork.
    A lost or partial line only costs a file read later."""

    MAX_ENTRIES = 200_000
    MAX_BYTES = 16 << 20

    def __init__(self):
        self.known: dict = {}
        self.path: str | None = None
        self.offset = 0

    def open(self, path: str) -> None:
        self.path, self.offset = path, 0
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.close(fd)

    def journal(self, entries: list) -> None:
        if not entries or self.path is None:
            return
        lines = []
        for (path, *ident), digest in entries:
            if "\t" not in path and "\n" not in path:
                lines.append("\t".join([path, *map(str, ident), digest]) + "\n")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, "".join(lines).encode("utf-8", "surrogateescape"))
            finally:
                os.close(fd)
        except OSError:
            pass

    def absorb(self) -> None:
        """Read the lines added since the last call (in the helper, before a fork)."""
        if self.path is None:
            return
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1
        if not end:
            return
        self.offset += end
        if len(self.known) > self.MAX_ENTRIES:
            self.known.clear()
        for line in data[:end].decode("utf-8", "surrogateescape").splitlines():
            parts = line.split("\t")
            if len(parts) == 7:
                try:
                    self.known[(parts[0], *map(int, parts[1:6]))] = parts[6]
                except ValueError:
                    continue
        if self.offset > self.MAX_BYTES:  # everything is in memory: start the file again
            self.open(self.path)


_HASHES = HashJournal()


class Helper:
    def __init__(self, folder: str, key: str, stamp: str):
        self.folder, self.key, self.stamp = folder, key, stamp
        self.path = os.path.join(folder, f"q-{key}.sock")
        self.pid_path = os.path.join(folder, f"q-{key}.pid")
        self.idle = protocol.idle_seconds()
        self.listener: socket.socket | None = None
        self.inode: int | None = None

    def bind(self) -> None:
        try:
            os.unlink(self.path)  # we hold the lock: a socket there is a dead helper's
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(self.path)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        sock.listen(64)
        self.listener, self.inode = sock, os.stat(self.path).st_ino
        _HASHES.open(os.path.join(self.folder, f"q-{self.key}.hashes"))
        with open(self.pid_path, "w", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")

    def close(self) -> None:
        """Stop listening: remove the socket and pid file if they are still ours."""
        if self.listener is None:
            return
        try:
            if os.stat(self.path).st_ino == self.inode:
                os.unlink(self.path)
                os.unlink(self.pid_path)
                if _HASHES.path is not None:
                    os.unlink(_HASHES.path)
        except OSError:
            pass
        self.listener.close()
        self.listener = None

    @staticmethod
    def _reap(*_signal) -> None:
        """Collect the children that finished (also the SIGCHLD handler: at once, so that their
        CPU time shows in this process's ``cutime`` as soon as they are done)."""
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    def _still_ours(self) -> bool:
        try:
            return os.stat(self.path).st_ino == self.inode
        except OSError:
            return False

    def serve(self, lock_fd: int) -> None:
        tick = max(0.05, min(2.0, self.idle / 4))
        assert self.listener is not None
        self.listener.settimeout(tick)
        last = next_check = time.monotonic()
        next_check += STAMP_CHECK_S
        while True:
            self._reap()
            try:
                conn, _ = self.listener.accept()
            except (TimeoutError, socket.timeout):
                now = time.monotonic()
                if now - last >= self.idle:
                    _log(f"idle for {self.idle:g} s: exiting")
                    return
                if not self._still_ours():
                    _log("socket removed or replaced: exiting")
                    return
                if now >= next_check:
                    next_check = now + STAMP_CHECK_S
                    if protocol.code_stamp() != self.stamp:
                        _log("orbit's code changed on disk: exiting")
                        return
                continue
            except InterruptedError:
                continue
            last = time.monotonic()
            if self._handle(conn, lock_fd) == "stale":
                return

    def _handle(self, conn: socket.socket, lock_fd: int) -> str | None:
        try:
            uid = protocol.peer_uid(conn)
            if uid is not None and uid != os.getuid():
                _log(f"refused a connection from user {uid}")
                conn.close()
                return None
            conn.settimeout(REQUEST_TIMEOUT_S)
            got = protocol.read_frame(conn)
            if got is None or got[0] != b"Q":
                conn.close()
                return None
            req = protocol.loads(got[1])
            if req.get("protocol") != protocol.PROTOCOL or req.get("stamp") != self.stamp:
                _log("a client runs other code: exiting")
                self.close()  # before answering: the client starts the next helper right away
                os.close(lock_fd)
                try:
                    conn.sendall(protocol.frame(b"M", b""))
                finally:
                    conn.close()
                return "stale"
        except (OSError, ValueError) as exc:
            _log(f"bad request: {type(exc).__name__}: {exc}")
            conn.close()
            return None
        _HASHES.absorb()
        pid = os.fork()
        if pid == 0:  # the child: never returns into the loop
            code = 0
            try:
                assert self.listener is not None
                self.listener.close()
                os.close(lock_fd)
                conn.settimeout(None)
                _serve(conn, req)
            except BaseException:  # noqa: BLE001 - the client falls back when the connection drops
                code = 1
            finally:
                try:
                    conn.close()
                finally:
                    os._exit(code)
        conn.close()
        return None


def main() -> int:
    try:
        if os.fstat(2).st_size > LOG_MAX_BYTES:
            os.ftruncate(2, 0)
    except OSError:
        pass
    folder = protocol.helper_dir()
    if not protocol.private_dir(folder, create=True):
        _log(f"{folder} is not a private directory of this user: not starting")
        return 1
    key, stamp = protocol.helper_key(), protocol.code_stamp()  # the stamp before the imports
    lock_fd = _take_lock(os.path.join(folder, f"q-{key}.lock"))
    if lock_fd is None:
        return 0  # another helper runs (or is starting)
    helper = Helper(folder, key, stamp)
    failed = os.path.join(folder, f"q-{key}.failed")
    try:
        _warm()
    except BaseException as exc:
        _log(f"cannot load orbit: {type(exc).__name__}: {exc}")
        with open(failed, "w", encoding="utf-8") as fh:
            fh.write(stamp + "\n")
        return 1
    try:
        os.unlink(failed)
    except FileNotFoundError:
        pass
    os.chdir("/")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the client's Ctrl-C goes to the child only
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))  # leave no socket behind
    signal.signal(signal.SIGCHLD, Helper._reap)
    helper.bind()
    gc.collect()
    gc.freeze()  # what is loaded stays shared with the children
    try:
        helper.serve(lock_fd)
    finally:
        helper.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
