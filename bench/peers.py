"""Peers benchmark: "who calls this function?" answered by orbit, jedi and pyright, same run.

    python -m bench.run peers [--corpus stdlib|django|PATH] [--k 20] [--tools jedi,pyright]

Targets: the ``k`` functions/methods with most incoming CALLS edges in orbit's graph of the
corpus copy (the same choice as ``bench.run queries``). For each target:

- orbit: ``orbit_lsp.graph.queries.callers(graph, qual)`` (depth 1) on the indexed graph, median of
  ``--repeat`` runs; its call sites are the ``lines`` of each incoming CALLS edge;
- jedi: ``jedi.Script(path=..., project=jedi.Project(root)).get_references(line, col)`` on the
  definition's name (``jedi`` as shipped; ``jedi-full`` with its bound of 30 parsed files per search
  lifted), in a worker process (so a slow answer can be cut off: ``--jedi-timeout`` per
  function), references kept only when they are the called name of a call (``f(...)``,
  ``obj.f(...)``) or a bare decorator (``@f``), as orbit counts those;
- pyright: its language server (``pyright-langserver --stdio`` from the ``pyright`` PyPI package,
  driven by pygls's ``LanguageClient``): ``textDocument/prepareCallHierarchy`` at the definition
  then ``callHierarchy/incomingCalls``; its call sites are the ``fromRanges``.

For an ``__init__`` target both peers are also asked about its class (orbit counts ``Class(...)``
as a call of ``Class.__init__``; pyright and jedi answer that for the class name) and the two
answers' call sites are merged.

A call site is (workspace-relative file, line of the call expression's start). A peer reports the
line of the called *name*; for ``a.b(\\n).c()``-style calls the two differ, so each peer site is
mapped to its call's start line through the file's ``ast`` (``CallSites``).

Reported: per-target times and ratios peer/orbit (same run, same machine: the machine is shared,
only ratios are comparable across runs), precision/recall of orbit's call sites against pyright's
(and of jedi's), and the disagreements (target, site, caller, which side). Each peer is bounded by
a per-target timeout and a total cap (``--cap``); a target past either is reported as a timeout and
left out of the overlap figures.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import selectors
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from orbit_lsp.graph import queries as Q

from bench.run import Report, Table, log, ms, open_indexed, open_store, pct

# pyright's settings, answered to its workspace/configuration requests: no diagnostics beyond open
# files, no type checking rules; import resolution as it ships (workspace root first).
PYRIGHT_SETTINGS = {
    "python": {},
    "python.analysis": {"diagnosticMode": "openFilesOnly", "typeCheckingMode": "off", "logLevel": "Information",
                        "autoSearchPaths": True, "useLibraryCodeForTypes": True},
    "pyright": {},
}


def add_parser(sub, common) -> None:
    p = sub.add_parser("peers", parents=[common],
                       help="who calls this function: orbit vs jedi vs pyright, times and overlap")
    p.add_argument("--k", type=int, default=20, help="targets: the K most-called functions")
    p.add_argument("--tools", default="jedi,jedi-full,pyright",
                   help="comma-separated peers to run: jedi (as shipped), jedi-full (its search bound lifted), pyright")
    p.add_argument("--repeat", type=int, default=5, help="orbit runs per target (median reported)")
    p.add_argument("--jedi-timeout", type=float, default=60.0, help="seconds per target for jedi")
    p.add_argument("--pyright-timeout", type=float, default=600.0, help="seconds per request for pyright")
    p.add_argument("--cap", type=float, default=900.0, help="total seconds per peer (start-up included)")
    p.add_argument("--list", type=int, default=60, help="disagreements listed (all are counted)")


@dataclass
class Target:
    qual: str
    name: str
    file: str  # workspace-relative
    line: int  # 1-based, the def line
    col: int  # 0-based column of the name
    edges: int  # incoming CALLS edges (callers) in orbit's graph
    cls: tuple[str, int, int] | None = None  # an __init__'s class: (name, line, col)

    def positions(self) -> list[tuple[str, int, int]]:
        """Where a peer is asked: the definition's name, and for ``__init__`` its class's name too
        (orbit counts ``Class(...)`` as a call of ``Class.__init__``; the peers answer that for
        the class)."""
        return [(self.name, self.line, self.col)] + ([self.cls] if self.cls else [])


@dataclass
class Answer:
    """One tool's answer for one target: call sites {(file, line): caller label} and seconds."""

    sites: dict[tuple[str, int], str] = field(default_factory=dict)
    secs: float | None = None
    status: str = "ok"  # ok | timeout | error: ... | skipped (cap)
    dropped: int = 0  # references that are not call sites, or outside the workspace


def choose_targets(graph, k: int) -> list[Target]:
    rows = graph.ro_query(
        "MATCH (c:Symbol)-[e:CALLS]->(s:Symbol) WHERE s.kind IN ['function', 'method'] "
        "RETURN s.qual, s.name, s.file, s.line, s.col, count(e) AS n ORDER BY n DESC, s.qual, s.file LIMIT $k",
        {"k": k}, timeout_ms=120_000).rows
    out = [Target(r[0], r[1], r[2], int(r[3]), int(r[4] or 0), int(r[5])) for r in rows]
    for t in out:
        if t.name == "__init__" and "." in t.qual:
            c = graph.ro_query("MATCH (c:Symbol {qual: $q}) WHERE c.file = $f AND c.kind = 'class' "
                               "RETURN c.name, c.line, c.col", {"q": t.qual.rsplit(".", 1)[0], "f": t.file}).rows
            if c:
                t.cls = (c[0][0], int(c[0][1]), int(c[0][2] or 0))
    return out


class CallSites:
    """Per file: (line of the called name, name) -> line where the call expression starts, from
    ``ast`` (bare decorators count as calls). Files that do not parse map nothing."""

    def __init__(self, root: Path):
        self.root = root
        self._maps: dict[str, dict[tuple[int, str], int] | None] = {}

    def _build(self, rel: str) -> dict[tuple[int, str], int] | None:
        try:
            tree = ast.parse((self.root / rel).read_bytes())
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        out: dict[tuple[int, str], int] = {}

        def add(func):
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name is not None:
                out.setdefault((func.end_lineno, name), func.lineno)

        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                add(node.func)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for d in node.decorator_list:
                    if not isinstance(d, ast.Call):
                        add(d)
        return out

    def call_line(self, rel: str, name_line: int, name: str) -> int | None:
        """Start line of the call whose called name ``name`` is on ``name_line``; None if the
        reference there is not a call (or the file does not parse)."""
        if rel not in self._maps:
            self._maps[rel] = self._build(rel)
        m = self._maps[rel]
        return None if m is None else m.get((name_line, name))

    def names_at(self, rel: str, start_line: int) -> set[str]:
        """Called names of the calls that start on ``start_line``."""
        if rel not in self._maps:
            self._maps[rel] = self._build(rel)
        return {n for (_l, n), st in (self._maps[rel] or {}).items() if st == start_line}

    def parses(self, rel: str) -> bool:
        if rel not in self._maps:
            self._maps[rel] = self._build(rel)
        return self._maps[rel] is not None


def _rel(root: Path, path: str | os.PathLike | None) -> str | None:
    if path is None:
        return None
    p = os.path.realpath(path)
    r = os.path.relpath(p, root)
    return None if r.startswith("..") else Path(r).as_posix()


# -- orbit --------------------------------------------------------------------------------------
def orbit_answers(graph, targets: list[Target], repeat: int) -> list[Answer]:
    out = []
    for t in targets:
        times = []
        ans = None
        for _ in range(max(1, repeat)):
            t0 = time.perf_counter()
            ans = Q.callers(graph, t.qual)
            times.append(time.perf_counter() - t0)
        a = Answer(secs=statistics.median(times))
        for row in ans.rows:
            if row["target"]["file"] != t.file:
                continue
            for c in row["callers"]:
                for ln in c["lines"] or []:
                    a.sites.setdefault((c["file"], int(ln)), c["qual"])
        out.append(a)
    return out


# -- jedi ---------------------------------------------------------------------------------------
def jedi_worker(root: str, full: bool = False) -> None:
    """Worker loop (``python -m bench.peers jedi-worker ROOT [full]``): one JSON target per stdin
    line, one JSON answer per stdout line: {"secs", "refs": [[path, line, column, name, is_def]]}.
    ``full``: lift jedi's bound on the files a reference search parses (``_PARSED_FILE_LIMIT``,
    30 as shipped) so it answers for the whole project (and parso's cache pruning, see below)."""
    import jedi

    if full:
        import parso.cache
        from jedi.inference import references

        references._PARSED_FILE_LIMIT = 10**9
        references._OPENED_FILE_LIMIT = 10**9
        # parso prunes its in-memory tree cache past 600 files, and a search over more files then
        # fails with a KeyError on a module it pruned (seen on Django)
        parso.cache._CACHED_SIZE_TRIGGER = 10**9

    project = jedi.Project(root)
    for line in sys.stdin:
        req = json.loads(line)
        t0 = time.perf_counter()
        try:
            script = jedi.Script(path=req["path"], project=project)
            refs = script.get_references(req["line"], req["col"], include_builtins=False)
            res = {"refs": [[str(r.module_path) if r.module_path else None, r.line, r.column, r.name,
                             r.is_definition()] for r in refs]}
        except Exception as exc:  # noqa: BLE001 - jedi's failure is this target's answer
            res = {"error": f"{type(exc).__name__}: {exc}"}
        res["secs"] = time.perf_counter() - t0
        sys.stdout.write(json.dumps(res) + "\n")
        sys.stdout.flush()


class _JediProc:
    def __init__(self, root: Path, full: bool):
        self.p = subprocess.Popen([sys.executable, "-m", "bench.peers", "jedi-worker", str(root)] + (["full"] if full else []),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, cwd=str(Path(__file__).resolve().parents[1]))
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.p.stdout, selectors.EVENT_READ)

    def ask(self, req: dict, timeout: float) -> dict | None:
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        if not self.sel.select(timeout):
            return None
        line = self.p.stdout.readline()
        return json.loads(line) if line else {"error": "jedi worker exited", "secs": None}

    def close(self) -> None:
        self.sel.close()
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def jedi_answers(root: Path, targets: list[Target], sites: CallSites, timeout: float, cap: float,
                 full: bool = False) -> tuple[list[Answer], dict]:
    out: list[Answer] = []
    t_start = time.perf_counter()
    proc = _JediProc(root, full)
    try:
        for t in targets:
            left = cap - (time.perf_counter() - t_start)
            if left <= 0:
                out.append(Answer(status="skipped (cap)"))
                continue
            a = Answer(secs=0.0)
            for _name, line, col in t.positions():
                left = cap - (time.perf_counter() - t_start)
                res = proc.ask({"path": str(root / t.file), "line": line, "col": col}, max(1.0, min(timeout, left)))
                if res is None:
                    proc.close()
                    log(f"jedi{' (full)' if full else ''}: {t.qual} timed out")
                    a = Answer(status="timeout", secs=min(timeout, left))
                    proc = _JediProc(root, full)
                    break
                a.secs += res.get("secs") or 0.0
                if "error" in res:
                    a.status = "error: " + res["error"][:120]
                for path, ln, _c, name, is_def in res.get("refs", []):
                    rel = _rel(root, path)
                    start = None if rel is None or is_def else sites.call_line(rel, ln, name)
                    if start is None:
                        a.dropped += 1
                        continue
                    a.sites.setdefault((rel, start), "")
            out.append(a)
            log(f"jedi{' (full)' if full else ''}: {t.qual}: {len(a.sites)} call sites in {a.secs or 0:.2f} s")
    finally:
        proc.close()
    import jedi

    return out, {"version": jedi.__version__, "total_s": time.perf_counter() - t_start}


# -- pyright ------------------------------------------------------------------------------------
def pyright_command() -> list[str] | None:
    exe = Path(sys.executable).parent / "pyright-langserver"
    if exe.exists():
        return [str(exe), "--stdio"]
    found = shutil.which("pyright-langserver")
    return [found, "--stdio"] if found else None


def pyright_version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("pyright")
    except importlib.metadata.PackageNotFoundError:
        return "?"


async def _pyright(root: Path, targets: list[Target], sites: CallSites, timeout: float, cap: float
                   ) -> tuple[list[Answer], dict]:
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient
    from pygls.uris import from_fs_path, to_fs_path

    client = LanguageClient("orbit-bench", "1")

    @client.feature(types.WORKSPACE_CONFIGURATION)
    def _config(params: types.ConfigurationParams):
        return [PYRIGHT_SETTINGS.get(item.section or "", {}) for item in params.items]

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def _register(params):  # noqa: ARG001
        return None

    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def _progress(params):  # noqa: ARG001
        return None

    for method in (types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, types.PROGRESS, types.WINDOW_SHOW_MESSAGE,
                   types.TELEMETRY_EVENT):
        client.feature(method)(lambda params: None)

    # pyright lists the workspace's files after `initialized`, asynchronously; a request before that
    # is answered from the open files only (0 callers). It logs "Found N source files" when done.
    found = asyncio.Event()
    n_files: list[int] = []

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def _log(params: types.LogMessageParams):
        m = re.search(r"Found (\d+) source files?", params.message or "")
        if m:
            n_files.append(int(m.group(1)))
            found.set()

    t_start = time.perf_counter()
    cmd = pyright_command()
    await client.start_io(*cmd, cwd=str(root))
    root_uri = from_fs_path(str(root))
    await asyncio.wait_for(client.initialize_async(types.InitializeParams(
        capabilities=types.ClientCapabilities(
            workspace=types.WorkspaceClientCapabilities(configuration=True),
            window=types.WindowClientCapabilities(work_done_progress=True),
            text_document=types.TextDocumentClientCapabilities(call_hierarchy=types.CallHierarchyClientCapabilities())),
        root_uri=root_uri, workspace_folders=[types.WorkspaceFolder(uri=root_uri, name=root.name)])), 120)
    client.initialized(types.InitializedParams())
    try:
        await asyncio.wait_for(found.wait(), min(300.0, cap))
    except asyncio.TimeoutError:
        log("pyright: no 'Found N source files' log line within the wait; going on")
    init_s = time.perf_counter() - t_start
    out: list[Answer] = []
    pid = client._server.pid if getattr(client, "_server", None) else None
    peak_mib = None
    try:
        for t in targets:
            left = cap - (time.perf_counter() - t_start)
            if left <= 0:
                out.append(Answer(status="skipped (cap)"))
                continue
            path = root / t.file
            uri = from_fs_path(str(path))
            text = path.read_bytes().decode("utf-8", "replace")
            client.text_document_did_open(types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
            t0 = time.perf_counter()
            a = Answer()
            try:
                for name, line, col in t.positions():
                    left = cap - (time.perf_counter() - t_start)
                    items = await asyncio.wait_for(client.text_document_prepare_call_hierarchy_async(
                        types.CallHierarchyPrepareParams(text_document=types.TextDocumentIdentifier(uri=uri),
                                                         position=types.Position(line=line - 1, character=col))),
                        max(1.0, min(timeout, left)))
                    items = [i for i in items or [] if i.name == name] or list(items or [])
                    if not items:
                        a.status = f"error: no call hierarchy item at {name}"
                        continue
                    left = cap - (time.perf_counter() - t_start)
                    calls = await asyncio.wait_for(client.call_hierarchy_incoming_calls_async(
                        types.CallHierarchyIncomingCallsParams(item=items[0])), max(1.0, min(timeout, left)))
                    for call in calls or []:
                        rel = _rel(root, to_fs_path(call.from_.uri))
                        if rel is None:
                            a.dropped += len(call.from_ranges)
                            continue
                        for r in call.from_ranges:
                            ln = r.start.line + 1
                            start = sites.call_line(rel, ln, name) or ln
                            a.sites.setdefault((rel, start), call.from_.name)
            except asyncio.TimeoutError:
                a.status = "timeout"
            a.secs = time.perf_counter() - t0
            client.text_document_did_close(types.DidCloseTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=uri)))
            out.append(a)
            peak_mib = _tree_peak_mib(pid) or peak_mib
            log(f"pyright: {t.qual}: {len(a.sites)} call sites in {a.secs:.2f} s ({a.status})")
            if a.status == "timeout":  # the server may still be busy with it: later answers would wait
                for _ in targets[len(out):]:
                    out.append(Answer(status="skipped (after a timeout)"))
                break
    finally:
        try:
            await asyncio.wait_for(client.shutdown_async(None), 30)
            client.exit(None)
        except Exception:  # noqa: BLE001 - a server stuck on a request is stopped below
            pass
        await client.stop()
    return out, {"version": pyright_version(), "init_s": init_s, "source_files": n_files[-1] if n_files else None, "total_s": time.perf_counter() - t_start,
                 "peak_rss_mib": peak_mib}


def _tree_peak_mib(pid: int | None) -> float | None:
    """Largest VmHWM among ``pid`` and its children (pyright-langserver is a Python launcher
    that runs node)."""
    if not pid:
        return None
    best = None
    pids = [pid]
    try:
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as fh:
                        if int(fh.read().rsplit(")", 1)[1].split()[1]) in pids:
                            pids.append(int(d))
                except (OSError, ValueError, IndexError):
                    pass
    except OSError:
        return None
    for p in pids:
        try:
            for line in open(f"/proc/{p}/status"):
                if line.startswith("VmHWM:"):
                    v = int(line.split()[1]) / 1024
                    best = v if best is None else max(best, v)
        except OSError:
            pass
    return best


def pyright_answers(root: Path, targets, sites, timeout: float, cap: float) -> tuple[list[Answer], dict]:
    return asyncio.run(_pyright(root, targets, sites, timeout, cap))


# -- comparison ---------------------------------------------------------------------------------
def overlap(mine: dict, ref: dict) -> tuple[int, int, int]:
    """(common, only mine, only ref) call sites."""
    a, b = set(mine), set(ref)
    return len(a & b), len(a - b), len(b - a)


def prf(common: int, only_mine: int, only_ref: int) -> tuple[float | None, float | None]:
    p = common / (common + only_mine) if common + only_mine else None
    r = common / (common + only_ref) if common + only_ref else None
    return p, r


def _fmt_pr(v) -> str | None:
    return None if v is None else f"{100 * v:.1f} %"


def _ratio(peer: Answer | None, orbit: Answer) -> float | None:
    if peer is None or peer.secs is None or peer.status != "ok" or not orbit.secs:
        return None
    return peer.secs / orbit.secs


def why_orbit_only(t: Target, site: tuple[str, int], sites: CallSites) -> str:
    if not sites.parses(site[0]):
        return "file does not parse with this Python's ast"
    names = sites.names_at(site[0], site[1])
    if t.name not in names:
        return "called under another name (alias, variable, constructor)"
    return "same name; pyright binds it elsewhere or not at all"


def why_peer_only(graph, t: Target, site: tuple[str, int], sites: CallSites) -> str:
    """What orbit's graph (or the file's ast) says about a call site only the peer attributes to ``t``."""
    if sites.parses(site[0]) and t.name not in sites.names_at(site[0], site[1]):
        return "no call of that name starts there (ast): the peer counts a reference"
    rows = graph.ro_query(
        "MATCH (c:Symbol {file: $f})-[e:CALLS]->(s:Symbol {name: $n}) WHERE $line IN e.lines "
        "RETURN DISTINCT s.qual LIMIT 3", {"f": site[0], "n": t.name, "line": site[1]}, timeout_ms=30_000).rows
    if rows:
        return "orbit binds it to " + ", ".join(r[0] for r in rows)
    rows = graph.ro_query(
        "MATCH (c:Symbol {file: $f}) WHERE c.line <= $line AND c.end_line >= $line AND $n IN c.unresolved_names "
        "RETURN c.qual LIMIT 1", {"f": site[0], "n": t.name, "line": site[1]}, timeout_ms=30_000).rows
    if rows:
        return "orbit: unresolved call"
    return "orbit: no call edge of that name there"


def _category(note: str) -> str:
    return "orbit binds it to another symbol" if note.startswith("orbit binds it to ") else note


def run(corpus: Path, label: str, settings, command: str, args) -> Report:
    root = Path(os.path.realpath(corpus))
    out = Report("peers", label, command)
    store = open_store(settings)
    ix, rep0, open_s = open_indexed(root, store, settings)
    graph = store.graph(ix.graph.name)
    targets = choose_targets(graph, args.k)
    log(f"peers: graph opened in {open_s:.2f} s ({rep0.mode}); {len(targets)} targets")
    sites = CallSites(root)
    orbit = orbit_answers(graph, targets, args.repeat)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    peers: dict[str, tuple[list[Answer], dict]] = {}
    for tool in tools:
        if tool in ("jedi", "jedi-full"):
            try:
                import jedi  # noqa: F401
            except ImportError:
                out.notes.append("jedi is not installed (pip install -e '.[bench]'): not run")
                continue
            peers[tool] = jedi_answers(root, targets, sites, args.jedi_timeout, args.cap, full=tool == "jedi-full")
        elif tool == "pyright":
            if pyright_command() is None:
                out.notes.append("pyright-langserver is not installed (pip install -e '.[bench]'): not run")
                continue
            try:
                peers["pyright"] = pyright_answers(root, targets, sites, args.pyright_timeout, args.cap)
            except (OSError, asyncio.TimeoutError, RuntimeError) as exc:  # no node, a crash at start-up
                out.notes.append(f"pyright could not be run: {type(exc).__name__}: {exc}")
        else:
            raise SystemExit(f"bench: unknown peer {tool!r} (jedi, jedi-full, pyright)")

    # per target
    hdr = ["function", "orbit callers", "orbit sites", "orbit ms"]
    for tool in peers:
        hdr += [f"{tool} sites", f"{tool} s", f"{tool} / orbit"]
    if "pyright" in peers:
        hdr += ["orbit precision vs pyright", "orbit recall vs pyright"]
    rows = []
    disagreements = []
    totals = {"orbit": [0, 0, 0], "orbit_no_init": [0, 0, 0], "jedi": [0, 0, 0], "jedi-full": [0, 0, 0]}
    compared = 0
    for i, t in enumerate(targets):
        o = orbit[i]
        row = [t.qual, t.edges, len(o.sites), ms(o.secs)]
        for tool, (ans, _info) in peers.items():
            a = ans[i]
            row += [len(a.sites) if a.status == "ok" else a.status, a.secs, _ratio(a, o)]
        if "pyright" in peers:
            pa = peers["pyright"][0][i]
            if pa.status == "ok":
                compared += 1
                c, mo, po = overlap(o.sites, pa.sites)
                totals["orbit"] = [x + y for x, y in zip(totals["orbit"], (c, mo, po))]
                p, r = prf(c, mo, po)
                row += [_fmt_pr(p), _fmt_pr(r)]
                if t.name != "__init__":
                    totals["orbit_no_init"] = [x + y for x, y in zip(totals["orbit_no_init"], (c, mo, po))]
                for site in sorted(set(o.sites) - set(pa.sites)):
                    disagreements.append([t.qual, f"{site[0]}:{site[1]}", o.sites[site], "orbit only",
                                          why_orbit_only(t, site, sites)])
                for site in sorted(set(pa.sites) - set(o.sites)):
                    enc = Q.symbol_at(graph, site[0], site[1]).rows
                    caller = enc[0]["qual"] if enc else pa.sites[site]
                    disagreements.append([t.qual, f"{site[0]}:{site[1]}", caller, "pyright only",
                                          why_peer_only(graph, t, site, sites)])
                for jt in ("jedi", "jedi-full"):
                    if jt in peers and peers[jt][0][i].status == "ok":
                        jc = overlap(peers[jt][0][i].sites, pa.sites)
                        totals[jt] = [x + y for x, y in zip(totals[jt], jc)]
            else:
                row += [None, None]
        rows.append(row)
    out.tables.append(Table("who calls this function: the most-called functions of orbit's graph (call sites = "
                            "distinct (file, call line); orbit ms = median of "
                            f"{args.repeat} runs; peer s = one run)", hdr, rows))

    # summary per tool
    srows = []
    o_secs = [a.secs for a in orbit]
    srows.append(["orbit", f"{len(targets)}/{len(targets)}", ms(pct(o_secs, 50)), ms(pct(o_secs, 95)),
                  sum(o_secs), None, None, f"graph open {open_s:.2f} s ({rep0.mode})",
                  *((_fmt_pr(v) for v in prf(*totals["orbit"])) if "pyright" in peers else (None, None))])
    for tool, (ans, info) in peers.items():
        ok = [(a, o) for a, o in zip(ans, orbit) if a.status == "ok" and a.secs is not None]
        secs = [a.secs for a, _o in ok]
        ratios = [a.secs / o.secs for a, o in ok if o.secs]
        tot_ratio = (sum(secs) / sum(o.secs for _a, o in ok)) if ok else None
        extra = (f"{tool} {info.get('version')}; total {info.get('total_s', 0):.0f} s"
                 + (f", start-up {info['init_s']:.1f} s (initialize until it has listed the workspace: "
                    f"{info.get('source_files')} source files)" if "init_s" in info else "")
                 + (f", peak RSS {info['peak_rss_mib']:,.0f} MiB" if info.get("peak_rss_mib") else ""))
        bad = [a.status for a in ans if a.status != "ok"]
        if tool == "pyright":
            pr = (_fmt_pr(1.0), _fmt_pr(1.0))
        elif "pyright" in peers:
            pr = tuple(_fmt_pr(v) for v in prf(*totals[tool]))
        else:
            pr = (None, None)
        srows.append([tool, f"{len(ok)}/{len(targets)}" + (f" ({', '.join(sorted(set(bad)))})" if bad else ""),
                      ms(pct(secs, 50)), ms(pct(secs, 95)), sum(secs),
                      statistics.median(ratios) if ratios else None, tot_ratio, extra, *pr])
    out.tables.append(Table("summary (ratios = peer time / orbit time on the same targets, same run; precision "
                            "and recall of each tool's call sites against pyright's, over the targets pyright "
                            "answered)",
                            ["tool", "answered", "p50 ms", "p95 ms", "total s", "median ratio", "total ratio",
                             "notes", "precision vs pyright", "recall vs pyright"], srows))
    if "pyright" in peers:
        c, mo, po = totals["orbit"]
        p_ni, r_ni = prf(*totals["orbit_no_init"])
        out.notes.append(f"orbit against pyright without the `__init__` targets (their pyright answer merges the "
                         f"calls of `__init__` and of the class): precision {_fmt_pr(p_ni)}, "
                         f"recall {_fmt_pr(r_ni)} ({totals['orbit_no_init'][0]:,} common, "
                         f"{totals['orbit_no_init'][1]:,} orbit only, {totals['orbit_no_init'][2]:,} pyright only).")
        groups: dict[tuple, list] = {}
        for d in disagreements:
            groups.setdefault((d[0], d[3], _category(d[4])), []).append(d)
        gro = sorted(groups.items(), key=lambda kv: -len(kv[1]))
        out.tables.append(Table(f"disagreements with pyright by function, side and what orbit's graph says "
                                f"({mo:,} orbit only, {po:,} pyright only, {c:,} common, over {compared} targets)",
                                ["function", "side", "why (classified by the bench)", "sites", "example"],
                                [[f, side, why, len(v), f"{v[0][1]} in {v[0][2]}"] for (f, side, why), v in gro]))
        listed = []
        per = max(1, args.list // max(1, len(groups)))
        for _key, v in gro:
            listed += v[:per]
        listed = listed[:args.list]
        out.tables.append(Table(f"disagreements listed (up to {per} per group above, {len(listed)} in all; the full "
                                "list is in the JSON file named in the notes)",
                                ["function", "call site", "caller (orbit's enclosing symbol)", "side",
                                 "what orbit's graph says"], listed))
        dump = Path(args.cache_dir).expanduser() / "peers" / f"{label.replace(' ', '_')}-disagreements.json"
        dump.parent.mkdir(parents=True, exist_ok=True)
        dump.write_text(json.dumps([dict(zip(("function", "site", "caller", "side", "why"), d))
                                    for d in disagreements], indent=1))
        out.notes.append(f"all {len(disagreements):,} disagreements: {dump}")
    jedi_dropped = sum(a.dropped for a in peers["jedi"][0]) if "jedi" in peers else 0
    out.notes.append("Call sites compared as (file, start line of the call); a peer's name position is mapped to "
                     "its call's start line via ast. jedi references that are not calls (imports, attribute "
                     f"reads, the definition) or outside the corpus are dropped ({jedi_dropped:,} here).")
    out.notes.append("jedi bounds its project-wide reference search by design (it parses at most 30 files that "
                     "contain the name: `jedi.inference.references._PARSED_FILE_LIMIT`), so its recall on a large "
                     "corpus is bounded too; `jedi-full` is the same jedi with that bound lifted (in its worker).")
    out.data = {"targets": targets, "orbit": orbit, "peers": peers, "totals": totals,
                "disagreements": disagreements, "compared": compared}
    store.close()
    return out


if __name__ == "__main__" and len(sys.argv) >= 3 and sys.argv[1] == "jedi-worker":
    jedi_worker(sys.argv[2], full=sys.argv[3:4] == ["full"])
