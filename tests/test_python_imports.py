"""``from package import name`` where ``name`` is neither a submodule nor bound by the
package's ``__init__``: an unresolved import, not an IMPORTS edge to ``__init__`` (which
would count the importer among ``__init__``'s dependents). A name the ``__init__`` binds, or
may bind (star import, module ``__getattr__``), keeps the edge; the answer follows edits of
the ``__init__``."""

from __future__ import annotations

import pytest

from orbit_lsp.index.indexer import WorkspaceIndexer


def _edges(ix: WorkspaceIndexer) -> tuple[set, list]:
    imports = {tuple(r) for r in ix.graph.ro_query(
        "MATCH (a:File)-[:IMPORTS]->(b:File) RETURN a.path, b.path").rows}
    rec = ix.graph.ro_query("MATCH (f:File {path: 'pkg/user.py'}) RETURN f.unresolved_imports").rows
    return imports, list(rec[0][0] or [])


@pytest.fixture
def ix(tmp_path, store):
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("from .real import thing\nlimit = 3\n")
    (root / "pkg" / "real.py").write_text("def thing():\n    return 1\n")
    (root / "pkg" / "user.py").write_text("from . import missing\nfrom . import limit\nfrom . import real\n")
    ix = WorkspaceIndexer(root, store)
    ix.index_all()
    yield ix
    ix.graph.delete()


def test_name_the_package_does_not_bind_is_unresolved(ix):
    imports, unresolved = _edges(ix)
    assert ("pkg/user.py", "pkg/real.py") in imports  # a submodule
    assert ("pkg/user.py", "pkg/__init__.py") in imports  # `limit` is bound there
    assert unresolved == ["1:.missing"]


def test_only_the_unbound_name_makes_no_edge(ix):
    root = ix.root
    (root / "pkg" / "user.py").write_text("from . import missing\n")
    ix.reindex_file(root / "pkg" / "user.py")
    imports, unresolved = _edges(ix)
    assert not any(a == "pkg/user.py" for a, _ in imports)
    assert unresolved == ["1:.missing"]


@pytest.mark.parametrize("init", ["missing = 1\n", "from .real import *\n", "def __getattr__(name):\n    return name\n"])
def test_edits_of_the_package_init_rebind_the_import(ix, init):
    root = ix.root
    (root / "pkg" / "user.py").write_text("from . import missing\n")
    ix.reindex_file(root / "pkg" / "user.py")
    (root / "pkg" / "__init__.py").write_text(init)
    ix.reindex_file(root / "pkg" / "__init__.py")
    imports, unresolved = _edges(ix)
    assert ("pkg/user.py", "pkg/__init__.py") in imports and unresolved == []
    # and back: the name gone again, the edge goes too
    (root / "pkg" / "__init__.py").write_text("limit = 3\n")
    ix.reindex_file(root / "pkg" / "__init__.py")
    imports, unresolved = _edges(ix)
    assert not any(a == "pkg/user.py" for a, _ in imports) and len(unresolved) == 1
