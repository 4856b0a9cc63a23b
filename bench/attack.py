"""The attack surface of issue 20, re-run against a real ``orbit-lsp`` process: bounded in time,
loopback only (pipes and the embedded FalkorDB's unix socket), counts recorded.

``python -m bench.attack [--no-record] [--results bench/RESULTS.md] [--seed N]`` starts the
server (``python -m orbit_lsp``) on a throw-away workspace and data dir and runs each probe of
``PROBES``; each probe returns rows ``(probe, what, count or figure)``. Every request must be
answered within ``ANSWER_BOUND_S``; what is not is counted as a hang. The probes (server items;
other helpers add theirs to ``PROBES``):

- ``malformed``: a few hundred malformed messages (unstructurable params, ``orbit/*`` without
  params, invalid JSON and UTF-8, non-JSON-RPC, bad framing, NUL/surrogate URIs, integers past
  their range, a seeded random fuzz): answered, by error code, internal errors, popups, hangs;
  the server alive and answering a hover after (items 3, 16);
- ``bad_files``: FIFOs, a socket, ``.env`` files, links to them, links out of the workspace, a
  directory named ``x.py``, each asked for a hover, lenses, call hierarchy, code actions and
  impact: answered, hangs (items 2, 13);
- ``agent_read``: a long read on the graph (as the agent's) and, during it, a re-index and an
  editor read: seconds until each finished, ungated and through the server's graph gate
  (item 5);
- ``symlink_watch``: seconds until a change to a link's target is indexed under the link
  (item 10);
- ``uri_spelling``: answers that echo a URI spelled unlike the canonical one, and ``File.lines``
  of CR-only files (item 18).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from pygls.uris import from_fs_path

from bench.raw_lsp import RawLsp

ROOT = Path(__file__).resolve().parents[1]
ANSWER_BOUND_S = 10.0
TIME_LIMIT_S = 600.0  # the whole run; probes left when it is reached are reported as not run
Row = tuple[str, str, object]

APP = "def helper():\n    return 1\n\n\ndef main():\n    return helper()\n"
USE = "from app import helper\n\n\ndef run():\n    return helper()\n"


# -- the workspace ---------------------------------------------------------------------------------
def make_workspace(base: Path) -> Path:
    root, outside = base / "ws", base / "outside"
    for d in (root / "bin", root / "tests", root / "dir.py", outside):
        d.mkdir(parents=True)
    (root / "app.py").write_text(APP)
    (root / "use.py").write_text(USE)
    (root / "cr.py").write_bytes(b"a = 1\rb = 2\rc = 3\r")
    (root / "bin" / "tool").write_text("def original():\n    return 1\n")
    os.symlink("../bin/tool", root / "tests" / "tool.py")
    os.mkfifo(root / "pipe.py")
    os.mkfifo(root / ".env")
    (root / ".env.local").write_text("SECRET=hunter2\n")
    os.symlink(".env", root / "settings.py")
    os.symlink(".env.local", root / "local.py")
    os.mkfifo(outside / "fifo.py")
    os.symlink(str(outside / "fifo.py"), root / "out.py")
    os.symlink("/etc/passwd", root / "passwd.py")
    os.symlink("/dev/zero", root / "zero.py")
    return root


# -- probes ----------------------------------------------------------------------------------------
class Tally:
    """Answers to requests sent: by error code, within the bound or not."""

    def __init__(self, lsp: RawLsp):
        self.lsp = lsp
        self.sent = self.answered = self.hangs = self.internal = self.parse_errors = 0
        self.codes: dict[str, int] = {}
        self.latencies: list[float] = []

    def expect(self, msg_id) -> dict | None:
        t0 = time.perf_counter()
        self.sent += 1
        try:
            got = self.lsp.response(msg_id, timeout=ANSWER_BOUND_S)
        except TimeoutError:
            self.hangs += 1
            return None
        self.latencies.append(time.perf_counter() - t0)
        self.answered += 1
        code = str(got["error"]["code"]) if "error" in got else "result"
        self.codes[code] = self.codes.get(code, 0) + 1
        if "error" in got and (got["error"]["code"] == -32603 or "Traceback" in json.dumps(got["error"])):
            self.internal += 1
        return got

    def request(self, method: str, params=None, absent: bool = False) -> dict | None:
        msg_id = self.lsp.new_id()
        msg = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if not absent:
            msg["params"] = params
        self.lsp.send(msg)
        return self.expect(msg_id)

    def frame(self, body: bytes, raw: bool = False) -> dict | None:
        self.lsp.send(body, raw=raw)
        return self.expect(None)

    def rows(self, probe: str) -> list[Row]:
        lat = sorted(self.latencies)
        out: list[Row] = [(probe, "requests and frames sent", self.sent), (probe, "answered within the bound", self.answered),
                          (probe, "unanswered (hangs)", self.hangs), (probe, "internal errors (-32603 / traceback)", self.internal)]
        out += [(probe, f"answers: {k}", v) for k, v in sorted(self.codes.items())]
        if lat:
            out += [(probe, "answer latency p50 / max (ms)",
                     f"{lat[len(lat) // 2] * 1000:.1f} / {lat[-1] * 1000:.1f}")]
        return out


def _healthy(lsp: RawLsp, ws: Path) -> bool:
    try:
        got = lsp.request("textDocument/hover", {"textDocument": {"uri": from_fs_path(str(ws / "app.py"))},
                                                 "position": {"line": 0, "character": 4}}, timeout=ANSWER_BOUND_S)
    except TimeoutError:
        return False
    return "helper" in json.dumps(got.get("result"))


def _error_popups(lsp: RawLsp) -> list[dict]:
    """Error and warning messages shown to the user (``orbit.showImpact`` shows its result as
    an info message: not counted)."""
    return [m for m in lsp.notifications("window/showMessage") if m["params"].get("type") in (1, 2)]


def probe_malformed(lsp: RawLsp, ws: Path, seed: int) -> list[Row]:
    t = Tally(lsp)
    popups0 = len(_error_popups(lsp))
    app = from_fs_path(str(ws / "app.py"))
    pos = {"line": 0, "character": 4}
    standard = ["textDocument/hover", "textDocument/codeLens", "textDocument/prepareCallHierarchy",
                "textDocument/codeAction", "callHierarchy/incomingCalls", "codeLens/resolve", "workspace/symbol",
                "workspace/executeCommand", "textDocument/definition"]
    orbit = ["orbit/impact", "orbit/status", "orbit/ask", "orbit/remember", "orbit/memories", "orbit/forget",
             "orbit/confirm", "orbit/proposeChange", "orbit/changes"]
    odd = [None, [], "x", 5, -1, 2 ** 31, 2 ** 70, 1.5, True, {"line": -1}, {"uri": None}, {"textDocument": {}}]
    for m in standard:
        for p in odd:
            t.request(m, p)
        t.request(m, absent=True)
    for p in ({"textDocument": {"uri": app}, "position": {"line": -1, "character": 0}},
              {"textDocument": {"uri": app}}, {"textDocument": {"uri": app}, "position": {"line": 2 ** 31, "character": 0}},
              {"textDocument": {"uri": app + "\x00"}, "position": pos},
              {"textDocument": {"uri": app[:-3] + "\ud800.py"}, "position": pos}):
        t.request("textDocument/hover", p)
    for m in orbit:
        t.request(m, absent=True)
        for p in odd:
            t.request(m, p)
    t.request("orbit/impact", {"textDocument": {"uri": app}, "position": {"line": 2 ** 31, "character": 0}})
    t.request("orbit/ask", {"question": "who calls helper?", "conversationId": 2 ** 70})
    for body in (b'{"jsonrpc": "2.0", "id": 1, "method": ', b"\xff\xfe", b"\xc3\x28", b"", b"[" * 100_000,
                 b"not json", b'{"a": 1e999999}'):
        t.frame(body)
    for msg in ([1, 2], "text", {"id": 9, "method": "orbit/status"}, {"jsonrpc": "1.0", "id": 10, "method": "x"},
                {"jsonrpc": "2.0", "id": {"x": 1}, "method": "orbit/status"}, {"jsonrpc": "2.0"}):
        lsp.send(msg)
        t.expect(msg.get("id") if isinstance(msg, dict) and isinstance(msg.get("id"), int) else None)
    t.frame(b"Content-Length: abc\r\n\r\n", raw=True)
    t.frame(b"X-Nothing: 1\r\n\r\n", raw=True)
    # seeded fuzz: mutations of valid params
    rng = random.Random(seed)
    base = {"textDocument": {"uri": from_fs_path(str(ws / "scratch.py")), "version": 1, "text": "x = 1\n",
                             "languageId": "python"}, "position": pos, "query": "h", "context": {"diagnostics": []},
            "range": {"start": pos, "end": pos}, "item": {"name": "helper", "uri": app}, "arguments": [app, pos],
            "command": "orbit.showImpact", "question": "what calls helper?", "id": 1}

    def mutate(v, depth=0):
        if isinstance(v, dict) and v and depth < 4 and rng.random() < 0.7:
            k = rng.choice(sorted(v))
            out = dict(v)
            r = rng.random()
            if r < 0.25:
                del out[k]
            elif r < 0.5:
                out[k] = rng.choice(odd)
            else:
                out[k] = mutate(v[k], depth + 1)
            return out
        return rng.choice(odd + ["\x00", "\udc00", "file:///\x00.py", "file:///etc/passwd"])

    for _ in range(300):
        if rng.random() < 0.2:
            lsp.notify(rng.choice(["textDocument/didOpen", "textDocument/didChange", "textDocument/didClose",
                                   "textDocument/didSave", "$/cancelRequest"]), mutate(base))
            continue
        t.request(rng.choice(standard + orbit[:2] + orbit[3:]), mutate(base))  # orbit/ask left out: no model
    popups = len(_error_popups(lsp)) - popups0
    return t.rows("malformed") + [("malformed", "error/warning popups (window/showMessage)", popups),
                                  ("malformed", "server alive and answering a hover after", lsp.alive() and _healthy(lsp, ws))]


def probe_bad_files(lsp: RawLsp, ws: Path, seed: int) -> list[Row]:
    t = Tally(lsp)
    names = ["pipe.py", ".env", ".env.local", "settings.py", "local.py", "out.py", "passwd.py", "zero.py", "dir.py",
             "sock.py"]
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(ws / "sock.py"))
    except OSError:
        names.remove("sock.py")
    pos = {"line": 0, "character": 4}
    leaked = 0
    for name in names:
        uri = from_fs_path(str(ws / name))
        td = {"uri": uri}
        for method, params in (("textDocument/hover", {"textDocument": td, "position": pos}),
                               ("textDocument/codeLens", {"textDocument": td}),
                               ("textDocument/prepareCallHierarchy", {"textDocument": td, "position": pos}),
                               ("textDocument/codeAction", {"textDocument": td, "range": {"start": pos, "end": pos},
                                                            "context": {"diagnostics": []}}),
                               ("orbit/impact", {"textDocument": td, "position": pos})):
            got = t.request(method, params)
            if got is not None and "hunter2" in json.dumps(got):
                leaked += 1
    sock.close()
    return t.rows("bad_files") + [("bad_files", "kinds of bad files", len(names)),
                                  ("bad_files", "answers holding a secret", leaked),
                                  ("bad_files", "server alive and answering a hover after", lsp.alive() and _healthy(lsp, ws))]


def probe_agent_read(lsp: RawLsp, ws: Path, seed: int) -> list[Row]:
    from orbit_lsp.config import Settings
    from orbit_lsp.graph.connection import GraphStore
    from orbit_lsp.index.indexer import WorkspaceIndexer
    from orbit_lsp.server.ask import AgentGraph

    store = GraphStore(Settings.from_env())
    root = ws.parent / "agent_ws"
    root.mkdir(exist_ok=True)
    (root / "app.py").write_text(APP)
    ix = WorkspaceIndexer(root, store)
    rows: list[Row] = []
    try:
        ix.index_all()
        long_read = "UNWIND range(1, $n) AS x WITH x WHERE x % 7 = 0 RETURN count(x)"
        n = 1_000_000
        while True:  # a read of at least 1.5 s alone, whatever the machine's load
            t0 = time.perf_counter()
            ix.graph.ro_query(long_read, {"n": n}, timeout_ms=120_000)
            alone = time.perf_counter() - t0
            if alone >= 1.5 or n >= 256_000_000:
                break
            n *= 2
        rows.append(("agent_read", f"long read alone (s; UNWIND of {n:,})", f"{alone:.2f}"))
        for label, gate in (("ungated (before)", None), ("graph gate (after)", threading.Lock())):
            done: dict[str, float] = {}
            start = time.perf_counter()
            graph = ix.graph if gate is None else AgentGraph(ix.graph, gate, cap_ms=120_000)

            def reindex(gate=gate):
                (root / "app.py").write_text(APP + f"\n\ndef v{int(start * 1000)}():\n    return 0\n")
                if gate is None:
                    ix.reindex_file(root / "app.py")
                else:
                    with gate:
                        ix.reindex_file(root / "app.py")

            def run(name, fn, delay):
                time.sleep(delay)
                t1 = time.perf_counter()
                fn()
                done[name] = time.perf_counter() - t1

            threads = [threading.Thread(target=run, args=a) for a in (
                ("agent read", lambda: graph.ro_query(long_read, {"n": n}, timeout_ms=120_000), 0.0),
                ("re-index", reindex, 0.3),
                ("editor read", lambda: ix.graph.ro_query("MATCH (f:File) RETURN count(f)"), 0.6))]
            for th in threads:
                th.start()
            for th in threads:
                th.join(120)
            for name in ("re-index", "editor read"):
                rows.append(("agent_read", f"{label}: {name} during a long agent read (s)", f"{done.get(name, float('nan')):.2f}"))
    finally:
        ix.graph.delete()
        store.close()
    return rows


def probe_symlink_watch(lsp: RawLsp, ws: Path, seed: int) -> list[Row]:
    with open(ws / "bin" / "tool", "a") as fh:
        fh.write("\n\ndef added_later():\n    return 2\n")
    t0 = time.perf_counter()
    seen = None
    while time.perf_counter() - t0 < ANSWER_BOUND_S:
        got = lsp.request("workspace/symbol", {"query": "added_later"}, timeout=ANSWER_BOUND_S).get("result") or []
        if any(s["location"]["uri"].endswith("/tests/tool.py") for s in got):
            seen = time.perf_counter() - t0
            break
        time.sleep(0.1)
    return [("symlink_watch", "link target changed: indexed under the link", seen is not None),
            ("symlink_watch", "seconds until indexed", f"{seen:.2f}" if seen is not None else "never (bound)")]


def probe_uri_spelling(lsp: RawLsp, ws: Path, seed: int) -> list[Row]:
    canonical = from_fs_path(str(ws / "app.py"))
    spellings = [canonical, canonical.replace("app.py", "%61pp.py"), canonical.replace("app.py", "ap%70.py"),
                 "file://localhost" + canonical[len("file://"):]]
    echoed = 0
    pos = {"line": 0, "character": 4}
    for u in spellings:
        impact = lsp.request("orbit/impact", {"textDocument": {"uri": u}, "position": pos}, timeout=ANSWER_BOUND_S)
        items = lsp.request("textDocument/prepareCallHierarchy", {"textDocument": {"uri": u}, "position": pos},
                            timeout=ANSWER_BOUND_S).get("result") or []
        echoed += (impact.get("result") or {}).get("target", {}).get("uri") == u
        echoed += bool(items) and items[0]["uri"] == u
    status = lsp.request("orbit/status", {}, timeout=ANSWER_BOUND_S)["result"]
    from orbit_lsp.config import Settings
    from orbit_lsp.graph.connection import GraphStore

    store = GraphStore(Settings.from_env())
    try:
        rows = store.graph(status["workspaces"][0]["graph"]).ro_query(
            "MATCH (f:File {path: 'cr.py'}) RETURN f.lines").rows
    finally:
        store.close()
    return [("uri_spelling", "answers echoing the spelling sent (of 8)", echoed),
            ("uri_spelling", "File.lines of a 3-line CR-only file", rows[0][0] if rows else None)]


PROBES: list[tuple[str, Callable[[RawLsp, Path, int], list[Row]]]] = [
    ("malformed", probe_malformed), ("bad_files", probe_bad_files), ("uri_spelling", probe_uri_spelling),
    ("symlink_watch", probe_symlink_watch), ("agent_read", probe_agent_read)]


def run(seed: int = 20, time_limit: float = TIME_LIMIT_S) -> tuple[list[Row], float]:
    base = Path(tempfile.mkdtemp(prefix="orbit-attack-"))
    data = base / "data"
    os.environ["ORBIT_DATA_DIR"] = str(data)  # this process's stores too
    ws = make_workspace(base)
    lsp = RawLsp({"ORBIT_DATA_DIR": str(data)}).start()
    rows: list[Row] = []
    t0 = time.perf_counter()
    try:
        lsp.initialize(ws)
        for name, probe in PROBES:
            if time.perf_counter() - t0 > time_limit:
                rows.append((name, "not run (time limit)", True))
                continue
            p0 = time.perf_counter()
            try:
                rows += probe(lsp, ws, seed)
            except Exception as exc:  # noqa: BLE001 - a probe's failure is a result too
                rows.append((name, "probe failed", f"{type(exc).__name__}: {exc}"[:200]))
            rows.append((name, "probe time (s)", f"{time.perf_counter() - p0:.1f}"))
            print(f"{name}: done in {time.perf_counter() - p0:.1f} s", file=sys.stderr, flush=True)
        rows.append(("server", "alive at the end", lsp.alive()))
    finally:
        lsp.stop()
        subprocess.run([sys.executable, "-m", "orbit_lsp", "db", "stop"], env=dict(os.environ), capture_output=True,
                       timeout=60)
        shutil.rmtree(base, ignore_errors=True)
    return rows, time.perf_counter() - t0


def render(rows: list[Row], seconds: float, seed: int, code_label: str | None = None) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [f"\n## {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC · attack surface (issue 20, server items)\n",
             f"- machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; load average at end {load}",
             f"- code: {code_label or 'commit ' + commit}; seed {seed}; every request bounded at {ANSWER_BOUND_S:.0f} s; {seconds:.0f} s in all",
             f"- command: `python -m bench.attack --seed {seed}"
             + (f" --bound {ANSWER_BOUND_S:g}" if ANSWER_BOUND_S != 10.0 else "") + "`\n",
             "| probe | what | count |", "|---|---|---|"]
    for probe, what, value in rows:
        cell = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)
        lines.append(f"| {probe} | {what} | {cell} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    global ANSWER_BOUND_S
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(Path(__file__).with_name("RESULTS.md")))
    ap.add_argument("--no-record", action="store_true", help="print only; do not append to the results")
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--time-limit", type=float, default=TIME_LIMIT_S)
    ap.add_argument("--bound", type=float, default=ANSWER_BOUND_S, help="seconds a request may take before it counts as a hang")
    ap.add_argument("--code-label", default=None, help="what code runs, when not this checkout's (PYTHONPATH)")
    args = ap.parse_args(argv)
    ANSWER_BOUND_S = args.bound
    rows, seconds = run(args.seed, args.time_limit)
    text = render(rows, seconds, args.seed, args.code_label)
    print(text)
    if not args.no_record:
        with open(args.results, "a") as fh:
            fh.write(text)
    hangs = sum(v for _, what, v in rows if what == "unanswered (hangs)" and isinstance(v, int))
    return 1 if hangs else 0


if __name__ == "__main__":
    sys.exit(main())
