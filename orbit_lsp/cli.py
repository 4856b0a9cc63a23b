"""The ``orbit-lsp`` command line.

Without a subcommand (or with ``--stdio``, which editors pass) it runs the language server over
stdio. Subcommands answer the same questions from the code graph for people and scripts:

``index PATH``, ``impact FILE``, ``callers SYMBOL``, ``chain FROM TO``, ``cypher QUERY``,
``export PATH``, ``ask QUESTION``, ``memory add|list|confirm|forget``, ``db status``, ``db stop``.

Each query subcommand prints its answer, then every Cypher statement it ran with its parameters;
``--json`` prints one JSON object ``{"command", "workspace", "graph", "result", "cypher"}``
instead. Errors are one line on stderr: exit status 2 for bad arguments, 1 for runtime errors
(FalkorDB offline, a refused or timed-out query, a file or symbol not in the graph), never a
traceback (``-v`` logs it).

Which graph a query reads when ``--workspace`` is not given: among the indexed workspaces that
contain FILE (``impact``) or, for the other queries, that contain the current directory or lie
below it, the one most recently indexed by ``orbit-lsp index`` (then the deepest); with none, the
current directory, which is then indexed first. So ``orbit-lsp index src`` followed by
``orbit-lsp callers main`` reads ``src``. A workspace counts as indexed when its graph exists on
the server; the CLI records when it indexed which root in ``<data dir>/workspaces.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

PROG = "orbit-lsp"
log = logging.getLogger("orbit_lsp.cli")

RECENT_FILE = "workspaces.json"  # under the data dir: roots indexed by the CLI, with times
RECENT_MAX = 50


class UsageError(Exception):
    """Bad command-line arguments (exit 2)."""


class CliError(Exception):
    """A runtime failure reported as one line (exit 1)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D401 - argparse hook
        raise UsageError(f"{message} (see '{self.prog} --help')")


# ---------------------------------------------------------------------------------------------
# Argument parsing


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    # Global options are accepted before and after the subcommand: the top-level parser holds
    # the defaults, the subparsers use SUPPRESS so they only set what was given.
    def add_globals(p: argparse.ArgumentParser, sub: bool) -> None:
        d = (lambda v: argparse.SUPPRESS) if sub else (lambda v: v)  # noqa: E731
        p.add_argument("--falkordb-url", metavar="URL", default=d(None),
                       help="external FalkorDB (redis:// or rediss://); default: $ORBIT_FALKORDB_URL, "
                            "else the embedded server")
        p.add_argument("--data-dir", metavar="DIR", default=d(None),
                       help="data dir of the embedded server and caches (default: $ORBIT_DATA_DIR "
                            "or the user data dir)")
        p.add_argument("-v", "--verbose", action="count", default=d(0),
                       help="log to stderr (-vv for debug)")

    common = _Parser(add_help=False)
    add_globals(common, sub=True)
    out = _Parser(add_help=False)
    out.add_argument("--json", action="store_true", help="print one JSON object")
    ws = _Parser(add_help=False)
    ws.add_argument("--workspace", metavar="PATH",
                    help="workspace root whose graph is queried (default: see 'orbit-lsp --help')")

    parser = _Parser(
        prog=PROG,
        description="A language server whose working context is a code graph in FalkorDB. "
                    "Without a command: run the language server over stdio.",
        epilog="Queries read the graph of --workspace; without it, of the most recently indexed "
               "workspace that contains FILE (impact) or contains or lies below the current "
               "directory (other queries); with none, the current directory is indexed first.")
    add_globals(parser, sub=False)
    parser.add_argument("--stdio", action="store_true",
                        help="run the language server over stdio (the default without a command)")
    from orbit_lsp import __version__
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")

    subs = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = subs.add_parser("index", parents=[common, out], help="index a workspace and print a summary",
                        description="Index the Python files under PATH into its code graph "
                                    "(full the first time, then only changed files).")
    p.add_argument("path", metavar="PATH", nargs="?", default=".", help="workspace root (default: .)")
    p.add_argument("--top", type=_positive_int, default=10, metavar="N",
                   help="how many most-depended-on files to list (default 10)")

    p = subs.add_parser("impact", parents=[common, out, ws], help="files that depend on FILE, with hops",
                        description="Files that import FILE directly or transitively, each with "
                                    "its minimal number of hops.")
    p.add_argument("file", metavar="FILE", help="path relative to the workspace or the current "
                                                "directory, or absolute")
    p.add_argument("--max-hops", type=_positive_int, default=None, metavar="N",
                   help="deepest hop to follow (default 4)")

    p = subs.add_parser("callers", parents=[common, out, ws], help="who calls SYMBOL",
                        description="Callers of SYMBOL (a name, Class.method or a qualified name), "
                                    "one answer per matching symbol.")
    p.add_argument("symbol", metavar="SYMBOL")
    p.add_argument("--depth", type=_positive_int, default=1, metavar="N",
                   help="follow callers of callers up to N hops (default 1)")

    p = subs.add_parser("chain", parents=[common, out, ws], help="shortest call path FROM -> TO",
                        description="Shortest CALLS path from one symbol to another.")
    p.add_argument("source", metavar="FROM")
    p.add_argument("target", metavar="TO")
    p.add_argument("--max-len", type=_positive_int, default=10, metavar="N",
                   help="longest path to look for, in calls (default 10)")

    p = subs.add_parser("cypher", parents=[common, out, ws], help="run a read-only Cypher query",
                        description="Run one Cypher query read-only (GRAPH.RO_QUERY) with a timeout "
                                    "and a row cap; says when rows were cut.")
    p.add_argument("query", metavar="QUERY")
    p.add_argument("--params", metavar="JSON", help='query parameters as a JSON object, e.g. \'{"n": "run"}\'')
    p.add_argument("--row-cap", type=_positive_int, default=None, metavar="N",
                   help="most rows returned (default: $ORBIT_ROW_CAP or 500)")
    p.add_argument("--timeout-ms", type=_positive_int, default=None, metavar="MS",
                   help="server-side timeout (default: $ORBIT_QUERY_TIMEOUT_MS or 5000)")

    p = subs.add_parser("export", parents=[common, out, ws], help="write the whole graph as JSON",
                        description="Write the whole code graph (files, symbols, packages and every "
                                    "edge with its properties) as one JSON document.")
    p.add_argument("output", metavar="PATH", help="output file, or - for stdout")

    p = subs.add_parser("ask", parents=[common, out, ws], help="answer a question about the workspace",
                        description="Answer a free question with graph tools, step by step, with the "
                                    "configured model (OPENAI_BASE_URL, OPENAI_API_KEY, ORBIT_MODEL, "
                                    "ORBIT_FALLBACK_MODELS), or with the built-in planner when no model "
                                    "is configured. Prints the answer and every step with its Cypher.")
    p.add_argument("question", metavar="QUESTION")
    p.add_argument("--read", choices=("ask", "allow", "deny"), default="ask",
                   help="file reads by the agent: ask on the terminal (default; denied when stdin "
                        "is not a terminal), allow, or deny")
    p.add_argument("--conversation", type=_positive_int, default=None, metavar="ID",
                   help="continue conversation ID (printed with --json)")

    p = subs.add_parser("memory", parents=[common], help="your memories: add, list, confirm, forget",
                        description="Memories the agent recalls when a question shares their concepts "
                                    "(graph orbit_memory). Secrets are redacted before anything is saved.")
    msubs = p.add_subparsers(dest="memory_command", metavar="ACTION", required=True)
    m = msubs.add_parser("add", parents=[common, out, ws], help="save a memory (confirmed unless --unconfirmed)",
                         description="Save TEXT as a memory about the workspace (--workspace, else the one "
                                     "queries would read; --no-project: about no project). --file anchors it "
                                     "to a file of the workspace (--line: to the symbol on that line); it is "
                                     "marked possibly stale once that file changes in the graph.")
    m.add_argument("text", metavar="TEXT")
    m.add_argument("--file", metavar="FILE", help="anchor to this workspace file")
    m.add_argument("--line", type=_positive_int, metavar="N", help="anchor to the symbol on line N of --file")
    m.add_argument("--unconfirmed", action="store_true", help="save unconfirmed (not recalled until confirmed)")
    m.add_argument("--no-project", action="store_true", help="about no workspace in particular")
    m = msubs.add_parser("list", parents=[common, out], help="every memory, with its uses and stale flag")
    m.add_argument("--unconfirmed", action="store_true", help="only unconfirmed memories")
    m = msubs.add_parser("confirm", parents=[common, out], help="confirm memory ID (it becomes recallable)")
    m.add_argument("id", type=_positive_int, metavar="ID")
    m = msubs.add_parser("forget", parents=[common, out], help="delete memory ID (the audit log keeps a record)")
    m.add_argument("id", type=_positive_int, metavar="ID")

    p = subs.add_parser("db", parents=[common], help="the FalkorDB server: status, stop",
                        description="Inspect or stop the FalkorDB server orbit uses.")
    dbsubs = p.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    dbsubs.add_parser("status", parents=[common, out], help="is the server up, where, which graphs")
    dbsubs.add_parser("stop", parents=[common, out], help="stop the embedded server (data is saved)")
    return parser


# ---------------------------------------------------------------------------------------------
# Context: settings, store, output


def _scrub(text: str, url: str | None) -> str:
    """Remove the password of ``url`` from ``text``."""
    if not url:
        return text
    from urllib.parse import unquote, urlsplit
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        for p in {password, unquote(password)}:
            text = text.replace(p, "***")
    return text


class Ctx:
    def __init__(self, args: argparse.Namespace):
        from pydantic import ValidationError

        from orbit_lsp.config import Settings

        self.args = args
        try:
            self.settings = Settings.from_env(
                falkordb_url=args.falkordb_url,
                data_dir=Path(args.data_dir).expanduser() if args.data_dir else None)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(x) for x in err.get("loc", ())) or "settings"
            raise UsageError(f"invalid setting {field}: {err.get('msg')}") from None
        url = self.settings.falkordb_url
        if url is not None and not url.startswith(("redis://", "rediss://", "unix://")):
            origin = "--falkordb-url" if args.falkordb_url is not None else "ORBIT_FALKORDB_URL"
            raise UsageError(f"{origin} must start with redis://, rediss:// or unix://")
        self.json = bool(getattr(args, "json", False))
        self._store = None

    @property
    def store(self):
        if self._store is None:
            from orbit_lsp.graph.connection import GraphStore
            self._store = GraphStore(self.settings)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def note(self, text: str) -> None:
        print(f"{PROG}: {text}", file=sys.stderr)


def _dumps(obj: Any, **kw) -> str:
    return json.dumps(obj, default=str, ensure_ascii=False, **kw)


def _emit_json(command: str, result: Any, cypher: list[dict], stream=None, **extra) -> None:
    doc = {"command": command, **extra, "result": result, "cypher": cypher}
    print(_dumps(doc, indent=2), file=stream or sys.stdout)


def _print_cypher(cypher: list[dict], stream=None) -> None:
    stream = stream or sys.stdout
    if not cypher:
        return
    n = len(cypher)
    print(f"\nCypher ({n} statement{'s' if n != 1 else ''}):", file=stream)
    width = len(str(n))
    for i, c in enumerate(cypher, 1):
        print(f"  {i:>{width}}. {c['query']}", file=stream)
        if c.get("params"):
            print(f"  {'':>{width}}  params: {_dumps(c['params'])}", file=stream)


# ---------------------------------------------------------------------------------------------
# Workspaces: which graph, indexed or not


def _recent_path(ctx: Ctx) -> Path:
    return Path(ctx.settings.data_dir) / RECENT_FILE


def _load_recent(ctx: Ctx) -> dict[str, float]:
    try:
        data = json.loads(_recent_path(ctx).read_text())
        return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def _record_indexed(ctx: Ctx, root: Path) -> None:
    recent = _load_recent(ctx)
    recent[str(root)] = time.time()
    keep = dict(sorted(recent.items(), key=lambda kv: kv[1], reverse=True)[:RECENT_MAX])
    path = _recent_path(ctx)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
        tmp.write_text(json.dumps(keep, indent=1))
        os.replace(tmp, path)
    except OSError as exc:  # a convenience only: never fail the command for it
        log.info("could not record indexed workspace: %s", exc)


def _is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _resolve_workspace(ctx: Ctx, file_arg: str | None = None) -> Path:
    """The workspace root whose graph answers (see the module docstring)."""
    from orbit_lsp.graph.connection import code_graph_name

    if getattr(ctx.args, "workspace", None):
        root = Path(ctx.args.workspace).expanduser()
        if not root.is_dir():
            raise UsageError(f"--workspace {ctx.args.workspace}: not a directory")
        return Path(os.path.realpath(root))

    graphs = set(ctx.store.list_graphs())
    cwd = Path(os.path.realpath(os.getcwd()))
    recent = _load_recent(ctx)

    def indexed_ancestors(start: Path) -> list[Path]:
        return [d for d in (start, *start.parents) if code_graph_name(d) in graphs]

    def pick(cands: list[Path]) -> Path | None:
        # the most recently indexed by this CLI; among the others, the deepest
        return max(cands, key=lambda d: (recent.get(str(d), 0.0), len(d.parts)), default=None)

    chosen: Path | None = None
    if file_arg:
        p = Path(file_arg).expanduser()
        cand = p if p.is_absolute() else cwd / p
        if cand.exists():
            real = Path(os.path.realpath(cand))
            chosen = pick(indexed_ancestors(real if real.is_dir() else real.parent))
            if chosen is None:
                if not _is_within(real, cwd):
                    raise UsageError(f"{file_arg} is outside the current directory and no indexed "
                                     f"workspace contains it: pass --workspace")
                chosen = cwd
    if chosen is None:
        below = [Path(r) for r in recent if _is_within(Path(r), cwd) and code_graph_name(r) in graphs]
        chosen = pick(indexed_ancestors(cwd) + below) or cwd
    if chosen != cwd:
        ctx.note(f"workspace {chosen}")
    return chosen


def _index(ctx: Ctx, root: Path, progress=None):
    from orbit_lsp.index.indexer import WorkspaceIndexer

    indexer = WorkspaceIndexer(root, ctx.store, ctx.settings)
    report = indexer.index_all(progress=progress)
    _record_indexed(ctx, indexer.root)
    return indexer, report


def _workspace_graph(ctx: Ctx, file_arg: str | None = None):
    """(root, graph) for a query; indexes the workspace first when it has no graph yet."""
    from orbit_lsp.graph.connection import code_graph_name

    root = _resolve_workspace(ctx, file_arg)
    graph = ctx.store.graph(code_graph_name(root))
    if not graph.exists():
        ctx.note(f"{root} is not indexed yet; indexing it first")
        _, rep = _index(ctx, root)
        ctx.note(f"indexed {rep.files} files, {rep.symbols} symbols in {rep.seconds:.2f} s")
    return root, graph


def _rel_file(file_arg: str, root: Path) -> str:
    """Workspace-relative path (``/`` separators) of FILE: relative to the workspace, relative
    to the current directory, or absolute."""
    p = Path(file_arg).expanduser()
    cands = [p] if p.is_absolute() else [root / p, Path.cwd() / p]
    for c in cands:
        if not os.path.lexists(c):
            continue
        for form in (os.path.abspath(c), os.path.realpath(c)):
            if _is_within(Path(form), root) or _is_within(Path(form), Path(os.path.realpath(root))):
                base = root if _is_within(Path(form), root) else Path(os.path.realpath(root))
                rel = os.path.relpath(form, base).replace(os.sep, "/")
                if rel == ".":
                    raise UsageError(f"{file_arg} is the workspace itself, not a file")
                return rel
        raise UsageError(f"{file_arg} is outside the workspace {root}")
    if p.is_absolute():
        raise UsageError(f"no such file: {file_arg}")
    rel = p.as_posix()
    while rel.startswith("./"):
        rel = rel[2:]
    return rel  # not on disk: maybe a deleted file that the graph still holds


# ---------------------------------------------------------------------------------------------
# Progress


class _Progress:
    """A progress bar on a TTY stderr; otherwise a few plain lines (start, quarters, end)."""

    def __init__(self, label: str, stream=None):
        self.stream = stream or sys.stderr
        self.label = label
        try:
            self.tty = self.stream.isatty()
        except (AttributeError, ValueError):
            self.tty = False
        self.next_quarter = 1
        self.started = False
        self.drawn = False

    def __call__(self, done: int, total: int, rel: str) -> None:
        if self.tty:
            cols = shutil.get_terminal_size((80, 20)).columns
            width = 24
            filled = int(width * done / total) if total else width
            head = f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
            room = max(0, cols - len(head) - 1)
            tail = rel if len(rel) <= room else ("…" + rel[-(room - 1):] if room > 1 else "")
            self.stream.write("\r" + head + tail + "\x1b[K")
            self.stream.flush()
            self.drawn = True
            return
        if not self.started:
            print(f"{self.label}: {total} files", file=self.stream)
            self.started = True
        pct = 100 * done // total if total else 100
        crossed = None
        while self.next_quarter <= 4 and pct >= self.next_quarter * 25:
            crossed = self.next_quarter * 25
            self.next_quarter += 1
        if crossed is not None:
            print(f"{self.label}: {done}/{total} ({crossed}%)", file=self.stream)
        self.stream.flush()

    def finish(self) -> None:
        if self.tty and self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


# ---------------------------------------------------------------------------------------------
# Commands


def cmd_index(ctx: Ctx) -> int:
    from orbit_lsp.graph import queries

    root = Path(ctx.args.path).expanduser()
    if not root.exists():
        raise UsageError(f"no such directory: {ctx.args.path}")
    if not root.is_dir():
        raise UsageError(f"{ctx.args.path} is not a directory (index takes a workspace folder)")
    progress = _Progress(f"indexing {ctx.args.path}")
    try:
        indexer, rep = _index(ctx, root, progress)
    finally:
        progress.finish()
    top = queries.most_depended_on(indexer.graph, ctx.args.top)
    result = {
        "mode": rep.mode, "seconds": round(rep.seconds, 3),
        "files": rep.files, "parsed": rep.parsed, "reused": rep.reused, "symbols": rep.symbols,
        "imports": rep.imports, "calls": rep.calls, "packages": rep.packages, "inherits": rep.inherits,
        "unresolved_calls": rep.unresolved_calls,
        "skipped": [{"path": p, "reason": r} for p, r in rep.skipped],
        "parse_errors": [{"path": p, "error": e} for p, e in sorted(rep.parse_errors.items())],
        "most_depended_on": top.rows,
        "timings": {k: round(v, 4) for k, v in rep.timings.items()},
    }
    if ctx.json:
        _emit_json("index", result, top.cypher, workspace=str(indexer.root), graph=indexer.graph.name)
        return 0
    print(f"Indexed {indexer.root} ({rep.mode}) in {rep.seconds:.2f} s")
    print(f"  graph              {indexer.graph.name}")
    print(f"  files              {rep.files} ({rep.parsed} parsed, {rep.reused} unchanged)")
    for label, value in (("symbols", rep.symbols), ("imports", rep.imports), ("calls", rep.calls),
                         ("packages", rep.packages), ("inherits", rep.inherits),
                         ("unresolved calls", rep.unresolved_calls),
                         ("skipped files", len(rep.skipped)), ("parse errors", len(rep.parse_errors))):
        print(f"  {label:<18} {value}")
    for p, r in rep.skipped[:10]:
        print(f"    skipped {p}: {r}")
    if len(rep.skipped) > 10:
        print(f"    … and {len(rep.skipped) - 10} more skipped (see --json)")
    for p, e in sorted(rep.parse_errors.items())[:10]:
        print(f"    parse error {p}: {e}")
    if len(rep.parse_errors) > 10:
        print(f"    … and {len(rep.parse_errors) - 10} more parse errors (see --json)")
    if top.rows:
        print("\nMost depended-on files (direct importers):")
        w = max(len(str(r["importers"])) for r in top.rows)
        for r in top.rows:
            print(f"  {r['importers']:>{w}}  {r['path']}")
    else:
        print("\nNo file imports another workspace file.")
    _print_cypher(top.cypher)
    return 0


def cmd_impact(ctx: Ctx) -> int:
    from orbit_lsp.graph import queries

    root, graph = _workspace_graph(ctx, ctx.args.file)
    rel = _rel_file(ctx.args.file, root)
    if (root / rel).is_dir():
        raise UsageError(f"{ctx.args.file} is a directory; impact takes a file")
    hops = ctx.args.max_hops or ctx.settings.max_hops
    ans = queries.impact(graph, rel, max_hops=hops)
    if not ans.found:
        if not (root / rel).exists():
            raise UsageError(f"no such file in {root}: {ctx.args.file}")
        raise CliError(f"{rel} is not in the graph of {root} (not a Python file, excluded or skipped)")
    if ctx.json:
        _emit_json("impact", {"file": rel, "max_hops": hops, **_answer(ans)}, ans.cypher,
                   workspace=str(root), graph=graph.name)
        return 0
    n = len(ans.rows)
    deepest = max((r["hops"] for r in ans.rows), default=0)
    if n:
        print(f"{rel}: {n} dependent{'s' if n != 1 else ''}, {deepest} hop{'s' if deepest != 1 else ''}")
        for r in ans.rows:
            print(f"  {r['hops']}  {r['path']}")
    else:
        print(f"{rel}: 0 dependents (no workspace file imports it)")
    for note in ans.notes:
        print(f"note: {note}")
    _print_cypher(ans.cypher)
    return 0


def _answer(ans) -> dict:
    """An ``Answer`` without its Cypher (that goes in the top-level ``cypher``)."""
    return {"rows": ans.rows, "notes": ans.notes}


def _where(sym: dict) -> str:
    return f"{sym['file']}:{sym['line']}"


def cmd_callers(ctx: Ctx) -> int:
    from orbit_lsp.graph import queries

    root, graph = _workspace_graph(ctx)
    ans = queries.callers(graph, ctx.args.symbol, ctx.args.depth)
    if not ans.rows:
        raise CliError(f"no symbol named '{ctx.args.symbol}' in the graph of {root}")
    if ctx.json:
        _emit_json("callers", {"symbol": ctx.args.symbol, "depth": ctx.args.depth, **_answer(ans)},
                   ans.cypher, workspace=str(root), graph=graph.name)
        return 0
    for note in ans.notes:
        print(f"note: {note}")
    for i, entry in enumerate(ans.rows):
        t, found, unresolved = entry["target"], entry["callers"], entry["unresolved_elsewhere"]
        if i or ans.notes:
            print()
        print(f"{t['qual']}  ({t['kind']}, {_where(t)})")
        n = len(found)
        scope = "" if ctx.args.depth == 1 else f" within {ctx.args.depth} hops"
        print(f"  {n} caller{'s' if n != 1 else ''}{scope}")
        if found:
            wq = max(len(c["qual"]) for c in found)
            for c in found:
                lines = ", ".join(str(x) for x in (c.get("lines") or [])) or "?"
                via = f", calls {c['via']}" if c["depth"] > 1 else ""
                depth = f"[{c['depth']}] " if ctx.args.depth > 1 else ""
                print(f"    {depth}{c['qual']:<{wq}}  {_where(c)}  (line {lines}, {c['resolved']}{via})")
        if unresolved:
            print(f"  {unresolved} unresolved call site{'s' if unresolved != 1 else ''} "
                  f"use{'s' if unresolved == 1 else ''} this name (may call it; not counted above)")
    _print_cypher(ans.cypher)
    return 0


def cmd_chain(ctx: Ctx) -> int:
    from orbit_lsp.graph import queries

    root, graph = _workspace_graph(ctx)
    ans = queries.call_chain(graph, ctx.args.source, ctx.args.target, max_len=ctx.args.max_len)
    missing = [n for n in ans.notes if n.startswith("no symbol named")]
    if missing:
        raise CliError("; ".join(missing) + f" in the graph of {root}")
    if ctx.json:
        _emit_json("chain", {"from": ctx.args.source, "to": ctx.args.target, **_answer(ans)},
                   ans.cypher, workspace=str(root), graph=graph.name)
        return 0
    for note in ans.notes:
        print(f"note: {note}")
    if not ans.rows:
        print(f"no call path from {ctx.args.source} to {ctx.args.target}")
    for i, row in enumerate(ans.rows):
        if i or ans.notes:
            print()
        calls = len(row["path"]) - 1
        print(f"{row['from']} -> {row['to']}: {calls} call{'s' if calls != 1 else ''}")
        wq = max(len(n["qual"]) for n in row["path"])
        for k, n in enumerate(row["path"]):
            arrow = "   " if k == 0 else "-> "
            print(f"  {arrow}{n['qual']:<{wq}}  {n['file']}:{n['line']}")
    _print_cypher(ans.cypher)
    return 0


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else _dumps(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= 80 else text[:79] + "…"


def cmd_cypher(ctx: Ctx) -> int:
    from orbit_lsp.graph.readonly import run_readonly

    params = None
    if ctx.args.params:
        try:
            params = json.loads(ctx.args.params)
        except ValueError as exc:
            raise UsageError(f"--params is not valid JSON: {exc}") from None
        if not isinstance(params, dict):
            raise UsageError("--params must be a JSON object")
    root, graph = _workspace_graph(ctx)
    res = run_readonly(graph, ctx.args.query, params, row_cap=ctx.args.row_cap,
                       timeout_ms=ctx.args.timeout_ms)
    cypher = [{"query": res.executed, "params": params or {}}]
    data = res.to_dict()
    if ctx.json:
        _emit_json("cypher", data, cypher, workspace=str(root), graph=graph.name)
        return 0
    header = data["header"]
    table = [[_cell(v) for v in row] for row in data["rows"]]
    if header:
        widths = [max([len(h)] + [len(r[i]) for r in table if i < len(r)]) for i, h in enumerate(header)]
        print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
        print("  ".join("-" * w for w in widths))
        for r in table:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    n = data["rows_returned"]
    if res.server_limit is not None:
        status = (f"May be incomplete: the server returns at most {res.server_limit} rows "
                  f"(RESULTSET_SIZE); {n} shown.")
    elif res.truncated:
        status = f"Truncated: more than {res.row_cap} rows; the first {n} are shown (--row-cap to raise)."
    else:
        status = f"{n} row{'s' if n != 1 else ''} (complete)."
    print(f"\n{status} {res.elapsed_ms:.1f} ms")
    _print_cypher(cypher)
    return 0


def _terminal_consent(mode: str):
    """Consent callback for ``ask``: fixed answers for ``allow``/``deny``, else a prompt on the
    terminal (stderr), "deny" when stdin is not a terminal."""
    def consent(path: str) -> str:
        if mode == "allow":
            return "once"
        if mode == "deny" or not sys.stdin.isatty():
            print(f"{PROG}: the agent wanted to read {path}; denied (use --read allow)", file=sys.stderr)
            return "deny"
        print(f"{PROG}: the agent wants to read {path} (secrets are redacted). "
              f"[o]nce / [a]lways for this workspace / [d]eny? ", end="", file=sys.stderr, flush=True)
        reply = sys.stdin.readline().strip().lower()
        return {"o": "once", "once": "once", "a": "always", "always": "always"}.get(reply, "deny")
    return consent


def cmd_ask(ctx: Ctx) -> int:
    from orbit_lsp.agent.service import Asker, UnknownConversation

    question = ctx.args.question.strip()
    if not question:
        raise UsageError("QUESTION must not be empty")
    root, graph = _workspace_graph(ctx)
    asker = Asker(ctx.settings)
    try:
        progress = (lambda m: ctx.note(m)) if ctx.args.verbose else None
        res = asker.ask(question, graph, root, conversation_id=ctx.args.conversation,
                        consent=_terminal_consent(ctx.args.read), progress=progress)
    except UnknownConversation as exc:
        raise UsageError(f"--conversation: {exc}") from None
    finally:
        asker.close()
    if ctx.json:
        cypher = [c for s in res.steps for c in s.cypher]
        _emit_json("ask", res.to_dict(), cypher, workspace=str(root), graph=graph.name)
    else:
        print(res.markdown, end="")
    if res.error:
        raise CliError(res.error)
    return 0


def _memory_text(mem) -> str:
    state = "confirmed" if mem.confirmed else "unconfirmed"
    lines = [f"#{mem.id}  {state}  “{mem.text}”"]
    if mem.projects:
        lines.append("     about    " + ", ".join(p["root"] for p in mem.projects))
    if mem.anchor is not None:
        a = mem.anchor
        lines.append(f"     anchor   {a.root}/{a.path}" + (f" {a.symbol} (line {a.line})" if a.symbol else ""))
    if mem.stale:
        lines.append(f"     POSSIBLY STALE: {mem.stale_reason}")
    if mem.uses:
        turns = ", ".join(f"{u['turn']}" for u in mem.uses)
        lines.append(f"     used by  {len(mem.uses)} answer{'s' if len(mem.uses) != 1 else ''} (turns {turns})")
    if mem.redactions:
        lines.append(f"     {mem.redactions} secret{'s' if mem.redactions != 1 else ''} redacted before saving")
    return "\n".join(lines)


def cmd_memory(ctx: Ctx) -> int:
    from orbit_lsp.agent.history import History
    from orbit_lsp.memory.anchors import AnchorError, anchor_at
    from orbit_lsp.memory.store import InvalidMemory, MemoryStore, UnknownMemory

    a = ctx.args
    action = a.memory_command
    history = History.open(ctx.settings.data_dir)
    mem = MemoryStore(ctx.store, ctx.settings.memory_graph, history=history)
    try:
        if action == "add":
            if a.line is not None and not a.file:
                raise UsageError("--line needs --file")
            anchor, project = None, None
            if a.file:
                if a.no_project:
                    raise UsageError("--file anchors to a workspace: it cannot go with --no-project")
                project, _ = _workspace_graph(ctx, a.file)
                anchor = anchor_at(ctx.store, project, _rel_file(a.file, project), a.line)
            elif not a.no_project:
                project = _resolve_workspace(ctx)
            result = mem.remember(a.text, confirmed=not a.unconfirmed, source="user", project=project,
                                  anchor=anchor)
            head = f"saved memory #{result.id}"
        elif action == "list":
            items = mem.list(confirmed=False if a.unconfirmed else None)
            if ctx.json:
                _emit_json("memory list", [m.to_dict() for m in items], [], graph=mem.graph_name)
            elif not items:
                print("no memories" + (" awaiting confirmation" if a.unconfirmed else "") + ".")
            else:
                print("\n".join(_memory_text(m) for m in items))
            return 0
        elif action == "confirm":
            result = mem.confirm(a.id)
            head = f"confirmed memory #{result.id}"
        else:
            result = mem.forget(a.id)
            head = f"forgot memory #{result.id} (the audit log keeps a record)"
    except InvalidMemory as exc:
        raise UsageError(f"TEXT: {exc}") from None
    except UnknownMemory as exc:
        raise UsageError(f"ID: {exc}") from None
    except AnchorError as exc:
        raise CliError(str(exc)) from None
    finally:
        history.close()
    if ctx.json:
        _emit_json(f"memory {action}", result.to_dict(), [], graph=mem.graph_name)
    else:
        print(head)
        print(_memory_text(result))
    return 0


def cmd_export(ctx: Ctx) -> int:
    from orbit_lsp.graph import queries

    out = ctx.args.output
    if out != "-":
        target = Path(out).expanduser()
        if target.is_dir():
            raise UsageError(f"{out} is a directory; give a file name")
        if not target.parent.is_dir():
            raise UsageError(f"no such directory: {target.parent}")
    root, graph = _workspace_graph(ctx)
    rec = queries.Answer()
    doc = {"workspace": str(root), "graph": graph.name, **queries.export(graph, rec)}
    text = _dumps(doc, separators=(",", ":")) + "\n"
    if out == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, target)
        except OSError as exc:
            try:
                tmp.unlink()
            except OSError:
                pass
            raise CliError(f"cannot write {out}: {exc.strerror or exc}") from None
    counts = {"files": len(doc["files"]), "symbols": len(doc["symbols"]),
              "packages": len(doc["packages"]), "edges": len(doc["edges"])}
    report = sys.stderr if out == "-" else sys.stdout
    if ctx.json:
        _emit_json("export", {"path": "-" if out == "-" else str(target), **counts}, rec.cypher,
                   stream=report, workspace=str(root), graph=graph.name)
        return 0
    where = "stdout" if out == "-" else str(target)
    print(f"exported {counts['files']} files, {counts['symbols']} symbols, {counts['packages']} packages, "
          f"{counts['edges']} edges to {where}", file=report)
    _print_cypher(rec.cypher, stream=report)
    return 0


def _graphs_text(graphs: list[str], code: int) -> str:
    return f"{len(graphs)} ({code} code graph{'s' if code != 1 else ''})"


def cmd_db(ctx: Ctx) -> int:
    from orbit_lsp.graph import embedded
    from orbit_lsp.graph.connection import CODE_GRAPH_PREFIX
    from orbit_lsp.graph.errors import FalkorDBOffline

    store = ctx.store
    action = ctx.args.db_command
    if action == "stop":
        if not store.embedded:
            raise CliError(f"orbit uses an external FalkorDB ({store.where}); "
                           "orbit-lsp stops only its embedded server")
        was = embedded.stop(Path(ctx.settings.data_dir))
        result = {"stopped": was, "socket": store.where}
        if ctx.json:
            _emit_json("db stop", result, [])
        else:
            print("embedded FalkorDB stopped (data saved)" if was else "embedded FalkorDB was not running")
        return 0

    if store.embedded:
        st = embedded.status(Path(ctx.settings.data_dir))
        result = {"mode": "embedded", **st}
        if st["running"]:
            graphs = store.list_graphs()
            result["graphs"] = sorted(graphs)
            result["code_graphs"] = sum(g.startswith(CODE_GRAPH_PREFIX) for g in graphs)
        if ctx.json:
            _emit_json("db status", result, [])
            return 0
        if st["running"]:
            ver = f", FalkorDB {st['falkordb_version']}" if st["falkordb_version"] else ""
            print(f"embedded FalkorDB: running (pid {st['pid']}{ver})")
        else:
            print("embedded FalkorDB: not running (starts on demand)")
        print(f"  socket  {st['socket']}")
        print(f"  data    {st['dir']}")
        if st["running"]:
            print(f"  graphs  {_graphs_text(result['graphs'], result['code_graphs'])}")
        return 0

    try:
        graphs = store.list_graphs()
    except FalkorDBOffline as exc:
        if ctx.json:
            _emit_json("db status", {"mode": "external", "url": store.where, "reachable": False,
                                     "error": str(exc)}, [])
        else:
            print(f"external FalkorDB {store.where}: offline")
        raise
    result = {"mode": "external", "url": store.where, "reachable": True, "graphs": sorted(graphs),
              "code_graphs": sum(g.startswith(CODE_GRAPH_PREFIX) for g in graphs)}
    if ctx.json:
        _emit_json("db status", result, [])
    else:
        print(f"external FalkorDB {store.where}: reachable")
        print(f"  graphs  {_graphs_text(graphs, result['code_graphs'])}")
    return 0


COMMANDS = {"index": cmd_index, "impact": cmd_impact, "callers": cmd_callers, "chain": cmd_chain,
            "cypher": cmd_cypher, "export": cmd_export, "ask": cmd_ask, "memory": cmd_memory, "db": cmd_db}


# ---------------------------------------------------------------------------------------------
# Entry point


def _run_server(args: argparse.Namespace) -> int:
    # The server reads its settings from the environment (and the client's init options).
    if args.falkordb_url:
        os.environ["ORBIT_FALKORDB_URL"] = args.falkordb_url
    if args.data_dir:
        os.environ["ORBIT_DATA_DIR"] = str(Path(args.data_dir).expanduser())
    try:
        from orbit_lsp.server.app import run_stdio
    except ImportError as exc:
        print(f"{PROG}: the language server is not available in this installation ({exc})",
              file=sys.stderr)
        return 2
    rc = run_stdio()
    return rc if isinstance(rc, int) else 0


@contextlib.contextmanager
def _logging(verbose: int):
    """Log to stderr for the duration of one command: errors only by default (warnings such as
    a file's syntax error are in the summary already), orbit's INFO with ``-v``, everything at
    DEBUG with ``-vv``. Logger levels and handlers are restored afterwards (``main`` may run
    in-process, e.g. in tests)."""
    pkg, root = logging.getLogger("orbit_lsp"), logging.getLogger()
    saved = (pkg.level, root.level)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    if verbose >= 2:
        target, level = root, logging.DEBUG
        pkg.setLevel(logging.DEBUG)
    else:
        target, level = pkg, (logging.INFO if verbose else logging.ERROR)
    handler.setLevel(level)
    target.setLevel(min(level, target.getEffectiveLevel()) if verbose else target.level)
    target.addHandler(handler)
    try:
        yield
    finally:
        target.removeHandler(handler)
        pkg.setLevel(saved[0])
        root.setLevel(saved[1])


def main(argv: list[str] | None = None) -> int:
    """Run ``orbit-lsp`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else 0
    except UsageError as exc:
        url = os.environ.get("ORBIT_FALKORDB_URL")
        print(f"{PROG}: " + " ".join(_scrub(f"error: {exc}", url).split()), file=sys.stderr)
        return 2
    with _logging(args.verbose or 0):
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    from orbit_lsp.graph.errors import FalkorDBOffline, QueryRejected, QueryTimeout

    ctx: Ctx | None = None
    url_hint = args.falkordb_url or os.environ.get("ORBIT_FALKORDB_URL")

    def fail(message: str, code: int) -> int:
        url = ctx.settings.falkordb_url if ctx is not None else url_hint
        line = " ".join(_scrub(str(message), url).split())
        print(f"{PROG}: {line}", file=sys.stderr)
        return code

    try:
        if args.command is None:
            return _run_server(args)
        if args.stdio:
            raise UsageError("--stdio runs the language server and takes no command")
        ctx = Ctx(args)
        return COMMANDS[args.command](ctx)
    except UsageError as exc:
        return fail(f"error: {exc}", 2)
    except FalkorDBOffline as exc:
        log.debug("FalkorDB offline", exc_info=True)
        return fail(str(exc), 1)
    except QueryRejected as exc:
        return fail(f"query refused: {exc}", 1)
    except QueryTimeout as exc:
        return fail(f"query timed out: {exc}", 1)
    except CliError as exc:
        return fail(str(exc), 1)
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except BrokenPipeError:
        try:  # the reader went away (| head): stay quiet
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        log.info("unexpected error", exc_info=True)
        return fail(f"internal error: {type(exc).__name__}: {exc} (run with -v for details)", 1)
    finally:
        if ctx is not None:
            ctx.close()
