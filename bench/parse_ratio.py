"""The parse phase's cost relative to ``ast.parse``, one core: ``parsing._parse_batch`` (parse,
extract facts, pickle them) against ``ast.parse`` alone, on the same files.

    python -m bench.parse_ratio [--corpus DIR] [--repeat N] [--chunk 20]

The two are interleaved in chunks of ``--chunk`` files, so both see the same machine load (the
ratio is what to compare across runs on a shared machine, not the seconds). The cyclic GC is
paused in both, as the indexer pauses it. ``--corpus`` defaults to the stdlib copy the ``index``
benchmark makes (``~/.cache/orbit-bench/stdlib``). Prints one line per repeat; records nothing.
"""

from __future__ import annotations

import argparse
import ast
import gc
import os
import time
from pathlib import Path

from orbit_lsp.index.parsing import _parse_batch


def load(corpus: Path) -> list[tuple[str, bytes]]:
    """``(relative path, bytes)`` of every ``.py`` file under ``corpus``, sorted by path."""
    items = []
    for d, _, files in os.walk(corpus):
        for f in files:
            if f.endswith(".py"):
                p = os.path.join(d, f)
                with open(p, "rb") as fh:
                    items.append((os.path.relpath(p, corpus).replace(os.sep, "/"), fh.read()))
    return sorted(items)


def measure(items: list[tuple[str, bytes]], chunk: int = 20) -> tuple[float, float]:
    """Seconds of ``ast.parse`` and of ``_parse_batch`` over ``items``, interleaved by chunk."""
    t_parse = t_batch = 0.0
    clock = time.perf_counter
    for i in range(0, len(items), chunk):
        part = items[i:i + chunk]
        t = clock()
        for _, data in part:
            try:
                ast.parse(data)
            except (SyntaxError, ValueError):
                pass
        t_parse += clock() - t
        t = clock()
        _parse_batch(part)
        t_batch += clock() - t
    return t_parse, t_batch


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=Path.home() / ".cache" / "orbit-bench" / "stdlib")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=20)
    args = ap.parse_args(argv)
    items = load(args.corpus)
    gc.disable()
    for _ in range(args.repeat):
        t_parse, t_batch = measure(items, args.chunk)
        print(f"{len(items)} files  ast.parse {t_parse:.2f} s  _parse_batch {t_batch:.2f} s  "
              f"ratio {t_batch / t_parse:.2f}  load {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
