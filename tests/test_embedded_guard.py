"""The embedded FalkorDB's data dir is never served twice, and no stranger gets a signal
(issue 20 items 6 and 9). Real processes and real signals, each test on its own embedded server
in a private data dir (never the session's server)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from orbit_lsp.config import Settings
from orbit_lsp.graph import embedded
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.graph.errors import FalkorDBOffline

ORBIT = str(Path(sys.executable).parent / "orbit-lsp")


@pytest.fixture
def data_dir_own():
    d = Path(tempfile.mkdtemp(prefix="orbit-g-"))
    try:
        yield d
    finally:
        embedded.stop(d)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def workspace(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("def f():\n    return 1\n")
    (ws / "b.py").write_text("from a import f\n\n\ndef g():\n    return f()\n")
    return ws


def orbit(data_dir: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, ORBIT_DATA_DIR=str(data_dir))
    return subprocess.run([ORBIT, *args], env=env, capture_output=True, text=True, timeout=timeout)


def our_servers(paths: embedded.EmbeddedPaths) -> list[int]:
    """Pids of every live redis-server serving this data dir's socket."""
    return sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and embedded.is_our_server(int(p), paths))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="lists servers through /proc")
def test_paused_server_is_never_replaced(data_dir_own, workspace):
    paths = embedded.EmbeddedPaths.for_data_dir(data_dir_own)
    embedded.ensure_running(data_dir_own)
    pid = embedded.status(data_dir_own)["pid"]
    assert embedded.server_lock_held(paths)
    assert orbit(data_dir_own, "index", str(workspace)).returncode == 0
    os.kill(pid, signal.SIGSTOP)
    try:
        r = orbit(data_dir_own, "index", str(workspace))
        assert r.returncode == 1, r.stdout + r.stderr
        assert "FalkorDB offline" in r.stderr and "not responding" in r.stderr, r.stderr
        # even without its pid file the server's lock keeps a second one from starting
        paths.pidfile.rename(paths.dir / "moved.pid")
        with pytest.raises(FalkorDBOffline, match="not responding"):
            embedded.ensure_running(data_dir_own)
        (paths.dir / "moved.pid").rename(paths.pidfile)
        assert our_servers(paths) == [pid]
        assert paths.socket.exists() and embedded._read_pid(paths) == pid
    finally:
        os.kill(pid, signal.SIGCONT)
    r = orbit(data_dir_own, "index", str(workspace))
    assert r.returncode == 0, r.stderr
    assert "unchanged" in r.stdout  # the graph indexed before the pause is still there
    assert our_servers(paths) == [pid]


def test_killed_server_releases_the_data_dir(data_dir_own, workspace):
    paths = embedded.EmbeddedPaths.for_data_dir(data_dir_own)
    embedded.ensure_running(data_dir_own)
    pid = embedded.status(data_dir_own)["pid"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while embedded.server_lock_held(paths) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not embedded.server_lock_held(paths)  # the kernel dropped the dead server's lock
    embedded.ensure_running(data_dir_own)
    new = embedded.status(data_dir_own)["pid"]
    assert new != pid and embedded.server_lock_held(paths)
    store = GraphStore(Settings(data_dir=data_dir_own, falkordb_url=None))
    try:
        assert store.graph("orbit_probe").query("RETURN 1").rows == [[1]]
    finally:
        store.close()


def test_stale_pid_file_never_signals_another_process(data_dir_own, workspace):
    paths = embedded.EmbeddedPaths.for_data_dir(data_dir_own)
    paths.dir.mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        paths.pidfile.write_text(f"{sleeper.pid}\n")
        r = orbit(data_dir_own, "db", "stop")
        assert r.returncode == 0, r.stderr
        assert "was not running" in r.stdout
        assert sleeper.poll() is None
        assert orbit(data_dir_own, "db", "status").returncode in (0, 1)
        assert sleeper.poll() is None
        r = orbit(data_dir_own, "index", str(workspace))  # starts the server: no signal either
        assert r.returncode == 0, r.stderr
        assert sleeper.poll() is None
        server = embedded.status(data_dir_own)["pid"]
        assert server != sleeper.pid
        # the pid file overwritten while the server runs: stop still stops the server (through
        # its socket) and leaves the stranger alone
        paths.pidfile.write_text(f"{sleeper.pid}\n")
        r = orbit(data_dir_own, "db", "stop")
        assert r.returncode == 0 and "stopped" in r.stdout, r.stdout + r.stderr
        assert not embedded.is_our_server(server, paths)  # gone (at most a zombie until reaped)
        assert sleeper.poll() is None
        assert embedded.is_our_server(sleeper.pid, paths) is False
    finally:
        sleeper.kill()
        sleeper.wait()


def test_db_stop_stops_a_paused_server(data_dir_own, workspace):
    paths = embedded.EmbeddedPaths.for_data_dir(data_dir_own)
    assert orbit(data_dir_own, "index", str(workspace)).returncode == 0
    pid = embedded.status(data_dir_own)["pid"]
    os.kill(pid, signal.SIGSTOP)
    t = time.monotonic()
    r = orbit(data_dir_own, "db", "stop")
    assert r.returncode == 0 and "stopped" in r.stdout, r.stdout + r.stderr
    assert time.monotonic() - t < 20
    assert not embedded.is_our_server(pid, paths) and not embedded.server_lock_held(paths)
    r = orbit(data_dir_own, "index", str(workspace))  # a new server, with the data saved on stop
    assert r.returncode == 0 and "unchanged" in r.stdout, r.stdout + r.stderr


def _serving(pid: int, paths: embedded.EmbeddedPaths) -> bool:
    # a killed daemon may stay a zombie here (no reaper): gone means not our server any more
    return embedded.is_our_server(pid, paths)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds orphans through /proc")
def test_a_server_whose_data_dir_was_deleted_is_ended_by_the_next_start(data_dir_own, workspace):
    """The data dir is deleted while its server runs (``rm -rf`` of orbit's folder). The server
    cannot save in a folder that is gone, so a TERM does not stop it; the next orbit command
    starts a new server in the new folder and ends the old one, which nothing could reach."""
    paths = embedded.EmbeddedPaths.for_data_dir(data_dir_own)
    assert orbit(data_dir_own, "index", str(workspace)).returncode == 0
    old = embedded.status(data_dir_own)["pid"]
    shutil.rmtree(data_dir_own)
    os.kill(old, signal.SIGTERM)
    time.sleep(1.0)
    assert _serving(old, paths)  # refuses to stop: its save fails
    r = orbit(data_dir_own, "index", str(workspace))
    assert r.returncode == 0, r.stdout + r.stderr
    deadline = time.monotonic() + 10
    while _serving(old, paths) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _serving(old, paths)
    new = embedded.status(data_dir_own)["pid"]
    assert new != old and our_servers(paths) == [new]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds orphans through /proc")
def test_db_stop_ends_a_server_whose_data_dir_was_deleted(data_dir_own):
    paths = embedded.EmbeddedPaths.for_data_dir(data_dir_own)
    embedded.ensure_running(data_dir_own)
    old = embedded.status(data_dir_own)["pid"]
    shutil.rmtree(data_dir_own)
    assert embedded.stop(data_dir_own) is True
    deadline = time.monotonic() + 10
    while _serving(old, paths) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _serving(old, paths) and our_servers(paths) == []
    assert embedded.stop(data_dir_own) is False  # nothing left


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds orphans through /proc")
def test_a_deleted_data_dir_whose_socket_lives_elsewhere_gets_a_new_server():
    """A data dir whose path is too long for a unix socket has its socket in the temp dir: the
    socket outlives the deleted folder and the orphan still answers on it. The next start does
    not take it for the data dir's server: it ends it and starts one that can save."""
    d = Path(tempfile.mkdtemp(prefix="orbit-g-")) / ("long-" * 20)
    paths = embedded.EmbeddedPaths.for_data_dir(d)
    assert not str(paths.socket).startswith(str(paths.dir))  # the socket is outside the data dir
    try:
        embedded.ensure_running(d)
        old = embedded.status(d)["pid"]
        shutil.rmtree(d.parent)
        embedded.ensure_running(d)
        new = embedded.status(d)["pid"]
        assert new != old and not _serving(old, paths) and our_servers(paths) == [new]
        assert paths.pidfile.is_file()  # the new server writes into the new folder
    finally:
        embedded.stop(d)
        shutil.rmtree(d.parent, ignore_errors=True)
