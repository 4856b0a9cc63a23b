"""The built-in planner (no model configured) on this project's own graph: the repository's
``orbit_lsp/`` folder indexed into the session's FalkorDB. Expected answers come from an
independent reading of the sources with ``ast``."""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import pytest

from orbit_lsp.agent.history import History
from orbit_lsp.agent.planner import NO_MODEL, match
from orbit_lsp.agent.tools import MAX_LIST
from orbit_lsp.agent.service import Asker
from orbit_lsp.index.indexer import WorkspaceIndexer

PKG = Path(__file__).resolve().parents[1] / "orbit_lsp"


@pytest.fixture(scope="module")
def own(store, settings):
    ix = WorkspaceIndexer(PKG, store, settings)
    ix.index_all()
    yield ix
    ix.graph.delete()


@pytest.fixture
def asker(settings, tmp_path):
    a = Asker(settings.model_copy(update={"agent_model": None}), History(tmp_path / "h.sqlite3"))
    yield a
    a.close()


def _modules() -> dict[str, str]:
    """dotted module name -> path relative to orbit_lsp/."""
    out = {}
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG).as_posix()
        parts = ["orbit_lsp", *rel[:-3].split("/")]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = rel
    return out


def _import_edges() -> dict[str, set[str]]:
    """importer path -> imported paths, read from every import statement (any depth)."""
    mods = _modules()
    edges: dict[str, set[str]] = {}
    for name, rel in mods.items():
        tree = ast.parse((PKG / rel).read_text())
        pkg = name if rel.endswith("__init__.py") else name.rsplit(".", 1)[0]
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                if t in mods and mods[t] != rel:
                    edges.setdefault(rel, set()).add(mods[t])
    return edges


def _dependents(path: str, max_hops: int = 4) -> dict[str, int]:
    rev: dict[str, set[str]] = {}
    for a, bs in _import_edges().items():
        for b in bs:
            rev.setdefault(b, set()).add(a)
    hops, todo = {}, deque([(path, 0)])
    while todo:
        cur, h = todo.popleft()
        if h == max_hops:
            continue
        for d in sorted(rev.get(cur, ())):
            if d != path and d not in hops:
                hops[d] = h + 1
                todo.append((d, h + 1))
    return hops


def _function(rel: str, name: str) -> ast.FunctionDef:
    tree = ast.parse((PKG / rel).read_text())
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def _calls(fn: ast.FunctionDef) -> set[str]:
    return {n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", "")
            for n in ast.walk(fn) if isinstance(n, ast.Call)}


def test_question_forms():
    assert match("What depends on graph/errors.py?") == ("depends", {"x": "graph/errors.py"})
    assert match("who calls `run_readonly`?") == ("callers", {"x": "run_readonly"})
    assert match("How does cmd_cypher reach check_readonly_text?") == ("chain", {"a": "cmd_cypher",
                                                                                 "b": "check_readonly_text"})
    assert match("which files use package falkordb") == ("package", {"p": "falkordb"})
    assert match("explain the architecture") is None


@pytest.mark.parametrize("target", ["graph/errors.py", "agent/redact.py"])
def test_what_depends_on_file(own, asker, target):
    expected = _dependents(target)
    assert expected  # both files are imported
    res = asker.ask(f"What depends on {target}?", own.graph, own.root)
    assert res.planner and res.model is None and res.error is None
    assert NO_MODEL in res.markdown and "no model was used" in res.markdown
    [step] = [s for s in res.steps if s.tool == "impact_of"]
    assert step.rows == len(expected)
    # the answer lists at most MAX_LIST dependents (and says so); each listed one with its hops
    listed = {line.split("`")[1] for line in res.answer.splitlines() if line.startswith("- `")}
    assert listed <= set(expected) and len(listed) == min(len(expected), MAX_LIST)
    for path in listed:
        hops = expected[path]
        assert f"- `{path}` — {hops} hop{'s' if hops != 1 else ''}" in res.answer, path
    if len(expected) > MAX_LIST:
        assert f"only the first {MAX_LIST} of {len(expected)} are listed" in res.answer
    assert f"**{len(expected)} files depend on `{target}`**" in res.answer
    assert "```cypher" in res.markdown and "IMPORTS" in res.markdown


def test_what_depends_on_a_file_by_its_basename(own, asker):
    res = asker.ask("what depends on readonly.py", own.graph, own.root)
    assert [s.tool for s in res.steps] == ["cypher_query", "impact_of"]
    assert res.steps[1].args == {"path": "graph/readonly.py"}
    assert set(_dependents("graph/readonly.py")) == {
        line.split("`")[1] for line in res.answer.splitlines() if line.startswith("- `")}


def test_how_does_a_reach_b(own, asker):
    # read from the sources: cmd_cypher calls run_readonly, which calls check_readonly_text;
    # cmd_cypher does not call check_readonly_text itself, so the shortest chain has 2 calls
    assert "run_readonly" in _calls(_function("cli/cmd_queries.py", "cmd_cypher"))
    assert "check_readonly_text" not in _calls(_function("cli/cmd_queries.py", "cmd_cypher"))
    assert "check_readonly_text" in _calls(_function("graph/readonly.py", "run_readonly"))
    res = asker.ask("How does cmd_cypher reach check_readonly_text?", own.graph, own.root)
    assert res.planner and [s.tool for s in res.steps] == ["call_chain"]
    assert res.answer.splitlines()[:4] == [
        "**`cmd_cypher` reaches `check_readonly_text`** in 2 calls:",
        f"1. `orbit_lsp.cli.cmd_queries.cmd_cypher` (`cli/cmd_queries.py:{_function('cli/cmd_queries.py', 'cmd_cypher').lineno}`)",
        f"2. `orbit_lsp.graph.readonly.run_readonly` (`graph/readonly.py:{_function('graph/readonly.py', 'run_readonly').lineno}`)",
        "3. `orbit_lsp.graph.readonly.check_readonly_text` "
        f"(`graph/readonly.py:{_function('graph/readonly.py', 'check_readonly_text').lineno}`)"]


def test_who_calls_and_package_users(own, asker):
    res = asker.ask("who calls check_readonly_text?", own.graph, own.root)
    assert "`orbit_lsp.graph.readonly.run_readonly`" in res.answer and res.steps[0].tool == "find_symbol"
    users = sorted(p.relative_to(PKG).as_posix() for p in PKG.rglob("*.py")
                   if any(isinstance(n, ast.Import) and any(a.name == "openai" for a in n.names)
                          for n in ast.walk(ast.parse(p.read_text()))))
    res = asker.ask("which files use package openai?", own.graph, own.root)
    assert users and [ln.split("`")[1] for ln in res.answer.splitlines() if ln.startswith("- `")] == users


def test_unknown_question_and_unknown_names(own, asker):
    res = asker.ask("Summarise the architecture", own.graph, own.root)
    assert res.planner and not res.steps and "does not understand" in res.answer and NO_MODEL in res.markdown
    res = asker.ask("what depends on nowhere/missing.py", own.graph, own.root)
    assert "not a file or symbol in the code graph" in res.answer
