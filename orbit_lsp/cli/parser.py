"""Argument parsing: the global options and the parsers of every subcommand.

Each command module (``cmd_*.py``, listed in ``orbit_lsp.cli.registry``) adds its own
subparsers in ``add_parsers(subs, parents)``; this module holds what they share.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from orbit_lsp.cli.errors import PROG, UsageError


HELP_OPTIONS = frozenset({"-h", "--help", "--version"})


def named_commands(argv: list[str], commands) -> set[str]:
    """Command names among the arguments before a ``--`` (an option's value may be one too:
    the set then holds more than the command); empty when a help or version option is given,
    whose output must list every command."""
    args = argv[:argv.index("--")] if "--" in argv else argv
    if HELP_OPTIONS & set(args):
        return set()
    return {a for a in args if a in commands}


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D401 - argparse hook
        raise UsageError(f"{message} (see '{self.prog} --help')")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


@dataclass(frozen=True)
class Parents:
    """Parent parsers a subcommand lists in ``parents=[...]``: ``common`` (the global options,
    accepted after the command too), ``json`` (``--json``), ``workspace`` (``--workspace``: a
    command without it refuses ``--workspace`` given before its name)."""

    common: argparse.ArgumentParser
    json: argparse.ArgumentParser
    workspace: argparse.ArgumentParser


def add_exclude(p: argparse.ArgumentParser) -> None:
    """``--exclude PATTERN`` (repeatable): gitignore-style patterns left out when indexing, like
    the editors' ``exclude`` setting (``Settings.exclude``)."""
    p.add_argument("--exclude", action="append", metavar="PATTERN", default=None,
                   help="leave files matching this gitignore-style pattern out of the graph when "
                        "indexing (repeatable; e.g. --exclude 'tests/' --exclude '*_pb2.py')")


def build_parser(only: set[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``orbit-lsp``. ``only``: names of commands whose modules' subparsers are
    added (the others are left out: building all of them is a good part of a query's start-up);
    None or empty: every command (``--help`` lists them all)."""
    from orbit_lsp.cli.registry import COMMAND_MODULES

    # Global options are accepted before and after the subcommand: the top-level parser holds
    # the defaults, the subparsers use SUPPRESS so they only set what was given.
    def add_globals(p: argparse.ArgumentParser, sub: bool) -> None:
        d = (lambda v: argparse.SUPPRESS) if sub else (lambda v: v)  # noqa: E731
        p.add_argument("--falkordb-url", metavar="URL", default=d(None),
                       help="external FalkorDB (a redis://, rediss://, falkor://, falkors:// or unix:// URL); "
                            "default: $ORBIT_FALKORDB_URL, "
                            "else the embedded server")
        p.add_argument("--data-dir", metavar="DIR", default=d(None),
                       help="data dir of the embedded server and caches (default: $ORBIT_DATA_DIR "
                            "or the user data dir)")
        p.add_argument("--graph-key", metavar="KEY", default=d(None),
                       help="use the shared graph named KEY instead of the workspace's own graph of its "
                            "git branch (e.g. a CI job: 'index --graph-key main'); default: $ORBIT_GRAPH_KEY")
        p.add_argument("-v", "--verbose", action="count", default=d(0),
                       help="log to stderr (-vv for debug)")

    # --json and --workspace too, but only for the commands that list them as parents; the
    # top level takes them for every command and _main refuses --workspace where it means nothing
    def add_json(p: argparse.ArgumentParser, sub: bool) -> None:
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS if sub else False,
                       help="print one JSON object (errors too: {\"error\", \"kind\"} on stdout)")

    def add_workspace(p: argparse.ArgumentParser, sub: bool) -> None:
        p.add_argument("--workspace", metavar="PATH", default=argparse.SUPPRESS if sub else None,
                       help="workspace root whose graph is queried (default: see 'orbit-lsp --help')" if sub
                       else "workspace root whose graph is queried (default: see below)")
        p.set_defaults(takes_workspace=sub)
        if sub:  # the commands that read a workspace graph index it first when it has none
            add_exclude(p)

    common = Parser(add_help=False)
    add_globals(common, sub=True)
    out = Parser(add_help=False)
    add_json(out, sub=True)
    ws = Parser(add_help=False)
    add_workspace(ws, sub=True)

    parser = Parser(
        prog=PROG,
        description="A language server whose working context is a code graph in FalkorDB. "
                    "Without a command: run the language server over stdio.",
        epilog="Queries read the graph of --workspace; without it, of the most recently indexed "
               "workspace that contains FILE (impact) or contains or lies below the current "
               "directory (other queries); with none, the current directory is indexed first.")
    add_globals(parser, sub=False)
    add_json(parser, sub=False)
    add_workspace(parser, sub=False)
    parser.add_argument("--stdio", action="store_true",
                        help="run the language server over stdio (the default without a command)")
    from orbit_lsp import __version__
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")

    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    parents = Parents(common=common, json=out, workspace=ws)
    for module in COMMAND_MODULES:
        if not only or only & module.COMMANDS.keys():
            module.add_parsers(subs, parents)
    return parser
