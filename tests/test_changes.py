"""Change impact on real git repositories: changed symbols, blast radius, test selection.

Every test builds ``tests/changes_repo.py``'s repository, changes it (working tree, index or
commits), indexes it with the real indexer into the session's embedded FalkorDB and asserts what
follows from the call graph described in that module."""

from __future__ import annotations

import pytest

from changes_repo import ALL_TESTS, make_repo
from orbit_lsp.changes import diff, impact
from orbit_lsp.graph.queries import Answer, callers_of_all
from orbit_lsp.index.indexer import WorkspaceIndexer
from plain_bfs import reaching


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path / "ws")


@pytest.fixture
def run(repo, store, settings):
    made = []

    def _run(mode="worktree", base=None, text=None, buffers=None, **opts):
        ix = WorkspaceIndexer(repo.root, store, settings)
        made.append(ix)
        impact.refresh(ix)
        change = diff.from_text(repo.root, text) if text is not None else diff.from_git(repo.root, mode, base)
        if buffers:
            change = diff.with_buffers(change, buffers)
        return impact.analyse(ix.graph, change, ix.root_package, impact.Options(**opts))

    yield _run
    for ix in made:
        ix.graph.delete()


def changed(result) -> list[tuple]:
    return [(s["qual"], s["status"]) for s in result["symbols"]]


def callers(result) -> dict[str, int]:
    return {r["qual"]: r["depth"] for r in result["callers"]}


def selected(result) -> list[str]:
    return [t["id"] for t in result["tests"]["selected"]]


def test_edit_inside_a_function(repo, run):
    repo.edit("app/core.py", "    return x + 1\n", "    y = x + 1\n    return y\n")
    r = run()
    assert changed(r) == [("app.core.helper", "modified")]
    assert r["hunks"] == [{"file": "app/core.py", "old_file": "app/core.py", "old": [5, 1], "new": [5, 2],
                           "old_symbols": ["app.core.helper"], "new_symbols": ["app.core.helper"]}]
    # test_run calls engine.run on its engine fixture (pytest passes it the fixture's Engine):
    # Engine.run is 2 hops away
    assert callers(r) == {"app.core.compute": 1, "tests.test_core.test_helper": 1, "app.core.Engine.run": 2,
                          "app.util.wrap": 2, "tests.test_core.test_compute": 2, "app.service.serve": 3,
                          "tests.test_engine.test_run": 3, "tests.test_service.test_serve": 4}
    assert all(c["reaches"] == "app.core.helper" for c in r["callers"])
    assert selected(r) == ["tests/test_core.py::test_compute", "tests/test_core.py::test_helper",
                           "tests/test_engine.py::test_run", "tests/test_service.py::test_serve"]
    run_test = next(t for t in r["tests"]["selected"] if t["id"].endswith("test_run"))
    assert run_test["depth"] == 3 and run_test["reason"] == "calls app.core.helper (3 hops)"
    assert r["tests"]["may_be_affected"] == []
    assert r["tests"]["commands"]["pytest"] == (
        "pytest tests/test_core.py::test_compute tests/test_core.py::test_helper tests/test_engine.py::test_run "
        "tests/test_service.py::test_serve")
    assert r["tests"]["commands"]["pytest_files"] == "pytest tests/test_core.py tests/test_engine.py tests/test_service.py"
    assert r["tests"]["total"] == len(ALL_TESTS)
    assert r["cypher"] and all("query" in c and "params" in c for c in r["cypher"])


def test_depth_limits_the_radius_not_the_tests(repo, run):
    repo.edit("app/core.py", "    return x + 1\n", "    return 1 + x\n")
    r = run(depth=2)
    assert callers(r) == {"app.core.compute": 1, "tests.test_core.test_helper": 1, "app.core.Engine.run": 2,
                          "app.util.wrap": 2, "tests.test_core.test_compute": 2}
    assert "tests/test_service.py::test_serve" in selected(r)  # 4 hops, within the test depth
    r = run(depth=2, test_depth=3)
    assert "tests/test_service.py::test_serve" not in selected(r)


def test_unbound_callers_are_listed_apart(repo, run):
    repo.edit("app/core.py", "        return compute(x)\n", "        return compute(x) + 0\n")
    r = run()
    assert changed(r) == [("app.core.Engine.run", "modified")]
    # test_run's engine is its fixture's Engine; test_dynamic's comes from a parametrize mark,
    # which orbit does not follow: that call is unbound and only may call it
    assert callers(r) == {"tests.test_engine.test_run": 1}
    may = {m["qual"]: m for m in r["may_be_affected"]}
    assert set(may) == {"tests.test_engine.test_dynamic"}
    assert all(m["names"] == ["run"] and m["depth"] == 1 for m in may.values())
    assert selected(r) == ["tests/test_engine.py::test_run"]
    assert [t["id"] for t in r["tests"]["may_be_affected"]] == ["tests/test_engine.py::test_dynamic"]


def test_renamed_function_and_its_caller(repo, run):
    repo.edit("app/core.py", "def old_name(y):", "def new_name(y):")
    repo.edit("app/service.py", "    from app.core import old_name\n    return old_name(y)",
              "    from app.core import new_name\n    return new_name(y)")
    r = run()
    assert changed(r) == [("app.core.new_name", "renamed"), ("app.service.uses_old", "modified")]
    ren = r["symbols"][0]
    assert (ren["old_qual"], ren["old_file"], ren["old_line"]) == ("app.core.old_name", "app/core.py", 12)
    # uses_old is changed itself (changed symbols are never listed as their own callers)
    assert callers(r) == {"tests.test_service.test_uses_old": 1}
    assert selected(r) == ["tests/test_service.py::test_uses_old"]


def test_moved_file_and_changed_import(repo, run):
    repo.git("mv", "app/util.py", "app/utils.py")
    repo.edit("app/service.py", "from app.util import wrap", "from app.utils import wrap")
    r = run()
    files = {f["path"]: (f["status"], f["old_path"]) for f in r["files"]}
    assert files == {"app/utils.py": ("renamed", "app/util.py"), "app/service.py": ("modified", "app/service.py")}
    assert changed(r) == [("app.service", "modified")]  # the import line: a change of the module
    # the module changed: tests that import it (directly or not) are selected, whole
    assert selected(r) == ["tests/test_service.py::test_serve", "tests/test_service.py::test_uses_old"]
    deps = {d["path"]: d["hops"] for d in r["dependents"]}
    assert deps == {"tests/test_service.py": 1}


def test_removed_module_still_imported(repo, run):
    repo.git("rm", "-q", "app/util.py")  # app/service.py still imports it
    r = run()
    assert [(f["path"], f["status"]) for f in r["files"]] == [("app/util.py", "removed")]
    assert changed(r) == [("app.util", "removed"), ("app.util.wrap", "removed")]
    assert {d["path"]: d["hops"] for d in r["dependents"]} == {"app/service.py": 1, "tests/test_service.py": 2}
    assert "app/service.py still imports app/util.py, which the change removes or moves" in r["notes"]
    # test_service.py imports app.service, whose import now fails: its tests, whole
    assert selected(r) == ["tests/test_service.py::test_serve", "tests/test_service.py::test_uses_old"]


def test_changed_import_of_a_module_everyone_uses(repo, run):
    repo.edit("app/core.py", "import os\n", "import os.path\n")
    r = run()
    assert changed(r) == [("app.core", "modified")]
    # conftest.py imports app.core: every test under tests/ may see the change
    assert selected(r) == ALL_TESTS


def test_deleted_test(repo, run):
    repo.edit("tests/test_core.py", "\n\ndef test_gone():\n    assert True\n", "")
    r = run()
    assert changed(r) == [("tests.test_core.test_gone", "removed")]
    assert r["tests"]["removed"] == ["tests/test_core.py::test_gone"]
    assert selected(r) == []


def test_conftest_fixture_used_by_parameter_name(repo, run):
    repo.edit("tests/conftest.py", "    return Engine()\n", "    e = Engine()\n    return e\n")
    r = run()
    assert changed(r) == [("tests.conftest.engine", "modified")]
    # engine's users by parameter name, and fast_engine's (a fixture requesting engine)
    assert selected(r) == ["tests/test_engine.py::TestEngine::test_mode", "tests/test_engine.py::test_fast",
                           "tests/test_engine.py::test_run"]
    fast = next(t for t in r["tests"]["selected"] if t["id"].endswith("test_fast"))
    assert "fixture 'fast_engine'" in fast["reason"]


def test_class_change_reaches_setup_of_testcase(repo, run):
    repo.edit("app/core.py", '    mode = "fast"\n', '    mode = "fast"\n    size = 2\n')
    r = run()
    assert changed(r) == [("app.core.Engine", "modified")]
    # who constructs Engine: the engine fixture (and its users), UnitEngine.setUp (every test of
    # the class), test_dynamic (in its parametrize decorator)
    assert callers(r) == {"tests.conftest.engine": 1, "tests.test_engine.UnitEngine.setUp": 1,
                          "tests.test_engine.test_dynamic": 1}
    assert selected(r) == ["tests/test_engine.py::TestEngine::test_mode", "tests/test_engine.py::UnitEngine::test_unit_mode",
                           "tests/test_engine.py::test_dynamic", "tests/test_engine.py::test_fast",
                           "tests/test_engine.py::test_run"]


def test_property_and_special_methods_count_as_their_class(repo, run):
    # a property is read as an attribute: no call reaches it in the graph; a change of it is a
    # change of its class, whose instances are made by the engine fixture, setUp and test_dynamic
    repo.edit("app/core.py", '    mode = "fast"\n', '    mode = "fast"\n\n    @property\n    def speed(self):\n        return 2\n')
    r = run()
    assert changed(r) == [("app.core.Engine.speed", "added")]
    assert callers(r) == {"tests.conftest.engine": 1, "tests.test_engine.UnitEngine.setUp": 1,
                          "tests.test_engine.test_dynamic": 1}
    assert all(c["reaches"] == "app.core.Engine.speed" and c["via"] == "app.core.Engine" for c in r["callers"])
    assert selected(r) == ["tests/test_engine.py::TestEngine::test_mode", "tests/test_engine.py::UnitEngine::test_unit_mode",
                           "tests/test_engine.py::test_dynamic", "tests/test_engine.py::test_fast",
                           "tests/test_engine.py::test_run"]


def test_added_test_is_selected(repo, run):
    repo.write("tests/test_new.py", "from app.core import helper\n\n\ndef test_new():\n    assert helper(0) == 1\n")
    r = run()
    assert [(f["path"], f["status"]) for f in r["files"]] == [("tests/test_new.py", "added")]
    assert selected(r) == ["tests/test_new.py::test_new"]


def test_staged_only(repo, run):
    repo.edit("app/core.py", "    return x + 1\n", "    return x + 2\n")
    repo.git("add", "app/core.py")
    repo.edit("app/service.py", "    return wrap(x)\n", "    return wrap(x) + 0\n")  # not staged
    assert changed(run(mode="staged")) == [("app.core.helper", "modified")]
    assert changed(run()) == [("app.core.helper", "modified"), ("app.service.serve", "modified")]


def test_several_commits_against_a_base(repo, run):
    base = repo.git("rev-parse", "HEAD").strip()
    repo.git("checkout", "-q", "-b", "feature")
    repo.edit("app/core.py", "    return x + 1\n", "    return x + 3\n")
    repo.commit("edit helper")
    repo.edit("app/core.py", "def old_name(y):", "def new_name(y):")
    repo.edit("app/service.py", "import old_name\n    return old_name(y)", "import new_name\n    return new_name(y)")
    repo.commit("rename")
    repo.git("checkout", "-q", "main")  # main moves on: its own change must not count
    repo.edit("app/util.py", "    return compute(x)\n", "    return compute(x) * 1\n")
    repo.commit("main work")
    repo.git("checkout", "-q", "feature")
    r = run(mode="base", base="main")
    assert r["change"]["base"] == base
    assert changed(r) == [("app.core.helper", "modified"), ("app.core.new_name", "renamed"),
                          ("app.service.uses_old", "modified")]
    assert selected(r) == ["tests/test_core.py::test_compute", "tests/test_core.py::test_helper",
                           "tests/test_engine.py::test_run", "tests/test_service.py::test_serve",
                           "tests/test_service.py::test_uses_old"]


def test_diff_given_as_text(repo, run):
    repo.edit("app/core.py", "    return x + 1\n", "    return x + 5\n")
    text = repo.git("diff")
    r = run(text=text)
    assert changed(r) == [("app.core.helper", "modified")]
    assert r["change"]["mode"] == "diff"


def test_unsaved_buffer_is_the_new_version(repo, run):
    data = (repo.root / "app/util.py").read_text().replace("return compute(x)", "return compute(x) - 1")
    r = run(buffers={"app/util.py": data.encode()})
    assert changed(r) == [("app.util.wrap", "modified")]
    assert selected(r) == ["tests/test_service.py::test_serve"]


def test_syntax_error_reports_the_file_not_removed_symbols(repo, run):
    repo.edit("app/util.py", "def wrap(x):", "def wrap(x:")
    r = run()
    assert r["symbols"] == []  # never "every symbol removed"
    [f] = r["files"]
    assert f["path"] == "app/util.py" and f["parse_error"]
    assert any("app/util.py does not parse" in n for n in r["notes"])
    # a file that does not parse is a change of the file: the tests importing it are selected
    assert selected(r) == ["tests/test_service.py::test_serve", "tests/test_service.py::test_uses_old"]


def test_errors_are_clear(repo, tmp_path):
    with pytest.raises(diff.ChangeError, match="unknown ref 'nope'"):
        diff.from_git(repo.root, "base", "nope")
    (tmp_path / "plain").mkdir()
    with pytest.raises(diff.ChangeError, match="not inside a git work tree"):
        diff.from_git(tmp_path / "plain")
    with pytest.raises(diff.ChangeError, match="not a unified diff"):
        diff.from_text(repo.root, "hello\nworld\n")


def test_walk_equals_plain_bfs(repo, run, store, settings):
    ix = WorkspaceIndexer(repo.root, store, settings)
    impact.refresh(ix)
    try:
        rows = ix.graph.ro_query("MATCH (a:Symbol)-[:CALLS]->(b:Symbol) RETURN a.file, a.qual, b.file, b.qual").rows
        edges = [((a, b), (c, d)) for a, b, c, d in rows]
        starts = [("app/core.py", "app.core.helper"), ("app/core.py", "app.core.old_name")]
        for depth in (1, 2, 3, 6):
            got = callers_of_all(ix.graph, [{"file": f, "qual": q} for f, q in starts], depth, Answer()).rows
            want = reaching(edges + [(s, "root") for s in starts], "root", depth + 1)
            want = {k: v - 1 for k, v in want.items() if k not in starts}
            assert {(r["file"], r["qual"]): r["depth"] for r in got} == want
    finally:
        ix.graph.delete()


def test_javascript_test_files_are_selected_whole(tmp_path, store, settings):
    from changes_repo import Repo

    repo = Repo(tmp_path / "js")
    repo.write("src/math.js", "export function add(a, b) {\n  return a + b;\n}\n\n"
                              "export function mul(a, b) {\n  return a * b;\n}\n")
    repo.write("src/math.test.js", "import { add } from './math';\n\ntest('adds', () => {\n"
                                   "  expect(add(1, 2)).toBe(3);\n});\n")
    repo.write("src/__tests__/mul.js", "import { mul } from '../math';\n\ndescribe('mul', () => {\n"
                                       "  it('multiplies', () => expect(mul(2, 3)).toBe(6));\n});\n")
    repo.commit("base")
    repo.edit("src/math.js", "return a * b;", "return b * a;")
    ix = WorkspaceIndexer(repo.root, store, settings)
    try:
        impact.refresh(ix)
        r = impact.analyse(ix.graph, diff.from_git(repo.root), ix.root_package)
    finally:
        ix.graph.delete()
    assert changed(r) == [("src/math.js#mul", "modified")]
    assert [(t["id"], t["runner"]) for t in r["tests"]["selected"]] == [("src/__tests__/mul.js", "js")]
    assert r["tests"]["commands"]["js_files"] == ["src/__tests__/mul.js"] and r["tests"]["commands"]["pytest"] is None
