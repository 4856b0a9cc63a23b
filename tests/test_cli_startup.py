"""A query from the command line loads only what it needs, and says when its answer may be stale.

The start-up cost of ``orbit-lsp callers X`` is measured by ``python -m bench.run cli-latency``
(never timed here); these tests pin down its cause: which modules a query imports (a real
process, its ``sys.modules`` after a real answer), and the freshness check that replaced
re-indexing on a query (files of the answer hashed again against ``File.hash``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orbit_lsp.cli import main
from orbit_lsp.graph.connection import code_graph_name

# Top-level packages (and orbit modules) that only the language server, the indexer, the agent
# or the MCP server need: a read-only query must not import them.
SERVER_STACK = ("pygls", "lsprotocol", "tree_sitter", "openai", "mcp", "mcp_types", "watchdog", "anyio",
                "uvicorn", "starlette", "pathspec", "orbit_lsp.server", "orbit_lsp.agent", "orbit_lsp.mcp.server",
                "orbit_lsp.mcp.tools", "orbit_lsp.mcp.live", "orbit_lsp.index.indexer", "orbit_lsp.index.python",
                "orbit_lsp.index.resolve", "orbit_lsp.index.parsing", "orbit_lsp.index.javascript",
                "orbit_lsp.index.walk", "orbit_lsp.memory", "orbit_lsp.changes")

PROBE = textwrap.dedent("""
    import contextlib, io, json, sys
    from orbit_lsp.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(sys.argv[1:])
    print(json.dumps({"rc": rc, "out": out.getvalue(), "modules": sorted(sys.modules)}))
""")


@pytest.fixture(autouse=True)
def _embedded_only(monkeypatch, data_dir):
    monkeypatch.delenv("ORBIT_FALKORDB_URL", raising=False)
    monkeypatch.setenv("ORBIT_DATA_DIR", str(data_dir))


@pytest.fixture(scope="module")
def ws(tmp_path_factory, store):
    """A small package, indexed once: ``util.helper`` is called by ``app.run`` and ``app.main``."""
    root = tmp_path_factory.mktemp("startup") / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "util.py").write_text("def helper(x):\n    return x + 1\n")
    (root / "pkg" / "app.py").write_text(
        "from pkg.util import helper\n\n\ndef run():\n    return helper(1)\n\n\ndef main():\n    return helper(2)\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("ORBIT_FALKORDB_URL", raising=False)
        assert main(["--data-dir", str(store.settings.data_dir), "index", str(root), "--json"]) == 0
    yield root
    store.graph(code_graph_name(root)).delete()


def probe(data_dir: Path, cwd: Path, *argv: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "ORBIT_FALKORDB_URL"}
    env["ORBIT_DATA_DIR"] = str(data_dir)
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def loaded(modules: list[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


@pytest.mark.parametrize("argv", [
    ("callers", "helper", "--json"),
    ("impact", "pkg/util.py", "--json"),
    ("chain", "run", "helper", "--json"),
])
def test_a_query_does_not_import_the_server_stack(ws, data_dir, argv):
    got = probe(data_dir, ws, *argv)
    assert got["rc"] == 0
    doc = json.loads(got["out"])
    if argv[0] == "callers":  # a real answer came from the graph
        (entry,) = doc["result"]["rows"]
        assert sorted(c["qual"] for c in entry["callers"]) == ["pkg.app.main", "pkg.app.run"]
    elif argv[0] == "impact":
        assert [r["path"] for r in doc["result"]["rows"]] == ["pkg/app.py"]
    else:
        assert [n["qual"] for n in doc["result"]["rows"][0]["path"]] == ["pkg.app.run", "pkg.util.helper"]
    assert doc["result"]["stale_files"] == []
    present = [name for name in SERVER_STACK if loaded(got["modules"], name)]
    assert present == [], f"'{' '.join(argv)}' imported {present}"


def test_help_lists_every_command_although_a_query_builds_only_its_own_parser(capsys):
    from orbit_lsp.cli import COMMANDS

    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)
    # a command name given as an option's value does not hide the real command
    assert main(["--workspace", "index", "callers", "--help"]) == 0
    assert "SYMBOL" in capsys.readouterr().out


def test_a_misspelt_command_still_lists_the_commands(capsys):
    assert main(["calers", "x"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'calers'" in err and "'callers'" in err and "'index'" in err


def test_an_answer_from_files_edited_since_the_index_says_the_graph_may_be_stale(ws, capsys, store):
    app = ws / "pkg" / "app.py"
    before = app.read_text()
    try:
        app.write_text(before + "\n\ndef later():\n    return helper(3)\n")
        assert main(["--workspace", str(ws), "callers", "helper", "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        # the graph's answer is the indexed one; the edited file is named, not silently used
        (entry,) = doc["result"]["rows"]
        assert sorted(c["qual"] for c in entry["callers"]) == ["pkg.app.main", "pkg.app.run"]
        assert doc["result"]["stale_files"] == ["pkg/app.py"]
        assert any("may be stale" in n and "pkg/app.py" in n for n in doc["result"]["notes"])
        assert doc["cypher"][-1]["params"] == {"paths": ["pkg/app.py", "pkg/util.py"]}

        assert main(["--workspace", str(ws), "callers", "helper"]) == 0
        out = capsys.readouterr().out
        assert "note: the graph may be stale: 1 file of this answer changed on disk since it was indexed " \
               "(pkg/app.py); run 'orbit-lsp index' to update it" in out

        (ws / "pkg" / "util.py").rename(ws / "pkg" / "util_gone.py")  # a file of the answer deleted
        assert main(["--workspace", str(ws), "chain", "run", "helper", "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["result"]["stale_files"] == ["pkg/app.py", "pkg/util.py"]
    finally:
        app.write_text(before)
        if (ws / "pkg" / "util_gone.py").exists():
            (ws / "pkg" / "util_gone.py").rename(ws / "pkg" / "util.py")
    assert main(["--workspace", str(ws), "callers", "helper", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["result"]["stale_files"] == []
