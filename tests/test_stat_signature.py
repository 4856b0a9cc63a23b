"""Re-opening a workspace reads only the files whose stat signature changed.

An index records each file's ``(size, mtime, ctime, inode)`` (``state.stat_signature``) when
it reads it, once the file has been left alone for ``SETTLED_NS`` (shortened here, then waited
for); the next index takes a file with the same signature as unchanged without reading it.
Any write changes the ctime, so an edit that keeps the size and restores the mtime is still
seen. States published by another machine arrive without signatures.
"""

from __future__ import annotations

import os
import pickle
import shutil
import time
from pathlib import Path

import pytest

from orbit_lsp.graph.queries import export
from orbit_lsp.index import overlay, state
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.index.state import FileState

SETTLED_NS = 300_000_000  # 0.3 s instead of 2 s: the tests wait for it

FILES = {
    "pkg/__init__.py": "",
    "pkg/a.py": "def foo():\n    return 1\n",
    "pkg/b.py": "from pkg.a import foo\n\n\ndef use():\n    return foo()\n",
    "main.py": "from pkg.b import use\n\nuse()\n",
}


@pytest.fixture
def workspace(tmp_path, store, monkeypatch):
    monkeypatch.setattr(state, "SETTLED_NS", SETTLED_NS)
    root = tmp_path / "ws"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    made: list[WorkspaceIndexer] = []

    def indexer() -> WorkspaceIndexer:
        """A new indexer of the folder: what a new process (an editor re-opening it) has."""
        ix = WorkspaceIndexer(root, store, store.settings)
        made.append(ix)
        return ix

    yield root, indexer
    if made:
        made[0].graph.delete()
        made[0].cache_path.unlink(missing_ok=True)


def settle() -> None:
    time.sleep(SETTLED_NS / 1e9 + 0.05)


def symbol_names(ix: WorkspaceIndexer) -> set[str]:
    return {s["qual"] for s in export(ix.graph)["symbols"]}


def test_an_unchanged_workspace_is_reopened_without_reading_its_files(workspace):
    root, indexer = workspace
    first = indexer().index_all()
    assert (first.mode, first.read) == ("full", len(FILES))  # just written: no signature yet
    settle()
    again = indexer().index_all()
    # read once more now that they are settled (their signatures are recorded and saved) ...
    assert (again.mode, again.read, again.reused) == ("unchanged", len(FILES), len(FILES))
    # ... and from then on not read at all
    reopened = indexer()
    rep = reopened.index_all()
    assert (rep.mode, rep.read, rep.reused, rep.files) == ("unchanged", 0, len(FILES), len(FILES))
    assert "pkg.a.foo" in symbol_names(reopened)


def test_an_edit_that_keeps_the_size_and_restores_the_mtime_is_seen(workspace):
    root, indexer = workspace
    indexer().index_all()
    settle()
    indexer().index_all()  # signatures recorded
    path = root / "pkg/a.py"
    before = path.stat()
    path.write_text(FILES["pkg/a.py"].replace("foo", "bar"))  # the same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    ix = indexer()
    rep = ix.index_all()
    assert rep.mode == "incremental"
    assert rep.read == 1 and rep.parsed_paths == ["pkg/a.py"]  # the ctime moved: read again
    names = symbol_names(ix)
    assert "pkg.a.bar" in names and "pkg.a.foo" not in names
    # the graph the re-open updated equals a fresh index of the same files (another folder)
    copy = root.parent / "copy"
    shutil.copytree(root, copy)
    fresh = WorkspaceIndexer(copy, ix.store, ix.settings)
    try:
        assert fresh.index_all().mode == "full"
        assert export(ix.graph) == export(fresh.graph)
    finally:
        fresh.graph.delete()
        fresh.cache_path.unlink(missing_ok=True)


def test_a_file_changed_just_before_an_index_is_read_by_the_next_one(workspace):
    root, indexer = workspace
    indexer().index_all()
    settle()
    indexer().index_all()  # every file settled and signed
    (root / "pkg/b.py").write_text(FILES["pkg/b.py"] + "\n\ndef more():\n    return use()\n")
    ix = indexer()
    rep = ix.index_all()  # right after the write: b.py is read, but not signed
    assert rep.read == 1 and rep.parsed_paths == ["pkg/b.py"]
    assert ix.state["pkg/b.py"].seen_stat is None
    assert ix.state["pkg/a.py"].seen_stat is not None
    settle()
    rep = indexer().index_all()
    assert (rep.mode, rep.read) == ("unchanged", 1)  # read again (now settled: signed)
    rep = indexer().index_all()
    assert (rep.mode, rep.read) == ("unchanged", 0)


def test_signature_of_a_settled_and_of_a_young_file(tmp_path):
    path = tmp_path / "f.py"
    path.write_text("x = 1\n")
    st = path.stat()
    assert state.stat_signature(st, time.time_ns()) is None  # changed just now
    later = max(st.st_mtime_ns, st.st_ctime_ns) + state.SETTLED_NS + 1
    assert state.stat_signature(st, later) == (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def test_published_states_arrive_without_the_publishers_signatures():
    signed = FileState("m.py", "python", "h", 1, seen_hash="h", seen_stat=(6, 1, 2, 3))
    plain = FileState("n.py", "python", "h2", 1, seen_hash="h2")
    rows = [(st.rel, pickle.dumps(st, protocol=pickle.HIGHEST_PROTOCOL)) for st in (signed, plain)]
    local = overlay._decode(rows)
    assert [rel for rel, _ in local] == ["m.py", "n.py"]
    got = [pickle.loads(blob) for _, blob in local]
    assert [st.seen_stat for st in got] == [None, None]
    assert [(st.hash, st.seen_hash) for st in got] == [("h", "h"), ("h2", "h2")]
    assert local[1][1] == rows[1][1]  # a row without a signature is kept as it was
