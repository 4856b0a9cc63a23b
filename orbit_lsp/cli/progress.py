"""Indexing progress on stderr: a bar on a terminal, a few plain lines otherwise."""

from __future__ import annotations

import shutil
import sys


class ProgressBar:
    """A progress bar on a TTY stderr; otherwise a few plain lines (start, quarters, end)."""

    def __init__(self, label: str, stream=None):
        self.stream = stream or sys.stderr
        self.label = label
        try:
            self.tty = self.stream.isatty()
        except (AttributeError, ValueError):
            self.tty = False
        self.next_quarter = 1
        self.started = False
        self.drawn = False

    def __call__(self, done: int, total: int, rel: str) -> None:
        if self.tty:
            cols = shutil.get_terminal_size((80, 20)).columns
            width = 24
            filled = int(width * done / total) if total else width
            head = f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
            room = max(0, cols - len(head) - 1)
            tail = rel if len(rel) <= room else ("…" + rel[-(room - 1):] if room > 1 else "")
            self.stream.write("\r" + head + tail + "\x1b[K")
            self.stream.flush()
            self.drawn = True
            return
        if not self.started:
            print(f"{self.label}: {total} files", file=self.stream)
            self.started = True
        pct = 100 * done // total if total else 100
        crossed = None
        while self.next_quarter <= 4 and pct >= self.next_quarter * 25:
            crossed = self.next_quarter * 25
            self.next_quarter += 1
        if crossed is not None:
            print(f"{self.label}: {done}/{total} ({crossed}%)", file=self.stream)
        self.stream.flush()

    def finish(self) -> None:
        if self.tty and self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
