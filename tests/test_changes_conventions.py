"""Test selection by pytest's conventions, checked against pytest itself: for each function of a
small package, its body is made to raise, the suite is run for real (a pytest subprocess), and the
tests that fail must be exactly the tests ``orbit-lsp changes`` selects (fixtures renamed with
``name=``, fixture chains across conftest files, ``autouse`` below a directory, ``usefixtures``
on a test and in ``pytestmark``, ``request.getfixturevalue``, tests inherited from a base class
with its ``setup_method``, ``unittest`` ``setUpClass``, module-level code of a test module and of
a module a test file imports, a closure returned by a method called on a fixture, a method only
the standard library calls, functions handed to the standard library as values, a method of a standard-library subclass
called both by the workspace and by the library)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from changes_repo import Repo
from orbit_lsp.changes import diff, impact
from orbit_lsp.changes.selection import commands
from orbit_lsp.index.indexer import WorkspaceIndexer

LIB = {name: value for value, name in enumerate("abcdefghkm", 1)}
SUITE = {
    "pkg/__init__.py": "",
    "pkg/lib.py": "".join(f"\n\ndef {n}():\n    return {v}\n" for n, v in LIB.items()),
    "pkg/registry.py": '''
        from pkg.lib import m

        DEFAULT = m()
        ''',
    "pkg/hooks.py": '''
        class Hooks:
            def __init__(self):
                self.handlers = []

            def on(self, name):
                def decorator(fn):
                    self.handlers.append((name, fn))
                    return fn
                return decorator

            def fire(self):
                return [fn() for _, fn in self.handlers]
        ''',
    "pkg/encode.py": '''
        import json


        class Encoder(json.JSONEncoder):
            def default(self, o):
                return sorted(o)


        def dump(x):
            return Encoder().encode(x)


        DEFAULT = Encoder()  # made at import; its default() runs only when used
        ''',
    "tests/test_encode.py": '''
        from pkg.encode import dump


        def test_dump():
            assert dump({2, 1}) == "[1, 2]"
        ''',
    "pkg/values.py": '''
        import json


        def as_list(o):
            return sorted(o)


        def dump_set(x):
            return json.dumps(x, default=as_list)  # json calls as_list: a value, not a call


        def by_length(o):
            return [len(o)]


        class Dumper:
            hook = staticmethod(by_length)  # stored in the class body

            def dump(self, x):
                return json.dumps(x, default=self.hook)


        def unused(o):
            return o
        ''',
    "pkg/groups.py": '''
        import argparse


        class Group(argparse.Namespace):  # no __init__ of its own: argparse's runs
            pass


        class SubGroup(Group):
            def __init__(self):
                super().__init__(x=1)


        def make_group():
            return Group()  # never runs SubGroup.__init__


        def make_sub():
            return SubGroup()


        class Box:
            # ``if box:`` runs it
            def __bool__(self):
                return True

            # Python 2's name of __bool__: Python 3 never calls it
            def __nonzero__(self):
                return True


        class Sized:
            def __len__(self) -> int:
                return 1


        class Resized(Sized):  # its own __len__: len(Resized()) never runs Sized.__len__
            def __len__(self):
                return 2


        class Inherits(Resized):
            pass
        ''',
    "tests/test_groups.py": '''
        from pkg.groups import Box, Inherits, Resized, Sized, make_group, make_sub


        def test_group():
            assert make_group() is not None


        def test_sub():
            assert make_sub().x == 1


        def test_truth():
            assert Box()


        def test_sized():
            assert len(Sized()) == 1


        def test_resized():
            assert len(Resized()) == 2 and len(Inherits()) == 2
        ''',
    "pkg/jar.py": '''
        import json


        class Enc(json.JSONEncoder):
            def default(self, o):
                return sorted(o)


        def direct(x):
            return Enc().default(x)  # the workspace calls default too


        def dump(x):
            return Enc().encode(x)  # and json's encoder calls it on the instance
        ''',
    "tests/test_jar.py": '''
        from pkg.jar import direct, dump


        def test_direct():
            assert direct({2, 1}) == [1, 2]


        def test_dump():
            assert dump({2, 1}) == "[1, 2]"
        ''',
    "tests/test_values.py": '''
        from pkg.values import Dumper, dump_set


        def test_dump_set():
            assert dump_set({2, 1}) == "[1, 2]"


        def test_dumper():
            assert Dumper().dump({"ab"}) == "[1]"


        def test_nothing():
            pass
        ''',
    "tests/test_encode_import.py": '''
        from pkg.encode import DEFAULT


        def test_made():
            assert DEFAULT is not None
        ''',
    "tests/__init__.py": "",
    "tests/test_registry.py": '''
        from pkg.registry import DEFAULT


        def test_default():
            assert DEFAULT == 10


        def test_other():
            pass
        ''',
    "tests/test_hooks.py": '''
        import pytest

        from pkg.hooks import Hooks


        @pytest.fixture
        def hooks():
            return Hooks()


        def test_on(hooks):
            @hooks.on("x")
            def handler():
                return 1
            assert hooks.fire() == [1]


        def test_plain():
            assert Hooks().handlers == []
        ''',
    "tests/conftest.py": '''
        import pytest

        from pkg.lib import a


        @pytest.fixture(name="alpha")
        def _alpha_fixture():
            return a()


        @pytest.fixture
        def uses_alpha(alpha):
            return alpha + 1
        ''',
    "tests/sub/__init__.py": "",
    "tests/sub/conftest.py": '''
        import pytest

        from pkg.lib import e


        @pytest.fixture(autouse=True)
        def everywhere_below():
            return e()
        ''',
    "tests/sub/test_below.py": '''
        def test_one():
            pass


        def test_two():
            pass
        ''',
    "tests/test_marked.py": '''
        import pytest

        from pkg.lib import h

        pytestmark = pytest.mark.usefixtures("marked")


        @pytest.fixture
        def marked():
            return h()


        def test_m1():
            pass


        class TestInClass:
            def test_m2(self):
                pass
        ''',
    "tests/test_conv.py": '''
        import unittest

        import pytest

        from pkg.lib import b, c, d, f, g, k

        VALUE = f()


        @pytest.fixture
        def local_fx():
            return b()


        def test_local(local_fx):
            assert local_fx == 2


        def test_chain(uses_alpha):
            assert uses_alpha == 2


        @pytest.mark.usefixtures("alpha")
        def test_usefixtures():
            pass


        def test_by_name(request):
            assert request.getfixturevalue("local_fx") == 2


        class Base:
            def setup_method(self):
                self.v = c()

            def test_inherited(self):
                assert self.v == 3


        class TestChild(Base):
            def test_own(self):
                assert k() == 9


        class UT(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                cls.v = d()

            def test_ut(self):
                assert self.v == 4


        def test_value():
            assert VALUE == 6


        def test_g():
            assert g() == 7
        ''',
}
SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - .*)?$")


@pytest.fixture(scope="module")
def suite(tmp_path_factory, store, settings):
    """(repository, its indexer, the node ids pytest collects)."""
    repo = Repo(tmp_path_factory.mktemp("conv") / "ws")
    for rel, text in SUITE.items():
        repo.write(rel, text)
    repo.commit("base")
    collected = [ln for ln in pytest_run(repo.root, "--collect-only", "tests").stdout.splitlines() if "::" in ln]
    ix = WorkspaceIndexer(repo.root, store, settings)
    yield repo, ix, collected
    ix.graph.delete()


def pytest_run(root, *args) -> subprocess.CompletedProcess:
    """pytest on the suite of ``root`` for real, in a child interpreter that writes no bytecode
    cache: a test edits a function, runs the suite, restores it and edits the next within the
    same second, and an edit of the same size would else run the previous edit's cached code
    (a cache is valid for a source's mtime in seconds and its size)."""
    env = {**os.environ, "PYTHONPATH": str(root), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=root, capture_output=True, text=True, env=env, timeout=120)


def failing(root, collected: list[str]) -> set[str]:
    """The tests that fail (a module that fails to import: every test of it)."""
    out = pytest_run(root, "-rfE", "--tb=no", "tests").stdout
    got = set()
    for line in out.splitlines():
        m = SUMMARY.match(line.strip())
        if m and "::" in m.group(2):
            got.add(m.group(2))
        elif m:
            got |= {t for t in collected if t.startswith(m.group(2) + "::")}
    return got


EDITS = [("pkg/lib.py", f"def {fn}():") for fn in sorted(LIB)] + [
    ("pkg/hooks.py", "        def decorator(fn):"),  # a closure: run by whoever got it from Hooks.on
    ("pkg/encode.py", "    def default(self, o):"),  # called by the standard library on an Encoder
    ("pkg/values.py", "def as_list(o):"),  # a value handed to json by dump_set
    ("pkg/values.py", "def by_length(o):"),  # a value stored in a class body, used through instances
    ("pkg/groups.py", "    def __init__(self):"),  # run by SubGroup(), never by Group() (its base)
    ("pkg/groups.py", "    def __bool__(self):"),  # run by ``assert Box()``, without a call expression
    ("pkg/groups.py", "    def __len__(self) -> int:"),  # Sized's, not run by a subclass overriding it
    ("pkg/jar.py", "    def default(self, o):"),  # called by the workspace and by json on an Enc
]


@pytest.mark.parametrize("rel, definition", EDITS)
def test_selection_is_what_fails(suite, rel, definition):
    repo, ix, collected = suite
    assert len(collected) == 29  # the suite as pytest sees it (TestChild::test_inherited included)
    indent = " " * (len(definition) - len(definition.lstrip()) + 4)
    repo.edit(rel, definition + "\n", f"{definition}\n{indent}raise RuntimeError('broken')\n")
    try:
        impact.refresh(ix)
        result = impact.analyse(ix.graph, diff.from_git(repo.root, "worktree"), ix.root_package)
        fails = failing(repo.root, collected)
        assert fails, "every function edited is used by some test"
        assert sorted(t["id"] for t in result["tests"]["selected"]) == sorted(fails)
        assert result["tests"]["total"] == len(collected)
    finally:
        repo.git("checkout", "--", rel)


def test_a_python2_special_method_is_a_plain_method(suite):
    """``__nonzero__`` is Python 2's ``__bool__``: Python 3 never runs it, so breaking it breaks
    no test, and nothing is selected (not every test that makes a ``Box``)."""
    repo, ix, collected = suite
    rel, definition = "pkg/groups.py", "    def __nonzero__(self):"
    repo.edit(rel, definition + "\n", f"{definition}\n        raise RuntimeError('broken')\n")
    try:
        impact.refresh(ix)
        result = impact.analyse(ix.graph, diff.from_git(repo.root, "worktree"), ix.root_package)
        assert failing(repo.root, collected) == set()
        assert result["tests"]["selected"] == []
        assert [s["qual"] for s in result["symbols"]] == ["pkg.groups.Box.__nonzero__"]
    finally:
        repo.git("checkout", "--", rel)


def test_command_forms():
    tests = [{"id": f"tests/test_{i % 3}.py::TestX::test_{i}[p]", "file": f"tests/test_{i % 3}.py", "runner": "pytest"}
             for i in range(50)]
    c = commands(tests)
    assert c["files"] == ["tests/test_0.py", "tests/test_1.py", "tests/test_2.py"]
    assert c["pytest_files"] == "pytest tests/test_0.py tests/test_1.py tests/test_2.py"
    # above 40 tests: the test files and -k of the tests' names (parameters dropped, each name once)
    names = " or ".join(sorted({f"test_{i}" for i in range(50)}))
    assert c["pytest_k"] == f"pytest tests/test_0.py tests/test_1.py tests/test_2.py -k '{names}'"
    assert c["pytest"] == c["pytest_k"]
    assert c["pytest_ids"].split()[1] == "'tests/test_0.py::TestX::test_0[p]'"
    few = commands(tests[:3])
    assert few["pytest"] == few["pytest_ids"]
    # a -k expression too long to be useful: the files
    many = [{"id": f"tests/t_test.py::test_{'x' * 60}_{i}", "file": "tests/t_test.py", "runner": "pytest"}
            for i in range(100)]
    assert commands(many)["pytest"] == "pytest tests/t_test.py"
    assert commands([])["pytest"] is None


def test_tests_lens_agrees_on_values_and_constructors(suite):
    """The "N tests reach this" lens (``reach.tests_reaching``) follows the same rules: a
    function handed to the standard library as a value, one stored in a class body, an
    ``__init__`` that a base class's constructor never runs, a method of a standard-library
    subclass, special methods (a Python 2 name runs never; one a subclass overrides does not
    run for the subclass's instances)."""
    from orbit_lsp.changes.reach import tests_reaching
    from orbit_lsp.changes.selection import TestIndex

    repo, ix, _ = suite
    impact.refresh(ix)
    files = [r[0] for r in ix.graph.ro_query("MATCH (f:File) RETURN f.path").rows]
    index = TestIndex(files, lambda rel: (repo.root / rel).read_bytes() if (repo.root / rel).is_file() else None)
    targets = [{"file": "pkg/values.py", "qual": "pkg.values.as_list", "name": "as_list", "kind": "function", "line": 4},
               {"file": "pkg/values.py", "qual": "pkg.values.by_length", "name": "by_length", "kind": "function",
                "line": 12},
               {"file": "pkg/groups.py", "qual": "pkg.groups.SubGroup.__init__", "name": "__init__", "kind": "method",
                "line": 9},
               {"file": "pkg/jar.py", "qual": "pkg.jar.Enc.default", "name": "default", "kind": "method", "line": 5},
               {"file": "pkg/groups.py", "qual": "pkg.groups.Box.__bool__", "name": "__bool__", "kind": "method",
                "line": 23},
               {"file": "pkg/groups.py", "qual": "pkg.groups.Box.__nonzero__", "name": "__nonzero__", "kind": "method",
                "line": 27},
               {"file": "pkg/groups.py", "qual": "pkg.groups.Sized.__len__", "name": "__len__", "kind": "method",
                "line": 32}]
    got = tests_reaching(ix.graph, targets, index, ix.root_package)
    assert {q: [t["id"] for t in tests] for (_, q), tests in got.items()} == {
        "pkg.values.as_list": ["tests/test_values.py::test_dump_set"],
        "pkg.values.by_length": ["tests/test_values.py::test_dumper"],
        "pkg.groups.SubGroup.__init__": ["tests/test_groups.py::test_sub"],
        "pkg.jar.Enc.default": ["tests/test_jar.py::test_direct", "tests/test_jar.py::test_dump"],
        "pkg.groups.Box.__bool__": ["tests/test_groups.py::test_truth"],
        "pkg.groups.Box.__nonzero__": [],
        "pkg.groups.Sized.__len__": ["tests/test_groups.py::test_sized"]}


def test_only_files_that_may_call_on_a_fixture_are_parsed_for_it():
    """``TestIndex._typed_sites`` parses a test file for methods called on fixture parameters only
    when its bytes allow one: it defines fixtures, or calls a method directly on the name of a
    fixture returning a class from a conftest above it. The answer is the same as parsing all."""
    from orbit_lsp.changes.selection import TestIndex

    files = {
        "tests/conftest.py": "import pytest\nfrom app import Engine\n\n@pytest.fixture\ndef engine():\n"
                             "    return Engine()\n\n@pytest.fixture\ndef number():\n    return 3\n",
        "tests/test_typed.py": "def test_run(engine):\n    assert engine.run(1)\n",
        "tests/test_plain.py": "def test_run(e):\n    assert e.run(1)\n\ndef test_number(number):\n"
                               "    assert number.bit_length() == 2\n",
        "tests/test_own.py": "import pytest\n\n@pytest.fixture\ndef e():\n    return Engine()\n\n"
                             "def test_run(e):\n    assert e.run(2)\n",
        "other/test_far.py": "def test_run(engine):\n    assert engine.run(1)\n",  # no conftest above
    }
    reads: list[str] = []

    def read(rel: str) -> bytes | None:
        reads.append(rel)
        return files[rel].encode() if rel in files else None

    index = TestIndex(list(files), read)
    assert {f: index._may_call_on_fixture(f) for f in files if f != "tests/conftest.py"} == {
        "tests/test_typed.py": True, "tests/test_plain.py": False, "tests/test_own.py": True,
        "other/test_far.py": False}
    sites = index._typed_sites({"run"})
    assert sorted((k, [(h.id, f, p) for h, f, p in v[1]]) for k, v in sites.items()) == [
        (("tests/conftest.py", "engine", "run"), [("tests/test_typed.py::test_run", "tests/test_typed.py", "engine")]),
        (("tests/test_own.py", "e", "run"), [("tests/test_own.py::test_run", "tests/test_own.py", "e")])]
    full = TestIndex(list(files), read)
    full._may_call_on_fixture = lambda f: True  # every file parsed: the same sites
    assert full._typed_sites({"run"}).keys() == sites.keys()
