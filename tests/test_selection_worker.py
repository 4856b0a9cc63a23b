"""The selection process (``server.worker.SelectionWorker``): the tests lenses' selections run
in a child process on its own connection to the same graph. Its answers are those of
``changes.reach`` run in the caller's process, it follows the workspace as it changes, hands
back the graph layer's errors as they are, says so when it is killed mid-call and starts again,
and ends when its parent does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from orbit_lsp.changes import reach
from orbit_lsp.config import Settings
from orbit_lsp.graph.errors import FalkorDBOffline
from orbit_lsp.server.worker import SelectionWorker, WorkerStopped
from small_workspaces import write_files

FILES = {
    "pkg/__init__.py": "",
    "pkg/lib.py": """
        def parse(text):
            return text.split()

        def count(text):
            return len(parse(text))

        def unused():
            return 0
    """,
    "tests/test_parse.py": """
        from pkg.lib import parse

        def test_parse():
            assert parse("a b") == ["a", "b"]
    """,
    "tests/test_count.py": """
        from pkg.lib import count

        def test_count():
            assert count("a b") == 2

        def test_nothing():
            assert True
    """,
}


@pytest.fixture
def worker():
    w = SelectionWorker()
    yield w
    w.close()


def test_the_worker_answers_as_the_selection_does_in_process(index_files, worker):
    ix = index_files(FILES)
    quals = ["pkg.lib.parse", "pkg.lib.count", "pkg.lib.unused", "pkg.lib.gone"]
    # by Python's semantics: parse is reached by test_parse directly and by test_count through
    # count; count by test_count alone; unused by none; gone is not in the graph (None)
    assert worker.test_counts(ix, "pkg/lib.py", quals) == {"pkg.lib.parse": 2, "pkg.lib.count": 1,
                                                            "pkg.lib.unused": 0, "pkg.lib.gone": None}
    reach.forget_answers()
    assert worker.test_counts(ix, "pkg/lib.py", quals) == reach.test_counts(ix, "pkg/lib.py", quals)
    listed = worker.tests_for(ix, "pkg/lib.py", ["pkg.lib.parse"])["pkg.lib.parse"]
    assert [t["id"] for t in listed] == ["tests/test_count.py::test_count", "tests/test_parse.py::test_parse"]
    reach.forget_answers()
    assert listed == reach.tests_for(ix, "pkg/lib.py", ["pkg.lib.parse"])["pkg.lib.parse"]
    assert worker.started == 1


def test_the_worker_follows_the_workspace_as_it_changes(index_files, worker):
    ix = index_files(FILES)
    assert worker.test_counts(ix, "pkg/lib.py", ["pkg.lib.count"]) == {"pkg.lib.count": 1}
    # a new test file (the file names change: sent again) and an edit (same names)
    write_files(ix.root, {"tests/test_more.py": """
        from pkg.lib import count

        def test_more():
            assert count("") == 0
    """})
    ix.index_all()
    assert worker.test_counts(ix, "pkg/lib.py", ["pkg.lib.count"]) == {"pkg.lib.count": 2}
    write_files(ix.root, {"tests/test_more.py": """
        from pkg.lib import parse

        def test_more():
            assert parse("") == []
    """})
    ix.index_all()
    assert worker.test_counts(ix, "pkg/lib.py", ["pkg.lib.count", "pkg.lib.parse"]) == \
        {"pkg.lib.count": 1, "pkg.lib.parse": 3}
    assert worker.started == 1


class _Unreachable:
    """An indexer's attributes for a graph on a FalkorDB that is not there."""

    def __init__(self, root: Path):
        self.settings = Settings(falkordb_url="redis://127.0.0.1:1")
        self.graph = type("G", (), {"name": "orbit_nowhere"})()
        self.generation = 1
        self.root = root
        self.root_package = ""
        self.state = {"tests/test_a.py": None}


def test_graph_errors_come_back_as_they_are(tmp_path, worker):
    write_files(tmp_path, {"tests/test_a.py": "def test_a():\n    pass\n"})
    with pytest.raises(FalkorDBOffline) as err:
        worker.test_counts(_Unreachable(tmp_path), "tests/test_a.py", ["test_a"])
    assert err.value.where == "redis://127.0.0.1:1"
    assert str(err.value).startswith("FalkorDB offline: cannot reach redis://127.0.0.1:1")


def test_a_worker_killed_mid_call_says_so_and_starts_again(index_files, worker):
    ix = index_files(FILES)
    assert worker.test_counts(ix, "pkg/lib.py", ["pkg.lib.count"]) == {"pkg.lib.count": 1}
    pid = worker.pid
    os.kill(pid, signal.SIGSTOP)  # the call below is sent, and cannot be answered
    failure: list[BaseException] = []

    def call():
        try:
            worker.test_counts(ix, "pkg/lib.py", ["pkg.lib.parse"])
        except BaseException as exc:  # noqa: BLE001 - what the test looks at
            failure.append(exc)
    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(0.3)
    os.kill(pid, signal.SIGKILL)
    caller.join(10)
    assert not caller.is_alive()
    assert len(failure) == 1 and isinstance(failure[0], WorkerStopped)
    assert "killed by signal 9" in str(failure[0])
    assert worker.test_counts(ix, "pkg/lib.py", ["pkg.lib.parse"]) == {"pkg.lib.parse": 2}
    assert worker.started == 2 and worker.pid != pid


def test_the_worker_ends_when_its_parent_does(index_files, tmp_path):
    ix = index_files(FILES)
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from orbit_lsp.config import Settings
        from orbit_lsp.graph.connection import GraphStore
        from orbit_lsp.index.indexer import WorkspaceIndexer
        from orbit_lsp.server.worker import SelectionWorker
        settings = Settings(data_dir={str(ix.settings.data_dir)!r}, falkordb_url=None)
        ix = WorkspaceIndexer({str(ix.root)!r}, GraphStore(settings), settings)
        ix.index_all()
        w = SelectionWorker()
        print(w.test_counts(ix, "pkg/lib.py", ["pkg.lib.count"]), w.pid, flush=True)
        os._exit(0)  # no clean-up: as when the server is killed
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    counts, pid = out.stdout.strip().rsplit(" ", 1)
    assert counts == "{'pkg.lib.count': 1}"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(int(pid)):
        time.sleep(0.1)
    assert not _alive(int(pid))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_the_servers_has_tests_check_agrees_with_the_test_index(index_files):
    """The server no longer builds the test index (the selection process does): whether a
    folder gets tests lenses is read from the indexer's file names, and agrees with it."""
    plain = index_files({"pkg/__init__.py": "", "pkg/lib.py": "def f():\n    return 1\n"}, name="plain")
    assert reach.has_tests(plain) is False and reach.test_index(plain) is None
    write_files(plain.root, {"pkg/conftest.py": "import pytest\n"})
    plain.index_all()
    assert reach.has_tests(plain) is True and reach.test_index(plain) is not None
    tested = index_files(FILES, name="tested")
    assert reach.has_tests(tested) is True and reach.test_index(tested) is not None
