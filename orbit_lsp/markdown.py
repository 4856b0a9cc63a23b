"""Names and paths inside the Markdown orbit shows (hovers, impact floats, answers).

A name or path is never put into Markdown as it is: ``src/flask/__init__.py`` would render as
``src/flask/init.py`` (``__…__`` is emphasis), ``a*b`` or ``[x](y)`` would be formatting. Every
name and path goes through ``code`` (an inline code span, which Markdown shows verbatim and
editors show without escapes); free text that must stay prose goes through ``escape``.
The editors' own renderers mirror ``code`` (``editors/nvim``: ``require("orbit").code``,
``editors/vscode/src/render.ts``: ``code``).
"""

from __future__ import annotations

import re

_ESCAPED = re.compile(r"([\\`*_\[\]<>|~#&!])")
_BACKTICKS = re.compile(r"`+")


def code(text: object) -> str:
    """``text`` as one inline code span, whatever it contains.

    The fence is one backtick more than the longest run of backticks inside; a space pads
    content that starts or ends with a backtick (CommonMark strips one such space on each
    side); line ends become spaces (a code span is one line). ``code("__init__")`` →
    ``"`__init__`"``, ``code("a`b")`` → ``"``a`b``"``.
    """
    s = str(text).replace("\r\n", " ").replace("\r", " ").replace("\n", " ")
    longest = max((len(m.group()) for m in _BACKTICKS.finditer(s)), default=0)
    fence = "`" * (longest + 1)
    if not s or s.startswith("`") or s.endswith("`") or (s.startswith(" ") and s.endswith(" ") and s.strip()):
        s = f" {s} "
    return f"{fence}{s}{fence}"


def escape(text: object) -> str:
    """``text`` as Markdown prose that renders as exactly these characters: backslash before
    every character that can start formatting (``\\ ` * _ [ ] < > | ~ # & !``)."""
    return _ESCAPED.sub(r"\\\1", str(text))
