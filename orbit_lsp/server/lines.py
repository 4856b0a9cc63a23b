"""Lines of documents and files, and conversions between graph and LSP positions.

Graph positions are (1-based line, UTF-8 byte column), as ``ast`` gives them; LSP positions are
(0-based line, column in code units of the negotiated position encoding: UTF-16 for VS Code,
UTF-8 or UTF-32 for others). Lines are split at ``\\n``, ``\\r\\n`` and ``\\r`` only — the ends
LSP and Python's tokenizer count — never at the form feeds, ``\\x1c``-``\\x1e``, ``\\x85`` or
U+2028/9 that ``str.splitlines`` also breaks at (they would shift every later line).

- ``split_lines``: lines keeping their ends (pygls documents);
- ``Lines``: the line texts of one version of one file, with the conversions;
- ``FileLines``: a process-wide, size-bounded LRU of the lines of files on disk, each entry
  checked against the file's ``(mtime_ns, size)`` before use, so a call hierarchy touching a
  hundred caller files reads each once, not once per request;
- ``LineCache``: per request, the lines the client sees: the open document when there is one,
  else the file on disk (through ``FileLines``).
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

from lsprotocol import types

from orbit_lsp.index.walk import read_regular_file

LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE_END = re.compile(r"(?<=\r\n)|(?<=\r)(?!\n)|(?<=\n)")


def line_texts(text: str) -> list[str]:
    """The texts of ``text``'s lines, their ends (``\r\n``, ``\r``, ``\n``) removed. Text
    without a ``\r`` is split by ``str.split``, five times faster than the regular expression."""
    return text.split("\n") if "\r" not in text else LINE_BREAK.split(text)


def split_lines(text: str) -> list[str]:
    """Lines as LSP and Python's tokenizer count them, each keeping its end."""
    parts = _LINE_END.split(text)
    return parts[:-1] if parts and parts[-1] == "" else parts


class Lines:
    """The line texts (ends removed) of one version of a file, and position conversions in the
    encoding of ``codec`` (pygls's ``PositionCodec``). ASCII lines, nearly all of them in
    practice, convert without encoding anything: a byte is a code unit in every encoding."""

    __slots__ = ("texts", "codec")

    def __init__(self, texts: list[str], codec: Any):
        self.texts = texts
        self.codec = codec

    @classmethod
    def of(cls, text: str, codec: Any) -> "Lines":
        return cls(line_texts(text), codec)

    def line(self, line0: int) -> str:
        """Text of 0-based line ``line0`` ("" past the end)."""
        return self.texts[line0] if 0 <= line0 < len(self.texts) else ""

    def count(self) -> int:
        """Number of lines (a final line break does not start another line)."""
        n = len(self.texts)
        return n - 1 if n and self.texts[-1] == "" else n

    def units(self, text: str) -> int:
        """Length of ``text`` in code units of the negotiated encoding."""
        return len(text) if text.isascii() else self.codec.client_num_units(text)

    def character(self, line1: int, byte_col: int) -> int:
        """LSP character (code units of the negotiated encoding) of a graph position on its
        line (a column past the line's end: its end)."""
        text = self.line(line1 - 1)
        byte_col = max(0, byte_col)
        if text.isascii():
            return min(byte_col, len(text))
        prefix = text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore")
        return self.codec.client_num_units(prefix)

    def position(self, line1: int, byte_col: int) -> types.Position:
        """LSP position of a graph position (a column past the line's end: its end)."""
        return types.Position(line=max(0, line1 - 1), character=self.character(line1, byte_col))

    def name_range(self, line1: int, byte_col: int, name: str) -> types.Range:
        """Range of identifier ``name`` starting at a graph position."""
        start = self.position(line1, byte_col)
        return types.Range(start, types.Position(start.line, start.character + self.units(name)))

    def line_end(self, line1: int) -> types.Position:
        """End of 1-based line ``line1``."""
        return types.Position(line=max(0, line1 - 1), character=self.units(self.line(line1 - 1)))

    def line_range(self, line1: int) -> types.Range:
        """The whole of 1-based line ``line1`` (clamped to the last line)."""
        n = self.count()
        if n and line1 > n:
            line1 = n
        line1 = max(1, line1)
        return types.Range(types.Position(line1 - 1, 0), self.line_end(line1))

    def char_index(self, pos: types.Position) -> int:
        """Code-point index in its line of an LSP position (clamped to the line's end)."""
        text = self.line(pos.line)
        if text.isascii():
            return min(max(0, pos.character), len(text))
        n = 0
        units = self.codec.client_num_units
        for i, c in enumerate(text):
            if n >= pos.character:
                return i
            n += units(c)
        return len(text)

    def graph_position(self, pos: types.Position) -> tuple[int, int]:
        """(1-based line, UTF-8 byte column) of an LSP position; a character past the end of the
        line means the end of the line."""
        text = self.line(pos.line)
        return pos.line + 1, len(text[:self.char_index(pos)].encode("utf-8"))

    def word_range(self, pos: types.Position) -> types.Range | None:
        """Range of the identifier under ``pos`` (None on whitespace, punctuation, past the end)."""
        text = self.line(pos.line)
        i = self.char_index(pos)
        is_word = lambda c: c.isalnum() or c == "_"  # noqa: E731
        if i >= len(text) or not is_word(text[i]):
            return None
        a = i
        while a > 0 and is_word(text[a - 1]):
            a -= 1
        b = i
        while b < len(text) and is_word(text[b]):
            b += 1
        return types.Range(types.Position(pos.line, self.units(text[:a])), types.Position(pos.line, self.units(text[:b])))


class FileLines:
    """Line texts of files on disk, cached: at most ``budget_chars`` characters in all, least
    recently used first out. An entry is used only while the file's ``(mtime_ns, size)`` is
    unchanged (one ``stat`` per use). Unreadable files have no lines. Thread-safe."""

    def __init__(self, budget_chars: int = 16_000_000):
        self.budget = budget_chars
        self._used = 0
        self._entries: OrderedDict[str, tuple[tuple[int, int], list[str], int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: Path | str) -> list[str]:
        key = os.fspath(path)
        try:
            st = os.stat(key)
        except OSError:
            return []
        stamp = (st.st_mtime_ns, st.st_size)
        with self._lock:
            got = self._entries.get(key)
            if got is not None and got[0] == stamp:
                self._entries.move_to_end(key)
                return got[1]
        try:
            text = read_regular_file(key).decode("utf-8", errors="replace")  # never a FIFO or device
        except OSError:
            return []
        texts = line_texts(text)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._used -= old[2]
            if len(text) <= self.budget:
                self._entries[key] = (stamp, texts, len(text))
                self._used += len(text)
                while self._used > self.budget and self._entries:
                    _, (_, _, size) = self._entries.popitem(last=False)
                    self._used -= size
        return texts

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._used = 0


FILE_LINES = FileLines()


class AsciiLines:
    """Position conversion for a file whose indexed content is ASCII but for ``nonascii``
    (1-based line numbers), without reading it: on an ASCII line a byte column is the
    character in every encoding (not clamped to the line's end: there is no line). The text is
    read (``load()``, once) only for a position on one of the other lines."""

    __slots__ = ("nonascii", "load", "_lines")

    def __init__(self, nonascii: frozenset[int], load: Callable[[], Lines] | None = None):
        self.nonascii = nonascii
        self.load = load
        self._lines: Lines | None = None

    def _read(self) -> Lines:
        if self._lines is None:
            self._lines = self.load() if self.load is not None else Lines([], None)
        return self._lines

    def character(self, line1: int, byte_col: int) -> int:
        if line1 in self.nonascii:
            return self._read().character(line1, byte_col)
        return max(0, byte_col)

    def units(self, text: str) -> int:
        return len(text) if text.isascii() else self._read().units(text)


ASCII_LINES = AsciiLines(frozenset())  # an all-ASCII file


class LineCache:
    """The lines the client sees, for the files of one request: ``open_text(path)`` (the open
    document's text, or None) first, else the file on disk. Each file is looked up once per
    request, so one answer is converted against one version of each file."""

    def __init__(self, codec: Any, open_text: Callable[[Path], str | None],
                 may_read: Callable[[Path], bool] | None = None):
        self.codec = codec
        self.open_text = open_text
        self.may_read = may_read  # False: the file is never opened (no lines), e.g. a .env file
        self.files: dict[Path, Lines] = {}
        self.partial: dict[Path, AsciiLines] = {}  # files not read (``of(path, nonascii)``)

    def of(self, path: Path, nonascii: frozenset[int] | None = None) -> Lines | AsciiLines:
        """The lines of ``path``. ``nonascii``: the lines of its indexed content that are not
        ASCII (``WorkspaceIndexer.nonascii_lines``); unless the client has it open, positions
        on its other lines are then converted without reading it (``AsciiLines``: only
        ``character`` and ``units``; never kept here, so a later ``of(path)`` gets the file's
        lines)."""
        got = self.files.get(path)
        if got is None:
            text = self.open_text(path)
            if text is not None:
                got = Lines.of(text, self.codec)
            elif nonascii is not None:
                if not nonascii:
                    return ASCII_LINES
                part = self.partial.get(path)
                if part is None:
                    part = self.partial[path] = AsciiLines(nonascii, lambda: Lines(self._disk(path), self.codec))
                return part
            else:
                got = Lines(self._disk(path), self.codec)
            self.files[path] = got
        return got

    def _disk(self, path: Path) -> list[str]:
        if self.may_read is not None and not self.may_read(path):
            return []
        return FILE_LINES.get(path)

    # shorthands taking the path first
    def position(self, path: Path, line1: int, byte_col: int) -> types.Position:
        return self.of(path).position(line1, byte_col)

    def name_range(self, path: Path, line1: int, byte_col: int, name: str) -> types.Range:
        return self.of(path).name_range(line1, byte_col, name)

    def line_range(self, path: Path, line1: int) -> types.Range:
        return self.of(path).line_range(line1)

    def graph_position(self, path: Path, pos: types.Position) -> tuple[int, int]:
        return self.of(path).graph_position(pos)
