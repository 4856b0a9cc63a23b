"""A full build's bounded memory changes nothing in the graph.

A full build keeps a bounded number of decoded facts (``full_build.BUILD_DECODED_FACTS``) and a
bounded resolver memo (``BUILD_MEMO_BUDGET``, ``resolve.Resolver._age_memo``): what it drops is
decoded or evaluated again. Built with both bounds at 1 (the memo ages before every file, facts
are decoded again at almost every use), the graph must equal the one built with them unbounded,
with and without value flow, including bases read from attributes that only subclasses set
(values evaluated while the subclass relation is being built, which the memo keeps).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orbit_lsp.graph.queries import export
from orbit_lsp.index import full_build
from orbit_lsp.index.indexer import WorkspaceIndexer

FILES = {
    "pkg/__init__.py": "",
    "pkg/zbase.py": (
        "class Runner:\n"
        "    def run(self):\n"
        "        return self\n"
        "\n"
        "class Other:\n"
        "    def run(self):\n"
        "        return Runner()\n"
        "\n"
        "class Mixin:\n"
        "    def setUp(self):\n"
        "        class Local(self.kind):\n"
        "            pass\n"
        "        self.local = Local()\n"
        "        self.local.run().run()\n"
    ),
    "pkg/tests.py": (
        "from pkg.zbase import Mixin, Other, Runner\n"
        "\n"
        "class TestA(Mixin):\n"
        "    kind = Runner\n"
        "\n"
        "class TestB(Mixin):\n"
        "    kind = Other\n"
    ),
}
for i in range(12):  # a chain of modules whose values are read through each other
    prev = f"from pkg.m{i - 1} import make{i - 1}, Thing{i - 1}\n" if i else "from pkg.zbase import Runner\n"
    FILES[f"pkg/m{i}.py"] = (
        prev
        + f"class Thing{i}{'(Thing' + str(i - 1) + ')' if i else ''}:\n"
        + f"    def step{i}(self, x=None):\n"
        + (f"        return make{i - 1}().step{i - 1}(x)\n" if i else "        return Runner().run()\n")
        + f"\n"
        + f"def make{i}():\n"
        + f"    return Thing{i}()\n"
        + f"\n"
        + f"def use{i}(cb):\n"
        + f"    t = make{i}()\n"
        + f"    t.step{i}(cb)\n"
        + (f"    t.step{i - 1}()\n" if i else "")
        + f"    return cb(t)\n"
        + f"\n"
        + f"use{i}(lambda t: t.step{i}())\n"
    )


def _write_files(root: Path) -> None:
    for rel, text in FILES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def _indexed(root: Path, store) -> tuple[WorkspaceIndexer, list[str]]:
    """``FILES`` indexed under ``root``: the indexer and the paths of the files with facts."""
    _write_files(root)
    ix = WorkspaceIndexer(root, store)
    ix.index_all()
    return ix, sorted(r for r, st in ix.state.items() if st.facts_blob is not None)


def _build(root: Path, store, value_flow: bool) -> dict:
    settings = store.settings.model_copy(update={"value_flow": value_flow})
    ix = WorkspaceIndexer(root, store, settings)
    try:
        rep = ix.index_all()
        assert rep.mode == "full" and not rep.parse_errors
        return export(ix.graph)
    finally:
        ix.drop()


@pytest.mark.parametrize("value_flow", [False, True])
def test_bounded_full_build_equals_unbounded(tmp_path, store, monkeypatch, value_flow):
    _write_files(tmp_path / "src")
    shutil.copytree(tmp_path / "src", tmp_path / "bounded")
    monkeypatch.setattr(full_build, "BUILD_MEMO_BUDGET", None)
    monkeypatch.setattr(full_build, "BUILD_DECODED_FACTS", 4096)
    unbounded = _build(tmp_path / "src", store, value_flow)
    monkeypatch.setattr(full_build, "BUILD_MEMO_BUDGET", 1)
    monkeypatch.setattr(full_build, "BUILD_DECODED_FACTS", 1)
    bounded = _build(tmp_path / "bounded", store, value_flow)
    # the two graphs differ only by their root's path, which no node or edge holds
    assert bounded == unbounded
    calls = {(e["from"], e["to"]) for e in unbounded["edges"] if e["type"] == "CALLS"}
    inherits = {(e["from"], e["to"]) for e in unbounded["edges"] if e["type"] == "INHERITS"}
    assert ("pkg/m3.py::pkg.m3.Thing3.step3", "pkg/m2.py::pkg.m2.Thing2.step2") in calls  # through the chain
    assert ("pkg/m5.py::pkg.m5.Thing5", "pkg/m4.py::pkg.m4.Thing4") in inherits


def test_memo_ages_within_its_budget(tmp_path, store):
    """With a budget, the memo holds at most the budget's entries a generation, plus what the
    file being resolved adds."""
    ix, rels = _indexed(tmp_path, store)
    try:
        free = ix._resolver().python
        free.resolve_fixpoint(rels, lambda r: None, rels)
        bounded = ix._resolver().python
        bounded.memo_budget = 5
        biggest = 0
        for rel in rels:
            bounded.resolve_file(rel)
            biggest = max(biggest, len(bounded.memo))
        assert len(free.memo) > 5 * 4  # enough entries for the bound to matter
        assert len(bounded.memo) + len(bounded._old_memo) < len(free.memo)
        assert biggest < len(free.memo)
    finally:
        ix.drop()


def test_a_resolver_without_memo_keys_binds_the_same_and_forgets_all_on_invalidate(tmp_path, store):
    """``Resolver.memo_keys`` off (a full build's resolution child, which never invalidates):
    the memo ages without listing the keys of each deps set, every file binds as with them,
    and an ``invalidate`` forgets every memoised value (which consulted what is not known)."""
    ix, rels = _indexed(tmp_path, store)
    try:
        keyed, bare = ix._resolver().python, ix._resolver().python
        keyed.memo_budget = bare.memo_budget = 3  # aged many times over
        bare.memo_keys = False
        for rel in rels:
            assert bare.resolve_file(rel) == keyed.resolve_file(rel)
        assert any(keys for _, keys in keyed._interned.values())
        assert not any(keys for _, keys in bare._interned.values())
        held = len(bare.memo) + len(bare._old_memo)
        assert held and bare.invalidate([(rels[0], "")]) == held
        assert not bare.memo and not bare._old_memo
        assert bare.resolve_file(rels[-1]) == keyed.resolve_file(rels[-1])  # and binds as before
    finally:
        ix.drop()
