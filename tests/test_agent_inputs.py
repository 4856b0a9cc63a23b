"""``read_file`` after consent opens exactly the file that was checked (issue 20 item 11), and the
agent's tools refuse unusable text with a clear error (item 16): a real workspace indexed into
the real FalkorDB, the real ``Toolbox``, files swapped for links, other files and FIFOs while the
consent question is open (inside the consent callback, as a user's dialog would leave time for)."""

from __future__ import annotations

import os
import shutil

import pytest

from orbit_lsp.agent.tools import Toolbox, ToolError
from orbit_lsp.index.indexer import WorkspaceIndexer

SECRET = "orbit-outside-canary-7d1f"
DOTENV = "OPENAI_API_KEY=orbit-dotenv-canary-91ab"


@pytest.fixture
def ws(tmp_path, store, settings):
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "mod.py").write_text("def f():\n    return 1\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "inner.py").write_text("from mod import f\n\nVALUE = f()\n")
    (root / ".env").write_text(DOTENV + "\n")
    outside = tmp_path / "outside"
    (outside / "pkg").mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET + "\n")
    (outside / "pkg" / "inner.py").write_text(f"LEAK = '{SECRET}'\n")
    ix = WorkspaceIndexer(root, store, settings)
    ix.index_all()
    yield ix, outside
    ix.graph.delete()


def toolbox(ix, settings, consent) -> Toolbox:
    tb = Toolbox(ix.graph, ix.root, settings, consent=consent)
    tb.readable |= {"mod.py", "pkg/inner.py"}  # as if an earlier step had returned them
    return tb


def swap_for(path, make):
    """A consent callback that replaces ``path`` by ``make(path)`` and allows the read."""
    def consent(_asked):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
        make(path)
        return "once"
    return consent


def test_untouched_file_is_read_after_consent(ws, settings):
    ix, _ = ws
    res = toolbox(ix, settings, lambda p: "once").run("read_file", {"path": "pkg/inner.py"})
    assert res.data["text"] == "1: from mod import f\n2: \n3: VALUE = f()"


@pytest.mark.parametrize("swap,reason", [
    ("outside", "replaced by a link"),
    ("dotenv", "replaced by a link"),
    ("hardlink-dotenv", "replaced by another file"),
    ("fifo", "not a regular file"),
])
def test_file_swapped_while_the_user_is_asked_is_not_read(ws, settings, swap, reason):
    ix, outside = ws
    target = ix.root / "mod.py"
    make = {
        "outside": lambda p: p.symlink_to(outside / "secret.txt"),
        "dotenv": lambda p: p.symlink_to(ix.root / ".env"),
        "hardlink-dotenv": lambda p: os.link(ix.root / ".env", p),
        "fifo": lambda p: os.mkfifo(p),
    }[swap]
    tb = toolbox(ix, settings, swap_for(target, make))
    with pytest.raises(ToolError, match=reason) as exc:
        tb.run("read_file", {"path": "mod.py"})  # a FIFO would block an open() without O_NONBLOCK
    assert "nothing was read" in str(exc.value)
    assert SECRET not in str(exc.value) and "canary" not in str(exc.value)


def test_folder_swapped_for_a_link_while_the_user_is_asked_is_not_read(ws, settings):
    ix, outside = ws
    tb = toolbox(ix, settings, swap_for(ix.root / "pkg", lambda p: p.symlink_to(outside / "pkg")))
    with pytest.raises(ToolError, match="folder pkg was replaced by a link"):
        tb.run("read_file", {"path": "pkg/inner.py"})


@pytest.mark.parametrize("path,problem", [
    ("mod\x00.py", "NUL character"),
    ("mod\ud800.py", "unpaired UTF-16 surrogate"),
])
def test_unusable_paths_get_a_clear_tool_error(ws, settings, path, problem):
    ix, _ = ws
    asked = []
    tb = toolbox(ix, settings, lambda p: asked.append(p) or "once")
    with pytest.raises(ToolError, match=f"argument 'path' contains.*{problem}"):
        tb.run("read_file", {"path": path})
    with pytest.raises(ToolError, match=problem):
        tb.run("find_symbol", {"name": "f\x00" if "NUL" in problem else "f\udc80"})
    assert asked == []


def test_huge_arguments_are_refused_before_running(ws, settings):
    ix, _ = ws
    tb = toolbox(ix, settings, lambda p: "once")
    with pytest.raises(ToolError, match="at most 16000 are accepted"):
        tb.run("cypher_query", {"query": "RETURN 1 // " + "x" * 1_000_000})
    with pytest.raises(ToolError, match=r"levels deep.*\(\d+ characters\)$"):
        tb.run("cypher_query", {"query": "RETURN " + "NOT " * 900 + "true"})


# --------------------------------------------------------------------------- questions and memories

@pytest.mark.parametrize("question,problem", [
    ("who calls f?\x00", "contains a NUL character"),
    ("who calls \udcff?", "unpaired UTF-16 surrogate"),   # undecodable argv bytes arrive like this
    ("   ", "empty"),
    ("x" * 20_001, "at most 20000"),
])
def test_unusable_questions_are_refused_before_anything_runs(ws, settings, tmp_path, question, problem):
    from orbit_lsp.agent.history import History
    from orbit_lsp.agent.service import Asker, InvalidQuestion

    ix, _ = ws
    asker = Asker(settings.model_copy(update={"agent_model": None}), History(tmp_path / "h.sqlite3"))
    try:
        with pytest.raises(InvalidQuestion, match=problem):
            asker.ask(question, ix.graph, ix.root)
        assert asker.history.audit_log() == []  # nothing recorded, no memory proposed
        res = asker.ask("what depends on mod.py?", ix.graph, ix.root)  # and the next question works
        assert res.error is None and "pkg/inner.py" in res.answer
    finally:
        asker.close()


def test_conversation_id_beyond_sqlite_integers_is_unknown(ws, settings, tmp_path):
    from orbit_lsp.agent.history import History
    from orbit_lsp.agent.service import Asker, UnknownConversation

    ix, _ = ws
    asker = Asker(settings.model_copy(update={"agent_model": None}), History(tmp_path / "h.sqlite3"))
    try:
        with pytest.raises(UnknownConversation, match="no conversation"):
            asker.ask("what depends on mod.py?", ix.graph, ix.root, conversation_id=2**70)
    finally:
        asker.close()


@pytest.mark.parametrize("text,problem", [
    ("deploy with make ship\x00", "NUL character"),
    ("deploy with make \ud800 ship", "unpaired UTF-16 surrogate"),
])
def test_unusable_memory_texts_are_refused(store, text, problem):
    import uuid

    from orbit_lsp.memory.store import InvalidMemory, MemoryStore

    mem = MemoryStore(store, "orbit_test_mem_" + uuid.uuid4().hex[:8])
    try:
        with pytest.raises(InvalidMemory, match=problem):
            mem.remember(text)
        assert mem.remember("deploy with make ship").text == "deploy with make ship"
    finally:
        mem.graph.delete()
