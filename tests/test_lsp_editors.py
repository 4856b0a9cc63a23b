"""What editors show, over LSP (pytest-lsp, the Neovim profile: the client of issue 18), with a
real server: settings sent as `[]` (an empty Lua table) are no settings, not two warnings at
every start; names and paths in hovers and answers render verbatim (`pkg/__init__.py`, not
`pkg/init.py`), checked with a CommonMark parser."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from markdown_it import MarkdownIt
from pytest_lsp import LanguageClient, client_capabilities

from lsp_harness import SERVER, request, uri, wait_indexed

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
