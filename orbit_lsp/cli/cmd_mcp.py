"""``orbit-lsp mcp``: serve the workspace's code graph to coding agents over MCP (stdio, or
streamable HTTP with ``--http``). The server itself is ``orbit_lsp.mcp``."""

from __future__ import annotations

from orbit_lsp.cli.context import Ctx
from orbit_lsp.cli.errors import UsageError
from orbit_lsp.cli.parser import Parents


def add_parsers(subs, parents: Parents) -> None:
    from orbit_lsp.mcp.server import add_arguments

    p = subs.add_parser("mcp", parents=[parents.common], help="serve the code graph to coding agents (MCP)",
                        description="Serve the workspace's code graph to coding agents (Claude Code, Cursor, "
                                    "VS Code, Codex…) over the Model Context Protocol: stdio by default, "
                                    "streamable HTTP at http://HOST:PORT/mcp with --http. The workspace is "
                                    "indexed on start when needed and re-indexed as files change.")
    add_arguments(p)


def cmd_mcp(ctx: Ctx) -> int:
    from orbit_lsp.mcp.server import UsageProblem, run

    try:
        return run(ctx.args, ctx.settings)
    except UsageProblem as exc:
        raise UsageError(str(exc)) from None


COMMANDS = {"mcp": cmd_mcp}
