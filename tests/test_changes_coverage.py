"""``changes --tests --coverage``: the static test selection narrowed by a coverage map of the
base version (orbit_lsp/changes/coverage_map.py).

One small git repository per module (``BASE``), its suite run once for real under pytest-cov
with a context per test (``pytest --cov=app --cov-context=test``, in a subprocess of this
interpreter) to make the map; each test changes the working tree (and sometimes commits a new
base after the map), asserts the selection, and the repository is reset to its base after it.

What the suite executes in ``BASE`` (Python's semantics, so what the map records):

- ``check(x)`` calls ``error(x)`` only for x < 0: test_pos, test_zero and test_neg all reach
  ``error`` statically (CALLS), only test_neg enters it;
- ``config.load()`` runs at import (``SETTINGS = load()``, the empty context) and in test_reload;
- ``cache.warm()`` runs in the module-scoped fixture ``warmed``: its setup is credited by coverage
  to the first test requesting it (test_a) only, though test_b and test_c use the same value
  (they are in the map: they run ``cache.size``);
- ``hooks.on_item`` is called only through ``getattr`` on a module found by ``importlib`` and
  handed to ``map``: no CALLS or IMPORTS edge leads from test_dispatch to it; test_module_handler
  and test_own_handler call ``h.on_item`` on a parametrize argument (an unbound call: "may be
  affected" statically): the first gets the module (it enters ``on_item``), the second a
  ``Doubler`` of its own (it does not; it is in the map: it runs ``cache.size``).
"""

from __future__ import annotations

import io
import json
import os
import shutil
from contextlib import redirect_stderr, redirect_stdout

import pytest

from changes_repo import Repo, record_coverage as record
from orbit_lsp.changes import diff, impact
from orbit_lsp.changes.coverage_map import CoverageMap, CoverageMapError
from orbit_lsp.cli import main
from orbit_lsp.index.indexer import WorkspaceIndexer

BASE = {
    ".gitignore": "__pycache__/\n",
    "app/__init__.py": "",
    "app/core.py": '''
        def check(x):
            if x < 0:
                return error(x)
            return x


        def error(x):
            raise ValueError(f"negative: {x}")
        ''',
    "app/config.py": '''
        def load():
            return {"debug": False}


        SETTINGS = load()
        ''',
    "app/cache.py": '''
        def warm():
            return {"ready": True}


        def size(d):
            return len(d)
        ''',
    "app/hooks.py": '''
        def on_item(x):
            return x * 2
        ''',
    "tests/__init__.py": "",
    "tests/test_core.py": '''
        import pytest

        from app.core import check


        def test_pos():
            assert check(1) == 1


        @pytest.mark.parametrize("x", [0, 2])
        def test_zero(x):
            assert check(x) == x


        def test_neg():
            with pytest.raises(ValueError):
                check(-1)
        ''',
    "tests/test_config.py": '''
        from app import config


        def test_debug():
            assert config.SETTINGS["debug"] is False


        def test_reload():
            assert config.load() == {"debug": False}
        ''',
    "tests/test_cache.py": '''
        import pytest

        from app.cache import size, warm


        @pytest.fixture(scope="module")
        def warmed():
            return warm()


        def test_a(warmed):
            assert warmed["ready"]


        def test_b(warmed):
            assert size(warmed) == 1


        def test_c(warmed):
            assert size(warmed) > 0


        def test_other():
            assert True
        ''',
    "tests/test_hooks.py": '''
        import importlib

        import pytest

        from app import hooks
        from app.cache import size


        def test_dispatch():
            mod = importlib.import_module("app." + "hooks")
            handler = getattr(mod, "on_" + "item")
            assert list(map(handler, [1, 2])) == [2, 4]


        class Doubler:
            def on_item(self, x):
                return x + x


        @pytest.mark.parametrize("h", [hooks])
        def test_module_handler(h):
            assert h.on_item(3) == 6


        @pytest.mark.parametrize("h", [Doubler()])
        def test_own_handler(h):
            assert h.on_item(2) == size([1, 2, 3, 4])
        ''',
}


@pytest.fixture(scope="module")
def ws(tmp_path_factory, store, settings):
    top = tmp_path_factory.mktemp("covmap")
    repo = Repo(top / "ws")
    for rel, text in BASE.items():
        repo.write(rel, text)
    base = repo.commit("base")
    record(repo.root, top / "map.coverage")
    ix = WorkspaceIndexer(repo.root, store, settings)
    impact.refresh(ix)
    yield repo, base, top / "map.coverage", ix
    ix.graph.delete()


@pytest.fixture
def repo(ws):
    repo, base, _, _ = ws
    yield repo
    repo.git("reset", "-q", "--hard", base)
    repo.git("clean", "-qfd")


@pytest.fixture
def cmap(ws):
    repo, _, path, _ = ws
    return CoverageMap(path, repo.root)


def analyse(ws, cmap=None) -> dict:
    repo, _, _, ix = ws
    impact.refresh(ix)
    change = diff.from_git(repo.root, "worktree")
    return impact.analyse(ix.graph, change, ix.root_package, impact.Options(coverage=cmap))


def ids(result, key="selected") -> list[str]:
    return [t["id"] for t in result["tests"][key]]


def symbol_modes(result) -> dict[str, tuple[str, str]]:
    return {s["qual"]: (s["mode"], s["reason"]) for s in result["tests"]["coverage"]["symbols"]}


CORE = ["tests/test_core.py::test_neg", "tests/test_core.py::test_pos", "tests/test_core.py::test_zero"]


def test_entered_by_one_of_three(ws, repo, cmap):
    repo.edit("app/core.py", 'f"negative: {x}"', 'f"negative value: {x}"')
    static = analyse(ws)
    assert ids(static) == CORE
    r = analyse(ws, cmap)
    assert ids(r) == ["tests/test_core.py::test_neg"]
    cov = r["tests"]["coverage"]
    assert (cov["static"], cov["narrowed"]) == (3, 1)
    assert cov["path"] == str(ws[2]) and cov["mtime"] == os.stat(ws[2]).st_mtime
    assert symbol_modes(r) == {"app.core.error": ("narrowed", "1 test enters it")}
    t = r["tests"]["selected"][0]
    assert t["coverage"] == "enters" and t["reason"] == "enters app.core.error (run; coverage map)"
    assert r["totals"]["tests"] == 1
    assert r["tests"]["commands"]["pytest"] == "pytest tests/test_core.py::test_neg"


def test_called_at_import_stays_static(ws, repo, cmap):
    repo.edit("app/config.py", '"debug": False', '"debug": False, "level": 1')
    r = analyse(ws, cmap)
    assert ids(r) == ["tests/test_config.py::test_debug", "tests/test_config.py::test_reload"]
    assert symbol_modes(r) == {
        "app.config.load": ("static", "runs outside any test (module-level code calls it at import)")}
    assert {t["coverage"] for t in r["tests"]["selected"]} == {"static"}


def test_narrowed_and_static_symbols_together(ws, repo, cmap):
    repo.edit("app/core.py", 'f"negative: {x}"', 'f"negative value: {x}"')
    repo.edit("app/config.py", '"debug": False', '"debug": False, "level": 1')
    r = analyse(ws, cmap)
    assert ids(r) == ["tests/test_config.py::test_debug", "tests/test_config.py::test_reload",
                      "tests/test_core.py::test_neg"]
    assert [(s["qual"], s["mode"]) for s in r["tests"]["coverage"]["symbols"]] == [
        ("app.config.load", "static"), ("app.core.error", "narrowed")]


def test_stale_map_stays_static(ws, repo, cmap):
    # a new base after the map: two comment lines on top shift every line the map recorded
    p = repo.root / "app/core.py"
    p.write_text("# core\n# checks\n" + p.read_text())
    repo.commit("comments")
    repo.edit("app/core.py", 'f"negative: {x}"', 'f"negative value: {x}"')
    r = analyse(ws, cmap)
    assert ids(r) == CORE
    assert symbol_modes(r) == {"app.core.error": ("static", "coverage map is stale for app/core.py")}


def test_test_added_after_the_map_is_kept(ws, repo, cmap):
    repo.write("tests/test_more.py", '''
        import pytest

        from app.core import check


        def test_neg_again():
            with pytest.raises(ValueError):
                check(-2)
        ''')
    repo.commit("a test after the map")
    repo.edit("app/core.py", 'f"negative: {x}"', 'f"negative value: {x}"')
    r = analyse(ws, cmap)
    assert ids(r) == ["tests/test_core.py::test_neg", "tests/test_more.py::test_neg_again"]
    kept = next(t for t in r["tests"]["selected"] if t["id"].endswith("test_neg_again"))
    assert kept["coverage"] == "not in map"
    assert kept["reason"].endswith("; not in the coverage map (added or skipped since it was recorded)")
    assert r["tests"]["coverage"]["kept"]["not_in_map"] == ["tests/test_more.py::test_neg_again"]


def test_module_scoped_fixture_setup(ws, repo, cmap):
    # coverage credits the setup of the module-scoped ``warmed`` to test_a only; test_b and
    # test_c are in the map (they run ``size``), so only the fixture's scope keeps them
    assert cmap.entering("app/cache.py", {2})[0] == {"tests/test_cache.py::test_a": {"setup"}}
    assert {"tests/test_cache.py::test_b", "tests/test_cache.py::test_c"} <= cmap.tests
    repo.edit("app/cache.py", '{"ready": True}', '{"ready": True, "n": 1}')
    r = analyse(ws, cmap)
    assert ids(r) == ["tests/test_cache.py::test_a", "tests/test_cache.py::test_b", "tests/test_cache.py::test_c"]
    how = {t["id"]: t["coverage"] for t in r["tests"]["selected"]}
    assert how == {"tests/test_cache.py::test_a": "enters", "tests/test_cache.py::test_b": "fixture scope",
                   "tests/test_cache.py::test_c": "fixture scope"}
    b = next(t for t in r["tests"]["selected"] if t["id"].endswith("test_b"))
    assert "sharing fixture 'warmed' (module scope) with tests/test_cache.py::test_a" in b["reason"]
    assert r["tests"]["coverage"]["kept"] == {"not_in_map": [], "stale": [],
                                              "fixture_scope": ["tests/test_cache.py::test_b",
                                                                "tests/test_cache.py::test_c"]}


def test_callback_the_graph_cannot_see_and_unbound_calls(ws, repo, cmap):
    repo.edit("app/hooks.py", "return x * 2", "return 2 * x")
    static = analyse(ws)
    assert ids(static) == []  # no path in the graph
    assert ids(static, "may_be_affected") == ["tests/test_hooks.py::test_module_handler",
                                              "tests/test_hooks.py::test_own_handler"]
    r = analyse(ws, cmap)
    assert ids(r) == ["tests/test_hooks.py::test_dispatch", "tests/test_hooks.py::test_module_handler"]
    assert ids(r, "may_be_affected") == []
    cov = r["tests"]["coverage"]
    assert (cov["static"], cov["narrowed"], cov["static_may"], cov["narrowed_may"]) == (0, 2, 2, 0)
    t = r["tests"]["selected"][0]
    assert t["depth"] is None and t["reason"] == "enters app.hooks.on_item (run; coverage map); not reached statically"
    assert r["tests"]["selected"][1]["coverage"] == "enters"


def test_bad_maps(ws, tmp_path):
    repo = ws[0]
    with pytest.raises(CoverageMapError, match="no such file"):
        CoverageMap(tmp_path / "none.coverage", repo.root)
    (tmp_path / "junk").write_text("not a database")
    with pytest.raises(CoverageMapError, match="not a coverage.py data file"):
        CoverageMap(tmp_path / "junk", repo.root)
    record(repo.root, tmp_path / "plain.coverage", contexts=False)
    with pytest.raises(CoverageMapError, match="recorded without per-test contexts; run pytest with "
                                               "--cov-context=test"):
        CoverageMap(tmp_path / "plain.coverage", repo.root)


@pytest.fixture
def cli_env(monkeypatch, data_dir):
    monkeypatch.delenv("ORBIT_FALKORDB_URL", raising=False)
    monkeypatch.setenv("ORBIT_DATA_DIR", str(data_dir))


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def test_cli(ws, repo, cli_env, tmp_path):
    repo.edit("app/core.py", 'f"negative: {x}"', 'f"negative value: {x}"')
    path = str(ws[2])
    rc, out, err = cli("changes", "--tests", "--coverage", path, "--workspace", str(repo.root))
    assert rc == 0, err
    assert "Tests: 1 selected of 12\n" in out
    assert (f"Coverage map {path} (recorded " in out and
            "): 1 test selected (static: 3); 1 of 1 changed symbol narrowed\n"
            "  narrowed  app.core.error  (1 test enters it)\n" in out)
    assert "Run: pytest tests/test_core.py::test_neg\n" in out
    rc, out, err = cli("changes", "--coverage", path, "--workspace", str(repo.root), "--json")
    assert rc == 0, err
    cov = json.loads(out)["result"]["tests"]["coverage"]
    assert (cov["static"], cov["narrowed"], cov["symbols"][0]["mode"]) == (3, 1, "narrowed")
    rc, out, err = cli("changes", "--coverage", path, "--workspace", str(repo.root), "--format", "markdown")
    assert rc == 0, err
    assert f"Coverage map {path} (recorded " in out and "- narrowed  app.core.error  (1 test enters it)" in out
    rc, out, err = cli("changes", "--tests", "--coverage", str(tmp_path / "none"), "--workspace", str(repo.root))
    assert rc == 2 and out == ""
    assert err.strip().endswith(f"--coverage: coverage map {tmp_path / 'none'}: no such file (record one with: "
                                f"pytest --cov=PKG --cov-context=test)")
    assert "Traceback" not in err


def test_a_map_recorded_in_another_checkout_is_mapped_by_its_paths(ws, repo, tmp_path):
    """A map recorded by CI in its own checkout (other absolute paths, same files) narrows as
    one recorded here: the recorded root is found from the paths whose rest names a workspace
    file, and said in the result."""
    elsewhere = tmp_path / "runner" / "work" / "app"
    shutil.copytree(repo.root, elsewhere, ignore=shutil.ignore_patterns(".git"))
    record(elsewhere, tmp_path / "ci.coverage")
    cmap = CoverageMap(tmp_path / "ci.coverage", repo.root)
    assert cmap.recorded_root == str(elsewhere.resolve()) and cmap.measures("app/core.py")
    repo.edit("app/core.py", 'f"negative: {x}"', 'f"negative value: {x}"')
    r = analyse(ws, cmap)
    assert ids(r) == ["tests/test_core.py::test_neg"]
    assert r["tests"]["coverage"]["recorded_root"] == str(elsewhere.resolve())
    # a map of files that are not this workspace's is not mapped at all
    (tmp_path / "unrelated" / "lib").mkdir(parents=True)
    (tmp_path / "unrelated" / "lib" / "core.py").write_text("x = 1\n")
    other = CoverageMap(tmp_path / "ci.coverage", tmp_path / "unrelated")
    assert other.recorded_root is None and other.files == {}


def test_a_map_of_a_project_in_a_subdirectory_has_its_test_ids_placed(tmp_path, store, settings):
    """pytest writes test ids relative to its rootdir: a map recorded in a project that is a
    subdirectory of the workspace (a monorepo) names ``tests/test_core.py::test_neg`` for the
    workspace's ``proj/tests/test_core.py::test_neg``. Its ids are put under that directory,
    and the answer says so; without that nothing would be narrowed."""
    mono = Repo(tmp_path / "mono")
    for rel, text in BASE.items():
        mono.write(f"proj/{rel}", text)
    base = mono.commit("base")
    record(mono.root / "proj", tmp_path / "proj.coverage")
    ix = WorkspaceIndexer(mono.root, store, settings)
    try:
        impact.refresh(ix)
        cmap = CoverageMap(tmp_path / "proj.coverage", mono.root)
        assert "tests/test_core.py::test_neg" in cmap.tests and cmap.measures("proj/app/core.py")
        mono.edit("proj/app/core.py", 'f"negative: {x}"', 'f"negative value: {x}"')
        impact.refresh(ix)
        change = diff.from_git(mono.root, "worktree")
        r = impact.analyse(ix.graph, change, ix.root_package, impact.Options(coverage=cmap))
        assert ids(r) == ["proj/tests/test_core.py::test_neg"]
        assert r["tests"]["coverage"]["tests_under"] == "proj"
        assert symbol_modes(r) == {"proj.app.core.error": ("narrowed", "1 test enters it")}
        assert "tests/test_core.py::test_neg" not in cmap.tests  # placed
    finally:
        mono.git("reset", "-q", "--hard", base)
        ix.graph.delete()
