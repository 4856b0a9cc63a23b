"""A script that indexes at its top level, without ``if __name__ == "__main__":``: the parse
workers (forkserver) import the main module again, which would start a second index that
waits for the write lock its parent holds, while the parent waits for its workers (a hang).
The workers refuse to index (``parsing.refuse_in_a_starting_worker``) and the parent parses in
its own process: the index ends, complete."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = '''
import json, sys
import orbit_lsp.index.parsing as parsing
from orbit_lsp.config import Settings
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.index.indexer import WorkspaceIndexer

parsing.PARALLEL_MIN_FILES = 2  # workers for a few files
ix = WorkspaceIndexer(sys.argv[1], GraphStore(Settings.from_env()))
rep = ix.index_all()
print(json.dumps({"mode": rep.mode, "files": len(ix.state), "symbols": rep.symbols}), flush=True)
ix.graph.delete()
'''


def test_a_script_without_a_main_guard_indexes_instead_of_hanging(tmp_path, data_dir):
    root = tmp_path / "ws"
    root.mkdir()
    for i in range(12):
        (root / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    script = tmp_path / "unguarded.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(root)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, ORBIT_DATA_DIR=str(data_dir)), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"mode": "full", "files": 12, "symbols": 24}
    assert "put the script's code under `if __name__" in proc.stderr
