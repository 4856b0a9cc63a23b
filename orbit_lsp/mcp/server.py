"""The MCP server (official ``mcp`` SDK, low-level ``Server``): tools over stdio or streamable HTTP.

``build_server(live, tools)`` makes the SDK server: ``tools/list`` lists the selected tools with
their input and output schemas (``mcp.tools.SPECS``); ``tools/call`` brings the graph up to date
(``LiveWorkspace.before_answer``), runs the tool in a worker thread and answers with
``structuredContent`` plus the compact text form. Failures are tool errors (``isError``) with a
message the model can act on: bad arguments, a refused or timed-out query, "FalkorDB offline"
(until it is back), the first index still running. Nothing is ever printed to stdout but the
protocol (logs go to stderr).

``main(argv)`` is ``orbit-lsp mcp`` / ``python -m orbit_lsp.mcp``:
``[--workspace PATH] [--http HOST:PORT] [--tools SELECTION] [--falkordb-url URL] [--graph-key KEY] [--data-dir DIR] [-v]``.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server

from orbit_lsp.agent.tools import Toolbox, ToolError
from orbit_lsp.config import Settings
from orbit_lsp.graph.errors import FalkorDBOffline
from orbit_lsp.mcp.live import RETRY_S, LiveWorkspace, NotReady
from orbit_lsp.mcp.options import ALL_TOOLS, DEFAULT_TOOLS, TOOLS_ENV, add_arguments  # noqa: F401 - re-exported
from orbit_lsp.mcp.tools import SPECS, Tools, select_tools

log = logging.getLogger("orbit_lsp.mcp")
SERVER_NAME = "orbit"
INSTRUCTIONS = ("orbit answers questions about this workspace's code from a code graph (Python, JS/TS): "
                "definitions, callers, callees, impact of an edit, call paths, file context. Answers are "
                "exact (calls that could not be bound are counted apart, never guessed), list their true "
                "total, show the Cypher they ran and say how fresh the graph is.")
ANSWER_WAIT_S = 20.0  # longest wait for the first index before a call is answered "still indexing"


class UsageProblem(ValueError):
    """Bad options of ``orbit-lsp mcp`` (exit status 2)."""


def tool_list(names: list[str]) -> list[types.Tool]:
    """The ``Tool`` entries of ``names`` (read-only hints on all but ``remember``)."""
    out = []
    for name in names:
        spec = SPECS[name]
        out.append(types.Tool(name=name, description=spec["description"], input_schema=spec["input"],
                              output_schema=spec["output"],
                              annotations=types.ToolAnnotations(read_only_hint=name != "remember")))
    return out


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def build_server(live: LiveWorkspace, tools: Tools, names: list[str]) -> Server:
    listed = tool_list(names)
    enabled = set(names)

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    def answer(name: str, args: Any) -> types.CallToolResult:  # a worker thread
        if name not in enabled:
            hint = " (enable it with --tools +%s)" % name if name in ALL_TOOLS else ""
            return _error(f"unknown tool '{name}'{hint}; tools: {', '.join(names)}")
        try:
            fresh = live.before_answer(ANSWER_WAIT_S)
            ans = tools.run(name, args)
        except ToolError as exc:
            return _error(str(exc))
        except NotReady as exc:
            return _error(str(exc))
        except FalkorDBOffline as exc:
            live.went_offline(exc)
            return _error(f"{exc}. orbit reconnects every {RETRY_S:.0f} s and re-indexes the workspace; "
                          "ask again shortly.")
        except Exception as exc:  # noqa: BLE001 - a bug answers this call, the server goes on
            log.exception("tool %s failed", name)
            return _error(f"internal error in {name}: {type(exc).__name__}: {exc}")
        text = ans.text(fresh.text())
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=ans.structured(fresh.to_dict()), is_error=False)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await anyio.to_thread.run_sync(answer, params.name, params.arguments)

    from orbit_lsp import __version__
    return Server(SERVER_NAME, version=__version__, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


# -- running ------------------------------------------------------------------------------------
def open_workspace(root: Path, settings: Settings, names: list[str]) -> tuple[LiveWorkspace, Tools]:
    """The live graph of ``root`` (started: watched and being indexed) and its tools."""
    live = LiveWorkspace(root, settings)
    memory = history = None
    if {"recall", "remember"} & set(names):
        from orbit_lsp.agent.history import History
        from orbit_lsp.memory.store import MemoryStore

        history = History.open(settings.data_dir)
        memory = MemoryStore(live.store, settings.memory_graph, history=history)
    box = Toolbox(live.graph, live.root, settings, consent=lambda path: "once", history=history, memory=memory)
    live.start()
    return live, Tools(box, memory=memory, history=history, root_package=lambda: live.ix.root_package,
                       imports=live.imports)


async def serve_stdio(server: Server) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_http(server: Server, host: str, port: int) -> None:
    import uvicorn

    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    uvicorn.Server(config).run()


def parse_hostport(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` or ``PORT`` (host 127.0.0.1). Raises ``UsageProblem``."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageProblem(f"--http {text}: expected HOST:PORT with a port from 0 to 65535")
    return host, int(port)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Serve until the client goes away (stdio) or the process is interrupted (HTTP); returns
    the exit status. Raises ``UsageProblem`` before serving for bad options."""
    try:
        names = select_tools(args.tools if args.tools is not None else os.environ.get(TOOLS_ENV))
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None
    root = Path(args.workspace or os.getcwd()).expanduser()
    if not root.is_dir():
        raise UsageProblem(f"--workspace {root}: not a directory")
    hostport = None
    if args.http:
        hostport = parse_hostport(args.http)  # a ValueError: UsageProblem
        if not _is_loopback(hostport[0]) and not args.allow_remote:
            raise UsageProblem(f"--http {args.http} is not a loopback address; the tools expose your code: "
                               "pass --allow-remote to serve it anyway")
    live, tools = open_workspace(Path(os.path.realpath(root)), settings, names)
    server = build_server(live, tools, names)
    try:
        if hostport is None:
            anyio.run(serve_stdio, server)
        else:
            serve_http(server, *hostport)
    except KeyboardInterrupt:
        pass
    finally:
        live.stop()
        live.store.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m orbit_lsp.mcp``: the same options as ``orbit-lsp mcp``."""
    p = argparse.ArgumentParser(prog="orbit-lsp mcp", description="Serve orbit's code graph to coding agents over MCP.")
    add_arguments(p)
    p.add_argument("--falkordb-url", metavar="URL", default=None)
    p.add_argument("--graph-key", metavar="KEY", default=None,
                   help="use the shared graph named KEY (default: the folder's graph of its git branch)")
    p.add_argument("--data-dir", metavar="DIR", default=None)
    p.add_argument("-v", "--verbose", action="count", default=0)
    args = p.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.DEBUG if args.verbose > 1 else
                        logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = Settings.from_env(falkordb_url=args.falkordb_url, graph_key=args.graph_key,
                                     data_dir=Path(args.data_dir).expanduser() if args.data_dir else None)
        return run(args, settings)
    except (UsageProblem, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        print(f"orbit-lsp mcp: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
