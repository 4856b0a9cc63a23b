"""Tests of the ``orbit-lsp`` command line (orbit_lsp/cli/).

Most run ``main([...])`` in-process against the session's embedded FalkorDB (``data_dir``
fixture); one runs the installed console script in a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import shared_case
from orbit_lsp.cli import main
from orbit_lsp.graph.connection import code_graph_name

CASE_001 = "001"
IMPACT_001 = [{"path": "app/tools/diag.py", "hops": 1}, {"path": "app/tools/__init__.py", "hops": 2}]


@pytest.fixture(autouse=True)
def _embedded_only(monkeypatch, data_dir):
    """Every CLI run uses the session's embedded server, whatever the developer's environment."""
    monkeypatch.delenv("ORBIT_FALKORDB_URL", raising=False)
    monkeypatch.setenv("ORBIT_DATA_DIR", str(data_dir))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """``main(argv)`` in-process: (exit status, stdout, stderr)."""
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(capsys, *argv: str) -> dict:
    rc, out, err = run(capsys, *argv, "--json")
    assert rc == 0, err
    return json.loads(out)


def assert_one_line_error(err: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("orbit-lsp: ")
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def ws001(tmp_path_factory, store):
    """Case 001's workspace, indexed once for the module (deleted afterwards)."""
    src = shared_case(CASE_001)
    ws = tmp_path_factory.mktemp("cli") / "ws001"
    shutil.copytree(src / "workspace", ws, symlinks=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("ORBIT_FALKORDB_URL", raising=False)
        assert main(["--data-dir", str(store.settings.data_dir), "index", str(ws), "--json"]) == 0
    yield ws
    store.graph(code_graph_name(ws)).delete()


@pytest.fixture
def fresh_ws(case_workspace, store):
    """A private, not yet indexed copy of case 001 (its graph deleted afterwards)."""
    ws = case_workspace(CASE_001)
    yield ws
    store.graph(code_graph_name(ws)).delete()


# -- index ----------------------------------------------------------------------------------------

def test_index_summary_and_reopen(capsys, fresh_ws):
    rc, out, err = run(capsys, "index", str(fresh_ws))
    assert rc == 0, err
    assert f"Indexed {os.path.realpath(fresh_ws)} (full)" in out
    for label in ("files", "symbols", "imports", "calls", "packages", "unresolved calls",
                  "skipped files", "parse errors"):
        assert f"  {label} " in out
    assert "Most depended-on files" in out
    assert "Cypher (1 statement):" in out and "LIMIT $limit" in out
    # stderr is not a TTY here: plain progress lines, no carriage returns
    assert "indexing" in err and "\r" not in err

    doc = run_json(capsys, "index", str(fresh_ws))
    res = doc["result"]
    assert doc["command"] == "index" and doc["graph"] == code_graph_name(fresh_ws)
    assert res["mode"] == "unchanged" and res["files"] == 7 and res["reused"] == 7
    assert res["imports"] >= 3 and res["calls"] >= 2 and res["symbols"] >= 4
    assert res["skipped"] == [] and res["parse_errors"] == []
    top = {r["path"]: r["importers"] for r in res["most_depended_on"]}
    assert top["app/jenkins/build_tree.py"] == 1 and top["app/tools/diag.py"] == 1
    assert doc["cypher"][0]["params"] == {"limit": 10}

    (fresh_ws / "app" / "misc" / "flatten.py").write_text("def flatten(rows):\n    return rows\n")
    assert run_json(capsys, "index", str(fresh_ws))["result"]["mode"] == "incremental"


def test_index_subprocess_console_script(fresh_ws, data_dir):
    script = Path(sys.executable).parent / "orbit-lsp"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "orbit_lsp"]
    env = {k: v for k, v in os.environ.items() if k != "ORBIT_FALKORDB_URL"}
    env["ORBIT_DATA_DIR"] = str(data_dir)
    proc = subprocess.run(cmd + ["index", str(fresh_ws)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "(full)" in proc.stdout
    assert "  files              7 (7 parsed, 0 unchanged)" in proc.stdout
    assert "app/jenkins/build_tree.py" in proc.stdout  # among the most depended-on files
    assert "Traceback" not in proc.stderr
    assert "indexing" in proc.stderr and "(100%)" in proc.stderr


def test_index_bad_path(capsys, tmp_path):
    rc, out, err = run(capsys, "index", str(tmp_path / "missing"))
    assert rc == 2 and out == ""
    assert_one_line_error(err)
    f = tmp_path / "f.py"
    f.write_text("x = 1\n")
    rc, _, err = run(capsys, "index", str(f))
    assert rc == 2
    assert_one_line_error(err)


# -- impact -----------------------------------------------------------------------------------------

def test_impact_case_001(capsys, ws001):
    doc = run_json(capsys, "impact", "app/jenkins/build_tree.py", "--workspace", str(ws001))
    assert doc["result"]["file"] == "app/jenkins/build_tree.py"
    assert doc["result"]["rows"] == IMPACT_001
    assert doc["cypher"] and all({"query", "params"} <= set(c) for c in doc["cypher"])
    assert any("$frontier" in c["query"] for c in doc["cypher"])

    rc, out, err = run(capsys, "impact", "app/jenkins/build_tree.py", "--workspace", str(ws001))
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == "app/jenkins/build_tree.py: 2 dependents, 2 hops"
    assert lines[1].split() == ["1", "app/tools/diag.py"]
    assert lines[2].split() == ["2", "app/tools/__init__.py"]
    assert "Cypher (" in out and 'params: {"p": "app/jenkins/build_tree.py"}' in out

    # an absolute path names the same file
    doc = run_json(capsys, "impact", str(ws001 / "app" / "jenkins" / "build_tree.py"), "--workspace", str(ws001))
    assert doc["result"]["rows"] == IMPACT_001

    rc, out, _ = run(capsys, "impact", "app/misc/flatten.py", "--workspace", str(ws001))
    assert rc == 0 and out.startswith("app/misc/flatten.py: 0 dependents")


def test_impact_path_relative_to_cwd_picks_the_indexed_workspace(capsys, ws001, monkeypatch):
    monkeypatch.chdir(ws001.parent)
    doc = run_json(capsys, "impact", "ws001/app/jenkins/build_tree.py")
    assert doc["workspace"] == os.path.realpath(ws001)
    assert doc["result"]["rows"] == IMPACT_001


def test_impact_unknown_file(capsys, ws001, tmp_path):
    rc, out, err = run(capsys, "impact", "app/nope.py", "--workspace", str(ws001))
    assert rc == 2 and out == ""
    assert_one_line_error(err)
    assert "no such file" in err
    outside = tmp_path / "elsewhere.py"
    outside.write_text("x = 1\n")
    rc, _, err = run(capsys, "impact", str(outside), "--workspace", str(ws001))
    assert rc == 2 and "outside the workspace" in err
    rc, _, err = run(capsys, "impact", "app/tools", "--workspace", str(ws001))
    assert rc == 2 and "is a directory" in err


def test_impact_of_a_file_the_graph_lacks_says_why(capsys, tmp_path, store):
    """A file on disk without a node in the graph: the error says what it is not (a source file
    of a supported language) or why a source file can be missing, never "not a Python file"
    for a TypeScript one."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".gitignore").write_text("gen.py\n")
    (ws / "app.py").write_text("def f():\n    return 1\n")
    (ws / "gen.py").write_text("def g():\n    return 2\n")
    (ws / "notes.txt").write_text("not code\n")
    try:
        assert main(["index", str(ws)]) == 0
        (ws / "later.ts").write_text("export const x = 1;\n")  # created after the index
        rc, out, err = run(capsys, "impact", "notes.txt", "--workspace", str(ws))
        assert rc == 1 and out == ""
        assert_one_line_error(err)
        assert "notes.txt is not in the graph" in err
        assert "not a source file orbit indexes (Python, JavaScript, TypeScript)" in err
        for rel in ("gen.py", "later.ts"):
            rc, out, err = run(capsys, "impact", rel, "--workspace", str(ws))
            assert rc == 1 and out == "", rel
            assert_one_line_error(err)
            assert f"{rel} is not in the graph" in err and "not a source file" not in err
            assert "excluded (.gitignore, --exclude)" in err and "created since the last index" in err
        doc = json.loads(run(capsys, "--json", "impact", "later.ts", "--workspace", str(ws))[1])
        assert doc["kind"] == "runtime" and doc["exit_status"] == 1 and "run 'orbit-lsp index'" in doc["error"]
    finally:
        store.graph(code_graph_name(os.path.realpath(ws))).delete()


def test_query_indexes_a_workspace_first(capsys, fresh_ws):
    rc, out, err = run(capsys, "impact", "app/jenkins/build_tree.py", "--workspace", str(fresh_ws))
    assert rc == 0, err
    assert "not indexed yet; indexing it first (7 files)" in err
    assert "2 dependents, 2 hops" in out


def test_query_on_a_new_branch_says_which_graph_it_indexes(capsys, tmp_path):
    """A query on a branch that has no graph yet names the branch it indexes for and passes on
    the index's notes (the graph started from the branch it was on last)."""
    ws = tmp_path / "repo"
    ws.mkdir()
    (ws / "lib.py").write_text("def f():\n    return 1\n")
    (ws / "app.py").write_text("from lib import f\n\n\ndef g():\n    return f()\n")

    def git(*args):
        subprocess.run(["git", "-c", "user.email=t@x", "-c", "user.name=t", *args], cwd=ws, check=True,
                       capture_output=True)

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    try:
        rc, _, err = run(capsys, "index", str(ws))
        assert rc == 0, err
        git("checkout", "-q", "-b", "feature")
        rc, out, err = run(capsys, "callers", "f", "--workspace", str(ws))
        assert rc == 0, err
        assert f"{ws} (branch feature) is not indexed yet; indexing it first (2 files)" in err
        assert "started from this folder's graph of branch 'main' (orbit_code_" in err and ", 2 files)" in err
        assert "lib.f  (function, lib.py:1)" in out and "app.g" in out
    finally:
        assert main(["workspaces", "drop", str(ws)]) == 0  # both branches' graphs


# -- callers / chain -------------------------------------------------------------------------------

def test_callers_per_candidate(capsys, ws001):
    doc = run_json(capsys, "callers", "flatten", "--workspace", str(ws001))
    res = doc["result"]
    assert any("matches 2 symbols" in n for n in res["notes"])
    by_target = {r["target"]["qual"]: r for r in res["rows"]}
    assert set(by_target) == {"app.jenkins.build_tree.flatten", "app.misc.flatten.flatten"}
    callers = {c["qual"] for c in by_target["app.jenkins.build_tree.flatten"]["callers"]}
    assert "app.tools.diag.run" in callers
    assert by_target["app.misc.flatten.flatten"]["callers"] == []

    rc, out, _ = run(capsys, "callers", "flatten", "--workspace", str(ws001))
    assert rc == 0
    assert "app.jenkins.build_tree.flatten  (function, app/jenkins/build_tree.py:1)" in out
    assert "app.tools.diag.run" in out and "app/tools/diag.py:4" in out
    assert "  0 callers" in out  # misc.flatten: a known zero, not "unknown"
    assert "Cypher (" in out and 'params: {"n": "flatten"}' in out


def test_callers_reports_unresolved_call_sites(capsys, tmp_path, store):
    ws = tmp_path / "unres"
    ws.mkdir()
    (ws / "a.py").write_text("def helper():\n    pass\n")
    (ws / "b.py").write_text("def go(x):\n    x.helper()\n")
    try:
        rc, out, err = run(capsys, "callers", "helper", "--workspace", str(ws))
        assert rc == 0, err
        assert "  0 callers" in out
        # the unbound site is counted and located (file:line, caller)
        assert "1 unbound call site uses this name (may call it; not counted above):" in out
        assert "    b.py:2  in b.go" in out
        doc = run_json(capsys, "callers", "helper", "--workspace", str(ws))
        assert doc["result"]["rows"][0]["callers"] == []
        assert doc["result"]["rows"][0]["unresolved_elsewhere"] == 1
        assert doc["result"]["rows"][0]["unbound"] == {"total": 1, "sites": [{"file": "b.py", "caller": "b.go", "line": 2}]}
    finally:
        store.graph(code_graph_name(ws)).delete()


def test_callers_depth_and_unknown_symbol(capsys, ws001):
    doc = run_json(capsys, "callers", "app.jenkins.build_tree.flatten", "--depth", "2", "--workspace", str(ws001))
    assert doc["result"]["depth"] == 2
    rc, out, err = run(capsys, "callers", "no_such_function", "--workspace", str(ws001))
    assert rc == 1 and out == ""
    assert_one_line_error(err)
    assert "no symbol named 'no_such_function'" in err


def test_chain(capsys, ws001):
    doc = run_json(capsys, "chain", "run", "app.jenkins.build_tree.flatten", "--workspace", str(ws001))
    rows = doc["result"]["rows"]
    assert rows and [n["qual"] for n in rows[0]["path"]] == ["app.tools.diag.run", "app.jenkins.build_tree.flatten"]
    assert any("shortestPath" in c["query"] for c in doc["cypher"])

    rc, out, _ = run(capsys, "chain", "run", "flatten", "--workspace", str(ws001))
    assert rc == 0
    assert "app.tools.diag.run -> app.jenkins.build_tree.flatten: 1 call" in out
    assert "target 'flatten' matches 2 symbols" in out
    assert "shortestPath" in out

    rc, out, _ = run(capsys, "chain", "app.misc.flatten.flatten", "run", "--workspace", str(ws001))
    assert rc == 0 and "no call path" in out


# -- cypher -----------------------------------------------------------------------------------------

def test_cypher_read_reports_truncation(capsys, ws001):
    q = "MATCH (f:File) RETURN f.path AS path ORDER BY path"
    rc, out, err = run(capsys, "cypher", q, "--row-cap", "2", "--workspace", str(ws001))
    assert rc == 0, err
    assert out.splitlines()[0].strip() == "path"
    assert "app/__init__.py" in out
    assert "Truncated: more than 2 rows" in out
    assert "LIMIT 3" in out  # the executed text is shown
    doc = run_json(capsys, "cypher", q, "--workspace", str(ws001))
    assert doc["result"]["truncated"] is False and doc["result"]["rows_returned"] == 7
    assert doc["cypher"][0]["query"].endswith("LIMIT 501")
    doc = run_json(capsys, "cypher", "MATCH (s:Symbol {name: $n}) RETURN s.qual", "--params",
                   '{"n": "run"}', "--workspace", str(ws001))
    assert doc["result"]["rows"] == [["app.tools.diag.run"]]


@pytest.mark.parametrize("query", [
    "CREATE (n:Evil {x: 1}) RETURN n",
    "MATCH (f:File) DETACH DELETE f",
    "LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row",
])
def test_cypher_refuses_writes(capsys, ws001, store, query):
    rc, out, err = run(capsys, "cypher", query, "--workspace", str(ws001))
    assert rc == 1 and out == ""
    assert_one_line_error(err)
    assert "refused" in err
    g = store.graph(code_graph_name(ws001))
    assert g.ro_query("MATCH (n:Evil) RETURN count(n)").rows[0][0] == 0
    assert g.ro_query("MATCH (f:File) RETURN count(f)").rows[0][0] == 7


# -- export -----------------------------------------------------------------------------------------

def _check_export(doc: dict, ws: Path) -> None:
    assert {"workspace", "graph", "files", "symbols", "packages", "edges"} <= set(doc)
    assert doc["workspace"] == os.path.realpath(ws)
    paths = {f["path"] for f in doc["files"]}
    assert "app/jenkins/build_tree.py" in paths and len(paths) == 7
    assert all({"path", "lang", "lines", "hash"} <= set(f) for f in doc["files"])
    sym = next(s for s in doc["symbols"] if s["qual"] == "app.jenkins.build_tree.flatten")
    assert sym["line"] == 1 and sym["kind"] == "function" and sym["file"] == "app/jenkins/build_tree.py"
    types = {e["type"] for e in doc["edges"]}
    assert {"DEFINES", "IMPORTS", "CALLS"} <= types
    assert {"type": "IMPORTS", "from": "app/tools/diag.py", "to": "app/jenkins/build_tree.py"}.items() <= \
        next(e for e in doc["edges"] if e["type"] == "IMPORTS" and e["from"] == "app/tools/diag.py").items()
    call = next(e for e in doc["edges"] if e["type"] == "CALLS"
                and e["from"] == "app/tools/diag.py::app.tools.diag.run")
    assert call["to"] == "app/jenkins/build_tree.py::app.jenkins.build_tree.flatten" and "resolved" in call


def test_export_file_and_stdout(capsys, ws001, tmp_path):
    target = tmp_path / "graph.json"
    rc, out, err = run(capsys, "export", str(target), "--workspace", str(ws001))
    assert rc == 0, err
    assert out.startswith("exported 7 files") and "Cypher (" in out
    _check_export(json.loads(target.read_text()), ws001)

    rc, out, err = run(capsys, "export", "-", "--workspace", str(ws001))
    assert rc == 0
    _check_export(json.loads(out), ws001)  # stdout is the document alone
    assert "exported 7 files" in err
    rc, out, err = run(capsys, "export", "-", "--workspace", str(ws001), "--json")
    assert rc == 0
    _check_export(json.loads(out), ws001)
    assert json.loads(err)["result"]["edges"] > 0

    doc = run_json(capsys, "export", str(target), "--workspace", str(ws001))
    assert doc["result"]["files"] == 7 and len(doc["cypher"]) >= 5


def test_export_unwritable_target(capsys, ws001, tmp_path):
    rc, _, err = run(capsys, "export", str(tmp_path / "no" / "such" / "dir.json"), "--workspace", str(ws001))
    assert rc == 2
    assert_one_line_error(err)


# -- db ---------------------------------------------------------------------------------------------

def test_db_status(capsys, ws001, data_dir):
    doc = run_json(capsys, "db", "status")
    res = doc["result"]
    assert res["mode"] == "embedded" and res["running"] is True
    assert res["dir"] == str(Path(data_dir).resolve() / "falkordb")
    assert code_graph_name(ws001) in res["graphs"]
    rc, out, _ = run(capsys, "--data-dir", str(data_dir), "db", "status")
    assert rc == 0 and out.startswith("embedded FalkorDB: running (pid ")
    assert "code graph" in out


def test_db_on_an_external_url_that_is_down(capsys):
    rc, _, err = run(capsys, "db", "status", "--falkordb-url", "redis://127.0.0.1:1")
    assert rc == 1 and "FalkorDB offline" in err
    rc, _, err = run(capsys, "db", "stop", "--falkordb-url", "redis://127.0.0.1:1")
    assert rc == 1 and "external FalkorDB" in err


# -- errors -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["frobnicate"],
    ["callers"],
    ["chain", "only_one"],
    ["callers", "x", "--depth", "0"],
    ["callers", "x", "--depth", "two"],
    ["impact"],
    ["db"],
    ["db", "restart"],
    ["cypher", "MATCH (n) RETURN n", "--params", "{not json"],
    ["cypher", "MATCH (n) RETURN n", "--row-cap", "-5"],
    ["--stdio", "index", "."],
    ["index", ".", "--falkordb-url", "http://example.com"],
    ["--no-such-option"],
])
def test_bad_arguments_exit_2_with_one_line(capsys, argv):
    rc, out, err = run(capsys, *argv)
    assert rc == 2
    assert out == ""
    assert_one_line_error(err)


def _read_pty_until(fd: int, marker: bytes, timeout: float) -> bytes:
    import select

    out, deadline = b"", time.monotonic() + timeout
    while marker not in out and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.2)[0]:
            try:
                out += os.read(fd, 4096)
            except OSError:  # the other side closed
                break
    return out


@pytest.mark.parametrize("argv, told", [([], True), (["--stdio"], False)])
def test_server_on_a_terminal_says_what_it_waits_for(data_dir, argv, told):
    """``orbit-lsp`` typed without a command on a terminal is the language server: it says so on
    stderr (and how to leave, and where the commands are) instead of looking hung; ``--stdio``,
    what editors pass, stays silent. Ctrl-D (end of input) ends it with status 0."""
    import pty
    import signal

    env = {k: v for k, v in os.environ.items() if k != "ORBIT_FALKORDB_URL"}
    env["ORBIT_DATA_DIR"] = str(data_dir)
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdin, stdout and stderr are the terminal
        os.execve(sys.executable, [sys.executable, "-m", "orbit_lsp", *argv], env)
    try:
        out = _read_pty_until(fd, b"Ctrl-D ends it", 20 if told else 3).decode(errors="replace")
        if told:
            assert "no command given, so this is the language server, waiting for LSP messages on stdin" in out
            assert "'orbit-lsp --help' lists the commands" in out
        else:
            assert out == ""
        os.write(fd, b"\x04")  # Ctrl-D: end of input
        deadline = time.monotonic() + 20
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert done[0] == pid, "the server did not end at end of input"
        assert os.waitstatus_to_exitcode(done[1]) == 0
    finally:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == 0:  # still running: an assertion above failed
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        except ChildProcessError:  # reaped already
            pass
        os.close(fd)


def test_help_exits_0(capsys):
    rc, out, _ = run(capsys, "--help")
    assert rc == 0 and "impact" in out and "callers" in out
    rc, out, _ = run(capsys, "callers", "--help")
    assert rc == 0 and "--depth" in out


def test_falkordb_offline(capsys, ws001):
    rc, out, err = run(capsys, "--falkordb-url", "redis://127.0.0.1:1", "impact",
                       "app/jenkins/build_tree.py", "--workspace", str(ws001))
    assert rc == 1 and out == ""
    assert_one_line_error(err)
    assert "FalkorDB offline" in err and "redis://127.0.0.1:1" in err


def test_offline_message_hides_the_password(capsys, ws001, monkeypatch):
    monkeypatch.setenv("ORBIT_FALKORDB_URL", "redis://user:hunter2secret@127.0.0.1:1/0")
    rc, _, err = run(capsys, "callers", "run", "--workspace", str(ws001), "-v")
    assert rc == 1
    assert "FalkorDB offline" in err
    assert "hunter2secret" not in err


def test_server_unavailable_is_one_line(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "orbit_lsp.server.app", None)  # import fails
    for argv in ([], ["--stdio"]):
        rc, out, err = run(capsys, *argv)
        assert rc == 2 and out == ""
        assert_one_line_error(err)


def test_recently_indexed_workspace_below_cwd_is_used(capsys, tmp_path, monkeypatch, store, case_dir):
    parent = tmp_path / "proj"
    ws = parent / "src"
    shutil.copytree(case_dir(CASE_001) / "workspace", ws)
    monkeypatch.chdir(parent)
    try:
        assert run(capsys, "index", "src")[0] == 0
        rc, out, err = run(capsys, "callers", "run")
        assert rc == 0, err
        assert f"workspace {os.path.realpath(ws)}" in err
        assert "app.tools.diag.run" in out
    finally:
        store.graph(code_graph_name(ws)).delete()


def test_several_workspaces_below_cwd_the_note_names_the_others(capsys, tmp_path, monkeypatch, store):
    """With two indexed workspaces below the current directory the query reads the one indexed
    last and its note names the other one and how to choose it."""
    parent = tmp_path / "proj"
    first, last = parent / "first", parent / "last"
    for ws, body in ((first, "return 1"), (last, "return 2")):
        ws.mkdir(parents=True)
        (ws / "lib.py").write_text(f"def f():\n    {body}\n")
    monkeypatch.chdir(parent)
    try:
        assert run(capsys, "index", "first")[0] == 0 and run(capsys, "index", "last")[0] == 0
        rc, out, err = run(capsys, "callers", "f")
        assert rc == 0, err
        assert (f"workspace {os.path.realpath(last)} (the most recently indexed here; also indexed: "
                f"{os.path.realpath(first)}; --workspace PATH chooses)") in err
        assert "lib.f  (function, lib.py:1)" in out
    finally:
        for ws in (first, last):
            store.graph(code_graph_name(os.path.realpath(ws))).delete()


def test_parse_errors_in_summary_not_as_log_noise(capsys, tmp_path, store):
    ws = tmp_path / "broken"
    ws.mkdir()
    (ws / "ok.py").write_text("def f():\n    return 1\n")
    (ws / "bad.py").write_text("def g(:\n")
    try:
        rc, out, err = run(capsys, "index", str(ws))
        assert rc == 0, err
        assert "  parse errors       1" in out and "parse error bad.py: line 1" in out
        assert "WARNING" not in err  # the summary says it; no log line without -v
        (ws / "bad.py").write_text("def g(:\n    pass\n")
        rc, out, err = run(capsys, "-v", "index", str(ws))
        assert rc == 0 and "parse error in bad.py" in err  # -v logs it
    finally:
        store.graph(code_graph_name(ws)).delete()


def test_unexpected_error_is_one_line(capsys, monkeypatch):
    import orbit_lsp.cli as cli

    def boom(ctx):
        raise RuntimeError("something broke")

    monkeypatch.setitem(cli.COMMANDS, "db", boom)
    rc, out, err = run(capsys, "db", "status")
    assert rc == 1 and out == ""
    assert_one_line_error(err)
    assert "internal error: RuntimeError: something broke" in err
    rc, _, err = run(capsys, "-v", "db", "status")
    assert rc == 1 and "Traceback" in err  # -v logs it


def test_progress_bar_on_a_tty():
    import io

    from orbit_lsp.cli import ProgressBar

    class Tty(io.StringIO):
        def isatty(self):
            return True

    s = Tty()
    p = ProgressBar("indexing x", s)
    p(1, 4, "a.py")
    p(4, 4, "d.py")
    p.finish()
    text = s.getvalue()
    assert "\r" in text and "[######" in text and "4/4 d.py" in text
    assert text.endswith("\r\x1b[K")

    plain = io.StringIO()
    p = ProgressBar("indexing x", plain)
    for i in range(1, 201, 50):
        p(i, 200, f"f{i}.py")
    p(200, 200, "last.py")
    lines = plain.getvalue().splitlines()
    assert lines[0] == "indexing x: reading 200 files" and lines[-1] == "indexing x: reading 200/200 (100%)"
    assert len(lines) <= 6
