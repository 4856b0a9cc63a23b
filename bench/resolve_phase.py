"""The resolve phase of a cold index alone, as the full build runs it, without FalkorDB:
``python -m bench.resolve_phase CORPUS [--states FILE] [--edges OUT] [--profile OUT] [--flow]``.

The corpus is walked and parsed once (its ``FileState``s pickled into ``--states`` and reused
by later runs of the same corpus, so runs compare resolution only), then resolved as
``full_build.FullBuild._full_build`` does: over ``LazyFacts``, with ``BUILD_DECODED_FACTS``
decoded facts at most (``state.FACTS`` and ``Resolver.facts_seen_max``), the memo bounded by
``BUILD_MEMO_BUDGET`` and one process (``workers = 1``, the path of a workspace above
``py_parallel.PARALLEL_MAX_FILES`` Python files). Value flow follows the settings as the indexer
does (off above ``value_flow_max_files``); ``--flow`` turns it on at any size.

Prints one JSON line: files, wall and CPU seconds (``resource.getrusage``, this process) of
``resolve_many``, peak RSS. ``--edges`` pickles every file's ``FileEdges`` (sorted by path) for
comparing two builds; ``--profile`` writes a cProfile of the resolution.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from orbit_lsp.config import Settings
from orbit_lsp.index.full_build import BUILD_DECODED_FACTS, BUILD_MEMO_BUDGET
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.index.parsing import content_hash, gc_paused, parse_many
from orbit_lsp.index.state import FACTS
from orbit_lsp.index.walk import LANGS, walk_workspace


class _NoStore:
    """What ``WorkspaceIndexer.__init__`` asks of a store, without FalkorDB (nothing is written)."""

    def __init__(self, settings: Settings):
        self.settings = settings

    def graph(self, name: str):
        return SimpleNamespace(name=name)


def load_states(ix: WorkspaceIndexer, cache: Path | None) -> None:
    """Fill ``ix.state`` as the walk and parse of ``_index_all`` do (from ``cache`` when it exists)."""
    if cache is not None and cache.exists():
        with gc_paused():
            ix.state, ix.aliases, ix._python_files = pickle.loads(cache.read_bytes())
        return
    walk = walk_workspace(ix.root, ix.settings.max_file_bytes, ix.settings.exclude, classify=False,
                          build_output=ix.settings.build_output())
    ix.aliases = walk.aliases
    ix._python_files = sum(sf.lang == "python" for sf in walk.files)
    todo = []
    for sf in walk.files:
        data = ix._read(sf.rel)
        if data is not None:
            todo.append((sf.rel, data, content_hash(data)))
    py = [(rel, data) for rel, data, _ in todo if LANGS.get(os.path.splitext(rel)[1].lower()) == "python"]
    parsed = parse_many(py, keep=False)
    ix.state = {rel: ix._new_state(rel, data, h, None, parsed.get(rel)) for rel, data, h in todo}
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_bytes(pickle.dumps((ix.state, ix.aliases, ix._python_files), protocol=pickle.HIGHEST_PROTOCOL))


def deep_size(obj, seen: set | None = None) -> int:
    """Bytes of ``obj`` and of every container, string and number it reaches that nothing
    reached before (``seen``: ids already counted), by ``sys.getsizeof``."""
    seen = set() if seen is None else seen
    total, stack = 0, [obj]
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (tuple, list, set, frozenset)):
            stack.extend(o)
    return total


def resolve_phase(ix: WorkspaceIndexer, profile: Path | None = None) -> tuple[dict, dict]:
    """``(edges by path, figures)`` of one full-build resolution of ``ix.state``."""
    have = [r for r in sorted(ix.state) if ix.state[r].facts_blob is not None]
    resolver = ix._resolver()
    resolver.python.facts_seen_max = BUILD_DECODED_FACTS
    resolver.python.memo_budget = BUILD_MEMO_BUDGET
    resolver.python.workers = 1
    cap = FACTS.max_entries
    FACTS.max_entries = max(cap, BUILD_DECODED_FACTS)
    FACTS.clear()  # as in a new index process: facts decoded before (another run, a test) are not at hand
    misses = FACTS.misses
    prof = None
    if profile is not None:
        import cProfile

        prof = cProfile.Profile()
    with gc_paused():  # as ``_index_all`` runs the build
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        if prof is not None:
            prof.enable()
        try:
            edges = resolver.resolve_many(have, lambda r: None, have)
        finally:
            if prof is not None:
                prof.disable()
            FACTS.max_entries = cap
            FACTS.clear()
        wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    if prof is not None:
        prof.dump_stats(str(profile))
    py = resolver.python
    figures = {"files": len(have), "value_flow": py.value_flow, "resolve_wall_s": round(wall, 2),
               "resolve_cpu_s": round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 2),
               "decodes": FACTS.misses - misses, "flow_rounds": py.flow_stats["rounds"], "memo": len(py.memo) + len(py._old_memo),
               "peak_rss_mib": round(r1.ru_maxrss / 1024),
               "caches_mib": {name: round(deep_size(getattr(py, name)) / 2**20, 1) for name in
                              ("_class_outlines", "_subclass_defs", "_unsettled") if hasattr(py, name)}}
    return edges, figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--states", type=Path, help="pickled states of the corpus (written when missing)")
    ap.add_argument("--edges", type=Path, help="pickle every file's FileEdges here")
    ap.add_argument("--profile", type=Path, help="write a cProfile of the resolution here")
    ap.add_argument("--flow", action="store_true", help="value flow at any size")
    args = ap.parse_args(argv)
    settings = Settings(value_flow_max_files=0) if args.flow else Settings()
    ix = WorkspaceIndexer(args.corpus, _NoStore(settings), settings)
    load_states(ix, args.states)
    edges, figures = resolve_phase(ix, args.profile)
    figures["corpus"] = str(args.corpus)
    if args.edges is not None:
        args.edges.write_bytes(pickle.dumps(sorted(edges.items()), protocol=pickle.HIGHEST_PROTOCOL))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
