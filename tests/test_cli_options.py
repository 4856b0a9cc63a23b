"""``orbit-lsp`` options before the command name, JSON errors, ``--exclude`` and query-error
wording (issue 18 items 9, 10, 13).

In-process runs of ``main`` against the session's embedded FalkorDB, plus real processes of the
console script for the exit statuses a shell sees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orbit_lsp.cli import main
from orbit_lsp.graph.connection import code_graph_name


@pytest.fixture(autouse=True)
def _embedded_only(monkeypatch, data_dir):
    monkeypatch.delenv("ORBIT_FALKORDB_URL", raising=False)
    monkeypatch.setenv("ORBIT_DATA_DIR", str(data_dir))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def cli(data_dir: Path, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The installed console script in a real process."""
    script = Path(sys.executable).parent / "orbit-lsp"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "orbit_lsp"]
    env = {k: v for k, v in os.environ.items() if k != "ORBIT_FALKORDB_URL"}
    env["ORBIT_DATA_DIR"] = str(data_dir)
    return subprocess.run(cmd + list(argv), capture_output=True, text=True, env=env, timeout=180,
                          cwd=cwd)


@pytest.fixture(scope="module")
def small_ws(tmp_path_factory, store):
    """a.py calls b.helper; sub/c.py and gen/d_pb2.py define more functions."""
    ws = tmp_path_factory.mktemp("opts") / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "gen").mkdir()
    (ws / "a.py").write_text("from b import helper\n\n\ndef run():\n    return helper()\n")
    (ws / "b.py").write_text("def helper():\n    return 1\n")
    (ws / "sub" / "c.py").write_text("def in_sub():\n    return 2\n")
    (ws / "gen" / "d_pb2.py").write_text("def generated():\n    return 3\n")
    (ws / "web.js").write_text("export function hello() { return 1; }\n")
    yield ws
    store.graph(code_graph_name(ws)).delete()


def _files(store, ws: Path) -> set[str]:
    g = store.graph(code_graph_name(ws))
    return {r[0] for r in g.ro_query("MATCH (f:File) RETURN f.path").rows}


# -- item 9: options before the command, JSON errors --------------------------------------------

def test_json_and_workspace_before_the_command(capsys, small_ws, store):
    rc, out, err = run(capsys, "--json", "--workspace", str(small_ws), "index")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["command"] == "index" and doc["workspace"] == str(small_ws)
    rc, out, err = run(capsys, "--json", "--workspace", str(small_ws), "callers", "helper")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["workspace"] == str(small_ws)
    [entry] = doc["result"]["rows"]
    assert entry["target"]["qual"] == "b.helper" and [c["qual"] for c in entry["callers"]] == ["a.run"]
    # and after the command, as before
    rc, out2, _ = run(capsys, "callers", "helper", "--json", "--workspace", str(small_ws))
    assert rc == 0 and json.loads(out2)["result"] == doc["result"]
    # index takes it after its name too, as every other command
    rc, out3, err = run(capsys, "index", "--json", "--workspace", str(small_ws))
    assert rc == 0, err
    assert json.loads(out3)["workspace"] == str(small_ws)
    rc, _, err = run(capsys, "index", str(small_ws / "sub"), "--workspace", str(small_ws))
    assert rc == 2 and "two workspaces given" in err


def test_workspace_before_a_command_that_takes_none_is_refused(capsys, small_ws):
    rc, out, err = run(capsys, "--workspace", str(small_ws), "db", "status")
    assert rc == 2 and out == "" and "--workspace does not apply to 'db status'" in err
    rc, out, err = run(capsys, "--workspace", str(small_ws), "index", str(small_ws / "sub"))
    assert rc == 2 and "two workspaces given" in err


@pytest.mark.parametrize("argv, kind, code", [
    (["--json", "callers"], "usage", 2),                       # argparse: missing argument
    (["callers", "--json", "--depth", "0", "x"], "usage", 2),  # argparse: bad value
    (["--json", "frobnicate"], "usage", 2),                    # unknown command
    (["--json"], "usage", 2),                                  # --json needs a command
    (["--json", "--falkordb-url", "redis://127.0.0.1:1", "callers", "x"], "falkordb_offline", 1),
])
def test_errors_are_json_on_stdout_with_the_same_exit_status(data_dir, argv, kind, code):
    proc = cli(data_dir, *argv)
    assert proc.returncode == code, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["kind"] == kind and doc["exit_status"] == code
    assert isinstance(doc["error"], str) and doc["error"] and "Traceback" not in proc.stderr


def test_runtime_error_as_json(capsys, small_ws):
    rc, out, err = run(capsys, "--json", "callers", "no_such_function", "--workspace", str(small_ws))
    assert rc == 1 and err == ""
    doc = json.loads(out)
    assert doc == {"command": "callers", "kind": "runtime", "exit_status": 1,
                   "error": f"no symbol named 'no_such_function' in the graph of {small_ws}"}


def test_without_json_errors_stay_one_line_on_stderr(capsys):
    rc, out, err = run(capsys, "callers")
    assert rc == 2 and out == "" and err.startswith("orbit-lsp: error: ") and len(err.splitlines()) == 1


# -- item 13: a Cypher syntax error is not a refusal ----------------------------------------------

def test_cypher_syntax_error_is_reported_as_such(capsys, small_ws):
    run(capsys, "index", str(small_ws))
    rc, out, err = run(capsys, "cypher", "MATCH (n RETURN n", "--workspace", str(small_ws))
    assert rc == 1 and out == ""
    assert "refused" not in err
    assert err.startswith("orbit-lsp: Cypher syntax error reported by FalkorDB: Invalid input 'R'")
    assert "(line 1, column 10 of: MATCH (n RETURN n)" in err
    rc, out, err = run(capsys, "--json", "cypher", "MATCH (n RETURN n", "--workspace", str(small_ws))
    assert rc == 1 and json.loads(out)["kind"] == "query_syntax"
    # an undefined variable is not a refusal either; a write still is
    rc, out, err = run(capsys, "cypher", "MATCH (n) RETURN m", "--workspace", str(small_ws))
    assert rc == 1 and "refused" not in err and "'m' not defined" in err
    rc, out, err = run(capsys, "--json", "cypher", "CREATE (n:X) RETURN n", "--workspace", str(small_ws))
    assert rc == 1 and json.loads(out)["kind"] == "query_refused" and "read-only" in json.loads(out)["error"]


# -- item 10: --exclude --------------------------------------------------------------------------

def test_exclude_on_index(capsys, small_ws, store):
    rc, out, err = run(capsys, "index", str(small_ws), "--exclude", "sub/", "--exclude", "*_pb2.py")
    assert rc == 0, err
    assert _files(store, small_ws) == {"a.py", "b.py", "web.js"}
    # without it the next index brings them back (the flag is per run, like a changed setting)
    rc, out, err = run(capsys, "index", str(small_ws))
    assert rc == 0 and _files(store, small_ws) == {"a.py", "b.py", "web.js", "sub/c.py", "gen/d_pb2.py"}


def test_exclude_on_a_query_that_indexes_first(capsys, tmp_path, store):
    ws = tmp_path / "q"
    (ws / "vendor").mkdir(parents=True)
    (ws / "main.py").write_text("def start():\n    pass\n")
    (ws / "vendor" / "lib.py").write_text("def start():\n    pass\n")
    try:
        rc, out, err = run(capsys, "callers", "start", "--workspace", str(ws), "--exclude", "vendor/")
        assert rc == 0, err
        assert _files(store, ws) == {"main.py"}
        assert "main.start" in out and "vendor" not in out
        # on an indexed workspace --exclude changes nothing and says so
        rc, out, err = run(capsys, "callers", "start", "--workspace", str(ws), "--exclude", "other/")
        assert rc == 0 and "--exclude applies when a workspace is indexed" in err
    finally:
        store.graph(code_graph_name(ws)).delete()


def test_bad_exclude_pattern(capsys, small_ws):
    rc, out, err = run(capsys, "index", str(small_ws), "--exclude", "  ")
    assert rc == 2 and "--exclude needs a non-empty" in err


def test_index_help_names_every_language(data_dir):
    proc = cli(data_dir, "index", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "Python, JavaScript, TypeScript" in text and "the Python files" not in text
    assert "--exclude PATTERN" in text


# -- issue 18 item 4: say when FalkorDB is starting ------------------------------------------------

def test_starting_the_embedded_server_is_said(tmp_path):
    own = tmp_path / "data"  # a data dir of its own: its embedded server is not running yet
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("def f():\n    return 1\n")
    try:
        proc = cli(own, "db", "status")
        assert proc.returncode == 0 and "not running" in proc.stdout and proc.stderr == ""
        proc = cli(own, "index", str(ws))
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.splitlines()[0] == "orbit-lsp: starting the embedded FalkorDB"
        proc = cli(own, "callers", "f", "--workspace", str(ws))
        assert proc.returncode == 0 and "starting" not in proc.stderr
    finally:
        assert cli(own, "db", "stop").returncode == 0
