"""The proposal store (orbit_lsp.edits.proposals): diff, statuses, final states."""

from __future__ import annotations

import pytest

from orbit_lsp.edits.proposals import ProposalStore, text_hash


def test_create_mark_list(tmp_path):
    store = ProposalStore.in_data_dir(tmp_path / "data")
    p = store.create("/ws", "a.py", "Remove `f`", "x = 1\n\ndef f():\n    pass\n", "x = 1\n", 3)
    assert p.status == "proposed" and p.base_version == 3 and p.base_hash == text_hash("x = 1\n\ndef f():\n    pass\n")
    assert p.diff.startswith("--- a/a.py\n+++ b/a.py\n") and "-def f():" in p.diff and p.reason is None
    done = store.mark(p.id, "rejected", "rejected by the user")
    assert done.status == "rejected" and done.reason == "rejected by the user" and done.updated >= p.created
    with pytest.raises(ValueError, match="already rejected"):
        store.mark(p.id, "applied")  # a final status never changes
    with pytest.raises(ValueError):
        store.mark(p.id + 100, "applied")
    with pytest.raises(ValueError):
        store.mark(p.id, "proposed")
    q = store.create("/other", "b.py", "t", "a\n", "b\n", None, status="stale", reason="changed")
    assert [x.id for x in store.list()] == [q.id, p.id]
    assert [x.id for x in store.list(workspace="/ws")] == [p.id]
    assert [x.id for x in store.list(status="stale")] == [q.id]
    # a second store on the same file sees the same proposals (one SQLite file in the data dir)
    assert ProposalStore.in_data_dir(tmp_path / "data").get(q.id).reason == "changed"


def test_unknown_status_refused(tmp_path):
    with pytest.raises(ValueError):
        ProposalStore(tmp_path / "p.sqlite3").create("/ws", "a.py", "t", "a", "b", 1, status="done")
