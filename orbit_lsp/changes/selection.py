"""Which tests a change reaches, by the conventions of the test runners.

pytest: test files ``test_*.py`` / ``*_test.py``; ``test*`` functions, ``test*`` methods of
``Test*`` classes (without ``__init__``) and of ``unittest.TestCase`` subclasses; fixtures
(``@pytest.fixture``, under its ``name=`` if given, in ``conftest.py`` for the tests under its
directory, in a test module for that module, in a class for that class) reach the tests and
fixtures that name them as a parameter, in ``@pytest.mark.usefixtures`` (on the test, its class,
or a ``pytestmark`` of its class or module) or in ``request.getfixturevalue("name")``, and every
test of their scope when ``autouse``; ``setUp``/``setup_method``/``setUpClass``/… reach every
test of their class, ``setup_module``/``setUpModule`` and a test module's own module-level code
every test of the module, a ``conftest.py``'s module-level code every test under its directory.
A test class also has the tests and setup methods of the classes of its module it inherits from
(pytest collects ``Child::test_x`` for a ``test_x`` of a base).
JS/TS runners (jest, vitest, mocha, node:test): files ``*.test.*``, ``*.spec.*`` and files under a
``__tests__/`` directory; the unit selected is the file (their tests are anonymous callbacks).

Test files are read with ``ast`` (their structure only) from the change's new version (unsaved
buffers included), so a test added by the change is found.
"""

from __future__ import annotations

import ast
import operator
import re
import shlex
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from orbit_lsp.index.py_fixtures import is_conftest, is_python_test_file
from orbit_lsp.lru import LRU
from orbit_lsp.index.fingerprint import content_digest

if TYPE_CHECKING:  # (scan_store builds this module's classes: it imports it)
    from orbit_lsp.changes.scan_store import ScanStore

JS_TEST_FILE = re.compile(r"(^|/)([^/]+\.(test|spec)\.[cm]?[jt]sx?|__tests__/.+\.[cm]?[jt]sx?)$")
CLASS_SETUP = frozenset({"setUp", "tearDown", "setUpClass", "tearDownClass", "setup_method", "teardown_method",
                         "setup_class", "teardown_class", "setup", "teardown", "asyncSetUp", "asyncTearDown"})
MODULE_SETUP = frozenset({"setup_module", "teardown_module", "setUpModule", "tearDownModule", "setup_function",
                          "teardown_function", "setup", "teardown"})
FILES_FORM_OVER = 40  # above this many test ids the command uses ``-k`` (or the files) instead
K_FORM_MAX = 4000  # characters of a ``-k`` expression past which the command lists files only
SCANS = LRU(65536)  # (path, content digest) -> PyTestFile: a server or a benchmark re-reads test files
MARKS = LRU(65536)  # (path, content digest) -> FileMarks (``TestIndex.marks``)
ATTR_CALL = re.compile(rb"\.\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")
# ``name.method(``: the form ``_attr_calls`` reads on a parameter
RECEIVER_CALL = re.compile(rb"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*)\s*\.\s*[A-Za-z_][A-Za-z0-9_]*\s*\(")
BY_NAME = (b"getfixturevalue", b"getfuncargvalue")  # ``_requested_by_name``


@dataclass(frozen=True)
class FileMarks:
    """What a file's bytes say without parsing it: ``methods`` the names called as attributes
    (``x.name(``), ``receivers`` the names a method is called on directly (``name.m(``), and
    whether the text mentions ``fixture`` at all (a file defining none does not)."""

    methods: frozenset[str]
    receivers: frozenset[str]
    fixtures: bool

    @classmethod
    def of(cls, data: bytes) -> "FileMarks":
        def names(found: list[bytes]) -> frozenset[str]:
            return frozenset(sys.intern(m.decode("ascii")) for m in set(found))
        return cls(names(ATTR_CALL.findall(data)), names(RECEIVER_CALL.findall(data)), b"fixture" in data)


NO_MARKS = FileMarks(frozenset(), frozenset(), False)


def is_js_test_file(path: str) -> bool:
    return bool(JS_TEST_FILE.search(path))


def is_test_support(path: str) -> bool:
    """A file the test selection reads: a test file of either ecosystem or a ``conftest.py``."""
    return is_python_test_file(path) or is_conftest(path) or is_js_test_file(path)


@dataclass
class TestItem:
    """A runnable test: ``id`` its pytest node id (``path::Class::test_x``), ``qual`` its
    in-file qualified name, ``cls`` its class's in-file qual (or None), ``uses`` the fixture
    names it requests (parameters and ``usefixtures``)."""

    __test__ = False  # not a pytest class

    id: str
    file: str
    qual: str
    cls: str | None
    line: int
    uses: frozenset[str]
    attr_calls: dict[str, frozenset[str]] = field(default_factory=dict)  # parameter -> methods called on it


@dataclass
class Fixture:
    """A pytest fixture: ``returns`` is the name of the class it returns or yields an instance
    of (``return Engine()``, ``app = Flask(…); …; return app``), None when that is not plain;
    ``attr_calls`` as for tests."""

    name: str
    file: str
    qual: str
    cls: str | None
    uses: frozenset[str]
    autouse: bool
    returns: str | None = None
    attr_calls: dict[str, frozenset[str]] = field(default_factory=dict)


@dataclass
class PyTestFile:
    """The test structure of one Python file (a test module or a ``conftest.py``)."""

    __test__ = False

    path: str
    items: list[TestItem] = field(default_factory=list)
    fixtures: list[Fixture] = field(default_factory=list)
    class_setup: list[tuple[str, str]] = field(default_factory=list)  # (in-file qual of a setup method, class qual it serves)
    module_setup: set[str] = field(default_factory=set)


def _decorator_name(dec: ast.expr) -> str:
    node = dec.func if isinstance(dec, ast.Call) else dec
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _fixture_info(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, bool] | None:
    for dec in fn.decorator_list:
        name = _decorator_name(dec)
        if name.rsplit(".", 1)[-1] in ("fixture", "yield_fixture"):
            fname, autouse = fn.name, False
            if isinstance(dec, ast.Call):
                for kw in dec.keywords:
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                        fname = kw.value.value
                    if kw.arg == "autouse" and isinstance(kw.value, ast.Constant):
                        autouse = bool(kw.value.value)
            return fname, autouse
    return None


def _usefixtures(decorators: list[ast.expr]) -> set[str]:
    out = set()
    for dec in decorators:
        if isinstance(dec, ast.Call) and _decorator_name(dec).endswith("usefixtures"):
            out.update(a.value for a in dec.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return out


def _pytestmark_fixtures(body: list[ast.stmt]) -> set[str]:
    """Fixtures named by ``pytestmark = pytest.mark.usefixtures(…)`` (or a list of marks) in a
    module or class body."""
    out: set[str] = set()
    for n in body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets):
            marks = n.value.elts if isinstance(n.value, (ast.List, ast.Tuple)) else [n.value]
            out |= _usefixtures(list(marks))
    return out


def _requested_by_name(fn) -> set[str]:
    """Fixtures fetched by name inside ``fn``: ``request.getfixturevalue("x")``."""
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("getfixturevalue", "getfuncargvalue") and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            out.add(node.args[0].value)
    return out


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    a = fn.args
    return {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)} - {"self", "cls"}


def _attr_calls(fn, params: set[str], lines: list[str]) -> dict[str, frozenset[str]]:
    """Methods called on each parameter in ``fn``'s text (nested functions and decorators
    included): ``engine.run(…)`` -> {"engine": {"run"}}. Read from the text with a pattern (an
    AST walk of every test function costs ten times more; a match in a comment or string only
    widens the selection)."""
    if not params:
        return {}
    first = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
    text = "\n".join(lines[first - 1:fn.end_lineno])
    names = "|".join(re.escape(p) for p in sorted(params))
    out: dict[str, set[str]] = {}
    for m in re.finditer(rf"(?<![\w.])({names})\s*\.\s*([A-Za-z_]\w*)\s*\(", text):
        out.setdefault(m.group(1), set()).add(m.group(2))
    return {k: frozenset(v) for k, v in out.items()}


def _returned_class(fn) -> str | None:
    """The called name a fixture returns or yields (directly, or through one local variable):
    ``return Engine()`` / ``app = Flask(…); yield app`` -> "Engine" / "Flask"."""
    made: dict[str, str] = {}
    found: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Call):
            name = _decorator_name(node.value.func)
            if name:
                made[node.targets[0].id] = name.rsplit(".", 1)[-1]
    for node in ast.walk(fn):
        value = node.value if isinstance(node, (ast.Return, ast.Yield)) else None
        if isinstance(value, ast.Call):
            name = _decorator_name(value.func)
            if name:
                found.add(name.rsplit(".", 1)[-1])
        elif isinstance(value, ast.Name) and value.id in made:
            found.add(made[value.id])
    return found.pop() if len(found) == 1 else None


def scan_python(path: str, data: bytes) -> PyTestFile:
    """The tests, fixtures and setup functions of one Python file (empty when it does not parse)."""
    out = PyTestFile(path)
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError):
        return out
    is_test_module = is_python_test_file(path)
    lines = data.decode("utf-8", "replace").splitlines()
    # fetched by name only where the text says so (a walk of every function is most of a scan)
    by_name = _requested_by_name if any(b in data for b in BY_NAME) else (lambda fn: set())
    local_classes: dict[str, ast.ClassDef] = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}

    def is_testcase(cls: ast.ClassDef, depth: int = 0) -> bool:
        for b in cls.bases:
            name = _decorator_name(b)
            if name.endswith("TestCase"):
                return True
            base = local_classes.get(name)
            if base is not None and base is not cls and depth < 10 and is_testcase(base, depth + 1):
                return True
        return False

    def function(fn, qual: str, cls: str | None, id_prefix: str, inherited: set[str], in_test_class: bool) -> None:
        fx = _fixture_info(fn)
        params = _params(fn)
        uses = frozenset(params | _usefixtures(fn.decorator_list) | inherited | by_name(fn))
        if fx is not None:
            out.fixtures.append(Fixture(fx[0], path, qual, cls, uses, fx[1], _returned_class(fn),
                                        _attr_calls(fn, params, lines)))
        elif is_test_module and fn.name.startswith("test") and (cls is None or in_test_class):
            out.items.append(TestItem(f"{id_prefix}::{fn.name}", path, qual, cls, fn.lineno, uses,
                                      _attr_calls(fn, params, lines)))
        elif cls is not None and fn.name in CLASS_SETUP:
            out.class_setup.append((qual, cls))
        elif cls is None and fn.name in MODULE_SETUP:
            out.module_setup.add(qual)

    def local_bases(node: ast.ClassDef, seen: set[str]) -> list[tuple[ast.ClassDef, str]]:
        """The classes of this module ``node`` inherits from, nearest first (module-level
        classes only), with their in-file quals."""
        found = []
        for b in node.bases:
            base = local_classes.get(_decorator_name(b))
            if base is not None and base.name not in seen:
                seen.add(base.name)
                found.append((base, base.name))
                found += local_bases(base, seen)
        return found

    def klass(node: ast.ClassDef, qual: str, id_prefix: str, inherited: set[str]) -> None:
        has_init = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "__init__" for n in node.body)
        test_class = is_testcase(node) or (node.name.startswith("Test") and not has_init)
        uses = inherited | _usefixtures(node.decorator_list) | _pytestmark_fixtures(node.body)
        own = set()
        for n in node.body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                own.add(n.name)
                function(n, f"{qual}.{n.name}", qual, id_prefix, uses, test_class)
            elif isinstance(n, ast.ClassDef) and test_class:
                klass(n, f"{qual}.{n.name}", f"{id_prefix}::{n.name}", uses)
        if not test_class:
            return
        # tests and setup methods inherited from classes of this module: pytest collects
        # ``Child::test_x`` for a ``test_x`` defined in a base; the code is the base's
        for base, bqual in local_bases(node, {node.name}):
            for n in base.body:
                if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) or n.name in own:
                    continue
                own.add(n.name)
                if _fixture_info(n) is not None:
                    continue
                if n.name.startswith("test"):
                    params = _params(n)
                    out.items.append(TestItem(f"{id_prefix}::{n.name}", path, f"{bqual}.{n.name}", qual, n.lineno,
                                              frozenset(params | _usefixtures(n.decorator_list) | uses
                                                        | by_name(n)), _attr_calls(n, params, lines)))
                elif n.name in CLASS_SETUP:
                    out.class_setup.append((f"{bqual}.{n.name}", qual))

    module_uses = _pytestmark_fixtures(tree.body) if is_test_module else set()
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function(n, n.name, None, path, set(module_uses), False)
        elif isinstance(n, ast.ClassDef):
            klass(n, n.name, f"{path}::{n.name}", set(module_uses))
    return out


@dataclass
class Selection:
    """Tests selected: ``tests`` [{"id", "file", "runner": pytest|js, "depth", "reason",
    "reaches": changed qual | None}] sorted by id; ``removed``: test ids the change deletes."""

    tests: list[dict] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def _under(path: str, directory: str) -> bool:
    return directory == "" or path.startswith(directory + "/")


class TestIndex:
    """The test structure of a workspace, read on demand: ``files`` are every file path of the
    workspace (the graph's ``File`` nodes, plus files the change adds); ``read`` gives a file's
    bytes in the change's new version."""

    __test__ = False

    def __init__(self, files: list[str], read: Callable[[str], bytes | None], store: ScanStore | None = None):
        """``store``: where scans are kept between processes (``scan_store``; None: only in
        this process's ``SCANS`` and ``MARKS``)."""
        self.files = sorted(set(files))
        self.py_tests = [f for f in self.files if is_python_test_file(f)]
        self.conftests = [f for f in self.files if is_conftest(f)]
        self.js_tests = [f for f in self.files if is_js_test_file(f)]
        self._start(read, store)

    @classmethod
    def of_same_files(cls, other: "TestIndex", read: Callable[[str], bytes | None]) -> "TestIndex":
        """An index of the same files as ``other`` (their lists shared, never changed), read
        afresh through ``read``: a workspace whose files changed content but not names (the
        lists of 20,000 paths cost ~80 ms to make)."""
        index = cls.__new__(cls)
        index.files, index.py_tests, index.conftests, index.js_tests = (other.files, other.py_tests, other.conftests,
                                                                        other.js_tests)
        index._start(read, other.store)
        return index

    def _start(self, read: Callable[[str], bytes | None], store: ScanStore | None) -> None:
        self.read = read
        self.store = store
        self._scanned: dict[str, PyTestFile] = {}
        self._marks: dict[str, FileMarks] = {}
        self._file_sites: dict[str, list[tuple[object, str, str, Fixture]]] = {}
        self._users_of: dict[tuple[str, str], tuple | None] = {}
        self._lines: dict[str, dict[str, int]] = {}
        self._quals: dict[str, dict] = {}
        self._selected: dict[tuple[str, str], list] = {}  # (file, in-file qual) -> ``_selected_by``
        self._may_call: list[str] | None = None  # ``_fixture_callers``
        self._kinds: dict[str, str | None] = {}  # file -> ``_test_kind``
        self._returning: dict[str, frozenset[str]] = {}

    def scan(self, path: str) -> PyTestFile:
        got = self._scanned.get(path)
        if got is None:
            data = self.read(path)
            if data is None:
                got = PyTestFile(path)
            else:  # the same bytes scanned before (by this process, or kept in the store) are not parsed again
                got = self._kept(SCANS, "scan", path, data, scan_python)
            self._scanned[path] = got
        return got

    def _kept(self, cache: LRU, kind: str, path: str, data: bytes, make: Callable):
        """``make(path, data)``, from ``cache`` (this process's) or the store when it has the
        value for these bytes; a value made is kept in both."""
        digest = content_digest(data)
        key = (path, digest)
        found, got = cache.lookup(key)
        if not found:
            store = self.store
            got = store.get(kind, path, digest) if store is not None else None
            if got is None:
                got = make(path, data)
                if store is not None:
                    store.put(kind, path, digest, got)
            cache.put(key, got)
        return got

    def total(self) -> int:
        """Every pytest item plus every JS/TS test file (reads every test file)."""
        return sum(len(self.scan(f).items) for f in self.py_tests) + len(self.js_tests)

    def called_names(self, path: str) -> frozenset[str]:
        """The names test file ``path`` calls as attributes (``x.name(``), by a pattern over its
        bytes: a superset of the methods its scan finds called on fixture parameters, found
        without parsing it (``_typed_sites`` parses only the files that call a method asked
        about: a workspace with thousands of test files is not parsed whole for one lens)."""
        return self.marks(path).methods

    def marks(self, path: str) -> FileMarks:
        """``FileMarks`` of file ``path`` (read once per index; cached by content)."""
        got = self._marks.get(path)
        if got is None:
            data = self.read(path)
            if data is None:
                got = NO_MARKS
            else:
                got = self._kept(MARKS, "marks", path, data, lambda _, b: FileMarks.of(b))
            self._marks[path] = got
        return got

    def _may_call_on_fixture(self, path: str) -> bool:
        """Whether a test or fixture of ``path`` may call a method on a fixture parameter whose
        fixture returns a known class (``_sites_of`` not empty), by the file's bytes: it
        defines fixtures itself, or calls a method directly on the name of such a fixture of a
        ``conftest.py`` above it. False for most test files of most workspaces, which then
        need not be parsed for it."""
        marks = self.marks(path)
        if marks.fixtures:
            return True
        return bool(marks.receivers & self._conftest_returning(path.rpartition("/")[0]))

    def _conftest_returning(self, directory: str) -> frozenset[str]:
        """Names of the module-level fixtures returning a known class of the ``conftest.py``
        files visible from ``directory`` (cached per directory)."""
        got = self._returning.get(directory)
        if got is None:
            names: set[str] = set()
            for conf in self.conftests:
                if _under(directory + "/", conf.rpartition("/")[0]):
                    names |= {fx.name for fx in self.scan(conf).fixtures if fx.cls is None and fx.returns is not None}
            got = self._returning[directory] = frozenset(names)
        return got

    def select(self, reached: dict[tuple[str, str], tuple[int, str | None, str]],
               whole_files: dict[str, tuple[int, str | None, str]],
               method_hit: Callable[[Fixture, str], tuple[int, str, str] | None] | None = None,
               method_names: set[str] | frozenset[str] | None = None) -> list[dict]:
        """Tests reached. ``reached``: (file, in-file qual) -> (depth, changed qual it leads
        to, how) for every symbol of a test file or conftest reached by CALLS (a changed symbol
        at depth 0); ``whole_files``: test file or conftest -> (hops, changed file, how) for
        files that import a changed file (every test of them, or under a conftest's
        directory); ``method_hit(fixture, method)``: (depth, changed qual, method qual) when
        the method of that name of the class the fixture returns reaches the change (the
        graph cannot bind ``engine.run()`` on a parameter: pytest passes the fixture's value);
        ``method_names``: the names ``method_hit`` can answer for (None: any; a superset is
        fine), so that only the test files calling one of them are parsed for it."""
        best: dict[str, dict] = {}

        def pick(item_id: str, file: str, runner: str, depth: int, reaches: str | None, reason: str) -> None:
            cur = best.get(item_id)
            if cur is None or depth < cur["depth"]:
                best[item_id] = {"id": item_id, "file": file, "line": 1, "runner": runner,
                                 "depth": depth, "reaches": reaches, "reason": reason}

        self._pick_all(reached, whole_files, method_hit, method_names, pick)
        for t in best.values():
            if t["runner"] == "pytest":
                if t["file"] not in self._lines:
                    self._lines[t["file"]] = {i.id: i.line for i in self.scan(t["file"]).items}
                t["line"] = self._lines[t["file"]].get(t["id"], 1)
        return sorted(best.values(), key=operator.itemgetter("id"))

    def count(self, reached: dict[tuple[str, str], tuple[int, str | None, str]],
              whole_files: dict[str, tuple[int, str | None, str]],
              method_hit: Callable[[Fixture, str], tuple[int, str, str] | None] | None = None,
              method_names: set[str] | frozenset[str] | None = None) -> int:
        """``len(select(...))`` without making the tests' entries (a tests lens shows only the
        number: a much-used function of a large workspace is reached by thousands of tests)."""
        ids: set[str] = set()
        self._pick_all(reached, whole_files, method_hit, method_names, lambda item_id, *_: ids.add(item_id))
        return len(ids)

    def flush(self) -> None:
        """Write the scans made since the last write to the store (``scan_store``)."""
        if self.store is not None:
            self.store.flush()

    def _pick_all(self, reached, whole_files, method_hit, method_names, pick: Callable) -> None:
        """``pick(test id, file, runner, depth, changed qual, reason)`` for every test ``select``
        selects (its arguments), as often as a way to reach it is found."""
        fixtures: dict[tuple[str, str], tuple[int, str | None, str]] = {}  # (file, fixture qual) -> ...
        by_file: dict[str, list[tuple[str, tuple]]] = {}
        for (file, qual), info in reached.items():
            by_file.setdefault(file, []).append((qual, info))
        for file, quals in by_file.items():
            file_kind = self._test_kind(file)
            if file_kind == "js":
                d, reaches, how = min(info for _, info in quals)
                pick(file, file, "js", d, reaches, how)
                continue
            if file_kind is None:
                continue
            tf = self.scan(file)
            for qual, (d, reaches, how) in quals:
                if qual == "" or qual in tf.module_setup:
                    what = "module-level code" if qual == "" else qual
                    for item in self._items_under(file) if file_kind == "conftest" else tf.items:
                        pick(item.id, item.file, "pytest", d, reaches, f"{how}; {what} of {file}")
                    continue
                for kind, x in self._selected_by(file, qual):
                    if kind == "item":
                        pick(x.id, file, "pytest", d, reaches, how)
                    elif kind == "fixture":
                        key = (file, x.qual)
                        if key not in fixtures or d < fixtures[key][0]:
                            fixtures[key] = (d, reaches, f"{how}; fixture '{x.name}'")
                    else:
                        setup, items = x
                        for item in items:
                            pick(item.id, file, "pytest", d, reaches, f"{how}; {setup}")
        if method_hit is not None:
            self._typed_calls(method_hit, pick, fixtures, method_names)
        self._fixtures(fixtures, pick)
        for file, (hops, reaches, how) in whole_files.items():
            file_kind = self._test_kind(file)
            if file_kind == "js":
                pick(file, file, "js", hops, reaches, how)
            elif file_kind == "conftest":
                for item in self._items_under(file):
                    pick(item.id, item.file, "pytest", hops, reaches, how)
            elif file_kind == "py":
                for item in self.scan(file).items:
                    pick(item.id, file, "pytest", hops, reaches, how)
        self.flush()  # the scans this answer made, for the next process

    def _test_kind(self, file: str) -> str | None:
        """"js" for a JS/TS test file, "conftest", "py" for a Python test file, else None
        (cached per index)."""
        kind = self._kinds.get(file, False)
        if kind is False:
            kind = self._kinds[file] = ("js" if is_js_test_file(file) else "conftest" if is_conftest(file)
                                        else "py" if is_python_test_file(file) else None)
        return kind

    def _selected_by(self, file: str, qual: str) -> list[tuple[str, object]]:
        """What a reached symbol of in-file qual ``qual`` of ``file`` selects (``_by_qual`` of
        the symbol, then of what it is nested in, innermost first). Cached per index: a lens
        asks it again for every function of a file whose tests it counts."""
        got = self._selected.get((file, qual))
        if got is None:
            by_qual = self._by_qual(file)
            parts = qual.split(".")
            got = self._selected[(file, qual)] = [
                x for k in range(len(parts), 0, -1) for x in by_qual.get(".".join(parts[:k]), ())]
        return got

    def _by_qual(self, file: str) -> dict[str, list[tuple[str, object]]]:
        """In-file qual -> what a reached symbol of that qual (or nested in it) selects in
        ``file``: ("item", test), ("fixture", fixture), ("setup", (setup qual, [tests of the
        class it serves])). Cached per index."""
        got = self._quals.get(file)
        if got is None:
            tf = self.scan(file)
            got = {}
            for item in tf.items:
                got.setdefault(item.qual, []).append(("item", item))
            for fx in tf.fixtures:
                got.setdefault(fx.qual, []).append(("fixture", fx))
            for setup, cls in tf.class_setup:
                items = [i for i in tf.items if i.cls == cls or (i.cls or "").startswith(cls + ".")]
                got.setdefault(setup, []).append(("setup", (setup, items)))
            self._quals[file] = got
        return got

    def _typed_sites(self, names: set[str] | frozenset[str] | None = None
                     ) -> dict[tuple[str, str, str], tuple[Fixture, list[tuple[object, str, str]]]]:
        """(fixture file, fixture qual, method) -> (fixture, [(test or fixture, its file,
        parameter)]) for every method (of ``names``; None: any) called on a fixture parameter
        whose fixture returns a known class. A file's sites are found once per index; with
        ``names`` only the files whose bytes call one of them (``called_names``) are read."""
        sites: dict = {}
        for f in self._fixture_callers():
            if names is not None and not (self.called_names(f) & names):
                continue
            for holder, param, m, fx in self._sites_of(f):
                if names is None or m in names:
                    sites.setdefault((fx.file, fx.qual, m), (fx, []))[1].append((holder, f, param))
        return sites

    def _fixture_callers(self) -> list[str]:
        """The test files and conftests that may call a method on a fixture parameter
        (``_may_call_on_fixture``), in the order of ``py_tests`` then ``conftests``. Cached per
        index: ``_typed_sites`` runs once per symbol a lens counts tests for."""
        if self._may_call is None:
            self._may_call = [f for f in self.py_tests + self.conftests if self._may_call_on_fixture(f)]
        return self._may_call

    def _sites_of(self, f: str) -> list[tuple[object, str, str, Fixture]]:
        """(test or fixture, parameter, method, fixture) of the methods file ``f`` calls on
        fixture parameters whose fixture returns a known class, in source order."""
        got = self._file_sites.get(f)
        if got is None:
            got = []
            tf = self.scan(f)
            for holder in [*tf.items, *tf.fixtures]:
                for param, methods in sorted(holder.attr_calls.items()):
                    fx = self.fixture_for(param, f, holder.cls)
                    if fx is None or fx.returns is None:
                        continue
                    got += [(holder, param, m, fx) for m in sorted(methods)]
            self._file_sites[f] = got
        return got

    def _typed_calls(self, method_hit, pick, fixtures: dict, names=None) -> None:
        """Tests and fixtures calling a method on a fixture parameter whose class's method of
        that name reaches the change: one hop more than that method."""
        for (_, _, m), (fx, holders) in self._typed_sites(names).items():
            hit = method_hit(fx, m)
            if hit is None:
                continue
            d, reaches, mq = hit
            for holder, f, param in holders:
                how = f"calls {mq} ({d + 1} hop{'s' * (d > 0)}) on fixture '{param}'"
                if isinstance(holder, TestItem):
                    pick(holder.id, f, "pytest", d + 1, reaches, how)
                else:
                    key = (f, holder.qual)
                    if key not in fixtures or d + 1 < fixtures[key][0]:
                        fixtures[key] = (d + 1, reaches, f"{how}; fixture '{holder.name}'")

    def fixture_for(self, name: str, file: str, cls: str | None) -> Fixture | None:
        """The fixture a test or fixture of ``file`` (in class ``cls``) gets for parameter
        ``name``: its class's, its module's, then the nearest ``conftest.py``'s."""
        own = [fx for fx in self.scan(file).fixtures if fx.name == name]
        for fx in own:
            if fx.cls is not None and cls is not None and (cls == fx.cls or cls.startswith(fx.cls + ".")):
                return fx
        for fx in own:
            if fx.cls is None:
                return fx
        for conf in sorted(self.conftests, key=lambda c: -c.count("/")):
            if _under(file, conf.rpartition("/")[0]):
                for fx in self.scan(conf).fixtures:
                    if fx.name == name and fx.cls is None:
                        return fx
        return None

    def _items_under(self, conftest: str) -> list[TestItem]:
        d = conftest.rpartition("/")[0]
        return [i for f in self.py_tests if _under(f, d) for i in self.scan(f).items]

    def _visible(self, fx: Fixture) -> list[str]:
        """The files whose tests and fixtures can request ``fx``."""
        if is_conftest(fx.file):
            d = fx.file.rpartition("/")[0]
            return [f for f in self.py_tests + self.conftests if _under(f, d)]
        return [fx.file]

    def _users(self, file: str, qual: str) -> tuple[list[tuple[TestItem, str]], list[tuple[str, Fixture]]] | None:
        """The tests ([(item, file)]) and fixtures ([(file, fixture)]) requesting the fixture
        defined at ``qual`` of ``file`` (by name, within its scope; every test of its scope
        when autouse); None when that is not a fixture. Cached per index."""
        key = (file, qual)
        if key not in self._users_of:
            fx = next((f for f in self.scan(file).fixtures if f.qual == qual), None)
            if fx is None:
                self._users_of[key] = None
                return None

            def in_scope(cls: str | None) -> bool:
                return fx.cls is None or cls == fx.cls or (cls or "").startswith(fx.cls + ".")
            items, others = [], []
            for vf in self._visible(fx):
                tf = self.scan(vf)
                items += [(item, vf) for item in tf.items if in_scope(item.cls) and (fx.name in item.uses or fx.autouse)]
                others += [(vf, other) for other in tf.fixtures if in_scope(other.cls) and fx.name in other.uses]
            self._users_of[key] = (items, others)
        return self._users_of[key]

    def fixture_users(self, file: str, qual: str) -> set[str]:
        """Ids of the tests requesting the fixture at ``qual`` of ``file``, directly or through
        other fixtures (within its scope; every test of its scope when autouse); empty when
        that is not a fixture."""
        out: set[str] = set()
        self._fixtures({(file, qual): (0, None, "")}, lambda tid, *_: out.add(tid))
        return out

    def _fixtures(self, reached: dict[tuple[str, str], tuple[int, str | None, str]], pick) -> None:
        """Spread reached fixtures to the fixtures and tests that request them (by name, within
        the fixture's scope), until nothing new is reached."""
        todo = sorted(reached.items(), key=lambda kv: kv[1][0])
        done: dict[tuple[str, str], int] = {k: v[0] for k, v in reached.items()}
        while todo:
            (file, qual), (d, reaches, how) = todo.pop(0)
            users = self._users(file, qual)
            if users is None:
                continue
            items, others = users
            for item, vf in items:
                pick(item.id, vf, "pytest", d, reaches, how)
            for vf, other in others:
                key = (vf, other.qual)
                if key not in done:
                    done[key] = d
                    todo.append((key, (d, reaches, f"{how} -> fixture '{other.name}'")))


def commands(tests: list[dict]) -> dict:
    """Runnable forms of a selection: {"pytest": the command to run it, "pytest_ids": command
    with every node id, "pytest_k": command with the test files and ``-k`` of the selected test
    names, "pytest_files": command with the test files, "files": [test files], "js_files":
    [JS/TS test files]} (commands None when nothing of that runner is selected).

    "pytest" is the node-id form up to ``FILES_FORM_OVER`` tests; above, the ``-k`` form while
    its expression stays under ``K_FORM_MAX`` characters, else the files form. The ``-k`` form
    can run a few tests more than selected, never fewer: pytest matches ``-k`` names as
    substrings of test, class and module names, within the files given."""
    py = [t for t in tests if t["runner"] == "pytest"]
    js = sorted({t["file"] for t in tests if t["runner"] == "js"})
    files = sorted({t["file"] for t in py})
    out = {"files": files, "js_files": js, "pytest": None, "pytest_ids": None, "pytest_k": None, "pytest_files": None}
    if py:
        quoted_files = " ".join(shlex.quote(f) for f in files)
        out["pytest_files"] = "pytest " + quoted_files
        out["pytest_ids"] = "pytest " + " ".join(shlex.quote(t["id"]) for t in py)
        names = sorted({t["id"].rpartition("::")[2].split("[", 1)[0] for t in py})
        expr = " or ".join(names)
        out["pytest_k"] = f"pytest {quoted_files} -k {shlex.quote(expr)}"
        if len(py) <= FILES_FORM_OVER:
            out["pytest"] = out["pytest_ids"]
        else:
            out["pytest"] = out["pytest_k"] if len(expr) <= K_FORM_MAX else out["pytest_files"]
    return out
