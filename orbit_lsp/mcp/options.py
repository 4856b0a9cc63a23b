"""The options of ``orbit-lsp mcp`` and the tool names, without the MCP SDK.

Kept apart from ``server`` and ``tools`` so that building the command line's parser (every
``orbit-lsp`` invocation does) never imports the MCP SDK, anyio or the agent's toolbox.
"""

from __future__ import annotations

import argparse

TOOLS_ENV = "ORBIT_MCP_TOOLS"
DEFAULT_TOOLS = ("find_symbol", "callers", "callees", "impact", "call_chain", "file_context", "cypher")
OPTIONAL_TOOLS = ("change_impact", "package_users", "recall", "remember", "read_file")
ALL_TOOLS = DEFAULT_TOOLS + OPTIONAL_TOOLS


def add_arguments(p: argparse.ArgumentParser, workspace: bool = True) -> None:
    """The options of ``orbit-lsp mcp`` (shared by the CLI, whose parent parsers add
    ``--workspace`` there: ``workspace`` False, and ``python -m orbit_lsp.mcp``)."""
    if workspace:
        p.add_argument("--workspace", metavar="PATH", default=None,
                       help="workspace root whose graph the tools answer from (default: the current directory)")
    p.add_argument("--http", metavar="HOST:PORT", default=None,
                   help="serve streamable HTTP on HOST:PORT (path /mcp) instead of stdio; loopback only "
                        "unless --allow-remote")
    p.add_argument("--allow-remote", action="store_true", help="allow --http on a non-loopback address")
    p.add_argument("--tools", metavar="SELECTION", default=None,
                   help="tools offered: 'default' (" + ",".join(DEFAULT_TOOLS) + "), 'all', a list, or "
                        "+name/-name changes (e.g. +recall,+remember,+read_file); default: $" + TOOLS_ENV)
