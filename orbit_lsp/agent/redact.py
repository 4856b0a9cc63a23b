"""Secret redaction for text that is about to reach a model.

``redact(text)`` replaces everything that looks like a credential with ``[REDACTED]`` and
returns ``(text, count)``. It errs on the side of hiding too much: it is applied to every file
excerpt the agent reads and to every tool result before it is sent to the model.

What is hidden:
- PEM private-key blocks (the whole block);
- well-known token shapes: OpenAI ``sk-…``, Stripe ``sk_live_…``/``rk_live_…``/``pk_…``,
  AWS ``AKIA…``/``ASIA…``, Slack ``xox?-…``, GitHub ``ghp_…``/``github_pat_…``, GitLab
  ``glpat-…``, Google ``AIza…``, JWTs, ``Bearer <token>``;
- credentials inside URLs (``scheme://user:PASSWORD@host``);
- the value (8+ characters, or not only letters) of any assignment, annotated assignment, keyword
  argument, default or mapping entry whose name says key/secret/token/password/credential/auth
  (``API_KEY = "…"``, ``token: str = "…"``, ``token="…"``, ``"password": …``);
- unquoted ``NAME=value``/``NAME: value`` with such a name and a value mixing letters and digits;
- a word mixing letters and digits after "password"/"secret"/"token" + is/was/:/= in prose
  ("password is hunter2");
- any other quoted string of 20+ characters without spaces that mixes letters and digits
  (high-entropy literals);
- elsewhere in the same text, any word containing a distinctive piece (8+ letters/digits) of a
  value hidden above (a fragment of a secret is a leak too).
"""

from __future__ import annotations

import re

MARK = "[REDACTED]"

_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]*(?:PRIVATE KEY|CERTIFICATE|KEY)[A-Z ]*-----.*?(?:-----END [A-Z0-9 ]*-----|\Z)",
                  re.S)
_TOKENS = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-(?:proj-|ant-|live-)?[A-Za-z0-9_\-]{8,}"
    r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{8,}"
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{12,}"
    r"|xox[abporse]-[A-Za-z0-9\-]{8,}"
    r"|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}"
    r"|glpat-[A-Za-z0-9_\-]{12,}"
    r"|AIza[0-9A-Za-z_\-]{20,}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"
    r")")
_BEARER = re.compile(r"(?i)(\bbearer\s+)([A-Za-z0-9_\-\.=]{12,})")
_URL_CRED = re.compile(r"([a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@\"']*:)([^\s@/\"']+)(@)")
_NAME = r"[A-Za-z0-9_]*(?:key|secret|token|passw(?:or)?d|pwd|credential|auth|private|dsn)[A-Za-z0-9_]*"
# NAME = "value" / NAME: 'value' / "NAME": "value" / NAME="""value"""
_ASSIGN = re.compile(
    r"(?i)(\b" + _NAME + r"[\"']?\s*(?::\s*[A-Za-z_][\w\[\]., |]*?\s*)?(?::|=|:=|=>)\s*[rbuf]{0,2})"
    r"(\"\"\"|'''|\"|'|`)(.*?)(\2)", re.S)
_PROSE = re.compile(r"(?i)(\b(?:password|passwd|passphrase|secret|token|api[ _-]?key)\b\s*(?:is|=|:|was)\s*)"
                    r"(?![\[\"'(]|REDACTED)([^\s\"'`,;)]{4,})")
# NAME=value unquoted (.ini, YAML, shell): a value with letters and digits
_BARE = re.compile(r"(?i)(\b" + _NAME + r"\s*[:=]\s*)(?![\"'`\[(])([A-Za-z0-9_\-+/=.@:]{8,})(?![A-Za-z0-9_(])")
_LITERAL = re.compile(r"([\"'`])([^\s\"'`]{20,})(\1)")


def _entropic(s: str) -> bool:
    """Mixes letters and digits, and is not a path, a URL or already redacted."""
    return (any(c.isdigit() for c in s) and any(c.isalpha() for c in s) and MARK not in s
            and "://" not in s and not s.startswith(("/", ".")))


def _secret_value(s: str) -> bool:
    """A value assigned to a credential-named variable that may be a secret: 8+ characters, or
    anything but letters (``"name"`` stays; ``"hunter2"`` does not)."""
    s = s.strip()
    return bool(s) and MARK not in s and (len(s) >= 8 or not s.replace("_", "").isalpha())


_FRAGMENT = re.compile(r"[A-Za-z0-9]{8,}")
_PEM_LINE = re.compile(r"-----(?:BEGIN|END) [A-Z0-9 ]*-----")


def _fragments(secret: str) -> set[str]:
    """Distinctive pieces of a redacted value (8+ alphanumerics, not only digits, not a
    lower-case word): when one also appears elsewhere in the text, it is hidden there too."""
    secret = _PEM_LINE.sub(" ", secret)
    return {f for f in _FRAGMENT.findall(secret) if not f.isdigit() and not f.islower()}


def redact(text: str) -> tuple[str, int]:
    """``(redacted text, number of replacements)``. Never raises."""
    count = 0
    hidden: set[str] = set()

    def sub(pattern: re.Pattern, repl, s: str, group: int = 0) -> str:
        nonlocal count

        def wrapped(m: re.Match) -> str:
            out = repl(m) if callable(repl) else repl
            if out != m.group(0):
                hidden.update(_fragments(m.group(group)))
            return out
        out, n = pattern.subn(wrapped, s)
        count += n
        return out

    text = sub(_PEM, MARK, text)
    text = sub(_TOKENS, MARK, text)
    text = sub(_BEARER, lambda m: m.group(1) + MARK, text, 2)
    text = sub(_URL_CRED, lambda m: m.group(1) + MARK + m.group(3), text, 2)

    def masked(group: int, is_secret, rebuild):
        """A replacement that hides group ``group`` of a match when ``is_secret`` says so."""
        def repl(m: re.Match) -> str:
            nonlocal count
            if not is_secret(m.group(group)):
                return m.group(0)
            count += 1
            hidden.update(_fragments(m.group(group)))
            return rebuild(m)
        return repl

    text = _ASSIGN.sub(masked(3, _secret_value, lambda m: m.group(1) + m.group(2) + MARK + m.group(4)), text)
    text = _PROSE.sub(masked(2, _entropic, lambda m: m.group(1) + MARK), text)
    text = _BARE.sub(masked(2, _entropic, lambda m: m.group(1) + MARK), text)
    text = _LITERAL.sub(masked(2, lambda v: v != MARK and _entropic(v), lambda m: m.group(1) + MARK + m.group(3)),
                        text)
    hidden.discard("REDACTED")
    if hidden:
        pieces = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]*(?:" + "|".join(
            re.escape(f) for f in sorted(hidden, key=len, reverse=True)) + r")[A-Za-z0-9]*(?![A-Za-z0-9])")
        text = sub(pieces, MARK, text)
    return text, count
