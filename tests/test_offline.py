"""FalkorDB offline path: a dead external server, a stopped embedded server, stale server files.

Every test here starts its *own* embedded server in a private short temporary data dir (never the
session server of ``conftest.py``) and stops it in a ``finally``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
import redis

from orbit_lsp.config import Settings
from orbit_lsp.graph import embedded
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.graph.errors import FalkorDBOffline
from orbit_lsp.graph.queries import export
from orbit_lsp.index.indexer import WorkspaceIndexer

DEAD_URL = "redis://127.0.0.1:1"
WORKSPACE = {
    "pkg/__init__.py": "from .a import f\n",
    "pkg/a.py": "import os\n\n\ndef f():\n    return os.getcwd()\n",
    "main.py": "from pkg import f\n\n\ndef main():\n    f()\n",
}


def make_workspace(root: Path) -> Path:
    for rel, text in WORKSPACE.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


@pytest.fixture
def data_dir_off():
    """A private, short data dir (unix socket path limit) whose server is stopped at the end."""
    d = Path(tempfile.mkdtemp(prefix="orbit-off-"))
    try:
        yield d
    finally:
        embedded.stop(d)
        shutil.rmtree(d, ignore_errors=True)


def assert_offline(exc: BaseException, where: str) -> None:
    assert isinstance(exc, FalkorDBOffline)
    assert not isinstance(exc, redis.exceptions.RedisError)
    msg = str(exc)
    assert msg.startswith("FalkorDB offline"), msg
    assert where in msg, msg
    assert exc.where == where


# -- a dead external server -------------------------------------------------------------------
def test_dead_external_url_is_offline(tmp_path):
    store = GraphStore(Settings(falkordb_url=DEAD_URL, data_dir=tmp_path / "data"))
    assert not store.embedded
    assert store.where == DEAD_URL
    with pytest.raises(FalkorDBOffline) as ei:
        store.connect()
    assert_offline(ei.value, DEAD_URL)
    g = store.graph("orbit_code_offline")
    for call in (lambda: g.query("RETURN 1"), lambda: g.ro_query("RETURN 1"), g.exists, g.delete,
                 store.list_graphs):
        with pytest.raises(FalkorDBOffline) as ei:
            call()
        assert_offline(ei.value, DEAD_URL)
    assert store.healthy() is False  # reports, never raises
    # nothing was started for an external URL
    assert not (tmp_path / "data" / "falkordb").exists()


def test_dead_external_url_hides_password(tmp_path):
    store = GraphStore(Settings(falkordb_url="redis://user:s3cret@127.0.0.1:1", data_dir=tmp_path))
    with pytest.raises(FalkorDBOffline) as ei:
        store.graph("g").query("RETURN 1")
    assert_offline(ei.value, "redis://user:***@127.0.0.1:1")
    assert "s3cret" not in str(ei.value)


def test_indexer_on_dead_external_url_raises_offline(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    store = GraphStore(Settings(falkordb_url=DEAD_URL, data_dir=tmp_path / "data"))
    ix = WorkspaceIndexer(ws, store)
    with pytest.raises(FalkorDBOffline) as ei:
        ix.index_all()
    assert_offline(ei.value, DEAD_URL)
    with pytest.raises(FalkorDBOffline) as ei:
        ix.reindex_file(ws / "main.py")
    assert_offline(ei.value, DEAD_URL)


# -- the embedded server ----------------------------------------------------------------------
def test_embedded_status_keys(data_dir_off):
    paths = embedded.EmbeddedPaths.for_data_dir(data_dir_off)
    st = embedded.status(data_dir_off)  # never starts anything
    assert set(st) == {"running", "pid", "socket", "dir", "falkordb_version"}
    assert st["running"] is False and st["pid"] is None and st["falkordb_version"] is None
    assert st["socket"] == str(paths.socket) and st["dir"] == str(paths.dir)
    assert not paths.socket.exists()

    sock = embedded.ensure_running(data_dir_off)
    assert sock == paths.socket
    st = embedded.status(data_dir_off)
    assert set(st) == {"running", "pid", "socket", "dir", "falkordb_version"}
    assert st["running"] is True
    assert isinstance(st["pid"], int) and st["pid"] == int(paths.pidfile.read_text())
    assert st["falkordb_version"] and len(st["falkordb_version"].split(".")) == 3
    assert embedded.ensure_running(data_dir_off) == sock  # reused, not restarted
    assert embedded.status(data_dir_off)["pid"] == st["pid"]

    assert embedded.stop(data_dir_off) is True
    st = embedded.status(data_dir_off)
    assert st["running"] is False and st["pid"] is None
    assert not paths.socket.exists() and not paths.pidfile.exists()
    assert embedded.stop(data_dir_off) is False


def _index_tiny(data_dir: Path, ws: Path) -> tuple[GraphStore, WorkspaceIndexer, dict]:
    store = GraphStore(Settings(data_dir=data_dir, falkordb_url=None))
    assert store.embedded
    store.connect()
    ix = WorkspaceIndexer(make_workspace(ws), store)
    rep = ix.index_all()
    assert rep.mode == "full" and rep.files == 3
    return store, ix, export(ix.graph)


def test_stopped_embedded_and_dead_external(data_dir_off, tmp_path):
    """Index into a private embedded server, stop it: a store pointing at a dead external URL
    is offline (it never falls back to the embedded server), and the embedded data stays on disk."""
    store, ix, before = _index_tiny(data_dir_off, tmp_path / "ws")
    try:
        assert [f["path"] for f in before["files"]] == ["main.py", "pkg/__init__.py", "pkg/a.py"]
        assert embedded.stop(data_dir_off) is True
        assert not embedded.status(data_dir_off)["running"]
        assert (embedded.EmbeddedPaths.for_data_dir(data_dir_off).dir / "orbit.rdb").is_file()

        dead = GraphStore(Settings(falkordb_url=DEAD_URL, data_dir=data_dir_off))
        with pytest.raises(FalkorDBOffline) as ei:
            dead.connect()
        assert_offline(ei.value, DEAD_URL)
        with pytest.raises(FalkorDBOffline) as ei:
            dead.graph(ix.graph.name).query("MATCH (f:File) RETURN count(f)")
        assert_offline(ei.value, DEAD_URL)
        with pytest.raises(FalkorDBOffline) as ei:
            WorkspaceIndexer(ix.root, dead).index_all()
        assert_offline(ei.value, DEAD_URL)
        # the dead external store did not start the embedded server
        assert not embedded.status(data_dir_off)["running"]

        # a new store (as a new orbit process) starts the embedded server on demand; data persisted
        fresh = GraphStore(Settings(data_dir=data_dir_off, falkordb_url=None))
        try:
            g = fresh.graph(ix.graph.name)
            assert g.query("MATCH (f:File) RETURN count(f)").rows == [[3]]
            assert embedded.status(data_dir_off)["running"]
            assert export(g) == before
            # and the re-opened indexer finds its graph and cache consistent
            assert WorkspaceIndexer(ix.root, fresh).index_all().mode == "unchanged"
        finally:
            fresh.close()
    finally:
        store.close()


def test_embedded_store_restarts_after_stop(data_dir_off, tmp_path):
    """The same store whose server was stopped under it: the next query starts the embedded
    server again (it is started on demand) instead of failing, and the data persisted."""
    store, ix, before = _index_tiny(data_dir_off, tmp_path / "ws")
    try:
        old_pid = embedded.status(data_dir_off)["pid"]
        assert embedded.stop(data_dir_off) is True
        assert ix.graph.query("MATCH (f:File) RETURN count(f)").rows == [[3]]
        st = embedded.status(data_dir_off)
        assert st["running"] and st["pid"] != old_pid
        assert export(ix.graph) == before
        assert ix.index_all().mode == "unchanged"
    finally:
        store.close()


def test_embedded_store_recovers_after_offline_error(data_dir_off, tmp_path):
    """Whatever the first query after a stop does, the store recovers by itself: within two
    queries the server is back with the data, without reconnecting by hand."""
    store, ix, before = _index_tiny(data_dir_off, tmp_path / "ws")
    try:
        assert embedded.stop(data_dir_off) is True
        try:
            ix.graph.query("RETURN 1")
        except FalkorDBOffline as exc:
            assert_offline(exc, str(embedded.EmbeddedPaths.for_data_dir(data_dir_off).socket))
        assert export(ix.graph) == before
        assert embedded.status(data_dir_off)["running"]
    finally:
        store.close()


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_stale_pid_and_socket_are_cleaned(data_dir_off):
    paths = embedded.EmbeddedPaths.for_data_dir(data_dir_off)
    paths.dir.mkdir(parents=True)
    dead = _dead_pid()
    with pytest.raises(ProcessLookupError):
        os.kill(dead, 0)
    paths.pidfile.write_text(f"{dead}\n")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a socket file nobody listens on
    s.bind(str(paths.socket))
    s.close()
    assert paths.socket.exists() and not embedded.ping(paths.socket)

    sock = embedded.ensure_running(data_dir_off)
    assert sock == paths.socket
    assert embedded.ping(sock)
    st = embedded.status(data_dir_off)
    assert st["running"] and st["pid"] != dead
    assert int(paths.pidfile.read_text()) == st["pid"]
    # and the store works on it
    store = GraphStore(Settings(data_dir=data_dir_off, falkordb_url=None))
    try:
        assert store.graph("orbit_off_probe").query("RETURN 1").rows == [[1]]
    finally:
        store.close()


def test_stale_socket_without_pidfile(data_dir_off):
    paths = embedded.EmbeddedPaths.for_data_dir(data_dir_off)
    paths.dir.mkdir(parents=True)
    paths.pidfile.write_text("not a pid\n")
    paths.socket.write_text("")  # a plain file where the socket should be
    assert embedded.status(data_dir_off)["running"] is False
    assert embedded.ensure_running(data_dir_off) == paths.socket
    assert embedded.status(data_dir_off)["running"]


def test_ping_and_stop_do_not_sleep_in_retries(data_dir_off):
    """``ping`` of a socket nobody listens on (a crashed server's) fails at once, and ``stop``
    returns once the server is gone: neither waits in the client's retry backoff."""
    import time

    paths = embedded.EmbeddedPaths.for_data_dir(data_dir_off)
    paths.dir.mkdir(parents=True)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(paths.socket))
    s.close()
    t = time.monotonic()
    assert embedded.ping(paths.socket) is False
    ping_s = time.monotonic() - t
    t = time.monotonic()
    embedded.ensure_running(data_dir_off)
    start_s = time.monotonic() - t
    t = time.monotonic()
    assert embedded.stop(data_dir_off) is True
    stop_s = time.monotonic() - t
    assert ping_s < 1.0 and start_s < 3.0 and stop_s < 2.0, \
        f"ping {ping_s:.1f} s, ensure_running {start_s:.1f} s, stop {stop_s:.1f} s"
