"""``orbit-lsp ask`` from the command line against the loopback chat-completions server (model
configured through OPENAI_BASE_URL / OPENAI_API_KEY / ORBIT_MODEL), and with no model (the
built-in planner)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_harness import action, answer
from conftest import shared_case
from orbit_lsp.cli import main
from orbit_lsp.graph.connection import code_graph_name

KEY = "sk-cli-SECRET-9876543210"


@pytest.fixture
def ws(tmp_path, store):
    root = tmp_path / "ws005"
    shutil.copytree(shared_case("005-py-aliased-imports") / "workspace", root)
    yield root
    store.graph(code_graph_name(os.path.realpath(root))).delete()


@pytest.fixture
def env(monkeypatch, data_dir, srv):
    for k in ("ORBIT_FALKORDB_URL", "ORBIT_FALLBACK_MODELS"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("ORBIT_DATA_DIR", str(data_dir))
    monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ORBIT_MODEL", "cli-model")
    return monkeypatch


def run(capsys, *argv):
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_ask_with_a_model(env, srv, ws, capsys):
    srv.script("cli-model", action("find_symbol", name="hello"), answer("Called by `plain.a`, `mod_alias.b`, `name_import.c`."))
    rc, out, err = run(capsys, "ask", "Who calls hello?", "--workspace", str(ws))
    assert rc == 0, err
    assert out.startswith("Called by `plain.a`") and "Answered by model `cli-model`" in out
    assert "`find_symbol` `{\"name\": \"hello\"}` — 1 row" in out and "```cypher" in out
    assert [r["model"] for r in srv.requests] == ["cli-model", "cli-model"]
    assert srv.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"
    assert KEY not in out + err


def test_ask_json_and_model_error(env, srv, ws, capsys):
    srv.script("cli-model", answer("nothing to do"))
    rc, out, err = run(capsys, "ask", "hi", "--workspace", str(ws), "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["command"] == "ask" and doc["result"]["answer"] == "nothing to do"
    assert doc["result"]["model"] == "cli-model" and doc["result"]["conversationId"]
    srv.script("cli-model", {"status": 429, "headers": {"retry-after": "3600"},
                             "body": {"error": {"message": "slow down", "code": "rate_limit_exceeded"}}})
    rc, out, err = run(capsys, "ask", "hi", "--workspace", str(ws))
    assert rc == 1 and "rate-limited" in err and "~60 min" in err and len(err.strip().splitlines()) == 1
    assert KEY not in out + err


def test_ask_reads_are_denied_without_a_terminal(env, srv, ws, capsys, monkeypatch):
    import io
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    srv.script("cli-model", action("impact_of", path="greet.py"), action("read_file", path="greet.py"),
               answer("could not read it"))
    rc, out, err = run(capsys, "ask", "show greet.py", "--workspace", str(ws))
    assert rc == 0 and "denied (use --read allow)" in err and "declined" in out
    srv.script("cli-model", action("impact_of", path="greet.py"), action("read_file", path="greet.py"),
               answer("read it"))
    rc, out, err = run(capsys, "ask", "show greet.py", "--workspace", str(ws), "--read", "allow")
    assert rc == 0 and "`read_file`" in out and "error" not in out.split("`read_file`")[1].splitlines()[0]
    assert "def hello" in srv.requests[-1]["body"]


def test_ask_without_a_model_uses_the_planner(env, srv, ws, capsys):
    env.delenv("ORBIT_MODEL")
    rc, out, err = run(capsys, "ask", "what depends on greet.py?", "--workspace", str(ws))
    assert rc == 0, err
    assert "**4 files depend on `greet.py`**" in out and "no model was used" in out
    assert srv.requests == []


def test_console_script_ask(env, srv, ws):
    srv.script("cli-model", action("impact_of", path="greet.py"), answer("4 files depend on greet.py"))
    exe = Path(sys.executable).with_name("orbit-lsp")
    proc = subprocess.run([str(exe), "ask", "what depends on greet.py?", "--workspace", str(ws)],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("4 files depend on greet.py") and "`impact_of`" in proc.stdout
    assert KEY not in proc.stdout + proc.stderr


def test_ask_unknown_conversation_is_a_usage_error(env, srv, ws, capsys):
    rc, out, err = run(capsys, "ask", "hi", "--workspace", str(ws), "--conversation", "987654321")
    assert rc == 2 and "no conversation 987654321" in err and srv.requests == []
