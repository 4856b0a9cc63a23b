"""One writer per code graph across processes (issue 18 item 1, issue 20 items 7 and 8).

Real processes: two ``orbit-lsp index`` runs at once, two long-lived indexers (as two language
servers) applying the same and different edits, a graph corrupted by an older version's doubled
writes, and FalkorDB killed with SIGKILL (after an unsnapshotted change, and during a cold index).
Expected counts follow from the generated workspace: every module ``m<i>.py`` defines ``f<i>``,
``g<i>``, class ``C<i>`` with method ``run`` (5 Symbol nodes with the module itself), imports
``f`` of the previous module (1 IMPORTS) and has 3 calls (``f -> g``, ``f -> f<i-1>``,
``C.run -> f``).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from orbit_lsp.config import Settings
from orbit_lsp.graph import embedded, writelock
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.graph.errors import FalkorDBOffline
from orbit_lsp.graph.queries import export
from orbit_lsp.index.indexer import WorkspaceIndexer
from lsp_harness import kill9_embedded as _kill9

ORBIT = str(Path(sys.executable).parent / "orbit-lsp")
WORKER = str(Path(__file__).parent / "index_worker.py")


def module_text(i: int, n: int, extra: str = "") -> str:
    prev = (i - 1) % n
    return (f"from m{prev} import f{prev}\n\n\n"
            f"def f{i}():\n    return g{i}() + f{prev}()\n\n\n"
            f"def g{i}():\n    return {i}\n\n\n"
            f"class C{i}:\n    def run(self):\n        return f{i}()\n" + extra)


def make_workspace(root: Path, n: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"m{i}.py").write_text(module_text(i, n))
    return root


def counts(graph) -> dict[str, int]:
    out = {}
    for label in ("File", "Symbol"):
        out[label] = graph.query(f"MATCH (n:{label}) RETURN count(n)").rows[0][0]
    for etype in ("DEFINES", "IMPORTS", "CALLS"):
        out[etype] = graph.query(f"MATCH ()-[e:{etype}]->() RETURN count(e)").rows[0][0]
    return out


def expected(n: int, extra_symbols: int = 0, extra_calls: int = 0) -> dict[str, int]:
    return {"File": n, "Symbol": 5 * n + extra_symbols, "DEFINES": 5 * n + extra_symbols,
            "IMPORTS": n, "CALLS": 3 * n + extra_calls}


def reference_export(ws: Path, store: GraphStore, tmp: Path) -> dict:
    """Export of a fresh full build of a copy of ``ws`` (what an incremental graph must equal)."""
    ref = tmp / "reference"
    shutil.rmtree(ref, ignore_errors=True)
    shutil.copytree(ws, ref)
    ix = WorkspaceIndexer(ref, store)
    ix.index_all(rebuild=True)
    try:
        return export(ix.graph)
    finally:
        ix.graph.delete()


class Worker:
    """A process holding one indexer (tests/index_worker.py)."""

    def __init__(self, root: Path, env: dict | None = None):
        self.proc = subprocess.Popen([sys.executable, WORKER, str(root)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        assert json.loads(self.proc.stdout.readline()) == {"ready": True}

    def send(self, cmd: str) -> None:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def answer(self) -> dict:
        line = self.proc.stdout.readline()
        assert line, "worker died"
        return json.loads(line)

    def ask(self, cmd: str) -> dict:
        self.send(cmd)
        return self.answer()

    def close(self) -> None:
        try:
            self.send("quit")
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


@pytest.fixture
def workspace(tmp_path):
    return make_workspace(tmp_path / "ws", 400)


def _drop(store: GraphStore, root: Path) -> None:
    ix = WorkspaceIndexer(root, store)
    ix.graph.delete()
    ix.cache_path.unlink(missing_ok=True)


def test_two_index_commands_at_once_build_the_graph_once(workspace, store):
    procs = [subprocess.Popen([ORBIT, "index", str(workspace), "--json"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    try:
        assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
        modes = sorted(json.loads(o[0])["result"]["mode"] for o in outs)
        assert modes == ["full", "unchanged"]  # the second waited for the first and found it done
        ix = WorkspaceIndexer(workspace, store)
        assert counts(ix.graph) == expected(400)
        # a later run finds nothing to do and nothing to repair
        rep = ix.index_all()
        assert rep.mode == "unchanged" and rep.notes == []
    finally:
        _drop(store, workspace)


def test_two_indexer_processes_applying_edits_keep_one_graph(tmp_path, store):
    ws = make_workspace(tmp_path / "ws", 30)
    a, b = Worker(ws), Worker(ws)
    try:
        assert a.ask("index")["mode"] == "full"
        assert b.ask("index")["mode"] == "unchanged"  # the cache and the graph agree: B adopts them
        # the same save seen by both (both watch the disk), sent at once
        (ws / "m1.py").write_text(module_text(1, 30, "\n\ndef h1():\n    return g1()\n"))
        a.send("reindex m1.py")
        b.send("reindex m1.py")
        ra, rb = a.answer(), b.answer()
        assert "error" not in ra and "error" not in rb, (ra, rb)
        assert sorted([ra["mode"], rb["mode"]]) == ["incremental", "unchanged"]
        late = ra if ra["mode"] == "unchanged" else rb
        assert any("changed since this process last read it" in n for n in late["notes"])
        # different files saved in each
        (ws / "m2.py").write_text(module_text(2, 30, "\n\ndef h2():\n    return f2()\n"))
        assert b.ask("reindex m2.py")["mode"] in ("incremental", "unchanged")
        (ws / "m3.py").unlink()
        assert "error" not in a.ask("remove m3.py")
        assert b.ask("remove m3.py")["mode"] == "unchanged"  # already gone: re-read, nothing to do
        (ws / "m4.py").write_text(module_text(4, 30, "\n\nclass D4(C4):\n    pass\n"))
        assert "error" not in a.ask("reindex m4.py")
        assert "error" not in b.ask("index")
    finally:
        a.close()
        b.close()
    ix = WorkspaceIndexer(ws, store)
    try:
        # 29 files; h1, h2, D4 added; h1 -> g1 and h2 -> f2 added, m3's 3 calls and m4's call to
        # f3 gone (the import of the deleted m3 stays unresolved)
        exp = expected(29, extra_symbols=3, extra_calls=2 - 1)
        exp["IMPORTS"] = 28
        assert counts(ix.graph) == exp
        assert export(ix.graph) == reference_export(ws, store, tmp_path)
        assert ix.index_all().mode == "unchanged"
    finally:
        _drop(store, ws)


def test_doubled_graph_is_detected_and_rebuilt(tmp_path, store):
    ws = make_workspace(tmp_path / "ws", 20)
    ix = WorkspaceIndexer(ws, store)
    try:
        ix.index_all()
        # what two unserialised writers of an older version left: every node twice, no marker
        ix.graph.query("MATCH (f:File) CREATE (:File {path: f.path, hash: f.hash, lang: f.lang})")
        ix.graph.query("MATCH (s:Symbol) CREATE (:Symbol {file: s.file, qual: s.qual, name: s.name})")
        writelock.forget_marker(store, ix.graph.name)
        with sqlite3.connect(ix.cache_path) as db:  # and a cache of that version
            db.execute("DELETE FROM meta WHERE key = 'graph_token'")
        ix2 = WorkspaceIndexer(ws, store)
        rep = ix2.index_all()
        assert rep.mode == "full"
        assert any("20 duplicate File nodes" in n for n in rep.notes), rep.notes
        assert counts(ix2.graph) == expected(20)
        # only symbols doubled
        ix2.graph.query("MATCH (s:Symbol {qual: 'm5.f5'}) CREATE (:Symbol {file: s.file, qual: s.qual})")
        rep = WorkspaceIndexer(ws, store).index_all()
        assert rep.mode == "full" and any("101 Symbol nodes where the files define 100" in n for n in rep.notes), rep.notes
        assert counts(ix2.graph) == expected(20)
        # asked for
        rep = WorkspaceIndexer(ws, store).index_all(rebuild=True)
        assert rep.mode == "full" and rep.notes == [f"rebuilding graph {ix.graph.name}: a rebuild was asked for"]
        assert counts(ix2.graph) == expected(20)
    finally:
        _drop(store, ws)


def test_full_build_replaces_the_graph_in_one_step(tmp_path, store):
    """While a rebuild writes, readers keep seeing the previous graph; the scratch graph is gone
    afterwards."""
    ws = make_workspace(tmp_path / "ws", 20)
    ix = WorkspaceIndexer(ws, store)
    seen = []

    def progress(done, total, rel):  # runs before the build writes anything
        seen.append(counts(ix.graph)["File"])

    try:
        ix.index_all()
        ix.index_all(progress=progress, rebuild=True)
        assert seen and set(seen) == {20}
        assert counts(ix.graph) == expected(20)
        assert not [g for g in store.list_graphs() if g.startswith("orbit_build_")]
    finally:
        _drop(store, ws)


def test_a_build_that_fails_half_way_keeps_the_graph_and_drops_its_scratch_graph(tmp_path, store, monkeypatch):
    """A rebuild whose resolution raises while its File and Symbol nodes are being written: the
    error reaches the caller, no writer thread is left behind, readers keep the previous graph,
    and the half-written scratch graph is deleted (not left holding FalkorDB memory until the
    workspace's next build)."""
    import threading

    from orbit_lsp.index.full_build import build_graph_name
    from orbit_lsp.index.languages import WorkspaceResolver

    ws = make_workspace(tmp_path / "ws", 20)
    ix = WorkspaceIndexer(ws, store)

    def fails(self, *args, **kwargs):
        raise RuntimeError("resolution failed")

    try:
        ix.index_all()
        before = counts(ix.graph)
        monkeypatch.setattr(WorkspaceResolver, "resolve_many", fails)
        with pytest.raises(RuntimeError, match="resolution failed"):
            ix.index_all(rebuild=True)
        assert not [t for t in threading.enumerate() if t.name.startswith("orbit-graph-write")]
        assert counts(ix.graph) == before == expected(20)
        assert build_graph_name(ix.graph.name) not in store.list_graphs()
    finally:
        _drop(store, ws)


# -- FalkorDB killed ----------------------------------------------------------------------------


@pytest.fixture
def private_store():
    """A store on its own embedded server (signals never reach the session's server)."""
    d = Path(tempfile.mkdtemp(prefix="orbit-kill-"))
    s = GraphStore(Settings(data_dir=d, falkordb_url=None))
    s.connect()
    try:
        yield s
    finally:
        s.close()
        embedded.stop(d)
        shutil.rmtree(d, ignore_errors=True)


def _retry_once(fn):
    """Run ``fn``; a first ``FalkorDBOffline`` (the client found its server gone) is allowed."""
    try:
        return fn()
    except FalkorDBOffline as exc:
        assert str(exc).startswith("FalkorDB offline")
        return fn()


def test_restart_from_an_older_snapshot_is_detected_and_repaired(tmp_path, private_store):
    store = private_store
    ws = make_workspace(tmp_path / "ws", 12)
    ix = WorkspaceIndexer(ws, store)
    ix.index_all()
    store.execute("SAVE")  # the snapshot the server will come back from
    (ws / "m1.py").write_text(module_text(1, 12, "\n\ndef h1():\n    return g1()\n"))
    assert ix.reindex_file(ws / "m1.py").mode == "incremental"
    assert counts(ix.graph)["Symbol"] == 61
    _kill9(store)  # before the next snapshot: the server restarts without h1
    rep = _retry_once(lambda: ix.reindex_file(ws / "m2.py"))
    assert any("changed since this process last read it" in n for n in rep.notes), rep.notes
    assert any("restored from an older snapshot" in n for n in rep.notes), rep.notes
    assert counts(ix.graph) == expected(12, extra_symbols=1, extra_calls=1)
    assert export(ix.graph) == reference_export(ws, store, tmp_path)


def test_kill9_during_a_cold_index_reports_offline(tmp_path, private_store):
    store = private_store
    ws = make_workspace(tmp_path / "ws", 40)
    ix = WorkspaceIndexer(ws, store)
    killed = []

    def progress(done, total, rel):
        if not killed:
            killed.append(True)
            _kill9(store)

    with pytest.raises(FalkorDBOffline) as exc:
        ix.index_all(progress=progress)
    assert str(exc.value).startswith("FalkorDB offline"), str(exc.value)
    assert "empty key" not in str(exc.value)
    rep = _retry_once(ix.index_all)
    assert rep.mode == "full"
    assert counts(ix.graph) == expected(40)


def test_reads_after_a_restart_from_an_older_snapshot_say_so(tmp_path, private_store):
    """Kill -9 while idle: the first use of the store says FalkorDB came back older (a front end
    then re-indexes: the language server's recovery does), instead of answering from the old
    snapshot in silence; a clean stop and start says nothing."""
    store = private_store
    ws = make_workspace(tmp_path / "ws", 8)
    ix = WorkspaceIndexer(ws, store)
    ix.index_all()
    embedded.stop(store.settings.data_dir)  # clean: the data is saved
    assert ix.graph.query("MATCH (f:File) RETURN count(f)").rows == [[8]]
    (ws / "m1.py").write_text(module_text(1, 8, "\n\ndef h1():\n    return g1()\n"))
    ix.reindex_file(ws / "m1.py")
    _kill9(store)
    messages = []
    for _ in range(3):
        try:
            ix.graph.query("RETURN 1")
            break
        except FalkorDBOffline as exc:
            messages.append(str(exc))
    assert any("restarted from an older snapshot" in m and ix.graph.name in m for m in messages), messages
    rep = ix.index_all()
    assert rep.mode == "full"
    assert any("restored from an older snapshot" in n for n in rep.notes), rep.notes
    assert counts(ix.graph) == expected(8, extra_symbols=1, extra_calls=1)


def test_incremental_writes_reach_readers_all_at_once(graph):
    """Inside ``GraphWriter.transaction`` nothing is visible to another reader; at its end,
    everything is (one MULTI/EXEC); an exception in the block sends nothing."""
    from orbit_lsp.graph.writer import GraphWriter

    w = GraphWriter(graph)
    w.create_files([["a.py", "python", 1, "h", None, None]])
    with w.transaction():
        w.create_files([["b.py", "python", 1, "h", None, None], ["c.py", "python", 1, "h", None, None]])
        w.create_imports([["b.py", "a.py", 1]])
        w.delete_files(["a.py"])
        assert graph.ro_query("MATCH (f:File) RETURN f.path").rows == [["a.py"]]
    assert sorted(graph.ro_query("MATCH (f:File) RETURN f.path").rows) == [["b.py"], ["c.py"]]
    with pytest.raises(RuntimeError), w.transaction():
        w.delete_files(["b.py"])
        raise RuntimeError("stop")
    assert sorted(graph.ro_query("MATCH (f:File) RETURN f.path").rows) == [["b.py"], ["c.py"]]


def test_drop_removes_graph_marker_and_cache(tmp_path, store):
    ws = make_workspace(tmp_path / "ws", 3)
    ix = WorkspaceIndexer(ws, store)
    ix.index_all()
    assert writelock.read_marker(store, ix.graph.name) is not None and ix.cache_path.exists()
    ix.drop()
    assert not ix.graph.exists() and not ix.cache_path.exists()
    assert writelock.read_marker(store, ix.graph.name) is None
    assert WorkspaceIndexer(ws, store).index_all().mode == "full"
    _drop(store, ws)


# -- an external FalkorDB shared by processes with different data dirs ("machines") -------------


@pytest.fixture
def external(tmp_path):
    from lsp_harness import ExternalFalkorDB

    fdb = ExternalFalkorDB(tmp_path / "fdb").start()
    try:
        yield fdb
    finally:
        fdb.kill()


def test_external_server_serialises_writers_with_separate_data_dirs(tmp_path, external):
    ws = make_workspace(tmp_path / "ws", 300)
    envs = [dict(os.environ, ORBIT_FALKORDB_URL=external.url, ORBIT_DATA_DIR=str(tmp_path / f"machine{i}"))
            for i in range(2)]
    a, b = Worker(ws, envs[0]), Worker(ws, envs[1])
    store = GraphStore(Settings(data_dir=tmp_path / "machine0", falkordb_url=external.url))
    try:
        a.send("index")
        b.send("index")
        ra, rb = a.answer(), b.answer()
        assert "error" not in ra and "error" not in rb, (ra, rb)
        ix = WorkspaceIndexer(ws, store)
        assert counts(ix.graph) == expected(300)
        # A's view is older than the graph B wrote last (or the reverse): the next edit re-syncs
        (ws / "m1.py").write_text(module_text(1, 300, "\n\ndef h1():\n    return g1()\n"))
        assert "error" not in a.ask("reindex m1.py")
        assert "error" not in b.ask("reindex m1.py")
        assert counts(ix.graph) == expected(300, extra_symbols=1, extra_calls=1)
        assert store.execute("EXISTS", writelock.lock_key(ix.graph.name)) == 0  # released
    finally:
        a.close()
        b.close()
        store.close()


def test_external_lock_key_expires_unless_renewed(tmp_path, external, monkeypatch):
    monkeypatch.setattr(writelock, "LOCK_TTL_MS", 600)
    store = GraphStore(Settings(data_dir=tmp_path / "m", falkordb_url=external.url))
    other = GraphStore(Settings(data_dir=tmp_path / "n", falkordb_url=external.url))
    key = writelock.lock_key("orbit_code_x")
    try:
        with writelock.GraphWriteLock(store, "orbit_code_x"):
            time.sleep(1.5)  # more than the TTL: kept by renewal
            assert 0 < store.execute("PTTL", key) <= 600
            waited = []
            lock2 = writelock.GraphWriteLock(other, "orbit_code_x", on_wait=lambda: waited.append(True))
            import threading

            t = threading.Thread(target=lambda: lock2.__enter__())
            t.start()
            time.sleep(0.5)
            assert waited and t.is_alive()  # the other "machine" waits
        t.join(10)
        assert not t.is_alive()
        lock2.__exit__(None, None, None)
        assert store.execute("EXISTS", key) == 0
    finally:
        store.close()
        other.close()


def test_kill9_in_the_middle_of_a_build_never_swaps_in_a_partial_graph(tmp_path, private_store, monkeypatch):
    from orbit_lsp.graph.writer import GraphWriter

    store = private_store
    ws = make_workspace(tmp_path / "ws", 30)
    ix = WorkspaceIndexer(ws, store)
    ix.index_all()
    store.execute("SAVE")
    real = GraphWriter.create_calls_by_id
    killed = []

    def kill_then_write(self, rows):  # nodes are written, edges not yet
        if not killed:
            killed.append(True)
            _kill9(store)
        return real(self, rows)

    monkeypatch.setattr(GraphWriter, "create_calls_by_id", kill_then_write)
    with pytest.raises(FalkorDBOffline) as exc:
        ix.index_all(rebuild=True)
    assert str(exc.value).startswith("FalkorDB offline") and "empty key" not in str(exc.value)
    monkeypatch.setattr(GraphWriter, "create_calls_by_id", real)
    # the graph is the last complete one (from the snapshot), never the half-written build
    assert _retry_once(lambda: counts(ix.graph)) == expected(30)
    rep = ix.index_all()
    assert counts(ix.graph) == expected(30) and rep.mode in ("full", "unchanged")
