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
