"""``FileState.class_bases``: whether a file has a class with a base, known from its parse, so
the subclass relation skips the files without one without decoding their facts.

The relation computed with the summaries is checked against the same relation computed with
every summary unknown (each file decoded, as before the summaries existed), and the graph a
full build writes against one built without them."""

from __future__ import annotations

import pytest

from orbit_lsp.graph.queries import export
from orbit_lsp.index import parsing, state

FILES = {
    "pkg/__init__.py": "",
    "pkg/base.py": "class Base:\n    def run(self):\n        return self.step()\n",
    "pkg/sub.py": "from pkg.base import Base\n\nclass Sub(Base):\n    def step(self):\n        return 1\n",
    "pkg/meta.py": "import abc\n\nclass Port(abc.ABC):\n    pass\n",
    "pkg/plain.py": "def helper():\n    return 2\n\nclass Plain:\n    pass\n",
    "pkg/nested.py": "from pkg.sub import Sub\n\ndef make():\n    class Local(Sub):\n        pass\n    return Local()\n",
    "pkg/broken.py": "class Oops(:\n",
    "use.py": "from pkg.sub import Sub\nfrom pkg.plain import helper\n\ndef go():\n    return Sub().run() + helper()\n",
}


@pytest.fixture()
def indexed(index_files):
    return index_files(FILES)


def test_the_summary_says_which_files_have_a_class_with_a_base(indexed):
    bases = {rel: st.class_bases for rel, st in indexed.state.items()}
    # a base anywhere in the file counts, a class nested in a function too (``Local(Sub)``);
    # ``class Base:`` and ``class Plain:`` have none; a file that does not parse has no facts
    assert bases == {"pkg/__init__.py": False, "pkg/base.py": False, "pkg/sub.py": True, "pkg/meta.py": True,
                     "pkg/plain.py": False, "pkg/nested.py": True, "pkg/broken.py": None, "use.py": False}
    assert parsing.has_class_bases(indexed.state["pkg/sub.py"].facts) is True
    assert parsing.has_class_bases(object()) is None  # not Python facts (JS/TS facts have their own classes)


def _relation(ix, monkeypatch, forget: bool):
    """The subclass relation (``_inherits``) a new resolver computes, and the files whose facts
    it decoded; with ``forget`` every summary is unknown first (a cache of an older version)."""
    if forget:
        for st in ix.state.values():
            st.class_bases = None
    state.FACTS.clear()
    decoded = []
    real = state.unpickle_facts

    def counted(blob, **how):
        facts = real(blob, **how)
        decoded.append(facts.rel)
        return facts

    monkeypatch.setattr(state, "unpickle_facts", counted)
    resolver = ix._resolver()
    resolver.prepare(sorted(r for r, st in ix.state.items() if st.facts_blob is not None))
    monkeypatch.setattr(state, "unpickle_facts", real)
    return dict(resolver.python._inherits), set(decoded)


def test_files_without_a_class_base_are_not_decoded_and_the_relation_is_the_same(indexed, monkeypatch):
    with_summary, decoded = _relation(indexed, monkeypatch, forget=False)
    without, decoded_all = _relation(indexed, monkeypatch, forget=True)
    assert with_summary == without
    assert with_summary["pkg/sub.py"][0] == ((("pkg/sub.py", "Sub"), ("pkg/base.py", "Base")),)
    assert with_summary["pkg/plain.py"] == ((), frozenset())
    # only the files with a base, and what their bases' evaluation reads (``Base``'s file)
    assert decoded <= {"pkg/sub.py", "pkg/meta.py", "pkg/nested.py", "pkg/base.py", "pkg/__init__.py"}
    assert {"pkg/sub.py", "pkg/meta.py", "pkg/nested.py"} <= decoded
    assert {"pkg/plain.py", "use.py"} <= decoded_all - decoded


def test_a_build_with_the_summaries_writes_the_graph_of_one_without(indexed, monkeypatch):
    """The full graph (INHERITS and the CALLS bound through the hierarchy: ``self.step()`` in
    ``Base.run`` binds to ``Sub.step``) is the same when no file's summary is known."""
    built = export(indexed.graph)
    edges = {(e["type"], e["from"], e["to"]) for e in built["edges"]}
    assert ("INHERITS", "pkg/sub.py::pkg.sub.Sub", "pkg/base.py::pkg.base.Base") in edges
    assert ("CALLS", "pkg/base.py::pkg.base.Base.run", "pkg/sub.py::pkg.sub.Sub.step") in edges
    monkeypatch.setattr(parsing, "has_class_bases", lambda facts: None)
    monkeypatch.setattr(state, "has_class_bases", lambda facts: None)
    indexed.index_all(rebuild=True)
    assert all(st.class_bases is None for st in indexed.state.values())
    assert export(indexed.graph) == built


def test_subclass_finders_in_children_send_back_the_outlines_they_took(indexed):
    """Children finding the subclass relation (a large workspace's build) send the relation and
    the outlines of the classes they found a base for; this process keeps both, as when it
    finds them itself, so resolving does not decode those files again for the outlines."""
    from orbit_lsp.index import py_parallel

    rels = sorted(r for r, st in indexed.state.items() if st.facts_blob is not None)
    here = indexed._resolver().python
    with here._bases_memo():
        expected = {r: here._file_inherits(r) for r in rels}
    forked = indexed._resolver().python
    assert py_parallel.inherits_in_children(forked, rels, 2) == expected
    assert forked._class_outlines == here._class_outlines
    # ``Port(abc.ABC)`` has no workspace base: no pair, no outline
    assert set(forked._class_outlines) == {"pkg/sub.py", "pkg/nested.py"}
    body, names, attrs = forked._class_outlines["pkg/sub.py"]["Sub"]
    assert "step" in names and attrs == ()
