"""A small git repository for the change-impact tests: a package ``app`` and its pytest suite
(a conftest with fixtures used by parameter name, a TestCase class, a test class).

Call graph of the base commit (bound calls only)::

    test_helper -> helper            compute -> helper          Engine.run -> compute
    test_compute -> compute          wrap (app/util.py) -> compute
    test_serve -> serve -> wrap      test_uses_old -> uses_old -> old_name
    engine (fixture) -> Engine       fast_engine (fixture) requests engine
    test_run(engine) calls engine.run: unbound in the graph (a parameter), bound by the selection
    through the engine fixture, which returns an Engine
    test_dynamic(e) calls e.run with e a parametrize argument: unbound, "may be affected" only
    UnitEngine.setUp -> Engine, UnitEngine.test_mode: uses self.e only
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

BASE = {
    "app/__init__.py": "",
    "app/core.py": '''
        import os


        def helper(x):
            return x + 1


        def compute(x):
            return helper(x) * 2


        def old_name(y):
            return y - 1


        class Engine:
            mode = "fast"

            def run(self, x):
                return compute(x)
        ''',
    "app/util.py": '''
        from app.core import compute


        def wrap(x):
            return compute(x)
        ''',
    "app/service.py": '''
        from app.util import wrap


        def serve(x):
            return wrap(x)


        def uses_old(y):
            from app.core import old_name
            return old_name(y)
        ''',
    "tests/__init__.py": "",
    "tests/conftest.py": '''
        import pytest
        from app.core import Engine


        @pytest.fixture
        def engine():
            return Engine()


        @pytest.fixture
        def fast_engine(engine):
            return engine
        ''',
    "tests/test_core.py": '''
        from app.core import helper, compute


        def test_helper():
            assert helper(1) == 2


        def test_compute():
            assert compute(1) == 4


        def test_gone():
            assert True
        ''',
    "tests/test_engine.py": '''
        import unittest

        import pytest

        from app.core import Engine


        def test_run(engine):
            assert engine.run(1) == 4


        @pytest.mark.parametrize("e", [Engine()])
        def test_dynamic(e):
            assert e.run(1) == 4


        def test_fast(fast_engine):
            assert fast_engine.mode == "fast"


        class TestEngine:
            def test_mode(self, engine):
                assert engine.mode == "fast"


        class UnitEngine(unittest.TestCase):
            def setUp(self):
                self.e = Engine()

            def test_unit_mode(self):
                self.assertEqual(self.e.mode, "fast")
        ''',
    "tests/test_service.py": '''
        from app.service import serve, uses_old


        def test_serve():
            assert serve(1) == 4


        def test_uses_old():
            assert uses_old(2) == 1
        ''',
}

ALL_TESTS = sorted([
    "tests/test_core.py::test_helper", "tests/test_core.py::test_compute", "tests/test_core.py::test_gone",
    "tests/test_engine.py::test_run", "tests/test_engine.py::test_fast", "tests/test_engine.py::test_dynamic", "tests/test_engine.py::TestEngine::test_mode",
    "tests/test_engine.py::UnitEngine::test_unit_mode",
    "tests/test_service.py::test_serve", "tests/test_service.py::test_uses_old",
])


class Repo:
    """A git work tree: ``write``/``edit``/``git``/``commit``."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.email", "t@example.com")
        self.git("config", "user.name", "t")
        self.git("config", "commit.gpgsign", "false")

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.root, check=True, capture_output=True, text=True).stdout

    def write(self, rel: str, text: str) -> None:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))

    def edit(self, rel: str, old: str, new: str) -> None:
        p = self.root / rel
        text = p.read_text()
        assert old in text, (rel, old)
        p.write_text(text.replace(old, new, 1))

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD").strip()


def make_repo(root: Path) -> Repo:
    repo = Repo(root)
    for rel, text in BASE.items():
        repo.write(rel, text)
    repo.commit("base")
    return repo


def record_coverage(root: Path, data_file: Path, contexts: bool = True) -> None:
    """Run the suite of ``root`` (``tests/``) for real under pytest-cov measuring ``app``, with
    this interpreter and a context per test (``--cov-context=test``) unless ``contexts`` is
    false; the coverage data in ``data_file``. Failing tests are fine (exit status 1)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_CORE_", "COVERAGE_"))}
    env.update(COVERAGE_FILE=str(data_file), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
               PYTHONDONTWRITEBYTECODE="1")  # no cached code of an edit for a later one (``pytest_run``)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "pytest_cov.plugin",
           "--cov=app", "--cov-report="] + (["--cov-context=test"] if contexts else []) + ["tests"]
    res = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode in (0, 1), res.stdout + res.stderr
    assert data_file.exists()
