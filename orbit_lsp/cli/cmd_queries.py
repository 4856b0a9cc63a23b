"""Graph queries: ``impact``, ``callers``, ``chain``, ``cypher``, ``export``.

Each prints its answer, then every Cypher statement it ran; ``--json`` prints one object."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from orbit_lsp.cli.context import Ctx
from orbit_lsp.cli.errors import CliError, UsageError
from orbit_lsp.cli.output import cell, dumps, emit_json, print_cypher
from orbit_lsp.cli.parser import Parents, positive_int
from orbit_lsp.cli.workspace import rel_file, workspace_graph


def add_parsers(subs, parents: Parents) -> None:
    common, out, ws = parents.common, parents.json, parents.workspace
    p = subs.add_parser("impact", parents=[common, out, ws], help="files that depend on FILE, with hops",
                        description="Files that import FILE directly or transitively, each with "
                                    "its minimal number of hops.")
    p.add_argument("file", metavar="FILE", help="path relative to the workspace or the current "
                                                "directory, or absolute")
    p.add_argument("--max-hops", type=positive_int, default=None, metavar="N",
                   help="deepest hop to follow (default 4)")

    p = subs.add_parser("callers", parents=[common, out, ws], help="who calls SYMBOL",
                        description="Callers of SYMBOL (a name, Class.method or a qualified name), "
                                    "one answer per matching symbol.")
    p.add_argument("symbol", metavar="SYMBOL")
    p.add_argument("--depth", type=positive_int, default=1, metavar="N",
                   help="follow callers of callers up to N hops (default 1)")

    p = subs.add_parser("implementations", parents=[common, out, ws],
                        help="classes below an interface or class; methods implementing a method",
                        description="Implementations of SYMBOL (a name, Class.method or a qualified name): "
                                    "for an interface or class, the classes that extend or implement it, "
                                    "directly or not; for a method, the same-named methods of those classes "
                                    "(from the INHERITS edges). One answer per matching symbol.")
    p.add_argument("symbol", metavar="SYMBOL")

    p = subs.add_parser("chain", parents=[common, out, ws], help="shortest call path FROM -> TO",
                        description="Shortest CALLS path from one symbol to another.")
    p.add_argument("source", metavar="FROM")
    p.add_argument("target", metavar="TO")
    p.add_argument("--max-len", type=positive_int, default=10, metavar="N",
                   help="longest path to look for, in calls (default 10)")

    p = subs.add_parser("cypher", parents=[common, out, ws], help="run a read-only Cypher query",
                        description="Run one Cypher query read-only (GRAPH.RO_QUERY) with a timeout "
                                    "and a row cap; says when rows were cut.")
    p.add_argument("query", metavar="QUERY")
    p.add_argument("--params", metavar="JSON", help='query parameters as a JSON object, e.g. \'{"n": "run"}\'')
    p.add_argument("--row-cap", type=positive_int, default=None, metavar="N",
                   help="most rows returned (default: $ORBIT_ROW_CAP or 500)")
    p.add_argument("--timeout-ms", type=positive_int, default=None, metavar="MS",
                   help="server-side timeout (default: $ORBIT_QUERY_TIMEOUT_MS or 5000)")

    p = subs.add_parser("export", parents=[common, out, ws], help="write the whole graph as JSON",
                        description="Write the whole code graph (files, symbols, packages and every "
                                    "edge with its properties) as one JSON document.")
    p.add_argument("output", metavar="PATH", help="output file, or - for stdout")


def why_not_in_graph(rel: str, root) -> str:
    """The one-line error for a FILE that exists in workspace ``root`` but has no node in its
    graph: what it is not (a source file of a supported language), or the reasons it can be
    missing (left out by the walk, or new since the last index)."""
    from orbit_lsp.index.walk import LANGS

    if LANGS.get(os.path.splitext(rel)[1].lower()) is None:
        return (f"{rel} is not in the graph of {root}: not a source file orbit indexes "
                f"(Python, JavaScript, TypeScript)")
    return (f"{rel} is not in the graph of {root}: excluded (.gitignore, --exclude), skipped by the "
            f"index (binary, minified, over-size, in a virtualenv or node_modules), or created since "
            f"the last index (run 'orbit-lsp index')")


def cmd_impact(ctx: Ctx) -> int:
    from orbit_lsp.graph import queries

    root, graph = workspace_graph(ctx, ctx.args.file)
    rel = rel_file(ctx.args.file, root)
    if (root / rel).is_dir():
        raise UsageError(f"{ctx.args.file} is a directory; impact takes a file")
    hops = ctx.args.max_hops or ctx.settings.max_hops
    ans = queries.impact(graph, rel, max_hops=hops)
    if not ans.found:
        if not (root / rel).exists():
            raise UsageError(f"no such file in {root}: {ctx.args.file}")
        raise CliError(why_not_in_graph(rel, root))
    stale = _freshness(ans, graph, root, [rel] + [r["path"] for r in ans.rows])
    if ctx.json:
        emit_json("impact", {"file": rel, "max_hops": hops, **_answer(ans), "stale_files": stale}, ans.cypher,
                  workspace=str(root), graph=graph.name)
        return 0
    n = len(ans.rows)
    deepest = max((r["hops"] for r in ans.rows), default=0)
    if n:
        print(f"{rel}: {n} dependent{'s' if n != 1 else ''}, {deepest} hop{'s' if deepest != 1 else ''}")
        for r in ans.rows:
            print(f"  {r['hops']}  {r['path']}" + ("  (types only: every way there has an import type)"
                                                   if r.get("type_only") else ""))
    else:
        print(f"{rel}: 0 dependents (no workspace file imports it)")
    for note in ans.notes:
        print(f"note: {note}")
    print_cypher(ans.cypher)
    return 0


def _answer(ans) -> dict:
    """An ``Answer`` without its Cypher (that goes in the top-level ``cypher``)."""
    out = {"rows": ans.rows, "notes": ans.notes}
    if ans.breaks:
        out["breaks"] = ans.breaks  # call_chain: unbound calls that may close a missing path
    return out


def _freshness(ans, graph, root: Path, files) -> list[str]:
    """Files of the answer changed on disk since they were indexed (``cli.freshness``); the
    note saying so joins the answer's notes, the statement its Cypher."""
    from orbit_lsp.cli.freshness import changed_files, stale_note

    paths = {f for f in files if f}
    changed, checked = changed_files(graph, root, paths, ans.cypher)
    note = stale_note(changed, checked, len(paths))
    if note:
        ans.notes.append(note)
    return changed


def _where(sym: dict) -> str:
    return f"{sym['file']}:{sym['line']}"


def cmd_callers(ctx: Ctx) -> int:
    from orbit_lsp.graph import queries

    root, graph = workspace_graph(ctx)
    ans = queries.callers(graph, ctx.args.symbol, ctx.args.depth)
    if not ans.rows:
        missing = next((n for n in ans.notes if n.startswith("no symbol named")), f"no symbol named '{ctx.args.symbol}'")
        raise CliError(missing.replace(" in the graph", f" in the graph of {root}", 1))
    stale = _freshness(ans, graph, root, [f for e in ans.rows for f in (
        [e["target"]["file"]] + [c["file"] for c in e["callers"]]
        + [x["file"] for x in (e.get("unbound") or {}).get("sites", [])])])
    if ctx.json:
        emit_json("callers", {"symbol": ctx.args.symbol, "depth": ctx.args.depth, **_answer(ans),
                              "stale_files": stale},
                  ans.cypher, workspace=str(root), graph=graph.name)
        return 0
    for note in ans.notes:
        print(f"note: {note}")
    for i, entry in enumerate(ans.rows):
        t, found = entry["target"], entry["callers"]
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
        unbound = entry.get("unbound") or {"total": 0, "sites": []}
        if unbound["total"]:
            total = unbound["total"]
            print(f"  {total} unbound call site{'s' if total != 1 else ''} "
                  f"use{'s' if total == 1 else ''} this name (may call it; not counted above):")
            for x in unbound["sites"]:
                print(f"    {x['file']}:{x['line'] if x['line'] is not None else '?'}  in {x['caller']}")
            if total > len(unbound["sites"]):
                print(f"    … and {total - len(unbound['sites'])} more")
    print_cypher(ans.cypher)
    return 0


def cmd_chain(ctx: Ctx) -> int:
    from orbit_lsp.graph import queries

    root, graph = workspace_graph(ctx)
    ans = queries.call_chain(graph, ctx.args.source, ctx.args.target, max_len=ctx.args.max_len)
    missing = [n for n in ans.notes if n.startswith("no symbol named")]
    if missing:
        raise CliError("; ".join(missing) + f" (graph of {root})")
    stale = _freshness(ans, graph, root, [n["file"] for row in ans.rows for n in row["path"]])
    if ctx.json:
        emit_json("chain", {"from": ctx.args.source, "to": ctx.args.target, **_answer(ans),
                            "stale_files": stale},
                  ans.cypher, workspace=str(root), graph=graph.name)
        return 0
    for note in ans.notes:
        print(f"note: {note}")
    if not ans.rows:
        print(f"no call path from {ctx.args.source} to {ctx.args.target}"
              + (" through bound calls (see the notes: an unbound call may close it)" if ans.breaks else ""))
    for i, row in enumerate(ans.rows):
        if i or ans.notes:
            print()
        calls = len(row["path"]) - 1
        print(f"{row['from']} -> {row['to']}: {calls} call{'s' if calls != 1 else ''}")
        wq = max(len(n["qual"]) for n in row["path"])
        for k, n in enumerate(row["path"]):
            arrow = "   " if k == 0 else "-> "
            print(f"  {arrow}{n['qual']:<{wq}}  {n['file']}:{n['line']}")
    print_cypher(ans.cypher)
    return 0


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
    root, graph = workspace_graph(ctx)
    res = run_readonly(graph, ctx.args.query, params, row_cap=ctx.args.row_cap,
                       timeout_ms=ctx.args.timeout_ms)
    cypher = [{"query": res.executed, "params": params or {}}]
    data = res.to_dict()
    if ctx.json:
        emit_json("cypher", data, cypher, workspace=str(root), graph=graph.name)
        return 0
    header = data["header"]
    table = [[cell(v) for v in row] for row in data["rows"]]
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
    print_cypher(cypher)
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
    root, graph = workspace_graph(ctx)
    rec = queries.Answer()
    doc = {"workspace": str(root), "graph": graph.name, **queries.export(graph, rec)}
    text = dumps(doc, separators=(",", ":")) + "\n"
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
        emit_json("export", {"path": "-" if out == "-" else str(target), **counts}, rec.cypher,
                  stream=report, workspace=str(root), graph=graph.name)
        return 0
    where = "stdout" if out == "-" else str(target)
    print(f"exported {counts['files']} files, {counts['symbols']} symbols, {counts['packages']} packages, "
          f"{counts['edges']} edges to {where}", file=report)
    print_cypher(rec.cypher, stream=report)
    return 0


def cmd_implementations(ctx: Ctx) -> int:
    from orbit_lsp.graph import queries

    root, graph = workspace_graph(ctx)
    ans = queries.find_symbols(graph, ctx.args.symbol)
    if not ans.rows:
        raise CliError(queries.not_found_note(graph, ctx.args.symbol, ans).replace(
            " in the graph", f" in the graph of {root}", 1))
    entries = []
    for t in ans.rows:
        impl = queries.symbol_implementations(graph, t["file"], t["qual"], ans)
        entries.append({"target": t, "implementations": impl.rows})
    if ctx.json:
        emit_json("implementations", {"symbol": ctx.args.symbol, "rows": entries, "notes": ans.notes}, ans.cypher,
                  workspace=str(root), graph=graph.name)
        return 0
    for i, e in enumerate(entries):
        t, found = e["target"], e["implementations"]
        if i:
            print()
        print(f"{t['qual']}  ({t['kind']}, {_where(t)})")
        print(f"  {len(found)} implementation{'s' if len(found) != 1 else ''}")
        for r in found:
            print(f"    {r['qual']}  ({r['kind']}, {_where(r)})")
    print_cypher(ans.cypher)
    return 0


COMMANDS = {"impact": cmd_impact, "callers": cmd_callers, "chain": cmd_chain, "cypher": cmd_cypher,
            "implementations": cmd_implementations,
            "export": cmd_export}
