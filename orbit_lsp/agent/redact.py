"""Secret redaction for text that is about to reach a model.

``redact(text)`` replaces everything that looks like a credential with ``[REDACTED]`` and
returns ``(text, count)``. It errs on the side of hiding too much: it is applied to every file
excerpt the agent reads, every tool result, question and memory text before it is sent to a
model or stored.

The rules follow the plugins of detect-secrets 1.5 (Yelp, a maintained secret scanner: its
keyword detector's secret-like names and its token-shape plugins; ``tests/test_agent_redact.py``
checks that nothing detect-secrets finds in the test corpus survives), written so that every pass
is linear in the text's length (bounded quantifiers, no nested repetition, names found from
keyword hits rather than by a pattern with wildcards on both sides).

What is hidden:

- PEM blocks (``-----BEGIN …-----`` to ``-----END …-----``, or to the end of the text), the whole
  block; and, without a BEGIN line (a partial read inside a key), every run of 40+ base64
  characters mixing upper case, lower case and digits, and a short base64 line ending such a run;
- well-known token shapes: OpenAI ``sk-…``, Stripe ``sk_live_…``/``rk_live_…``/``pk_…``, AWS
  ``AKIA…``/``ASIA…``, Slack ``xox?-…`` and webhooks, GitHub ``ghp_…``/``github_pat_…``, GitLab
  ``glpat-…`` and kin, Google ``AIza…``, SendGrid, Square, PyPI, npm, Discord, Telegram, Azure
  ``AccountKey=``, JWTs, ``Bearer <token>``, ``Basic <base64>``;
- credentials inside URLs (``scheme://user:PASSWORD@host``);
- the value of an assignment, annotated assignment, keyword argument, comparison, mapping entry or
  ``NAME=value``/``NAME: value`` line whose name says it holds a secret (``orbit_lsp`` splits the
  name into words: ``admin_pwd``, ``DB_PASS``, ``apiKey``, ``X-Api-Key``…):

  - password-like names (pass, passwd, password, passphrase, pwd, pw, secret, …): any quoted
    value, whatever its shape (``"letmein"``, ``"correct horse battery staple"``); an unquoted
    value unless it is code (a call, an attribute or subscript, a number, ``None``/``true``…, a
    name that itself names a secret); on a ``NAME: value``/``NAME=value`` line of its own, the
    rest of the line;
  - token/key names (token, api_key, private_key, access_key, credentials, …): any quoted value
    but a plain URL; an unquoted one on a line of its own, else when it mixes letters and digits;
  - other names holding key/auth/dsn/private: quoted values of 8+ characters or not only
    letters, unquoted ones mixing letters and digits;

- a word mixing letters and digits after "password"/"secret"/"token"/"api key" + is/was/:/= in
  prose ("password is hunter2");
- any other quoted string of 20+ characters without spaces or brackets that mixes letters and
  digits within one piece of 8+ characters between ``-_/.:@`` (generated keys, not file paths or
  ``005-py-imports``);
- elsewhere in the same text, any word containing a distinctive piece (8+ letters/digits) of a
  value hidden above (a fragment of a secret is a leak too).

Bounded work: text longer than ``MAX_REDACT_CHARS`` characters is cut (at a line break, else at
a space) before redaction and ends with a note saying how much was left out; nothing past the cut
is returned.
"""

from __future__ import annotations

import functools
import re
from typing import Callable

MARK = "[REDACTED]"
MAX_REDACT_CHARS = 262_144  # longest text redacted (and returned) per call, in characters
MAX_NAME_CHARS = 96         # longest identifier considered a variable name
MAX_QUOTED_CHARS = 8_192    # longest quoted value looked at (longer: up to the end of its line)

# ---------------------------------------------------------------------------------------------
# Secret-like names (after detect-secrets' keyword DENYLIST, split into words).

_PASSWORD_WORDS = frozenset({
    "pass", "passwd", "password", "passwords", "passphrase", "passcode", "pwd", "pw", "pword",
    "secret", "secrets", "contrasena", "contraseña", "dbpass", "adminpass", "rootpass", "userpass",
    "keypass", "storepass", "mypass",
})
_PASSWORD_INFIXES = ("password", "passwd", "passphrase", "secret")  # inside one word: adminpassword
_TOKEN_WORDS = frozenset({
    "token", "apikey", "apitoken", "authtoken", "authorization", "accesstoken", "refreshtoken", "bearer",
    "credential", "credentials", "creds", "privatekey", "secretkey", "accesskey", "sessionkey",
    "signingkey", "masterkey", "encryptionkey", "clientkey",
})
_KEY_QUALIFIERS = frozenset({
    "api", "private", "priv", "secret", "access", "auth", "client", "service", "account", "db",
    "database", "signing", "encryption", "encrypt", "master", "app", "consumer", "license", "ssh",
    "gpg", "pgp", "jwt", "hmac", "session", "admin", "root", "deploy", "webhook", "stripe", "aws",
    "openai", "github", "gitlab", "slack", "google", "gcp", "azure", "sendgrid", "twilio", "mailgun",
})
_WEAK_WORDS = frozenset({"key", "keys", "auth", "dsn", "private", "priv", "cert", "salt"})

PASSWORD, TOKEN, WEAK = "password", "token", "weak"

_WORD_SPLIT = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[^\W\d_]+")


@functools.lru_cache(maxsize=4096)
def name_kind(name: str) -> str | None:
    """``"password"``, ``"token"``, ``"weak"`` or None: how strongly identifier ``name`` says
    it holds a secret (``admin_pwd`` → password, ``apiKey`` → token, ``sort_key`` → weak)."""
    words = [w.lower() for part in re.split(r"[_\-.\s$]+", name) for w in _WORD_SPLIT.findall(part)]
    joined = "".join(words)
    if any(w in _PASSWORD_WORDS for w in words) or any(i in joined for i in _PASSWORD_INFIXES):
        return PASSWORD
    if any(w in _TOKEN_WORDS for w in words):
        return TOKEN
    for a, b in zip(words, words[1:]):
        if b in ("key", "token") and a in _KEY_QUALIFIERS:
            return TOKEN
        if a in ("auth", "access", "refresh", "bearer", "session") and b in ("token", "tokens"):
            return TOKEN
    if any(w in _WEAK_WORDS for w in words):
        return WEAK
    return None


# ---------------------------------------------------------------------------------------------
# Patterns (every quantifier bounded or followed by nothing that can fail).

_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{1,60}-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{1,60}-----")
_TOKENS = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-(?:proj-|ant-|live-|svcacct-)?[A-Za-z0-9_\-]{8,512}"
    r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{8,512}"
    r"|(?:A3T[A-Z0-9]|AKIA|ASIA|AGPA|AIDA|AROA|ABIA|ACCA)[A-Z0-9]{12,64}"
    r"|xox[abporse]-[A-Za-z0-9\-]{8,512}"
    r"|gh[pousr]_[A-Za-z0-9_]{16,512}|github_pat_[A-Za-z0-9_]{16,512}"
    r"|(?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas)-[A-Za-z0-9_\-]{12,1024}"
    r"|GR1348941[A-Za-z0-9_\-]{20,50}"
    r"|AIza[0-9A-Za-z_\-]{20,512}"
    r"|SG\.[A-Za-z0-9_\-]{16,64}\.[A-Za-z0-9_\-]{16,128}"
    r"|sq0(?:csp|atp)-[0-9A-Za-z_\-]{22,64}"
    r"|pypi-AgE[A-Za-z0-9_\-]{50,2048}"
    r"|npm_[A-Za-z0-9]{30,64}"
    r"|[MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}"
    r"|\d{8,10}:[0-9A-Za-z_\-]{35}"
    r"|eyJ[A-Za-z0-9_\-=]{8,4096}\.[A-Za-z0-9_\-=]{4,4096}\.?[A-Za-z0-9_\-.+/=]{0,4096}"
    r"|[0-9a-f]{32}-us[0-9]{1,2}"
    r")")
_SLACK_HOOK = re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]{8,256}", re.I)
_ACCOUNT_KEY = re.compile(r"(AccountKey=)([A-Za-z0-9+/=]{20,512})")
_AUTH_SCHEME = re.compile(r"(?i)(\b(?:bearer|basic|token)[ \t]{1,8})([A-Za-z0-9_\-.=+/~]{12,4096})")
_URL_CRED = re.compile(r"://([^\s:/@\"'<>{}]{0,256}):([^\s@/\"'<>{}]{1,512})@")
_PROSE = re.compile(r"(?i)\b(?:password|passwd|passphrase|secret|token|api[ _-]?key)\b[ \t]{0,8}"
                    r"(?:is|=|:|was)[ \t]{0,8}(?![\[\"'(]|REDACTED)([^\s\"'`,;)]{4,512})")
_LITERAL = re.compile(r"([\"'`])([^\s\"'`]{20,4096})(\1)")
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{40,8192}={0,2}(?![A-Za-z0-9+/=])")
_BASE64_TAIL = re.compile(r"([A-Za-z0-9+/]{2,80}={0,2})[ \t\"',]*$")

# name-driven assignments: a keyword hit inside an identifier, then the operator after it
_KEYWORD = re.compile(r"(?i)pass|pwd|pw|secret|token|key|auth|cred|dsn|priv|contrase|bearer|cert|salt")
_IDENT_CHAR = re.compile(r"[\w.\-$]")
_IDENT_TAIL = re.compile(r"[\w.\-$]{0,%d}" % MAX_NAME_CHARS)
_OPERATOR = re.compile(
    r"(?P<close>[\"'`\]]{0,2})[ \t]{0,8}"
    r"(?:(?P<annot>:[ \t]{0,8}[A-Za-z_][\w\[\]., |]{0,60}?)[ \t]{0,8}(?==[^=]))?"
    r"(?P<op>:=|=>|===?|!==?|=|:)[ \t]{0,8}(?P<prefix>[rbufRBUF]{0,2})")
_BARE = re.compile(r"[^\s\"'`,;)\]}]{1,512}")
_LINE_HEAD = re.compile(r"[ \t]{0,64}(?:\d{1,7}: ?)?[ \t]{0,64}(?:export[ \t]+|set[ \t]+|-[ \t]+)?[\"']?")
_CODE_LITERAL = frozenset({"none", "null", "nil", "true", "false", "undefined", "str", "bytes", "int",
                           "string", "optional"})
_NUMBER = re.compile(r"[+\-]?\d[\d_.eE+\-]{0,40}")
_NAME_VALUE = re.compile(r"[A-Za-z]+(?:_[A-Za-z]+)+")  # OPENAI_API_KEY, agent_api_key
_COMPARISONS = frozenset({"==", "===", "!=", "!=="})
_CODE_REST = re.compile(r"[()\[\]{}]|\s[+*/%<>|&]=?\s|\s(?:if|else|for|and|or|in)\s")
_CODE_WORDS = frozenset({"await", "lambda", "not", "yield", "new", "async", "function", "typeof", "self",
                         "this", "return"})
_SEGMENT = re.compile(r"[^\-_/.:@]{8,}")
_FRAGMENT = re.compile(r"[A-Za-z0-9]{8,}")
_ALNUM_WORD = re.compile(r"[A-Za-z0-9]{8,}")
_PEM_LINE = re.compile(r"-----(?:BEGIN|END) [A-Z0-9 ]{0,60}-----")
MAX_FRAGMENTS = 128
_DELIMITER = re.compile(r"[^\w+/=.\-]")  # cannot be part of a token


def _entropic(s: str) -> bool:
    """Mixes letters and digits, and is not a path, a URL or already redacted."""
    return (any(c.isdigit() for c in s) and any(c.isalpha() for c in s) and MARK not in s
            and "://" not in s and not s.startswith(("/", ".")))


def _random_looking(s: str) -> bool:
    """A literal that may be a generated secret: mixes letters and digits (``_entropic``) within
    one piece of 8+ characters between ``-_/.:@`` (``a1B2c3D4e5``, not ``005-py-imports`` nor
    ``lib/python3/m.py``), and holds no bracket (``f"{name}.{n}"``, regular expressions)."""
    return (_entropic(s) and not any(c in s for c in "{[(<")  # interpolations, patterns
            and any(_entropic(p) for p in _SEGMENT.findall(s)))


def _weak_secret(s: str) -> bool:
    """A quoted value of a weakly secret-named variable that may be a secret: 8+ characters, or
    anything but letters (``"name"`` stays; ``"hunter2"`` does not)."""
    s = s.strip()
    return bool(s) and MARK not in s and (len(s) >= 8 or not s.replace("_", "").isalpha())


def _fragments(secret: str) -> set[str]:
    """Distinctive pieces of a redacted value (8+ alphanumerics, not only digits, not a
    lower-case word): when one also appears elsewhere in the text, it is hidden there too."""
    secret = _PEM_LINE.sub(" ", secret)
    return {f for f in _FRAGMENT.findall(secret) if not f.isdigit() and not f.islower()}


class _Redactor:
    """One redaction: the text, the count and the fragments of what was hidden."""

    def __init__(self, text: str):
        self.text = text
        self.count = 0
        self.hidden: set[str] = set()

    def apply(self, spans: list[tuple[int, int]]) -> None:
        """Replace the (sorted, disjoint) ``spans`` of the current text by ``MARK``."""
        if not spans:
            return
        out, pos = [], 0
        for a, b in spans:
            if a < pos or b <= a:
                continue
            value = self.text[a:b]
            if value == MARK:
                continue
            out += [self.text[pos:a], MARK]
            self.hidden.update(_fragments(value))
            self.count += 1
            pos = b
        out.append(self.text[pos:])
        self.text = "".join(out)

    def pattern(self, rx: re.Pattern, group: int = 0, keep: Callable[[re.Match], bool] | None = None) -> None:
        """Hide group ``group`` of every match of ``rx`` (unless ``keep(match)``)."""
        spans = []
        for m in rx.finditer(self.text):
            if keep is not None and keep(m):
                continue
            a, b = m.span(group)
            if a >= 0 and b > a and MARK not in m.group(group):
                spans.append((a, b))
        self.apply(spans)

    # -- PEM ------------------------------------------------------------------------------------
    def pem_blocks(self) -> None:
        text, spans, pos = self.text, [], 0
        while True:
            m = _PEM_BEGIN.search(text, pos)
            if m is None:
                break
            end = _PEM_END.search(text, m.end())
            b = end.end() if end is not None else len(text)
            spans.append((m.start(), b))
            pos = b
        self.apply(spans)

    def base64_runs(self) -> None:
        """Long mixed base64 runs (PEM body lines without their BEGIN line), and the short last
        line of such a body."""
        text, spans = self.text, []
        for m in _BASE64_RUN.finditer(text):
            run = m.group(0)
            if any(c.isdigit() for c in run) and any(c.isupper() for c in run) and any(c.islower() for c in run):
                spans.append(m.span())
                # the body's last, shorter line
                nl = text.find("\n", m.end())
                if nl >= 0 and text[m.end():nl].strip(" \t\r\"',") == "":
                    nxt = text.find("\n", nl + 1)
                    line_end = len(text) if nxt < 0 else nxt
                    line = text[nl + 1:line_end]
                    t = _BASE64_TAIL.search(line) if len(line) <= 160 else None
                    if t is not None and not _PEM_LINE.search(line) and (
                            any(c.isdigit() or c in "+/=" for c in t.group(1)) or len(t.group(1)) <= 4
                            or not t.group(1).isalpha()):
                        head = line[:t.start(1)]
                        if _LINE_HEAD.fullmatch(head.rstrip("\"'")) or head.strip() == "":
                            spans.append((nl + 1 + t.start(1), nl + 1 + t.end(1)))
        spans.sort()
        self.apply(spans)

    # -- names ----------------------------------------------------------------------------------
    def assignments(self) -> None:
        text, n = self.text, len(self.text)
        spans: list[tuple[int, int]] = []
        done = 0  # identifiers ending before this were already looked at
        for hit in _KEYWORD.finditer(text):
            if hit.start() < done:
                continue
            # the identifier around the hit
            s = hit.start()
            lo = max(0, s - MAX_NAME_CHARS)
            while s > lo and _IDENT_CHAR.match(text, s - 1):
                s -= 1
            e = _IDENT_TAIL.match(text, hit.start()).end()
            done = e
            if e - s >= MAX_NAME_CHARS or (s == lo and lo > 0):
                continue
            name = text[s:e].strip(".-$")
            kind = name_kind(name)
            if kind is None:
                continue
            op = _OPERATOR.match(text, e)
            if op is None:
                continue
            v = op.end()
            if v >= n:
                continue
            nl = text.rfind("\n", max(0, s - 200), s)
            line_start = nl + 1 if nl >= 0 else (0 if s <= 200 else -1)
            own_line = line_start >= 0 and _LINE_HEAD.fullmatch(text, line_start, s) is not None
            span = self._value_span(text, v, kind, op.group("op"), own_line, name)
            if span is not None:
                spans.append(span)
                done = max(done, span[1])
        self.apply(spans)

    def _value_span(self, text: str, v: int, kind: str, op: str, own_line: bool, name: str):
        """The span of the secret value starting at ``v``, or None when it is not one."""
        ch = text[v]
        if ch in "\"'`":
            quote = text[v:v + 3] if text[v:v + 3] in ('"""', "'''") else ch
            a = v + len(quote)
            if len(quote) == 3:
                b = text.find(quote, a, a + MAX_QUOTED_CHARS)
            else:
                line_end = text.find("\n", a)
                line_end = len(text) if line_end < 0 else line_end
                b = a
                while True:  # the closing quote on the line, past escaped ones
                    b = text.find(quote, b, min(line_end, a + MAX_QUOTED_CHARS))
                    if b < 0 or text[b - 1] != "\\" or text[b - 2:b] == "\\\\":
                        break
                    b += 1
            if b < 0:
                nl = text.find("\n", a)
                b = len(text) if nl < 0 else nl
            value = text[a:b]
            if not value.strip() or MARK in value:
                return None
            if kind == WEAK and not _weak_secret(value):
                return None
            if kind == TOKEN and "://" in value and "@" not in value and " " not in value:
                return None  # a plain URL (a token in its query is found by its own name)
            if kind == WEAK and op in _COMPARISONS:
                return None  # ``if key == "name":``
            if _NAME_VALUE.fullmatch(value) and name_kind(value):
                return None  # the name of a setting or environment variable, not its value
            return a, b
        if op not in ("=", ":", ":=", "=>"):
            return None
        m = _BARE.match(text, v)
        if m is None:
            return None
        word = m.group(0)
        after = text[m.end():m.end() + 1]
        if "(" in word or "[" in word or after in ("(", "[") or MARK in word:
            return None
        if _NUMBER.fullmatch(word) or word.lower().rstrip(",") in _CODE_LITERAL:
            return None
        if re.fullmatch(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+", word) and not own_line:
            return None  # an attribute: code
        if re.fullmatch(r"[A-Za-z_$][\w.$]*", word) and name_kind(word) is not None and not _entropic(word):
            return None  # names a secret (``password=password``, ``"token": token``), is not one
        if own_line:
            line_end = text.find("\n", v, v + 1024)
            line_end = min(len(text), v + 1024) if line_end < 0 else line_end
            rest = text[v:line_end]
            cut = rest.find(" #")
            rest = (rest if cut < 0 else rest[:cut]).rstrip(" \t\r;,")
            if _CODE_REST.search(rest) or word.lower() in _CODE_WORDS:
                return None  # ``token = await self.begin(…)``: code, not a setting
            if kind == PASSWORD:
                return (v, v + len(rest)) if rest else None
            if kind == TOKEN:
                return v, m.end()
        if kind == PASSWORD and op != ":":
            return v, m.end()
        return (v, m.end()) if _entropic(word) else None

    # -- fragments ------------------------------------------------------------------------------
    def fragments(self) -> None:
        self.hidden.discard("REDACTED")
        if not self.hidden:
            return
        frags = sorted(self.hidden, key=len, reverse=True)[:MAX_FRAGMENTS]
        rx = re.compile("|".join(re.escape(f) for f in frags))
        spans = [m.span() for m in _ALNUM_WORD.finditer(self.text) if m.group(0) != "REDACTED" and rx.search(m.group(0))]
        before = set(self.hidden)
        self.apply(spans)
        self.hidden = before


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be used as given, or None: it ``"contains a NUL character"`` or
    ``"contains an unpaired UTF-16 surrogate …"`` (what file systems, SQLite, FalkorDB and HTTP
    bodies refuse). For clear errors on questions, memory texts and tool arguments."""
    if "\0" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains an unpaired UTF-16 surrogate (not valid Unicode text)"
    return None


def _bounded(text: str) -> str:
    """``text`` cut to at most ``MAX_REDACT_CHARS`` characters, with a note on what was left
    out. The cut falls at a line break when there is one in the last half, else after the last
    character that cannot be part of a token (a space, a quote, a bracket…), so that no secret
    is cut in half (a text that is one huge word is dropped whole)."""
    if len(text) <= MAX_REDACT_CHARS:
        return text
    head = text[:MAX_REDACT_CHARS]
    cut = head.rfind("\n")
    if cut < MAX_REDACT_CHARS // 2:
        window = head[-4096:]
        m = _DELIMITER.search(window[::-1])
        cut = MAX_REDACT_CHARS - m.start() - 1 if m else max(cut, 0)
    return (text[:cut] + f"\n[… {len(text) - cut:,} more characters not shown: "
            f"at most {MAX_REDACT_CHARS:,} characters are redacted and sent at once]")


def redact(text: str) -> tuple[str, int]:
    """``(redacted text, number of replacements)``. Never raises; time linear in
    ``len(text)``; text over ``MAX_REDACT_CHARS`` characters is cut first (with a note)."""
    if not isinstance(text, str):
        text = str(text)
    r = _Redactor(_bounded(text))
    r.pem_blocks()
    r.pattern(_TOKENS)
    r.pattern(_SLACK_HOOK)
    r.pattern(_ACCOUNT_KEY, 2)
    r.pattern(_AUTH_SCHEME, 2, keep=lambda m: m.group(2).isalpha() or (
        not m.group(1).lower().startswith("bearer") and not _entropic(m.group(2))))
    r.pattern(_URL_CRED, 2)
    r.assignments()
    r.pattern(_PROSE, 1, keep=lambda m: not _entropic(m.group(1)))
    r.pattern(_LITERAL, 2, keep=lambda m: not _random_looking(m.group(2)))
    r.base64_runs()
    r.fragments()
    return r.text, r.count
