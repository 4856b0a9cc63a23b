"""The read-only guard for model-written Cypher.

``run_readonly(graph, cypher)`` is the only way text written by a model (or typed by a user into
``orbit-lsp cypher``) reaches FalkorDB:

1. ``check_readonly_text`` refuses, before anything is sent, what the server itself would let
   through ``GRAPH.RO_QUERY``: ``LOAD CSV`` (the server classes it as a read and opens the URI),
   more than one statement, and empty text; and what would pin the server: text longer than
   ``MAX_QUERY_CHARS`` or nested deeper than ``MAX_NESTING`` (FalkorDB's parser is exponential in
   the nesting depth and its timeout does not cover parsing). ``check_params`` refuses parameters
   the ``CYPHER name=value`` header cannot carry (a backtick in a name, NUL, deep nesting).
2. The query is rewritten so the server returns at most ``row_cap + 1`` rows (see ``cap_query``):
   fetching one row more than the cap is how truncation is detected without counting.
3. It runs with ``GRAPH.RO_QUERY`` and an explicit timeout. Writes of every kind (``CREATE``,
   ``MERGE``, ``SET``, ``DELETE``, index DDL, write procedures, writes inside ``CALL { }``) are
   refused by the server, whose check is the real guard; orbit keeps no keyword blacklist, so
   words like ``CREATE`` inside string literals or comments run normally. A timed-out query is
   never retried.

How the cap is enforced (server-side, never by cutting a full reply on the client):

- the final ``RETURN`` gets ``LIMIT cap+1`` appended, or its trailing ``LIMIT n`` is lowered to
  ``cap+1`` when ``n`` is larger (trailing comments and a trailing ``;`` are dropped first);
- a query ending in a procedure call (``CALL db.labels()``, ``… YIELD x WHERE …``) gets
  ``[YIELD outputs] RETURN outputs LIMIT cap+1``; outputs of FalkorDB's read procedures are
  known, an unknown procedure called without ``YIELD`` is refused with a hint;
- anything else that returns rows (``UNION``, ``LIMIT $param``) is wrapped as
  ``CALL { <query> } RETURN * LIMIT cap+1`` (FalkorDB evaluates the subquery lazily) and the
  columns, which ``RETURN *`` sorts by name, are put back in the query's order;
- a query that cannot return rows (an update clause last) is sent unchanged: the server refuses
  it with its own reason.

The server's ``RESULTSET_SIZE`` setting silently cuts a reply without any flag; when a result has
exactly that many rows it is reported as possibly truncated.
"""

from __future__ import annotations

import re
import threading
import time
import unicodedata
import weakref
from dataclasses import dataclass, field
from typing import Any

from orbit_lsp.graph.connection import Graph, GraphStore
from orbit_lsp.graph.errors import QueryInvalid, QueryRejected, QueryTimeout

__all__ = [
    "ReadOnlyResult",
    "MAX_NESTING",
    "MAX_PARAMS_CHARS",
    "MAX_QUERY_CHARS",
    "cap_query",
    "check_params",
    "check_readonly_text",
    "forget_resultset_size",
    "nesting_depth",
    "run_readonly",
    "server_resultset_size",
]

# ---------------------------------------------------------------------------------------------
# Lexer: just enough of openCypher (as FalkorDB reads it) to tell code from strings, comments and
# quoted names, and to know the bracket depth of every token.

_WS, _COMMENT, _STRING, _QUOTED, _PARAM, _WORD, _PUNCT = (
    "ws", "comment", "string", "quoted", "param", "word", "punct")
_OPEN = "([{"
_CLOSE = ")]}"


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    start: int
    end: int
    depth: int  # bracket depth before the token (an opening bracket has the outer depth)

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == _WORD else ""


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _lex(text: str) -> list[_Tok]:
    """All tokens of ``text``, whitespace and comments included; never fails (an unterminated
    string or comment runs to the end of the text, as the server would then refuse it)."""
    toks: list[_Tok] = []
    i, n, depth = 0, len(text), 0
    while i < n:
        ch = text[i]
        start = i
        if ch.isspace():
            while i < n and text[i].isspace():
                i += 1
            kind = _WS
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            kind = _COMMENT
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            kind = _COMMENT
        elif ch in "'\"":
            i += 1
            while i < n and text[i] != ch:
                i += 2 if text[i] == "\\" else 1
            i = min(i + 1, n)
            kind = _STRING
        elif ch == "`":
            i += 1
            while i < n:
                if text[i] == "`":
                    if i + 1 < n and text[i + 1] == "`":  # `` is an escaped backquote
                        i += 2
                        continue
                    break
                i += 1
            i = min(i + 1, n)
            kind = _QUOTED
        elif ch == "$":
            i += 1
            if i < n and text[i] == "`":
                j = text.find("`", i + 1)
                i = n if j < 0 else j + 1
            else:
                while i < n and _is_word_char(text[i]):
                    i += 1
            kind = _PARAM
        elif _is_word_char(ch):
            while i < n and _is_word_char(text[i]):
                i += 1
            kind = _WORD
        else:
            i += 1
            kind = _PUNCT
        tok_depth = depth
        if kind == _PUNCT and ch in _OPEN:
            depth += 1
        elif kind == _PUNCT and ch in _CLOSE:
            depth = max(depth - 1, 0)
            tok_depth = depth
        toks.append(_Tok(kind, text[start:i], start, i, tok_depth))
    return toks


def _significant(toks: list[_Tok]) -> list[_Tok]:
    return [t for t in toks if t.kind not in (_WS, _COMMENT)]


def _keyword_at(sig: list[_Tok], k: int) -> str:
    """The upper-cased keyword at ``sig[k]`` if it is a bare word used as a keyword (not a
    property key after ``.``, a label/type after ``:``), else ``""``."""
    t = sig[k]
    if t.kind != _WORD:
        return ""
    if k > 0 and sig[k - 1].kind == _PUNCT and sig[k - 1].text in ".:":
        return ""
    return t.upper


# ---------------------------------------------------------------------------------------------
# Text checks made before anything reaches the server.

_LOAD_CSV_RE = re.compile(r"\bLOAD(?:\s|/\*.*?\*/|//[^\n]*(?:\n|$))*CSV\b", re.IGNORECASE | re.DOTALL)

# FalkorDB 4.16's Cypher parser takes time exponential in the nesting depth of an expression
# (about x2 per level: 12 levels ~40 ms, 18 levels ~2 s, 25 levels minutes) and its query timeout
# does not cover parsing. Measured by `python -m bench.cypher_nesting` (bench/RESULTS.md).
MAX_NESTING = 10
MAX_QUERY_CHARS = 4_000
MAX_PARAMS_CHARS = 64_000

_NESTING_HINT = ("flatten it: name intermediate values with WITH, combine conditions with AND/OR "
                 "instead of nesting them, drop doubled NOT/minus and redundant brackets")
# Words after which a '-' or '+' is a sign (unary), not a subtraction.
_OPERATOR_WORDS = frozenset({
    "RETURN", "WITH", "WHERE", "AND", "OR", "XOR", "NOT", "IN", "WHEN", "THEN", "ELSE", "CASE",
    "SKIP", "LIMIT", "UNWIND", "SET", "CONTAINS", "STARTS", "ENDS", "BY", "IS", "DISTINCT", "YIELD",
})


def nesting_depth(cypher: str) -> int:
    """How deep the expressions of ``cypher`` nest, as FalkorDB's parser pays for it: brackets
    ``()``, ``[]``, ``{}`` and ``CASE … END`` each add a level, and so does each unary ``NOT``,
    ``-`` or ``+`` that applies to what follows (``NOT NOT x`` is 2, ``NOT f(NOT f(x))`` is 4).
    String literals, quoted names and comments do not count. Linear in the text's length."""
    stack = [0]          # per open level: unary operators waiting for their operand
    pending = 0          # sum(stack)
    best = 0
    prev: _Tok | None = None
    sig = _significant(_lex(cypher))
    for k, t in enumerate(sig):
        word = _keyword_at(sig, k)
        nxt = sig[k + 1] if k + 1 < len(sig) else None
        if t.kind == _PUNCT and t.text in _OPEN or word == "CASE":
            stack.append(0)
        elif t.kind == _PUNCT and t.text in _CLOSE or word == "END":
            if len(stack) > 1:
                pending -= stack.pop()
            pending -= stack[-1]
            stack[-1] = 0  # the bracketed operand is complete: its level's unary chain ends
        elif word == "NOT" or (t.kind == _PUNCT and t.text in "-+" and (
                prev is None
                or (prev.kind == _PUNCT and prev.text not in _CLOSE and prev.text not in "<>")
                or (prev.kind == _WORD and prev.upper in _OPERATOR_WORDS))):
            stack[-1] += 1
            pending += 1
        elif t.kind == _WORD and nxt is not None and nxt.text == "(":
            pass  # a function name: its argument list continues the operand
        elif t.kind != _PUNCT:
            pending -= stack[-1]
            stack[-1] = 0  # an operand (or a clause word) ends the unary chain of its level
        best = max(best, len(stack) - 1 + pending)
        prev = t
    return best


def _bad_chars(text: str) -> str | None:
    """What makes ``text`` unsendable: a NUL character or an unpaired surrogate, else None."""
    if "\0" in text:
        return "a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "an unpaired UTF-16 surrogate (not valid Unicode text)"
    return None


def check_params(params: Any, cypher: str = "") -> None:
    """Refuse query parameters that cannot be sent safely.

    ``params`` must be None or a dict whose keys are non-empty strings without a backtick
    (FalkorDB's ``CYPHER name=value`` header cannot quote one) and whose values are JSON values
    (strings, numbers, booleans, null, lists, maps with such keys), strings without NUL or
    unpaired surrogates, finite numbers, nesting at most ``MAX_NESTING`` lists/maps deep, at most
    ``MAX_PARAMS_CHARS`` characters of text in all. Raises ``QueryRejected(reason, cypher)``."""
    if params is None:
        return
    if not isinstance(params, dict):
        raise QueryRejected(f"parameters must be a JSON object (name -> value), not {type(params).__name__}",
                            cypher)
    size = 0

    def key_ok(key: Any, what: str) -> None:
        nonlocal size
        if not isinstance(key, str) or not key:
            raise QueryRejected(f"{what} {key!r} must be a non-empty string", cypher)
        if "`" in key:
            raise QueryRejected(f"{what} {key!r} contains a backtick, which FalkorDB cannot quote: "
                                "rename it (letters, digits and _)", cypher)
        bad = _bad_chars(key)
        if bad:
            raise QueryRejected(f"{what} {key!r} contains {bad}", cypher)
        size += len(key) + 2

    def value_ok(name: str, value: Any, depth: int) -> None:
        nonlocal size
        if depth > MAX_NESTING:
            raise QueryRejected(f"parameter {name!r} nests lists/maps more than {MAX_NESTING} deep: "
                                "FalkorDB's parser slows exponentially with nesting; send a flatter value",
                                cypher)
        if value is None or isinstance(value, (bool, int)):
            size += 8
        elif isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                raise QueryRejected(f"parameter {name!r} holds {value}, which Cypher cannot express", cypher)
            size += 24
        elif isinstance(value, str):
            bad = _bad_chars(value)
            if bad:
                raise QueryRejected(f"parameter {name!r} holds a string with {bad}", cypher)
            size += len(value) + 2
        elif isinstance(value, (list, tuple)):
            for v in value:
                value_ok(name, v, depth + 1)
                size += 1
        elif isinstance(value, dict):
            for k, v in value.items():
                key_ok(k, f"map key in parameter {name!r}")
                value_ok(name, v, depth + 1)
        else:
            raise QueryRejected(f"parameter {name!r} holds a {type(value).__name__}, not a JSON value", cypher)
        if size > MAX_PARAMS_CHARS:
            raise QueryRejected(f"parameters are longer than {MAX_PARAMS_CHARS} characters: send less", cypher)

    for key, value in params.items():
        key_ok(key, "parameter name")
        value_ok(key, value, 0)


def check_readonly_text(cypher: str) -> None:
    """Refuse text that must not reach the server through the read-only tool.

    Raises ``QueryRejected(reason, cypher)`` for:

    - ``LOAD CSV`` in any letter case, split by whitespace or comments, or written with
      full-width/compatibility letters (the text is NFKC-normalised first). The server runs
      ``LOAD CSV`` under ``GRAPH.RO_QUERY`` and opens the URI (``file:///etc/passwd``), so orbit
      refuses it itself; to err on the safe side this also refuses ``LOAD CSV`` spelled inside a
      string literal or a comment;
    - more than one statement: a ``;`` outside string literals, quoted names and comments that is
      followed by more Cypher (a single trailing ``;`` is fine);
    - an empty query (nothing but whitespace, comments and ``;``), or text that is not a ``str``;
    - text longer than ``MAX_QUERY_CHARS`` characters, or holding a NUL character or an unpaired
      surrogate;
    - expressions nested more than ``MAX_NESTING`` levels deep (``nesting_depth``: brackets,
      ``CASE``, chains of unary ``NOT``/``-``/``+``): FalkorDB's parser takes exponential time
      on them and its query timeout does not stop it (25 nested ``NOT`` run for minutes and
      block every query of the server).

    Returns ``None`` when the text may be sent. Writes are *not* looked for here: the server
    refuses them under ``GRAPH.RO_QUERY``.
    """
    if not isinstance(cypher, str):
        raise QueryRejected(f"query must be a string, not {type(cypher).__name__}", str(cypher))
    if len(cypher) > MAX_QUERY_CHARS:
        raise QueryRejected(
            f"query is {len(cypher)} characters long; at most {MAX_QUERY_CHARS} are accepted: "
            "write a shorter query (pass long values as parameters)", cypher)
    bad = _bad_chars(cypher)
    if bad:
        raise QueryRejected(f"query contains {bad}: remove it", cypher)
    normalised = unicodedata.normalize("NFKC", cypher)
    nsig = _significant(_lex(normalised))
    if _LOAD_CSV_RE.search(normalised) or any(
        a.upper == "LOAD" and b.upper == "CSV" for a, b in zip(nsig, nsig[1:])
    ):
        raise QueryRejected(
            "LOAD CSV is refused: the read-only query tool does not read files or URLs", cypher)
    sig = _significant(_lex(cypher))
    if not [t for t in sig if t.text != ";"]:
        raise QueryRejected("empty query: nothing to run", cypher)
    last_code = max(k for k, t in enumerate(sig) if t.text != ";")
    if any(t.kind == _PUNCT and t.text == ";" for t in sig[:last_code]):
        raise QueryRejected(
            "more than one statement: send one query at a time (a ';' is followed by more text)",
            cypher)
    depth = nesting_depth(cypher)
    if depth > MAX_NESTING:
        raise QueryRejected(
            f"query nests {depth} levels deep (brackets, CASE and chains of NOT or unary minus count); "
            f"at most {MAX_NESTING} are accepted because FalkorDB's parser slows exponentially with "
            f"nesting: {_NESTING_HINT}", cypher)


# ---------------------------------------------------------------------------------------------
# Server-side row cap.

# Output columns of FalkorDB's read procedures (4.16), in the order the server returns them: used
# to add ``YIELD … RETURN … LIMIT`` to a procedure called without ``YIELD``. Keys are lower case
# (procedure names are case-insensitive).
_PROCEDURE_OUTPUTS: dict[str, tuple[str, ...]] = {
    "db.labels": ("label",),
    "db.relationshiptypes": ("relationshipType",),
    "db.propertykeys": ("propertyKey",),
    "db.indexes": ("label", "properties", "types", "options", "language", "stopwords",
                   "entitytype", "status", "info"),
    "db.constraints": ("type", "label", "properties", "entitytype", "status"),
    "db.meta.stats": ("labels", "relTypes", "relCount", "nodeCount", "labelCount",
                      "relTypeCount", "propertyKeyCount"),
    "dbms.procedures": ("name", "mode"),
    "dbms.functions": ("name", "return_type", "arguments", "internal", "reducible",
                       "aggregation", "variable_len", "udf"),
    "db.idx.fulltext.querynodes": ("node", "score"),
    "db.idx.fulltext.queryrelationships": ("relationship", "score"),
    "db.idx.vector.querynodes": ("node", "score"),
    "db.idx.vector.queryrelationships": ("relationship", "score"),
    "algo.pagerank": ("node", "score"),
    "algo.bfs": ("nodes", "edges"),
    "algo.sppaths": ("path", "pathWeight", "pathCost"),
    "algo.sspaths": ("path", "pathWeight", "pathCost"),
    "algo.wcc": ("node", "componentId"),
    "algo.labelpropagation": ("node", "communityId"),
    "algo.betweenness": ("node", "score"),
    "algo.msf": ("edges", "nodes"),
}
# Procedures that yield nothing and write: sent unchanged so the server refuses them itself.
_WRITE_PROCEDURES = frozenset({
    "db.idx.fulltext.createnodeindex", "db.idx.fulltext.createrelationshipindex",
    "db.idx.fulltext.drop",
})

_CLAUSE_WORDS = frozenset({
    "MATCH", "OPTIONAL", "WITH", "UNWIND", "CALL", "CREATE", "MERGE", "SET", "DELETE", "DETACH",
    "REMOVE", "FOREACH", "LOAD", "RETURN", "UNION", "DROP",
})


@dataclass
class _Plan:
    executed: str
    # "limit-appended" | "limit-lowered" | "limit-kept" | "yield-return" | "wrapped" | "unchanged"
    how: str
    column_order: list[str] | None = None   # for "wrapped": the query's own column order


def _strip_tail(cypher: str) -> tuple[str, list[_Tok]]:
    """The query without trailing whitespace, comments and ``;``, and its tokens."""
    toks = _lex(cypher)
    while toks and (toks[-1].kind in (_WS, _COMMENT) or (toks[-1].kind == _PUNCT and toks[-1].text == ";")):
        toks.pop()
    return cypher[: toks[-1].end] if toks else "", toks


def _split_items(sig: list[_Tok], lo: int, hi: int, depth: int) -> list[tuple[int, int]]:
    """Index ranges ``[a, b)`` of the comma-separated items in ``sig[lo:hi]`` at ``depth``."""
    items, a = [], lo
    for k in range(lo, hi):
        if sig[k].kind == _PUNCT and sig[k].text == "," and sig[k].depth == depth:
            items.append((a, k))
            a = k + 1
    if a < hi:
        items.append((a, hi))
    return items


def _unquote(tok: _Tok) -> str:
    return tok.text[1:-1].replace("``", "`") if tok.kind == _QUOTED else tok.text


def _return_columns(text: str, sig: list[_Tok], ret: int) -> list[str] | None:
    """Column names FalkorDB gives the projection of the ``RETURN`` at ``sig[ret]``: the alias
    after ``AS``, else the item's text as written (inner comments included, as the server does)."""
    k = ret + 1
    if k < len(sig) and _keyword_at(sig, k) == "DISTINCT":
        k += 1
    end = len(sig)
    for j in range(k, len(sig)):
        if sig[j].depth == 0 and _keyword_at(sig, j) in ("ORDER", "SKIP", "LIMIT"):
            end = j
            break
    names = []
    for a, b in _split_items(sig, k, end, 0):
        if b - a >= 3 and _keyword_at(sig, b - 2) == "AS":
            names.append(_unquote(sig[b - 1]))
        else:
            names.append(text[sig[a].start: sig[b - 1].end])
    if not names or "*" in names or len(set(names)) != len(names):
        return None
    return names


def _wrap(text: str, sig: list[_Tok], cap1: int, columns: list[str] | None) -> _Plan:
    """``CALL { text } RETURN * LIMIT cap1``; a leading ``CYPHER name=value …`` parameter header
    stays in front of the subquery."""
    head = 0
    if sig and _keyword_at(sig, 0) == "CYPHER":
        for k in range(1, len(sig)):
            if sig[k].depth == 0 and _keyword_at(sig, k) in _CLAUSE_WORDS \
                    and not (k + 1 < len(sig) and sig[k + 1].text == "="):
                head = sig[k].start
                break
    return _Plan(f"{text[:head]}CALL {{\n{text[head:]}\n}}\nRETURN * LIMIT {cap1}", "wrapped", columns)


def _plan(cypher: str, cap: int) -> _Plan:
    """Decide how to send ``cypher`` so that at most ``cap + 1`` rows come back."""
    cap1 = cap + 1
    text, toks = _strip_tail(cypher)
    sig = _significant(toks)
    top = [k for k, t in enumerate(sig) if t.depth == 0 and _keyword_at(sig, k)]
    returns = [k for k in top if _keyword_at(sig, k) == "RETURN"]
    unions = [k for k in top if _keyword_at(sig, k) == "UNION"]

    if returns:
        ret = returns[-1]
        columns = _return_columns(text, sig, ret)
        after = [k for k in top if k > ret]
        if unions or any(_keyword_at(sig, k) in _CLAUSE_WORDS for k in after):
            return _wrap(text, sig, cap1, columns)
        limits = [k for k in after if _keyword_at(sig, k) == "LIMIT"]
        if not limits:
            return _Plan(f"{text} LIMIT {cap1}", "limit-appended")
        lim = limits[-1]
        if lim == len(sig) - 2 and sig[-1].kind == _WORD and sig[-1].text.isdigit() \
                and sig[-1].text.isascii():
            n = int(sig[-1].text)
            if n <= cap1:
                return _Plan(text, "limit-kept")
            return _Plan(f"{text[: sig[-1].start]}{cap1}", "limit-lowered")
        return _wrap(text, sig, cap1, columns)  # LIMIT $param, LIMIT (expr), …

    # No top-level RETURN: rows can only come from a procedure call that ends the query.
    calls = [k for k in top if _keyword_at(sig, k) == "CALL"]
    if not calls:
        return _Plan(text, "unchanged")  # an update clause or invalid text: the server refuses it
    call = calls[-1]
    k = call + 1
    name_parts = []
    while k < len(sig) and sig[k].kind in (_WORD, _QUOTED):
        name_parts.append(_unquote(sig[k]))
        if k + 1 < len(sig) and sig[k + 1].text == ".":
            k += 2
            continue
        k += 1
        break
    if not name_parts or k >= len(sig) or sig[k].text != "(":
        return _Plan(text, "unchanged")  # CALL { … } unit subquery: returns no rows
    close = next((j for j in range(k + 1, len(sig)) if sig[j].depth == 0 and sig[j].text == ")"), None)
    if close is None:
        return _Plan(text, "unchanged")  # unbalanced: the server reports the syntax error
    proc = ".".join(name_parts).lower()
    rest = sig[close + 1:]
    if not rest:
        if proc in _WRITE_PROCEDURES:
            return _Plan(text, "unchanged")
        outputs = _PROCEDURE_OUTPUTS.get(proc)
        if outputs is None:
            raise QueryRejected(
                f"orbit cannot cap the rows of procedure {'.'.join(name_parts)} called without YIELD; "
                f"name its outputs: CALL {'.'.join(name_parts)}(…) YIELD a, b RETURN a, b", cypher)
        cols = ", ".join(outputs)
        return _Plan(f"{text} YIELD {cols} RETURN {cols} LIMIT {cap1}", "yield-return")
    if _keyword_at(sig, close + 1) != "YIELD":
        return _Plan(text, "unchanged")
    end = next((j for j in range(close + 2, len(sig))
                if sig[j].depth == 0 and _keyword_at(sig, j) == "WHERE"), len(sig))
    names = []
    for a, b in _split_items(sig, close + 2, end, 0):
        if b - a == 3 and _keyword_at(sig, a + 1) == "AS":
            names.append(sig[a + 2].text)
        elif b - a == 1:
            names.append(sig[a].text)
        else:
            return _Plan(text, "unchanged")  # not a YIELD list the server accepts either
    if not names:
        return _Plan(text, "unchanged")
    cols = ", ".join(names)
    return _Plan(f"{text} RETURN {cols} LIMIT {cap1}", "yield-return")


def cap_query(cypher: str, limit: int) -> str:
    """The text orbit sends for ``cypher`` so that the server returns at most ``limit`` rows.

    ``limit`` is a row count (``run_readonly`` passes ``row_cap + 1``). See the module docstring
    for the rewrites; the result of a read query is otherwise unchanged (same rows, same order;
    trailing comments are dropped, so a last column's name no longer carries them). Raises
    ``QueryRejected`` for a procedure without ``YIELD`` whose outputs orbit does not know.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    return _plan(cypher, limit - 1).executed


# ---------------------------------------------------------------------------------------------
# The server's RESULTSET_SIZE, cached per store.

RESULTSET_SIZE_TTL_S = 30.0
_rs_cache: "weakref.WeakKeyDictionary[GraphStore, tuple[float, int | None]]" = weakref.WeakKeyDictionary()
_rs_lock = threading.Lock()


def server_resultset_size(store: GraphStore, refresh: bool = False) -> int | None:
    """The server's ``RESULTSET_SIZE`` (most rows it returns for any query; the reply carries no
    flag when it cuts). ``None`` means unlimited (the server's ``-1``) or unknown (the server does
    not allow ``GRAPH.CONFIG``). Cached per store for ``RESULTSET_SIZE_TTL_S`` seconds;
    ``refresh=True`` asks again. Raises ``FalkorDBOffline``."""
    now = time.monotonic()
    with _rs_lock:
        hit = _rs_cache.get(store)
    if hit is not None and not refresh and now - hit[0] < RESULTSET_SIZE_TTL_S:
        return hit[1]
    db = store.connect()
    try:
        value: int | None = int(db.config_get("RESULTSET_SIZE"))
    except Exception:  # noqa: BLE001 - a server that refuses GRAPH.CONFIG: limit unknown
        value = None
    if value is not None and value < 0:
        value = None
    with _rs_lock:
        _rs_cache[store] = (now, value)
    return value


def forget_resultset_size(store: GraphStore | None = None) -> None:
    """Drop the cached ``RESULTSET_SIZE`` of ``store`` (of every store when ``None``), e.g. after
    ``GRAPH.CONFIG SET RESULTSET_SIZE``."""
    with _rs_lock:
        if store is None:
            _rs_cache.clear()
        else:
            _rs_cache.pop(store, None)


# ---------------------------------------------------------------------------------------------
# Results.

def _jsonable(value: Any) -> Any:
    """A JSON-friendly copy of a value decoded by falkordb-py (nodes, edges, paths, maps…)."""
    from falkordb.edge import Edge
    from falkordb.node import Node
    from falkordb.path import Path as FPath

    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, Node):
        return {"id": value.id, "labels": list(value.labels or []),
                "properties": _jsonable(value.properties)}
    if isinstance(value, Edge):
        def end(x):
            return x.id if isinstance(x, Node) else x
        return {"id": value.id, "type": value.relation, "src": end(value.src_node),
                "dst": end(value.dest_node), "properties": _jsonable(value.properties)}
    if isinstance(value, FPath):
        return {"nodes": [_jsonable(n) for n in value.nodes()],
                "edges": [_jsonable(e) for e in value.edges()]}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


@dataclass
class ReadOnlyResult:
    """Rows of one model-written read-only query.

    - ``rows``: at most ``row_cap`` rows, each a list of values in ``header`` order (as decoded by
      falkordb-py: nodes, edges and paths are falkordb objects; ``to_dict`` converts them).
    - ``cypher``: the text as written; ``executed``: the text actually sent (with its ``LIMIT``).
    - ``truncated``: more rows existed than were returned — or may have: the server's
      ``RESULTSET_SIZE`` limit was reached (``server_limit`` then holds it).
    - ``row_cap``: the cap applied; ``elapsed_ms``: wall time of the round trip, milliseconds.
    """

    rows: list[list]
    header: list[str]
    cypher: str
    executed: str
    truncated: bool
    row_cap: int
    elapsed_ms: float
    server_limit: int | None = field(default=None)

    @property
    def note(self) -> str:
        """One sentence on completeness, for the agent and the user."""
        n = len(self.rows)
        if self.server_limit is not None:
            return (f"May be incomplete: the FalkorDB server returns at most {self.server_limit} rows "
                    f"(RESULTSET_SIZE) and cut this result silently; {n} rows shown. Do not present "
                    f"them as all results; use count(*) for a total.")
        if self.truncated:
            return (f"Truncated: the query has more than {self.row_cap} rows; only the first {n} are "
                    f"shown. Do not present them as all results; use count(*) for a total.")
        return f"Complete: all {n} rows returned."

    def to_dict(self) -> dict:
        """JSON-friendly form: ``header``, ``rows`` (nodes as ``{id, labels, properties}``, edges
        as ``{id, type, src, dst, properties}``, paths as ``{nodes, edges}``), ``rows_returned``,
        ``row_cap``, ``truncated``, ``note``, ``cypher``, ``executed``, ``elapsed_ms``."""
        return {
            "cypher": self.cypher,
            "executed": self.executed,
            "header": list(self.header),
            "rows": [_jsonable(r) for r in self.rows],
            "rows_returned": len(self.rows),
            "row_cap": self.row_cap,
            "truncated": self.truncated,
            "note": self.note,
            "elapsed_ms": round(self.elapsed_ms, 3),
        }


# ---------------------------------------------------------------------------------------------

def run_readonly(graph: Graph, cypher: str, params: dict | None = None, *,
                 row_cap: int | None = None, timeout_ms: int | None = None) -> ReadOnlyResult:
    """Run model-written ``cypher`` on ``graph`` read-only, capped and with a timeout.

    ``params`` are Cypher parameters (``$name``). ``row_cap`` (default ``Settings.row_cap``) is
    the most rows returned; the server is asked for ``row_cap + 1`` and never sends more.
    ``timeout_ms`` (default ``Settings.query_timeout_ms``) is the server-side execution timeout in
    milliseconds. The query is sent once, with ``GRAPH.RO_QUERY``.

    Raises ``QueryRejected`` (``.query`` = ``cypher``; the message gives the reason: orbit's own
    checks ``check_readonly_text`` and ``check_params``, or the server's refusal of a write or a
    syntax error), ``QueryTimeout`` (not retried)
    and ``FalkorDBOffline``; ``ValueError`` for a ``row_cap``/``timeout_ms`` below 1.
    """
    settings = graph.store.settings
    cap = settings.row_cap if row_cap is None else int(row_cap)
    timeout = settings.query_timeout_ms if timeout_ms is None else int(timeout_ms)
    if cap < 1:
        raise ValueError("row_cap must be at least 1")
    if timeout < 1:
        raise ValueError("timeout_ms must be at least 1")
    check_readonly_text(cypher)
    check_params(params, cypher)
    plan = _plan(cypher, cap)

    t0 = time.perf_counter()
    try:
        res = graph.ro_query(plan.executed, params, timeout_ms=timeout)
    except QueryTimeout as exc:
        raise QueryTimeout(
            f"read-only query stopped at its {timeout} ms timeout (not retried): narrow the MATCH "
            f"pattern, anchor it on an indexed property, or lower the variable-length hops") from exc
    except QueryRejected as exc:
        reason = str(exc)
        if "read-only" not in reason.lower():  # a syntax or semantic error, not a refusal
            raise QueryInvalid.from_server(reason, cypher) from exc
        raise QueryRejected(f"refused by FalkorDB, the query tool is read-only: {reason}", cypher) from exc
    elapsed = (time.perf_counter() - t0) * 1000.0

    rows, header = list(res.rows), list(res.header)
    if plan.column_order and sorted(plan.column_order) == sorted(header) and plan.column_order != header:
        idx = [header.index(c) for c in plan.column_order]
        rows = [[row[i] for i in idx] for row in rows]
        header = list(plan.column_order)

    truncated = len(rows) > cap
    rows = rows[:cap]
    server_limit = None
    if not truncated:
        limit = server_resultset_size(graph.store)
        if limit is not None and len(res.rows) >= limit:
            truncated, server_limit = True, limit
    return ReadOnlyResult(rows=rows, header=header, cypher=cypher, executed=plan.executed,
                          truncated=truncated, row_cap=cap, elapsed_ms=elapsed,
                          server_limit=server_limit)
