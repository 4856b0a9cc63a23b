"""Where a cold index's time goes: ``python -m bench.run profile [--corpus ...] [--top 60]``.

Two cold full indexes of the corpus copy (graph and per-file cache removed before each):

1. as the language server runs it (parse in worker processes, graph writes in a background
   thread overlapping resolution): wall time, the indexer's own phase timings (walk, parse,
   resolve, write = waiting for writes beyond resolve and cache, cache = pickling the per-file
   state), and the CPU seconds the embedded FalkorDB server spent meanwhile (``/proc/<pid>/stat``)
   — the server-side half of the graph writes;
2. with parsing in this process (the indexer's ``parse_many`` called with ``workers=1``, so the
   profile sees the parse work) under pyinstrument (sampling, main thread): the text summary's top
   lines, and the sampled time split by phase (the outermost frame with a phase: parse = read, ``ast`` and
   fact extraction; resolve; graph writes, client side; cache; walk).

Returns a ``bench.run.Report``; ``data`` holds the figures (seconds).
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

from orbit_lsp.graph import embedded
from orbit_lsp.graph.connection import code_graph_name
from orbit_lsp.index import indexer as indexer_mod
from orbit_lsp.index.indexer import WorkspaceIndexer

from bench.run import PHASES, Report, Table, cpu_seconds, log, open_store

CATEGORIES = ("parse", "resolve", "graph writes (client)", "cache", "walk", "other")


def add_parser(sub, common) -> None:
    p = sub.add_parser("profile", parents=[common],
                       help="where a cold index's time goes: phase split, FalkorDB CPU, pyinstrument profile")
    p.add_argument("--top", type=int, default=60, help="lines of pyinstrument's text summary kept")
    p.add_argument("--threshold", type=float, default=0.015,
                   help="frames under this share of the total are hidden in the text summary")
    p.add_argument("--interval", type=float, default=0.001, help="pyinstrument sampling interval (s)")


def _fresh(store, settings, root: Path) -> WorkspaceIndexer:
    gname = code_graph_name(root)
    store.graph(gname).delete()
    (Path(settings.data_dir) / "cache" / f"{gname}.sqlite").unlink(missing_ok=True)
    return WorkspaceIndexer(root, store, settings)


def category(file_path: str | None, function: str | None) -> str | None:
    """The phase a frame belongs to (None: decided by the frames below it)."""
    p = (file_path or "").replace(os.sep, "/")
    if "concurrent/futures" in p and function == "result":
        return "graph writes (client)"  # the main thread waiting for the background writes
    if "/orbit_lsp/" not in p:
        return None
    if "/orbit_lsp/graph/" in p:
        return "graph writes (client)"
    name = p.rsplit("/", 1)[-1]
    if name == "python.py":
        return "parse"
    if name == "resolve.py":
        return "resolve"
    if name == "walk.py":
        return "walk"
    if name in ("indexer.py", "parsing.py", "state.py"):
        if function in ("_persist", "_pickle_states", "pickle_states", "save_cache", "save", "load", "_load_cache", "_graph_hashes"):
            return "cache"
        if function in ("parse_python", "parse_many", "_parse_batch", "_read", "_new_state", "content_hash"):
            return "parse"
        if function in ("_write_edges_by_id", "_file_row"):
            return "graph writes (client)"
        if function == "_resolver":
            return "resolve"
    return None


def split_frames(root) -> dict[str, float]:
    """Sampled seconds by phase: each sample counts for the outermost frame above it that has a
    phase (``category``), "other" when none has."""
    out = dict.fromkeys(CATEGORIES, 0.0)
    stack = [(root, None)]
    while stack:
        fr, cat = stack.pop()
        cat = cat or category(fr.file_path, fr.function)
        kids = list(fr.children)
        own = fr.time - sum(c.time for c in kids)
        if own > 0:
            out[cat or "other"] += own
        stack.extend((c, cat) for c in kids)
    return out


def _indent(line: str) -> str:
    stripped = line.lstrip(" ")
    return "\u00a0" * (len(line) - len(stripped)) + stripped


def run(corpus: Path, label: str, settings, command: str, args) -> Report:
    root = Path(os.path.realpath(corpus))
    out = Report("profile", label, command)
    store = open_store(settings)
    pid = embedded.status(settings.data_dir).get("pid")

    ix = _fresh(store, settings, root)
    db0, t = cpu_seconds(pid), time.perf_counter()
    rep = ix.index_all()
    wall = time.perf_counter() - t
    db1 = cpu_seconds(pid)
    db_cpu = None if db0 is None or db1 is None else db1 - db0
    log(f"profile: cold index {wall:.2f} s ({rep.files} files), FalkorDB CPU {db_cpu}")
    del ix

    from pyinstrument import Profiler

    ix = _fresh(store, settings, root)
    orig = indexer_mod.parse_many
    indexer_mod.parse_many = functools.partial(orig, workers=1)
    prof = Profiler(interval=args.interval, async_mode="disabled")
    try:
        prof.start()
        t = time.perf_counter()
        rep2 = ix.index_all()
        wall2 = time.perf_counter() - t
        prof.stop()
    finally:
        indexer_mod.parse_many = orig
    del ix
    log(f"profile: serial cold index under pyinstrument {wall2:.2f} s")
    session = prof.last_session
    split = split_frames(session.root_frame(trim_stem=False))
    sampled = sum(split.values()) or 1.0

    rows = [["cold index wall (s)", wall, wall2, None]]
    for ph in PHASES:
        a, b = rep.timings.get(ph, 0.0), rep2.timings.get(ph, 0.0)
        rows.append([f"  {ph} (s)", a, b, f"{100 * a / wall:.0f} % / {100 * b / wall2:.0f} %"])
    rows.append(["FalkorDB server CPU during the index (s)", db_cpu, None, None])
    rows.append(["files / symbols / CALLS edges", f"{rep.files:,} / {rep.symbols:,} / {rep.calls:,}",
                 f"{rep2.files:,} / {rep2.symbols:,} / {rep2.calls:,}", None])
    out.tables.append(Table("cold index, phase split (the indexer's own timings)",
                            ["figure", "as served (parallel parse)", "serial parse, under pyinstrument",
                             "share of wall"], rows))
    out.tables.append(Table("pyinstrument samples of the serial cold index by phase (main thread; graph writes "
                            "run in a background thread and show here only as the client-side row building and "
                            "the main thread waiting for them)",
                            ["category", "sampled s", "share"],
                            [[c, split[c], f"{100 * split[c] / sampled:.1f} %"] for c in CATEGORIES]))
    text = prof.output_text(unicode=False, color=False, show_all=False,
                            processor_options={"filter_threshold": args.threshold})
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):  # drop pyinstrument's banner
        if ln.startswith("Profile at"):
            lines = lines[i + 1:]
            break
    top = lines[:args.top]
    out.notes.append("The served index parses in worker processes (their time is not in the bench "
                     "process's profile); the profiled run parses serially so the parse work is visible.")
    out.data = {"wall": wall, "timings": dict(rep.timings), "falkordb_cpu": db_cpu, "wall_profiled": wall2,
                "timings_profiled": dict(rep2.timings), "split": split, "profile_lines": top,
                "files": rep.files}
    # one line per row; leading spaces as no-break spaces so the call tree keeps its indentation
    out.tables.append(Table(f"pyinstrument text summary of the serial cold index (top {len(top)} lines, "
                            f"interval {args.interval * 1000:g} ms)", ["profile"],
                            [[_indent(ln)] for ln in top]))
    store.close()
    return out
