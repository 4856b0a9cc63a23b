"""Smoke test of the benchmarks (bench/run.py) on a tiny corpus, so they cannot rot.

Runs every subcommand in-process through ``bench.run.main`` on a copy of shared case 002, against
the session's embedded FalkorDB, writing to a temporary results file. Nothing is timed or asserted
about speed here: only that each benchmark runs, measures what it says and leaves the corpus as it
found it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench` is not an installed package

from bench import run as bench  # noqa: E402


@pytest.fixture
def tiny(case_workspace, tmp_path, store):
    ws = case_workspace("002")
    cache = tmp_path / "bench-cache"
    results = tmp_path / "RESULTS.md"
    yield ws, cache, results
    # the graph of the corpus copy, then nothing of the benchmark is left on the session server
    corpus, _ = bench.prepare_corpus(str(ws), cache)
    store.graph(bench.code_graph_name(corpus)).delete()


def _run(argv, settings, ws, cache, results):
    return bench.main([*argv, "--corpus", str(ws), "--cache-dir", str(cache), "--results", str(results)],
                      settings=settings)


def test_bench_subcommands_on_tiny_corpus(tiny, settings, capsys):
    ws, cache, results = tiny
    before = {p.relative_to(ws): p.read_bytes() for p in ws.rglob("*.py")}

    assert _run(["index"], settings, ws, cache, results) == 0
    assert _run(["reindex", "--n", "4"], settings, ws, cache, results) == 0
    assert _run(["queries", "--repeat", "2"], settings, ws, cache, results) == 0

    text = results.read_text()
    assert text.startswith("# Benchmark results")
    for name in ("index", "reindex", "queries"):
        assert f"· {name} ·" in text
        assert f"`python -m bench.run {name} " in text and f"--corpus {ws} " in text
    assert "Python " in text and "cores" in text and "FalkorDB" in text
    assert "ratio cold / baseline GC on" in text
    assert "interface changed" in text and "no interface change" in text
    assert "impact (1..4 hops)" in text and "callers (depth 1)" in text and "call chain" in text
    assert "cProfile of the slowest edit" in text
    assert "equal those before: yes" in text
    assert "| callers (depth 1) |" in capsys.readouterr().out  # the table is printed too

    # the original corpus is untouched; the copy is restored after the edits
    assert {p.relative_to(ws): p.read_bytes() for p in ws.rglob("*.py")} == before
    corpus, _ = bench.prepare_corpus(str(ws), cache)
    assert {p.relative_to(corpus): p.read_bytes() for p in corpus.rglob("*.py")} == before
    assert not list((cache / "journal").glob("*.pickle"))


def test_bench_functions_report_figures(tiny, settings):
    ws, cache, _ = tiny
    corpus, label = bench.prepare_corpus(str(ws), cache)
    rep = bench.run_index(corpus, label, settings, "test", repeat=1)
    run = rep.data["runs"][0]
    assert run["cold"].files == 4 and run["cold"].symbols > 0 and run["reopen"].mode == "unchanged"
    assert rep.data["counts"]["calls"] >= 2 and rep.data["ratio_gc_on"] > 0

    rep = bench.run_reindex(corpus, label, settings, "test", n=4, cache_dir=cache, profile=False)
    cases = rep.data["cases"]
    assert len(cases) == 4
    assert any(c["interface_changed"] for c in cases) and any(not c["interface_changed"] for c in cases)
    assert rep.data["counts_before"] == rep.data["counts_after"]

    rep = bench.run_queries(corpus, label, settings, "test", repeat=1)
    s = rep.data["samples"]
    assert s["impact (1..4 hops)"] and s["callers (depth 1)"] and s["file_symbols (lens data)"]
    # case 002: Other.process -> make_child -> Child is a 2-hop path (with a 1-hop shortcut)
    assert rep.data["pairs"] and rep.data["chains_found"] == len(rep.data["pairs"])


def test_edits_parse_and_keep_or_change_the_interface():
    import ast
    import random

    src = b'def f(x):\n    """doc"""\n    return x\n\nclass A:\n    def m(self): return 1\n'
    rng = random.Random(0)
    body, what = bench.make_edit(src, False, 1, rng)
    ast.parse(body)
    assert what == "body line in f()" and body.count(b"\n") == src.count(b"\n") + 1
    iface, what = bench.make_edit(src, True, 2, rng)
    assert "_orbit_bench_fn_2" in ast.dump(ast.parse(iface))
    assert bench.pct([1, 2, 3, 4], 50) == 2 and bench.pct(list(range(1, 21)), 95) == 19


def test_every_subcommand_keeps_its_own_defaults():
    """Subcommands share the common options' argparse actions: one subcommand changing a default
    (``set_defaults``) must not change it for the others."""
    from bench.run import build_parser

    p = build_parser()
    for cmd in ("index", "reindex", "queries", "lsp"):
        assert p.parse_args([cmd]).corpus == "stdlib", cmd


def _args(argv, ws, cache, results):
    return bench.build_parser().parse_args([*argv, "--corpus", str(ws), "--cache-dir", str(cache),
                                            "--results", str(results)])


def test_bench_profile_on_tiny_corpus(tiny, settings):
    pytest.importorskip("pyinstrument")
    from bench import profile

    ws, cache, results = tiny
    assert _run(["profile", "--top", "30"], settings, ws, cache, results) == 0
    text = results.read_text()
    assert "· profile ·" in text and "`python -m bench.run profile " in text
    assert "cold index, phase split" in text and "FalkorDB server CPU during the index" in text
    assert "pyinstrument text summary" in text and "index_all" in text

    corpus, label = bench.prepare_corpus(str(ws), cache)
    rep = profile.run(corpus, label, settings, "test", _args(["profile"], ws, cache, results))
    assert rep.data["files"] == 4 and set(rep.data["timings"]) >= {"parse", "resolve", "write"}
    assert set(rep.data["split"]) == set(profile.CATEGORIES) and rep.data["profile_lines"]


def test_bench_peers_on_tiny_corpus(tiny, settings):
    from bench import peers

    ws, cache, results = tiny
    tools = []
    try:
        import jedi  # noqa: F401
        tools += ["jedi", "jedi-full"]
    except ImportError:
        pass
    if peers.pyright_command() is not None and shutil.which("node"):  # else pyright fetches node first
        tools.append("pyright")
    if not tools:
        pytest.skip("neither jedi nor pyright is installed (pip install -e '.[bench]')")
    argv = ["peers", "--tools", ",".join(tools), "--repeat", "1", "--cap", "120"]
    assert _run(argv, settings, ws, cache, results) == 0
    text = results.read_text()
    assert "· peers ·" in text and "who calls this function" in text and "summary (ratios" in text

    corpus, label = bench.prepare_corpus(str(ws), cache)
    rep = peers.run(corpus, label, settings, "test", _args(argv, ws, cache, results))
    # case 002: make_child is the most-called function; its one call is in Other.process (other.py)
    t = rep.data["targets"][0]
    assert t.qual == "library.parent.child_classes.make_child"
    orbit = rep.data["orbit"][0]
    assert set(orbit.sites) == {("library/other.py", 8)}
    for tool in tools:
        ans = rep.data["peers"][tool][0][0]
        assert ans.status == "ok" and set(ans.sites) == set(orbit.sites), tool
    if "pyright" in tools:
        assert rep.data["totals"]["orbit"] == [1, 0, 0] and rep.data["disagreements"] == []


def test_call_sites_map_names_to_call_starts(tmp_path):
    from bench.peers import CallSites, prf

    (tmp_path / "m.py").write_text("import os\n\n@deco\ndef f():\n    x = (obj\n         .meth(1))\n"
                                   "    g(os.sep)\n    h = g\n")
    s = CallSites(tmp_path)
    assert s.call_line("m.py", 6, "meth") == 5  # the name is on line 6, the call starts on line 5
    assert s.call_line("m.py", 7, "g") == 7 and s.call_line("m.py", 3, "deco") == 3
    assert s.call_line("m.py", 8, "g") is None  # a reference, not a call
    (tmp_path / "bad.py").write_text("def (:\n")
    assert s.call_line("bad.py", 1, "f") is None and not s.parses("bad.py")
    assert prf(3, 1, 0) == (0.75, 1.0) and prf(0, 0, 0) == (None, None)


def test_bench_lsp_on_tiny_corpus(tiny, settings):
    """The language-server benchmark: a real orbit-lsp process on the corpus copy."""
    ws, cache, results = tiny
    before = {p.relative_to(ws): p.read_bytes() for p in ws.rglob("*.py")}
    assert _run(["lsp", "--n", "2", "--saves", "1"], settings, ws, cache, results) == 0
    text = results.read_text()
    assert "· lsp ·" in text and "didSave → fresh lenses (ms)" in text and "orbit/impact (ms, n=2)" in text
    assert "orbit/impact listing every dependent (maxDependents 100,000) (ms, n=2)" in text
    assert "orbit/impact answers list at most orbit.maxDependents (default) dependents" in text
    assert "after re-open" in text
    assert {p.relative_to(ws): p.read_bytes() for p in ws.rglob("*.py")} == before


def test_bench_mcp_on_tiny_corpus(tiny, settings):
    """The MCP benchmark: a real ``orbit-lsp mcp`` process on the corpus copy, through the SDK client."""
    pytest.importorskip("tiktoken")
    ws, cache, results = tiny
    assert _run(["mcp", "--n", "3"], settings, ws, cache, results) == 0
    text = results.read_text()
    assert "· mcp ·" in text and "`python -m bench.run mcp " in text
    assert "| callers |" in text and "| call_chain |" in text and "tool list with schemas" in text
    assert "tool error" not in text  # every call on the corpus was answered


def tiny_project(src: Path) -> Path:
    """The base version of tests/changes_repo.py's project, written at ``src`` (no git)."""
    import textwrap

    from changes_repo import BASE

    for rel, text in BASE.items():
        p = src / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return src


def test_bench_changes_on_tiny_project(tmp_path, settings, store):
    """``changes``: breaking edits of a tiny project with a pytest suite, run with this
    interpreter (no venv); every failing test is compared with the selection."""
    src = tiny_project(tmp_path / "tinyproj")
    cache, results = tmp_path / "bench-cache", tmp_path / "RESULTS.md"
    try:
        assert bench.main(["changes", "--corpus", str(src), "--n", "3", "--jobs", "2", "--python", sys.executable,
                           "--cache-dir", str(cache), "--results", str(results), "--suite-timeout", "120"],
                          settings=settings) == 0
    finally:
        for copy in ("tinyproj", "tinyproj-job2"):
            store.graph(bench.code_graph_name(cache / "changes" / copy)).delete()
    text = results.read_text()
    assert "· changes ·" in text and "`python -m bench.run changes " in text
    assert "tinyproj: 2 suites ran at once, each in its own work copy" in text
    assert "| tinyproj | 10 | 3 |" in text  # 10 tests collected, 3 edits
    row = next(line for line in text.splitlines() if line.startswith("| tinyproj | 10 | 3 |")).split("|")
    failing, recall, misses = int(row[5]), row[6].strip(), int(row[7])
    assert failing > 0 and recall == f"{(failing - misses) / failing:.1%}"
    # every miss is listed and classified
    listed = [line for line in text.splitlines() if line.startswith("| tinyproj | app/")]
    assert len(listed) == misses
    assert all(line.rstrip(" |").rsplit("|", 1)[1].strip() for line in listed)
    assert (src / "app/core.py").read_text() == (tiny_project(tmp_path / "pristine") / "app/core.py").read_text()

    # the reach floor: the tests that enter each edited function, by the tiny project's call graph
    # (changes_repo's docstring); a raise at entry fails every one of them (nothing catches it)
    floor = [line.split("|")[1:-1] for line in text.splitlines() if line.startswith("| app/") and line.count("|") == 13]
    assert len(floor) == 3  # one row per edit
    entering_all = selected_entering = 0
    floor_shares = []
    for edited, ent, failing_n, sel, sel_ent, over, failing_not_ent, floor_share, failing_share, _, outside, hops in (
            [c.strip() for c in r] for r in floor):
        want = TINY_ENTERING[edited]
        assert int(ent) == len(want) and int(failing_n) == len(want) and int(failing_not_ent) == 0, edited
        assert outside == ""  # no function of the tiny project runs at import
        # the bound calls one hop above it (changes_repo's docstring); Engine.run's are all unbound
        assert edited == "app/core.py:Engine.run" or hops == TINY_FIRST_HOPS[edited], edited
        assert int(sel_ent) + int(over) == int(sel) and int(sel_ent) <= len(want)
        # one collected item per test function here: the share is the count out of 10
        assert floor_share == failing_share == f"{len(want) / 10:.1%}"
        entering_all += len(want)
        selected_entering += int(sel_ent)
        floor_shares.append(len(want) / 10)
    summary_row = next(line for line in text.splitlines() if line.startswith("| tinyproj | 3 |")).split("|")[1:-1]
    _, _, floor_mean, _, failing_mean, _, ent_sum, recall_ent, failing_not_ent_sum, outside_sum, _ = [
        c.strip() for c in summary_row]
    assert floor_mean == failing_mean == f"{sum(floor_shares) / 3:.1%}"
    assert int(ent_sum) == entering_all and failing_not_ent_sum == "0" and outside_sum == "0"
    assert recall_ent == f"{selected_entering / entering_all:.1%}"


def test_bench_changes_coverage_map_on_tiny_project(tmp_path, settings, store):
    """``changes --coverage-map``: the selection narrowed by the coverage map of the unchanged
    suite, beside the static one. A raise at entry fails exactly the tests that enter the
    function (``TINY_ENTERING``: nothing in the tiny project catches it or runs it at import),
    which are the tests the map says enter it: the narrowed selection is the failing tests."""
    src = tiny_project(tmp_path / "tinyproj")
    cache, results = tmp_path / "bench-cache", tmp_path / "RESULTS.md"
    try:
        assert bench.main(["changes", "--corpus", str(src), "--n", "3", "--python", sys.executable, "--no-floor",
                           "--coverage-map", str(tmp_path / "maps"), "--cache-dir", str(cache),
                           "--results", str(results), "--suite-timeout", "120"], settings=settings) == 0
    finally:
        store.graph(bench.code_graph_name(cache / "changes" / "tinyproj")).delete()
    assert (tmp_path / "maps" / "tinyproj.coverage").exists()
    text = results.read_text()
    rows = {r[1]: r for r in (line.split("|")[1:-1] for line in text.splitlines()
                              if line.startswith("| tinyproj | static |") or line.startswith("| tinyproj | coverage map |"))}
    rows = {k.strip(): [c.strip() for c in v] for k, v in rows.items()}
    assert set(rows) == {"static", "coverage map"}
    assert rows["coverage map"][2:4] == ["100.0%", "0"]
    edits = [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines()
             if line.startswith("| app/") and line.count("|") == 8]
    assert len(edits) == 3
    for edited, failing, _static, narrowed, hit, share, modes in edits:
        assert int(failing) == int(narrowed) == int(hit) == len(TINY_ENTERING[edited]), edited
        assert share == f"{len(TINY_ENTERING[edited]) / 10:.1%}" and modes == "narrowed: tests enter it"


TINY_FIRST_HOPS = {  # bound calls of each function: compute and test_helper call helper, …
    "app/core.py:helper": "call 2", "app/core.py:compute": "call 3", "app/core.py:old_name": "call 1",
    "app/util.py:wrap": "call 1", "app/service.py:serve": "call 1", "app/service.py:uses_old": "call 1",
}
TINY_ENTERING = {  # edited function -> the tests whose run enters it (tests/changes_repo.py BASE)
    "app/core.py:helper": {"test_helper", "test_compute", "test_run", "test_dynamic", "test_serve"},
    "app/core.py:compute": {"test_compute", "test_run", "test_dynamic", "test_serve"},
    "app/core.py:old_name": {"test_uses_old"},
    "app/core.py:Engine.run": {"test_run", "test_dynamic"},
    "app/util.py:wrap": {"test_serve"},
    "app/service.py:serve": {"test_serve"},
    "app/service.py:uses_old": {"test_uses_old"},
}


def test_bench_cli_latency_and_scale_on_tiny_corpus(tiny, settings):
    """``cli-latency``: the console script answers in a real process; ``scale`` on a folder of
    one's own (the corpus set needs downloads): floor, cold index in a child process, re-open,
    re-index, and the corpus restored."""
    ws, cache, results = tiny
    assert _run(["cli-latency", "--n", "1", "--k", "1"], settings, ws, cache, results) == 0
    text = results.read_text()
    assert "· cli-latency ·" in text and "orbit-lsp callers (all targets)" in text
    assert "python -c pass (interpreter floor)" in text and "| 0 runs exited" not in text

    from bench import scale

    corpus, _ = bench.prepare_corpus(str(ws), cache)
    before = {p.relative_to(corpus): p.read_bytes() for p in corpus.rglob("*.py")}
    args = _args(["scale", "--workspace-dir", str(corpus), "--reindex-n", "2"], ws, cache, results)
    rep = scale.run(args, settings, "test", restart_server=False)
    assert rep.data["python_files"] == 4 and rep.data["cold"]["result"]["mode"] == "full"
    assert rep.data["cold"]["result"]["files"] == 4 and rep.data["reopen_mode"] == "unchanged"
    assert rep.data["floor_one_core_s"] > 0
    assert rep.data["floor_one_core_after_s"] > 0  # the floor again, right after the cold index
    # the timed cold index reads no PSS; the second one, from scratch again, measures memory
    assert rep.data["cold"]["pss_samples"] == 0 and rep.data["cold"]["peak_pss_kib"] == 0
    assert rep.data["cold"]["peak_sum_kib"] == 0 and rep.data["cold"]["procs"] >= 1
    memory = rep.data["cold_memory"]
    assert memory["result"]["mode"] == "full" and memory["result"]["files"] == 4
    assert 0 < memory["peak_pss_kib"] <= memory["peak_sum_kib"]
    assert memory["pss_samples"] >= 1 and memory["sampler_cpu_s"] >= 0
    # the index process ran Python for a while; the server is shared with the tests (running)
    assert rep.data["cold"]["cpu_s"] > 0 and rep.data["cold"]["server_cpu_s"] is not None
    # each of the 4 files is resolved from its own facts, decoded at least once
    assert rep.data["cold"]["result"]["facts_decoded"] >= 4
    captions = " ".join(t.caption for t in rep.tables)
    assert "cold index against the floor" in captions and "one-file re-index" in captions
    # the index's phases, from its progress lines, each with its seconds
    phases = [ph for ph, *_ in rep.data["cold"]["phases"]]
    assert "parsing" in phases and "cold index by phase" in captions
    assert all(sec >= 0 for _, sec, *_ in rep.data["cold"]["phases"])
    assert {p.relative_to(corpus): p.read_bytes() for p in corpus.rglob("*.py")} == before


def test_memory_sampler_reads_pss_at_most_once_an_interval():
    """The scale bench's sampler reads RSS every ``interval`` but the costly PSS (the kernel
    walks the page tables) at most once every ``pss_interval``, and counts its own CPU."""
    from bench.scale import TreeRss

    child = subprocess.Popen([sys.executable, "-c", "import time; x = bytearray(64 << 20); time.sleep(30)"])
    try:
        time.sleep(0.5)  # the child has started and holds its 64 MiB
        rss = TreeRss(child.pid, interval=0.01, pss_interval=0.5)
        unobserved = TreeRss(child.pid, interval=0.01, pss_interval=None, rss=False)  # a timed run's sampler
        time.sleep(1.2)
        rss.stop()
        unobserved.stop()
    finally:
        child.kill()
        child.wait()
    assert 1 <= rss.pss_samples <= 3  # t = 0, 0.5, 1.0 s at most, though RSS was read ~100 times
    assert 64 << 10 <= rss.peak_pss <= rss.peak_sum
    assert rss.own_cpu_s > 0
    assert unobserved.pss_samples == 0 and unobserved.peak_pss == unobserved.peak_sum == 0
    assert unobserved.peak_procs == 1 and unobserved.cpu_s >= 0  # the CPU is still read


def test_phases_of_an_index_with_the_busy_cores_while_each_ran():
    """The scale bench splits a cold index into the phases its progress lines name (warnings
    left out) and gives each its seconds, the machine's mean busy cores over the samples taken
    while it ran, and the core-seconds left idle."""
    from bench.scale import phase_busy

    lines = [(0.0, "orbit-lsp: starting the embedded FalkorDB"), (1.0, "indexing /w: reading 10 files"),
             (1.5, "skipped w/big.py: larger than 2000000 bytes"), (2.0, "indexing /w: reading 10/10 (100%)"),
             (3.0, "indexing /w: parsing 10 files")]
    busy = [(0.5, 1.0), (1.5, 1.0), (2.5, 2.0), (3.5, 2.0), (4.5, 1.0)]
    assert phase_busy(lines, busy, 5.0, 2) == [("starting", 1.0, 1.0, 1.0), ("reading", 2.0, 1.5, 1.0),
                                               ("parsing", 2.0, 1.5, 1.0)]
    assert phase_busy(lines[:1], [], 1.0, 2) == [("starting", 1.0, None, None)]


def test_lsp_bench_reads_falkordb_snapshots_from_its_log(tmp_path):
    """The language-server bench reads FalkorDB's snapshots (fork + write, from its log: start
    and end) and tells which timed requests overlapped one; a snapshot with no end yet lasts."""
    from bench.lsp import _during_snapshots, _snapshots

    log = tmp_path / "falkordb.log"
    log.write_text("7:M 04 Dec 2026 04:26:01.000 * Background saving started by pid 9\n"
                   "9:C 04 Dec 2026 04:26:03.000 * DB saved on disk\n"
                   "7:M 04 Dec 2026 04:26:05.500 * Background saving terminated with success\n"
                   # a snapshot the server's stop killed, then the next server's
                   "7:M 04 Dec 2026 04:28:01.000 * Background saving started by pid 11\n"
                   "7:M 04 Dec 2026 04:28:01.250 * User requested shutdown...\n"
                   "7:M 04 Dec 2026 04:28:01.300 # There is a child saving an .rdb. Killing it!\n"
                   "12:M 04 Dec 2026 04:28:03.000 * Server initialized\n"
                   "12:M 04 Dec 2026 04:31:01.000 * Background saving started by pid 10\n")
    (s0, e0), (k0, k1), (s1, e1) = _snapshots(log)
    assert e0 - s0 == 4.5 and k1 - k0 == 0.25 and s1 - s0 == 300 and e1 is None
    assert _during_snapshots((s0 + 1, s0 + 1.01), _snapshots(log))
    assert not _during_snapshots((e0 + 1, e0 + 2), _snapshots(log))
    assert _during_snapshots((s1 + 60, s1 + 61), _snapshots(log))
    assert _snapshots(tmp_path / "missing.log") == []


def test_reach_floor_of_the_tiny_project(tmp_path):
    """The floor's coverage run on the tiny project (plus a module that calls functions at
    import): every candidate function is entered by exactly the tests its call graph says, by
    node id; ``def`` lines and module-level calls (run at import, outside any test) are credited
    to no test, and the functions they run are flagged."""
    from bench.changes import candidates, function_id, source_env
    from bench.changes_floor import body_lines, entering, run_covered, run_outside

    src = tiny_project(tmp_path / "tinyproj")
    (src / "app/boot.py").write_text("def at_import():\n    return 1\n\n\ndef both():\n    return 2\n\n\n"
                                     "A = at_import()\nB = both()\n")
    (src / "tests/test_boot.py").write_text("from app.boot import both\n\n\ndef test_both():\n"
                                            "    assert both() == 2\n")
    covered, _ = run_covered(sys.executable, src, "tests", 120, source_env(src))
    got, outside = {}, set()
    for rel, qual, _line, _indent in candidates(src, lambda r: r.startswith("tests/")):
        lines = body_lines((src / rel).read_bytes(), qual)
        tests = entering(covered, rel, lines)
        got[f"{rel}:{qual}"] = {function_id(t).rpartition("::")[2] for t in tests}
        assert all(t.startswith("tests/test_") and "|" not in t for t in tests)
        if run_outside(covered, rel, lines):
            outside.add(f"{rel}:{qual}")
    assert got == {**TINY_ENTERING, "app/boot.py:at_import": set(), "app/boot.py:both": {"test_both"}}
    assert outside == {"app/boot.py:at_import", "app/boot.py:both"}
    # test_dynamic is parametrized: its one case is a node id of its own
    assert "tests/test_engine.py::test_dynamic[e0]" in covered["tests"]
    core = (src / "app/core.py").read_text().splitlines()
    def_lines = [str(k) for k, line in enumerate(core, 1) if line.lstrip().startswith(("def ", "class "))]
    assert def_lines and not set(def_lines) & set(covered["lines"]["app/core.py"])


def test_reach_floor_body_lines():
    """A function's body lines: from its first statement, without the def line, its decorators
    and the bodies of functions nested in it (whose def and decorator lines it runs itself)."""
    from bench.changes_floor import body_lines

    src = b"""\
import functools


class A:
    @functools.cache
    def m(self,
          x):
        y = x

        @functools.wraps(y)
        def inner():
            return y

        class Local:
            z = 1

            def meth(self):
                return 2
        quick = lambda: 3
        def one(): return 4
        return inner
"""
    # blank lines inside stay (they run nothing); a one-line nested def is the enclosing function's line
    assert body_lines(src, "A.m") == set(range(8, 22)) - {12, 18}
    assert body_lines(src, "A.m.inner") == {12}
    assert body_lines(src, "A.m.Local.meth") == {18}
    assert body_lines(src, "A") == set() and body_lines(src, "A.nope") == set()

    # typing.overload stubs come first; the definition that runs is the last (or the one at a line)
    over = b"""\
import typing


@typing.overload
def f(x: int) -> int: ...
@typing.overload
def f(x: str) -> str: ...
def f(x):
    return x
"""
    assert body_lines(over, "f") == {9} and body_lines(over, "f", 9) == {9}
    assert body_lines(over, "f", 5) == {5}  # the one-line stub's body shares its def line
