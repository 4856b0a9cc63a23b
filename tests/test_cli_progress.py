"""Indexing progress by phase, ``index --rebuild`` and the note for an interrupted first index
(issue 18 items 8, 13, 1 CLI part). Real embedded FalkorDB; the console script in real processes.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orbit_lsp.cli import ProgressBar, main
from orbit_lsp.graph.connection import code_graph_name
from orbit_lsp.index.indexer import PHASES, WorkspaceIndexer, build_graph_name


@pytest.fixture(autouse=True)
def _embedded_only(monkeypatch, data_dir):
    monkeypatch.delenv("ORBIT_FALKORDB_URL", raising=False)
    monkeypatch.setenv("ORBIT_DATA_DIR", str(data_dir))


def cli(data_dir: Path, *argv: str) -> subprocess.CompletedProcess:
    script = Path(sys.executable).parent / "orbit-lsp"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "orbit_lsp"]
    env = {k: v for k, v in os.environ.items() if k != "ORBIT_FALKORDB_URL"}
    env["ORBIT_DATA_DIR"] = str(data_dir)
    return subprocess.run(cmd + list(argv), capture_output=True, text=True, env=env, timeout=300)


def make_ws(root: Path, n_py: int = 30, n_js: int = 5) -> Path:
    """``n_py`` Python modules, each calling the previous one's function, and ``n_js`` JS files."""
    root.mkdir(parents=True)
    for i in range(n_py):
        body = f"from m{i - 1} import f{i - 1}\n\n\ndef f{i}():\n    return f{i - 1}()\n" if i else "def f0():\n    return 0\n"
        (root / f"m{i}.py").write_text(body)
    for i in range(n_js):
        (root / f"w{i}.js").write_text(f"export function g{i}() {{ return {i}; }}\n")
    return root


def test_indexer_reports_every_phase_with_its_own_count(tmp_path, store):
    ws = make_ws(tmp_path / "ws", n_py=450, n_js=250)  # over one report interval (200) per phase
    calls: list[tuple[str, int, int]] = []

    def phased(done, total, rel, phase, work=None):
        calls.append((phase, done, total))
        if work is not None:
            works.append((phase, work))
    works: list[tuple[str, float]] = []
    phased.phases = True
    legacy: list[tuple[int, int, str]] = []
    ix = WorkspaceIndexer(ws, store)
    try:
        ix.index_all(progress=phased)
        seen = [p for p, _, _ in calls]
        # phases in order, each reported, none coming back once the next started
        assert [p for i, p in enumerate(seen) if i == 0 or seen[i - 1] != p] == list(PHASES)
        by_phase = {p: [(d, t) for q, d, t in calls if q == p] for p in PHASES}
        assert {t for _, t in by_phase["read"]} == {700}
        assert {t for _, t in by_phase["parse"]} == {700}       # every file is new: all parsed
        assert {t for _, t in by_phase["resolve"]} == {700}
        for p in PHASES:
            done = [d for d, _ in by_phase[p]]
            assert done == sorted(done), p                    # counts only go up
            assert done[-1] == by_phase[p][-1][1], p          # and reach the phase's total
            # something between start and end; the graph writes run in the background during
            # resolve and cache, so they may all be done when the write phase is reached (under
            # load, or when resolution takes longer): then its one report is the end
            assert len(done) >= 2 or (p == "write" and len(done) == 1), p
        assert by_phase["write"][-1][1] >= 2                   # nodes, then edge batches
        # parse and resolve are shown as soon as they start, before their first file is done
        assert by_phase["parse"][0][0] == 0 and by_phase["resolve"][0][0] == 0
        # parsing also says the share of its bytes parsed (its pace), up to all of them
        parse_work = [w for p, w in works if p == "parse"]
        assert parse_work and parse_work == sorted(parse_work) and parse_work[-1] == pytest.approx(1.0)
        assert {p for p, _ in works} == {"parse"}

        # a callback without ``phases`` is called as before: the read phase only, 3 arguments
        (ws / "m0.py").write_text("def f0():\n    return 1\n")
        ix2 = WorkspaceIndexer(ws, store)
        ix2.index_all(progress=lambda d, t, r: legacy.append((d, t, r)), rebuild=True)
        assert legacy and legacy[-1][:2] == (700, 700) and all(t == 700 for _, t, _ in legacy)
    finally:
        store.graph(ix.graph.name).delete()


def test_progress_bar_phases_on_a_tty_and_in_plain_lines():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    s = Tty()
    p = ProgressBar("indexing x", s)
    p(10, 10, "a.py", "read")
    p(10, 10, "a.py", "parse")
    p(3, 10, "c.py", "resolve")
    p.finish()
    frames = s.getvalue().split("\r")
    # the bar starts again for each phase: resolve at 3/10 is not drawn as full
    assert "resolving [#######" in frames[-2] and "3/10 c.py" in frames[-2]
    assert "[########################]" not in frames[-2]

    plain = io.StringIO()
    p = ProgressBar("indexing x", plain)
    for i in range(1, 2001, 200):
        p(i, 2000, f"f{i}.py", "read")
    p(2000, 2000, "last.py", "read")
    p(2000, 2000, "", "parse")
    p(5, 12, "", "write")
    lines = plain.getvalue().splitlines()
    assert lines == ["indexing x: reading 2000 files", "indexing x: reading 601/2000 (25%)",
                     "indexing x: reading 1001/2000 (50%)", "indexing x: reading 1601/2000 (75%)",
                     "indexing x: reading 2000/2000 (100%)",
                     "indexing x: parsing 2000 files", "indexing x: parsing 2000/2000 (100%)",
                     "indexing x: writing 12 batches"]


def test_index_shows_phases_in_a_real_process(tmp_path, data_dir, store):
    ws = make_ws(tmp_path / "ws")
    try:
        proc = cli(data_dir, "index", str(ws))
        assert proc.returncode == 0, proc.stderr
        lines = proc.stderr.splitlines()
        label = f"indexing {ws}: "
        assert [ln[len(label):] for ln in lines if not re.search(r"\(\d+%\)$", ln)] == [
            "reading 35 files", "parsing 35 files", "resolving 35 files",
            next(ln[len(label):] for ln in lines if ln.endswith(" batches"))]
        ends = [ln[len(label):] for ln in lines if ln.endswith("(100%)")]
        assert ends[:3] == ["reading 35/35 (100%)", "parsing 35/35 (100%)", "resolving 35/35 (100%)"]
        assert ends[3].startswith("writing ")
        # unchanged: the files are checked against the cache, no parse, no resolve, no write,
        # and no time left is guessed while checking (what follows is only the changed files')
        proc = cli(data_dir, "index", str(ws))
        assert proc.returncode == 0 and "(unchanged)" in proc.stdout
        assert f"{label}checking 35 files" in proc.stderr.splitlines()
        assert "reading" not in proc.stderr and "left" not in proc.stderr
        assert "resolving" not in proc.stderr and "writing" not in proc.stderr
    finally:
        store.graph(code_graph_name(ws)).delete()


def test_index_rebuild_builds_from_scratch(tmp_path, data_dir, store):
    ws = make_ws(tmp_path / "ws", n_py=5, n_js=0)
    g = store.graph(code_graph_name(ws))
    try:
        assert cli(data_dir, "index", str(ws)).returncode == 0
        # a stray edge that no file produced (files and hashes still agree with the cache):
        # an incremental index keeps it, only a build from scratch drops it
        g.query("MATCH (a:Symbol {name: 'f0'}), (b:Symbol {name: 'f4'}) CREATE (a)-[:CALLS]->(b)")
        proc = cli(data_dir, "index", str(ws))
        assert "(unchanged)" in proc.stdout
        assert g.ro_query("MATCH (:Symbol)-[c:CALLS]->(:Symbol) RETURN count(c)").rows[0][0] == 5
        proc = cli(data_dir, "index", str(ws), "--rebuild")
        assert proc.returncode == 0, proc.stderr
        assert "(full)" in proc.stdout and "5 (5 parsed, 0 unchanged)" in proc.stdout
        assert "a rebuild was asked for" in proc.stdout
        assert sorted(r[0] for r in g.ro_query("MATCH (f:File) RETURN f.path").rows) == [f"m{i}.py" for i in range(5)]
        assert g.ro_query("MATCH (:Symbol)-[c:CALLS]->(:Symbol) RETURN count(c)").rows[0][0] == 4
    finally:
        g.delete()


def test_interrupted_first_index_is_said_before_the_query_indexes(tmp_path, data_dir, store, capsys):
    ws = make_ws(tmp_path / "ws", n_py=6, n_js=0)
    name = code_graph_name(ws)
    scratch = store.graph(build_graph_name(name))
    # what a first index killed half-way leaves: its scratch graph, no graph
    scratch.query("CREATE (:File {path: 'm0.py'})")
    try:
        capsys.readouterr()
        rc = main(["callers", "f0", "--workspace", str(ws)])
        out, err = capsys.readouterr()
        assert rc == 0, err
        note = f"orbit-lsp: the last index of {ws} did not finish; indexing it now (6 files)"
        assert note in err.splitlines()
        assert err.index(note) < err.index("reading 6 files")  # before the work starts
        assert "m1.f1" in out
        assert build_graph_name(name) not in store.list_graphs()
        # the next query finds the graph: nothing more is said
        rc = main(["callers", "f0", "--workspace", str(ws)])
        out, err = capsys.readouterr()
        assert rc == 0 and err == ""
    finally:
        store.graph(name).delete()
        scratch.delete()


def test_interrupted_first_index_then_index_says_so(tmp_path, data_dir, store):
    ws = make_ws(tmp_path / "ws", n_py=4, n_js=0)
    name = code_graph_name(ws)
    store.graph(build_graph_name(name)).query("CREATE (:File {path: 'x.py'})")
    try:
        proc = cli(data_dir, "index", str(ws))
        assert proc.returncode == 0, proc.stderr
        assert f"orbit-lsp: the last index of {ws} did not finish; indexing it again (4 files)" in proc.stderr
        assert "(full)" in proc.stdout
    finally:
        store.graph(name).delete()
        store.graph(build_graph_name(name)).delete()
