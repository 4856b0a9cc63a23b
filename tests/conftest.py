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

# The shared failure cases: ``$ORBIT_CASES`` when set, else ``shared/cases`` in the folder beside the
# project root (``../shared/cases``, where CI lays them). Tests that need a case get it through
# ``shared_case()`` / the ``case_dir`` fixture, or declare it with ``@pytest.mark.shared_cases(...)``
# (checked before any fixture runs): without the cases they are skipped, saying what is missing
# and where it was looked for, never errors.
CASES_BESIDE = Path(__file__).resolve().parents[1].parent / "shared" / "cases"
CASES = Path(os.environ["ORBIT_CASES"]) if os.environ.get("ORBIT_CASES") else CASES_BESIDE


def find_shared_case(name: str) -> Path | None:
    """The folder of a shared case given its full name (``"005-py-aliased-imports"``) or its
    number prefix (``"005"``); None when it (or the cases folder) is missing."""
    if (CASES / name).is_dir():
        return CASES / name
    if not CASES.is_dir():
        return None
    return next((d for d in sorted(CASES.iterdir()) if d.is_dir() and d.name.startswith(name + "-")), None)


def missing_shared_cases_reason(names) -> str | None:
    """Why tests needing shared cases ``names`` cannot run (what is missing, where it was looked
    for, how to provide it), or None when all of them are there."""
    missing = [n for n in names if find_shared_case(n) is None]
    if not missing:
        return None
    where = "$ORBIT_CASES" if os.environ.get("ORBIT_CASES") else "../shared/cases beside the project root"
    if not CASES.is_dir():
        return (f"needs shared case(s) {', '.join(missing)}: the shared cases folder {CASES} ({where}) "
                f"does not exist; clone beside shared/ or set ORBIT_CASES to a shared/cases folder")
    return f"needs shared case(s) {', '.join(missing)}: not found in {CASES} ({where})"


def shared_case(name: str) -> Path:
    """The folder of a shared case (full name or number prefix); skips the calling test or
    fixture, saying what is missing and where it was looked for, when it is not there."""
    reason = missing_shared_cases_reason([name])
    if reason:
        pytest.skip(reason)
    return find_shared_case(name)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "shared_cases(*names, fixture=None): the test needs these shared cases (only when it "
        "uses `fixture`, if given); skipped before its fixtures start when one is missing")


def pytest_runtest_setup(item):
    """Skip tests marked ``shared_cases`` whose cases are missing before any of their fixtures
    run, so that module-scoped language servers needing them are never started."""
    for mark in item.iter_markers("shared_cases"):
        fixture = mark.kwargs.get("fixture")
        if fixture and fixture not in item.fixturenames:
            continue
        reason = missing_shared_cases_reason(mark.args)
        if reason:
            pytest.skip(reason)


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
# A tests lens waits for its selection (as long as 60 s) in the language servers of the tests, so
# that its title is the count on a loaded machine too; test_lsp_test_lens_counting sets 0.
os.environ["ORBIT_TESTS_LENS_WAIT_MS"] = "60000"


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
    return shared_case


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
