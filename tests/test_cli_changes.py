"""``orbit-lsp changes`` on a real git repository (tests/changes_repo.py), in-process."""

from __future__ import annotations

import io
import json
import sys

import pytest

from changes_repo import make_repo
from orbit_lsp.cli import main
from orbit_lsp.graph.connection import code_graph_name


@pytest.fixture(autouse=True)
def _embedded_only(monkeypatch, data_dir):
    monkeypatch.delenv("ORBIT_FALKORDB_URL", raising=False)
    monkeypatch.setenv("ORBIT_DATA_DIR", str(data_dir))


@pytest.fixture
def repo(tmp_path, store):
    r = make_repo(tmp_path / "ws")
    r.edit("app/core.py", "    return x + 1\n", "    return x + 2\n")
    yield r
    store.graph(code_graph_name(r.root)).delete()


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_text(capsys, repo):
    rc, out, err = run(capsys, "changes", "--tests", "--workspace", str(repo.root))
    assert rc == 0, err
    assert "Change: working tree vs HEAD — 1 file, 1 changed symbol" in out
    assert "  modified  app.core.helper (function)  app/core.py:4" in out
    assert "Blast radius: 8 callers within 4 hops (2 at 1, 3 at 2, 2 at 3, 1 at 4)" in out
    # a dependent file names the changed file it depends on; at 2 hops it imports a file that
    # imports it (tests/test_service.py imports app.service), so "imports" would be wrong
    assert "Dependent files: 6 within 4 hops" in out
    assert "  1  app/service.py  (depends on app/core.py)" in out
    assert "  2  tests/test_service.py  (depends on app/core.py)" in out
    assert "Tests: 4 selected of 10" in out
    assert ("Run: pytest tests/test_core.py::test_compute tests/test_core.py::test_helper "
            "tests/test_engine.py::test_run tests/test_service.py::test_serve") in out
    assert "\nCypher (" in out and "MATCH (c:Symbol)-[e:CALLS]->" in out


def test_json_and_depth(capsys, repo):
    rc, out, err = run(capsys, "changes", "--workspace", str(repo.root), "--depth", "1", "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["command"] == "changes" and doc["cypher"]
    res = doc["result"]
    assert {c["qual"] for c in res["callers"]} == {"app.core.compute", "tests.test_core.test_helper"}
    assert res["tests"]["selected"] == [] and res["options"]["tests"] is False  # without --tests


def test_markdown_with_mermaid(capsys, repo):
    rc, out, err = run(capsys, "changes", "--tests", "--workspace", str(repo.root), "--format", "markdown")
    assert rc == 0, err
    assert out.startswith("## Orbit change impact")
    assert "```mermaid\nflowchart RL" in out
    assert '["app.core.helper"]:::changed' in out
    assert "```sh\npytest tests/test_core.py::test_compute" in out
    assert "<summary>Cypher (" in out


def test_markdown_diagram_is_capped_with_totals(capsys, repo):
    from orbit_lsp.changes import render

    rc, out, _ = run(capsys, "changes", "--workspace", str(repo.root), "--json")
    res = json.loads(out)["result"]
    res["cypher"] = []
    diagram = render.mermaid(res, cap=3)
    nodes = [line for line in diagram.splitlines() if '["' in line and "more" not in line]
    assert len(nodes) == 3
    assert 'more["… 6 more symbols not drawn (totals below)"]' in diagram  # 1 changed + 8 callers - 3


def test_staged_and_stdin_diff(capsys, repo, monkeypatch):
    rc, out, _ = run(capsys, "changes", "--staged", "--workspace", str(repo.root), "--json")
    assert json.loads(out)["result"]["symbols"] == []  # nothing staged
    patch = repo.git("diff")
    monkeypatch.setattr(sys, "stdin", io.StringIO(patch))
    rc, out, err = run(capsys, "changes", "--diff", "-", "--workspace", str(repo.root), "--json")
    assert rc == 0, err
    assert [s["qual"] for s in json.loads(out)["result"]["symbols"]] == ["app.core.helper"]


def test_fail_on(capsys, repo):
    rc, out, err = run(capsys, "changes", "--workspace", str(repo.root), "--fail-on", "callers=7", "--fail-on", "public=100")
    assert rc == 3 and "Blast radius: 8 callers" in out
    assert err.strip() == "orbit-lsp: --fail-on callers=7: 8 exceeds it"
    rc, _, _ = run(capsys, "changes", "--workspace", str(repo.root), "--fail-on", "callers=8")
    assert rc == 0
    # a threshold on tests computes them even without --tests (4 tests reach app.core.helper)
    rc, _, err = run(capsys, "changes", "--workspace", str(repo.root), "--fail-on", "tests=3")
    assert rc == 3 and err.strip() == "orbit-lsp: --fail-on tests=3: 4 exceeds it"
    rc, _, _ = run(capsys, "changes", "--workspace", str(repo.root), "--fail-on", "tests=4")
    assert rc == 0


@pytest.mark.parametrize("argv, message", [
    (["--fail-on", "nope=3"], "expected KEY=N"),
    (["--fail-on", "callers=x"], "whole number"),
    (["--base", "HEAD", "--staged"], "not allowed with"),
    (["--depth", "0"], "at least 1"),
])
def test_usage_errors(capsys, repo, argv, message):
    rc, _, err = run(capsys, "changes", "--workspace", str(repo.root), *argv)
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1


def test_runtime_errors_are_one_line(capsys, repo, tmp_path):
    rc, _, err = run(capsys, "changes", "--workspace", str(repo.root), "--base", "no-such-ref")
    assert rc == 1 and err.strip() == "orbit-lsp: unknown ref 'no-such-ref'"
    plain = tmp_path / "plain"
    plain.mkdir()
    rc, _, err = run(capsys, "changes", "--workspace", str(plain))
    assert rc == 1 and "is not inside a git work tree" in err and "Traceback" not in err
    assert "give the change as a unified diff: orbit-lsp changes --diff FILE (- for stdin)" in err
