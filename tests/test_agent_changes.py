"""The agent's ``change_impact`` tool and the built-in planner's "what does my change break?",
on the git repository of tests/changes_repo.py with an uncommitted edit."""

from __future__ import annotations

import pytest

from changes_repo import make_repo
from orbit_lsp.agent.history import History
from orbit_lsp.agent.planner import match
from orbit_lsp.agent.service import Asker
from orbit_lsp.agent.tools import Toolbox, ToolError
from orbit_lsp.index.indexer import WorkspaceIndexer


@pytest.fixture
def indexed(tmp_path, store, settings):
    repo = make_repo(tmp_path / "ws")
    repo.edit("app/core.py", "    return x + 1\n", "    return x + 2\n")
    ix = WorkspaceIndexer(repo.root, store, settings)
    ix.index_all()
    yield repo, ix
    ix.graph.delete()


def test_tool(indexed, settings):
    repo, ix = indexed
    res = Toolbox(ix.graph, repo.root, settings).run("change_impact", {})
    d = res.data
    assert d["change"] == "working tree vs HEAD"
    assert d["changed"]["items"] == [{"qual": "app.core.helper", "file": "app/core.py", "line": 4, "status": "modified"}]
    assert d["callers"]["count"] == 8  # test_run reaches helper through its engine fixture
    assert [t["id"] for t in d["tests_to_run"]["items"]] == [
        "tests/test_core.py::test_compute", "tests/test_core.py::test_helper", "tests/test_engine.py::test_run",
        "tests/test_service.py::test_serve"]
    assert d["run"].startswith("pytest tests/test_core.py::test_compute ")
    assert res.cypher and all("query" in c for c in res.cypher)
    # depth bounds the callers listed
    assert Toolbox(ix.graph, repo.root, settings).run("change_impact", {"depth": 1}).data["callers"]["count"] == 2


@pytest.mark.parametrize("args, message", [
    ({"staged": "yes"}, "true or false"),
    ({"base": "main", "staged": True}, "not both"),
    ({"base": "--all"}, "never starts with '-'"),
    ({"base": "no-such-ref"}, "unknown ref 'no-such-ref'"),
    ({"depth": 9}, "depth"),
])
def test_bad_arguments(indexed, settings, args, message):
    repo, ix = indexed
    with pytest.raises(ToolError, match=message):
        Toolbox(ix.graph, repo.root, settings).run("change_impact", args)


@pytest.mark.parametrize("q", ["What does my change break?", "what do my changes break", "Which tests should I run?",
                               "impact of my changes"])
def test_planner_recognises(q):
    assert match(q)[0] == "changes"


def test_planner_answers(indexed, settings, tmp_path):
    repo, ix = indexed
    asker = Asker(settings.model_copy(update={"agent_model": None}), History(tmp_path / "h.sqlite3"))
    try:
        res = asker.ask("What does my change break?", ix.graph, repo.root)
    finally:
        asker.close()
    assert res.planner and [s.tool for s in res.steps] == ["change_impact"]
    assert "**Your changes** (working tree vs HEAD) touch 1 symbol(s):" in res.answer
    assert "- modified `app.core.helper` (`app/core.py:4`)" in res.answer
    assert "**Tests to run: 4**" in res.answer
    assert "pytest tests/test_core.py::test_compute tests/test_core.py::test_helper" in res.answer
