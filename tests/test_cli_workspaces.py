"""``orbit-lsp workspaces list|drop|prune`` (issue 18 item 4, command-line part) and the
registry of workspaces behind it, on the session's embedded FalkorDB; the console script runs
in real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


from orbit_lsp.graph import writelock
from orbit_lsp.graph.connection import code_graph_name
from orbit_lsp.index.indexer import WorkspaceIndexer, build_graph_name
from orbit_lsp.index.workspaces import WorkspaceRegistry, WorkspaceSet, cache_files


def cli(data_dir: Path, *argv: str) -> subprocess.CompletedProcess:
    script = Path(sys.executable).parent / "orbit-lsp"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "orbit_lsp"]
    env = {k: v for k, v in os.environ.items() if k != "ORBIT_FALKORDB_URL"}
    env["ORBIT_DATA_DIR"] = str(data_dir)
    return subprocess.run(cmd + list(argv), capture_output=True, text=True, env=env, timeout=180)


def make_ws(path: Path, n: int = 3) -> Path:
    path.mkdir(parents=True)
    for i in range(n):
        (path / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    (path / "main.py").write_text("from m0 import f0\n\n\ndef run():\n    return f0()\n")
    return path


def listing(data_dir: Path) -> dict[str, dict]:
    proc = cli(data_dir, "workspaces", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    return {r["graph"]: r for r in json.loads(proc.stdout)["result"]["workspaces"]}


def test_list_drop_and_unregistered_graphs(tmp_path, data_dir, store):
    ws = make_ws(tmp_path / "listed")
    name = code_graph_name(ws)
    other = make_ws(tmp_path / "unregistered")
    other_name = code_graph_name(other)
    try:
        assert cli(data_dir, "index", str(ws)).returncode == 0
        # a graph written without the command line or a language server: not in the registry
        WorkspaceIndexer(other, store).index_all()
        rows = listing(data_dir)
        row = rows[name]
        g = store.graph(name)
        assert row["root"] == str(ws) and row["folder_exists"] is True
        assert row["nodes"] == g.ro_query("MATCH (n) RETURN count(n)").rows[0][0]
        assert row["edges"] == g.ro_query("MATCH ()-[r]->() RETURN count(r)").rows[0][0]
        # 4 files, 4 functions + 4 module symbols, DEFINES, IMPORTS and CALLS edges
        assert row["nodes"] >= 4 + 4 + 4 and row["edges"] >= 8 + 1 + 1
        assert row["cache_bytes"] == sum(p.stat().st_size for p in cache_files(data_dir, name)) > 0
        assert row["memory_mb"] is not None and time.time() - row["used"] < 120
        assert rows[other_name]["root"] is None  # listed by its graph name
        text = cli(data_dir, "workspaces", "list").stdout
        assert str(ws) in text and f"(not in the registry) {other_name}" in text

        # drop by folder: graph, cache and registry entry go; other graphs stay
        proc = cli(data_dir, "workspaces", "drop", str(ws))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"dropped {ws} ({name}): {row['nodes']:,} nodes, {row['edges']:,} edges; cache ")
        assert name not in store.list_graphs() and cache_files(data_dir, name) == []
        assert writelock.read_marker(store, name) is None
        assert name not in WorkspaceRegistry(data_dir).load()
        assert other_name in store.list_graphs()
        # drop by graph name
        proc = cli(data_dir, "--json", "workspaces", "drop", other_name)
        assert proc.returncode == 0 and json.loads(proc.stdout)["result"]["graph"] == other_name
        assert other_name not in store.list_graphs()
        # nothing left to drop: exit 1, one line
        proc = cli(data_dir, "workspaces", "drop", str(ws))
        assert proc.returncode == 1 and proc.stderr.startswith("orbit-lsp: no graph for ")
        # the folder is indexed again from scratch afterwards
        proc = cli(data_dir, "index", str(ws))
        assert proc.returncode == 0 and "(full)" in proc.stdout
    finally:
        store.graph(name).delete()
        store.graph(other_name).delete()


def test_drop_also_removes_an_unfinished_build(tmp_path, data_dir, store):
    ws = make_ws(tmp_path / "half")
    name = code_graph_name(ws)
    store.graph(build_graph_name(name)).query("CREATE (:File {path: 'm0.py'})")
    try:
        assert cli(data_dir, "index", str(ws)).returncode == 0
        store.graph(build_graph_name(name)).query("CREATE (:File {path: 'm0.py'})")
        assert cli(data_dir, "workspaces", "drop", str(ws)).returncode == 0
        assert not {name, build_graph_name(name)} & set(store.list_graphs())
    finally:
        store.graph(name).delete()
        store.graph(build_graph_name(name)).delete()


def test_prune_gone_folders_and_old_ones(tmp_path, data_dir, store):
    gone = make_ws(tmp_path / "gone")
    old = make_ws(tmp_path / "old")
    fresh = make_ws(tmp_path / "fresh")
    names = {p: code_graph_name(p) for p in (gone, old, fresh)}
    try:
        for p in (gone, old, fresh):
            assert cli(data_dir, "index", str(p)).returncode == 0
        for f in gone.iterdir():
            f.unlink()
        gone.rmdir()
        # "old" was last used 10 days ago: rewrite its registry times
        reg = WorkspaceRegistry(data_dir)
        doc = json.loads(reg.path.read_text())
        ten_days = time.time() - 10 * 86400
        doc["graphs"][names[old]].update(indexed=ten_days, used=ten_days)
        reg.path.write_text(json.dumps(doc))

        proc = cli(data_dir, "workspaces", "prune", "--dry-run")
        assert proc.returncode == 0
        assert f"would drop {gone} ({names[gone]}): its folder no longer exists" in proc.stdout
        assert str(old) not in proc.stdout and names[gone] in store.list_graphs()

        proc = cli(data_dir, "--json", "workspaces", "prune")
        doc = json.loads(proc.stdout)["result"]
        assert [d["root"] for d in doc["dropped"]] == [str(gone)]
        assert names[gone] not in store.list_graphs() and names[old] in store.list_graphs()

        proc = cli(data_dir, "workspaces", "prune", "--older-than", "7")
        assert proc.returncode == 0, proc.stderr
        assert f"dropped {old} ({names[old]})" in proc.stdout and "not used for 7 days (last use 10 days ago)" in proc.stdout
        assert names[old] not in store.list_graphs() and names[fresh] in store.list_graphs()
        assert set(WorkspaceRegistry(data_dir).load()) >= {names[fresh]}
        assert not {names[gone], names[old]} & set(WorkspaceRegistry(data_dir).load())

        proc = cli(data_dir, "workspaces", "prune", "--older-than", "0")
        assert proc.returncode == 2 and "must be a positive number of days" in proc.stderr
    finally:
        for n in names.values():
            store.graph(n).delete()


def test_a_served_folder_is_registered(tmp_path, store):
    ws = make_ws(tmp_path / "served")
    ix = WorkspaceSet(store, store.settings).add(ws)
    rec = WorkspaceRegistry(store.settings.data_dir).load()[ix.graph.name]
    assert rec.root == str(ws) and rec.indexed is None and time.time() - rec.used < 60


def test_registry_reads_the_first_format(tmp_path):
    reg = WorkspaceRegistry(tmp_path)
    reg.path.write_text(json.dumps({"/a/b": 1000.0}))
    rec = reg.load()[code_graph_name("/a/b")]  # no git at /a/b: the graph of the folder
    assert (rec.root, rec.indexed, rec.used) == ("/a/b", 1000.0, 1000.0)
    reg.record(tmp_path, indexed=True)
    assert {r.root for r in reg.load().values()} == {"/a/b", str(tmp_path.resolve())}
    assert json.loads(reg.path.read_text())["version"] == 3  # one entry per graph (folder and branch)
