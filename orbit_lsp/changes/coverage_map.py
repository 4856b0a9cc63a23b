"""Narrowing the tests a change selects with a coverage map of the base version (issue 16).

A *coverage map* is a coverage.py data file recorded with a dynamic context per test (``pytest
--cov=PKG --cov-context=test``): its contexts are pytest node ids with the phase, ``<node
id>|setup``, ``|run``, ``|teardown``; the empty context ``""`` is code run outside any test
(imports, collection). ``CoverageMap(path, root)`` reads one through coverage.py's own API
(``CoverageData``; coverage is imported here only, when a map is read) and ``analyse(graph,
change, root_package, options)`` (``options.coverage`` a ``CoverageMap``) answers as
``impact.analyse`` with the static test selection narrowed by it:

- per changed symbol S (a modified function or method whose file the map measures and
  describes: see ``CoverageMap.stale``): the tests for S are the test functions whose contexts
  executed a line of S's body in the *base* version (``body_lines``; parametrized cases
  collapse to their function, as the static selection does); when S ran in a ``|setup`` or
  ``|teardown`` context, the statically selected tests sharing the broader-scoped fixtures
  (module, class, package, session) or setup functions of that test (coverage credits their
  setup to the first test that requests them only; ``_Scopes.shared``);
- every other changed symbol keeps its static selection, with the reason: S ran outside any
  test (module-level code calls it at import), its file is not measured by the map, the map is
  stale for its file, S was added, renamed or removed, S is a module-level or class-body
  change, or S is in a test file or ``conftest.py``; the static selection of those symbols is
  that of ``impact.analyse`` with ``Options.symbols`` limited to them (files added, removed or
  renamed and names taken away always count);
- statically selected tests the map does not know (no line ran in their context: added after
  the map was made, or skipped then) and those of test files the map is stale for are kept;
- tests the map says enter S are selected even when the static selection missed them
  (callbacks from third-party code, code the graph cannot see).

"Tests that may be affected" (unbound calls) are narrowed the same way. The result is
``impact.analyse``'s with ``tests["selected"]``, ``tests["may_be_affected"]``, the commands and
the totals narrowed and ``tests["coverage"]`` describing what was done (see ``analyse``).
"""

from __future__ import annotations

import ast
import os
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path

from orbit_lsp.changes.scan_store import store_of_graph
from orbit_lsp.changes.selection import TestIndex, commands, is_test_support
from orbit_lsp.changes.symbols import code_lines, python_tokens, read_version
from orbit_lsp.lru import LRU
from orbit_lsp.index.fingerprint import content_digest

PHASES = ("setup", "run", "teardown")
BROAD_SCOPES = frozenset({"module", "class", "package", "session"})
CLASS_WIDE_SETUP = frozenset({"setUpClass", "tearDownClass", "setup_class", "teardown_class"})
MODULE_WIDE_SETUP = frozenset({"setup_module", "teardown_module", "setUpModule", "tearDownModule", "setup",
                               "teardown"})


# pytest's own fixtures (and pytest-mock's): they run no workspace code at a broader scope
PYTEST_FIXTURES = frozenset({
    "request", "tmp_path", "tmpdir", "tmp_path_factory", "tmpdir_factory", "monkeypatch", "capsys", "capfd",
    "capsysbinary", "capfdbinary", "caplog", "recwarn", "pytestconfig", "record_property", "record_xml_attribute",
    "record_testsuite_property", "doctest_namespace", "cache", "testdir", "pytester", "subtests", "mocker",
    "class_mocker", "module_mocker", "package_mocker", "session_mocker", "event_loop"})


class CoverageMapError(ValueError):
    """The coverage map cannot be used: missing, unreadable, not a coverage data file, or
    recorded without per-test contexts. The message says which and what to do."""


def function_id(node_id: str) -> str:
    """A node id without its parametrization (``test_x[1-2]`` -> ``test_x``)."""
    return node_id.split("[", 1)[0]


def split_context(context: str) -> tuple[str, str]:
    """(test function id, phase) of a pytest-cov context; ("", "") for the empty context."""
    node, sep, phase = context.rpartition("|")
    if not sep:
        return function_id(context), ""
    return function_id(node), phase


class CoverageMap:
    """A coverage.py data file with per-test contexts, for workspace ``root``.

    ``path``: the data file (``.coverage``); ``recorded_root``: the directory whose files the
    map measured when that is not ``root`` (another copy of the same project): measured paths
    are taken relative to it. Attributes: ``path`` (absolute str), ``mtime`` (seconds since the
    epoch), ``tests`` (test function ids with at least one measured line run in their
    context), ``files`` (workspace-relative path -> the path as recorded). Raises
    ``CoverageMapError``. Lines are read per file when first asked (thread-safe)."""

    def __init__(self, path: str | os.PathLike, root: str | os.PathLike, recorded_root: str | os.PathLike | None = None):
        p = Path(os.path.abspath(Path(path).expanduser()))
        self.path = str(p)
        if not p.exists():
            raise CoverageMapError(f"coverage map {p}: no such file (record one with: "
                                   f"pytest --cov=PKG --cov-context=test)")
        if p.is_dir():
            raise CoverageMapError(f"coverage map {p}: is a directory, not a coverage data file")
        try:
            with open(p, "rb") as fh:
                head = fh.read(16)
            self.mtime = p.stat().st_mtime
        except OSError as exc:
            raise CoverageMapError(f"coverage map {p}: {exc.strerror}") from None
        if head != b"SQLite format 3\x00":
            raise CoverageMapError(f"coverage map {p}: not a coverage.py data file (coverage 5 or later)")
        from coverage import CoverageData
        from coverage.exceptions import CoverageException

        self._lock = threading.Lock()
        self._data = CoverageData(basename=self.path, no_disk=False)
        try:
            self._data.read()
            contexts = self._data.measured_contexts()
            measured = self._data.measured_files()
        except (CoverageException, sqlite3.Error, OSError) as exc:
            raise CoverageMapError(f"coverage map {p}: unreadable ({exc})") from None
        named = [c for c in contexts if c]
        if not named:
            raise CoverageMapError(f"coverage map {p}: recorded without per-test contexts; "
                                   f"run pytest with --cov-context=test")
        if not any("::" in c for c in named):
            raise CoverageMapError(f"coverage map {p}: its contexts are not pytest test ids "
                                   f"(e.g. {sorted(named)[0]!r}); run pytest with --cov-context=test")
        self._recorded_tests = {split_context(c)[0] for c in named}
        self.tests = set(self._recorded_tests)
        self.tests_under: str | None = None  # see ``place_tests``
        self._placed_for: frozenset[str] | None = None
        base = Path(recorded_root if recorded_root is not None else root).resolve()
        self.files: dict[str, str] = self._relative(measured, base)
        self.recorded_root: str | None = str(recorded_root) if recorded_root is not None else None
        if not self.files and recorded_root is None and measured:
            # recorded in another checkout (a CI runner's): its root found from the files' paths
            found = _recorded_root(measured, Path(root).resolve())
            if found is not None:
                self.recorded_root = found
                self.files = self._relative(measured, Path(found))
        self._by_line: dict[str, dict[int, list[str]]] = {}
        self._stale: dict[tuple, bool] = {}

    @staticmethod
    def _relative(measured, base: Path) -> dict[str, str]:
        """Workspace-relative path -> the path as recorded, of the measured files under ``base``."""
        out: dict[str, str] = {}
        for f in measured:
            try:
                rel = (Path(f) if not Path(f).exists() else Path(f).resolve()).relative_to(base).as_posix()
            except (ValueError, OSError):
                continue
            out[rel] = f
        return out

    def place_tests(self, py_tests: list[str], sample: int = 200) -> None:
        """Put the map's test ids in the workspace. pytest writes them relative to its rootdir;
        when that is a directory of the workspace (a project in a monorepo), most of their
        files are not workspace test files as they are but are under that directory, which
        (``tests_under``) is then put before every id. ``py_tests``: the workspace's Python
        test files (workspace-relative)."""
        known = frozenset(py_tests)
        if self._placed_for == known:
            return
        files = sorted({t.partition("::")[0] for t in self._recorded_tests})[:sample]
        under = None
        if files and 2 * sum(f in known for f in files) < len(files):
            by_name: dict[str, list[str]] = {}
            for t in py_tests:
                by_name.setdefault(t.rpartition("/")[2], []).append(t)
            counts: dict[str, int] = {}
            for f in files:
                for t in by_name.get(f.rpartition("/")[2], ()):
                    if t.endswith("/" + f):
                        d = t[:-len(f) - 1]
                        counts[d] = counts.get(d, 0) + 1
            if counts:
                best, n = max(counts.items(), key=lambda kv: (kv[1], -len(kv[0])))
                under = best if 2 * n >= len(files) else None
        self.tests_under = under
        self.tests = {self._placed(t) for t in self._recorded_tests}
        self._placed_for = known

    def _placed(self, test: str) -> str:
        return f"{self.tests_under}/{test}" if self.tests_under else test

    def measures(self, rel: str) -> bool:
        return rel in self.files

    def contexts(self, rel: str) -> dict[int, list[str]]:
        """Line -> contexts that executed it, for workspace-relative ``rel`` ({} if unmeasured)."""
        got = self._by_line.get(rel)
        if got is None:
            with self._lock:
                got = self._by_line.get(rel)
                if got is None:
                    f = self.files.get(rel)
                    got = {ln: list(cs) for ln, cs in self._data.contexts_by_lineno(f).items()} if f else {}
                    self._by_line[rel] = got
        return got

    def stale(self, rel: str, source: bytes | None) -> bool:
        """Whether the map does not describe ``source`` (the version of ``rel`` compared): a
        line it says ran is past the end of ``source`` or holds no code there (blank, comment
        only): coverage.py records only lines of statements. A file that does not tokenize is
        stale too. Kept per content."""
        key = (rel, content_digest(source) if source is not None else None)
        got = self._stale.get(key)
        if got is None:
            ran = [ln for ln in self.contexts(rel) if ln > 0]
            toks = python_tokens(source) if ran and source is not None else None
            code = code_lines(toks) if toks is not None else set()
            got = bool(ran) and (toks is None or any(ln not in code for ln in ran))
            self._stale[key] = got
        return got

    def entering(self, rel: str, lines: set[int]) -> tuple[dict[str, set[str]], bool]:
        """({test function id: phases in which it executed one of ``lines``}, whether one of
        them ran outside every test)."""
        tests: dict[str, set[str]] = {}
        outside = False
        per_line = self.contexts(rel)
        for ln in lines:
            for c in per_line.get(ln, ()):
                if not c:
                    outside = True
                    continue
                test, phase = split_context(c)
                tests.setdefault(self._placed(test), set()).add(phase)
        return tests, outside

    def describe(self) -> dict:
        return {"path": self.path, "mtime": self.mtime,
                "mtime_iso": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.mtime)),
                "tests": len(self.tests), "files": len(self.files), "recorded_root": self.recorded_root,
                "tests_under": self.tests_under}


def _recorded_root(measured, root: Path, sample: int = 200) -> str | None:
    """The directory a map was recorded in when it is not ``root`` (another checkout of the same
    files: CI's ``/home/runner/work/app/app``): the prefix of the recorded paths whose rest,
    the longest that names a file under ``root``, is found for most files (at least half of a
    sample of ``sample``). None when no prefix is. Staleness is still checked per file
    (``CoverageMap.stale``), so a map of other contents is not trusted either."""
    counts: dict[str, int] = {}
    files = sorted(measured)[:sample]
    for f in files:
        parts = Path(f).parts
        for k in range(1, len(parts)):
            if root.joinpath(*parts[k:]).is_file():
                prefix = str(Path(*parts[:k]))
                counts[prefix] = counts.get(prefix, 0) + 1
                break
    if not counts:
        return None
    best, n = max(counts.items(), key=lambda kv: (kv[1], len(kv[0])))
    return best if 2 * n >= len(files) else None


_OPENED = LRU(4)  # (path, mtime_ns, size, root) -> CoverageMap: a server or an agent asks again and again


def open_map(path: str | os.PathLike, root: str | os.PathLike) -> "CoverageMap":
    """The ``CoverageMap`` at ``path`` (relative to ``root`` or absolute) for workspace ``root``,
    read once while the file is unchanged (same mtime and size). Raises ``CoverageMapError``."""
    full = Path(path).expanduser()
    full = full if full.is_absolute() else Path(root) / full
    try:
        st = full.stat()
        key = (str(full), st.st_mtime_ns, st.st_size, str(root))
    except OSError:
        key = None
    if key is not None:
        found, got = _OPENED.lookup(key)
        if found:
            return got
    got = CoverageMap(full, root)
    if key is not None:
        _OPENED.put(key, got)
    return got


def body_lines(source: bytes, qual: str, line: int | None = None) -> set[int]:
    """Line numbers of the body of function ``qual`` (``Class.method``, ``outer.inner``: the
    nesting of classes and functions in the module) in ``source``: its first statement to its
    last line, without the bodies of functions nested in it (their ``def`` and decorator lines
    stay: the enclosing function runs them). Of several definitions of one name (``typing.overload``
    stubs, redefinitions), the one spanning ``line`` when given, else the last (the one that runs).
    Empty when ``qual`` is not found or ``source`` does not parse."""
    try:
        node: ast.AST = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    for name in qual.split("."):
        found = [n for n in ast.iter_child_nodes(node)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name]
        if line is not None:
            found = [n for n in found if n.lineno <= line <= n.end_lineno] or found
        if not found:
            return set()
        node = found[-1]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    out = set(range(node.body[0].lineno, node.end_lineno + 1))
    for n in ast.walk(node):
        if n is not node and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # a body on the def's own line (``def g(): return 1``) is the enclosing function's line too
            out -= set(range(max(n.body[0].lineno, n.lineno + 1), n.end_lineno + 1))
    return out


def _fixture_scopes(source: bytes | None) -> dict[str, str]:
    """In-file qual -> scope of every ``@pytest.fixture`` of ``source`` ("function" by default;
    "dynamic" when the scope is not a string literal)."""
    out: dict[str, str] = {}
    try:
        tree = ast.parse(source or b"")
    except (SyntaxError, ValueError, RecursionError):
        return out
    todo = [(n, "") for n in tree.body]
    while todo:
        node, prefix = todo.pop()
        if isinstance(node, ast.ClassDef):
            todo += [(n, f"{prefix}{node.name}.") for n in node.body]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name not in ("fixture", "yield_fixture"):
                    continue
                scope = "function"
                for kw in dec.keywords if isinstance(dec, ast.Call) else ():
                    if kw.arg == "scope":
                        v = kw.value
                        scope = v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "dynamic"
                out[prefix + node.name] = scope
    return out


class _Scopes:
    """Which statically selected tests share a broader-scoped fixture or setup with a test
    (``shared``): coverage credits such a setup to the first test requesting it only."""

    def __init__(self, index: TestIndex, cmap: CoverageMap):
        self.index, self.cmap = index, cmap
        self._scopes: dict[str, dict[str, str]] = {}
        self._trees: dict[str, ast.AST | None] = {}
        self._entering: dict[tuple[str, str], dict[str, set[str]]] = {}  # (file, qual) -> tests: phases
        self._users: dict[tuple[str, str], set[str]] = {}

    def scope(self, fx) -> str:
        if fx.file not in self._scopes:
            self._scopes[fx.file] = _fixture_scopes(self.index.read(fx.file))
        return self._scopes[fx.file].get(fx.qual, "function")

    def tree(self, file: str) -> ast.AST | None:
        if file not in self._trees:
            try:
                self._trees[file] = ast.parse(self.index.read(file) or b"")
            except (SyntaxError, ValueError, RecursionError):
                self._trees[file] = None
        return self._trees[file]

    def _ran_in(self, file: str, qual: str, test: str) -> bool:
        """Whether a line of ``qual``'s body ran in a setup or teardown context of ``test``
        (True when the map does not measure ``file``: it cannot tell)."""
        if not self.cmap.measures(file):
            return True
        if (file, qual) not in self._entering:
            lines = body_lines(self.index.read(file) or b"", qual)
            self._entering[(file, qual)] = self.cmap.entering(file, lines)[0]
        return bool(self._entering[(file, qual)].get(test, set()) & {"setup", "teardown"})

    def users(self, file: str, qual: str) -> set[str]:
        if (file, qual) not in self._users:
            self._users[(file, qual)] = self.index.fixture_users(file, qual)
        return self._users[(file, qual)]

    def shared(self, test_id: str, static: dict[str, dict]) -> tuple[set[str], str]:
        """(ids of the statically selected tests sharing a broad-scoped fixture or setup
        function with ``test_id``, how they were found). The fixtures are those the test
        requests (directly, through other fixtures, or autouse) that the workspace defines;
        names it does not define are pytest's own fixtures (``PYTEST_FIXTURES``), parametrize
        arguments, or a plugin's fixtures: for a plugin's, whose scope cannot be told, every
        statically selected test of the test's file is taken."""
        file = test_id.partition("::")[0]
        item = next((i for i in self.index.scan(file).items if i.id == test_id), None) \
            if file in self.index.py_tests else None
        every_of_file = {t for t in static if static[t]["file"] == file}
        if item is None:
            return every_of_file, f"fixture scope unknown: every statically selected test of {file}"
        tf = self.index.scan(file)
        found: list[str] = []
        out: set[str] = set()
        unknown: set[str] = set()
        params = _parametrized(self.tree(file), item.qual)
        fixtures = [fx for f in [file] + [c for c in self.index.conftests if _under(file, c)]
                    for fx in self.index.scan(f).fixtures if fx.autouse
                    and (fx.cls is None or item.cls == fx.cls or (item.cls or "").startswith(fx.cls + "."))]
        seen = {(fx.file, fx.qual) for fx in fixtures}
        todo = [(n, file, item.cls) for n in sorted(item.uses - params)]
        while todo:  # fixtures the test requests, directly or through other fixtures
            name, where, cls = todo.pop()
            fx = self.index.fixture_for(name, where, cls)
            if fx is None:
                if name not in PYTEST_FIXTURES:
                    unknown.add(name)
                continue
            if (fx.file, fx.qual) in seen:
                continue
            seen.add((fx.file, fx.qual))
            fixtures.append(fx)
            todo += [(n, fx.file, fx.cls) for n in sorted(fx.uses) if n != name]
        for fx in fixtures:
            if self.scope(fx) == "function" or not self._ran_in(fx.file, fx.qual, test_id):
                continue
            found.append(f"fixture '{fx.name}' ({self.scope(fx)} scope)")
            out |= {t for t in self.users(fx.file, fx.qual) if t in static}
        for setup, cls in tf.class_setup:
            name = setup.rpartition(".")[2]
            if name in CLASS_WIDE_SETUP and item.cls is not None and (item.cls == cls or item.cls.startswith(cls + ".")) \
                    and self._ran_in(file, setup, test_id):
                found.append(setup)
                out |= {i.id for i in tf.items if (i.cls == cls or (i.cls or "").startswith(cls + ".")) and i.id in static}
        for setup in sorted(tf.module_setup):
            if setup in MODULE_WIDE_SETUP and self._ran_in(file, setup, test_id):
                found.append(setup)
                out |= {i.id for i in tf.items if i.id in static}
        if unknown:
            found.append(f"fixtures defined outside the workspace ({', '.join(sorted(unknown))}), scope unknown: "
                         f"every statically selected test of {file}")
            out |= every_of_file
        return out, "sharing " + ", ".join(found) if found else ""


def _parametrized(tree: ast.AST | None, qual: str) -> set[str]:
    """The argument names of the ``parametrize`` marks of test ``qual`` (and its classes) in the
    module ``tree``."""
    node = tree
    out: set[str] = set()
    if node is None:
        return out
    for name in qual.split("."):
        node = next((n for n in ast.iter_child_nodes(node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                                 ast.ClassDef)) and n.name == name), None)
        if node is None:
            break
        for dec in node.decorator_list:
            if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.func.attr == "parametrize" \
                    and dec.args:
                first = dec.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    out |= {a.strip() for a in first.value.split(",")}
                elif isinstance(first, (ast.List, ast.Tuple)):
                    out |= {e.value for e in first.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return out


def _under(path: str, conftest: str) -> bool:
    d = conftest.rpartition("/")[0]
    return d == "" or path.startswith(d + "/")


def _plan(result: dict, change, root_package: str, cmap: CoverageMap) -> tuple[list[dict], dict]:
    """Per changed symbol: {"qual", "file", "status", "kind", "mode": "narrowed"|"static",
    "reason", "entering": {test: phases}} (entering for narrowed ones)."""
    from orbit_lsp.changes.impact import in_file_qual

    files = {f["path"]: f for f in result["files"]}
    rows = []
    stale_cache: dict[str, bool] = {}
    for s in result["symbols"]:
        row = {"qual": s["qual"], "file": s["file"] if s["status"] != "removed" else s["old_file"],
               "status": s["status"], "kind": s["kind"], "mode": "static", "reason": "", "entering": {}}
        rows.append(row)
        f = files.get(s["file"]) or {}
        if s["status"] != "modified" or f.get("status") != "modified" or (s.get("old_qual") not in (None, s["qual"])):
            row["reason"] = f"{s['status'] if s['status'] != 'modified' else 'moved'} in the change"
            continue
        if is_test_support(s["file"]):
            row["reason"] = "test file or conftest.py changed"
            continue
        if s["kind"] == "module":
            row["reason"] = "module-level change"
            continue
        if s["kind"] == "class":
            row["reason"] = "class-body change"
            continue
        if s["kind"] not in ("function", "method"):
            row["reason"] = f"{s['kind']} change"
            continue
        if not cmap.measures(s["file"]):
            row["reason"] = f"{s['file']} is not measured by the coverage map"
            continue
        old = change.old_bytes(f.get("old_path") or s["file"])
        if s["file"] not in stale_cache:
            stale_cache[s["file"]] = cmap.stale(s["file"], old)
        if stale_cache[s["file"]]:
            row["reason"] = f"coverage map is stale for {s['file']}"
            continue
        qual = in_file_qual(s["file"], s["qual"], root_package)
        version = read_version(s["file"], old, root_package)
        spans = [x.line for x in (version.symbols or ()) if x.qual == qual] if version else []
        lines: set[int] = set()
        for ln in spans:
            lines |= body_lines(old or b"", qual, ln)
        if not lines:
            row["reason"] = "not found in the base version"
            continue
        tests, outside = cmap.entering(s["file"], lines)
        if outside:
            row["reason"] = "runs outside any test (module-level code calls it at import)"
            continue
        row.update(mode="narrowed", reason=f"{len(tests)} test{' enters' if len(tests) == 1 else 's enter'} it", entering=tests)
    return rows, stale_cache


def analyse(graph, change, root_package: str = "", options=None) -> dict:
    """``impact.analyse`` with the test selection narrowed by ``options.coverage`` (a
    ``CoverageMap``; without one, or without ``options.tests``, the static answer as is).

    ``result["tests"]["coverage"]``: {"path", "mtime" (epoch seconds), "mtime_iso", "recorded_root"
    (the checkout the map was recorded in when it is not this workspace, found from its paths;
    else None), "tests_under" (the directory of the workspace pytest ran from when it is not
    the root: the map's test ids are put under it; else None), "static":
    tests selected statically, "narrowed": tests selected now, "static_may", "narrowed_may"
    (likewise for "may be affected"), "symbols": [{"qual", "file", "status", "kind", "mode":
    "narrowed"|"static", "reason", "entering": number of tests entering it (narrowed ones)}],
    "kept": {"not_in_map": [test id], "stale": [test id], "fixture_scope": [test id]},
    "seconds": time of the narrowing (both analyses)}. Selected tests carry "coverage": "enters"
    (the map says it enters a narrowed symbol), "static" (selected for a symbol kept static),
    "not in map" (unknown to the map), "stale" (its file changed since the map), "fixture scope";
    a test selected only through the map has "depth" None. Raises what ``impact.analyse``
    raises."""
    from orbit_lsp.changes import impact

    opts = options or impact.Options()
    cmap: CoverageMap | None = getattr(opts, "coverage", None)
    plain = replace(opts, coverage=None)
    t0 = time.perf_counter()
    result = impact.analyse(graph, change, root_package, plain)
    if cmap is None or not opts.tests:
        return result
    tests = result["tests"]
    static_sel = {t["id"]: t for t in tests["selected"]}
    static_may = {t["id"]: t for t in tests["may_be_affected"]}
    index = _test_index(graph, change, result)
    cmap.place_tests(index.py_tests)  # its ids are relative to pytest's rootdir
    plan, _ = _plan(result, change, root_package, cmap)
    narrowed = [r for r in plan if r["mode"] == "narrowed"]
    kept_syms = [r for r in plan if r["mode"] == "static"]
    info = {**cmap.describe(), "static": len(static_sel), "static_may": len(static_may),
            "symbols": [{k: (len(v) if k == "entering" else v) for k, v in r.items()} for r in plan],
            "kept": {"not_in_map": [], "stale": [], "fixture_scope": []}}
    if not narrowed:
        for t in tests["selected"] + tests["may_be_affected"]:
            t["coverage"] = "static"
        info.update(narrowed=len(static_sel), narrowed_may=len(static_may),
                    seconds=round(time.perf_counter() - t0, 3))
        tests["coverage"] = info
        return result
    # the static selection of what is not narrowed: the change with only those symbols followed
    other_files = any(f["status"] != "modified" for f in result["files"])
    base_sel: dict[str, dict] = {}
    base_may: dict[str, dict] = {}
    if kept_syms or other_files:
        keep = frozenset((s["file"], s["qual"]) for s in result["symbols"]
                         if not any(r["mode"] == "narrowed" and r["qual"] == s["qual"] and r["file"] == s["file"]
                                    for r in narrowed))
        part = impact.analyse(graph, change, root_package, replace(plain, symbols=keep))
        base_sel = {t["id"]: t for t in part["tests"]["selected"]}
        base_may = {t["id"]: t for t in part["tests"]["may_be_affected"]}
    selected: dict[str, dict] = {}
    for tid, t in base_sel.items():
        selected[tid] = dict(static_sel.get(tid, t), coverage="static")
    items = {}

    def item_of(tid: str):
        file = tid.partition("::")[0]
        if file not in items:
            items[file] = {i.id: i for i in index.scan(file).items} if file in index.py_tests else {}
        return items[file].get(tid)

    scopes = _Scopes(index, cmap)
    every_static = {**static_may, **static_sel}
    for r in narrowed:
        for tid, phases in sorted(r["entering"].items()):
            how = f"enters {r['qual']} ({'/'.join(p for p in PHASES if p in phases)}; coverage map)"
            if tid in static_sel or tid in static_may:
                selected.setdefault(tid, dict(every_static[tid], reason=how, coverage="enters"))
            elif tid not in selected:
                it = item_of(tid)
                if it is None:
                    continue  # no longer a test of the new version
                selected[tid] = {"id": tid, "file": it.file, "line": it.line, "runner": "pytest", "depth": None,
                                 "reaches": r["qual"], "reason": how + "; not reached statically",
                                 "coverage": "enters"}
            if phases & {"setup", "teardown"}:
                shared, why = scopes.shared(tid, every_static)
                for other in sorted(shared - {tid}):
                    if other not in selected:
                        selected[other] = dict(every_static[other], coverage="fixture scope",
                                               reason=f"{every_static[other]['reason']}; {why} with {tid}, "
                                                      f"whose setup enters {r['qual']} (coverage map)")
                        info["kept"]["fixture_scope"].append(other)
    # statically selected tests the map cannot speak for: unknown to it, of a file it is stale
    # for, or not Python (coverage.py measures Python only)
    stale_files: dict[str, bool] = {}
    for tid, t in list(static_sel.items()) + list(static_may.items()):
        if tid in selected or tid in base_may:
            continue
        if t["runner"] != "pytest":
            kind, why = "not in map", "not a pytest test: coverage.py does not measure it"
        elif tid not in cmap.tests:
            kind, why = "not in map", "not in the coverage map (added or skipped since it was recorded)"
        else:
            f = t["file"]
            if f not in stale_files:
                stale_files[f] = cmap.stale(f, change.new_bytes(f)) if cmap.measures(f) else False
            if not stale_files[f]:
                continue
            kind, why = "stale", f"coverage map is stale for {f}"
        row = dict(t, coverage=kind, reason=f"{t['reason']}; {why}")
        if tid in static_sel:
            selected[tid] = row
        else:
            base_may[tid] = row
        info["kept"]["not_in_map" if kind == "not in map" else "stale"].append(tid)
    may = {tid: dict(t, coverage=t.get("coverage", "static")) for tid, t in base_may.items() if tid not in selected}
    tests["selected"] = sorted(selected.values(), key=lambda t: t["id"])
    tests["may_be_affected"] = sorted(may.values(), key=lambda t: t["id"])
    tests["commands"] = commands(tests["selected"])
    result["totals"]["tests"] = len(tests["selected"])
    result["totals"]["tests_may_be_affected"] = len(tests["may_be_affected"])
    info.update(narrowed=len(tests["selected"]), narrowed_may=len(tests["may_be_affected"]),
                seconds=round(time.perf_counter() - t0, 3))
    for k in info["kept"]:
        info["kept"][k] = sorted(set(info["kept"][k]))
    tests["coverage"] = info
    result["seconds"] = round(time.perf_counter() - t0, 3)
    return result


def _test_index(graph, change, result: dict) -> TestIndex:
    """The tests of the change's new version (as ``impact`` reads them)."""
    files = [r[0] for r in graph.ro_query("MATCH (f:File) RETURN f.path").rows]
    files += [f["path"] for f in result["files"] if f["status"] != "removed"]
    gone = {f["path"] for f in result["files"] if f["status"] == "removed"}
    gone |= {f["old_path"] for f in result["files"] if f["status"] == "renamed"}
    return TestIndex([f for f in files if f not in gone], change.new_bytes, store_of_graph(graph))

