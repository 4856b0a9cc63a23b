"""``orbit-lsp mcp``: serve the workspace's code graph to coding agents over MCP (stdio, or
streamable HTTP with ``--http``). The server itself is ``orbit_lsp.mcp``."""

from __future__ import annotations

from orbit_lsp.cli.context import Ctx
from orbit_lsp.cli.errors import UsageError
from orbit_lsp.cli.parser import Parents


def add_parsers(subs, parents: Parents) -> None:
    from orbit_lsp.mcp.options import add_arguments  # not the SDK: every invocation builds this parser

    # --workspace (default here: the current directory, the project an agent runs in) and
    # --exclude come from the shared parent, so 'orbit-lsp --workspace DIR mcp' works too
    p = subs.add_parser("mcp", parents=[parents.common, parents.workspace],
                        help="serve the code graph to coding agents (MCP)",
                        description="Serve the workspace's code graph to coding agents (Claude Code, Cursor, "
                                    "VS Code, Codex…) over the Model Context Protocol: stdio by default, "
                                    "streamable HTTP at http://HOST:PORT/mcp with --http. The workspace is "
                                    "indexed on start when needed and re-indexed as files change. Without "
                                    "--workspace: the current directory.")
    add_arguments(p, workspace=False)


def cmd_mcp(ctx: Ctx) -> int:
    from orbit_lsp.mcp.server import UsageProblem, run

    try:
        return run(ctx.args, ctx.settings)
    except UsageProblem as exc:
        raise UsageError(str(exc)) from None


COMMANDS = {"mcp": cmd_mcp}
