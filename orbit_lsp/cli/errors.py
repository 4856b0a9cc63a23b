"""Errors of the command line and how they are worded: one line, never a traceback.

``UsageError`` is a bad argument (exit status 2), ``CliError`` a runtime failure (exit 1).
``describe(exc)`` gives every error its message, its ``kind`` (the ``"kind"`` of a ``--json``
error object) and its exit status.
"""

from __future__ import annotations

PROG = "orbit-lsp"


class UsageError(Exception):
    """Bad command-line arguments (exit 2)."""


class InProcessOnly(BaseException):
    """Raised in the query helper (``orbit_lsp.query_helper``) when a command needs what only
    the in-process path does (indexing a workspace that has no graph yet): the helper declines
    the query and the client runs it in-process. A ``BaseException``, so that ``main``'s error
    reporting lets it through."""


class CliError(Exception):
    """A runtime failure reported as one line (exit 1). ``kind`` names it in ``--json`` errors."""

    def __init__(self, message: str, kind: str = "runtime"):
        super().__init__(message)
        self.kind = kind


# kind of a --json error -> what it means (README "Command line" lists them)
ERROR_KINDS = {
    "usage": "bad arguments (exit status 2)",
    "falkordb_offline": "FalkorDB cannot be reached (1)",
    "query_refused": "a query refused by orbit's read-only checks or by FalkorDB (1)",
    "query_syntax": "a Cypher syntax error reported by FalkorDB (1)",
    "query_invalid": "a query FalkorDB cannot run, e.g. an undefined variable (1)",
    "query_timeout": "a query stopped at its timeout (1)",
    "not_understood": "ask: the built-in planner did not understand the question (1)",
    "runtime": "any other runtime failure: a file or symbol not in the graph, a model error (1)",
    "interrupted": "Ctrl-C (130)",
    "internal": "a bug in orbit: run with -v for the traceback (1)",
}


def describe(exc: BaseException) -> tuple[str, str, int]:
    """(message, kind, exit status) of an error raised while running a command."""
    from orbit_lsp.graph.errors import FalkorDBOffline, QueryInvalid, QueryRejected, QueryTimeout

    if isinstance(exc, UsageError):
        return f"error: {exc}", "usage", 2
    if isinstance(exc, FalkorDBOffline):
        return str(exc), "falkordb_offline", 1
    if isinstance(exc, QueryRejected):
        if isinstance(exc, QueryInvalid):
            return str(exc), ("query_syntax" if exc.syntax else "query_invalid"), 1
        return f"query refused: {exc}", "query_refused", 1
    if isinstance(exc, QueryTimeout):
        return f"query timed out: {exc}", "query_timeout", 1
    if isinstance(exc, CliError):
        return str(exc), exc.kind, 1
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", "interrupted", 130
    return f"internal error: {type(exc).__name__}: {exc} (run with -v for details)", "internal", 1


def scrub(text: str, url: str | None) -> str:
    """Remove the password of ``url`` from ``text``."""
    if not url:
        return text
    from urllib.parse import unquote, urlsplit
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        for p in {password, unquote(password)}:
            text = text.replace(p, "***")
    return text
