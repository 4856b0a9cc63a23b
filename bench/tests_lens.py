"""How long the "N tests reach this" lenses of whole files take to count (what a tests lens
shows as "tests: counting…" meanwhile): ``python -m bench.tests_lens WORKSPACE FILE...
[--data-dir DIR]``.

The workspace is indexed (or re-opened from ``--data-dir``, the embedded FalkorDB's folder,
when it was indexed there before), then, for each file in the order given, every function and
method of it is counted as the lenses do (``reach.test_counts``) twice in this process:
*first*, as the first lenses of that file after the server started (the test files scanned for
earlier files of the list stay scanned, as in a server; so do the scans earlier processes kept
in the data dir, ``changes.scan_store``: ``--fresh-scans`` starts without them), and *again*
with the computed answers forgotten (``reach.forget_answers``: what a file's lenses cost after
an edit elsewhere changed the graph's generation, the test files' scans kept); then the lists of
tests the lens command shows, for every function at once (``reach.tests_for``). Prints how many
scans the data dir kept at the start, then one Markdown table: files, functions, seconds first,
again and for the lists, tests counted, and a digest of every list (two runs of the same code
and corpus give the same digest, whatever ``PYTHONHASHSEED``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

from orbit_lsp.changes import reach, scan_store, selection
from orbit_lsp.config import Settings
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.index.full_build import full_qual
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.index.parsing import unpickle_symbols


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.tests_lens", description=__doc__.split("\n\n")[0])
    ap.add_argument("workspace", type=Path)
    ap.add_argument("files", nargs="+", help="workspace-relative Python files whose functions are counted")
    ap.add_argument("--data-dir", type=Path, default=None, help="ORBIT data folder (default: the user's)")
    ap.add_argument("--fresh-scans", action="store_true",
                    help="start without the test scans kept in the data dir (empties its cache/test-scans.sqlite)")
    args = ap.parse_args(argv)
    settings = Settings(data_dir=args.data_dir) if args.data_dir else Settings()
    kept = scan_store.store_for(settings.data_dir)
    if args.fresh_scans:  # as a new process that finds none: the store emptied, this process's scans forgotten
        kept.clear()
        selection.SCANS.clear()
        selection.MARKS.clear()
    print(f"test scans kept in {kept.path}: {kept.rows():,} rows of this code at the start")
    store = GraphStore(settings)
    store.connect()
    ix = WorkspaceIndexer(args.workspace.resolve(), store, settings)
    t = time.perf_counter()
    rep = ix.index_all()
    print(f"index ({rep.mode}): {time.perf_counter() - t:.1f} s, {rep.files:,} files\n")
    print("| file | functions | first (s) | again (s) | lists (s) | tests counted | lists' digest |")
    print("|---|---|---|---|---|---|---|")
    for rel in args.files:
        st = ix.state[rel]
        quals = [full_qual(rel, s.qual, ix.root_package) for s in unpickle_symbols(st.facts_blob)
                 if s.kind in ("function", "method")]
        seconds = []
        for _ in range(2):
            reach.forget_answers()
            t = time.perf_counter()
            counts = reach.test_counts(ix, rel, quals)
            seconds.append(time.perf_counter() - t)
        reach.forget_answers()
        t = time.perf_counter()
        lists = reach.tests_for(ix, rel, quals)
        seconds.append(time.perf_counter() - t)
        if any(counts[q] != (None if v is None else len(v)) for q, v in lists.items()):
            raise SystemExit(f"{rel}: the lens's numbers differ from the lists' lengths")
        digest = hashlib.blake2b(json.dumps(sorted(lists.items()), sort_keys=True).encode(), digest_size=6).hexdigest()
        counted = sum(n for n in counts.values() if n)
        print(f"| {rel} | {len(quals)} | {seconds[0]:.2f} | {seconds[1]:.2f} | {seconds[2]:.2f} | {counted:,} | {digest} |",
              flush=True)
    store.close()


if __name__ == "__main__":
    main()
