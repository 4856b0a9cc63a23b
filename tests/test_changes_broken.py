"""Changes that break code they do not touch, and changes that are no code change at all, on
real git repositories (``tests/changes_repo.py``), checked against what Python and pytest do:

- a function renamed (or removed) while other modules still import it by its old name: those
  modules fail at import (``ImportError``), so do the modules importing them, and every test of
  a test file importing any of them fails at collection; a bare call of the old name left in its
  module fails with ``NameError`` when it runs; an import of it inside a function fails when
  that function runs; an import guarded by ``try/except ImportError`` does not fail;
- an edit of comments, blank lines or spacing only changes no code: nothing is selected, and
  the result says which files had comment-only changes (a docstring is code).
"""

from __future__ import annotations

import pytest

from changes_repo import ALL_TESTS, make_repo
from orbit_lsp.changes import diff, impact, render
from orbit_lsp.index.indexer import WorkspaceIndexer
from test_changes_conventions import SUMMARY, pytest_run


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path / "ws")


@pytest.fixture
def run(repo, store, settings):
    made = []

    def _run(**opts):
        ix = WorkspaceIndexer(repo.root, store, settings)
        made.append(ix)
        impact.refresh(ix)
        return impact.analyse(ix.graph, diff.from_git(repo.root), ix.root_package, impact.Options(**opts))

    yield _run
    for ix in made:
        ix.graph.delete()


def failing(root) -> set[str]:
    """The tests pytest reports failing or in error (a test file that fails to import: all of
    its tests, as collected before the change; the other files still run; a conftest.py that
    fails to import: every test)."""
    res = pytest_run(root, "-rfE", "--tb=no", "--continue-on-collection-errors", "tests")
    if res.returncode == 4 and "while loading conftest" in res.stdout + res.stderr:
        return set(ALL_TESTS)  # a conftest.py that fails to import: pytest runs nothing, all fail
    out = res.stdout
    got = set()
    for line in out.splitlines():
        m = SUMMARY.match(line.strip())
        if m and "::" in m.group(2):
            got.add(m.group(2).split("[", 1)[0])  # a parametrized test: its function
        elif m:
            got |= {t for t in ALL_TESTS if t.startswith(m.group(2) + "::")}
    return got


def selected(result) -> list[str]:
    return [t["id"] for t in result["tests"]["selected"]]


def test_suite_passes_before_any_change(repo):
    assert failing(repo.root) == set()


def test_renamed_function_still_imported_elsewhere(repo, run):
    # compute is imported by app/util.py (module level, app.service imports app.util) and by
    # tests/test_core.py (module level), and called bare by Engine.run in its own module
    repo.edit("app/core.py", "def compute(x):", "def compute_twice(x):")
    r = run()
    assert [(s["qual"], s["status"]) for s in r["symbols"]] == [("app.core.compute_twice", "renamed")]
    want = failing(repo.root)
    # what Python does: test_core.py and test_service.py fail to import (every test of them);
    # Engine.run raises NameError: test_run (engine fixture) and test_dynamic (parametrize) fail
    assert want == {"tests/test_core.py::test_compute", "tests/test_core.py::test_gone",
                    "tests/test_core.py::test_helper", "tests/test_engine.py::test_dynamic",
                    "tests/test_engine.py::test_run", "tests/test_service.py::test_serve",
                    "tests/test_service.py::test_uses_old"}
    # test_dynamic calls e.run on a parametrize argument the graph cannot bind: "may be affected"
    assert set(selected(r)) == want - {"tests/test_engine.py::test_dynamic"}
    assert [t["id"] for t in r["tests"]["may_be_affected"]] == ["tests/test_engine.py::test_dynamic"]
    callers = {c["qual"]: (c["depth"], c["resolved"]) for c in r["callers"] if c["depth"] == 1}
    assert callers["app.core.Engine.run"] == (1, "removed name")
    deps = {d["path"]: d["hops"] for d in r["dependents"]}
    # app/util.py fails at import (its only import of app.core is now unresolved); app/service.py
    # and the test files import app.core themselves
    assert deps == {"app/util.py": 1, "app/service.py": 1, "tests/conftest.py": 1, "tests/test_core.py": 1,
                    "tests/test_engine.py": 1, "tests/test_service.py": 2}
    assert "app/util.py:1 imports compute from app/core.py, which the change removes: importing app/util.py " \
           "fails (ImportError)" in r["notes"]
    serve = next(t for t in r["tests"]["selected"] if t["id"] == "tests/test_service.py::test_serve")
    assert serve["reason"].startswith("imports app/util.py, which uses compute of app/core.py, removed")


def test_removed_function_imported_inside_a_function(repo, run):
    # old_name is imported only inside app.service.uses_old: that function fails when it runs
    repo.edit("app/core.py", "def old_name(y):\n    return y - 1\n", "")
    r = run()
    assert [(s["qual"], s["status"]) for s in r["symbols"]] == [("app.core.old_name", "removed")]
    want = failing(repo.root)
    assert want == {"tests/test_service.py::test_uses_old"}
    assert selected(r) == ["tests/test_service.py::test_uses_old"]
    uses_old = next(c for c in r["callers"] if c["qual"] == "app.service.uses_old")
    assert (uses_old["depth"], uses_old["via"]) == (1, "app.core.old_name")
    assert not any("fails (ImportError)" in n for n in r["notes"])  # no module fails at import


def test_guarded_import_does_not_fail(repo, run):
    repo.edit("app/util.py", "from app.core import compute\n",
              "try:\n    from app.core import compute\nexcept ImportError:\n    compute = abs\n")
    repo.commit("guarded import")
    repo.edit("tests/test_core.py", "from app.core import helper, compute\n",
              "from app.core import helper\nfrom app.util import compute\n")
    repo.commit("tests import compute through util")
    repo.edit("app/core.py", "def compute(x):", "def compute_twice(x):")
    r = run()
    want = failing(repo.root)
    # util falls back to abs: test_compute (abs(1) != 4) and test_serve fail on the value, not on
    # an import; Engine.run's NameError fails test_run and test_dynamic
    assert want == {"tests/test_core.py::test_compute", "tests/test_service.py::test_serve",
                    "tests/test_engine.py::test_run", "tests/test_engine.py::test_dynamic"}
    assert not any("app/util.py" in n and "ImportError" in n for n in r["notes"])
    # util's fallback is a value the graph does not follow: its users only may be affected
    assert selected(r) == ["tests/test_engine.py::test_run"]
    assert set(t["id"] for t in r["tests"]["may_be_affected"]) == want - {"tests/test_engine.py::test_run"}


@pytest.mark.parametrize("old, new", [
    ("def helper(x):\n", "def helper(x):  # adds one\n"),  # a comment after code
    ("def helper(x):\n", "# the helper\ndef helper(x):\n"),  # a comment line
    ("    return x + 1\n", "    return x+1\n\n\n"),  # spacing and blank lines
])
def test_comment_only_change_is_no_code_change(repo, run, old, new):
    repo.edit("app/core.py", old, new)
    r = run()
    assert r["comment_only"] == ["app/core.py"]
    assert r["files"] == [] and r["symbols"] == [] and r["dependents"] == [] and selected(r) == []
    assert r["totals"]["comment_only"] == 1 and r["totals"]["files"] == 0
    assert "Comment-only changes (no code change): 1 file: app/core.py" in render.text(r)
    assert "Comment-only changes (no code change): 1 file." in render.markdown(r)


def test_comment_beside_a_code_change_counts_only_the_code(repo, run):
    repo.edit("app/core.py", "def compute(x):\n", "def compute(x):\n    # doubled\n")
    repo.edit("app/util.py", "    return compute(x)\n", "    return compute(x) + 0\n")
    r = run()
    assert r["comment_only"] == ["app/core.py"]
    assert [(s["qual"], s["status"]) for s in r["symbols"]] == [("app.util.wrap", "modified")]
    # in one file: the comment's hunk touches no symbol, the code's does
    repo.git("checkout", "--", ".")
    repo.edit("app/core.py", "def compute(x):\n", "def compute(x):\n    # doubled\n")
    repo.edit("app/core.py", "    return y - 1\n", "    return y - 2\n")
    r = run()
    assert r["comment_only"] == []
    assert [(s["qual"], s["status"]) for s in r["symbols"]] == [("app.core.old_name", "modified")]
    assert selected(r) == ["tests/test_service.py::test_uses_old"]


def test_docstring_is_code(repo, run):
    repo.edit("app/core.py", "def helper(x):\n", 'def helper(x):\n    """One more."""\n')
    r = run()
    assert r["comment_only"] == []
    assert [(s["qual"], s["status"]) for s in r["symbols"]] == [("app.core.helper", "modified")]



def test_package_init_failing_fails_every_module_of_the_package(repo, run):
    # lib/__init__.py imports old_name; tests/test_lib.py imports lib.tools only (no IMPORTS edge
    # to lib/__init__.py), but Python imports the package first
    repo.write("lib/__init__.py", "from app.core import old_name\n")
    repo.write("lib/tools.py", "def twice(x):\n    return 2 * x\n")
    repo.write("tests/test_lib.py", "from lib.tools import twice\n\n\ndef test_twice():\n    assert twice(2) == 4\n")
    repo.commit("lib")
    repo.edit("app/core.py", "def old_name(y):\n    return y - 1\n", "")
    r = run()
    # what pytest reports: test_lib.py fails at collection (ImportError of old_name), and uses_old
    assert failing(repo.root) == {"tests/test_service.py::test_uses_old"}  # (test_lib.py is not in ALL_TESTS)
    out = pytest_run(repo.root, "-q", "--tb=line", "tests/test_lib.py").stdout
    assert "ERROR tests/test_lib.py" in out and "ImportError" in out and "old_name" in out
    assert selected(r) == ["tests/test_lib.py::test_twice", "tests/test_service.py::test_uses_old"]
    lib = next(t for t in r["tests"]["selected"] if t["id"] == "tests/test_lib.py::test_twice")
    assert "in package lib, whose __init__.py fails" in lib["reason"]


def test_redefined_names_and_lambdas_map_to_their_symbol(repo, run):
    # an @overload stub then the implementation, a property setter, a lambda: the graph keeps
    # one symbol per qualified name (the first definition), a lambda's name holds its line
    repo.write("app/shapes.py", '''
        from typing import overload


        @overload
        def area(x: int) -> int: ...


        @overload
        def area(x: float) -> float: ...


        def area(x):
            return x * x


        class Box:
            def __init__(self):
                self._w = 1

            @property
            def width(self):
                return self._w

            @width.setter
            def width(self, value):
                self._w = value


        def sizes(xs):
            return sorted(xs, key=lambda b: b.width)
        ''')
    repo.commit("shapes")
    repo.edit("app/shapes.py", "def area(x):\n    return x * x\n", "def area(x):\n    return x ** 2\n")
    repo.edit("app/shapes.py", "        self._w = value\n", "        self._w = int(value)\n")
    repo.edit("app/shapes.py", "def sizes(xs):\n", "def sizes(xs):\n    xs = list(xs)\n")
    r = run()
    assert [(s["qual"], s["status"]) for s in r["symbols"]] == [
        ("app.shapes.area", "modified"), ("app.shapes.Box.width", "modified"), ("app.shapes.sizes", "modified")]


def test_a_package_init_runs_before_any_module_of_it(repo, run):
    # app/__init__.py imports app.util at module level; tests/test_core.py imports only
    # app.core, but importing app.core runs app/__init__.py first, which imports app.util
    repo.write("app/__init__.py", "from app.util import wrap\n")
    repo.commit("package init imports util")
    repo.edit("app/util.py", "from app.core import compute\n", "from app.core import compute\n\nLIMIT = 1 // 0\n")
    r = run()
    assert [(s["qual"], s["status"]) for s in r["symbols"]] == [("app.util", "modified")]
    # the module now fails at import: every test file importing anything of the package fails
    assert failing(repo.root) == set(ALL_TESTS)
    assert selected(r) == ALL_TESTS
    deps = {d["path"]: d["hops"] for d in r["dependents"]}
    assert deps["app/__init__.py"] == 1 and deps["app/core.py"] == 1 and deps["tests/test_core.py"] == 2
