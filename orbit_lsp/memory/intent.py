"""Memories the agent proposes: "remember that …" written inside a question.

``proposed_memory(question) -> str | None``: the text after "remember that" / "remember:" /
"note that" up to the end of its sentence ("Remember that I use Postgres 16. Which files use
psycopg?" → ``"I use Postgres 16"``), or None. "Do you remember …" is a question, not a request,
and proposes nothing. The proposal is saved unconfirmed: it is never recalled until the user
confirms it.
"""

from __future__ import annotations

import re

_REMEMBER = re.compile(
    r"(?<!\byou\s)\b(?:please\s+)?(?:remember|note|keep\s+in\s+mind)\s*(?:that\b|:)\s*"
    # up to the end of the sentence; a dot followed by a word character (docker.io, v1.2) is not an end
    r"(?P<text>(?:[^.!?\n]|\.(?=\w))+)",
    re.I)


def proposed_memory(question: str) -> str | None:
    """The memory a question asks to keep, stripped, or None (see the module docstring)."""
    m = _REMEMBER.search(question)
    if not m:
        return None
    text = " ".join(m.group("text").split()).strip(" ,;:")
    return text or None
