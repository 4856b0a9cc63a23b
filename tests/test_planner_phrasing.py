"""The built-in planner's phrasings and "unused functions" (issue 18 item 12), on a small
requests-like workspace written here, so every expected answer follows from its text; and
``orbit-lsp ask`` in real processes: exit status 1 when the planner did not understand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orbit_lsp.agent.history import History
from orbit_lsp.agent.planner import NOT_UNDERSTOOD, match
from orbit_lsp.agent.service import Asker
from orbit_lsp.edits.removal import unused_functions
from orbit_lsp.index.indexer import WorkspaceIndexer

FILES = {
    "reqs/__init__.py": "from reqs.api import get\n",
    # get -> request -> Session.request -> Session.send -> HTTPAdapter.send
    "reqs/api.py": (
        "from reqs.sessions import Session\n\n\n"
        "def request(method, url):\n    s = Session()\n    return s.request(method, url)\n\n\n"
        "def get(url):\n    return request('GET', url)\n"),
    "reqs/sessions.py": (
        "from reqs.adapters import HTTPAdapter\n\n\n"
        "class Session:\n"
        "    def __enter__(self):\n        return self\n\n"
        "    def __exit__(self, *a):\n        self.close()\n\n"
        "    def close(self):\n        return None\n\n"
        "    def request(self, method, url):\n        return self.send(method + ' ' + url)\n\n"
        "    def send(self, req):\n        return HTTPAdapter().send(req)\n\n"
        "    def stale_helper(self):\n        return 1\n\n\n"
        "def session():\n    return Session()\n"),
    "reqs/adapters.py": (
        "class HTTPAdapter:\n    def send(self, req):\n        return req\n\n\n"
        "def orphan_adapter():\n    return HTTPAdapter()\n"),
    "reqs/utils.py": (
        "import functools\n\n\n"
        "def never_called(x):\n    return x\n\n\n"
        "def named_in_a_string():\n    return 2\n\n\n"
        "@functools.cache\n"
        "def registered():\n    return 3\n"),
    "reqs/hooks.py": "HOOKS = ['named_in_a_string']\n",
}
# by the text above: functions and methods nothing calls, and which of them a check keeps
PROVEN_UNUSED = {"reqs.sessions.Session.stale_helper", "reqs.sessions.session",
                 "reqs.adapters.orphan_adapter", "reqs.utils.never_called"}
KEPT = {"reqs.utils.named_in_a_string": "mentioned in reqs/hooks.py",
        "reqs.utils.registered": "decorated",
        "reqs.sessions.Session.__enter__": "dunder", "reqs.sessions.Session.__exit__": "dunder",
        "reqs.api.get": "mentioned in reqs/__init__.py"}


@pytest.fixture(scope="module")
def ws(tmp_path_factory, store):
    root = tmp_path_factory.mktemp("phrasing") / "ws"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    ix = WorkspaceIndexer(root, store)
    ix.index_all()
    yield ix
    ix.graph.delete()
    ix.cache_path.unlink(missing_ok=True)


@pytest.fixture
def asker(settings, tmp_path):
    a = Asker(settings.model_copy(update={"agent_model": None}), History(tmp_path / "h.sqlite3"))
    yield a
    a.close()


@pytest.mark.parametrize("question, expected", [
    ("who uses the Session class?", ("uses", {"x": "Session"})),
    ("Where is Session used?", ("uses", {"x": "Session"})),
    ("usages of `Session`", ("uses", {"x": "Session"})),
    ("how is requests.get connected to HTTPAdapter.send?", ("chain", {"a": "requests.get", "b": "HTTPAdapter.send"})),
    ("how are get and HTTPAdapter.send connected?", ("chain", {"a": "get", "b": "HTTPAdapter.send"})),
    ("does get call HTTPAdapter.send?", ("chain", {"a": "get", "b": "HTTPAdapter.send"})),
    ("is there a path from get to send?", ("chain", {"a": "get", "b": "send"})),
    ("which functions are never called?", ("unused", {})),
    ("unused functions", ("unused", {})),
    ("Find dead code in this repo", ("unused", {})),
    ("what can I safely remove?", ("unused", {})),
    ("where is request called from?", ("callers", {"x": "request"})),
    ("which functions call `request()`?", ("callers", {"x": "request"})),
    ("what would break if I changed reqs/adapters.py?", ("depends", {"x": "reqs/adapters.py"})),
    ("who is affected by changing sessions.py", ("depends", {"x": "sessions.py"})),
    ("where is the package functools used?", ("package", {"p": "functools"})),
    ("explain the architecture", None),
])
def test_phrasings(question, expected):
    assert match(question) == expected


def test_who_uses_the_session_class(ws, asker):
    res = asker.ask("who uses the Session class?", ws.graph, ws.root)
    assert res.planner and res.error is None
    assert [s.tool for s in res.steps] == ["find_symbol"]
    # Session() is called in api.request and in sessions.session
    assert "has 2 direct callers" in res.answer
    assert "`reqs.api.request`" in res.answer and "`reqs.sessions.session`" in res.answer


def test_how_is_get_connected_to_adapter_send(ws, asker):
    res = asker.ask("how is reqs.api.get connected to HTTPAdapter.send?", ws.graph, ws.root)
    assert [s.tool for s in res.steps] == ["call_chain"]
    lines = res.answer.splitlines()
    assert lines[0] == "**`reqs.api.get` reaches `HTTPAdapter.send`** in 4 calls:"
    assert [ln.split("`")[1] for ln in lines[1:6]] == [
        "reqs.api.get", "reqs.api.request", "reqs.sessions.Session.request", "reqs.sessions.Session.send",
        "reqs.adapters.HTTPAdapter.send"]


def test_which_functions_are_never_called(ws, asker):
    res = asker.ask("which functions are never called?", ws.graph, ws.root)
    assert res.planner and [s.tool for s in res.steps] == ["unused_functions"]
    assert res.steps[0].cypher  # the queries are shown
    proven, kept = res.answer.split("may still be used")
    listed = {ln.split("`")[1] for ln in proven.splitlines() if ln.startswith("- `")}
    assert listed == PROVEN_UNUSED
    assert f"**{len(PROVEN_UNUSED)} functions are proven unused**" in proven
    for qual, why in KEPT.items():
        line = next(ln for ln in kept.splitlines() if ln.startswith(f"- `{qual}`"))
        assert why in line, line


def test_unused_functions_is_the_removal_proof(ws):
    rep = unused_functions(ws.graph, ws.root)
    assert {r.symbol["qual"] for r in rep.proven} == PROVEN_UNUSED
    assert {r.symbol["qual"] for r in rep.unproven} == set(KEPT)
    assert rep.candidates == rep.checked == len(PROVEN_UNUSED) + len(KEPT) and rep.note is None
    # each proof is the code action's: removing the function leaves the file parseable
    for r in rep.proven:
        compile(r.new_text, r.symbol["file"], "exec")


def test_unused_needs_the_indexed_text(ws, tmp_path):
    path = ws.root / "reqs" / "utils.py"
    before = path.read_text()
    try:
        path.write_text(before + "\n\ndef added_later():\n    return never_called(1)\n")
        rep = unused_functions(ws.graph, ws.root)
        assert "reqs.utils.never_called" not in {r.symbol["qual"] for r in rep.proven}
        why = {r.symbol["qual"]: r.reason for r in rep.unproven}["reqs.utils.never_called"]
        assert why == "reqs/utils.py differs from the indexed text (index it again)"
    finally:
        path.write_text(before)


def test_unused_check_limit_is_said(ws):
    rep = unused_functions(ws.graph, ws.root, limit=3)
    assert rep.checked == 3 and len(rep.proven) + len(rep.unproven) == 3
    assert rep.note.startswith(f"{rep.candidates - 3} more functions without callers were not checked")


# -- the console script -------------------------------------------------------------------------

def _ask(data_dir: Path, *argv: str) -> subprocess.CompletedProcess:
    script = Path(sys.executable).parent / "orbit-lsp"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "orbit_lsp"]
    env = {k: v for k, v in os.environ.items()
           if k not in ("ORBIT_FALKORDB_URL", "ORBIT_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY",
                        "ORBIT_FALLBACK_MODELS")}
    env["ORBIT_DATA_DIR"] = str(data_dir)
    return subprocess.run(cmd + ["ask", *argv], capture_output=True, text=True, env=env, timeout=180)


def test_ask_exits_1_when_the_planner_does_not_understand(ws, data_dir):
    proc = _ask(data_dir, "Summarise the architecture", "--workspace", str(ws.root))
    assert proc.returncode == 1
    assert NOT_UNDERSTOOD in proc.stdout and "which functions are never called" in proc.stdout
    assert proc.stderr.strip().splitlines()[-1] == (
        "orbit-lsp: the built-in planner did not understand the question (no model is configured; "
        "see the answer for what it understands)")
    proc = _ask(data_dir, "Summarise the architecture", "--workspace", str(ws.root), "--json")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["kind"] == "not_understood" and doc["exit_status"] == 1
    assert doc["result"]["answer"].startswith(NOT_UNDERSTOOD)


def test_ask_understood_exits_0(ws, data_dir):
    proc = _ask(data_dir, "who uses the Session class?", "--workspace", str(ws.root))
    assert proc.returncode == 0, proc.stderr
    assert "`reqs.api.request`" in proc.stdout
