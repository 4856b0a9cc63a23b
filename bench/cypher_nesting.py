"""How FalkorDB's Cypher parser pays for nesting, and what orbit's read-only guard refuses.

``python -m bench.cypher_nesting [--max-depth 18] [--results bench/RESULTS.md]`` starts a private
embedded FalkorDB (temporary data dir), sends ``RETURN`` expressions nested 2..max-depth levels
deep in each shape (NOT chains, parentheses, lists, maps, unary minus, ``NOT f(…)``) straight to
the server (``Graph.ro_query``, 1000 ms timeout, which the parser ignores) and records wall time per
depth, next to ``orbit_lsp.graph.readonly.nesting_depth`` and whether ``check_readonly_text``
refuses the text. Keep ``--max-depth`` below ~20: each level doubles the time and the server is
blocked meanwhile. Loopback only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

from orbit_lsp.config import Settings
from orbit_lsp.graph import embedded
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.graph.errors import QueryRejected
from orbit_lsp.graph.readonly import MAX_NESTING, check_readonly_text, nesting_depth

SHAPES = {
    "NOT chain": lambda n: "RETURN " + "NOT " * n + "true",
    "parentheses": lambda n: "RETURN " + "(" * n + "1" + ")" * n,
    "lists": lambda n: "RETURN " + "[" * n + "1" + "]" * n,
    "maps": lambda n: "RETURN " + "{a: " * n + "1" + "}" * n,
    "unary minus": lambda n: "RETURN " + "- " * n + "1",
    "NOT f(...)": lambda n: "RETURN " + "NOT toBoolean(" * (n // 2) + "true" + ")" * (n // 2),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-depth", type=int, default=18)
    ap.add_argument("--results", default=str(Path(__file__).with_name("RESULTS.md")))
    args = ap.parse_args(argv)
    depths = list(range(2, args.max_depth + 1, 2))
    data_dir = tempfile.mkdtemp(prefix="orbit-bn-")
    store = GraphStore(Settings(data_dir=data_dir, falkordb_url=None))
    store.connect()
    g = store.graph("nesting")
    g.query("CREATE (:Probe)")
    table: dict[str, list[str]] = {}
    try:
        for name, make in SHAPES.items():
            row = []
            for n in depths:
                q = make(n)
                t0 = time.perf_counter()
                g.ro_query(q, timeout_ms=1000)
                ms = (time.perf_counter() - t0) * 1000
                try:
                    check_readonly_text(q)
                    verdict = ""
                except QueryRejected:
                    verdict = " (refused)"
                row.append(f"{ms:,.1f}{verdict}")
                print(f"{name:12} depth {nesting_depth(q):3}  {ms:10.1f} ms{verdict}", flush=True)
            table[name] = row
    finally:
        store.close()
        embedded.stop(data_dir)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [f"\n## {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC · cypher nesting (parser time per depth)\n",
             f"- machine: {os.cpu_count()} cores, {platform.system()} {platform.machine()}, Python "
             f"{platform.python_version()}; load average at start {'/'.join(f'{x:.2f}' for x in os.getloadavg())}",
             f"- code: commit {commit}; orbit refuses nesting deeper than {MAX_NESTING} (`nesting_depth`)",
             f"- command: `python -m bench.cypher_nesting --max-depth {args.max_depth}`",
             "- ms per query sent straight to FalkorDB (`GRAPH.RO_QUERY`, timeout 1000 ms, not honoured while "
             "parsing); \"(refused)\": orbit's guard would not send it\n",
             "| shape | " + " | ".join(f"depth {n}" for n in depths) + " |",
             "|---|" + "---|" * len(depths)]
    lines += [f"| {name} | " + " | ".join(row) + " |" for name, row in table.items()]
    with open(args.results, "a") as fh:
        fh.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
