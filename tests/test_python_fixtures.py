"""pytest fixtures as values: pytest calls a test (or a fixture) with the value of the fixture
named by each parameter, so calls on that parameter bind through what the fixture returns or
yields. The fixture is looked up as pytest does: the test's class, its module, then the
``conftest.py`` of its directory and of each directory above. Expected edges follow pytest's
semantics; the graph is a real one in the session's embedded FalkorDB."""

from __future__ import annotations

import pytest

from orbit_lsp.graph.queries import export
from orbit_lsp.index.indexer import WorkspaceIndexer

FILES = {
    "pkg/__init__.py": "",
    "pkg/app.py": '''
        class Client:
            def get(self):
                pass


        class App:
            def client(self):
                return Client()


        class Other:
            def run(self):
                pass


        class Db:
            def query(self):
                pass
    ''',
    "pkg/util.py": '''
        def test_like(app):  # not in a file pytest collects: no fixture
            return app.client()
    ''',
    "tests/conftest.py": '''
        import pytest

        from pkg.app import App, Db


        @pytest.fixture
        def app():
            return App()


        @pytest.fixture
        def client(app):
            return app.client()


        @pytest.fixture(name="db")
        def _db_fixture():
            yield Db()
    ''',
    "tests/test_top.py": '''
        import pytest

        from pkg.app import Other


        def test_app(app):
            app.client()


        def test_client(client, tmp_path):
            client.get()
            tmp_path.mkdir()


        def test_db(db):
            db.query()


        def helper(app):
            app.client()


        class TestOwn:
            @pytest.fixture
            def app(self):
                return Other()

            def test_own(self, app):
                app.run()


        class TestShared:
            def test_shared(self, app):
                app.client()
    ''',
    "tests/sub/test_override.py": '''
        import pytest

        from pkg.app import Other


        @pytest.fixture
        def app():
            return Other()


        def test_here(app):
            app.run()
    ''',
}


def out_of(ix: WorkspaceIndexer, caller: str) -> dict[str, str]:
    rows = ix.graph.ro_query("MATCH (a:Symbol {qual: $q})-[c:CALLS]->(b:Symbol) RETURN b.qual, c.resolved",
                             {"q": caller}).rows
    return dict(rows)


def unbound(ix: WorkspaceIndexer, caller: str) -> list[str]:
    rows = ix.graph.ro_query("MATCH (s:Symbol {qual: $q}) RETURN s.unresolved_sites", {"q": caller}).rows
    return sorted(rows[0][0] or []) if rows else []


@pytest.fixture
def index(index_files):
    return index_files


def test_parameters_of_tests_and_fixtures_hold_their_fixture(index):
    ix = index(FILES)
    assert out_of(ix, "tests.test_top.test_app") == {"pkg.app.App.client": "param"}
    # a fixture requesting another: ``client`` gets ``app``'s App, and gives its Client
    assert out_of(ix, "tests.conftest.client") == {"pkg.app.App.client": "param"}
    assert out_of(ix, "tests.test_top.test_client") == {"pkg.app.Client.get": "param"}
    # a built-in fixture (tmp_path) is not the workspace's: the call stays unbound, counted
    assert unbound(ix, "tests.test_top.test_client") == ["mkdir@12"]
    # a fixture renamed with name=, and a yield fixture: what it yields
    assert out_of(ix, "tests.test_top.test_db") == {"pkg.app.Db.query": "param"}
    # a class's own fixture wins over the conftest's, for that class's tests only
    assert out_of(ix, "tests.test_top.TestOwn.test_own") == {"pkg.app.Other.run": "param"}
    assert out_of(ix, "tests.test_top.TestShared.test_shared") == {"pkg.app.App.client": "param"}
    # a module's fixture wins over the conftest's above it
    assert out_of(ix, "tests.sub.test_override.test_here") == {"pkg.app.Other.run": "param"}


def test_functions_pytest_does_not_call_get_no_fixture(index):
    """A helper in a test file, and a ``test_*`` function outside the files pytest collects,
    get what their callers pass them (nothing here), not a fixture."""
    ix = index(FILES)
    assert out_of(ix, "tests.test_top.helper") == {}
    assert unbound(ix, "tests.test_top.helper") == ["client@20"]
    assert out_of(ix, "pkg.util.test_like") == {}


def test_an_edit_of_a_fixture_rebinds_its_tests_as_a_rebuild_does(tmp_path, store, settings, index):
    ix = index(FILES)
    conftest = ix.root / "tests" / "conftest.py"
    conftest.write_text(conftest.read_text().replace("    return App()", "    return Other()").replace(
        "from pkg.app import App, Db", "from pkg.app import App, Db, Other"))
    ix.reindex_file(conftest)
    assert out_of(ix, "tests.test_top.test_app") == {}
    assert out_of(ix, "tests.test_top.TestShared.test_shared") == {}
    assert unbound(ix, "tests.test_top.test_app") == ["client@7"]
    fresh = index({rel: (ix.root / rel).read_text() for rel in FILES}, name="fresh")
    assert export(ix.graph) == export(fresh.graph)
    # a conftest removed: its tests' parameters hold nothing
    conftest.unlink()
    ix.remove_file(conftest)
    assert out_of(ix, "tests.test_top.test_db") == {}
    assert unbound(ix, "tests.test_top.test_db") == ["query@16"]
