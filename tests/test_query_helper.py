"""The query helper (orbit_lsp.query_helper, orbit_lsp.launch) with real processes: the console
script as a user runs it, the helper it starts, the embedded FalkorDB of the session.

Every test compares what the helper answers with what the in-process path answers
(``ORBIT_NO_HELPER=1``): same stdout, stderr and exit status. Which path answered is read from
``ORBIT_HELPER_TRACE`` (one line per command, written by the client).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from orbit_lsp.cli import main
from orbit_lsp.graph.connection import code_graph_name

SCRIPT = Path(sys.executable).parent / "orbit-lsp"
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "orbit_lsp"]
PACKAGE = Path(__file__).resolve().parents[1] / "orbit_lsp"


@pytest.fixture(scope="module")
def ws(tmp_path_factory, store):
    """``pkg.util.helper`` called by ``pkg.app.run`` and ``pkg.app.main``; ``pkg.shapes.Shape``
    with one subclass; indexed once."""
    root = tmp_path_factory.mktemp("helper") / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "util.py").write_text("def helper(x):\n    return x + 1\n")
    (root / "pkg" / "app.py").write_text(
        "from pkg.util import helper\n\n\ndef run():\n    return helper(1)\n\n\ndef main():\n    return helper(2)\n")
    (root / "pkg" / "shapes.py").write_text(
        "class Shape:\n    def area(self):\n        return 0\n\n\nclass Square(Shape):\n    def area(self):\n"
        "        return 4\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("ORBIT_FALKORDB_URL", raising=False)
        assert main(["--data-dir", str(store.settings.data_dir), "index", str(root), "--json"]) == 0
    yield root
    store.graph(code_graph_name(root)).delete()


class Helpers:
    """A private helper directory and trace file; runs the console script with them."""

    def __init__(self, base: Path, data_dir: Path, idle: float = 60):
        self.dir = base / "h"
        self.trace = base / "trace"
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("ORBIT_FALKORDB_URL", "ORBIT_NO_HELPER", "PYTHONDONTWRITEBYTECODE")}
        self.env.update(ORBIT_DATA_DIR=str(data_dir), ORBIT_HELPER_DIR=str(self.dir),
                        ORBIT_HELPER_IDLE_S=str(idle), ORBIT_HELPER_TRACE=str(self.trace))

    def run(self, cwd: Path, *argv: str, helper: bool = True, cmd=None, **env) -> tuple[int, str, str]:
        e = dict(self.env, **env)
        if not helper:
            e["ORBIT_NO_HELPER"] = "1"
        proc = subprocess.run((cmd or CLI) + list(argv), cwd=cwd, env=e, capture_output=True, text=True,
                              timeout=120)
        return proc.returncode, proc.stdout, proc.stderr

    def paths(self) -> list[str]:
        """Which path answered each command so far (the trace's lines without the pid)."""
        if not self.trace.exists():
            return []
        return [line.split(" ", 1)[1] for line in self.trace.read_text().splitlines()]

    def pid_files(self) -> list[Path]:
        return sorted(self.dir.glob("q-*.pid"))

    def pid(self, timeout: float = 60) -> int:
        """The pid of the running helper, waiting for it to listen."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for f in self.pid_files():
                sock = f.with_suffix(".sock")
                try:
                    pid = int(f.read_text())
                except (OSError, ValueError):
                    continue
                if sock.exists() and alive(pid):
                    return pid
            time.sleep(0.05)
        log = "".join(p.read_text() for p in self.dir.glob("q-*.log"))
        raise AssertionError(f"no helper listening in {self.dir} after {timeout} s; log: {log!r}")

    def stop(self) -> None:
        for f in self.pid_files():
            try:
                os.kill(int(f.read_text()), signal.SIGTERM)
            except (OSError, ValueError):
                pass


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry))
    return out


def wait_until(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def helpers(tmp_path, data_dir):
    h = Helpers(tmp_path, data_dir)
    yield h
    h.stop()


def normalise(text: str) -> str:
    """Timings differ between any two runs: ``cypher`` prints its query's."""
    return re.sub(r'\d+\.\d+ ms|"elapsed_ms": [\d.]+', "<ms>", text)


# (argv, expected exit status): answers, and errors of each kind the helper itself reports
COMMANDS = [
    (["callers", "helper"], 0),
    (["callers", "helper", "--json"], 0),
    (["callers", "helper", "--depth", "2"], 0),
    (["impact", "pkg/util.py"], 0),
    (["impact", "pkg/util.py", "--json"], 0),
    (["chain", "run", "helper"], 0),
    (["implementations", "Shape"], 0),
    (["cypher", "MATCH (s:Symbol) RETURN s.qual ORDER BY s.qual"], 0),
    (["callers", "nosuch"], 1),                      # CliError: no such symbol
    (["callers", "nosuch", "--json"], 1),            # the JSON error object on stdout
    (["impact", "pkg/missing.py"], 2),               # UsageError raised by the command
    (["cypher", "MATCH (s:Symbol RETURN s"], 1),     # a syntax error from FalkorDB
    (["callers", "helper", "--workspace", "/nonexistent/dir"], 2),
    (["callers", "helper", "--falkordb-url", "redis://127.0.0.1:9"], 1),  # FalkorDB offline
]


def test_first_query_starts_the_helper_and_every_answer_is_the_in_process_one(ws, helpers):
    rc, out, err = helpers.run(ws, "callers", "helper")
    assert rc == 0 and "pkg.app.run" in out and "pkg.app.main" in out, err
    assert helpers.paths() == ["in-process: no helper running (starting one)"]
    pid = helpers.pid()

    for argv, status in COMMANDS:
        via_helper = helpers.run(ws, *argv)
        in_process = helpers.run(ws, *argv, helper=False)
        assert via_helper[0] == status, (argv, via_helper)
        assert [via_helper[0], normalise(via_helper[1]), normalise(via_helper[2])] == \
               [in_process[0], normalise(in_process[1]), normalise(in_process[2])], argv
    # every one of them came from the helper (the in-process runs leave no trace: helper off)
    assert helpers.paths()[1:] == ["helper"] * len(COMMANDS)
    assert helpers.pid() == pid  # one helper served them all

    doc = json.loads(helpers.run(ws, "callers", "nosuch", "--json")[1])
    assert doc["kind"] == "runtime" and doc["exit_status"] == 1 and "nosuch" in doc["error"]


def test_settings_come_from_each_query_not_from_the_helper(ws, helpers, tmp_path):
    helpers.run(ws, "callers", "helper")
    helpers.pid()
    query = ["cypher", "MATCH (s:Symbol) RETURN s.qual ORDER BY s.qual"]
    rc, out, _ = helpers.run(ws, *query, ORBIT_ROW_CAP="2")  # an environment setting
    assert rc == 0 and "Truncated: more than 2 rows; the first 2 are shown" in out
    assert normalise(out) == normalise(helpers.run(ws, *query, helper=False, ORBIT_ROW_CAP="2")[1])
    rc, out, _ = helpers.run(ws, *query)
    assert rc == 0 and "rows (complete)" in out
    # the current directory: a query from a folder inside the workspace reads the workspace
    rc, out, err = helpers.run(ws / "pkg", "callers", "helper")
    assert rc == 0 and "2 callers" in out and f"workspace {ws}" in err
    # the FalkorDB URL from the environment (nothing listens there), --data-dir over ORBIT_DATA_DIR
    offline = {"ORBIT_FALKORDB_URL": "redis://127.0.0.1:9"}
    rc, out, err = helpers.run(ws, "callers", "helper", **offline)
    assert rc == 1 and "FalkorDB" in err and "127.0.0.1:9" in err
    assert (rc, out, err) == helpers.run(ws, "callers", "helper", helper=False, **offline)
    rc, out, err = helpers.run(ws, "callers", "helper", "--data-dir", helpers.env["ORBIT_DATA_DIR"],
                               ORBIT_DATA_DIR=str(tmp_path / "nowhere"))
    assert rc == 0 and "2 callers" in out, err
    assert helpers.paths()[1:] == ["helper"] * 5


def test_a_query_the_helper_cannot_answer_runs_in_process(ws, helpers, tmp_path):
    helpers.run(ws, "callers", "helper")
    helpers.pid()
    # a usage error found by the parser; a query's name as the argument of another command;
    # --help and commands that are not queries never reach the helper
    for argv in (["callers", "helper", "--depth", "0"], ["index", "callers"], ["callers", "--help"],
                 ["db", "status", "--json"]):
        via_helper, in_process = helpers.run(ws, *argv), helpers.run(ws, *argv, helper=False)
        assert via_helper[0] == in_process[0] and via_helper[2] == in_process[2], argv
        if argv[0] != "db":  # its figures (memory, uptime) move
            assert via_helper[1] == in_process[1], argv
    assert helpers.paths()[1:] == [
        "in-process: declined: arguments for the in-process path (help, version or a usage error)",
        "in-process: declined: not a query: index"]
    # a workspace with no graph yet: indexed in-process first, with its notes
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "m.py").write_text("def f():\n    return g()\n\n\ndef g():\n    return 1\n")
    try:
        rc, out, err = helpers.run(fresh, "callers", "g")
        assert rc == 0 and "m.f" in out and "1 caller" in out, err
        assert "is not indexed yet; indexing it first" in err
        assert helpers.paths()[-1] == f"in-process: declined: {fresh} has no graph yet"
        assert helpers.run(fresh, "callers", "g")[0] == 0 and helpers.paths()[-1] == "helper"
    finally:
        from orbit_lsp.config import Settings
        from orbit_lsp.graph.connection import GraphStore

        store = GraphStore(Settings(data_dir=Path(helpers.env["ORBIT_DATA_DIR"]), falkordb_url=None))
        store.graph(code_graph_name(fresh)).delete()
        store.close()


def test_the_thin_client_imports_only_the_standard_library(ws, helpers):
    helpers.run(ws, "callers", "helper")
    helpers.pid()
    # only what the client imports: what the interpreter loaded at start-up (a ``sitecustomize``
    # on Debian's python3, ``.pth`` hooks) is not the client's
    probe = ("import sys\n"
             "started = set(sys.modules)\n"
             "sys.argv = ['orbit-lsp', 'callers', 'helper']\n"
             "from orbit_lsp.launch import main\n"
             "rc = main()\n"
             "mods = [m for m in sys.modules if m.split('.')[0] not in sys.stdlib_module_names and m not in started]\n"
             "sys.stderr.write('MODULES ' + ' '.join(sorted(mods)) + '\\n')\n"
             "raise SystemExit(rc)\n")
    rc, out, err = helpers.run(ws, cmd=[sys.executable, "-c", probe])
    assert rc == 0 and "2 callers" in out
    mods = next(line for line in err.splitlines() if line.startswith("MODULES")).split()[1:]
    assert [m for m in mods if not m.startswith("__editable__") and m not in ("__main__", "_distutils_hack")] == \
           ["orbit_lsp", "orbit_lsp.launch", "orbit_lsp.query_helper", "orbit_lsp.query_helper.protocol",
            "orbit_lsp.stdio"]  # complete writes to stdout (only the standard library's io, select, sys)
    assert helpers.paths()[-1] == "helper"


def test_socket_and_directory_are_private(ws, helpers):
    helpers.run(ws, "callers", "helper")
    helpers.pid()
    assert stat.S_IMODE(helpers.dir.stat().st_mode) == 0o700
    (sock,) = helpers.dir.glob("q-*.sock")
    st = sock.stat()
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid()


def test_a_directory_others_can_enter_is_not_used(ws, tmp_path, data_dir):
    h = Helpers(tmp_path, data_dir)
    h.dir.mkdir(mode=0o755)
    h.dir.chmod(0o755)
    try:
        for _ in range(2):
            assert h.run(ws, "callers", "helper") == h.run(ws, "callers", "helper", helper=False)
        assert h.paths() == [f"in-process: {h.dir} is not a private directory of this user"] * 2
        assert list(h.dir.iterdir()) == []  # no helper started there
    finally:
        h.stop()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another user")
def test_a_socket_of_another_user_is_never_used(ws, helpers, tmp_path):
    from orbit_lsp.query_helper import protocol

    helpers.dir.mkdir(mode=0o700)
    path = protocol.socket_path(helpers.env)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    os.chown(path, 65534, 65534)  # a socket file of another user: not even connected to
    try:
        assert helpers.run(ws, "callers", "helper") == helpers.run(ws, "callers", "helper", helper=False)
        assert helpers.paths() == [f"in-process: {path} is not a socket of this user"]
    finally:
        listener.close()
        os.unlink(path)

    # a file of ours, but the process listening behind it is another user's (SO_PEERCRED)
    spot = Path(tempfile.mkdtemp(prefix="orbit-other-"))  # where the other user can bind
    spot.chmod(0o777)
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(65534)
            os.setuid(65534)
            forger = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            forger.bind(str(spot / "s.sock"))
            forger.listen(4)
            os.write(ready_w, b"x")
            forger.settimeout(30)
            conn, _ = forger.accept()
            conn.recv(1 << 16)
            conn.sendall(protocol.json_frame(b"A", {"pid": os.getpid()}) + protocol.frame(b"O", b"forged\n")
                         + protocol.json_frame(b"X", {"rc": 0}))
            time.sleep(1)
        finally:
            os._exit(0)
    os.close(ready_w)
    try:
        assert os.read(ready_r, 1) == b"x", "the other user's listener did not start"
        os.rename(spot / "s.sock", path)
        os.chown(path, os.getuid(), os.getgid())
        rc, out, _ = helpers.run(ws, "callers", "helper")
        assert rc == 0 and "forged" not in out and "2 callers" in out
        assert helpers.paths()[-1] == "in-process: the helper socket is served by user 65534"
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(ready_r)
        shutil.rmtree(spot, ignore_errors=True)


def test_idle_helper_exits_and_removes_its_socket(ws, tmp_path, data_dir):
    h = Helpers(tmp_path, data_dir, idle=1.5)
    try:
        h.run(ws, "callers", "helper")
        pid = h.pid()
        assert h.run(ws, "callers", "helper")[0] == 0 and h.paths()[-1] == "helper"
        wait_until(lambda: not alive(pid), 60, "the idle helper to exit")
        assert list(h.dir.glob("q-*.sock")) == [] and list(h.dir.glob("q-*.pid")) == []
        # the next query runs in-process and starts a new helper
        assert h.run(ws, "callers", "helper")[0] == 0
        assert h.paths()[-1] == "in-process: no helper running (starting one)"
        assert h.pid() != pid
    finally:
        h.stop()


LONG_QUERY = ["cypher", "UNWIND range(1, 10000000) AS x RETURN count(x) AS n", "--timeout-ms", "120000", "--json"]


def test_a_helper_killed_during_a_query_falls_back_to_in_process(ws, helpers):
    helpers.run(ws, "callers", "helper")
    pid = helpers.pid()
    proc = subprocess.Popen(CLI + LONG_QUERY, cwd=ws, env=helpers.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: children(pid), 30, "the helper to fork for the query")
        for child in children(pid):
            os.kill(child, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    doc = json.loads(out)
    assert doc["result"]["rows"] == [[10000000]] and err == ""
    assert helpers.paths()[-1] == "in-process: the helper died during the query"
    # the helper itself is still there and answers the next query
    assert helpers.run(ws, "callers", "helper")[0] == 0 and helpers.paths()[-1] == "helper"
    assert helpers.pid() == pid

    # the whole helper killed: the next query runs in-process and starts another
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not alive(pid), 30, "the helper to die")
    assert helpers.run(ws, "callers", "helper") == helpers.run(ws, "callers", "helper", helper=False)
    assert helpers.paths()[-1] == "in-process: no helper running (stale socket; starting one)"
    assert helpers.pid() != pid


def test_ctrl_c_during_a_query_is_reported_as_in_process(ws, helpers):
    helpers.run(ws, "callers", "helper")
    pid = helpers.pid()
    proc = subprocess.Popen(CLI + LONG_QUERY[:-1], cwd=ws, env=helpers.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: children(pid), 30, "the helper to fork for the query")
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert (proc.returncode, out, err) == (130, "", "orbit-lsp: interrupted\n")


def test_a_helper_of_other_code_is_replaced(ws, helpers, tmp_path):
    """A copy of the package on PYTHONPATH: its own helper; editing a file of the copy makes
    that helper stale: the query runs in-process, the helper exits, a new one starts."""
    copy = tmp_path / "site"
    shutil.copytree(PACKAGE, copy / "orbit_lsp", ignore=shutil.ignore_patterns("__pycache__"))
    cmd = [sys.executable, "-m", "orbit_lsp"]
    env = {"PYTHONPATH": str(copy)}
    helpers.run(ws, "callers", "helper", cmd=cmd, **env)
    pid = helpers.pid()
    assert helpers.run(ws, "callers", "helper", cmd=cmd, **env)[0] == 0
    assert helpers.paths() == ["in-process: no helper running (starting one)", "helper"]

    output = copy / "orbit_lsp" / "cli" / "output.py"
    output.write_text(output.read_text() + "\n# edited\n")
    assert helpers.run(ws, "callers", "helper", cmd=cmd, **env) == \
           helpers.run(ws, "callers", "helper", cmd=cmd, helper=False, **env)
    assert helpers.paths()[-1] == "in-process: the helper runs other code (restarting it)"
    wait_until(lambda: not alive(pid), 30, "the stale helper to exit")
    new = helpers.pid()
    assert new != pid
    assert helpers.run(ws, "callers", "helper", cmd=cmd, **env)[0] == 0
    assert helpers.paths()[-1] == "helper"


def test_a_helper_that_does_not_take_the_query_is_bypassed(ws, helpers):
    """Something listens on the helper's socket but never answers (a stopped helper): the
    query waits 2 s for it, then runs in-process, with the same output."""
    from orbit_lsp.query_helper import protocol

    helpers.dir.mkdir(mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(protocol.socket_path(helpers.env))
    listener.listen(4)  # connections queue up; none is ever accepted
    try:
        started = time.monotonic()
        assert helpers.run(ws, "callers", "helper") == helpers.run(ws, "callers", "helper", helper=False)
        assert time.monotonic() - started >= protocol.CONNECT_TIMEOUT_S
        assert helpers.paths() == [f"in-process: the helper did not take the query within "
                                   f"{protocol.CONNECT_TIMEOUT_S:g} s"]
    finally:
        listener.close()


def test_stale_files_through_the_helper_with_its_hash_cache(ws, helpers):
    """The helper keeps the content hashes its queries computed (by file identity); an edit
    that keeps the file's size is still reported stale, and the answer is the in-process one."""
    from orbit_lsp.cli.freshness import RECENT_NS

    helpers.run(ws, "callers", "helper")
    helpers.pid()
    app = ws / "pkg" / "app.py"
    newest = max(os.stat(p).st_ctime_ns for p in (app, ws / "pkg" / "util.py"))
    time.sleep(max(0.0, (newest + RECENT_NS - time.time_ns()) / 1e9 + 0.2))  # old enough to be kept
    for _ in range(2):
        rc, out, _ = helpers.run(ws, "callers", "helper", "--json")
        assert rc == 0 and json.loads(out)["result"]["stale_files"] == []
    (journal,) = helpers.dir.glob("q-*.hashes")
    assert f"{app}\t" in journal.read_text()  # the helper now knows app.py's hash

    before = app.read_text()
    edited = before.replace("helper(1)", "helper(7)")
    assert len(edited) == len(before)
    try:
        app.write_text(edited)
        via_helper = helpers.run(ws, "callers", "helper", "--json")
        assert json.loads(via_helper[1])["result"]["stale_files"] == ["pkg/app.py"]
        assert via_helper == helpers.run(ws, "callers", "helper", "--json", helper=False)
    finally:
        app.write_text(before)
    rc, out, _ = helpers.run(ws, "callers", "helper", "--json")
    assert rc == 0 and json.loads(out)["result"]["stale_files"] == []
    assert helpers.paths()[1:] == ["helper"] * 4
