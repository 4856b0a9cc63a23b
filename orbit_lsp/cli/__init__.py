"""The ``orbit-lsp`` command line (``orbit_lsp.cli:main``).

Without a subcommand (or with ``--stdio``, which editors pass) it runs the language server over
stdio. Subcommands answer the same questions from the code graph for people and scripts:

``index PATH``, ``impact FILE``, ``callers SYMBOL``, ``implementations SYMBOL``, ``chain FROM TO``, ``cypher QUERY``,
``export PATH``, ``ask QUESTION``, ``memory add|list|confirm|forget``, ``db status``, ``db stop``.

Each query subcommand prints its answer, then every Cypher statement it ran with its parameters;
``--json`` prints one JSON object ``{"command", "workspace", "graph", "result", "cypher"}``
instead. Errors are one line on stderr: exit status 2 for bad arguments, 1 for runtime errors
(FalkorDB offline, a refused or timed-out query, a file or symbol not in the graph), never a
traceback (``-v`` logs it).

Which graph a query reads when ``--workspace`` is not given: among the indexed workspaces that
contain FILE (``impact``) or, for the other queries, that contain the current directory or lie
below it, the one most recently indexed by ``orbit-lsp index`` (then the deepest); with none, the
current directory, which is then indexed first. So ``orbit-lsp index src`` followed by
``orbit-lsp callers main`` reads ``src``. A workspace counts as indexed when its graph exists on
the server; the registry of workspaces (``<data dir>/workspaces.json``) records when the CLI
indexed which root.

Layout (one module per responsibility):

- ``__init__``: ``main`` (the console script), logging, dispatch and the exit statuses;
- ``parser``: the global options and the shared parent parsers;
- ``registry``: which ``cmd_*`` module adds which subcommand (**add a subcommand there**; its
  docstring says how);
- ``cmd_index``, ``cmd_queries`` (impact, callers, implementations, chain, cypher, export), ``cmd_ask``,
  ``cmd_memory``, ``cmd_workspaces``, ``cmd_db``, ...: one module per command family;
- ``context`` (``Ctx``: arguments, settings, store), ``workspace`` (which graph a command reads,
  indexing on demand), ``output`` (JSON and Cypher printing), ``progress``, ``errors``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from pathlib import Path

from orbit_lsp.cli.context import Ctx
from orbit_lsp.cli.errors import PROG, CliError, UsageError, describe, scrub
from orbit_lsp.cli.output import dumps
from orbit_lsp.cli.parser import build_parser, named_commands
from orbit_lsp.cli.progress import ProgressBar
from orbit_lsp.cli.registry import COMMANDS
from orbit_lsp.graph.errors import FalkorDBOffline

__all__ = ["COMMANDS", "CliError", "Ctx", "ProgressBar", "UsageError", "build_parser", "main", "parse_args",
           "run"]

log = logging.getLogger("orbit_lsp.cli")


def _run_server(args: argparse.Namespace) -> int:
    # The server reads its settings from the environment (and the client's init options).
    if args.falkordb_url:
        os.environ["ORBIT_FALKORDB_URL"] = args.falkordb_url
    if args.data_dir:
        os.environ["ORBIT_DATA_DIR"] = str(Path(args.data_dir).expanduser())
    if getattr(args, "graph_key", None):
        os.environ["ORBIT_GRAPH_KEY"] = args.graph_key
    try:
        from orbit_lsp.server.app import run_stdio
    except ImportError as exc:
        print(f"{PROG}: the language server is not available in this installation ({exc})",
              file=sys.stderr)
        return 2
    if not args.stdio and _stdin_is_a_terminal():
        # someone typed `orbit-lsp` without a command: say what is waiting (editors start the
        # server with pipes, never a terminal, so they never see this; stderr, never stdout)
        print(f"{PROG}: no command given, so this is the language server, waiting for LSP messages "
              f"on stdin (editors start it this way); Ctrl-D ends it. '{PROG} --help' lists the "
              f"commands (index, callers, impact, changes, ...).", file=sys.stderr, flush=True)
    rc = run_stdio()
    return rc if isinstance(rc, int) else 0


def _stdin_is_a_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):  # closed or detached stdin
        return False


@contextlib.contextmanager
def _logging(verbose: int):
    """Log to stderr for the duration of one command: errors only by default (warnings such as
    a file's syntax error are in the summary already), orbit's INFO with ``-v``, everything at
    DEBUG with ``-vv``. Logger levels and handlers are restored afterwards (``main`` may run
    in-process, e.g. in tests)."""
    pkg, root = logging.getLogger("orbit_lsp"), logging.getLogger()
    saved = (pkg.level, root.level)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    if verbose >= 2:
        target, level = root, logging.DEBUG
        pkg.setLevel(logging.DEBUG)
    else:
        target, level = pkg, (logging.INFO if verbose else logging.ERROR)
    handler.setLevel(level)
    target.setLevel(min(level, target.getEffectiveLevel()) if verbose else target.level)
    target.addHandler(handler)
    try:
        yield
    finally:
        target.removeHandler(handler)
        pkg.setLevel(saved[0])
        root.setLevel(saved[1])


def _wants_json(argv: list[str]) -> bool:
    """``--json`` among the options (before a ``--``), also when the arguments do not parse."""
    return "--json" in (argv[:argv.index("--")] if "--" in argv else argv)


def _report(exc: BaseException, as_json: bool, url: str | None, command: str | None = None) -> int:
    """Say what went wrong: one line on stderr, or with ``--json`` one object
    ``{"command", "error", "kind", "exit_status"}`` on stdout; returns the exit status."""
    message, kind, code = describe(exc)
    line = " ".join(scrub(str(message), url).split())
    if as_json:
        doc = {"command": command, "error": line.removeprefix("error: "), "kind": kind, "exit_status": code}
        print(dumps(doc, indent=2))
    else:
        print(f"{PROG}: {line}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    """Run ``orbit-lsp`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parse(argv)
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else 0
    except UsageError as exc:
        command = next((a for a in argv if a in COMMANDS), None)  # the command, if it was named
        return _report(exc, _wants_json(argv), os.environ.get("ORBIT_FALKORDB_URL"), command)
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Run a command parsed by ``parse_args`` (logging set up for it); returns the exit status.
    Errors are reported as in ``main``."""
    with _logging(args.verbose or 0):
        return _main(args)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The parsed arguments. Raises ``UsageError`` (bad arguments) and ``SystemExit`` (after
    printing ``--help`` or ``--version``)."""
    return _parse(argv)


def _parse(argv: list[str]) -> argparse.Namespace:
    """Parse with the subparsers of the commands named in ``argv`` only (a query starts
    faster); when that fails, parse again with every command, whose error says the same or
    names the commands there are."""
    named = named_commands(argv, COMMANDS)
    if named:
        try:
            return build_parser(named).parse_args(argv)
        except UsageError:
            pass
    return build_parser().parse_args(argv)


def _command_name(args: argparse.Namespace) -> str | None:
    sub = getattr(args, "memory_command", None) or getattr(args, "db_command", None) \
        or getattr(args, "workspaces_command", None)
    return f"{args.command} {sub}" if args.command and sub else args.command


def _main(args: argparse.Namespace) -> int:
    ctx: Ctx | None = None
    url_hint = args.falkordb_url or os.environ.get("ORBIT_FALKORDB_URL")
    try:
        if args.command is None:
            if args.json or args.workspace:
                raise UsageError(f"{'--json' if args.json else '--workspace'} needs a command "
                                 f"(see '{PROG} --help')")
            return _run_server(args)
        if args.stdio:
            raise UsageError("--stdio runs the language server and takes no command")
        if args.workspace is not None and not args.takes_workspace:
            raise UsageError(f"--workspace does not apply to '{_command_name(args)}'")
        ctx = Ctx(args)
        return COMMANDS[args.command](ctx)
    except BrokenPipeError:
        try:  # the reader went away (| head): stay quiet
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - one line, never a traceback
        if isinstance(exc, FalkorDBOffline):
            log.debug("FalkorDB offline", exc_info=True)
        elif describe(exc)[1] == "internal":
            log.info("unexpected error", exc_info=True)
        url = ctx.settings.falkordb_url if ctx is not None else url_hint
        return _report(exc, bool(args.json), url, _command_name(args))
    finally:
        if ctx is not None:
            ctx.close()
