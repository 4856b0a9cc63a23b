"""The reach floor of the ``changes`` benchmark (bench/changes.py): which tests actually *enter*
each edited function when the unchanged suite runs.

A selection of tests by reachability that is sound must select at least every test whose
execution enters a changed function (such a test can break when the function changes, whether
or not one particular edit makes it fail, e.g. when the exception it raises is caught). So the
tests entering a function are a floor no reachability-based selection can go under; the
distance between that floor and orbit's selection is the part of the over-selection that is
reachable at all.

How: the unchanged suite runs once per project under coverage.py with a dynamic context per test
(pytest-cov's ``--cov-context=test``: contexts ``<node id>|setup``, ``|run``, ``|teardown``);
``CoverageData.contexts_by_lineno`` then says which tests executed each line. A function's
tests are those that executed a line of its *body* (its first statement onward; the ``def`` line
and decorators run at import, the bodies of nested functions run when those are called, so both
are left out). Lines run outside any test (imports, collection) have the empty context and are
credited to no test; a function that runs there (``run_outside``: called by module-level code)
is flagged instead, since a change to it can break every test that imports its module.

Limits (as measured, not corrected): a module- or session-scoped fixture's setup is counted for
the first test that requested it only; code run in a child process is not measured.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from orbit_lsp.changes.coverage_map import body_lines  # noqa: F401  (the floor's and the map's one definition)

# installed in each project's test venv (bench/changes.py make_venv); pytest-cov 5 still runs
# on the pytest 7 that flask 3.0.3's tests need
COVERAGE_DEPS = ["coverage>=7.4", "pytest-cov>=5"]
FORMAT = 2  # of the cached coverage run (``run_covered``); another one is run again
RC = "[run]\nbranch = False\nparallel = False\n"


class CoverageUnavailable(RuntimeError):
    """The interpreter that runs the suite has no coverage/pytest-cov."""


def run_covered(python: str, root: Path, target: str, timeout: float, env: dict,
                keep: Path | None = None) -> tuple[dict, float]:
    """Run the suite of ``root`` (unchanged) once under coverage with a context per test; returns
    (``{"tests": [node id, …], "sets": [[test index, …], …], "lines": {rel path: {line: set
    index}, "outside": {rel path: [line, …]}, "version": FORMAT}``, seconds); ``outside``: lines
    run outside any test (the empty context: import, collection). Only files under ``root`` are measured; the test-context sets are
    shared between lines (lines of one block run in the same tests), which keeps the result small
    enough for the JSON suite cache. ``keep``: where to copy the coverage data file (the
    coverage map of ``orbit-lsp changes --coverage``). Raises CoverageUnavailable when ``python`` lacks pytest-cov,
    RuntimeError when the run records no data."""
    probe = subprocess.run([python, "-c", "import coverage, pytest_cov"], capture_output=True, text=True)
    if probe.returncode:
        raise CoverageUnavailable(f"{python} cannot import coverage and pytest-cov ({probe.stderr.strip()[-200:]}); "
                                  f"install them ({' '.join(COVERAGE_DEPS)}) or run with --no-floor")
    with tempfile.TemporaryDirectory(prefix="orbit-floor-") as tmp:
        rc, data_file = Path(tmp) / "coveragerc", Path(tmp) / "coverage.sqlite"
        rc.write_text(RC)
        t = time.perf_counter()
        try:
            subprocess.run([python, "-m", "pytest", "-q", "--tb=no", "-p", "no:cacheprovider",
                            "--continue-on-collection-errors", f"--cov={root}", f"--cov-config={rc}",
                            "--cov-report=", "--cov-context=test", target],
                           cwd=root, capture_output=True, text=True, timeout=timeout,
                           env={**env, "COVERAGE_FILE": str(data_file)})
        except subprocess.TimeoutExpired:
            pass  # what was recorded until then is still read below, if coverage saved it
        took = time.perf_counter() - t
        if not data_file.exists():
            raise RuntimeError(f"coverage recorded nothing for {root} (pytest under coverage failed to start?)")
        if keep is not None:
            keep.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(data_file, keep)
        return read_contexts(data_file, root), took


def read_contexts(data_file: Path, root: Path) -> dict:
    """The per-test line data of a coverage data file, in the shape ``run_covered`` returns."""
    from coverage import CoverageData

    data = CoverageData(basename=str(data_file))
    data.read()
    tests: dict[str, int] = {}
    sets: dict[tuple[int, ...], int] = {}
    lines: dict[str, dict[str, int]] = {}
    outside: dict[str, list[int]] = {}
    base = root.resolve()
    for f in sorted(data.measured_files()):
        try:
            rel = Path(f).resolve().relative_to(base).as_posix()
        except ValueError:
            continue
        per_line, out = {}, []
        for ln, contexts in data.contexts_by_lineno(f).items():
            ids = set()
            for c in contexts:
                node = c.rpartition("|")[0] if "|" in c else c
                if node:
                    ids.add(tests.setdefault(node, len(tests)))
                else:  # the empty context: import time, collection, outside any test
                    out.append(ln)
            if ids:
                key = tuple(sorted(ids))
                per_line[str(ln)] = sets.setdefault(key, len(sets))
        if per_line:
            lines[rel] = per_line
        if out:
            outside[rel] = sorted(out)
    return {"tests": list(tests), "sets": [list(s) for s in sets], "lines": lines, "outside": outside,
            "version": FORMAT}


def entering(covered: dict, rel: str, lines: set[int]) -> set[str]:
    """Node ids of the tests that executed any of ``lines`` of file ``rel``."""
    per_line = covered["lines"].get(rel, {})
    idx = set()
    for ln in lines:
        s = per_line.get(str(ln))
        if s is not None:
            idx.update(covered["sets"][s])
    return {covered["tests"][i] for i in idx}


def run_outside(covered: dict, rel: str, lines: set[int]) -> bool:
    """Whether any of ``lines`` of file ``rel`` ran outside every test (import, collection)."""
    return not lines.isdisjoint(covered["outside"].get(rel, ()))
