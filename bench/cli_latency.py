"""Benchmark of a query from the command line, end to end, measured from outside the process.

    python -m bench.run cli-latency [--corpus stdlib|PATH] [--n 20] [--k 5]

The corpus copy is indexed first (in the benchmark's data dir, whose embedded FalkorDB is then
running: "warm"). Then ``orbit-lsp callers SYMBOL`` runs as a user runs it: the console script
next to this Python (else ``python -m orbit_lsp``), in the workspace directory, without
``--workspace``, output to a pipe. Each of the ``--k`` most-called functions of the graph is
asked ``--n`` times, round-robin, after one untimed warm-up run each (which also writes the
bytecode caches: ``PYTHONDONTWRITEBYTECODE`` is removed from the children's environment, as
an installed package has its ``.pyc`` files).

Measured per run: wall time (``subprocess.run`` from start to exit) and CPU time of the child
(user + system, ``RUSAGE_CHILDREN``), p50/p95/min. In the same rounds, so under the same load,
two floors: ``python -c pass`` (the interpreter) and ``python -c "import orbit_lsp.config,
orbit_lsp.graph.connection"`` (the libraries any query needs: pydantic for the settings, the
falkordb client and redis-py). One more run with ``-X importtime`` splits the imports by
top-level package. The issue's target: p50 ≤ 150 ms.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from bench.run import Report, Table, log, ms, open_indexed, open_store, pct

TARGET_P50_MS = 150.0
LIBS_FLOOR = "import orbit_lsp.config, orbit_lsp.graph.connection"


def add_parser(sub, common) -> None:
    p = sub.add_parser("cli-latency", parents=[common],
                       help="`orbit-lsp callers X` end to end from outside the process (see bench/cli_latency.py)")
    p.add_argument("--n", type=int, default=20, help="runs per target")
    p.add_argument("--k", type=int, default=5, help="targets: the K most-called functions")
    p.add_argument("--compare", type=Path, default=None, metavar="CHECKOUT",
                   help="also run the orbit_lsp of another checkout (e.g. the code before a change), "
                        "as python -m orbit_lsp with PYTHONPATH=CHECKOUT, in the same rounds")


def cli_command() -> list[str]:
    script = Path(sys.executable).parent / "orbit-lsp"
    return [str(script)] if script.exists() else [sys.executable, "-m", "orbit_lsp"]


def child_env(settings) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("ORBIT_FALKORDB_URL", None)
    env["ORBIT_DATA_DIR"] = str(settings.data_dir)
    return env


def timed(cmd: list[str], cwd: Path, env: dict) -> tuple[float, float, int]:
    """(wall s, child CPU s, exit status) of one run, output discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        log(f"{' '.join(cmd[-2:])}: exit {proc.returncode}: {proc.stderr.decode(errors='replace').strip()[:300]}")
    return wall, cpu, proc.returncode


def import_breakdown(cmd: list[str], cwd: Path, env: dict) -> list[tuple[str, float]]:
    """Import time (ms) of one run per top-level package: the sum of its modules' own times."""
    exe = [sys.executable, "-X", "importtime", "-m", "orbit_lsp"] + cmd[-2:]
    proc = subprocess.run(exe, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    groups: dict[str, float] = defaultdict(float)
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+\d+ \|( *)(\S+)", line)
        if m:
            groups[m.group(3).split(".")[0]] += int(m.group(1)) / 1000
    return sorted(groups.items(), key=lambda kv: -kv[1])


def run(corpus: Path, label: str, settings, command: str, args) -> Report:
    root = Path(os.path.realpath(corpus))
    report = Report("cli-latency", label, command)
    store = open_store(settings)
    ix, rep, secs = open_indexed(root, store, settings)
    log(f"corpus graph ready ({rep.mode}, {secs:.1f} s): {rep.files} files")
    targets = [r[0] for r in ix.graph.ro_query(
        "MATCH (c:Symbol)-[e:CALLS]->(s:Symbol) WHERE s.kind = 'function' "
        "RETURN s.qual, count(e) AS n ORDER BY n DESC, s.qual LIMIT $k", {"k": args.k}, timeout_ms=120_000).rows]
    store.close()
    base = cli_command()
    env = child_env(settings)
    kinds = {f"orbit-lsp callers {t}": base + ["callers", t] for t in targets}
    other = {}
    if args.compare is not None:
        other_env = dict(env, PYTHONPATH=str(Path(args.compare).resolve()))
        other = {t: [sys.executable, "-m", "orbit_lsp", "callers", t] for t in targets}
        compare_label = f"orbit-lsp callers, code of {Path(args.compare).resolve()} (all targets)"
    floors = {"python -c pass (interpreter floor)": [sys.executable, "-c", "pass"],
              "python -c \"" + LIBS_FLOOR + "\" (libraries floor)": [sys.executable, "-c", LIBS_FLOOR]}
    failed = 0
    for cmd in list(kinds.values()) + list(floors.values()):  # warm-up: page cache, bytecode caches
        failed += timed(cmd, root, env)[2] != 0
    for cmd in other.values():
        failed += timed(cmd, root, other_env)[2] != 0
    load0 = os.getloadavg()
    samples: dict[str, list[tuple[float, float]]] = {"orbit-lsp callers (all targets)": []}
    if other:
        samples[compare_label] = []
    samples.update({name: [] for name in floors})
    for _ in range(args.n):
        for t, cmd in zip(targets, kinds.values()):
            wall, cpu, rc = timed(cmd, root, env)
            failed += rc != 0
            samples["orbit-lsp callers (all targets)"].append((wall, cpu))
            if other:
                wall, cpu, rc = timed(other[t], root, other_env)
                failed += rc != 0
                samples[compare_label].append((wall, cpu))
        for name, cmd in floors.items():
            wall, cpu, _rc = timed(cmd, root, env)
            samples[name].append((wall, cpu))
    load1 = os.getloadavg()
    rows = []
    for name, s in samples.items():
        walls, cpus = [x[0] for x in s], [x[1] for x in s]
        is_cli = name.startswith("orbit-lsp")
        p50 = ms(pct(walls, 50))
        rows.append([name, len(s), p50, ms(pct(walls, 95)), ms(min(walls)), ms(pct(cpus, 50)),
                     ("ok" if p50 <= TARGET_P50_MS else "OVER") if is_cli else "–"])
    report.tables.append(Table(f"end to end from outside the process, {args.n} rounds (each round: every target, "
                               "then each floor)",
                               ["command", "runs", "p50 ms", "p95 ms", "min ms", "CPU p50 ms",
                                f"p50 ≤ {TARGET_P50_MS:.0f} ms"], rows))
    cli = samples["orbit-lsp callers (all targets)"]
    libs = samples[list(floors)[1]]
    interp = samples[list(floors)[0]]
    cpu_cli, cpu_libs, cpu_py = (pct([x[1] for x in s], 50) for s in (cli, libs, interp))
    report.tables.append(Table("CPU split (p50 of each, ms)", ["part", "CPU ms"], [
        ["interpreter start", ms(cpu_py)],
        ["libraries (pydantic settings, falkordb + redis-py) beyond the interpreter", ms(cpu_libs - cpu_py)],
        ["orbit: its imports, argument parsing, connection, queries, output", ms(cpu_cli - cpu_libs)],
    ]))
    report.tables.append(Table("imports of one run by top-level package (`-X importtime`: the sum of its modules' own times, ms; the 15 largest)",
                               ["package", "ms"], [[k, v] for k, v in import_breakdown(
                                   next(iter(kinds.values())), root, env)[:15]]))
    report.notes.append(f"targets (the {len(targets)} most-called functions): {', '.join(targets)}; "
                        f"command: {' '.join(base)} callers NAME, in {root}, embedded FalkorDB of "
                        f"{settings.data_dir} running (warm).")
    report.notes.append(f"load average (1 min) {load0[0]:.2f} before the timed rounds, {load1[0]:.2f} after, "
                        f"on {os.cpu_count()} cores: wall times include waiting for a core; the CPU column "
                        "is the child's own time.")
    if failed:
        report.notes.append(f"{failed} runs exited non-zero (see the log)")
    if "__editable__" in "".join(sys.modules) or any("__editable__" in p for p in sys.path):
        report.notes.append("orbit-lsp is an editable install here: its import hook (`__editable___…_finder`) "
                            "costs a few ms an installed wheel does not.")
    report.data = {"samples": samples, "targets": targets, "failed": failed}
    return report
