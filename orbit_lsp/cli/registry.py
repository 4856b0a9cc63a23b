"""The subcommands: which module adds which.

To add a subcommand, write ``orbit_lsp/cli/cmd_NAME.py`` with

- ``add_parsers(subs, parents)``: ``subs.add_parser("NAME", parents=[parents.common, parents.json,
  parents.workspace], ...)`` and its arguments (``parents`` is a ``parser.Parents``);
- ``COMMANDS = {"NAME": handler}``: ``handler(ctx: Ctx) -> int`` returns the exit status and
  raises ``UsageError`` (exit 2) or ``CliError`` (exit 1) for a one-line error;

then list the module in ``COMMAND_MODULES`` below (the order is the order of ``--help``).
"""

from __future__ import annotations

from orbit_lsp.cli import (cmd_ask, cmd_changes, cmd_db, cmd_index, cmd_mcp, cmd_memory, cmd_queries,
                           cmd_workspaces)

COMMAND_MODULES = (cmd_index, cmd_queries, cmd_changes, cmd_ask, cmd_memory, cmd_mcp, cmd_workspaces, cmd_db)

# command name -> handler; ``_main`` dispatches through this dict
COMMANDS = {name: handler for module in COMMAND_MODULES for name, handler in module.COMMANDS.items()}
