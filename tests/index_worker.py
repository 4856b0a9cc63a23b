"""A separate process holding one ``WorkspaceIndexer`` (as a language server does), driven by
lines on stdin, for tests of writers in several processes (``test_integrity.py``).

Commands: ``index`` | ``rebuild`` | ``reindex REL`` | ``remove REL`` | ``quit``. Each answers one
JSON line on stdout: ``{"mode": ..., "notes": [...]}`` or ``{"error": "Kind: message"}``.
Usage: ``python tests/index_worker.py ROOT`` (data dir from ``ORBIT_DATA_DIR``).
"""

from __future__ import annotations

import json
import sys

from orbit_lsp.config import Settings
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.index.indexer import WorkspaceIndexer


def main() -> None:
    root = sys.argv[1]
    store = GraphStore(Settings.from_env())
    ix = WorkspaceIndexer(root, store)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "quit":
            break
        try:
            if cmd == "index":
                rep = ix.index_all()
            elif cmd == "rebuild":
                rep = ix.index_all(rebuild=True)
            elif cmd == "reindex":
                rep = ix.reindex_file(ix.root / arg)
            elif cmd == "remove":
                rep = ix.remove_file(ix.root / arg)
            else:
                raise ValueError(f"unknown command {cmd!r}")
            out = {"mode": rep.mode, "notes": rep.notes}
        except Exception as exc:  # noqa: BLE001 - reported to the test
            out = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(out), flush=True)
    store.close()


if __name__ == "__main__":
    main()
