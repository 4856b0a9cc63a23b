"""What an indexing run reports: ``IndexReport`` (counts, seconds, per-phase timings), the
progress callback convention (``Progress``, ``report_progress``), and the process-wide
generation counter the indexer stamps its changes with (``GENERATIONS``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

Progress = Callable[[int, int, str], None]  # (done, total, rel)
# A callback whose ``phases`` attribute is true is phase-aware: it is called for every phase as
# ``progress(done, total, rel, phase, work=work)``, each phase counting from 0 to its own total
# (files for read, parse and resolve; write batches for write; ``rel`` "" when no file is
# meant); ``work`` (0..1) is the share of the phase's work done when it is not in proportion to
# the count (parsing: the share of the bytes parsed), else None. Any other callback is called,
# as always, for the read phase only.


def report_progress(progress, done: int, total: int, rel: str, phase: str = "read",
                    work: float | None = None) -> None:
    """Call ``progress`` (may be None) for ``phase`` if it takes that phase (see ``progress.PHASES``;
    a callback that is not phase-aware takes the files read or checked only). ``work``: the
    share of the phase's work done (0..1) when it is not in proportion to ``done`` (parsing:
    the bytes parsed, the files being of every size), passed to a phase-aware callback as its
    ``work`` keyword."""
    if progress is None:
        return
    if getattr(progress, "phases", False):
        progress(done, total, rel, phase, work=work)
    elif phase in ("read", "check"):
        progress(done, total, rel)




GENERATIONS = itertools.count(1)  # a new value for every change (``WorkspaceIndexer.generation``)


@dataclass
class IndexReport:
    """Summary of an indexing run: counts, seconds, and per-phase timings."""

    files: int = 0
    parsed: int = 0
    reused: int = 0
    read: int = 0  # files whose bytes were read (index_all): the others kept their stat signature
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
    facts_decoded: int = 0  # facts pickles a full build's resolution decoded, in this process and
    #   its forked children (``state.DECODES``): its work in a unit the machine's load does not change


def unresolved_sites(names: list[str], lines: list[int] | None) -> list[str] | None:
    """``Symbol.unresolved_sites``: ``"name@line"`` of each unbound call site of a caller, ordered
    by line (None when the lines are not known: edges resolved by an older version)."""
    if not lines or len(lines) != len(names):
        return None
    return [f"{n}@{ln}" for ln, n in sorted(zip(lines, names))]


def unbound_tally(symbols: Iterable[tuple[list[str] | None, list[str] | None]],
                  out: dict[str, list[int]] | None = None) -> dict[str, list[int]]:
    """The ``UnboundName`` rows of some symbols: ``{name: [symbols, sites]}`` from each
    symbol's ``(unresolved_names, unresolved_sites)``. ``symbols``: how many of them make an
    unbound call using the name; ``sites``: how many such calls they make (a symbol whose sites
    are not known counts one), added to ``out`` when given. What ``graph.queries`` counts by
    scanning the symbols (``unbound_sites``), kept per name so that a name used tens of
    thousands of times costs one read."""
    out = {} if out is None else out
    for names, sites in symbols:
        if names:  # distinct, as the property holds them; a site is "name@line"
            tally_symbol(out, names, [x[:x.rfind("@")] for x in sites] if sites else None)
    return out


def tally_symbol(out: dict[str, list[int]], distinct: list[str], calls: list[str] | None) -> None:
    """Add one symbol to ``unbound_tally`` counts ``out``: ``distinct``, the names of its unbound
    calls, each once; ``calls``, the name of each of its unbound call sites, or None when the
    sites are not known (each name then counts one site). The counts of
    ``unbound_tally([(distinct, unresolved_sites(calls, lines))], out)``, without making and
    parsing the ``"name@line"`` strings (a full build tallies every symbol of the workspace)."""
    per: dict[str, int] = {}
    if calls is not None:
        for n in calls:
            per[n] = per.get(n, 0) + 1
    for n in distinct:
        t = out.get(n)
        if t is None:
            t = out[n] = [0, 0]
        t[0] += 1
        t[1] += per.get(n) or 1


def tally_change(new: dict[str, list[int]], old: dict[str, list[int]]) -> list[list]:
    """``[name, symbols, sites]`` rows taking ``old`` counts to ``new`` ones (``unbound_tally``
    of the same symbols before and after a change), sorted by name, names left unchanged out."""
    rows = []
    for n in sorted(new.keys() | old.keys()):
        a, b = new.get(n, (0, 0)), old.get(n, (0, 0))
        if a[0] != b[0] or a[1] != b[1]:
            rows.append([n, a[0] - b[0], a[1] - b[1]])
    return rows
