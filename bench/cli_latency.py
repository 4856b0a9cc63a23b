"""Benchmark of a query from the command line, end to end, measured from outside the process.

    python -m bench.run cli-latency [--corpus stdlib|PATH] [--n 20] [--k 5]

The corpus copy is indexed first (in the benchmark's data dir, whose embedded FalkorDB is then
running: "warm"). Then ``orbit-lsp callers SYMBOL`` runs as a user runs it: the console script
next to this Python (else ``python -m orbit_lsp``), in the workspace directory, without
``--workspace``, output to a pipe. Each of the ``--k`` most-called functions of the graph is
asked ``--n`` times, round-robin, after one untimed warm-up run each (which also writes the
bytecode caches: ``PYTHONDONTWRITEBYTECODE`` is removed from the children's environment, as
an installed package has its ``.pyc`` files).

Three ways a query is answered, each timed in the same rounds (so under the same load):

- through the query helper (``orbit_lsp.query_helper``) already running: what a user gets from
  the second query on ("warm");
- in-process (``ORBIT_NO_HELPER=1``): the path before the helper, and the fallback;
- cold: the helper stopped first (SIGTERM, waited for), so the query runs in-process and then
  starts a helper in the background (the Popen is in the timed run; the helper's start-up is
  not); one per round, the benchmark then waits for the new helper to listen.

The helpers live in a private directory of the benchmark (``ORBIT_HELPER_DIR``), which is
removed at the end with its helper stopped; ``ORBIT_HELPER_TRACE`` checks that each warm run
was answered by the helper.

Measured per run: wall time (``subprocess.run`` from start to exit) and CPU time of the child
(user + system, ``RUSAGE_CHILDREN``), p50/p95/min. The helper's work for a query is done in a
process forked by the helper, not a child of the benchmark: its CPU is read from the helper's
``cutime``/``cstime`` (the children it reaped) and reported as a mean per warm query. Two
floors in the same rounds: ``python -c pass`` (the interpreter) and ``python -c "import
orbit_lsp.config, orbit_lsp.graph.connection"`` (the libraries the in-process path needs:
pydantic for the settings, the falkordb client and redis-py). One more in-process run with ``-X
importtime`` splits the imports by top-level package. The issue's target: p50 ≤ 150 ms.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
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


def child_env(settings, helper_dir: Path | None = None) -> dict:
    env = dict(os.environ)
    for name in ("PYTHONDONTWRITEBYTECODE", "ORBIT_FALKORDB_URL", "ORBIT_NO_HELPER", "ORBIT_HELPER_TRACE",
                 "ORBIT_HELPER_IDLE_S", "ORBIT_HELPER_DEBUG"):
        env.pop(name, None)
    env["ORBIT_DATA_DIR"] = str(settings.data_dir)
    if helper_dir is not None:
        env["ORBIT_HELPER_DIR"] = str(helper_dir)
    return env


class HelperControl:
    """The query helper of the benchmark's private helper directory: its pid, stopping it,
    waiting for it, the CPU of the query processes it forked."""

    def __init__(self, folder: Path):
        self.folder = folder

    def pid(self) -> int | None:
        for f in self.folder.glob("q-*.pid"):
            try:
                pid = int(f.read_text())
            except (OSError, ValueError):
                continue
            if f.with_suffix(".sock").exists() and _alive(pid):
                return pid
        return None

    def wait(self, timeout: float = 120.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid = self.pid()
            if pid is not None:
                return pid
            time.sleep(0.02)
        raise RuntimeError(f"no query helper listening in {self.folder} after {timeout:.0f} s")

    def stop(self) -> None:
        """Stop every helper of the directory and wait for them to exit."""
        pids = []
        for f in self.folder.glob("q-*.pid"):
            try:
                pid = int(f.read_text())
                os.kill(pid, signal.SIGTERM)
                pids.append(pid)
            except (OSError, ValueError):
                continue
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.01)

    @staticmethod
    def children_cpu(pid: int) -> float:
        """CPU seconds (user + system) of the reaped children of ``pid``."""
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


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
    """Import time (ms) of one run per top-level package: the sum of its modules' own times
    (``env`` decides the path: ``ORBIT_NO_HELPER=1`` for the in-process one)."""
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
    helper_dir = Path(tempfile.mkdtemp(prefix="orbit-bench-h-"))
    helper = HelperControl(helper_dir)
    trace = helper_dir.parent / f"{helper_dir.name}.trace"
    env = child_env(settings, helper_dir)
    env_traced = dict(env, ORBIT_HELPER_TRACE=str(trace))
    env_inproc = dict(env, ORBIT_NO_HELPER="1")
    try:
        return _rounds(report, root, targets, base, env, env_traced, env_inproc, helper, trace, settings, args)
    finally:
        helper.stop()
        shutil.rmtree(helper_dir, ignore_errors=True)
        trace.unlink(missing_ok=True)


WARM = "orbit-lsp callers (all targets), query helper running (warm)"
INPROC = "orbit-lsp callers, in-process (ORBIT_NO_HELPER=1)"
COLD = "orbit-lsp callers, cold: no helper (runs in-process, starts one)"


def _rounds(report, root, targets, base, env, env_traced, env_inproc, helper, trace, settings, args) -> Report:
    kinds = {t: base + ["callers", t] for t in targets}
    other = {}
    if args.compare is not None:
        other_env = dict(env_inproc, PYTHONPATH=str(Path(args.compare).resolve()))
        other = {t: [sys.executable, "-m", "orbit_lsp", "callers", t] for t in targets}
        compare_label = f"orbit-lsp callers, code of {Path(args.compare).resolve()} (all targets)"
    floors = {"python -c pass (interpreter floor)": [sys.executable, "-c", "pass"],
              "python -c \"" + LIBS_FLOOR + "\" (libraries floor)": [sys.executable, "-c", LIBS_FLOOR]}
    failed = 0
    for cmd in list(kinds.values()) + list(floors.values()):  # warm-up: page cache, bytecode caches, helper
        failed += timed(cmd, root, env)[2] != 0
        failed += timed(cmd, root, env_inproc)[2] != 0
    for cmd in other.values():
        failed += timed(cmd, root, other_env)[2] != 0
    pid = helper.wait()
    trace.unlink(missing_ok=True)
    load0 = os.getloadavg()
    samples: dict[str, list[tuple[float, float]]] = {WARM: [], INPROC: []}
    if other:
        samples[compare_label] = []
    samples[COLD] = []
    samples.update({name: [] for name in floors})
    helper_cpu, warm_runs = 0.0, 0
    for i in range(args.n):
        cpu0 = helper.children_cpu(pid)
        for t, cmd in kinds.items():
            wall, cpu, rc = timed(cmd, root, env_traced)
            failed += rc != 0
            samples[WARM].append((wall, cpu))
        time.sleep(0.1)
        cpu1 = helper.children_cpu(pid)
        helper_cpu, warm_runs = helper_cpu + (cpu1 - cpu0), warm_runs + len(kinds)
        for t, cmd in kinds.items():
            wall, cpu, rc = timed(cmd, root, env_inproc)
            failed += rc != 0
            samples[INPROC].append((wall, cpu))
            if other:
                wall, cpu, rc = timed(other[t], root, other_env)
                failed += rc != 0
                samples[compare_label].append((wall, cpu))
        for name, cmd in floors.items():
            wall, cpu, _rc = timed(cmd, root, env)
            samples[name].append((wall, cpu))
        helper.stop()
        wall, cpu, rc = timed(kinds[targets[i % len(targets)]], root, env)
        failed += rc != 0
        samples[COLD].append((wall, cpu))
        pid = helper.wait()
    load1 = os.getloadavg()
    answered = trace.read_text().splitlines() if trace.exists() else []
    not_helper = [line for line in answered if not line.endswith(" helper")]
    rows = []
    for name, s in samples.items():
        walls, cpus = [x[0] for x in s], [x[1] for x in s]
        is_cli = name.startswith("orbit-lsp")
        p50 = ms(pct(walls, 50))
        rows.append([name, len(s), p50, ms(pct(walls, 95)), ms(min(walls)), ms(pct(cpus, 50)),
                     ("ok" if p50 <= TARGET_P50_MS else "OVER") if is_cli else "–"])
    report.tables.append(Table(f"end to end from outside the process, {args.n} rounds (each round: every target "
                               "through the helper, then in-process, then each floor, then one cold query)",
                               ["command", "runs", "p50 ms", "p95 ms", "min ms", "CPU p50 ms",
                                f"p50 ≤ {TARGET_P50_MS:.0f} ms"], rows))
    cpu_of = {name: pct([x[1] for x in s], 50) for name, s in samples.items()}
    cpu_py, cpu_libs = cpu_of[list(floors)[0]], cpu_of[list(floors)[1]]
    report.tables.append(Table("CPU split (p50 of each, ms)", ["part", "CPU ms"], [
        ["interpreter start", ms(cpu_py)],
        ["in-process: libraries (pydantic settings, falkordb + redis-py) beyond the interpreter", ms(cpu_libs - cpu_py)],
        ["in-process: orbit: its imports, argument parsing, connection, queries, output", ms(cpu_of[INPROC] - cpu_libs)],
        ["helper path: the client (interpreter included)", ms(cpu_of[WARM])],
        ["helper path: the helper's process for the query (mean of the warm runs)",
         ms(helper_cpu / warm_runs if warm_runs else 0.0)],
    ]))
    report.tables.append(Table("imports of one in-process run by top-level package (`-X importtime`: the sum of its "
                               "modules' own times, ms; the 15 largest)",
                               ["package", "ms"], [[k, v] for k, v in import_breakdown(
                                   next(iter(kinds.values())), root, env_inproc)[:15]]))
    report.tables.append(Table("imports of one run through the helper by top-level package (ms, the 10 largest)",
                               ["package", "ms"], [[k, v] for k, v in import_breakdown(
                                   next(iter(kinds.values())), root, env)[:10]]))
    if not_helper:
        report.notes.append(f"{len(not_helper)} of the {len(answered)} warm runs were not answered by the helper: "
                            f"{sorted(set(x.split(' ', 1)[1] for x in not_helper))}")
    report.notes.append(f"targets (the {len(targets)} most-called functions): {', '.join(targets)}; "
                        f"command: {' '.join(base)} callers NAME, in {root}, embedded FalkorDB of "
                        f"{settings.data_dir} running (warm); {len(answered)} warm runs traced, "
                        f"{len(answered) - len(not_helper)} answered by the helper.")
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
