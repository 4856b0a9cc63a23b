"""What an indexing run reports: ``IndexReport`` (counts, seconds, per-phase timings), the
progress callback convention (``Progress``, ``report_progress``), and the process-wide
generation counter the indexer stamps its changes with (``GENERATIONS``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

Progress = Callable[[int, int, str], None]  # (done, total, rel)
# A callback whose ``phases`` attribute is true is phase-aware: it is called for every phase as
# ``progress(done, total, rel, phase)``, each phase counting from 0 to its own total (files for
# read, parse and resolve; write batches for write; ``rel`` "" when no file is meant). Any
# other callback is called, as always, for the read phase only.


def report_progress(progress, done: int, total: int, rel: str, phase: str = "read") -> None:
    """Call ``progress`` (may be None) for ``phase`` if it takes that phase (see ``progress.PHASES``)."""
    if progress is None:
        return
    if getattr(progress, "phases", False):
        progress(done, total, rel, phase)
    elif phase == "read":
        progress(done, total, rel)




GENERATIONS = itertools.count(1)  # a new value for every change (``WorkspaceIndexer.generation``)


@dataclass
class IndexReport:
    """Summary of an indexing run: counts, seconds, and per-phase timings."""

    files: int = 0
    parsed: int = 0
    reused: int = 0
    symbols: int = 0
    imports: int = 0
    calls: int = 0
    packages: int = 0
    inherits: int = 0
    unresolved_calls: int = 0
    call_sites: int = 0  # bound call sites (the lines of every CALLS edge)
    flow_rounds: int = 0  # resolution rounds until value flows settled (full build)
    flow_files: int = 0  # files resolved again in those rounds after the first
    written_files: int = 0
    removed_files: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    parse_errors: dict[str, str] = field(default_factory=dict)
    mode: str = "full"  # full | incremental | unchanged | cancelled
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # re-syncs and rebuilds and why
    parsed_paths: list[str] = field(default_factory=list)  # files read and parsed again (index_all)


def unresolved_sites(names: list[str], lines: list[int] | None) -> list[str] | None:
    """``Symbol.unresolved_sites``: ``"name@line"`` of each unbound call site of a caller, ordered
    by line (None when the lines are not known: edges resolved by an older version)."""
    if not lines or len(lines) != len(names):
        return None
    return [f"{n}@{ln}" for ln, n in sorted(zip(lines, names))]
