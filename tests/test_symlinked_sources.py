"""A symlinked source (``tests/tool.py -> ../bin/tool``) is re-indexed by the language server's
watcher when its target changes (issue 20 item 10): the file-system event names ``bin/tool``,
never the link. Real ``orbit-lsp`` process, real watchdog events, raw JSON-RPC client."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench` is not an installed package

from bench.raw_lsp import RawLsp  # noqa: E402

BOUND_S = 15.0


def _symbols(lsp: RawLsp, query: str) -> list[tuple[str, str]]:
    got = lsp.request("workspace/symbol", {"query": query}, timeout=BOUND_S)["result"] or []
    return sorted((s["name"], s["location"]["uri"].rsplit("/", 2)[-2] + "/" + s["location"]["uri"].rsplit("/", 1)[-1])
                  for s in got)


def _until(check, what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {BOUND_S} s: {what}")


def test_a_change_to_a_links_target_is_reindexed_under_the_link(tmp_path):
    root = tmp_path / "ws"
    (root / "bin").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "bin" / "tool").write_text("#!/usr/bin/env python3\ndef original():\n    return 1\n")
    os.symlink("../bin/tool", root / "tests" / "tool.py")
    (root / "lib").mkdir()
    (root / "lib" / "real_mod.py").write_text("def first():\n    return 1\n")
    (root / "vendor").mkdir()
    os.symlink("../lib", root / "vendor" / "lib")  # a linked directory: walked once, under lib/
    lsp = RawLsp().start()
    try:
        lsp.initialize(root)
        assert _symbols(lsp, "original") == [("original", "tests/tool.py")]
        with open(root / "bin" / "tool", "a") as fh:  # the target changes; the link does not
            fh.write("\n\ndef added_later():\n    return 2\n")
        _until(lambda: _symbols(lsp, "added_later") == [("added_later", "tests/tool.py")], "added_later indexed")
        (root / "lib" / "real_mod.py").write_text("def second():\n    return 2\n")
        _until(lambda: _symbols(lsp, "second") == [("second", "lib/real_mod.py")], "plain file re-indexed too")
    finally:
        lsp.stop()



def test_links_are_kept_up_to_date_from_the_events_not_by_looking_at_every_file(tmp_path, store, settings):
    """``watcher.linked_sources`` after an index looks only at the files indexed or dropped
    since and at those under the paths events name (a link made, a file replaced by a link in
    place, a link replaced by a file, a directory replaced by a link), and finds what looking
    at every file finds."""
    from orbit_lsp.index import watcher
    from orbit_lsp.index.indexer import WorkspaceIndexer

    root = tmp_path / "ws"
    for d in ("bin", "tests", "pkg", "other"):
        (root / d).mkdir(parents=True)
    for name in ("tool", "tool2", "tool3"):  # scripts without an extension: not walked themselves
        (root / "bin" / name).write_text(f"def {name}():\n    return 1\n")
    os.symlink("../bin/tool", root / "tests" / "tool.py")
    (root / "pkg" / "plain.py").write_text("def plain():\n    return 1\n")
    (root / "pkg" / "mod.py").write_text("def mod():\n    return 1\n")
    (root / "other" / "mod.py").write_text("def other():\n    return 1\n")
    ix = WorkspaceIndexer(root, store, settings)

    def event(path: Path, is_dir: bool = False) -> list[str]:
        """The links an event on ``path`` queues, checked against looking at every file."""
        rel = path.relative_to(root).as_posix()
        got = sorted(p.relative_to(root).as_posix() for p in watcher.linked_sources(ix, rel, path, is_dir))
        kept = watcher._link_map(ix)
        watcher._LINKS.pop(ix)
        assert kept == watcher._link_map(ix)
        return got
    try:
        ix.index_all()
        watcher.warm_links(ix)
        assert event(root / "bin" / "tool") == ["tests/tool.py"]
        # a new link, indexed: found as an added file
        os.symlink("../bin/tool2", root / "pkg" / "alias.py")
        ix.index_all()
        assert event(root / "bin" / "tool2") == ["pkg/alias.py"]
        # an indexed file replaced in place by a link: the event on it marks it
        (root / "pkg" / "plain.py").unlink()
        os.symlink("../bin/tool3", root / "pkg" / "plain.py")
        assert event(root / "pkg" / "plain.py") == ["pkg/plain.py"]  # (an event names the link's target)
        assert event(root / "bin" / "tool3") == ["pkg/plain.py"]
        # a link replaced by a file: no longer one
        (root / "tests" / "tool.py").unlink()
        (root / "tests" / "tool.py").write_text("def own():\n    return 2\n")
        assert event(root / "tests" / "tool.py") == []
        assert event(root / "bin" / "tool") == []
        # a directory replaced by a link to another: the indexed files under it are looked at again
        os.rename(root / "other", root / "other_moved")
        os.symlink("pkg", root / "other")
        assert event(root / "other", is_dir=True) == []
        assert event(root / "pkg" / "mod.py") == ["other/mod.py"]
    finally:
        ix.graph.delete()


def test_links_to_a_dotenv_file_are_never_read(tmp_path, store, settings):
    """A source name that is a link to a ``.env`` file, directly or through another link, is
    skipped, however the link is reached; a link to a plain file under a linked directory
    is read. (Only a link's target can turn another name into a ``.env`` file.)"""
    from orbit_lsp.index.indexer import WorkspaceIndexer

    root = tmp_path / "ws"
    (root / "real").mkdir(parents=True)
    (root / ".env").write_text("SECRET=1\n")
    (root / "real" / "mod.py").write_text("def f():\n    return 1\n")
    os.symlink(".env", root / "config.py")
    os.symlink(".env", root / "hop.py")
    os.symlink("hop.py", root / "chain.py")
    os.symlink("real", root / "linked")
    ix = WorkspaceIndexer(root, store, settings)
    try:
        ix.index_all()
        assert "real/mod.py" in ix.state
        assert not {"config.py", "hop.py", "chain.py", ".env"} & set(ix.state)
        assert ix._read("config.py") is None and ix._read("chain.py") is None
        assert ix._read("linked/mod.py") == b"def f():\n    return 1\n"
        # made after the index and re-indexed file by file (the watcher's way): the same
        # answer as a rebuild of the folder
        os.symlink("hop.py", root / "late.py")
        (root / "real" / "more.py").write_text("def g():\n    return 2\n")
        ix.reindex_file(root / "late.py")
        ix.reindex_file(root / "real" / "more.py")
        incremental = set(ix.state)
        assert "late.py" not in incremental and "real/more.py" in incremental
        ix.index_all(rebuild=True)
        assert set(ix.state) == incremental
    finally:
        ix.graph.delete()
