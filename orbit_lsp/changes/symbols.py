"""From file diffs to changed symbols: every hunk mapped to the innermost symbols whose lines it
touches, in the old and in the new version of its file, and the symbols added, removed and
renamed.

Symbols are what the indexer extracts (``languages.parse_file``: Python's ``ast``, tree-sitter
for JS/TS): modules, classes, functions and methods (variables are statements of their module or
class). A line that belongs to no function or method counts as a change of its class (class
body) or module (imports, module-level statements). A lambda's lines belong to the function around it (its name holds its line number, so a
line added above it would otherwise rename it). Decorator lines belong to what they
decorate. Blank lines never count.

Identity is the workspace-wide qualified name (``py_edges.full_qual``: ``pkg.mod.Class.method``,
``path#Class.method`` for JS/TS) plus the file: the graph's identity of a symbol.
"""

from __future__ import annotations

import ast
import difflib
import io
import tokenize
from dataclasses import dataclass, field

from orbit_lsp.changes.broken import parse_cached
from orbit_lsp.changes.diff import Change, FileDiff
from orbit_lsp.index.languages import PARSED_LANGS, parse_file
from orbit_lsp.index.py_edges import full_qual
from orbit_lsp.index.walk import LANGS
from orbit_lsp.lru import LRU
from orbit_lsp.index.fingerprint import content_digest

SPAN_KINDS = frozenset({"module", "class", "function", "method"})
RENAME_MIN_RATIO = 0.6  # body similarity above which a removed and an added symbol are one renamed


@dataclass
class Sym:
    """A symbol of one version of a file: ``qual`` in-file (``""`` for the module), ``full`` the
    workspace qualified name, ``line``..``end_line`` its span (1-based, decorators included)."""

    file: str
    qual: str
    full: str
    name: str
    kind: str
    line: int
    end_line: int
    text: str = ""

    def brief(self) -> dict:
        return {"qual": self.full, "name": self.name, "kind": self.kind, "file": self.file,
                "line": self.line, "end_line": self.end_line}


@dataclass
class Version:
    """One version of one file: its symbols (None: not a parsed language, or unreadable) and
    the syntax error its parse reported, if any."""

    path: str
    symbols: list[Sym] | None
    error: str | None = None
    lines: list[str] = field(default_factory=list)

    def innermost(self, line: int) -> Sym | None:
        best = None
        for s in self.symbols or ():
            if s.line <= line <= s.end_line and (best is None or (s.line, -s.end_line) >= (best.line, -best.end_line)):
                best = s
        return best

    def by_qual(self) -> dict[str, Sym]:
        out: dict[str, Sym] = {}
        for s in self.symbols or ():
            out.setdefault(s.qual, s)  # a redefinition (overload, setter) is the symbol's second span
        return out


@dataclass
class SymbolChanges:
    """What a change does to symbols.

    ``files``: [{"path", "old_path", "status", "lang", "hunks", "parse_error"}];
    ``symbols``: [{"qual", "name", "kind", "file", "line", "end_line", "status":
    modified|added|removed|renamed, "old_qual", "old_file", "old_line"}] (old_* for removed and
    renamed symbols, and modified ones that moved with their file);
    ``hunks``: [{"file", "old_file", "old": [start, len], "new": [start, len], "old_symbols":
    [qual], "new_symbols": [qual]}]."""

    files: list[dict] = field(default_factory=list)
    symbols: list[dict] = field(default_factory=list)
    hunks: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    comment_only: list[str] = field(default_factory=list)  # paths whose change touches no code


# tokens that carry no code: what a comment-only or whitespace-only edit changes
_NON_CODE = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER})
_LAYOUT = frozenset({tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT})  # compared by kind only


def python_tokens(data: bytes) -> list[tokenize.TokenInfo] | None:
    """The tokens of Python source (None when it does not tokenize: a syntax error)."""
    try:
        return list(tokenize.tokenize(io.BytesIO(data).readline))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None


def same_code(old: list[tokenize.TokenInfo], new: list[tokenize.TokenInfo]) -> bool:
    """Whether two token streams are the same program: equal once comments, blank lines and
    the width of indentation and spacing are set aside (a docstring is a string: code)."""
    def key(toks):
        return [(t.type, "" if t.type in _LAYOUT else t.string) for t in toks if t.type not in _NON_CODE]
    return key(old) == key(new)


def _may_touch_no_code(fd: FileDiff) -> bool:
    """Whether some hunk of ``fd`` may change no code (then the tokens are compared): a line
    with a ``#``, or lines that differ in spacing only. A hunk with neither changes code."""
    for hk in fd.hunks:
        if any("#" in t for t in hk.removed_text) or any("#" in t for t in hk.added_text):
            return True
        squash = lambda lines: ["".join(t.split()) for t in lines if t.strip()]  # noqa: E731
        if squash(hk.removed_text) == squash(hk.added_text):
            return True
    return False


def code_lines(tokens: list[tokenize.TokenInfo]) -> set[int]:
    """The 1-based lines holding code: every line a token other than a comment or a line break
    starts on or spans (a multi-line string's lines included)."""
    out: set[int] = set()
    for t in tokens:
        if t.type in _NON_CODE or t.type in _LAYOUT:
            continue
        out.update(range(t.start[0], t.end[0] + 1))
    return out


def lang_of(path: str) -> str | None:
    """The indexed language of a path, by extension (None: not a source file orbit parses)."""
    lang = LANGS.get("." + path.rsplit(".", 1)[-1].lower()) if "." in path else None
    return lang if lang in PARSED_LANGS else None


VERSIONS = LRU(256)  # (path, content digest, root package) -> Version: the base version repeats


def read_version(path: str | None, data: bytes | None, root_package: str) -> Version | None:
    """Parse one version of a file; None when that version does not exist. Kept per content
    (``VERSIONS``; a ``Version`` is never changed once made)."""
    if path is None or data is None:
        return None
    key = (path, content_digest(data), root_package)
    found, got = VERSIONS.lookup(key)
    if not found:
        got = _read_version(path, data, root_package)
        VERSIONS.put(key, got)
    return got


def _read_version(path: str, data: bytes, root_package: str) -> Version:
    if lang_of(path) is None:
        return Version(path, None)
    facts, error = parse_file(path, data)
    text = data.decode("utf-8", "replace").splitlines()
    if facts is None:
        return Version(path, None, error, text)
    syms = []
    for s in facts.symbols:
        if s.kind not in SPAN_KINDS or s.name.startswith("<"):
            continue  # a lambda (``f.<lambda@12>``, named by its line) is a line of its function
        start = s.line
        if s.kind != "module":  # decorators above the definition belong to it
            while start > 1 and text[start - 2].lstrip().startswith("@"):
                start -= 1
        end = max(s.end_line, start)
        syms.append(Sym(path, s.qual, full_qual(path, s.qual, root_package), s.name, s.kind, start, end,
                        "\n".join(text[start - 1:end])))
    if path.endswith((".py", ".pyi")):
        syms += _redefinitions(data, syms)
    if not any(s.kind == "module" for s in syms):  # a module always spans its file
        syms.append(Sym(path, "", full_qual(path, "", root_package), path.rsplit("/", 1)[-1], "module", 1,
                        max(len(text), 1)))
    return Version(path, syms, error, text)


def _redefinitions(data: bytes, syms: list[Sym]) -> list[Sym]:
    """Extra spans for functions defined again under the same qualified name (``@overload``
    stubs then the implementation, a property's ``@x.setter``): the graph keeps the first
    definition only, but a line of a later one is a line of that symbol too."""
    by_qual = {s.qual: s for s in syms}
    seen_lines = {(s.qual, s.line) for s in syms}
    tree = parse_cached(data)
    if tree is None:
        return []
    out = []
    todo = [(n, "") for n in tree.body]
    while todo:
        node, prefix = todo.pop()
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        qual = f"{prefix}.{node.name}" if prefix else node.name
        first = min([d.lineno for d in node.decorator_list] + [node.lineno])
        known = by_qual.get(qual)
        if known is not None and known.line != first and (qual, first) not in seen_lines \
                and not (known.line <= first <= known.end_line):
            seen_lines.add((qual, first))
            out.append(Sym(known.file, qual, known.full, known.name, known.kind, first, node.end_lineno or first,
                           known.text))
        todo += [(n, qual) for n in node.body]
    return out


def _body(sym: Sym) -> str:
    """A symbol's text with its own name blanked (a renamed function keeps its body)."""
    return sym.text.replace(sym.name, "\0")


def symbol_changes(change: Change, root_package: str = "") -> tuple[SymbolChanges, dict[str, Version]]:
    """Map ``change`` to symbols. Returns the ``SymbolChanges`` and the new versions parsed
    (path -> ``Version``; used to find tests in changed files)."""
    out = SymbolChanges()
    new_versions: dict[str, Version] = {}
    seen: set[tuple[str, str]] = set()
    for fd in sorted(change.files, key=lambda f: f.path):
        old = read_version(fd.old_path, change.old_bytes(fd.old_path) if fd.old_path else None, root_package)
        new = read_version(fd.new_path, change.new_bytes(fd.new_path) if fd.new_path else None, root_package)
        if new is not None:
            new_versions[new.path] = new
        lang = lang_of(fd.path)
        out.files.append({"path": fd.path, "old_path": fd.old_path, "status": fd.status, "lang": lang,
                          "hunks": len(fd.hunks), "parse_error": new.error if new else None})
        if new is not None and new.error and lang:
            out.notes.append(f"{fd.path} has a syntax error ({new.error}); its symbols are the parse's best effort"
                             if new.symbols else f"{fd.path} does not parse ({new.error}); only its file is reported")
        if lang is None or any(v is not None and v.symbols is None for v in (old, new)):
            continue  # not parsed, or a version that does not parse: the file alone is reported
        code = None  # Python: the lines holding code in each version (comments never count)
        if lang == "python" and old is not None and new is not None and _may_touch_no_code(fd):
            old_toks = python_tokens(change.old_bytes(fd.old_path) or b"")
            new_toks = python_tokens(change.new_bytes(fd.new_path) or b"")
            if old_toks is not None and new_toks is not None:
                if fd.status == "modified" and same_code(old_toks, new_toks):
                    out.files.pop()
                    out.comment_only.append(fd.path)
                    continue
                code = (code_lines(old_toks), code_lines(new_toks))
        _file_symbols(fd, old, new, out, seen, code)
    out.symbols.sort(key=lambda s: (s["file"], s["line"] or 0, s["qual"]))
    return out, new_versions


def _file_symbols(fd: FileDiff, old: Version | None, new: Version | None, out: SymbolChanges,
                  seen: set[tuple[str, str]], code: tuple[set[int], set[int]] | None = None) -> None:
    """``code``: the lines holding code in the old and the new version; hunk lines outside
    them (comments) touch no symbol."""
    old_q = old.by_qual() if old and old.symbols is not None else {}
    new_q = new.by_qual() if new and new.symbols is not None else {}
    touched_old: set[str] = set()
    touched_new: set[str] = set()
    for hk in fd.hunks:
        removed = [x for x in hk.removed if x in code[0]] if code else hk.removed
        added = [x for x in hk.added if x in code[1]] if code else hk.added
        o = sorted({s.qual for s in (old.innermost(n) if old else None for n in removed) if s}) if old else []
        n = sorted({s.qual for s in (new.innermost(m) if new else None for m in added) if s}) if new else []
        # a pure deletion changes, in the new version, the symbols it was cut from
        n = sorted(set(n) | {q for q in o if q in new_q}) if not added else n
        touched_old.update(o)
        touched_new.update(n)
        if o or n:
            out.hunks.append({"file": fd.path, "old_file": fd.old_path, "old": list(hk.old), "new": list(hk.new),
                              "old_symbols": [old_q[q].full for q in o], "new_symbols": [new_q[q].full for q in n]})
    added = [q for q in new_q if q not in old_q]
    removed = [q for q in old_q if q not in new_q]
    renames = _pair_renames([old_q[q] for q in removed], [new_q[q] for q in added])
    for o_sym, n_sym in renames:
        removed.remove(o_sym.qual)
        added.remove(n_sym.qual)

    def put(sym: Sym, status: str, before: Sym | None = None) -> None:
        key = (sym.file, sym.full)
        if key in seen:
            return
        seen.add(key)
        row = {**sym.brief(), "status": status}
        if before is not None and (before.full != sym.full or before.file != sym.file or status != "modified"):
            row.update({"old_qual": before.full, "old_file": before.file, "old_line": before.line})
        out.symbols.append(row)

    for q in sorted(added, key=lambda q: new_q[q].line):
        put(new_q[q], "added")
    for o_sym, n_sym in renames:
        put(n_sym, "renamed", o_sym)
    for q in sorted(removed, key=lambda q: old_q[q].line):
        sym = old_q[q]
        out.symbols.append({**sym.brief(), "status": "removed", "line": None, "end_line": None,
                            "old_qual": sym.full, "old_file": sym.file, "old_line": sym.line})
    renamed_new = {n.qual for _, n in renames}
    for q in sorted((touched_old | touched_new) & set(new_q) & set(old_q), key=lambda q: new_q[q].line):
        if q not in renamed_new:
            put(new_q[q], "modified", old_q[q])


def _pair_renames(removed: list[Sym], added: list[Sym]) -> list[tuple[Sym, Sym]]:
    """Removed/added pairs of one kind and one enclosing scope whose bodies (names blanked) are
    at least ``RENAME_MIN_RATIO`` similar; best pairs first."""
    cands = []
    for o in removed:
        if o.kind == "module":
            continue
        for n in added:
            if n.kind != o.kind or o.qual.rpartition(".")[0] != n.qual.rpartition(".")[0]:
                continue
            ratio = difflib.SequenceMatcher(None, _body(o), _body(n), autojunk=False).ratio()
            if ratio >= RENAME_MIN_RATIO:
                cands.append((-ratio, o.line, n.line, o, n))
    cands.sort(key=lambda c: c[:3])
    used_o, used_n, pairs = set(), set(), []
    for _, _, _, o, n in cands:
        if o.qual in used_o or n.qual in used_n:
            continue
        used_o.add(o.qual)
        used_n.add(n.qual)
        pairs.append((o, n))
    return pairs
