"""Progress of an index as a whole: its phases, the share of the work done, the time left.

The indexer reports each phase (``PHASES``) counting from 0 to its own total (see
``indexer.report_progress``), with the share of the phase's work done when it is not in
proportion to that count (parsing: bytes; its files are of every size, and this process parses
the small ones while worker processes take the large ones). ``PhaseClock`` turns those reports
into one fraction of the whole index that only grows (each phase weighs its typical share of a
cold index, ``WEIGHTS``, measured on the standard library and Django: reading is part of
parsing's time, writes overlap resolution) and an estimate of the seconds left, from the rate
of the phase under way for the rest of it and from the time the finished work took per unit of
weight for the phases to come.
Front ends (the command line's bar, the language server's ``$/progress``) word it with
``words`` and ``eta_text``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

PHASES = ("read", "parse", "resolve", "write")
WEIGHTS = {"read": 0.05, "parse": 0.45, "resolve": 0.35, "write": 0.15}
# ``check``: the files of a folder whose graph and cache agree (a re-open), compared with what
# was indexed (``read`` stands for it in ``PHASES``). It has no weight and no estimate: the work
# after it is only that of the files found changed, unknown until it ends.
UNWEIGHED = frozenset({"check"})
# phase -> (what a line says, unit of its count)
WORDS = {"read": ("reading", "files"), "check": ("checking", "files"), "parse": ("parsing", "files"),
         "resolve": ("resolving", "files"), "write": ("writing", "batches")}
MIN_ELAPSED_S = 2.0  # no estimate before this much time went into the index
MIN_FRACTION = 0.02  # nor before this share of it is done


def words(phase: str) -> tuple[str, str]:
    """(verb, unit) of ``phase``: ``("parsing", "files")``."""
    return WORDS.get(phase, (phase, "steps"))


class PhaseClock:
    """Feed it every progress report (``update``); ask ``fraction`` (0..1) and ``eta`` (seconds
    left, or None while too little is known). ``clock``: a monotonic clock in seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.start: float | None = None
        self.phase: str | None = None
        self.done = 0
        self.total = 0
        self.work: float | None = None
        self.phase_start = 0.0
        self._finished_weight = 0.0  # weight of the phases finished before this one
        self._floor = 0.0  # the fraction never goes back

    def update(self, done: int, total: int, phase: str = "read", work: float | None = None) -> None:
        """One progress report: ``done`` of ``total`` in ``phase``; ``work``: the share of the
        phase's work done (0..1), when the count is not in proportion to it."""
        now = self.clock()
        if self.start is None:
            self.start = now
        if phase != self.phase:
            if self.phase is not None:
                self._finished_weight = self._weight_before(phase)
            if self.phase in UNWEIGHED:
                self.start = now  # the rates of the work after it are its own
            self.phase, self.phase_start = phase, now
        self.done, self.total, self.work = done, total, work

    def _weight_before(self, phase: str) -> float:
        if phase not in PHASES:
            return self._finished_weight
        return sum(WEIGHTS[p] for p in PHASES[:PHASES.index(phase)])

    @property
    def phase_fraction(self) -> float:
        """Share of the phase under way done: its ``work`` when reported, else its count's."""
        if self.work is not None:
            return min(1.0, max(0.0, self.work))
        return min(1.0, self.done / self.total) if self.total else 1.0

    @property
    def fraction(self) -> float:
        """Share of the whole index done, 0..1, never decreasing."""
        if self.phase is None:
            return 0.0
        here = WEIGHTS.get(self.phase, 0.0) * self.phase_fraction
        self._floor = max(self._floor, min(1.0, self._finished_weight + here))
        return self._floor

    def eta(self) -> float | None:
        """Seconds left (None until ``MIN_ELAPSED_S`` and ``MIN_FRACTION`` are passed). The rest of
        this phase at its own rate; the phases after it at the seconds per unit of weight the
        work done so far took."""
        if self.start is None or self.phase is None or self.phase in UNWEIGHED:
            return None
        now = self.clock()
        elapsed = now - self.start
        frac = self.fraction
        if elapsed < MIN_ELAPSED_S or frac < MIN_FRACTION:
            return None
        per_weight = elapsed / frac
        w = WEIGHTS.get(self.phase, 0.0)
        later = max(0.0, 1.0 - self._finished_weight - w) * per_weight
        pf = self.phase_fraction
        in_phase = now - self.phase_start
        if 0.05 <= pf < 1.0 and in_phase >= 1.0:
            rest = in_phase / pf * (1.0 - pf)
        else:
            rest = w * (1.0 - pf) * per_weight
        return max(0.0, rest + later)


def eta_text(seconds: float | None) -> str:
    """``"about 40 s left"``, ``"about 3 min left"``, ``"about 1 h 05 min left"``; "" for None."""
    if seconds is None:
        return ""
    s = int(round(seconds))
    if s < 60:
        return f"about {max(s, 1)} s left"
    if s < 3600:
        return f"about {round(s / 60)} min left"
    return f"about {s // 3600} h {(s % 3600) // 60:02d} min left"
