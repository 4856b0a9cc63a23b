"""``orbit-lsp workspaces list|drop|prune``: the code graphs orbit keeps, their sizes and last
use, and freeing them.

Roots come from the registry (``orbit_lsp.index.workspaces.WorkspaceRegistry``); graphs that
exist in FalkorDB without a registered root (made before the registry, or on another machine
sharing the server) are listed by graph name and can be dropped by it.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from orbit_lsp.cli.context import Ctx
from orbit_lsp.cli.errors import CliError, UsageError
from orbit_lsp.cli.output import emit_json, print_cypher
from orbit_lsp.cli.parser import Parents

GRAPH_NAME = re.compile(r"^orbit_code_([0-9a-f]{16}|key_[A-Za-z0-9_.-]*_[0-9a-f]{8})$")
DAY_S = 86_400.0


def _days(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of days, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of days, got {text}")
    return value


def add_parsers(subs, parents: Parents) -> None:
    common, out = parents.common, parents.json
    p = subs.add_parser("workspaces", parents=[common], help="the graphs orbit keeps: list, drop, prune",
                        description="The code graphs orbit keeps in FalkorDB (one per workspace folder and "
                                    "git branch, and shared graphs named by --graph-key), with their sizes "
                                    "and last use; drop one, or prune those whose folder or branch is gone "
                                    "or that were not used for a while. Dropping frees the graph "
                                    "and its cache; the next index of the folder builds it again.")
    wsubs = p.add_subparsers(dest="workspaces_command", metavar="ACTION", required=True)
    wsubs.add_parser("list", parents=[common, out],
                     help="every code graph: folder, branch or key, files, nodes, edges, memory, cache, "
                          "last index, last use")
    d = wsubs.add_parser("drop", parents=[common, out], help="drop the graph and cache of PATH",
                         description="Delete the code graphs of PATH (a workspace folder, which may no "
                                     "longer exist: its graph of every branch; or one graph name as "
                                     "'workspaces list --json' shows it; with --graph-key: that shared graph) "
                                     "and their cache files. Waits while another orbit process writes it.")
    d.add_argument("target", metavar="PATH", help="workspace folder, or graph name (orbit_code_…)")
    r = wsubs.add_parser("prune", parents=[common, out],
                         help="drop the graphs whose folder or branch is gone (--older-than: or unused "
                              "for DAYS)",
                         description="Drop the graphs of registered workspaces whose folder no longer "
                                     "exists or whose git branch was deleted, and with --older-than DAYS "
                                     "those not used for that long. Graphs whose folder is unknown (shared "
                                     "graphs indexed elsewhere) are kept (drop them by name).")
    r.add_argument("--older-than", type=_days, metavar="DAYS", default=None,
                   help="also drop graphs not used for DAYS days (indexed, served or queried)")
    r.add_argument("--dry-run", action="store_true", help="say what would be dropped, drop nothing")


# ---------------------------------------------------------------------------------------------

def _inventory(ctx: Ctx, sizes: bool = True) -> tuple[list[dict], list[dict]]:
    """(rows, cypher): one row per code graph on the server, registered or not, most recently
    used first (unregistered last). Shared graphs (``--graph-key``) not in this machine's registry
    are described by the state published with them (``index.overlay``): key, folder and host
    that indexed them, when."""
    from orbit_lsp.graph import keys
    from orbit_lsp.graph.connection import CODE_GRAPH_PREFIX
    from orbit_lsp.index import overlay
    from orbit_lsp.index.workspaces import EDGE_COUNT, FILE_COUNT, NODE_COUNT, WorkspaceRegistry, graph_size

    graphs = sorted(g for g in ctx.store.list_graphs() if g.startswith(CODE_GRAPH_PREFIX))
    records = WorkspaceRegistry(ctx.settings.data_dir).load()
    rows = []
    for name in graphs:
        rec = records.get(name)
        shared = name.startswith(keys.SHARED_GRAPH_PREFIX)
        meta = overlay.published_meta(ctx.store, name) if shared else None
        row = {"graph": name, "root": rec.root if rec else None,
               "folder_exists": os.path.isdir(rec.root) if rec else None,
               "branch": rec.branch if rec else None,
               "key": (rec.key if rec and rec.key else None) or (meta or {}).get("key"),
               "shared": shared,
               "indexed": rec.indexed if rec else None, "used": rec.used if rec else None}
        if meta is not None:
            row["published"] = {k: meta.get(k) for k in ("host", "root", "branch", "commit", "indexed", "files")}
            if row["indexed"] is None:
                row["indexed"] = meta.get("indexed")
        if sizes:
            row.update(graph_size(ctx.store, name, ctx.settings.query_timeout_ms).to_dict())
        rows.append(row)
    rows.sort(key=lambda r: (r["root"] is None and not r["shared"], -(r["used"] or r["indexed"] or 0.0), r["graph"]))
    cypher = ([{"query": q, "params": {}} for q in (NODE_COUNT, EDGE_COUNT, FILE_COUNT)]
              if sizes and rows else [])
    return rows, cypher


def _ago(t: float | None, now: float) -> str:
    if t is None:
        return "unknown"
    s = max(0.0, now - t)
    if s < 90:
        return "just now"
    for unit, n in (("day", DAY_S), ("h", 3600.0), ("min", 60.0)):
        if s >= n:
            k = int(s // n)
            return f"{k} {unit}{'s' if unit == 'day' and k != 1 else ''} ago"
    return "just now"


def _bytes(n: int | None) -> str:
    if not n:
        return "-"
    for unit, k in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= k:
            return f"{n / k:.1f} {unit}"
    return f"{n} B"


def _num(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def _where(r: dict) -> str:
    if r["root"]:
        return r["root"] + ("" if r["folder_exists"] else "  [folder gone]")
    if r.get("published"):
        p = r["published"]
        return f"(shared) {p.get('root')} on {p.get('host')}"
    return f"(not in the registry) {r['graph']}"


def _branch(r: dict) -> str:
    if r.get("key"):
        return f"key {r['key']}"
    return r.get("branch") or "-"


def _cmd_list(ctx: Ctx) -> int:
    rows, cypher = _inventory(ctx)
    if ctx.json:
        emit_json("workspaces list", {"workspaces": rows}, cypher)
        return 0
    if not rows:
        print("no code graphs (nothing indexed yet)")
        return 0
    now = time.time()
    table = []
    for r in rows:
        mem = "-" if r["memory_mb"] is None else ("<1 MB" if r["memory_mb"] < 1 else f"{r['memory_mb']:g} MB")
        table.append([_where(r), _branch(r), _num(r["files"]), _num(r["nodes"]), _num(r["edges"]), mem,
                      _bytes(r["cache_bytes"]), _ago(r["indexed"], now) if r["indexed"] else "-",
                      _ago(r["used"] or r["indexed"], now)])
    head = ["WORKSPACE", "BRANCH", "FILES", "NODES", "EDGES", "MEMORY", "CACHE", "INDEXED", "LAST USE"]
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(head)]
    right = {2, 3, 4, 5, 6}

    def line(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    print(line(head))
    for t in table:
        print(line(t))
    unknown = sum(1 for r in rows if r["root"] is None and not r["shared"])
    print(f"\n{len(rows)} code graph{'s' if len(rows) != 1 else ''}"
          + (f"; {unknown} not in the registry (made before it, or elsewhere): drop them by graph name"
             if unknown else "")
          + ". BRANCH: the git branch of the folder's graph, or the shared graph's key. INDEXED: by the "
            "command line. Memory: FalkorDB's GRAPH.MEMORY USAGE.")
    print_cypher(cypher)
    return 0


def _resolve_target(ctx: Ctx, target: str) -> list[tuple[str, str | None]]:
    """[(graph name, registered root or None)] of ``drop PATH``: a graph name, or every graph
    of a folder (one per branch it was opened on, and its graph on the checked-out branch)."""
    from orbit_lsp.graph import keys
    from orbit_lsp.index.workspaces import WorkspaceRegistry, real

    records = WorkspaceRegistry(ctx.settings.data_dir).load()
    if GRAPH_NAME.match(target) and not os.path.exists(target):
        rec = records.get(target)
        return [(target, rec.root if rec else None)]
    if not target.strip():
        raise UsageError("PATH must not be empty")
    root = str(real(Path(target).expanduser()))
    out = {r.graph: root for r in records.values() if r.root == root}
    if ctx.settings.graph_key:
        return [(keys.shared_graph_name(ctx.settings.graph_key), root)]
    out.setdefault(keys.graph_name(root), root)
    out.setdefault(keys.root_graph_name(root), root)  # its graph from before branches, if any
    return sorted(out.items())


def _drop(ctx: Ctx, graph: str, root: str | None) -> dict:
    from orbit_lsp.index.workspaces import WorkspaceRegistry, drop_graph, graph_size

    size = graph_size(ctx.store, graph, ctx.settings.query_timeout_ms) if graph in ctx.store.list_graphs() else None
    freed = drop_graph(ctx.store, graph)
    WorkspaceRegistry(ctx.settings.data_dir).forget([graph])
    return {"graph": graph, "root": root, "nodes": size.nodes if size else None,
            "edges": size.edges if size else None, "cache_bytes_freed": freed}


def _dropped_text(d: dict) -> str:
    what = f"{d['root']} ({d['graph']}{', branch ' + d['branch'] if d.get('branch') else ''})" if d["root"] else d["graph"]
    counts = f"{_num(d['nodes'])} nodes, {_num(d['edges'])} edges" if d["nodes"] is not None else "no graph"
    return f"dropped {what}: {counts}; cache {_bytes(d['cache_bytes_freed'])} freed"


def _cmd_drop(ctx: Ctx) -> int:
    from orbit_lsp.index.workspaces import cache_files

    targets = _resolve_target(ctx, ctx.args.target)
    graphs = set(ctx.store.list_graphs())
    present = [(g, r) for g, r in targets if g in graphs or cache_files(ctx.settings.data_dir, g)]
    if not present:
        where = targets[0][1] or targets[0][0]
        raise CliError(f"no graph for {where} ({targets[0][0]}): nothing to drop (see 'orbit-lsp workspaces list')")
    results = [_drop(ctx, g, r) for g, r in present]
    if ctx.json:
        emit_json("workspaces drop", results[0] if len(results) == 1 else {"dropped": results}, [])
    else:
        for result in results:
            print(_dropped_text(result))
    return 0


def _prune_reason(r: dict, older: float | None, now: float, rows: list[dict]) -> str | None:
    """Why a registered graph is pruned (None: kept)."""
    from orbit_lsp.graph import keys

    if not r["folder_exists"]:
        return "its folder no longer exists"
    branch = r.get("branch")
    if (branch is None and not r.get("key") and r["graph"] == keys.root_graph_name(r["root"])
            and keys.git_head(r["root"]) is not None
            and any(o["root"] == r["root"] and o.get("branch") for o in rows)):
        return "the folder's graph from before per-branch graphs (it has branch graphs now)"
    if branch and not r.get("key"):
        head = keys.git_head(r["root"])
        if head is None:
            return f"its folder is no longer a git work tree (graph of branch {branch})"
        if not keys.branch_exists(head, branch):
            return f"branch {branch} no longer exists"
    if older is not None and now - (r["used"] or r["indexed"] or 0.0) > older * DAY_S:
        return (f"not used for {older:g} day{'s' if older != 1 else ''} "
                f"(last use {_ago(r['used'] or r['indexed'], now)})")
    return None


def _cmd_prune(ctx: Ctx) -> int:
    from orbit_lsp.index.workspaces import WorkspaceRegistry

    rows, _ = _inventory(ctx, sizes=False)
    now = time.time()
    older = ctx.args.older_than
    chosen = []
    for r in rows:
        if r["root"] is None:
            continue
        why = _prune_reason(r, older, now, rows)
        if why is not None:
            chosen.append((r, why))
    unknown = sum(1 for r in rows if r["root"] is None)
    dropped = []
    for r, why in chosen:
        if ctx.args.dry_run:
            dropped.append({"graph": r["graph"], "root": r["root"], "branch": r.get("branch"), "reason": why,
                            "dropped": False})
        else:
            dropped.append({**_drop(ctx, r["graph"], r["root"]), "branch": r.get("branch"), "reason": why,
                            "dropped": True})
    if not ctx.args.dry_run:  # registry entries whose graph and folder are both gone
        graphs = {r["graph"] for r in rows}
        reg = WorkspaceRegistry(ctx.settings.data_dir)
        reg.forget([r.graph for r in reg.load().values() if r.graph not in graphs and not os.path.isdir(r.root)])
    result = {"dropped": dropped, "kept": len(rows) - len(chosen), "unregistered_kept": unknown,
              "dry_run": bool(ctx.args.dry_run)}
    if ctx.json:
        emit_json("workspaces prune", result, [])
        return 0
    for d in dropped:
        if d["dropped"]:
            print(f"{_dropped_text(d)} ({d['reason']})")
        else:
            print(f"would drop {d['root']} ({d['graph']}): {d['reason']}")
    kept = len(rows) - len(chosen)
    print(f"{'nothing to prune; ' if not chosen else ''}{kept} graph{'s' if kept != 1 else ''} kept"
          + (f" ({unknown} not in the registry: their folders are unknown; drop them by graph name)"
             if unknown else ""))
    return 0


def cmd_workspaces(ctx: Ctx) -> int:
    action = ctx.args.workspaces_command
    return {"list": _cmd_list, "drop": _cmd_drop, "prune": _cmd_prune}[action](ctx)


COMMANDS = {"workspaces": cmd_workspaces}
