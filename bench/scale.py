"""The scale corpus: a monorepo of 20,000+ real Python files (and a mixed Python/TypeScript one).

    python -m bench.run scale [--corpus-set python|mixed] [--reindex-n 20] [--lsp] [--no-cold]

The workspace is built once under ``<cache dir>/scale/<set>/`` from real source distributions
laid side by side, each in its own folder (fetched and unpacked by ``bench.corpora`` like the
other corpora; npm packages with ``npm pack``, as ``bench.ts_resolution``): the standard library
copy, Django, SymPy, Salt, Transformers, Twisted, the Kubernetes client, Airflow, ansible-core,
NetworkX, the Vertex AI SDK, Pygments, pip, Pylint and Wagtail (``PYTHON_SET``); the mixed set is Django beside the TypeScript
sources of RxJS, Zod and Effect (``MIXED_SET``). Files are copied (never linked): the re-index
measure edits them.

Measured, each in its own process as a user runs it:

- the floor: reading and ``ast.parse``-ing the walk's Python files on one core (GC on and
  paused), and on every core (a process pool over chunks, wall time); the one-core GC-on floor
  again right after the cold index: the target's ratio is to the mean of the two, so a machine
  that slows or speeds up during the run (shared: the same floor took 65 to 94 s in one day)
  moves both sides;
- cold index: ``orbit-lsp index WS --json`` with no graph and no cache, the embedded FalkorDB
  restarted first, twice. The first run is timed as the floor is, unobserved by the memory
  sampler (reading PSS costs the kernel a walk of each process's page tables: 3-5 CPU-seconds
  of the 2 cores the index itself keeps busy, as a user's index never pays): wall time, its
  ratio to each floor, the indexer's phases, the CPU of orbit's processes and of FalkorDB; and
  each phase of it (from its progress lines, ``phase_busy``) with the cores busy on the whole
  machine meanwhile and the core-seconds left idle: what overlapping the phases could still
  gain, against the ratio its CPU allows on this machine's cores. The second run, from scratch
  again, measures memory: the peak of orbit's process tree (the sum over the ``orbit-lsp``
  process, its parse workers and its forked resolution processes: as PSS, which the target is
  judged on, read at most once a second, and as RSS, read every 50 ms, which counts the pages a
  fork shares once per process; see ``TreeRss``) and of its largest process, FalkorDB's VmHWM
  and ``used_memory_peak`` (the server restarted before it), and its wall time with the
  sampler on;
- re-open unchanged: the same command again (mode ``unchanged``);
- one-file re-index p95 (``bench.run.run_reindex``: edits alternate an interface change and a
  body edit, each restored);
- with ``--lsp``: ``bench.lsp.run_lsp`` on the workspace: initialize → first lenses cold and
  re-opened, lens/hover/call-hierarchy/impact latency on the most imported files and most called
  functions, the server's RSS.

Targets (issue 19): cold ≤ 1.5× the one-core floor, orbit's peak memory (PSS) ≤ 1.5 GB, re-index p95 ≤
50 ms, requests p95 ≤ 20 ms.
"""

from __future__ import annotations

import ast
import concurrent.futures as cf
import gc
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.corpora import fetch_sdist
from bench.run import (Report, Table, baseline, child_pids, cpu_seconds, log, ms, open_store, pct, prepare_corpus,
                       proc_status, run_reindex, server_memory)

PYTHON_SET = ("stdlib", "django==5.1", "sympy==1.13.3", "salt==3007.1", "transformers==4.46.3",
              "twisted==24.10.0", "kubernetes==31.0.0", "apache-airflow==2.10.3", "ansible-core==2.17.5",
              "networkx==3.4.2", "google-cloud-aiplatform==1.71.1",
              "pygments==2.18.0", "pip==24.3.1", "pylint==3.3.1", "wagtail==6.3.1")
MIXED_SET = ("django==5.1", "npm:rxjs@7.8.1", "npm:zod@3.25.76", "npm:effect@3.10.0")
SETS = {"python": PYTHON_SET, "mixed": MIXED_SET}
MIN_PYTHON_FILES = 20_000

TARGET_RATIO = 1.5
TARGET_RSS_MIB = 1.5 * 1024
TARGET_REQUEST_P95_MS = 20.0


def add_parser(sub, common) -> None:
    p = sub.add_parser("scale", parents=[common],
                       help="the 20,000-file corpus: cold index vs the parse floor, memory, re-open, "
                            "re-index (see bench/scale.py)")
    p.add_argument("--corpus-set", choices=sorted(SETS), default="python",
                   help="python: 20,000+ Python files (default); mixed: Django with TypeScript projects")
    p.add_argument("--reindex-n", type=int, default=20, help="files edited for the one-file re-index (0: skip)")
    p.add_argument("--lsp", action="store_true", help="also run the language-server benchmark on it (long)")
    p.add_argument("--lsp-n", type=int, default=10, help="targets per request kind with --lsp")
    p.add_argument("--no-cold", action="store_true", help="skip the cold index (re-open and re-index only)")
    p.add_argument("--workspace-dir", type=Path, default=None, metavar="DIR",
                   help="measure this folder instead of building the corpus set (a corpus of your own; the "
                        "re-index edits and restores its files)")


# -- the corpus -----------------------------------------------------------------------------------
def _source_dir(spec: str, cache_dir: Path) -> tuple[str, Path]:
    """(folder name in the workspace, unpacked source) of one spec."""
    if spec == "stdlib":
        path, _label = prepare_corpus("stdlib", cache_dir)
        return "stdlib", path
    if spec.startswith("npm:"):
        from bench.ts_resolution import fetch_package

        pkg = spec[4:]
        return pkg.replace("@", "-").replace("/", "-").lstrip("-"), fetch_package(pkg, cache_dir)
    name, version = spec.split("==")
    return f"{name}-{version}", fetch_sdist(name, version, cache_dir)


def build_workspace(set_name: str, cache_dir: Path) -> tuple[Path, list[tuple[str, Path]]]:
    """The workspace of ``set_name`` (built once; a marker lists what it holds)."""
    cache_dir = Path(cache_dir).expanduser()
    specs = SETS[set_name]
    ws = cache_dir / "scale" / set_name
    marker = ws.with_name(ws.name + ".built")
    stamp = "\n".join(specs) + "\n"
    parts = [_source_dir(spec, cache_dir) for spec in specs]
    if not ws.is_dir() or not marker.exists() or marker.read_text() != stamp:
        log(f"building the scale workspace {ws}")
        shutil.rmtree(ws, ignore_errors=True)
        tmp = ws.with_name(ws.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for name, src in parts:
            shutil.copytree(src, tmp / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules", ".git"))
        os.replace(tmp, ws)
        marker.write_text(stamp)
    return ws, parts


# -- measures -------------------------------------------------------------------------------------
def _parse_chunk(paths: list[str]) -> int:
    errors = 0
    for p in paths:
        with open(p, "rb") as fh:
            data = fh.read()
        try:
            ast.parse(data, filename=p)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            errors += 1
    return errors


def parallel_baseline(paths: list[Path], workers: int) -> float:
    """Wall seconds to read and ``ast.parse`` every file in a pool of ``workers`` processes."""
    names = [str(p) for p in sorted(paths, key=lambda p: -p.stat().st_size)]
    chunks = [names[i::workers * 8] for i in range(workers * 8)]
    t = time.perf_counter()
    with cf.ProcessPoolExecutor(max_workers=workers) as pool:
        list(pool.map(_parse_chunk, chunks))
    return time.perf_counter() - t


def _proc_kib(path: str, key: str) -> int:
    """The KiB figure on the line starting with ``key`` of a ``/proc`` file (0 when the
    process or the line is gone)."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _rss_kib(pid: int) -> int:
    return proc_status(pid).get("VmRSS", 0)


def _pss_kib(pid: int) -> int:
    """Proportional set size (``/proc/PID/smaps_rollup``): pages shared with other processes
    (a forked resolution process shares its parent's pages until either writes them) count
    as a share each, so a sum over processes is the memory they really use."""
    return _proc_kib(f"/proc/{pid}/smaps_rollup", "Pss:")


class TreeRss:
    """Samples the RSS of a process and its descendants every ``interval`` seconds: the peak of
    their sum and of the largest one, and the peak of their summed PSS (``_pss_kib``: summed
    RSS counts the pages a fork shares once per process); and the CPU seconds each used, as last
    seen (``cpu_s``: their sum; a process that ended misses at most its last ``interval``). CPU
    seconds are the work done, which a loaded machine stretches less than the wall.

    ``rss`` False: no memory is read at all (the peaks stay 0), only the CPU seconds and the
    machine's busy cores, for a run timed as a user's is.

    PSS is read at most every ``pss_interval`` seconds (never when None), and only when the
    summed RSS could hold a new peak (PSS never exceeds RSS): the kernel walks a process's page tables to answer it,
    ~34 ms for a 1.35 GB process (2026-12-03), so reading it every 50 ms kept this thread busy
    and took a fifth to two fifths of a core from the 2-core index it measures. A cold index's
    memory rises and falls over seconds (a phase, a resolution child's life), not within one.
    ``own_cpu_s``: the CPU seconds this sampling itself used (its thread, kernel time
    included), reported so a reader can tell what measuring cost."""

    def __init__(self, pid: int, interval: float = 0.05, pss_interval: float | None = 1.0, rss: bool = True):
        self.pid, self.interval, self.pss_interval, self.rss = pid, interval, pss_interval, rss
        self.peak_sum = self.peak_one = self.peak_pss = 0
        self.peak_procs = 0
        self.pss_samples = 0
        self.own_cpu_s = 0.0
        self.cpu: dict[int, float] = {}
        self.busy: list[tuple[float, float]] = []  # (time.time(), busy cores machine-wide since the last)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        start = time.thread_time()
        next_pss = 0.0
        last_busy, next_busy = _machine_jiffies(), time.monotonic() + BUSY_INTERVAL_S
        while not self._stop.is_set():
            pids, todo = [], [self.pid]
            while todo:
                p = todo.pop()
                pids.append(p)
                todo += child_pids(p)
            rss = [_rss_kib(p) for p in pids] if self.rss else []
            total = sum(rss)
            self.peak_sum = max(self.peak_sum, total)
            self.peak_one = max(self.peak_one, max(rss, default=0))
            self.peak_procs = max(self.peak_procs, sum(1 for r in rss if r) if self.rss else len(pids))
            now = time.monotonic()
            if self.pss_interval is not None and now >= next_pss and total > self.peak_pss:
                self.peak_pss = max(self.peak_pss, sum(_pss_kib(p) for p in pids))
                self.pss_samples += 1
                next_pss = now + self.pss_interval
            for p in pids:
                self.cpu[p] = max(self.cpu.get(p, 0.0), cpu_seconds(p) or 0.0)
            if now >= next_busy:
                jiffies = _machine_jiffies()
                if jiffies and last_busy:
                    (b1, t1), (b0, t0) = jiffies, last_busy
                    self.busy.append((time.time(), (b1 - b0) / max(1, t1 - t0) * (os.cpu_count() or 1)))
                last_busy, next_busy = jiffies, now + BUSY_INTERVAL_S
            self.own_cpu_s = time.thread_time() - start
            self._stop.wait(self.interval)

    @property
    def cpu_s(self) -> float:
        return sum(self.cpu.values())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


BUSY_INTERVAL_S = 0.5  # how often ``TreeRss`` reads the machine's busy cores


def _machine_jiffies() -> tuple[int, int] | None:
    """(busy, total) CPU time of the whole machine so far, in clock ticks (the ``cpu`` line of
    ``/proc/stat``: idle and iowait are not busy); None where it cannot be read."""
    try:
        with open("/proc/stat") as fh:
            ticks = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


def phase_busy(lines: list[tuple[float, str]], busy: list[tuple[float, float]], end: float,
               cores: int) -> list[tuple[str, float, float | None, float | None]]:
    """The phases of an index from its timestamped progress lines (``"indexing DIR: parsing
    5653/22506 …"``: the word after the colon; ``"orbit-lsp: starting …"``) with, for each, its
    seconds, the mean number of busy cores of the whole machine while it ran (``busy``:
    ``TreeRss.busy``; None without a sample in it) and the core-seconds left idle
    (``(cores - busy) * seconds``): ``[(phase, seconds, busy cores, idle core-seconds)]``."""
    marks: list[tuple[float, str]] = []
    for at, line in lines:
        head, sep, rest = line.partition(": ")
        if not sep or not (head.startswith("indexing ") or head == "orbit-lsp"):
            continue  # a warning, not progress
        phase = rest.split(" ", 1)[0]
        if not marks or marks[-1][1] != phase:
            marks.append((at, phase))
    out = []
    for (t0, phase), (t1, _) in zip(marks, marks[1:] + [(end, "")]):
        samples = [b for at, b in busy if t0 < at <= t1]
        mean = sum(samples) / len(samples) if samples else None
        out.append((phase, t1 - t0, mean, None if mean is None else max(0.0, cores - mean) * (t1 - t0)))
    return out


def cli_index(ws: Path, settings, extra: tuple[str, ...] = (), memory: bool = True) -> dict:
    """``orbit-lsp index WS --json`` in a child process: its JSON result, wall seconds, the
    peaks of its process tree (KiB), the CPU seconds of that tree (``cpu_s``) and of the
    embedded FalkorDB (``server_cpu_s``, None when none runs), what sampling them cost
    (``sampler_cpu_s``, ``pss_samples``: see ``TreeRss``), its stderr lines (the progress) and
    ``phases`` (``phase_busy`` of those lines: seconds, busy cores and idle core-seconds of each).
    ``memory`` False: no memory is read (the peaks are 0) and the CPU every 0.1 s instead of 0.05
    (a process that ended misses at most its last 0.1 s), so the run is timed as a user's is: the
    sampling that measures memory costs 3-5 CPU-seconds of a 2-core machine's cold index."""
    script = Path(sys.executable).parent / "orbit-lsp"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "orbit_lsp"]
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("ORBIT_FALKORDB_URL", None)
    env["ORBIT_DATA_DIR"] = str(settings.data_dir)
    from orbit_lsp.graph import embedded

    server = embedded.status(settings.data_dir).get("pid")  # the embedded FalkorDB, when running
    server_cpu = cpu_seconds(server) or 0.0
    t = time.perf_counter()
    proc = subprocess.Popen(cmd + ["index", str(ws), "--json", *extra], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    rss = TreeRss(proc.pid) if memory else TreeRss(proc.pid, interval=0.1, pss_interval=None, rss=False)
    lines: list[tuple[float, str]] = []  # (time.time() when read, line): the phases' times

    def read_progress() -> None:
        for line in proc.stderr:
            lines.append((time.time(), line.rstrip("\n")))

    reader = threading.Thread(target=read_progress, daemon=True)
    reader.start()
    out = proc.stdout.read()
    proc.wait()
    reader.join()
    wall, ended = time.perf_counter() - t, time.time()
    rss.stop()
    stderr = [line for _, line in lines]
    server_cpu = (cpu_seconds(server) or 0.0) - server_cpu if server else None
    if proc.returncode != 0:
        err = "\n".join(stderr).strip()
        raise SystemExit(f"bench: orbit-lsp index {ws} failed ({proc.returncode}): {out.strip()[-2000:]}\n"
                         f"{err[-2000:]}")  # with --json the error is on stdout
    return {"result": json.loads(out)["result"], "wall": wall, "peak_sum_kib": rss.peak_sum,
            "peak_pss_kib": rss.peak_pss, "peak_one_kib": rss.peak_one, "procs": rss.peak_procs,
            "cpu_s": rss.cpu_s, "server_cpu_s": server_cpu, "sampler_cpu_s": rss.own_cpu_s,
            "pss_samples": rss.pss_samples, "stderr": stderr,
            "phases": phase_busy(lines, rss.busy, ended, os.cpu_count() or 1)}


def _mib(kib) -> float | None:
    return None if kib is None else kib / 1024


def run(args, settings, command: str, restart_server: bool = True) -> Report:
    """The scale benchmark (see the module docstring). ``restart_server``: restart the embedded
    FalkorDB before the cold index (False when the caller shares its server, e.g. the tests)."""
    from orbit_lsp.graph import embedded
    from orbit_lsp.graph.connection import code_graph_name
    from orbit_lsp.index.walk import walk_workspace

    if args.workspace_dir is not None:
        ws = Path(args.workspace_dir).expanduser()
        parts = [(p.name, p) for p in sorted(ws.iterdir()) if p.is_dir()]
    else:
        ws, parts = build_workspace(args.corpus_set, args.cache_dir)
    root = Path(os.path.realpath(ws))
    gname = code_graph_name(root)
    walk = walk_workspace(root, settings.max_file_bytes, settings.exclude)
    py = [sf.abs for sf in walk.files if sf.lang == "python"]
    langs: dict[str, int] = {}
    for sf in walk.files:
        langs[sf.lang] = langs.get(sf.lang, 0) + 1
    label = (f"scale corpus '{args.corpus_set}'" if args.workspace_dir is None else str(ws)) + \
        f": {len(walk.files):,} source files"
    report = Report("scale", label, command)
    per_part = []
    for name, _src in parts:
        n = sum(1 for sf in walk.files if sf.rel.startswith(name + "/"))
        per_part.append([name, n])
    report.tables.append(Table("the workspace (" + str(root) + "): source files per project, as the walk lists them",
                               ["project", "files"], per_part + [["total", len(walk.files)]]))
    if args.workspace_dir is None and args.corpus_set == "python" and len(py) < MIN_PYTHON_FILES:
        report.notes.append(f"only {len(py):,} Python files: fewer than the {MIN_PYTHON_FILES:,} the issue asks for")
    nbytes = 0
    for p in py:  # page cache warm for both sides
        with open(p, "rb") as fh:
            nbytes += len(fh.read())
    load0 = os.getloadavg()
    rows: list[list] = [["files (walk): " + ", ".join(f"{k} {v:,}" for k, v in sorted(langs.items())),
                         len(walk.files), "–"], ["Python source bytes", nbytes, "–"]]
    one_on, errs, _ = baseline(py, gc_paused=False)
    one_off, _, _ = baseline(py, gc_paused=True)
    gc.collect()
    cores = os.cpu_count() or 1
    all_cores = parallel_baseline(py, cores)
    log(f"floor: one core {one_on:.1f} s (GC on), {one_off:.1f} s (GC paused); {cores} cores {all_cores:.1f} s")
    rows += [["floor: read + ast.parse, one core, GC on (s)", one_on, "–"],
             ["floor: read + ast.parse, one core, GC paused (s)", one_off, "–"],
             [f"floor: read + ast.parse, {cores} processes (s)", all_cores, "–"]]
    store = open_store(settings)
    one_on_after = None  # the one-core GC-on floor again, after the cold index
    phase_table = None
    if not args.no_cold:
        def from_scratch(store):
            """No graph, no cache, and (``restart_server``) a fresh server: its memory peak is
            the next run's. Returns the store to use."""
            store.graph(gname).delete()
            (Path(settings.data_dir) / "cache" / f"{gname}.sqlite").unlink(missing_ok=True)
            if restart_server:
                store.close()
                embedded.stop(settings.data_dir)
                store = open_store(settings)
            return store

        store = from_scratch(store)
        log(f"cold index of {len(walk.files):,} files (orbit-lsp index, a child process), timed without the "
            "memory sampler")
        cold = cli_index(root, settings, memory=False)
        res = cold["result"]
        log(f"cold index {cold['wall']:.1f} s ({res['mode']})")
        rows += [["cold index wall, orbit-lsp index (s)", cold["wall"], "–"]]
        rows += [[f"  {ph} (s, the indexer's phase)", v, "–"] for ph, v in res["timings"].items()]
        one_on_after, _, _ = baseline(py, gc_paused=False)  # the machine's speed may have moved
        floor_on = (one_on + one_on_after) / 2
        log(f"floor again: one core {one_on_after:.1f} s (GC on)")
        rows += [["floor: read + ast.parse, one core, GC on, again right after the cold index (s)", one_on_after, "–"],
                 ["ratio cold / floor one core GC on (the mean of the floors before and after it)", cold["wall"] / floor_on,
                  "ok" if cold["wall"] / floor_on <= TARGET_RATIO else "OVER"],
                 ["  ratio cold / that floor before it, after it",
                  f"{cold['wall'] / one_on:.2f} / {cold['wall'] / one_on_after:.2f}", "–"],
                 ["ratio cold / floor one core GC paused", cold["wall"] / one_off, "–"],
                 [f"ratio cold / floor {cores} processes", cold["wall"] / all_cores, "–"],
                 ["CPU of orbit's processes during the cold index (s)", cold["cpu_s"], "–"],
                 ["CPU of FalkorDB during the cold index (s)", cold["server_cpu_s"], "–"],
                 ["ratio CPU (orbit + FalkorDB) / floor one core GC on (mean): the work, whatever the load",
                  (cold["cpu_s"] + (cold["server_cpu_s"] or 0)) / floor_on, "–"],
                 ["facts decoded by the build, all processes (resolution work in a unit the load does not change)",
                  f"{res.get('facts_decoded', 0):,}", "–"],
                 ["files indexed / symbols / calls", f"{res['files']:,} / {res['symbols']:,} / {res['calls']:,}", "–"],
                 ["parse errors / skipped files", f"{len(res['parse_errors'])} / {len(res['skipped'])}", "–"]]
        phases = cold["phases"]
        idle = sum(p[3] or 0.0 for p in phases)
        work = cold["cpu_s"] + (cold["server_cpu_s"] or 0)
        rows += [["core-seconds left idle during the cold index (the machine's, phases below)", idle, "–"],
                 ["  ratio cold / floor had every idle core-second been used", (cold["wall"] - idle / cores) / floor_on,
                  "–"],
                 [f"  ratio the work allows on {cores} cores: CPU (orbit + FalkorDB) / {cores} / floor",
                  work / cores / floor_on, "–"]]
        phase_table = Table(
            "cold index by phase (from its progress lines): seconds, cores busy on the whole machine "
            f"(/proc/stat every {BUSY_INTERVAL_S} s; other work on the machine counts too) and core-seconds "
            f"left idle, of {cores} cores",
            ["phase", "seconds", "busy cores (mean)", "idle core-seconds"],
            [[ph, sec, "–" if b is None else b, "–" if i is None else i] for ph, sec, b, i in phases])
        # memory: the same cold index again, from scratch, with the memory sampler
        store = from_scratch(store)
        log("cold index again, with the memory sampler")
        memrun = cli_index(root, settings)
        log(f"cold index {memrun['wall']:.1f} s, peak PSS {_mib(memrun['peak_pss_kib']):.0f} MiB, "
            f"RSS {_mib(memrun['peak_sum_kib']):.0f} MiB")
        rows += [["cold index again, from scratch, with the memory sampler: wall (s; its figures below)",
                  memrun["wall"], "–"],
                 ["  its ratio to the floor one core GC on (the mean), as measured before 2026-12-05",
                  memrun["wall"] / floor_on, "–"],
                 ["  peak PSS of orbit's processes, summed (MiB)", _mib(memrun["peak_pss_kib"]),
                  "ok" if _mib(memrun["peak_pss_kib"]) <= TARGET_RSS_MIB else "OVER"],
                 ["  peak RSS of orbit's processes, summed (MiB; counts pages a fork shares twice)",
                  _mib(memrun["peak_sum_kib"]), "–"],
                 ["  peak RSS of its largest process (MiB)", _mib(memrun["peak_one_kib"]), "–"],
                 ["  orbit processes at once (most)", memrun["procs"], "–"],
                 ["  CPU of this benchmark's sampling of them (s; PSS read "
                  f"{memrun['pss_samples']} times, at most once a second)", memrun["sampler_cpu_s"], "–"],
                 ["  CPU of this benchmark's sampling in the timed run above (s; CPU only, every 0.1 s)",
                  cold["sampler_cpu_s"], "–"]]
        mem, notes = server_memory(store, settings, gname)
        report.notes += notes
        rows += [["FalkorDB VmHWM (MiB)", _mib(mem.get("vm_hwm_kb")), "–"],
                 ["FalkorDB used_memory_peak (MiB)", (mem.get("used_memory_peak") or 0) / 2**20, "–"]]
        phases = [line for line in cold["stderr"] if ": " in line][:40]
        if phases:
            report.notes.append("progress lines of the cold index (stderr, not a terminal): "
                                + " | ".join(phases))
    reopen = cli_index(root, settings)
    rows += [["re-open unchanged, orbit-lsp index (s)", reopen["wall"], "–"],
             ["  re-open mode", reopen["result"]["mode"], "–"],
             ["  re-open peak RSS summed (MiB)", _mib(reopen["peak_sum_kib"]), "–"]]
    load1 = os.getloadavg()
    report.tables.append(Table("cold index against the floor, memory, re-open", ["measure", "value", "target"], rows))
    if phase_table is not None:
        report.tables.append(phase_table)
    report.notes.append(f"load average (1 min) {load0[0]:.2f} at the floor, {load1[0]:.2f} after the re-open, on "
                        f"{cores} cores shared with other work: the ratios are measured in the same run.")
    report.data = {"files": len(walk.files), "python_files": len(py), "floor_one_core_s": one_on,
                   "floor_one_core_after_s": one_on_after,
                   "floor_all_cores_s": all_cores, "reopen_mode": reopen["result"]["mode"],
                   "cold": None if args.no_cold else {k: v for k, v in cold.items() if k != "stderr"},
                   "cold_memory": None if args.no_cold else {k: v for k, v in memrun.items() if k != "stderr"}}
    store.close()
    if args.reindex_n:
        sub = run_reindex(root, label, settings, command, n=args.reindex_n, seed=args.seed,
                          cache_dir=args.cache_dir, profile=False)
        for t in sub.tables[:1]:
            t.caption = "one-file re-index on the scale corpus: " + t.caption
            report.tables.append(t)
        report.notes += [f"re-index: {n}" for n in sub.notes]
    if args.lsp:
        from bench.lsp import run_lsp

        sub = run_lsp(root, label, settings, command, n=args.lsp_n, saves=args.lsp_n)
        for t in sub.tables:
            t.caption = "language server on the scale corpus: " + t.caption
            report.tables.append(t)
        report.notes += [f"lsp: {n}" for n in sub.notes]
    return report
