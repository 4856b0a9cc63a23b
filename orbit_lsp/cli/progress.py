"""Indexing progress on stderr: a bar on a terminal, a few plain lines otherwise.

The indexer reports its phases (``orbit_lsp.index.progress.PHASES``: read, parse, resolve,
write), each counting from 0 to its own total, so the bar never sits at 100 % while work remains.
Once the index has run long enough to tell (``index.progress.PhaseClock``), the bar and the
lines also say about how long the whole index has left.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable

from orbit_lsp.index.progress import WORDS as PHASE_WORDS  # noqa: F401 (re-exported)
from orbit_lsp.index.progress import PhaseClock, eta_text, words

QUARTERS_FROM = 1000  # without a terminal: 25/50/75 % lines only for a phase this long


class ProgressBar:
    """A phase-aware indexing progress callback (``phases`` is true, see
    ``orbit_lsp.index.indexer.report_progress``): on a TTY one bar redrawn in place,
    ``LABEL  parsing   [#####...] 300/1790 · about 40 s left path``; otherwise a line when a phase
    starts and when it ends, and at each quarter of a long one (``(50%, about 40 s left)``).
    ``on_start(total)`` runs once, at the first report (the walk is over then and ``total`` is
    the number of files). ``clock``: monotonic seconds (tests pass a fake one)."""

    phases = True

    def __init__(self, label: str, stream=None, on_start: Callable[[int], None] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream or sys.stderr
        self.label = label
        self.on_start = on_start
        try:
            self.tty = self.stream.isatty()
        except (AttributeError, ValueError):
            self.tty = False
        self.phase: str | None = None
        self.next_quarter = 1
        self.drawn = False
        self.clock = PhaseClock(clock)

    def __call__(self, done: int, total: int, rel: str, phase: str = "read", work: float | None = None) -> None:
        if self.on_start is not None:
            start, self.on_start = self.on_start, None
            start(total)
        word, unit = words(phase)
        self.clock.update(done, total, phase, work)
        left = eta_text(self.clock.eta())
        new_phase = phase != self.phase
        if new_phase:
            self.phase, self.next_quarter = phase, 1
        if self.tty:
            cols = shutil.get_terminal_size((80, 20)).columns
            width = 24
            filled = int(width * done / total) if total else width
            head = f"{self.label}  {word:<9} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
            if left:
                head += f"· {left} "
            room = max(0, cols - len(head) - 1)
            tail = rel if len(rel) <= room else ("…" + rel[-(room - 1):] if room > 1 else "")
            self.stream.write("\r" + head + tail + "\x1b[K")
            self.stream.flush()
            self.drawn = True
            return
        if new_phase:
            print(f"{self.label}: {word} {total} {unit}" + (f" ({left})" if left else ""), file=self.stream)
        if total:
            pct = 100 * done // total
            crossed = None
            while self.next_quarter <= 4 and pct >= self.next_quarter * 25:
                crossed = self.next_quarter * 25
                self.next_quarter += 1
            if crossed == 100 or (crossed is not None and total >= QUARTERS_FROM):
                print(f"{self.label}: {word} {done}/{total} ({crossed}%" + (f", {left}" if left and crossed < 100 else "")
                      + ")", file=self.stream)
        self.stream.flush()

    def finish(self) -> None:
        if self.tty and self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
