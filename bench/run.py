"""Benchmarks of orbit-lsp on real corpora, recorded in ``bench/RESULTS.md``.

    python -m bench.run index   [--corpus stdlib|PATH] [--repeat N]
    python -m bench.run reindex [--corpus stdlib|PATH] [--n 40]
    python -m bench.run queries [--corpus stdlib|PATH] [--repeat 5]
    python -m bench.run lsp     [--corpus stdlib|PATH] [--n 20] [--saves 20] [--first-lenses [--open REL]]
    python -m bench.run ts-resolution [--package rxjs@7.8.1 | --corpus PATH]  (bench/ts_resolution.py)
    python -m bench.run ts-syntax [--package zod@3.25.76 --package effect@3.22.4 | --corpus PATH]  (bench/ts_syntax.py)
    python -m bench.run ts-callers [--package zod@3.25.76 --package rxjs@7.8.1 | --corpus PATH] [--top 30]
                                                                               (bench/ts_callers.py)
    python -m bench.run peers   [--corpus stdlib|PATH] [--k 20] [--tools jedi,jedi-full,pyright]  (bench/peers.py)
    python -m bench.run profile [--corpus stdlib|PATH] [--top 60]                                 (bench/profile.py)
    python -m bench.run mcp     [--corpus stdlib|PATH] [--n 20]                                   (bench/mcp.py)
    python -m bench.run changes [--projects requests==2.32.3,flask==3.0.3 | --corpus PATH] [--n 50]  (bench/changes.py)
    python -m bench.run cli-latency [--corpus stdlib|PATH] [--n 20] [--k 5]                       (bench/cli_latency.py)
    python -m bench.run scale   [--corpus-set python|mixed] [--reindex-n 20] [--lsp]             (bench/scale.py)

``--corpus`` also takes ``django`` / ``pypi:NAME==VERSION`` (an sdist, see bench/corpora.py).

Each subcommand prints a table and appends a dated entry (machine, exact command, table) to the
results file (``--results``, default ``bench/RESULTS.md``; ``--no-record`` to skip).

- Corpora are *copies*, made once under the cache dir (``--cache-dir``, default
  ``~/.cache/orbit-bench``): ``stdlib`` is the running Python's standard library (without
  ``site-packages`` and ``__pycache__``), a PATH is copied to ``corpora/<name>-<hash>``.
  ``reindex`` edits files of the copy and restores them (a journal restores an edit left over by an
  interrupted run), so no benchmark ever writes to the original tree.
- Graphs live in a dedicated data dir (``--data-dir``, default ``<cache dir>/data``) with its own
  embedded FalkorDB, so benchmarks never touch the user's graphs. ``index`` restarts that server
  before the run so its memory peak belongs to this run.
- The functions ``run_index``, ``run_reindex`` and ``run_queries`` (and ``main(argv, settings=…)``)
  are what the smoke test calls; they return a ``Report``.

Percentiles are nearest-rank (p95 of 20 samples is the 19th smallest).
"""

from __future__ import annotations

import argparse
import ast
import collections
import cProfile
import datetime as dt
import gc
import hashlib
import importlib.metadata
import logging
import math
import os
import pickle
import platform
import pstats
import random
import resource
import shlex
import shutil
import statistics
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

from orbit_lsp.config import Settings
from orbit_lsp.graph import embedded
from orbit_lsp.graph import queries as Q
from orbit_lsp.graph.connection import GraphStore, code_graph_name
from orbit_lsp.graph.errors import QueryRejected, QueryTimeout
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.index.walk import walk_workspace

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "RESULTS.md"
DEFAULT_CACHE = Path(os.environ.get("ORBIT_BENCH_CACHE") or (Path.home() / ".cache" / "orbit-bench"))
PHASES = ("walk", "parse", "resolve", "flow", "write", "cache")  # flow: value-flow rounds after the first

# Targets of the graph-foundation issue ("Speed").
TARGET_COLD_RATIO = 2.0
TARGET_REINDEX_P95_MS = 50.0
TARGET_QUERY_P95_MS = 10.0

_COPY_IGNORE = shutil.ignore_patterns("__pycache__", "site-packages", "*.pyc", "*.pyo")


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# -- reports ----------------------------------------------------------------------------------
@dataclass
class Table:
    caption: str
    headers: list[str]
    rows: list[list]


@dataclass
class Report:
    """One benchmark run: its tables, notes and raw figures (``data``, for tests and scripts)."""

    name: str
    corpus: str
    command: str
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict = field(default_factory=dict)


def _cell(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if v == 0 or abs(v) < 0.0005:
            return "0" if v == 0 else "<0.001"
        return f"{v:.3g}" if abs(v) < 1 else f"{v:,.1f}" if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def md_table(t: Table) -> str:
    out = ["| " + " | ".join(t.headers) + " |", "|" + "|".join("---" for _ in t.headers) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in t.rows]
    return "\n".join(out)


def render(report: Report, machine: dict) -> str:
    when = dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    parts = [
        f"## {when} · {report.name} · {report.corpus}",
        "",
        f"- machine: {machine['summary']}",
        f"- code: {machine['code']}",
        f"- command: `{report.command}`",
        "",
    ]
    for t in report.tables:
        if t.caption:
            parts += [f"**{t.caption}**", ""]
        parts += [md_table(t), ""]
    if report.notes:
        parts += ["Notes:", ""] + [f"- {n}" for n in report.notes] + [""]
    return "\n".join(parts)


def record(report: Report, machine: dict, results: Path | None) -> str:
    """Print the report and append it to ``results`` (when not None). Returns the markdown."""
    text = render(report, machine)
    print(text)
    if results is not None:
        results = Path(results)
        results.parent.mkdir(parents=True, exist_ok=True)
        header = "" if results.exists() else (
            "# Benchmark results\n\nAppended by `python -m bench.run` (see `bench/run.py`), newest last. "
            "Targets (issue 2, \"Speed\"): cold index ≤ 2x read+`ast.parse` of the same files; "
            "re-index of one file p95 ≤ 50 ms; impact, callers, call chain p95 ≤ 10 ms.\n\n")
        with open(results, "a", encoding="utf-8") as fh:
            fh.write(header + text + "\n")
    return text


def machine_info(settings: Settings, load: tuple | None = None, code: str | None = None) -> dict:
    mem_gib = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem_gib = int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    st = embedded.status(settings.data_dir)
    try:
        client_v = importlib.metadata.version("falkordb")
    except importlib.metadata.PackageNotFoundError:
        client_v = "?"
    end = os.getloadavg()
    load = load or end
    info = {
        "cores": os.cpu_count(), "memory_gib": mem_gib, "python": platform.python_version(),
        "falkordb": st.get("falkordb_version"), "falkordb_py": client_v, "platform": platform.platform(),
        "load": load,
    }
    info["code"] = code or code_version()
    info["summary"] = (f"{info['cores']} cores, {mem_gib:.1f} GiB RAM, {platform.system()} {platform.machine()}, "
                       f"Python {info['python']}, FalkorDB {info['falkordb'] or '?'} (embedded), "
                       f"falkordb-py {client_v}; load average (1/5/15 min) at start {load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f}, "
                       f"at end {end[0]:.2f}/{end[1]:.2f}/{end[2]:.2f}")
    return info


def code_version() -> str:
    """Commit of the checkout and the uncommitted changes under ``orbit_lsp/`` (others may be
    editing while a benchmark runs)."""
    import subprocess

    repo = BENCH_DIR.parent
    try:
        sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--", "orbit_lsp"],
                               capture_output=True, text=True, timeout=10).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git)"
    changed = sorted(line[3:] for line in dirty if line.strip())
    return f"commit {sha or '?'}" + (f", uncommitted changes in {', '.join(changed)}" if changed else ", clean orbit_lsp/")


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds process ``pid`` has used (``/proc/PID/stat``); None when there
    is no such process or it cannot be read."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    except (OSError, IndexError, ValueError):
        return None


# -- statistics -------------------------------------------------------------------------------
def pct(values, p: float):
    """Nearest-rank percentile (None for no values)."""
    s = sorted(values)
    if not s:
        return None
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def ms(v):
    return None if v is None else v * 1000


# -- corpora ----------------------------------------------------------------------------------
def stdlib_path() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def prepare_corpus(spec: str, cache_dir: Path, refresh: bool = False) -> tuple[Path, str]:
    """Copy the corpus (``stdlib`` or a directory) under ``cache_dir`` once; return (copy, label)."""
    cache_dir = Path(cache_dir).expanduser()
    if spec == "stdlib":
        src = stdlib_path()
        dst = cache_dir / "stdlib"
        label = f"stdlib of Python {platform.python_version()}"
    else:
        src = Path(spec).expanduser().resolve()
        if not src.is_dir():
            raise SystemExit(f"bench: corpus {spec!r} is not a directory")
        digest = hashlib.sha1(str(src).encode()).hexdigest()[:8]
        dst = cache_dir / "corpora" / f"{src.name}-{digest}"
        label = src.name
    marker = dst.with_name(dst.name + ".source")
    stamp = f"{src}\nPython {platform.python_version()}\n"
    current = marker.read_text() if marker.exists() else None
    if refresh or not dst.is_dir() or current != stamp:
        log(f"copying corpus {src} -> {dst}")
        tmp = dst.with_name(dst.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(dst, ignore_errors=True)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, tmp, symlinks=True, ignore=_COPY_IGNORE)
        os.replace(tmp, dst)
        marker.write_text(stamp)
    return dst, label


def bench_settings(data_dir: Path) -> Settings:
    return Settings(data_dir=Path(data_dir).expanduser(), falkordb_url=None)


def open_store(settings: Settings) -> GraphStore:
    store = GraphStore(settings)
    store.connect()
    return store


def open_indexed(root: Path, store: GraphStore, settings: Settings) -> tuple[WorkspaceIndexer, object, float]:
    """Re-open (or, when needed, build) the corpus' graph. Returns (indexer, report, seconds)."""
    ix = WorkspaceIndexer(root, store, settings)
    t = time.perf_counter()
    rep = ix.index_all()
    return ix, rep, time.perf_counter() - t


# -- index --------------------------------------------------------------------------------------
def _read_parse(paths: list[Path]) -> tuple[int, int]:
    errors = nbytes = 0
    for p in paths:
        with open(p, "rb") as fh:
            data = fh.read()
        nbytes += len(data)
        try:
            ast.parse(data, filename=str(p))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            errors += 1
    return errors, nbytes


def baseline(paths: list[Path], gc_paused: bool) -> tuple[float, int, int]:
    """Seconds to read and ``ast.parse`` every file (with the cyclic GC on, or paused).

    Objects an earlier index left in the GC's permanent generation (the indexer freezes what a
    full index leaves alive) are unfrozen first: frozen, they are not scanned, and a later run's
    GC-on baseline came out ~30 % faster than the first run's."""
    was = gc.isenabled()
    gc.unfreeze()
    gc.collect()
    (gc.disable if gc_paused else gc.enable)()
    try:
        t = time.perf_counter()
        errors, nbytes = _read_parse(paths)
        return time.perf_counter() - t, errors, nbytes
    finally:
        (gc.enable if was else gc.disable)()


class GcWatch:
    """Times the cyclic GC's passes (``gc.callbacks``) while the block runs."""

    def __enter__(self):
        self.passes: list[tuple[int, float]] = []
        self._t0 = 0.0
        gc.callbacks.append(self._cb)
        return self

    def _cb(self, phase, info):
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.passes.append((info.get("generation", -1), time.perf_counter() - self._t0))

    def __exit__(self, *exc):
        gc.callbacks.remove(self._cb)
        return False

    def summary(self) -> dict:
        return {"passes": len(self.passes), "seconds": sum(d for _g, d in self.passes),
                "longest": max((d for _g, d in self.passes), default=0.0)}


def child_pids(pid: int) -> list[int]:
    """The processes ``pid`` started that still run (``/proc/PID/task/*/children``; [] when
    ``pid`` is gone)."""
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out += [int(x) for x in fh.read().split()]
    except OSError:
        pass
    return out


def proc_status(pid: int | None) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of a process, KiB (``/proc/PID/status``; a key is missing when
    unreadable)."""
    out: dict[str, int] = {}
    if not pid:
        return out
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                k, _, v = line.partition(":")
                if k in ("VmHWM", "VmRSS"):
                    out[k] = int(v.split()[0])  # kB
    except OSError:
        pass
    return out


def server_memory(store: GraphStore, settings: Settings, graph_name: str) -> tuple[dict, list[str]]:
    """FalkorDB memory: INFO memory, /proc VmHWM of the embedded server, GRAPH.MEMORY USAGE."""
    notes: list[str] = []
    out: dict = {}
    conn = store.connect().connection
    info = conn.info("memory")
    out["used_memory"] = info.get("used_memory")
    out["used_memory_peak"] = info.get("used_memory_peak")
    out["used_memory_rss"] = info.get("used_memory_rss")
    st = embedded.status(settings.data_dir)
    proc = proc_status(st.get("pid"))
    out["vm_hwm_kb"] = proc.get("VmHWM")
    out["vm_rss_kb"] = proc.get("VmRSS")
    try:
        raw = conn.execute_command("GRAPH.MEMORY", "USAGE", graph_name)
        if isinstance(raw, (list, tuple)):
            raw = dict(zip(raw[::2], raw[1::2]))
        out["graph_memory"] = {(k.decode() if isinstance(k, bytes) else str(k)): v for k, v in dict(raw).items()}
    except Exception as exc:  # noqa: BLE001 - an unsupported command is reported, not fatal
        out["graph_memory"] = None
        notes.append(f"`GRAPH.MEMORY USAGE` not available: {exc}")
    return out, notes


def _txt(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _fmt_mib(nbytes) -> str | None:
    return None if nbytes is None else f"{nbytes / 2**20:,.1f} MiB"


def _phases(rep) -> str:
    return ", ".join(f"{k} {v:.2f} s" for k, v in rep.timings.items())


def run_index(corpus: Path, label: str, settings: Settings, command: str, repeat: int = 1,
              restart_server: bool = False, profile: bool = False) -> Report:
    """Baseline (read + ast.parse of the walk's Python files), cold full index, re-open."""
    root = Path(os.path.realpath(corpus))
    gname = code_graph_name(root)
    rep_out = Report("index", label, command)
    walk = walk_workspace(root, settings.max_file_bytes, settings.exclude)
    py_files = [sf.abs for sf in walk.files if sf.lang == "python"]
    log(f"index: {len(py_files)} Python files listed by the walk ({len(walk.files)} source files)")
    for p in py_files:  # warm the page cache so neither side pays the first disk read
        with open(p, "rb") as fh:
            fh.read()

    store = open_store(settings)
    runs = []
    for r in range(max(1, repeat)):
        b_on, errs, nbytes = baseline(py_files, gc_paused=False)
        b_off, _, _ = baseline(py_files, gc_paused=True)
        log(f"run {r + 1}: baseline {b_on:.2f} s (GC on), {b_off:.2f} s (GC paused); {errs} files do not parse")
        # cold: no graph, no cache
        store.graph(gname).delete()
        cache = Path(settings.data_dir) / "cache" / f"{gname}.sqlite"
        cache.unlink(missing_ok=True)
        if restart_server and r == 0:
            store.close()
            embedded.stop(settings.data_dir)
            store = open_store(settings)  # started here, outside the timed index
        ix = WorkspaceIndexer(root, store, settings)
        with GcWatch() as gcw:
            t = time.perf_counter()
            cold = ix.index_all()
            cold_s = time.perf_counter() - t
        log(f"run {r + 1}: cold index {cold_s:.2f} s ({cold.mode})")
        del ix  # a re-open is a new process: only its own state is alive
        gc.collect()
        ix2 = WorkspaceIndexer(root, store, settings)
        t = time.perf_counter()
        reopen = ix2.index_all()
        reopen_s = time.perf_counter() - t
        log(f"run {r + 1}: re-open {reopen_s:.2f} s ({reopen.mode})")
        del ix2  # the next baseline must not pay GC scans of a heap full of index state
        gc.collect()
        runs.append({"baseline_gc_on": b_on, "baseline_gc_paused": b_off, "parse_errors_baseline": errs,
                     "bytes": nbytes, "cold": cold, "cold_s": cold_s, "reopen": reopen, "reopen_s": reopen_s,
                     "gc": gcw.summary()})

    graph_counts = Q.counts(store.graph(gname)).rows[0]
    mem, notes = server_memory(store, settings, gname)
    rusage_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    first = runs[0]["cold"]

    def col(fn):
        vals = [fn(x) for x in runs]
        return vals + ([statistics.median(vals)] if len(runs) > 1 else [])

    headers = ["metric"] + [f"run {i + 1}" for i in range(len(runs))] + (["median"] if len(runs) > 1 else [])
    blank = [None] * (len(headers) - 2)
    rows = [
        ["Python files (walk)", len(py_files)] + blank,
        ["source bytes", runs[0]["bytes"]] + blank,
        ["files indexed", first.files] + blank,
        ["symbols", first.symbols] + blank,
        ["imports (IMPORTS edges)", graph_counts["imports"]] + blank,
        ["calls (CALLS edges)", graph_counts["calls"]] + blank,
        ["inherits (INHERITS edges)", graph_counts["inherits"]] + blank,
        ["package uses (USES_PACKAGE edges)", graph_counts["uses_package"]] + blank,
        ["packages", first.packages] + blank,
        ["unresolved calls", first.unresolved_calls] + blank,
        ["bound call sites", first.call_sites] + blank,
        ["unbound share of call sites", f"{first.unresolved_calls / max(1, first.unresolved_calls + first.call_sites):.1%}"]
        + blank,
        ["value-flow rounds (files resolved again)", f"{first.flow_rounds} ({first.flow_files})"] + blank,
        ["parse errors (indexer / baseline)", f"{len(first.parse_errors)} / {runs[0]['parse_errors_baseline']}"] + blank,
        ["skipped files", len(first.skipped)] + blank,
        ["baseline read+ast.parse, GC on (s)"] + col(lambda x: x["baseline_gc_on"]),
        ["baseline read+ast.parse, GC paused (s)"] + col(lambda x: x["baseline_gc_paused"]),
        ["cold index wall (s)"] + col(lambda x: x["cold_s"]),
    ]
    rows += [[f"  cold {ph} (s)"] + col(lambda x, ph=ph: x["cold"].timings.get(ph, 0.0)) for ph in PHASES]
    rows += [
        ["  cold: cyclic GC passes (s, in the bench process)"] + col(lambda x: x["gc"]["seconds"]),
        ["  cold: longest GC pass (s)"] + col(lambda x: x["gc"]["longest"]),
        ["  cold: unaccounted (s) = wall − phases"] + col(lambda x: x["cold_s"] - sum(x["cold"].timings.values())),
        ["files/s (cold)"] + col(lambda x: x["cold"].files / x["cold_s"]),
        ["symbols/s (cold)"] + col(lambda x: x["cold"].symbols / x["cold_s"]),
        ["ratio cold / baseline GC on (target ≤ 2)"] + col(lambda x: x["cold_s"] / x["baseline_gc_on"]),
        ["ratio cold / baseline GC paused"] + col(lambda x: x["cold_s"] / x["baseline_gc_paused"]),
        ["re-open, no change (s)"] + col(lambda x: x["reopen_s"]),
    ]
    rows += [[f"  re-open {ph} (s)"] + col(lambda x, ph=ph: x["reopen"].timings.get(ph, 0.0)) for ph in PHASES]
    rows += [
        ["re-open mode", ", ".join(sorted({x["reopen"].mode for x in runs}))] + blank,
        ["peak RSS, bench process", f"{rusage_kb / 1024:,.0f} MiB"] + blank,
        ["peak RSS, largest child process (parse workers or a forked resolution process, whose RSS counts the pages it shares with the bench process)", f"{children_kb / 1024:,.0f} MiB"] + blank,
        ["FalkorDB used_memory_peak (INFO)", _fmt_mib(mem["used_memory_peak"])] + blank,
        ["FalkorDB VmHWM (/proc)", _fmt_mib(mem["vm_hwm_kb"] * 1024 if mem["vm_hwm_kb"] else None)] + blank,
        ["FalkorDB used_memory now", _fmt_mib(mem["used_memory"])] + blank,
    ]
    gm = mem.get("graph_memory")
    if gm:
        for k, v in gm.items():
            if isinstance(v, (list, tuple)):  # per label / type: [name, MB, name, MB, ...]
                v = ", ".join(f"{_txt(a)} {b}" for a, b in zip(v[::2], v[1::2]))
            rows.append([f"graph memory (MB): {k.removesuffix('_sz_mb')}", v] + blank)
    rep_out.tables.append(Table("", headers, rows))
    rep_out.notes += notes
    rep_out.notes.append("Baseline = reading and `ast.parse`-ing the same Python files as the walk lists, "
                         "in the same run, page cache warm. The indexer pauses the cyclic GC, so the "
                         "GC-paused baseline is the like-for-like (stricter) one.")
    rep_out.notes.append("Phases are the indexer's own timings: 'parse' includes reading, hashing and "
                         "classifying each file; 'cache' is pickling the per-file state for the next re-open.")
    rep_out.notes.append("Peak RSS of the bench process covers the whole run (baselines and every repeat); "
                         "FalkorDB figures are the embedded server's" +
                         (" since its restart at the start of this run." if restart_server else "."))
    if graph_counts["calls"] != first.calls or graph_counts["imports"] != first.imports:
        rep_out.notes.append(f"graph edge counts differ from the indexer's report: report calls={first.calls}, "
                             f"imports={first.imports}")
    if profile:
        store.graph(gname).delete()
        cache.unlink(missing_ok=True)
        prof = cProfile.Profile()
        ix = WorkspaceIndexer(root, store, settings)
        prof.enable()
        t = time.perf_counter()
        prep = ix.index_all()
        psecs = time.perf_counter() - t
        prof.disable()
        hdr = ["function", "calls", "own ms", "cumulative ms"]
        rep_out.tables.append(Table(f"cProfile of one more cold index ({psecs:.1f} s under the profiler, "
                                    f"phases {_phases(prep)}; work done in parse worker processes is not "
                                    "visible here, it shows as waiting on a lock); top by cumulative time", hdr,
                                    _profile_top(prof, "cumulative", 25)))
        rep_out.tables.append(Table("same profile, top by own time", hdr, _profile_top(prof, "tottime", 20)))
    ratio = statistics.median([x["cold_s"] / x["baseline_gc_on"] for x in runs])
    rep_out.data = {"runs": runs, "counts": graph_counts, "memory": mem, "rss_kb": rusage_kb,
                    "children_rss_kb": children_kb,
                    "ratio_gc_on": ratio, "graph": gname}
    store.close()
    return rep_out


# -- reindex ------------------------------------------------------------------------------------
def _functions_with_body_lines(tree: ast.AST) -> list[ast.AST]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body \
                and node.body[0].lineno > node.lineno:
            out.append(node)
    out.sort(key=lambda n: n.lineno)
    return out


def make_edit(data: bytes, interface: bool, i: int, rng: random.Random) -> tuple[bytes, str]:
    """The edited content of a file and what was done.

    ``interface``: append a comment line and a new top-level function (changes the file's
    interface). Else insert a ``pass`` line into the body of a random function after its first
    statement (no interface change; later lines shift). Falls back to appending a comment line.
    """
    nl = b"\r\n" if b"\r\n" in data[:4096] else b"\n"
    base = data if data.endswith((b"\n", b"\r")) or not data else data + nl
    if interface:
        add = nl.join([b"", f"# orbit-bench edit {i}".encode(), f"def _orbit_bench_fn_{i}():".encode(),
                       f"    return {i}".encode(), b""])
        return base + add[len(nl):], "append function"
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        tree = None
    funcs = _functions_with_body_lines(tree) if tree is not None else []
    if funcs:
        fn = rng.choice(funcs)
        first = fn.body[0]
        lines = data.splitlines(keepends=True)
        stmt_line = lines[first.lineno - 1]
        indent = stmt_line[: len(stmt_line) - len(stmt_line.lstrip(b" \t"))]
        at = first.end_lineno  # insert after the first statement (after a docstring, say)
        new_line = indent + f"pass  # orbit-bench edit {i}".encode() + nl
        if at <= len(lines) and not lines[at - 1].endswith((b"\n", b"\r")):
            lines[at - 1] += nl
        edited = b"".join(lines[:at] + [new_line] + lines[at:])
        try:
            ast.parse(edited)
            return edited, f"body line in {fn.name}()"
        except (SyntaxError, ValueError):
            pass
    return base + f"# orbit-bench edit {i}".encode() + nl, "append comment"


class _Journal:
    """Original content of the file being edited, so an interrupted run is undone next time."""

    def __init__(self, path: Path, root: Path):
        self.path = path
        self.root = root

    def recover(self) -> str | None:
        if not self.path.exists():
            return None
        try:
            with open(self.path, "rb") as fh:
                j = pickle.load(fh)
        except (OSError, pickle.PickleError, EOFError):
            self.path.unlink(missing_ok=True)
            return None
        if j.get("root") == str(self.root):
            (self.root / j["rel"]).write_bytes(j["data"])
            self.path.unlink()
            return j["rel"]
        return None

    def begin(self, rel: str, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "wb") as fh:
            pickle.dump({"root": str(self.root), "rel": rel, "data": data}, fh)

    def end(self) -> None:
        self.path.unlink(missing_ok=True)


def _timed_reindex(ix: WorkspaceIndexer, path: Path) -> tuple[float, object]:
    t = time.perf_counter()
    rep = ix.reindex_file(path)
    return time.perf_counter() - t, rep


def _profile_top(prof: cProfile.Profile, key: str, n: int) -> list[list]:
    st = pstats.Stats(prof)
    items = []
    for (fname, line, func), (cc, nc, tt, ct, _callers) in st.stats.items():
        short = fname
        for marker in ("/orbit_lsp/", "/site-packages/", "/lib/python"):
            if marker in fname:
                short = fname[fname.index(marker) + 1:]
                break
        where = f"{short}:{line}({func})" if line else func
        items.append([where, nc, tt * 1000, ct * 1000])
    items.sort(key=lambda r: r[3] if key == "cumulative" else r[2], reverse=True)
    return items[:n]


def run_reindex(corpus: Path, label: str, settings: Settings, command: str, n: int = 40, seed: int = 42,
                cache_dir: Path = DEFAULT_CACHE, profile: bool = True, max_lines: int = 1000) -> Report:
    """Edit N files (≤ max_lines lines) of the indexed corpus one at a time, alternating an
    interface change and a body edit, and time ``reindex_file``; every file is restored (and
    re-indexed, timed separately) right after its edit."""
    root = Path(os.path.realpath(corpus))
    out = Report("reindex", label, command)
    journal = _Journal(Path(cache_dir) / "journal" / f"{code_graph_name(root)}.pickle", root)
    recovered = journal.recover()
    if recovered:
        out.notes.append(f"restored {recovered} left edited by an interrupted run")
    store = open_store(settings)
    ix, rep0, open_s = open_indexed(root, store, settings)
    log(f"reindex: opened the graph in {open_s:.2f} s ({rep0.mode}, {rep0.files} files)")
    # as the language server does after its first index (index.isolated.index_all_isolated)
    prepare_s = ix.prepare_edits()
    graph = store.graph(ix.graph.name)
    before = Q.counts(graph).rows[0]
    cands = sorted(rel for rel, st in ix.state.items()
                   # facts_blob, not facts: decoding every file's facts here (outside the indexer's
                   # paused GC) left ~1,800 decoded files for the cyclic GC to scan, and one of its
                   # 100-200 ms full collections landed in a timed edit
                   if st.lang == "python" and st.facts_blob is not None and not st.parse_error and st.lines <= max_lines)
    rng = random.Random(seed)
    picks = rng.sample(cands, min(n, len(cands)))
    cases = []
    for i, rel in enumerate(picks):
        path = root / rel
        orig = path.read_bytes()
        want_if = i % 2 == 0
        edited, what = make_edit(orig, want_if, i, rng)
        old_if = ix.state[rel].facts.interface()
        journal.begin(rel, orig)
        try:
            path.write_bytes(edited)
            secs, rep = _timed_reindex(ix, path)
            new_facts = ix.state[rel].facts
            changed_if = new_facts is None or new_facts.interface() != old_if
        finally:
            path.write_bytes(orig)
            rsecs, rrep = _timed_reindex(ix, path)
            journal.end()
        if rep.parse_errors:
            out.notes.append(f"edit of {rel} did not parse: {rep.parse_errors}")
        t = rep.timings
        cases.append({"rel": rel, "lines": ix.state[rel].lines, "edit": what, "intended_interface": want_if,
                      "interface_changed": changed_if, "seconds": secs,
                      "resolve": t.get("resolve", 0.0), "write": t.get("write", 0.0),
                      "written_files": rep.written_files, "restore_seconds": rsecs,
                      "restore_written_files": rrep.written_files, "edited": edited, "orig": orig})
        log(f"reindex {i + 1}/{len(picks)} {rel}: {secs * 1000:.1f} ms ({what}; "
            f"{rep.written_files} files rewritten), restore {rsecs * 1000:.1f} ms")
    after = Q.counts(graph).rows[0]

    def group(name, items, key="seconds"):
        secs = [c[key] for c in items]
        if not items:
            return [name, 0, None, None, None, None, None, None, None]
        if key == "seconds":
            res = statistics.mean(c["resolve"] for c in items) * 1000
            wr = statistics.mean(c["write"] for c in items) * 1000
            other = statistics.mean(c["seconds"] - c["resolve"] - c["write"] for c in items) * 1000
            wf = statistics.mean(c["written_files"] for c in items)
        else:
            res = wr = other = None
            wf = statistics.mean(c["restore_written_files"] for c in items)
        return [name, len(items), ms(pct(secs, 50)), ms(pct(secs, 95)), ms(max(secs)), other, res, wr, wf]

    headers = ["edit", "n", "p50 ms", "p95 ms", "max ms", "mean read+parse+other ms", "mean resolve ms",
               "mean write ms", "mean files rewritten"]
    ifc = [c for c in cases if c["interface_changed"]]
    body = [c for c in cases if not c["interface_changed"]]
    rows = [group("interface changed", ifc), group("no interface change", body), group("all edits", cases),
            group("restores (undo each edit)", cases, key="restore_seconds")]
    out.tables.append(Table(f"re-index of one file (≤ {max_lines} lines), {len(cases)} files, seed {seed}; "
                            f"target p95 ≤ {TARGET_REINDEX_P95_MS:.0f} ms", headers, rows))
    slow = sorted(cases, key=lambda c: -c["seconds"])[:8]
    out.tables.append(Table("slowest edits", ["file", "lines", "edit", "interface changed", "ms", "resolve ms",
                                              "write ms", "files rewritten"],
                            [[c["rel"], c["lines"], c["edit"], "yes" if c["interface_changed"] else "no",
                              c["seconds"] * 1000, c["resolve"] * 1000, c["write"] * 1000, c["written_files"]]
                             for c in slow]))
    mism = [c["rel"] for c in cases if c["intended_interface"] != c["interface_changed"]]
    if mism:
        out.notes.append(f"{len(mism)} edit(s) did not change the interface as intended (the table groups "
                         f"by the actual change): {', '.join(mism[:10])}")
    same = {k: before[k] == after[k] for k in before}
    out.notes.append("graph counts after all edits were restored equal those before: "
                     + ("yes" if all(same.values()) else f"NO: before {before}, after {after}"))
    out.notes.append(f"the resolver edits use was prepared after opening, as the language server does "
                     f"(WorkspaceIndexer.prepare_edits): {prepare_s * 1000:.0f} ms, not counted in any edit")
    out.notes.append(f"graph opened in {open_s:.2f} s before the edits (mode {rep0.mode}); "
                     "'read+parse+other' = wall time minus the indexer's resolve and write timings.")

    if profile and cases:
        c = slow[0]
        path = root / c["rel"]
        journal.begin(c["rel"], c["orig"])
        prof = cProfile.Profile()
        try:
            path.write_bytes(c["edited"])
            prof.enable()
            t = time.perf_counter()
            prep = ix.reindex_file(path)
            psecs = time.perf_counter() - t
            prof.disable()
        finally:
            path.write_bytes(c["orig"])
            ix.reindex_file(path)
            journal.end()
        hdr = ["function", "calls", "own ms", "cumulative ms"]
        out.tables.append(Table(f"cProfile of the slowest edit re-applied: {c['rel']} ({c['edit']}), "
                                f"{psecs * 1000:.1f} ms under the profiler, {prep.written_files} files rewritten; "
                                "top by cumulative time", hdr, _profile_top(prof, "cumulative", 18)))
        out.tables.append(Table("same profile, top by own time", hdr, _profile_top(prof, "tottime", 12)))
    for c in cases:
        c.pop("edited", None)
        c.pop("orig", None)
    out.data = {"cases": cases, "counts_before": before, "counts_after": after, "graph": ix.graph.name}
    store.close()
    return out


# -- queries ------------------------------------------------------------------------------------
REPLAY_TIMEOUT_MS = 60_000


class _Recorder:
    """A ``Graph`` stand-in for the named queries that remembers every query *before* it runs,
    so the query that timed out is known too."""

    def __init__(self, graph):
        self.graph = graph
        self.name = graph.name
        self.sent: list[tuple[str, dict]] = []

    def ro_query(self, cypher, params=None, timeout_ms=None):
        self.sent.append((cypher, dict(params or {})))
        return self.graph.ro_query(cypher, params, timeout_ms)

    def query(self, cypher, params=None, timeout_ms=None):
        self.sent.append((cypher, dict(params or {})))
        return self.graph.query(cypher, params, timeout_ms)


def _chain_pairs(graph, k: int, seed: int) -> list[tuple[str, str, int]]:
    """Up to ``k`` (source qual, target qual, hops) pairs whose shortest CALLS path has 2..4 hops
    (computed by BFS over every CALLS edge); both quals unique in the graph; hop counts mixed.
    A graph without such pairs (a tiny corpus) gets endpoints of 2-hop paths that also have a
    direct edge (hops 1)."""
    edges = graph.ro_query("MATCH (a:Symbol)-[:CALLS]->(b:Symbol) RETURN a.qual, b.qual",
                           timeout_ms=120_000).rows
    dup = {r[0] for r in graph.ro_query("MATCH (s:Symbol) WITH s.qual AS q, count(s) AS n WHERE n > 1 RETURN q",
                                        timeout_ms=120_000).rows}
    succ: dict[str, set[str]] = collections.defaultdict(set)
    for a, b in edges:
        if a not in dup and b not in dup and a != b:
            succ[a].add(b)
    rng = random.Random(seed)
    sources = sorted(succ)
    rng.shuffle(sources)
    pairs: list[tuple[str, str, int]] = []
    fallback: list[tuple[str, str, int]] = []
    want = 2
    for s in sources:
        if len(pairs) >= k:
            break
        dist = {s: 0}
        frontier = [s]
        for d in range(1, 5):
            nxt = []
            for u in frontier:
                for v in succ.get(u, ()):
                    if v not in dist:
                        dist[v] = d
                        nxt.append(v)
            frontier = nxt
        by_d = collections.defaultdict(list)
        for v, d in dist.items():
            if d >= 2:
                by_d[d].append(v)
        if by_d:
            d = want if by_d.get(want) else max(by_d)
            pairs.append((s, rng.choice(sorted(by_d[d])), d))
            want = 2 + (want - 1) % 3  # 2 -> 3 -> 4 -> 2
        else:  # only a shortcut: a real 2-hop path whose endpoints are also directly linked
            two = sorted({w for v in succ[s] for w in succ.get(v, ()) if w != s})
            if two:
                fallback.append((s, rng.choice(two), 1))
    return pairs or fallback[:k]


def run_queries(corpus: Path, label: str, settings: Settings, command: str, repeat: int = 5, k: int = 20,
                seed: int = 42) -> Report:
    """p50/p95 of impact, callers, call chain and file_symbols on the indexed corpus."""
    root = Path(os.path.realpath(corpus))
    out = Report("queries", label, command)
    store = open_store(settings)
    ix, rep0, open_s = open_indexed(root, store, settings)
    graph = store.graph(ix.graph.name)
    log(f"queries: opened the graph in {open_s:.2f} s ({rep0.mode}); choosing targets")
    imported = [r["path"] for r in Q.most_depended_on(graph, k).rows]
    called = [r[0] for r in graph.ro_query(
        "MATCH (c:Symbol)-[e:CALLS]->(s:Symbol) WHERE s.kind IN ['function', 'method'] "
        "RETURN s.qual, count(e) AS n ORDER BY n DESC, s.qual LIMIT $k", {"k": k}, timeout_ms=120_000).rows]
    pairs = _chain_pairs(graph, k, seed)
    largest = graph.ro_query("MATCH (f:File) RETURN f.path, f.lines ORDER BY f.lines DESC, f.path LIMIT 1").rows
    richest = graph.ro_query("MATCH (f:File)-[:DEFINES]->(s:Symbol) WITH f, count(s) AS n "
                             "RETURN f.path, f.lines ORDER BY n DESC, f.path LIMIT 1", timeout_ms=120_000).rows
    lens_files = largest + [r for r in richest if r not in largest]

    rec = _Recorder(graph)
    kinds = {
        "impact (1..4 hops)": [(p, lambda p=p: Q.impact(rec, p)) for p in imported],
        "callers (depth 1)": [(q, lambda q=q: Q.callers(rec, q)) for q in called],
        "call chain": [(f"{a} -> {b} ({d} hops)", lambda a=a, b=b: Q.call_chain(rec, a, b)) for a, b, d in pairs],
        "file_symbols (lens data)": [(f"{p} ({n} lines)", lambda p=p: Q.file_symbols(rec, p)) for p, n in lens_files],
    }
    samples: dict[str, list[tuple[float, str]]] = {name: [] for name in kinds}
    answers: dict[str, dict[str, tuple]] = {name: {} for name in kinds}  # target -> (answer, rows)
    sent: dict[str, dict[str, list]] = {name: {} for name in kinds}  # target -> queries of its last run
    failed: dict[str, dict[str, str]] = {name: {} for name in kinds}  # target -> error (run once only)
    for _ in range(repeat):
        for name, items in kinds.items():
            for target, fn in items:
                if target in failed[name]:
                    continue
                rec.sent = []
                t = time.perf_counter()
                try:
                    ans = fn()
                except (QueryTimeout, QueryRejected) as exc:
                    samples[name].append((time.perf_counter() - t, target))
                    failed[name][target] = f"{type(exc).__name__}: {exc}"
                    sent[name][target] = rec.sent
                    log(f"{name} of {target} failed: {exc}")
                    continue
                secs = time.perf_counter() - t
                nrows = len(ans.rows) if name != "callers (depth 1)" else sum(len(r["callers"]) for r in ans.rows)
                samples[name].append((secs, target))
                answers[name][target] = (ans, nrows)
                sent[name][target] = rec.sent
    targets = {"impact (1..4 hops)": TARGET_QUERY_P95_MS, "callers (depth 1)": TARGET_QUERY_P95_MS,
               "call chain": TARGET_QUERY_P95_MS, "file_symbols (lens data)": None}
    rows = []
    for name, s in samples.items():
        secs = [x[0] for x in s]
        if not s:
            rows.append([name, 0, 0, None, None, None, None, None, 0, "no targets", "–"])
            continue
        p95 = ms(pct(secs, 95))
        slowest = max(s)
        ok = list(answers[name].values())
        mean_rows = statistics.mean(n for _a, n in ok) if ok else None
        mean_q = statistics.mean(len(v) for v in sent[name].values())
        tgt = targets[name]
        verdict = "–" if tgt is None else ("ok" if p95 <= tgt and not failed[name] else "OVER")
        rows.append([name, len(kinds[name]), len(s), ms(pct(secs, 50)), p95, ms(slowest[0]), mean_q, mean_rows,
                     len(failed[name]), slowest[1], verdict])
    out.tables.append(Table(f"query latency, each target run {repeat} times (round-robin), wall time in the client",
                            ["query", "targets", "samples", "p50 ms", "p95 ms", "max ms", "queries/answer",
                             "mean rows", "failed", "slowest target", f"p95 ≤ {TARGET_QUERY_P95_MS:.0f} ms"], rows))
    for name, errs in failed.items():
        for target, err in errs.items():
            out.notes.append(f"{name} of {target} failed (not repeated; its one sample is the time to the "
                             f"failure): {err}")
    # per-target medians for the slowest targets of each kind
    per = []
    for name, s in samples.items():
        by_t = collections.defaultdict(list)
        for secs, target in s:
            by_t[target].append(secs)
        worst = sorted(by_t.items(), key=lambda kv: -statistics.median(kv[1]))[:3]
        for target, v in worst:
            n = answers[name][target][1] if target in answers[name] else "failed"
            per.append([name, target, ms(statistics.median(v)), n])
    out.tables.append(Table("slowest targets (median of the repeats)", ["query", "target", "median ms", "rows"], per))
    # where the time goes: replay the Cypher of each kind's slowest target, server time per query
    db_graph = store.connect().select_graph(graph.name)
    split = []
    for name, s in samples.items():
        if not s:
            continue
        target = max(s)[1]
        for i, (query, params) in enumerate(sent[name][target], 1):
            t = time.perf_counter()
            text = query if len(query) <= 90 else query[:87] + "..."
            try:
                res = db_graph.ro_query(query, params, timeout=REPLAY_TIMEOUT_MS)
            except Exception as exc:  # noqa: BLE001 - a replay that fails again is reported
                split.append([name if i == 1 else "", i, f"`{text}`", None, None,
                              (time.perf_counter() - t) * 1000, f"failed again: {exc}"])
                continue
            wall = time.perf_counter() - t
            split.append([name if i == 1 else "", i, f"`{text}`", len(res.result_set or []),
                          res.run_time_ms, wall * 1000, wall * 1000 - res.run_time_ms])
    out.tables.append(Table("where the time goes: the Cypher of each kind's slowest target replayed once "
                            f"(timeout {REPLAY_TIMEOUT_MS // 1000} s; server = FalkorDB's internal execution time; "
                            "client = the rest: round trip and reply parsing)",
                            ["query", "step", "cypher", "rows", "server ms", "wall ms", "client ms"], split))
    # correctness of the chains against the BFS that chose them
    found = sum(1 for (a, b, d) in pairs
                if any(len(r["path"]) - 1 == d
                       for r in answers["call chain"].get(f"{a} -> {b} ({d} hops)", (Q.Answer(), 0))[0].rows))
    out.notes.append(f"call chain pairs come from a BFS over all CALLS edges (hops: "
                     f"{dict(collections.Counter(d for _a, _b, d in pairs))}); "
                     f"{found}/{len(pairs)} answers have a path of exactly the BFS length.")
    out.notes.append(f"targets: the {len(imported)} most-imported files, the {len(called)} functions/methods "
                     "with most incoming CALLS edges, the largest file by lines and the file with most symbols. Graph opened in "
                     f"{open_s:.2f} s ({rep0.mode}).")
    out.data = {"samples": {k: [x[0] for x in v] for k, v in samples.items()}, "pairs": pairs,
                "chains_found": found, "failed": failed, "graph": ix.graph.name}
    store.close()
    return out


# -- command line -------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--corpus", default="stdlib",
                        help="'stdlib' (default), 'django' (Django 5.1's sdist), 'pypi:NAME==VERSION' or a directory")
    common.add_argument("--results", type=Path, default=RESULTS, help="results file to append to")
    common.add_argument("--no-record", action="store_true", help="print only; do not append to the results")
    common.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE,
                        help="where corpus copies (and by default the data dir) live")
    common.add_argument("--data-dir", type=Path, default=None,
                        help="orbit data dir of the benchmark's embedded FalkorDB (default <cache-dir>/data)")
    common.add_argument("--refresh-corpus", action="store_true", help="copy the corpus again")
    common.add_argument("--seed", type=int, default=42)
    common.add_argument("--verbose", action="store_true", help="show the indexer's warnings")
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pi = sub.add_parser("index", parents=[common], help="baseline parse, cold full index, re-open")
    pi.add_argument("--repeat", type=int, default=1)
    pi.add_argument("--profile", action="store_true",
                    help="after the measured runs, cProfile one more cold index and report the top entries")
    pi.add_argument("--no-restart-server", action="store_true",
                    help="keep the running embedded server (its memory peak then predates this run)")
    pr = sub.add_parser("reindex", parents=[common], help="re-index one edited file, N times")
    pr.add_argument("--n", type=int, default=40)
    pr.add_argument("--max-lines", type=int, default=1000)
    pr.add_argument("--no-profile", action="store_true", help="skip the cProfile of the slowest edit")
    pq = sub.add_parser("queries", parents=[common], help="impact, callers, call chain, lens data latency")
    pq.add_argument("--repeat", type=int, default=5)
    pq.add_argument("--k", type=int, default=20, help="targets per query kind")
    pl = sub.add_parser("lsp", parents=[common], help="a real orbit-lsp server: start-up, save -> lenses, "
                                                       "request latency, server RSS (see bench/lsp.py)")
    pl.add_argument("--n", type=int, default=20, help="targets per request kind")
    pl.add_argument("--saves", type=int, default=20, help="files edited and saved")
    pl.add_argument("--first-lenses", action="store_true",
                    help="only initialize → first lenses of an open file, cold and re-opened")
    pl.add_argument("--open", default=None, help="with --first-lenses: the file opened (relative to the corpus)")
    from bench.ts_resolution import add_parser as add_ts_resolution

    add_ts_resolution(sub, common)  # ts-resolution (see bench/ts_resolution.py)
    from bench.ts_callers import add_parser as add_ts_callers

    add_ts_callers(sub, common)  # ts-callers (see bench/ts_callers.py)
    from bench.ts_syntax import add_parser as add_ts_syntax

    add_ts_syntax(sub, common)  # ts-syntax (see bench/ts_syntax.py)

    from bench import mcp, peers, profile  # their options live with their code

    peers.add_parser(sub, common)
    profile.add_parser(sub, common)
    mcp.add_parser(sub, common)
    from bench import changes  # test selection of `orbit-lsp changes` (issue 16)

    changes.add_parser(sub, common)
    from bench import cli_latency, scale  # issue 19: a query from the command line; the scale corpus

    cli_latency.add_parser(sub, common)
    scale.add_parser(sub, common)
    return p


def main(argv: list[str] | None = None, settings: Settings | None = None) -> int:
    """Run one benchmark. ``settings`` overrides the benchmark data dir (tests pass the session's);
    the embedded server is then never restarted."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    load = os.getloadavg()
    code = code_version()  # at the start: others may commit while a benchmark runs
    command = "python -m bench.run " + shlex.join(argv)
    own_server = settings is None
    if settings is None:
        settings = bench_settings(args.data_dir or (args.cache_dir / "data"))
    if args.cmd == "ts-resolution":  # its corpus is an npm package (or a directory used as it is)
        from bench.ts_resolution import run as run_ts_resolution

        record(run_ts_resolution(args, settings, command), machine_info(settings, load, code),
               None if args.no_record else args.results)
        return 0
    if args.cmd == "ts-callers":  # its corpora are npm packages' src/ (or a directory used as it is)
        from bench.ts_callers import run as run_ts_callers

        record(run_ts_callers(args, settings, command), machine_info(settings, load, code),
               None if args.no_record else args.results)
        return 0
    if args.cmd == "scale":  # its corpus is built from several projects (bench/scale.py)
        from bench.scale import run as run_scale

        record(run_scale(args, settings, command, restart_server=own_server), machine_info(settings, load, code),
               None if args.no_record else args.results)
        return 0
    if args.cmd == "ts-syntax":  # its corpora are npm packages (or a directory used as it is)
        from bench.ts_syntax import run as run_ts_syntax

        record(run_ts_syntax(args, settings, command), machine_info(settings, load, code),
               None if args.no_record else args.results)
        return 0
    if args.cmd == "changes":  # its corpora are projects with their test suites (bench/changes.py)
        from bench.changes import run as run_changes

        record(run_changes(args, settings, command), machine_info(settings, load, code),
               None if args.no_record else args.results)
        return 0
    from bench.corpora import resolve_spec

    corpus, label = prepare_corpus(resolve_spec(args.corpus, args.cache_dir), args.cache_dir, args.refresh_corpus)
    orbit_log = logging.getLogger("orbit_lsp")
    level = orbit_log.level
    if not args.verbose:  # parse errors of test data files etc. are counted in the tables
        orbit_log.setLevel(logging.ERROR)
    try:
        if args.cmd == "index":
            report = run_index(corpus, label, settings, command, repeat=args.repeat,
                               restart_server=own_server and not args.no_restart_server, profile=args.profile)
        elif args.cmd == "reindex":
            report = run_reindex(corpus, label, settings, command, n=args.n, seed=args.seed,
                                 cache_dir=args.cache_dir, profile=not args.no_profile, max_lines=args.max_lines)
        elif args.cmd in ("peers", "profile", "mcp", "cli-latency"):
            from bench import cli_latency, mcp, peers, profile

            report = {"peers": peers, "profile": profile, "mcp": mcp,
                      "cli-latency": cli_latency}[args.cmd].run(corpus, label, settings, command, args)
        elif args.cmd == "lsp" and args.first_lenses:
            from bench.lsp import run_first_lenses

            report = run_first_lenses(corpus, label, settings, command, rel=args.open)
        elif args.cmd == "lsp":
            from bench.lsp import run_lsp

            report = run_lsp(corpus, label, settings, command, n=args.n, saves=args.saves)
        else:
            report = run_queries(corpus, label, settings, command, repeat=args.repeat, k=args.k, seed=args.seed)
    finally:
        orbit_log.setLevel(level)
    record(report, machine_info(settings, load, code), None if args.no_record else args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
