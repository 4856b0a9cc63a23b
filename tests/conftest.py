"""Shared fixtures: one embedded FalkorDB per test session, a fresh graph per test."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from orbit_lsp.config import Settings
from orbit_lsp.graph import embedded
from orbit_lsp.graph.connection import GraphStore

CASES = Path(__file__).resolve().parents[1].parent / "shared" / "cases"
if not CASES.exists():  # CI lays shared/ beside the clone
    CASES = Path(os.environ.get("ORBIT_CASES", CASES))


# A private data dir for the session's embedded FalkorDB (short path: unix socket limit). Set at
# import so that language servers started by pytest-lsp fixtures (which start before other
# fixtures are resolved) inherit it too.
_SESSION_DATA_DIR = Path(tempfile.mkdtemp(prefix="orbit-t-"))
os.environ["ORBIT_DATA_DIR"] = str(_SESSION_DATA_DIR)
os.environ.pop("ORBIT_FALKORDB_URL", None)
# Query helpers (orbit_lsp.query_helper) that `orbit-lsp` processes of the tests start live in
# the session's own directory, leave after a minute idle and are stopped at the end (data_dir).
_SESSION_HELPER_DIR = _SESSION_DATA_DIR / "helpers"
os.environ["ORBIT_HELPER_DIR"] = str(_SESSION_HELPER_DIR)
os.environ["ORBIT_HELPER_IDLE_S"] = "60"
os.environ.pop("ORBIT_NO_HELPER", None)


def stop_query_helpers(folder: Path) -> None:
    """Stop the query helpers whose pid files are in ``folder`` (SIGTERM, by pid)."""
    import signal

    for pid_file in folder.glob("q-*.pid"):
        try:
            os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
        except (OSError, ValueError):
            pass


@pytest.fixture(scope="session", autouse=True)
def data_dir():
    """The session's data dir; autouse so its embedded FalkorDB (started on demand by tests or
    by the language servers they spawn) is always stopped at the end."""
    yield _SESSION_DATA_DIR
    stop_query_helpers(_SESSION_HELPER_DIR)
    embedded.stop(_SESSION_DATA_DIR)
    shutil.rmtree(_SESSION_DATA_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def settings(data_dir) -> Settings:
    return Settings(data_dir=data_dir, falkordb_url=None)


@pytest.fixture(scope="session")
def store(settings) -> GraphStore:
    s = GraphStore(settings)
    s.connect()
    yield s
    s.close()


@pytest.fixture
def graph(store):
    """A fresh, empty graph, deleted after the test."""
    g = store.graph("orbit_test_" + uuid.uuid4().hex[:12])
    yield g
    g.delete()


@pytest.fixture
def case_dir():
    """Path of a shared case by its number prefix: ``case_dir("001")``."""
    def _get(prefix: str) -> Path:
        for d in CASES.iterdir():
            if d.name.startswith(prefix + "-"):
                return d
        pytest.skip(f"shared case {prefix} not found in {CASES}")
    return _get


@pytest.fixture
def case_workspace(case_dir, tmp_path):
    """A private copy of a case's workspace (built with make_workspace.sh when the case has one)."""
    def _make(prefix: str) -> Path:
        d = case_dir(prefix)
        ws = tmp_path / f"ws{prefix}"
        script = d / "make_workspace.sh"
        if script.exists():
            subprocess.run(["sh", str(script), str(ws)], check=True, capture_output=True)
        else:
            shutil.copytree(d / "workspace", ws, symlinks=True)
        return ws
    return _make


@pytest.fixture(scope="module")
def model_server():
    """A loopback chat-completions server (``agent_harness.ModelServer``), one per test module."""
    from agent_harness import ModelServer

    with ModelServer() as s:
        yield s


@pytest.fixture
def srv(model_server):
    """The module's model server, its scripted replies and recorded requests cleared."""
    model_server.reset()
    return model_server


@pytest.fixture
def index_files(tmp_path, store):
    """A factory: ``index_files({path: text}, name="ws", **settings)`` writes a small workspace
    under ``tmp_path / name`` and indexes it (``small_workspaces.build``); its graph and cache
    are deleted after the test."""
    from small_workspaces import build

    made = []

    def _index(files: dict[str, str], name: str = "ws", **settings):
        ix = build(tmp_path / name, store, files, **settings)
        made.append(ix)
        return ix

    yield _index
    for ix in made:
        ix.graph.delete()
        ix.cache_path.unlink(missing_ok=True)
