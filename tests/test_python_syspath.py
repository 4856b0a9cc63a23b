"""Imports that resolve only through the ``sys.path`` changes the code makes: a conftest
fixture's ``monkeypatch.syspath_prepend`` (flask's ``test_apps``), a script's
``sys.path.insert(0, os.path.dirname(__file__) + …)``, ``Path(__file__).parent / "lib"``,
pytest's ``pythonpath`` option, and pytest's insertion of a conftest's base directory.

The expected edges are what Python does when the code runs: after the directory is on
``sys.path``, ``import name`` finds ``<directory>/name``. A directory the source does not
determine (an environment variable, a path relative to the working directory) is not
followed: the import stays what it was without the line (an unbound external name), and a
module missing under a followed directory is an unresolved import. Edits that add or remove
the line give the graph of a rebuild."""

from __future__ import annotations

import textwrap

import pytest

from orbit_lsp.index import python as pyx
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.index.py_syspath import pytest_pythonpath
from test_incremental import VALUE_FLOW, assert_same, new_indexer, workspaces, write


@pytest.fixture
def index(index_files):
    return index_files


def calls(ix: WorkspaceIndexer) -> set[tuple[str, str, str]]:
    rows = ix.graph.ro_query("MATCH (a:Symbol)-[c:CALLS]->(b:Symbol) RETURN a.qual, b.qual, c.resolved").rows
    return {tuple(r) for r in rows}


def imports(ix: WorkspaceIndexer) -> set[tuple[str, str]]:
    rows = ix.graph.ro_query("MATCH (a:File)-[:IMPORTS]->(b:File) RETURN a.path, b.path").rows
    return {tuple(r) for r in rows}


def unresolved_imports(ix: WorkspaceIndexer, path: str) -> list[str]:
    rows = ix.graph.ro_query("MATCH (f:File {path: $p}) RETURN f.unresolved_imports", {"p": path}).rows
    return list(rows[0][0] or [])


def callees(ix: WorkspaceIndexer, qual: str) -> set[str]:
    return {b for a, b, _ in calls(ix) if a == qual}


FLASK_LIKE = {
    "tests/conftest.py": """
        import os

        import pytest


        @pytest.fixture
        def test_apps(monkeypatch):
            monkeypatch.syspath_prepend(os.path.join(os.path.dirname(__file__), "test_apps"))
        """,
    "tests/test_apps/blueprintapp/__init__.py": """
        from blueprintapp.apps.admin import admin


        def create_app():
            return admin()
        """,
    "tests/test_apps/blueprintapp/apps/__init__.py": "",
    "tests/test_apps/blueprintapp/apps/admin.py": """
        def admin():
            return 1
        """,
    "tests/test_apps/cliapp/__init__.py": "",
    "tests/test_apps/cliapp/app.py": """
        def make():
            return 2
        """,
    "tests/test_blueprints.py": """
        def test_templates_and_static(test_apps):
            from blueprintapp import create_app

            create_app()


        def test_cli(test_apps):
            import cliapp.app

            cliapp.app.make()
        """,
    # outside the conftest's directory: sys.path has not been changed for it
    "scripts/other.py": """
        from blueprintapp import create_app


        def run():
            create_app()
        """,
}


# -- extraction ------------------------------------------------------------------------------------
EXPRESSIONS = [
    ('sys.path.insert(0, os.path.dirname(__file__))', ("a/b",)),
    ('sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))', ("a/b",)),
    ('sys.path.insert(0, os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "lib")))', ("a/lib",)),
    ('sys.path.append(os.path.normpath(os.path.dirname(__file__) + "/../../lib"))', ("lib",)),
    ('sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir)))', ("a",)),
    ('sys.path.insert(0, os.path.abspath(os.path.join(__file__, "..", "..")))', ("a",)),
    ('sys.path.append(str(Path(__file__).parent / "lib"))', ("a/b/lib",)),
    ('sys.path.append(str(Path(__file__).resolve().parent.parent))', ("a",)),
    ('sys.path.append(str(pathlib.Path(__file__).parents[1] / "x" / "y"))', ("a/x/y",)),
    ('sys.path.extend([os.path.dirname(__file__), str(Path(__file__).parent.joinpath("z"))])', ("a/b", "a/b/z")),
    ('sys.path[:0] = [os.fspath(Path(__file__).parent / "v")]', ("a/b/v",)),
    ('sys.path += [f"{os.path.dirname(__file__)}/w"]', ("a/b/w",)),
    ('sys.path = [os.path.dirname(__file__) + "/q"] + sys.path', ("a/b/q",)),
    ('site.addsitedir(os.path.join(os.path.dirname(__file__), "s"))', ("a/b/s",)),
    ('HERE = os.path.dirname(os.path.abspath(__file__))\nsys.path.insert(0, os.path.join(HERE, "h"))', ("a/b/h",)),
    ('def f(monkeypatch):\n    monkeypatch.syspath_prepend(os.path.join(os.path.dirname(__file__), "m"))', ("a/b/m",)),
    # the workspace root itself, and outside the workspace: the root is kept, the outside not
    ('sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))', ("",)),
    ('sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))', ()),
    # not determined by the file's location: not followed
    ('sys.path.insert(0, "lib")', ()),
    ('sys.path.insert(0, os.path.abspath(".."))', ()),
    ('sys.path.insert(0, os.environ["LIB"])', ()),
    ('sys.path.insert(0, os.getcwd())', ()),
    ('sys.path.insert(0, "/usr/lib/x")', ()),
    ('sys.path.insert(0, helper())', ()),
    ('HERE = os.path.dirname(__file__)\nHERE = os.getcwd()\nsys.path.insert(0, HERE)', ()),  # bound twice, differently
    ('for d in ("a", "b"):\n    sys.path.insert(0, d)', ()),
    # not ``sys.path``
    ('other.path.insert(0, os.path.dirname(__file__))', ()),
    ('items.insert(0, os.path.dirname(__file__))', ()),
]


@pytest.mark.parametrize("source,dirs", EXPRESSIONS)
def test_directories_a_file_adds(source, dirs):
    facts = pyx.extract("a/b/c.py", ("import os, sys, site, pathlib\nfrom pathlib import Path\n" + source + "\n").encode())
    assert facts.sys_path == dirs


# -- resolution ------------------------------------------------------------------------------------
def test_conftest_fixture_syspath_prepend(index):
    """flask's ``test_apps`` fixture: the imports inside the tests bind to the test apps."""
    ix = index(FLASK_LIKE)
    got = calls(ix)
    assert ("tests.test_blueprints.test_templates_and_static", "tests.test_apps.blueprintapp.create_app",
            "import") in got
    assert ("tests.test_blueprints.test_cli", "tests.test_apps.cliapp.app.make", "module") in got
    # the app's own absolute import of its package, through the same directory
    assert ("tests.test_apps.blueprintapp.create_app", "tests.test_apps.blueprintapp.apps.admin.admin",
            "import") in got
    imp = imports(ix)
    assert ("tests/test_blueprints.py", "tests/test_apps/blueprintapp/__init__.py") in imp
    assert ("tests/test_blueprints.py", "tests/test_apps/cliapp/app.py") in imp
    # a file outside tests/: nothing put test_apps on its path
    assert not any(a == "scripts/other.py" for a, _ in imp)
    assert callees(ix, "scripts.other.run") == set()  # an external name, as without the fixture


def test_script_inserts_its_vendor_directory(index):
    ix = index({
        "tools/run.py": """
            import os
            import sys

            sys.path.insert(0, os.path.dirname(__file__) + "/../vendor")
            import helper


            def main():
                helper.go()
            """,
        "vendor/helper.py": "def go():\n    pass\n",
        "tools/other.py": "import helper\n\n\ndef main():\n    helper.go()\n",
    })
    assert ("tools.run.main", "vendor.helper.go", "module") in calls(ix)
    assert ("tools/run.py", "vendor/helper.py") in imports(ix)
    # a script's additions are its own: its sibling did not run them
    assert callees(ix, "tools.other.main") == set()


def test_path_parent_lib(index):
    ix = index({
        "app/main.py": """
            import sys
            from pathlib import Path

            sys.path.append(str(Path(__file__).parent / "lib"))
            from util import work


            def main():
                work()
            """,
        "app/lib/util.py": "def work():\n    pass\n",
    })
    assert ("app.main.main", "app.lib.util.work", "import") in calls(ix)


def test_package_init_vendors_a_directory(index):
    """A package's ``__init__`` runs before its modules: its additions hold for them."""
    ix = index({
        "pkg/__init__.py": "import os, sys\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '_vendor'))\n",
        "pkg/_vendor/six.py": "def moves():\n    pass\n",
        "pkg/core.py": "import six\n\n\ndef f():\n    six.moves()\n",
    })
    assert ("pkg.core.f", "pkg._vendor.six.moves", "module") in calls(ix)


def test_conftest_base_directory(index):
    """pytest (``prepend`` import mode) puts a conftest's base directory (its first ancestor
    that is not a package) on ``sys.path``: tests below it import helpers that live there."""
    ix = index({
        "tests/conftest.py": "",
        "tests/helpers.py": "def make():\n    pass\n",
        "tests/unit/test_a.py": "from helpers import make\n\n\ndef test_a():\n    make()\n",
        "scripts/s.py": "from helpers import make\n\n\ndef run():\n    make()\n",
    })
    assert ("tests.unit.test_a.test_a", "tests.helpers.make", "import") in calls(ix)
    assert callees(ix, "scripts.s.run") == set()


@pytest.mark.parametrize("name,text", [
    ("pyproject.toml", '[tool.pytest.ini_options]\npythonpath = ["helpers", "."]\n'),
    ("pytest.ini", "[pytest]\npythonpath = helpers .\n"),
    ("setup.cfg", "[metadata]\nname = x\n\n[tool:pytest]\npythonpath = helpers\n"),
    ("tox.ini", "[tox]\nenvlist = py311\n\n[pytest]\npythonpath =\n    helpers\n"),
])
def test_pytest_pythonpath(index, name, text):
    ix = index({
        name: text,
        "helpers/fixtures_lib.py": "def make():\n    pass\n",
        "tests/test_a.py": "from fixtures_lib import make\n\n\ndef test_a():\n    make()\n",
        "src/app/mod.py": "import fixtures_lib\n\n\ndef f():\n    fixtures_lib.make()\n",
    })
    got = calls(ix)
    assert ("tests.test_a.test_a", "helpers.fixtures_lib.make", "import") in got
    assert ("app.mod.f", "helpers.fixtures_lib.make", "module") in got  # every file


def test_pytest_config_precedence(tmp_path):
    """The first config file pytest would take is the one read: pytest.ini wins even without
    the option; a pyproject.toml without a pytest table is skipped."""
    (tmp_path / "pyproject.toml").write_text("[tool.black]\nline-length = 99\n")
    (tmp_path / "tox.ini").write_text("[pytest]\npythonpath = b ../outside /abs\n")
    assert pytest_pythonpath(tmp_path) == ("b",)
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -q\n")
    assert pytest_pythonpath(tmp_path) == ()


def test_undetermined_directory_stays_unresolved(index):
    ix = index({
        "tools/run.py": """
            import os
            import sys

            sys.path.insert(0, os.environ["VENDOR"])
            sys.path.insert(0, "vendor")
            import helper


            def main():
                helper.go()
            """,
        "tools/pkgs.py": """
            import os
            import sys

            sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "vendor"))
            import helper.nothere
            """,
        "vendor/helper/__init__.py": "def go():\n    pass\n",
    })
    assert not any(a == "tools/run.py" for a, _ in imports(ix))
    assert callees(ix, "tools.run.main") == set()
    assert unresolved_imports(ix, "tools/run.py") == []  # an external name, as without the lines
    # under a followed directory, a module that is not there is an unresolved import
    assert unresolved_imports(ix, "tools/pkgs.py") == ["5:helper.nothere"]


# -- incremental = rebuild -------------------------------------------------------------------------
LINE = 'monkeypatch.syspath_prepend(os.path.join(os.path.dirname(__file__), "test_apps"))'


@pytest.fixture(params=[False, True], ids=["plain", "value-flow"])
def value_flow(request):
    """Indexers of ``test_incremental.new_indexer`` with parameter values off, then on."""
    VALUE_FLOW[0] = request.param
    try:
        yield request.param
    finally:
        VALUE_FLOW[0] = False


def test_adding_and_removing_the_line_equals_rebuild(store, value_flow):
    with workspaces() as make:
        root = make() / "ws"
        files = dict(FLASK_LIKE)
        files["tests/conftest.py"] = files["tests/conftest.py"].replace(LINE, "pass")
        for rel, text in files.items():
            write(root, rel, textwrap.dedent(text).lstrip("\n"))
        ix = new_indexer(make, root, store)
        assert ix.index_all().mode == "full"
        edge = ("tests.test_blueprints.test_templates_and_static", "tests.test_apps.blueprintapp.create_app", "import")
        assert edge not in calls(ix)
        conftest = textwrap.dedent(FLASK_LIKE["tests/conftest.py"]).lstrip("\n")
        # the conftest gains the line: the test file, not edited, binds through it
        write(root, "tests/conftest.py", conftest)
        ix.reindex_file(root / "tests/conftest.py")
        assert edge in calls(ix)
        assert_same(ix, make, store, "after adding the sys.path line")
        # and loses it again
        write(root, "tests/conftest.py", conftest.replace(LINE, "pass"))
        ix.reindex_file(root / "tests/conftest.py")
        assert edge not in calls(ix)
        assert_same(ix, make, store, "after removing the sys.path line")
        # the directory changes: the import goes with it
        write(root, "tests/conftest.py", conftest.replace('"test_apps"', '"elsewhere"'))
        ix.reindex_file(root / "tests/conftest.py")
        assert edge not in calls(ix)
        assert_same(ix, make, store, "after moving the directory")


def test_script_line_added_and_removed_equals_rebuild(store, value_flow):
    with workspaces() as make:
        root = make() / "ws"
        write(root, "vendor/helper.py", "def go():\n    pass\n")
        run = "import os\nimport sys\n\nimport helper\n\n\ndef main():\n    helper.go()\n"
        write(root, "tools/run.py", run)
        ix = new_indexer(make, root, store)
        ix.index_all()
        edge = ("tools.run.main", "vendor.helper.go", "module")
        assert edge not in calls(ix)
        write(root, "tools/run.py", run.replace("\nimport helper", '\nsys.path.insert(0, os.path.dirname(__file__) + "/../vendor")\nimport helper'))
        ix.reindex_file(root / "tools/run.py")
        assert edge in calls(ix)
        assert_same(ix, make, store, "after adding the sys.path line")
        write(root, "tools/run.py", run)
        ix.reindex_file(root / "tools/run.py")
        assert edge not in calls(ix)
        assert_same(ix, make, store, "after removing the sys.path line")


def test_pythonpath_option_added_then_reopened(store):
    """The option appears in pytest.ini: the next index (same process, then a new one from the
    cache) binds through it, as a rebuild does; removed, the edges go."""
    with workspaces() as make:
        root = make() / "ws"
        write(root, "helpers/fixtures_lib.py", "def make():\n    pass\n")
        write(root, "tests/test_a.py", "from fixtures_lib import make\n\n\ndef test_a():\n    make()\n")
        ix = new_indexer(make, root, store)
        ix.index_all()
        edge = ("tests.test_a.test_a", "helpers.fixtures_lib.make", "import")
        assert edge not in calls(ix)
        (root / "pytest.ini").write_text("[pytest]\npythonpath = helpers\n")
        assert ix.index_all().mode == "incremental"
        assert edge in calls(ix)
        assert_same(ix, make, store, "after adding pythonpath")
        (root / "pytest.ini").write_text("[pytest]\n")
        ix2 = new_indexer(make, root, store)  # a new process: from the cache
        assert ix2.index_all().mode == "incremental"
        assert edge not in calls(ix2)
        assert_same(ix2, make, store, "after removing pythonpath")
        assert ix2.index_all().mode == "unchanged"


def test_namespace_folder_does_not_shadow_a_library(index):
    """pytest puts ``tests/`` on the path (the conftest's base directory), but a bare
    ``tests/typing/`` folder is only a namespace portion: ``import typing`` is the standard
    library's, and ``import helpers`` (a folder without ``__init__.py``) stays external."""
    ix = index({
        "tests/conftest.py": "",
        "tests/typing/check_route.py": "import typing as t\n\n\ndef f():\n    t.cast(int, 1)\n",
        "tests/unit/test_b.py": "import typing\n",
    })
    assert not any(b.startswith("tests/typing") for _, b in imports(ix))
    rows = ix.graph.ro_query("MATCH (f:File)-[:USES_PACKAGE]->(p:Package {name: 'typing'}) RETURN f.path").rows
    assert sorted(r[0] for r in rows) == ["tests/typing/check_route.py", "tests/unit/test_b.py"]


def test_unsaved_buffer_follows_its_own_sys_path_line(index):
    """The editor's buffer analysis binds through a ``sys.path`` line the buffer has and the
    saved file does not (and not through one only the saved file has)."""
    from orbit_lsp.index.buffers import analyse_buffer
    from orbit_lsp.index.indexer import content_hash

    saved = "import os\nimport sys\n\nimport helper\n\n\ndef main():\n    helper.go()\n"
    ix = index({"tools/run.py": saved, "vendor/helper.py": "def go():\n    pass\n"})

    def bound(text: str) -> set[tuple[str, str]]:
        data = text.encode()
        _, edges = analyse_buffer(ix, "tools/run.py", data, content_hash(data), True)
        return {(k[1], k[2]) for k in edges.calls if k[0] == "main"}

    assert bound(saved) == set()
    line = 'sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "vendor"))\n'
    unsaved = saved.replace("import helper\n", line + "import helper\n")
    assert bound(unsaved) == {("vendor/helper.py", "go")}
    # saved with the line, the buffer without it: the buffer's facts win
    (ix.root / "tools/run.py").write_text(unsaved)
    ix.reindex_file(ix.root / "tools/run.py")
    assert ("tools.run.main", "vendor.helper.go", "module") in calls(ix)
    assert bound(saved) == set()
