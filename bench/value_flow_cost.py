"""Cost of parameter values (``Settings.value_flow``) in a full build: the same workspace built
with value flow off, then on, one after the other in this process (same load), and the ratio of
their resolution times (``resolve`` + ``flow``, the later value-flow rounds). Unlike
``bench.value_flow`` (the analysis alone, in memory, one process), this is the full build of
``orbit-lsp index --rebuild``: parallel resolution rounds, bounded memo, graph written.

usage: python -m bench.value_flow_cost ROOT [--workers N] [--save-edges PREFIX]

``--save-edges PREFIX`` pickles ``{file: FileEdges.key()}`` of each build to PREFIX-off.pkl and
PREFIX-on.pkl (to compare the edges of two versions: same keys, same edges)."""

from __future__ import annotations

import argparse
import os
import pickle
import tempfile
import time
from pathlib import Path


def build(root: str, data_dir: Path, value_flow: bool, workers: int | None) -> tuple[dict, dict]:
    from orbit_lsp.config import Settings
    from orbit_lsp.graph.connection import GraphStore
    from orbit_lsp.index.indexer import WorkspaceIndexer

    s = Settings(data_dir=data_dir, value_flow=value_flow)
    ix = WorkspaceIndexer(root, GraphStore(s), s, graph_name=f"vfcost_{int(value_flow)}")
    if workers:
        ix.resolve_workers = workers
    t = time.perf_counter()
    rep = ix.index_all(rebuild=True)
    timings = {k: round(v, 2) for k, v in rep.timings.items()}
    timings["wall"] = round(time.perf_counter() - t, 2)
    timings["rounds"], timings["files_again"] = rep.flow_rounds, rep.flow_files
    edges = {r: (st.edges.key() if st.edges is not None else None) for r, st in ix.state.items()}
    ix.graph.delete()
    return timings, edges


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--save-edges", default=None)
    a = ap.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="orbit-vfcost-"))
    out = {}
    for on in (False, True):
        timings, edges = build(a.root, data_dir, on, a.workers)
        out[on] = timings
        print("value flow", "on " if on else "off", timings, flush=True)
        if a.save_edges:
            with open(f"{a.save_edges}-{'on' if on else 'off'}.pkl", "wb") as f:
                pickle.dump(edges, f)
    off = out[False]["resolve"] + out[False].get("flow", 0.0)
    on = out[True]["resolve"] + out[True].get("flow", 0.0)
    print(f"resolution: off {off:.2f} s, on {on:.2f} s, ratio {on / off:.2f}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
