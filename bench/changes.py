"""Test-selection benchmark of ``orbit-lsp changes`` (issue 16)::

    python -m bench.run changes [--projects requests==2.32.3,flask==3.0.3 | --corpus PATH]
                                [--n 50] [--suite-timeout 600] [--python PY]

For each project (an sdist from PyPI, or ``--corpus`` a directory with a test suite):

1. a work copy under ``<cache dir>/changes/`` made a git repository (one commit), and a venv
   (``<cache dir>/changes/venv-<project>``) with the work copy installed editable and its test
   dependencies (``TEST_DEPS``, or ``--deps``; for the floor also ``COVERAGE_DEPS``, added to a venv
   made without them); ``--python`` uses an existing interpreter
   instead (the smoke test does);
2. the suite collected (``pytest --collect-only``) and run once unchanged: tests failing already
   are left out of every comparison;
3. ``--n`` functions or methods of the project's non-test code chosen at random (``--seed``),
   each edited in turn to raise at entry (``raise RuntimeError`` as its first statement, after a
   docstring); per edit: ``changes`` is timed (graph brought up to date, git diff, analysis: the
   warm path of ``orbit-lsp changes --tests``), the whole suite is run (bounded by
   ``--suite-timeout``), the edit is undone;
4. compared: failing tests (by function: parametrized cases count once) against the selection.
   Recall = failing tests selected / failing tests (over all edits); every miss is listed and
   classified: *may be affected* (in the separate list), *deeper than the test depth* (selected
   with depth 30), or *no CALLS path* (dynamic dispatch, callbacks, calls through third-party
   code the graph does not see). Selected share = collected items selected / collected items
   (mean over edits); likewise the may-be-affected share.
5. the reach floor (bench/changes_floor.py, off with ``--no-floor``): the unchanged suite run once
   under coverage with a context per test says which tests *enter* each edited function (execute
   a line of its body). No sound reachability-based selection selects fewer tests; per project
   the floor share (tests entering / collected), the selected share and the failing share
   (failing / collected) side by side, the recall of the selection against the entering tests,
   and per edit the tests selected that never enter the function (over-selection). All shares
   count collected items of the test functions in the set (parametrized cases of a selected,
   entering or failing function all count), the unit of the selected share. The coverage run is
   kept in ``--suite-cache`` too (key ``coverage``).
6. with ``--coverage-map DIR``: that coverage run's data file is kept as ``DIR/<project>.coverage``
   (the run is made again when the file is not there) and per edit the selection is also
   narrowed with it, through the call ``orbit-lsp changes --tests --coverage`` makes
   (``impact.analyse`` with ``Options(coverage=CoverageMap)``); per project both modes side by
   side: recall, every miss of the narrowed mode listed and classified, selected and
   may-be-affected shares, and the time of the narrowed analysis (graph brought up to date, git
   diff, static and narrowing passes).
"""

from __future__ import annotations

import ast
import os
import queue
import random
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.changes_floor import COVERAGE_DEPS, FORMAT, body_lines, entering, run_covered, run_outside
from bench.run import Report, Table, log, open_store, pct

DEFAULT_PROJECTS = "requests==2.32.3,flask==3.0.3"
TEST_DEPS = {
    "requests": ["pytest", "pytest-httpbin==2.1.0", "pytest-mock", "trustme", "PySocks", "werkzeug"],
    # flask 3.0.3's tests import _pytest.monkeypatch.notset, gone in pytest 8
    "flask": ["pytest<8", "asgiref", "python-dotenv", "greenlet", "blinker"],
}
EDIT_MARK = "raise RuntimeError('orbit-bench: breaking edit')"
# the same edit, recording the call stack that reached it (with the test pytest was running) in
# $ORBIT_BENCH_STACKS: one line, so the graph's line numbers still hold
TRACE_MARK = ("import os as _ob_os, json as _ob_json, traceback as _ob_tb; "
              "open(_ob_os.environ['ORBIT_BENCH_STACKS'], 'a').write(_ob_json.dumps("
              "[_ob_os.environ.get('PYTEST_CURRENT_TEST', ''), "
              "[[_f.filename, _f.lineno, _f.name] for _f in _ob_tb.extract_stack()]]) + '\\n'); " + EDIT_MARK)
DIAGNOSE_MAX = 150  # missed tests re-run with the tracing edit, per edit
SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - .*)?$")
ALL_FAIL = "<the whole suite: pytest could not start>"
TARGET_RECALL = 0.99
TARGET_SHARE = 0.25
TARGET_P95_S = 1.0


def add_parser(sub, common) -> None:
    p = sub.add_parser("changes", parents=[common],
                       help="test selection of `orbit-lsp changes` against real test runs (bench/changes.py)")
    p.add_argument("--projects", default=DEFAULT_PROJECTS,
                   help="comma-separated NAME==VERSION sdists (ignored with an explicit --corpus directory)")
    p.add_argument("--n", type=int, default=50, help="functions edited per project")
    p.add_argument("--suite-timeout", type=float, default=600, help="seconds one run of the suite may take")
    p.add_argument("--python", default=None,
                   help="run the suites with this interpreter (no venv is made; the floor needs coverage and "
                        "pytest-cov in it)")
    p.add_argument("--deps", default=None, help="comma-separated test dependencies (default: TEST_DEPS)")
    p.add_argument("--tests-dir", default=None, help="what pytest runs (default: tests/ when present, else .)")
    p.add_argument("--suite-cache", type=Path, default=None,
                   help="JSON file keeping each suite run's outcome (collected tests, failing unchanged, failing "
                        "per edit): runs found there are not run again (they depend on the project, the edit and "
                        "the interpreter, not on orbit), so the analysis can be measured again without the suites")
    p.add_argument("--value-flow", action="store_true",
                   help="index with ORBIT_VALUE_FLOW (parameters hold what call sites pass them; off by default)")
    p.add_argument("--no-floor", dest="floor", action="store_false",
                   help="skip the reach floor (the suite run once under coverage, bench/changes_floor.py)")
    p.add_argument("--coverage-map", type=Path, default=None, metavar="DIR",
                   help="keep the coverage run's data file in DIR and also measure the selection narrowed by it "
                        "(orbit-lsp changes --tests --coverage)")
    p.add_argument("--jobs", type=int, default=1,
                   help="suites run at once, each in its own work copy (suites that mostly wait on sockets "
                        "and timers finish sooner); the `changes` analyses are timed one at a time")


# -- preparation --------------------------------------------------------------------------------
def work_copy(src: Path, dest: Path) -> Path:
    """A fresh copy of ``src`` at ``dest``, one git commit."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".git", ".tox", "*.egg-info"))
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@b"}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "corpus", "--no-gpg-sign"]):
        subprocess.run(["git", *cmd], cwd=dest, check=True, capture_output=True, env=env)
    return dest


def make_venv(venv: Path, project: Path, deps: list[str]) -> str:
    """A venv with ``project`` installed editable and ``deps``; returns its python."""
    py = venv / "bin" / "python"
    stamp = venv / ".orbit-bench"
    want = f"{project}\n{' '.join(deps)}\n"
    if not (py.exists() and stamp.exists() and stamp.read_text() == want):
        shutil.rmtree(venv, ignore_errors=True)
        log(f"making the test venv {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, "-e", str(project), *deps], check=True, timeout=1800)
        stamp.write_text(want)
    return str(py)


def ensure_coverage(python: str) -> None:
    """``COVERAGE_DEPS`` installed in the venv of ``python`` when it cannot import them (kept
    out of the venv's stamp: a venv made without them is completed, not made again)."""
    probe = subprocess.run([python, "-c", "import coverage, pytest_cov"], capture_output=True)
    if probe.returncode:
        log(f"installing {' '.join(COVERAGE_DEPS)} for {python} (reach floor)")
        subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *COVERAGE_DEPS],
                       check=True, timeout=1800)


# -- running the suite --------------------------------------------------------------------------
def collect(python: str, root: Path, target: str, timeout: float) -> list[str]:
    res = subprocess.run([python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "--continue-on-collection-errors", target],
                         cwd=root, capture_output=True, text=True, timeout=timeout, env=source_env(root))
    return [line.strip() for line in res.stdout.splitlines() if "::" in line and not line.startswith(("ERROR", "FAILED"))]


def source_env(root: Path) -> dict:
    """The environment that makes a work copy's own package imported first (``src/`` layouts
    too), whichever copy the venv's editable install points at."""
    paths = [str(root / "src")] if (root / "src").is_dir() else []
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths + [str(root)])}


def run_suite(python: str, root: Path, target: str, timeout: float) -> tuple[set[str], float, bool]:
    """(failing node ids, seconds, finished in time)."""
    t = time.perf_counter()
    try:
        res = subprocess.run([python, "-m", "pytest", "-q", "-rfE", "--tb=no", "-p", "no:cacheprovider",
                              "--continue-on-collection-errors", target], cwd=root, capture_output=True, text=True,
                             timeout=timeout, env=source_env(root))
        out, done = res.stdout, True
    except subprocess.TimeoutExpired as exc:
        out, done = (exc.stdout or b"").decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else (exc.stdout or ""), False
    failing = set()
    for line in out.splitlines():
        m = SUMMARY.match(line.strip())
        if m and "::" in m.group(2):
            failing.add(m.group(2))
        elif m:  # a collection error of a whole file
            failing.add(m.group(2) + "::<collection>")
    if done and res.returncode in (3, 4) and not failing:
        # pytest could not start (a conftest.py or a plugin failed to import): every test fails
        failing.add(ALL_FAIL)
    return failing, time.perf_counter() - t, done


def function_id(node_id: str) -> str:
    """A node id without its parametrization (``test_x[1-2]`` -> ``test_x``)."""
    return node_id.split("[", 1)[0]


# -- edits --------------------------------------------------------------------------------------
def candidates(root: Path, is_test) -> list[tuple[str, str, int, int]]:
    """(path, qual, insert before line, indent) of every function or method whose body starts
    on its own line, in non-test Python files."""
    out = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if is_test(rel) or rel.startswith(("docs/", "examples/", "setup.py")) or "/tests/" in "/" + rel:
            continue
        try:
            data = p.read_bytes()
            tree = ast.parse(data)
        except (SyntaxError, ValueError):
            continue
        text = data.decode("utf-8", "replace").splitlines()

        def own_line(stmt) -> bool:
            """The statement starts its line (not ``def f(): ...`` on one line)."""
            return not text[stmt.lineno - 1][:stmt.col_offset].strip()

        def visit(node, prefix: str) -> None:
            for n in ast.iter_child_nodes(node):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    body = n.body
                    first = body[0]
                    doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
                    at = body[1] if doc and len(body) > 1 else first
                    line = at.lineno if at is not first or not doc else first.end_lineno + 1
                    if getattr(at, "decorator_list", None) and (at is not first or not doc):
                        line = min(d.lineno for d in at.decorator_list)
                    if first.lineno > n.lineno and own_line(first) and not any(isinstance(x, (ast.Yield, ast.YieldFrom)) for x in ast.walk(n)):
                        out.append((rel, prefix + n.name, line, first.col_offset))
                    visit(n, prefix + n.name + ".")
                elif isinstance(n, ast.ClassDef):
                    visit(n, prefix + n.name + ".")
        visit(tree, "")
    return out


def apply_edit(root: Path, rel: str, line: int, indent: int, mark: str = EDIT_MARK) -> bytes:
    """Insert the raising statement before ``line``; returns the original bytes."""
    p = root / rel
    original = p.read_bytes()
    lines = original.decode("utf-8").splitlines(keepends=True)
    lines.insert(line - 1, " " * indent + mark + "\n")
    p.write_bytes("".join(lines).encode())
    return original


# -- the run ------------------------------------------------------------------------------------
class SuiteCache:
    """Suite outcomes kept in a JSON file (``--suite-cache``), per project: ``get(key)`` the
    stored value (sets stored as sorted lists) or None; ``put(key, value)`` stores it and returns
    it. Without a path nothing is kept. Thread-safe (the edits run in threads)."""

    def __init__(self, path: Path | None, project: str):
        self.path, self.project = path, project
        self.lock = threading.Lock()
        self.data = {}
        if path is not None and path.exists():
            self.data = __import__("json").loads(path.read_text())

    def get(self, key: str):
        return self.data.get(self.project, {}).get(key)

    def put(self, key: str, value):
        if self.path is None:
            return value
        plain = [sorted(v) if isinstance(v, set) else v for v in value] if isinstance(value, tuple) else value
        with self.lock:
            self.data.setdefault(self.project, {})[key] = plain
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(__import__("json").dumps(self.data))
            tmp.replace(self.path)
        return value


def run(args, settings, command: str) -> Report:
    from bench.corpora import fetch_sdist

    cache = Path(args.cache_dir).expanduser()
    if getattr(args, "value_flow", False):
        settings = settings.model_copy(update={"value_flow": True})
    projects: list[tuple[str, Path]] = []
    if args.corpus not in ("stdlib", None):
        src = Path(args.corpus).expanduser().resolve()
        if not src.is_dir():
            name, _, version = args.corpus.removeprefix("pypi:").partition("==")
            src = fetch_sdist(name, version, cache)
        projects.append((src.name, src))
    else:
        for spec in args.projects.split(","):
            name, _, version = spec.strip().partition("==")
            projects.append((f"{name}-{version}", fetch_sdist(name, version, cache)))
    report = Report("changes", ", ".join(n for n, _ in projects), command)
    summary = Table("per project", ["project", "tests collected", "edits", "edits failing tests", "failing tests",
                                    "recall", "misses", "selected share (mean)", "may-be share (mean)",
                                    "changes p50 ms", "changes p95 ms", "suite s (mean)"], [])
    report.tables.append(summary)
    store = open_store(settings)
    try:
        for name, src in projects:
            _one(name, src, args, settings, store, cache, report, summary)
    finally:
        store.close()
    report.notes.append(f"targets: recall ≥ {TARGET_RECALL:.0%}, selected share ≤ {TARGET_SHARE:.0%} on average, "
                        f"changes p95 ≤ {TARGET_P95_S * 1000:.0f} ms warm")
    return report


def _one(name: str, src: Path, args, settings, store, cache: Path, report: Report, summary: Table) -> None:
    from orbit_lsp.changes import diff, impact
    from orbit_lsp.changes.selection import is_test_support
    from orbit_lsp.index.indexer import WorkspaceIndexer

    root = work_copy(src, cache / "changes" / name)
    target = args.tests_dir or ("tests" if (root / "tests").is_dir() else ".")
    python = args.python
    if python is None:
        deps = args.deps.split(",") if args.deps else TEST_DEPS.get(name.split("-")[0].lower(), ["pytest"])
        python = make_venv(cache / "changes" / f"venv-{name}", root, deps)
        if getattr(args, "floor", True):
            ensure_coverage(python)
    suites = SuiteCache(args.suite_cache, name)
    items = suites.get("collect") or suites.put("collect", collect(python, root, target, args.suite_timeout))
    got = suites.get("baseline")
    baseline, base_s, _ = ((set(got[0]), got[1], got[2]) if got else
                           suites.put("baseline", run_suite(python, root, target, args.suite_timeout)))
    log(f"{name}: {len(items)} tests collected, {len(baseline)} failing unchanged ({base_s:.1f} s)")
    if baseline:
        report.notes.append(f"{name}: {len(baseline)} tests fail before any edit and are left out: "
                            + ", ".join(sorted(baseline)[:10]) + (" …" if len(baseline) > 10 else ""))
    jobs = max(1, args.jobs)
    roots = [root] + [work_copy(src, cache / "changes" / f"{name}-job{j}") for j in range(2, jobs + 1)]
    indexers = []
    for r in roots:
        ix = WorkspaceIndexer(r, store, settings)
        ix.index_all()
        indexers.append(ix)
    per_fn = {}
    for i in items:
        per_fn[function_id(i)] = per_fn.get(function_id(i), 0) + 1
    cands = candidates(root, is_test_support)
    rng = random.Random(args.seed)
    chosen = rng.sample(cands, min(args.n, len(cands)))
    covered, enters, at_import = None, {}, {}
    map_dir = getattr(args, "coverage_map", None)
    map_file = map_dir.expanduser().resolve() / f"{name}.coverage" if map_dir is not None else None
    if map_file is not None and python != args.python:
        ensure_coverage(python)
    if getattr(args, "floor", True) or map_file is not None:
        covered = suites.get("coverage")
        if covered is None or covered.get("version") != FORMAT or (map_file is not None and not map_file.exists()):
            log(f"{name}: the suite once under coverage, a context per test (reach floor, coverage map)")
            got_cov, cov_s = run_covered(python, root, target, 3 * args.suite_timeout, source_env(root), keep=map_file)
            covered = suites.put("coverage", {**got_cov, "seconds": cov_s})
        log(f"{name}: coverage of {len(covered['tests'])} tests ({covered['seconds']:.1f} s)")
        for rel, qual, line, _indent in chosen:
            lines = body_lines((root / rel).read_bytes(), qual, line)
            enters[(rel, qual)] = {function_id(t) for t in entering(covered, rel, lines)} & per_fn.keys()
            at_import[(rel, qual)] = run_outside(covered, rel, lines)
    floor_rows: list[list] = []
    floor = {"entering": 0, "entering_selected": 0, "floor_shares": [], "failing_shares": [], "sel_shares": [],
             "over_shares": [], "failing_not_entering": 0, "run_outside": 0}

    def items_of(fns) -> int:
        """Collected items of the test functions ``fns`` (parametrized cases all count)."""
        return sum(per_fn.get(f, 0) for f in fns)

    times, shares, may_shares, suite_s = [], [], [], []
    counts = {"failing": 0, "hit": 0, "edits_failing": 0}
    misses = []
    per_edit: list[list] = []
    free: queue.Queue = queue.Queue()
    for ix in indexers:
        free.put(ix)
    timing = threading.Lock()  # one analysis at a time: its time is not shared with another
    done_lock = threading.Lock()
    narrow = _Narrowed(map_file, root, roots, name) if map_file is not None else None

    def one_edit(k: int, rel: str, qual: str, line: int, indent: int) -> None:
        ix = free.get()
        wroot = ix.root
        try:
            log(f"{name}: edit {k}/{len(chosen)}: {rel}:{qual}")
            original = apply_edit(wroot, rel, line, indent)
            try:
                with timing:
                    t = time.perf_counter()
                    impact.refresh(ix)
                    result = impact.analyse(ix.graph, diff.from_git(wroot, "worktree"), ix.root_package)
                    took = time.perf_counter() - t
                    narrowed = narrow.analyse(ix) if narrow is not None else None
                key = f"edit {rel}:{qual}:{line}"
                got = suites.get(key)
                failing, secs, finished = ((set(got[0]), got[1], got[2]) if got else
                                           suites.put(key, run_suite(python, wroot, target, args.suite_timeout)))
                if ALL_FAIL in failing:
                    failing = set(items)
                failing = {function_id(f) for f in failing - baseline} - {function_id(b) for b in baseline}
                sel = {t["id"] for t in result["tests"]["selected"]}
                may = {t["id"] for t in result["tests"]["may_be_affected"]}
                missed = sorted(failing - sel)
                rows = []
                if missed:
                    with timing:
                        deep = impact.analyse(ix.graph, diff.from_git(wroot, "worktree"), ix.root_package,
                                              impact.Options(depth=30, test_depth=30))
                    deep_sel = {t["id"] for t in deep["tests"]["selected"]}
                    traced = diagnose(python, wroot, rel, line, indent, original,
                                      [m for m in missed if m not in may and m not in deep_sel],
                                      ix.graph, deep, args.suite_timeout)
                    for m in missed:
                        kind, detail = (("may be affected (listed apart)", "") if m in may else
                                        ("deeper than the test depth", "") if m in deep_sel else
                                        ("collection error", "") if m.endswith("::<collection>") else
                                        traced.get(m, ("not diagnosed", f"over {DIAGNOSE_MAX} misses in one edit")))
                        rows.append([name, f"{rel}:{qual}", m, kind, detail])
                if narrowed is not None:
                    narrow.record(python, wroot, target, args.suite_timeout, rel, qual, failing, narrowed,
                                  {r[2]: r[3] for r in rows}, per_fn, len(items))
                with done_lock:
                    times.append(took)
                    suite_s.append(secs)
                    shares.append(sum(n for f, n in per_fn.items() if f in sel) / max(1, len(items)))
                    may_shares.append(sum(n for f, n in per_fn.items() if f in may) / max(1, len(items)))
                    counts["edits_failing"] += bool(failing)
                    counts["failing"] += len(failing)
                    counts["hit"] += len(failing) - len(missed)
                    misses.extend(rows)
                    per_edit.append([f"{rel}:{qual}", len(failing), len(sel), len(failing) - len(missed),
                                     f"{shares[-1]:.1%}", len(may & failing)])
                    if covered is not None:
                        ent, n_items = enters[(rel, qual)], max(1, len(items))
                        over = sel - ent
                        floor["entering"] += len(ent)
                        floor["entering_selected"] += len(ent & sel)
                        floor["failing_not_entering"] += len(failing - ent)
                        floor["run_outside"] += at_import[(rel, qual)]
                        for key, fns in (("floor_shares", ent), ("failing_shares", failing), ("sel_shares", sel),
                                         ("over_shares", over)):
                            floor[key].append(items_of(fns) / n_items)
                        floor_rows.append([f"{rel}:{qual}", len(ent), len(failing), len(sel), len(ent & sel),
                                           len(over), len(failing - ent), f"{floor['floor_shares'][-1]:.1%}",
                                           f"{floor['failing_shares'][-1]:.1%}", f"{floor['sel_shares'][-1]:.1%}",
                                           "yes" if at_import[(rel, qual)] else "", first_hops(result)])
                    if not finished:
                        report.notes.append(f"{name}: the suite ran out of time after editing {rel}:{qual}")
            finally:
                (wroot / rel).write_bytes(original)
        finally:
            free.put(ix)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for fut in [pool.submit(one_edit, k, *c) for k, c in enumerate(chosen, 1)]:
            fut.result()
    misses.sort(key=lambda r: (r[1], r[2]))
    failing_total, hit, edits_failing = counts["failing"], counts["hit"], counts["edits_failing"]
    if jobs > 1:
        report.notes.append(f"{name}: {jobs} suites ran at once, each in its own work copy")
    for ix in indexers[1:]:
        ix.graph.delete()
    ix = indexers[0]
    impact.refresh(ix)
    recall = hit / failing_total if failing_total else None
    summary.rows.append([name, len(items), len(chosen), edits_failing, failing_total,
                         f"{recall:.1%}" if recall is not None else "–", failing_total - hit,
                         f"{statistics.mean(shares):.1%}" if shares else "–",
                         f"{statistics.mean(may_shares):.1%}" if may_shares else "–",
                         (pct(times, 50) or 0) * 1000, (pct(times, 95) or 0) * 1000,
                         statistics.mean(suite_s) if suite_s else None])
    if misses:
        report.tables.append(Table(f"{name}: every failing test not selected", ["project", "edited", "failing test",
                                                                                "class", "where the path breaks"], misses))
        by_class: dict[str, int] = {}
        for r in misses:
            by_class[r[3]] = by_class.get(r[3], 0) + 1
        report.tables.append(Table(f"{name}: misses by class", ["class", "misses"],
                                   sorted(([k, v] for k, v in by_class.items()), key=lambda kv: -kv[1])))
    report.tables.append(Table(f"{name}: per edit", ["edited", "failing tests", "selected", "failing and selected",
                                                     "selected share", "failing, only in may be affected"],
                               sorted(per_edit)))
    if covered is not None and getattr(args, "floor", True):
        _floor_tables(name, report, floor, floor_rows, covered, len(chosen))
    if narrow is not None:
        narrow.tables(report, [recall, failing_total - hit, shares, may_shares, times], failing_total)
    quiet = timing_pass(ix, chosen)
    quiet_rows = [[len(quiet), (pct(quiet, 50) or 0) * 1000, (pct(quiet, 95) or 0) * 1000, max(quiet, default=0) * 1000]]
    if narrow is not None:
        narrow.quiet = timing_pass(ix, chosen, impact.Options(coverage=narrow.maps[ix.root]))
        q = narrow.quiet
        quiet_rows = [["static", *quiet_rows[0]],
                      ["--coverage", len(q), (pct(q, 50) or 0) * 1000, (pct(q, 95) or 0) * 1000, max(q, default=0) * 1000]]
    report.tables.append(Table(f"{name}: `changes` alone (each edit again, no suite running, graph warm)",
                               (["mode"] if narrow is not None else []) + ["edits", "p50 ms", "p95 ms", "max ms"],
                               quiet_rows))
    lens = _lens_timing(ix, name, report)
    report.data[name] = {"lens": lens, "quiet_times": quiet, "recall": recall, "failing": failing_total, "hit": hit, "shares": shares,
                         "may_shares": may_shares, "times": times, "misses": misses, "edits": chosen,
                         "items": len(items), "baseline_failing": sorted(baseline), "graph": ix.graph.name,
                         "narrowed": narrow.data() if narrow is not None else None,
                         "floor": {**floor, "per_edit": floor_rows,
                                   "entering": {f"{r}:{q}": sorted(v) for (r, q), v in enters.items()}}
                         if covered is not None else None}


class _Narrowed:
    """The selection narrowed by the coverage map (``--coverage-map``), measured beside the
    static one: per edit ``analyse`` (timed; the caller holds the timing lock) then ``record``
    (after the suite ran), per project ``tables``."""

    def __init__(self, map_file: Path, root: Path, roots: list[Path], name: str):
        from orbit_lsp.changes.coverage_map import CoverageMap

        self.name, self.map_file = name, map_file
        # the map measured ``root``; the other work copies are the same files elsewhere
        self.maps = {r: CoverageMap(map_file, r, recorded_root=root) for r in roots}
        self.lock = threading.Lock()
        self.times: list[float] = []
        self.shares: list[float] = []
        self.may_shares: list[float] = []
        self.failing = self.hit = 0
        self.misses: list[list] = []
        self.per_edit: list[list] = []
        self.modes: dict[str, int] = {}
        self.quiet: list[float] = []

    def analyse(self, ix) -> dict:
        from orbit_lsp.changes import diff, impact

        t = time.perf_counter()
        impact.refresh(ix)
        res = impact.analyse(ix.graph, diff.from_git(ix.root, "worktree"), ix.root_package,
                             impact.Options(coverage=self.maps[ix.root]))
        res["bench_seconds"] = time.perf_counter() - t
        return res

    def record(self, python: str, wroot: Path, target: str, timeout: float, rel: str, qual: str, failing: set[str],
               res: dict, static_class: dict[str, str], per_fn: dict[str, int], n_items: int) -> None:
        """One edit: ``failing`` test functions, ``res`` the narrowed answer, ``static_class``
        the class of each test the static selection missed. Misses the static selection did not
        have are run again alone (the edit in place) to tell a test failing by itself from one
        failing through state an earlier test left."""
        sel = {t["id"] for t in res["tests"]["selected"]}
        may = {t["id"] for t in res["tests"]["may_be_affected"]}
        cov = res["tests"]["coverage"]
        missed = sorted(failing - sel)
        new = [m for m in missed if m not in static_class and m not in may and not m.endswith("::<collection>")]
        alone: set[str] = set()
        if new:
            try:
                out = subprocess.run([python, "-m", "pytest", "-q", "-rfE", "--tb=no", "-p", "no:cacheprovider", *new],
                                     cwd=wroot, capture_output=True, text=True, timeout=timeout,
                                     env=source_env(wroot)).stdout
            except subprocess.TimeoutExpired:
                out = ""
            alone = {function_id(m.group(2)) for ln in out.splitlines() if (m := SUMMARY.match(ln.strip()))}
        modes = [f"{s['mode']}: {_reason_kind(s['reason'])}" for s in cov["symbols"]]
        rows = []
        for m in missed:
            kind = ("may be affected (listed apart)" if m in may else
                    f"missed statically too: {static_class[m]}" if m in static_class else
                    "collection error" if m.endswith("::<collection>") else
                    "map: does not enter it; fails alone (not through an earlier test)" if m in alone else
                    "map: does not enter it; passes alone: fails only after an earlier test failed (state left behind)")
            rows.append([self.name, f"{rel}:{qual}", m, kind, "; ".join(modes)])
        with self.lock:
            self.times.append(res["bench_seconds"])
            self.shares.append(sum(n for f, n in per_fn.items() if f in sel) / max(1, n_items))
            self.may_shares.append(sum(n for f, n in per_fn.items() if f in may) / max(1, n_items))
            self.failing += len(failing)
            self.hit += len(failing) - len(missed)
            self.misses.extend(rows)
            for x in modes:
                self.modes[x] = self.modes.get(x, 0) + 1
            self.per_edit.append([f"{rel}:{qual}", len(failing), cov["static"], len(sel), len(failing) - len(missed),
                                  f"{self.shares[-1]:.1%}", "; ".join(modes)])

    def tables(self, report: Report, static: list, failing_total: int) -> None:
        recall, static_misses, shares, may_shares, times = static

        def row(mode, rec, miss, sh, msh, ts):
            return [self.name, mode, f"{rec:.1%}" if rec is not None else "–", miss,
                    f"{statistics.mean(sh):.1%}" if sh else "–", f"{statistics.mean(msh):.1%}" if msh else "–",
                    (pct(ts, 50) or 0) * 1000, (pct(ts, 95) or 0) * 1000]
        rec = self.hit / self.failing if self.failing else None
        report.tables.append(Table(
            f"{self.name}: static and narrowed by the coverage map ({self.map_file.name}) side by side",
            ["project", "mode", "recall", "misses", "selected share (mean)", "may-be share (mean)",
             "analysis p50 ms", "analysis p95 ms"],
            [row("static", recall, static_misses, shares, may_shares, times),
             row("coverage map", rec, self.failing - self.hit, self.shares, self.may_shares, self.times)]))
        if self.misses:
            self.misses.sort(key=lambda r: (r[1], r[2]))
            report.tables.append(Table(f"{self.name}: every failing test the narrowed selection misses",
                                       ["project", "edited", "failing test", "class", "changed symbols"], self.misses))
        report.tables.append(Table(f"{self.name}: changed symbols, narrowed or kept static (why)", ["mode", "edits"],
                                   sorted(([k, v] for k, v in self.modes.items()), key=lambda kv: -kv[1])))
        report.tables.append(Table(f"{self.name}: narrowed per edit",
                                   ["edited", "failing tests", "static selected", "narrowed selected",
                                    "failing and selected", "narrowed share", "changed symbols"], sorted(self.per_edit)))

    def data(self) -> dict:
        return {"quiet_times": self.quiet, "times": self.times, "shares": self.shares, "may_shares": self.may_shares, "failing": self.failing,
                "hit": self.hit, "misses": self.misses, "modes": self.modes}


def _reason_kind(reason: str) -> str:
    """A reason without its counts and paths (``3 tests enter it`` -> ``tests enter it``)."""
    if "is not measured" in reason:
        return "file not measured by the map"
    if reason.startswith("coverage map is stale"):
        return "map stale for the file"
    return re.sub(r"^\d+ tests? enters? it$", "tests enter it", reason)


def first_hops(result: dict) -> str:
    """How the callers walk of a ``changes`` result leaves the changed functions: its rows one hop
    away, counted by kind: ``call`` (a CALLS edge to the function), ``class`` (the function is
    a special method, a property or called by no code of the workspace, so the places making
    instances of its class stand for its callers), ``closure`` (the function that defines it),
    ``reference`` (passed as a value). "" when nothing calls it."""
    changed = {s["qual"] for s in result["symbols"]}
    kinds: dict[str, int] = {}
    for r in result["callers"]:
        if r["depth"] != 1:
            continue
        kind = (r["resolved"] if r.get("resolved") in ("closure", "reference", "removed name") else
                "call" if r.get("via") in changed else "class")
        kinds[kind] = kinds.get(kind, 0) + 1
    return ", ".join(f"{k} {n}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))


def _floor_tables(name: str, report: Report, floor: dict, rows: list[list], covered: dict, edits: int) -> None:
    """The reach floor of one project: the three shares side by side, and per edit the tests
    selected that never enter the edited function (most first)."""
    def mean(key):
        return f"{statistics.mean(floor[key]):.1%}" if floor[key] else "–"

    ent, hit = floor["entering"], floor["entering_selected"]
    report.tables.append(Table(
        f"{name}: reach floor (tests entering the edited function, from one run of the unchanged suite under "
        f"coverage with a context per test)",
        ["project", "edits", "floor share (mean)", "selected share (mean)", "failing share (mean)",
         "selected, never entering: share (mean)", "entering tests (sum)", "recall against entering",
         "failing, not entering (sum)", "edits of functions run outside tests", "coverage run s"],
        [[name, edits, mean("floor_shares"), mean("sel_shares"), mean("failing_shares"), mean("over_shares"), ent,
          f"{hit / ent:.1%}" if ent else "–", floor["failing_not_entering"], floor["run_outside"],
          covered["seconds"]]]))
    report.notes.append(
        f"{name}: reach floor: a test enters a function when it executes a line of its body (setup, call or "
        f"teardown); code run outside any test (imports, collection) is credited to no test, so a function "
        f"run at import (flagged) can fail tests it is not counted as entering (failing, not entering)")
    report.tables.append(Table(
        f"{name}: reach floor per edit (test functions; most over-selection first)",
        ["edited", "entering", "failing", "selected", "selected and entering", "selected, never entering",
         "failing, not entering", "floor share", "failing share", "selected share",
         "runs outside tests (import)", "first hops of the walk"],
        sorted(rows, key=lambda r: (-r[5], r[0]))))


# -- why a failing test was not selected --------------------------------------------------------
def diagnose(python: str, root: Path, rel: str, line: int, indent: int, original: bytes, missed: list[str],
             graph, deep: dict, timeout: float) -> dict[str, tuple[str, str]]:
    """Why each of ``missed`` (failing, not selected even at depth 30) was not selected: the
    missed tests are run again with the edit recording the call stack that reaches it
    (``TRACE_MARK``), and the stack is compared with the graph, from the edited function up:
    the first frame whose function the graph does not reach (``deep``'s callers) is where
    the path breaks. Returns {test: (class, detail)}; the edit is left in place as
    ``EDIT_MARK`` again."""
    from orbit_lsp.graph import queries

    todo = [m for m in missed if not m.endswith("::<collection>")][:DIAGNOSE_MAX]
    if not todo:
        return {}
    stacks_path = root.parent / f".{root.name}-stacks.jsonl"
    stacks_path.unlink(missing_ok=True)
    (root / rel).write_bytes(original)
    apply_edit(root, rel, line, indent, TRACE_MARK)
    try:
        env = {**source_env(root), "ORBIT_BENCH_STACKS": str(stacks_path)}
        try:
            res = subprocess.run([python, "-m", "pytest", "-q", "-rfE", "--tb=no", "-p", "no:cacheprovider", *todo],
                                 cwd=root, capture_output=True, text=True, timeout=timeout, env=env)
            out = res.stdout
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    finally:
        (root / rel).write_bytes(original)
        apply_edit(root, rel, line, indent)
    failed_again = {function_id(m.group(2)) for ln in out.splitlines() if (m := SUMMARY.match(ln.strip()))}
    stacks: dict[str, tuple[str, list]] = {}
    if stacks_path.exists():
        for ln in stacks_path.read_text("utf-8", "replace").splitlines():
            try:
                current, frames = __import__("json").loads(ln)
            except ValueError:
                continue
            test, _, phase = current.rpartition(" ")
            stacks.setdefault(function_id(test), (phase.strip("()"), frames))
        stacks_path.unlink(missing_ok=True)
    reached = {r["qual"] for r in deep["callers"]} | {s["qual"] for s in deep["symbols"]}
    may = {r["qual"] for r in deep["may_be_affected"]}
    root_s = str(root.resolve()) + os.sep
    symbol_cache: dict[tuple[str, int], dict | None] = {}

    def symbol(path: str, ln: int) -> dict | None:
        key = (path, ln)
        if key not in symbol_cache:
            rows = queries.symbol_at(graph, path, ln).rows
            if not rows or rows[0]["kind"] not in ("function", "method", "class"):  # module-level code
                rows = [queries._sym(r) for r in graph.ro_query(
                    f"MATCH (s:Symbol {{file: $p}}) WHERE s.kind = 'module' RETURN {queries.SYMBOL_FIELDS}",
                    {"p": path}).rows]
            symbol_cache[key] = rows[0] if rows else None
        return symbol_cache[key]

    out_map: dict[str, tuple[str, str]] = {}
    for m in todo:
        if m not in stacks:
            out_map[m] = (("fails only in the whole run (state left by earlier tests)", "passes alone")
                          if m not in failed_again else
                          ("fails without reaching the function", "the edited function is not on any stack of it"))
            continue
        phase, frames = stacks[m]
        chain = []  # (symbol or None, path, line, third-party frames above it)
        outside: list[str] = []
        for fname, ln, func in frames:
            full = str(Path(fname).resolve()) if fname and not fname.startswith("<") else fname
            if full.startswith(root_s):
                p = full[len(root_s):]
                chain.append((symbol(p, ln), p, ln, func, outside))
                outside = []
            else:
                outside.append(_third_party(fname))
        # the highest frame the graph reaches from the edited function (frames below it that it
        # does not reach are wrappers the graph sees through): the path breaks just above it
        hit = [k for k, c in enumerate(chain) if c[0] and c[0]["qual"] in reached]
        top_hit = hit[0] if hit else len(chain) - 1
        if top_hit == 0:
            top = chain[0]
            kind = f"selection: test reached but not selected ({phase})"
            detail = f"top frame {top[0]['qual'] if top[0] else top[1]}"
        else:
            lower, upper = chain[top_hit], chain[top_hit - 1]
            uq = upper[0]["qual"] if upper[0] else f"{upper[1]}:<module>"
            lq = lower[0]["qual"] if lower[0] else lower[1]
            detail = f"{uq} ({upper[1]}:{upper[2]}) -> {lq}"
            via = [x for x in dict.fromkeys(lower[4]) if x]
            if upper[0] and upper[0]["qual"] in may:
                kind = "unbound call (may be affected)"
            elif via:
                kind = f"called from third-party code ({', '.join(via[:3])})"
            elif upper[0] is None or upper[0]["kind"] == "module":
                kind = "module-level code"
            elif _is_test_support(upper[1]):
                kind = "call in test code not bound"
            else:
                kind = "call-graph gap (call not bound)"
        out_map[m] = (kind, detail)
    return out_map


def _is_test_support(path: str) -> bool:
    from orbit_lsp.changes.selection import is_test_support
    return is_test_support(path)


def _third_party(filename: str) -> str:
    """A short name for a frame outside the work copy: the top package under site-packages, or
    the standard library module, or "" for pytest and pluggy themselves."""
    parts = Path(filename).parts
    if "site-packages" in parts:
        top = parts[parts.index("site-packages") + 1] if parts.index("site-packages") + 1 < len(parts) else ""
        top = top.removesuffix(".py")
        return "" if top in ("_pytest", "pytest", "pluggy") else top
    return Path(filename).stem if filename and not filename.startswith("<") else ""


def _lens_timing(ix, name: str, report: Report) -> dict:
    """Time of the "N tests reach this" lenses of every non-test Python file (all its functions
    and methods in one batch, as an editor resolves the lenses on screen together), the graph
    warm and the answers not cached; and of the first lens of the workspace (test files read)."""
    from orbit_lsp.changes import reach
    from orbit_lsp.changes.selection import is_test_support

    rows = ix.graph.ro_query("MATCH (s:Symbol) WHERE s.kind IN ['function', 'method'] RETURN s.file, s.qual").rows
    by_file: dict[str, list[str]] = {}
    for f, q in rows:
        if f.endswith(".py") and not is_test_support(f):
            by_file.setdefault(f, []).append(q)
    reach._INDEXES.clear()
    reach._LAYOUTS.clear()
    reach.forget_answers()
    t = time.perf_counter()
    reach.test_index(ix).total()
    first = time.perf_counter() - t
    per_file, per_lens, counts = [], [], []
    for f, quals in sorted(by_file.items()):
        reach.forget_answers()
        t = time.perf_counter()
        got = reach.test_counts(ix, f, quals)  # what the lenses of the file ask for
        took = time.perf_counter() - t
        per_file.append(took)
        per_lens.append(took / len(quals))
        counts += [v or 0 for v in got.values()]
    report.tables.append(Table(f"{name}: tests lens (resolve, graph warm, answers not cached)",
                               ["measure", "value"], [
        ["files / lenses", f"{len(by_file)} / {sum(len(q) for q in by_file.values())}"],
        ["first lens of the workspace: test files read (ms)", first * 1000],
        ["a file's lenses together, p50 / p95 (ms)", f"{(pct(per_file, 50) or 0) * 1000:.1f} / {(pct(per_file, 95) or 0) * 1000:.1f}"],
        ["per lens, p50 / p95 (ms)", f"{(pct(per_lens, 50) or 0) * 1000:.1f} / {(pct(per_lens, 95) or 0) * 1000:.1f}"],
        ["tests per lens, mean / max", f"{statistics.mean(counts):.1f} / {max(counts)}" if counts else "–"],
    ]))
    return {"first_s": first, "per_file_s": per_file, "per_lens_s": per_lens, "counts": counts}


def timing_pass(ix, chosen: list[tuple[str, str, int, int]], options=None) -> list[float]:
    """Seconds of ``changes`` (graph brought up to date, git diff, analysis with tests; with
    ``options``, e.g. a coverage map) for each edit again, one at a time and with no test suite
    running beside it; the edits are undone and the graph brought back after each."""
    from orbit_lsp.changes import diff, impact

    out = []
    for rel, _qual, line, indent in chosen:
        original = apply_edit(ix.root, rel, line, indent)
        try:
            t = time.perf_counter()
            impact.refresh(ix)
            impact.analyse(ix.graph, diff.from_git(ix.root, "worktree"), ix.root_package, options)
            out.append(time.perf_counter() - t)
        finally:
            (ix.root / rel).write_bytes(original)
    impact.refresh(ix)
    return out
