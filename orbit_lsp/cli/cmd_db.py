"""``orbit-lsp db status|stop``: the FalkorDB server orbit uses."""

from __future__ import annotations

from pathlib import Path

from orbit_lsp.cli.context import Ctx
from orbit_lsp.cli.errors import CliError
from orbit_lsp.cli.output import emit_json
from orbit_lsp.cli.parser import Parents


def add_parsers(subs, parents: Parents) -> None:
    common, out = parents.common, parents.json
    p = subs.add_parser("db", parents=[common], help="the FalkorDB server: status, stop",
                        description="Inspect or stop the FalkorDB server orbit uses.")
    dbsubs = p.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    dbsubs.add_parser("status", parents=[common, out], help="is the server up, where, which graphs")
    dbsubs.add_parser("stop", parents=[common, out], help="stop the embedded server (data is saved)")


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
            emit_json("db stop", result, [])
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
            emit_json("db status", result, [])
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
        if ctx.json:  # one object: the status and the error
            emit_json("db status", {"mode": "external", "url": store.where, "reachable": False,
                                    "error": str(exc)}, [], error=str(exc), kind="falkordb_offline",
                      exit_status=1)
            return 1
        else:
            print(f"external FalkorDB {store.where}: offline")
        raise
    result = {"mode": "external", "url": store.where, "reachable": True, "graphs": sorted(graphs),
              "code_graphs": sum(g.startswith(CODE_GRAPH_PREFIX) for g in graphs)}
    if ctx.json:
        emit_json("db status", result, [])
    else:
        print(f"external FalkorDB {store.where}: reachable")
        print(f"  graphs  {_graphs_text(graphs, result['code_graphs'])}")
    return 0


COMMANDS = {"db": cmd_db}
