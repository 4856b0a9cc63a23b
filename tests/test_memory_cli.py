"""``orbit-lsp memory add|list|confirm|forget`` in-process against the session's FalkorDB (a memory
graph of the test's own through ``ORBIT_MEMORY_GRAPH``), and ``orbit-lsp ask`` using a memory with
the built-in planner."""

from __future__ import annotations

import json
import uuid

import pytest

from orbit_lsp.cli import main
from orbit_lsp.graph.connection import code_graph_name

DOCKER = "I deploy my projects with Docker Compose on a Hetzner VPS"


@pytest.fixture
def env(monkeypatch, data_dir, store):
    name = "orbit_memory_cli_" + uuid.uuid4().hex[:10]
    for k in ("ORBIT_FALKORDB_URL", "ORBIT_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("ORBIT_DATA_DIR", str(data_dir))
    monkeypatch.setenv("ORBIT_MEMORY_GRAPH", name)
    yield store.graph(name)
    store.graph(name).delete()


@pytest.fixture
def ws(tmp_path, store):
    root = tmp_path / "side"
    root.mkdir()
    (root / "deploy.py").write_text("def build():\n    return 1\n\n\ndef ship():\n    return build()\n")
    yield root
    store.graph(code_graph_name(root)).delete()


def run(capsys, *argv):
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_add_list_confirm_forget(env, ws, capsys):
    rc, out, err = run(capsys, "memory", "add", DOCKER, "--workspace", str(ws), "--json")
    assert rc == 0, err
    doc = json.loads(out)
    mid = doc["result"]["id"]
    assert doc["command"] == "memory add" and doc["result"]["confirmed"] is True
    assert doc["result"]["projects"][0]["root"] == str(ws.resolve())

    rc, out, err = run(capsys, "memory", "add", "the nightly deploy job needs a manual approval",
                       "--unconfirmed", "--no-project")
    assert rc == 0, err
    assert out.startswith("saved memory #")
    other = int(out.split("#")[1].split()[0])
    assert "unconfirmed" in out

    rc, out, err = run(capsys, "memory", "list")
    assert rc == 0 and f"#{mid}  confirmed  “{DOCKER}”" in out and f"#{other}  unconfirmed" in out
    rc, out, err = run(capsys, "memory", "list", "--unconfirmed", "--json")
    assert [m["id"] for m in json.loads(out)["result"]] == [other]

    # the planner answers from the (confirmed) memory and the turn is linked to it
    rc, out, err = run(capsys, "ask", "How should I deploy my next side project?", "--workspace", str(ws), "--json")
    assert rc == 0, err
    res = json.loads(out)["result"]
    assert [m["id"] for m in res["memories"]] == [mid] and f"memory #{mid}" in res["answer"]
    rc, out, err = run(capsys, "memory", "list")
    assert f"used by  1 answer (turns {res['turnId']})" in out

    rc, out, err = run(capsys, "memory", "confirm", str(other))
    assert rc == 0 and out.startswith(f"confirmed memory #{other}")
    rc, out, err = run(capsys, "memory", "forget", str(mid))
    assert rc == 0 and out.startswith(f"forgot memory #{mid}")
    rc, out, err = run(capsys, "memory", "list", "--json")
    assert [(m["id"], m["confirmed"]) for m in json.loads(out)["result"]] == [(other, True)]
    assert env.ro_query("MATCH ()-[r:RECALLED]->() RETURN count(r)").rows == [[0]]


def test_anchored_add_and_stale_listing(env, ws, capsys):
    rc, out, err = run(capsys, "memory", "add", "ship runs after build", "--workspace", str(ws),
                       "--file", str(ws / "deploy.py"), "--line", "6", "--json")
    assert rc == 0, err
    anchor = json.loads(out)["result"]["anchor"]
    assert anchor["path"] == "deploy.py" and anchor["symbol"] == "deploy.ship" and anchor["line"] == 5
    (ws / "deploy.py").write_text("def ship():\n    return 2\n")
    rc, out, err = run(capsys, "index", str(ws))
    assert rc == 0, err
    rc, out, err = run(capsys, "memory", "list")
    assert "POSSIBLY STALE: deploy.py changed since the memory was anchored" in out


@pytest.mark.parametrize("argv,code,msg", [
    (["memory", "add", "   "], 2, "empty"),
    (["memory", "add", "the and of"], 2, "no words"),
    (["memory", "add", "x deploy", "--line", "3"], 2, "--line needs --file"),
    (["memory", "confirm", "987654321"], 2, "no memory #987654321"),
    (["memory", "forget", "0"], 2, "error"),
    (["memory", "forget", "abc"], 2, "error"),
    (["memory"], 2, "error"),
])
def test_errors(env, ws, capsys, monkeypatch, argv, code, msg):
    monkeypatch.chdir(ws)
    rc, out, err = run(capsys, *argv)
    assert rc == code and msg in err and len(err.strip().splitlines()) == 1, (rc, out, err)


def test_anchor_to_a_file_outside_the_graph(env, ws, capsys):
    (ws / ".env").write_text("TOKEN=abc\n")
    rc, out, err = run(capsys, "memory", "add", "secrets live here", "--workspace", str(ws), "--file", str(ws / ".env"))
    assert rc == 1 and "not in the code graph" in err
