"""What editors show, over LSP (pytest-lsp), with a real server: settings sent as `[]` (an empty
Lua table) are no settings, not two warnings at every start; names and paths in hovers and
answers render verbatim (`pkg/__init__.py`, not `pkg/init.py`), checked with a CommonMark
parser; a home directory is not indexed without the setting (said in a message), a folder
without a project marker only for its own files (a loose file no longer indexes its whole
tree), and FalkorDB's start is said in the indexing progress."""

from __future__ import annotations

import html
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from markdown_it import MarkdownIt
from pytest_lsp import LanguageClient, client_capabilities

from lsp_harness import SERVER, request, server_config, uri, wait_indexed
from orbit_lsp.index.roots import has_root_marker, in_project, too_broad

pytestmark = pytest.mark.asyncio(loop_scope="module")

MD = MarkdownIt("commonmark")
FILES = {
    "pyproject.toml": "[project]\nname = 'dunder'\n",
    "pkg/__init__.py": "from pkg.core import core\n\n\ndef setup_app():\n    return core()\n",
    "pkg/core.py": "def core():\n    return 1\n",
    "app.py": "from pkg import setup_app\n\n\ndef main():\n    return setup_app()\n",
}


def rendered_codes(markdown: str) -> list[str]:
    """Text of every code span of ``markdown`` as a CommonMark renderer shows it."""
    return [html.unescape(c) for c in re.findall(r"<code>(.*?)</code>", MD.render(markdown), re.S)]


def rendered_text(markdown: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", MD.render(markdown)))


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, tmp_path_factory):
    root = tmp_path_factory.mktemp("dunder")
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    lsp_client.root = root
    # what Neovim sends for `settings = { orbit = {} }`: empty Lua tables become JSON arrays
    lsp_client.set_configuration([], section="orbit")
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("neovim"), root_uri=uri(root),
        workspace_folders=[types.WorkspaceFolder(uri=uri(root), name=root.name)],
        initialization_options=[]))
    await wait_indexed(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def test_empty_array_settings_are_no_settings(client):
    warnings = [m.message for m in client.messages if m.type <= types.MessageType.Warning]
    assert warnings == []


async def hover(client, rel: str, line: int, character: int) -> str:
    h = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri(client.root / rel)),
        position=types.Position(line, character)))
    assert h is not None
    return h.contents.value


async def test_hover_keeps_dunder_paths(client):
    md = await hover(client, "pkg/__init__.py", 3, 6)  # def setup_app
    assert rendered_codes(md)[:2] == ["pkg.setup_app", "pkg/__init__.py:4"]
    assert "Dependents of pkg/__init__.py: 1 file" in rendered_text(md)
    md = await hover(client, "pkg/core.py", 0, 5)  # def core: its file's dependents are listed
    text = rendered_text(md)
    assert "hop 1: 1 file (pkg/__init__.py)" in text and "hop 2: 1 file (app.py)" in text, text
    assert "pkg.setup_app · pkg/__init__.py:5" in text  # its caller
    md = await hover(client, "app.py", 0, 6)  # the import of pkg
    assert rendered_codes(md)[0] == "pkg/__init__.py"


async def test_planner_answer_keeps_dunder_paths(client):
    res = await request(client, "orbit/ask", {"question": "who calls setup_app?"}, timeout=30)
    assert "pkg/__init__.py:4" in rendered_codes(res["markdown"])
    assert rendered_text(res["answer"]).startswith("pkg.setup_app (pkg/__init__.py:4) has 1 direct caller")


# -- folders that are not projects (issue 18 item 4) ----------------------------------------------------
# the server's home directory for this module: a loose folder, a project and the home itself
_HOME = Path(tempfile.mkdtemp(prefix="orbit-home-"))
LOOSE = {"loose.py": "def f():\n    return 1\n", "sub/deep.py": "def g():\n    return 2\n",
         "sub/more/deeper.py": "X = 1\n"}
PROJECT = {"pyproject.toml": "[project]\nname = 'p'\n", "top.py": "import pkg.mod\n", "pkg/mod.py": "Y = 1\n"}


@pytest_lsp.fixture(scope="module", config=server_config({"HOME": str(_HOME)}))
async def home_client(lsp_client: LanguageClient):
    for base, files in ((_HOME / "scratch", LOOSE), (_HOME / "proj", PROJECT), (_HOME, {"note.py": "Z = 1\n"})):
        for rel, text in files.items():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text(text)
    lsp_client.folders = [_HOME, _HOME / "scratch", _HOME / "proj"]
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=uri(_HOME),
        initialization_options={"looseFolders": "shallow"},  # as the Neovim plugin sends
        workspace_folders=[types.WorkspaceFolder(uri=uri(f), name=f.name) for f in lsp_client.folders]))
    await wait_indexed(lsp_client)
    yield
    await lsp_client.shutdown_session()
    shutil.rmtree(_HOME, ignore_errors=True)


async def test_home_directory_is_refused_with_a_message(home_client):
    warnings = [m.message for m in home_client.messages if m.type == types.MessageType.Warning]
    assert warnings == [f"orbit-lsp: not indexing {_HOME}: it is your home directory. Open a project folder "
                        "(one with .git, pyproject.toml or package.json), or set orbit.indexHomeOrRoot to true."]
    status = await request(home_client, "orbit/status", {})
    assert sorted(w["root"] for w in status["workspaces"]) == sorted(str(_HOME / n) for n in ("proj", "scratch"))


async def test_loose_folder_indexes_its_own_files_only(home_client):
    status = await request(home_client, "orbit/status", {})
    files = {Path(w["root"]).name: w["files"] for w in status["workspaces"]}
    assert files == {"scratch": 1, "proj": 2}  # scratch: loose.py only; proj: top.py and pkg/mod.py
    begins = {v[0].title: v[0].message for v in home_client.progress_reports.values()
              if v and isinstance(v[0], types.WorkDoneProgressBegin)}
    assert begins["orbit: indexing scratch"] == f"{_HOME / 'scratch'} (no project marker: its own files only)"
    assert begins["orbit: indexing proj"] == str(_HOME / "proj")
    logs = [m.message for m in home_client.log_messages]
    assert any(m.startswith(f"orbit: {_HOME / 'scratch'} has no project marker") for m in logs), logs


async def test_falkordb_start_is_said_in_the_progress(home_client):
    [first] = [v for v in home_client.progress_reports.values()
               if v and isinstance(v[0], types.WorkDoneProgressBegin)][:1]
    reports = [r.message for r in first if isinstance(r, types.WorkDoneProgressReport)]
    assert reports[0] == "starting FalkorDB…"


async def test_roots(tmp_path):
    home = tmp_path / "home"
    (home / "a" / "b").mkdir(parents=True)
    (home / ".git").mkdir()  # a dotfiles repository does not make every folder a project
    assert too_broad(home, home=home) == "your home directory"
    assert too_broad("/", home=home) == "the filesystem root"
    assert too_broad(home / "a", home=home) is None
    assert not in_project(home / "a" / "b", home=home)
    (home / "a" / "pyproject.toml").write_text("")
    assert in_project(home / "a" / "b", home=home) and has_root_marker(home / "a")
