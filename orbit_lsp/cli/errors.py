"""Errors of the command line and how they are worded: one line, never a traceback.

``UsageError`` is a bad argument (exit status 2), ``CliError`` a runtime failure (exit 1).
"""

from __future__ import annotations

PROG = "orbit-lsp"


class UsageError(Exception):
    """Bad command-line arguments (exit 2)."""


class CliError(Exception):
    """A runtime failure reported as one line (exit 1)."""


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
