"""``orbit-lsp index PATH``: index a workspace and print a summary."""

from __future__ import annotations

import argparse

import os
from pathlib import Path

from orbit_lsp.cli.context import Ctx
from orbit_lsp.cli.errors import UsageError
from orbit_lsp.cli.output import emit_json, print_cypher
from orbit_lsp.cli.parser import Parents, add_exclude, positive_int
from orbit_lsp.cli.progress import ProgressBar
from orbit_lsp.cli.workspace import index_workspace, interrupted_build


def add_parsers(subs, parents: Parents) -> None:
    common, out = parents.common, parents.json
    p = subs.add_parser("index", parents=[common, out], help="index a workspace and print a summary",
                        description="Index the source files of every supported language (Python, "
                                    "JavaScript, TypeScript) under PATH into its code graph (full the "
                                    "first time, then only changed files).")
    p.add_argument("path", metavar="PATH", nargs="?", default=None,
                   help="workspace root (default: --workspace given before 'index', else .)")
    p.add_argument("--top", type=positive_int, default=10, metavar="N",
                   help="how many most-depended-on files to list (default 10)")
    p.add_argument("--rebuild", action="store_true",
                   help="build the graph again from scratch, ignoring the cache (readers keep the "
                        "old graph until the new one is complete)")
    p.add_argument("--workspace", metavar="PATH", default=argparse.SUPPRESS,
                   help="the workspace root, as PATH (as every other command takes it)")
    add_exclude(p)
    p.set_defaults(takes_workspace=True)  # 'orbit-lsp --workspace DIR index' indexes DIR


def _index_path(path: str | None, workspace: str | None) -> str:
    """PATH, or ``--workspace`` (before or after the command name); both only when they agree."""
    if workspace is None:
        return path or "."
    if path is not None and os.path.realpath(os.path.expanduser(path)) != \
            os.path.realpath(os.path.expanduser(workspace)):
        raise UsageError(f"two workspaces given: PATH {path} and --workspace {workspace}; give one")
    return workspace


def cmd_index(ctx: Ctx) -> int:
    from orbit_lsp.graph import queries

    path = _index_path(ctx.args.path, ctx.args.workspace)
    root = Path(path).expanduser()
    if not root.exists():
        raise UsageError(f"no such directory: {path}")
    if not root.is_dir():
        raise UsageError(f"{path} is not a directory (index takes a workspace folder)")
    from orbit_lsp.graph import keys

    gk = keys.workspace_key(Path(os.path.realpath(root)), ctx.settings.graph_key)
    graph_name = gk.name
    interrupted = interrupted_build(ctx, graph_name)

    def start(total: int) -> None:  # inside the write lock, before any file is read
        if interrupted and interrupted_build(ctx, graph_name):
            ctx.note(f"the last index of {path} did not finish; indexing it again ({total} files)")

    progress = ProgressBar(f"indexing {path}", on_start=start)
    try:
        indexer, rep = index_workspace(ctx, root, progress, rebuild=ctx.args.rebuild)
    finally:
        progress.finish()
    top = queries.most_depended_on(indexer.graph, ctx.args.top)
    result = {
        "mode": rep.mode, "seconds": round(rep.seconds, 3),
        "files": rep.files, "parsed": rep.parsed, "reused": rep.reused, "read": rep.read, "symbols": rep.symbols,
        "imports": rep.imports, "calls": rep.calls, "packages": rep.packages, "inherits": rep.inherits,
        "unresolved_calls": rep.unresolved_calls,
        "skipped": [{"path": p, "reason": r} for p, r in rep.skipped],
        "parse_errors": [{"path": p, "error": e} for p, e in sorted(rep.parse_errors.items())],
        "most_depended_on": top.rows,
        "timings": {k: round(v, 4) for k, v in rep.timings.items()},
        "facts_decoded": rep.facts_decoded,
        "notes": list(rep.notes),
    }
    if ctx.json:
        result["branch"], result["graph_key"] = gk.branch, gk.key
        result["parsed_paths"] = list(rep.parsed_paths)
        emit_json("index", result, top.cypher, workspace=str(indexer.root), graph=indexer.graph.name)
        return 0
    print(f"Indexed {indexer.root} ({rep.mode}) in {rep.seconds:.2f} s")
    print(f"  graph              {indexer.graph.name}")
    if gk.key is not None:
        print(f"  graph key          {gk.key} (shared)")
    elif gk.branch is not None:
        print(f"  branch             {gk.branch}")
    for note in rep.notes:
        print(f"  note               {note}")
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
    print_cypher(top.cypher)
    return 0


COMMANDS = {"index": cmd_index}
