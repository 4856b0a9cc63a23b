"""How long secret redaction takes on adversarial and ordinary text.

``python -m bench.redaction [--results bench/RESULTS.md]`` times ``orbit_lsp.agent.redact.redact``
on 40 kB and 1 MB of each shape (one huge word, keyword runs, half-open quotes, assignments full of
secrets, base64 lines, the package's own source) and appends a table to the results file. The
redactor cuts text over ``MAX_REDACT_CHARS`` first, so 1 MB rows measure that cut plus the
redaction of what is kept. Issue 20 item 4: the former redactor took 4 s on ``"x" * 40_000``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import time
from pathlib import Path

from orbit_lsp.agent.redact import MAX_REDACT_CHARS, redact

ROOT = Path(__file__).resolve().parents[1]


def shapes(n: int) -> dict[str, str]:
    source = "".join(p.read_text() for p in sorted((ROOT / "orbit_lsp").rglob("*.py")))
    return {
        "one word (x...)": "x" * n,
        "keyword run (pass...)": "pass" * (n // 4),
        "assignment run (password=...)": "password=" * (n // 9),
        "half-open quote": "'" + "x1" * (n // 2),
        "URL scheme run (://...)": "://" * (n // 3),
        "secret assignments": 'password = "hunter2" # token: abc123def\n' * (n // 40),
        "base64 lines": ("A1b" * 30 + "\n") * (n // 91),
        "orbit_lsp source": (source * (n // max(1, len(source)) + 1))[:n],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(Path(__file__).with_name("RESULTS.md")))
    args = ap.parse_args(argv)
    sizes = [40_000, 1_000_000]
    rows = []
    for name in shapes(1000):
        cells = []
        for n in sizes:
            text = shapes(n)[name]
            t0 = time.perf_counter()
            _, count = redact(text)
            ms = (time.perf_counter() - t0) * 1000
            cells.append(f"{ms:,.1f} ({count:,})")
            print(f"{name:32} {n:>9,} chars {ms:10.1f} ms  {count} redactions", flush=True)
        rows.append((name, cells))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    lines = [f"\n## {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC · secret redaction (time per call)\n",
             f"- machine: {os.cpu_count()} cores, {platform.system()} {platform.machine()}, Python "
             f"{platform.python_version()}; load average at start {'/'.join(f'{x:.2f}' for x in os.getloadavg())}",
             f"- code: commit {commit}; text over {MAX_REDACT_CHARS:,} characters is cut before redaction",
             "- command: `python -m bench.redaction`",
             "- ms per `redact()` call (redactions in brackets); before issue 20 item 4, 40 kB of one word took 4 s\n",
             "| input | " + " | ".join(f"{n:,} chars" for n in sizes) + " |",
             "|---|" + "---|" * len(sizes)]
    lines += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows]
    with open(args.results, "a") as fh:
        fh.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
