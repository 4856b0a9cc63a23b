"""Two language servers on one workspace, edits saved in both (issue 20 item 8): one graph,
no duplicated symbols or edges, and a later re-open finds it consistent. Real ``orbit-lsp``
server processes (pytest-lsp clients) on the session's embedded FalkorDB; the expected counts
follow from the generated modules (see ``test_integrity.py``)."""

from __future__ import annotations

import asyncio
import sys

from lsprotocol import types
from pytest_lsp import make_test_lsp_client

from lsp_harness import start_session, uri
from test_integrity import counts, expected, make_workspace, module_text, reference_export
from orbit_lsp.graph.queries import export
from orbit_lsp.index.indexer import WorkspaceIndexer


async def _server(ws):
    client = make_test_lsp_client()
    await client.start_io(sys.executable, "-m", "orbit_lsp")
    await start_session(client, ws, "neovim")
    return client


def _save(client, path) -> None:
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri(path))))


async def _settle(graph, want: dict, timeout: float = 30.0) -> dict:
    """Wait until the graph's counts equal ``want`` and stay so for a second (late duplicates
    would show then); returns the last counts."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    stable_since = None
    while loop.time() < deadline:
        got = counts(graph)
        if got == want:
            stable_since = stable_since or loop.time()
            if loop.time() - stable_since >= 1.0:
                return got
        else:
            stable_since = None
        await asyncio.sleep(0.1)
    return counts(graph)


async def test_two_servers_on_one_workspace_keep_one_graph(tmp_path, store):
    ws = make_workspace(tmp_path / "ws", 12)
    a = await _server(ws)
    b = await _server(ws)
    ix = WorkspaceIndexer(ws, store)
    try:
        assert counts(ix.graph) == expected(12)
        # saved in the editor of A (both servers see the file change on disk)
        (ws / "m1.py").write_text(module_text(1, 12, "\n\ndef h1():\n    return g1()\n"))
        _save(a, ws / "m1.py")
        assert await _settle(ix.graph, expected(12, extra_symbols=1, extra_calls=1)) == \
            expected(12, extra_symbols=1, extra_calls=1)
        # saved in the editor of B
        (ws / "m2.py").write_text(module_text(2, 12, "\n\ndef h2():\n    return f2()\n"))
        _save(b, ws / "m2.py")
        # and the same file saved in both at once
        (ws / "m3.py").write_text(module_text(3, 12, "\n\ndef h3():\n    return g3()\n"))
        _save(a, ws / "m3.py")
        _save(b, ws / "m3.py")
        want = expected(12, extra_symbols=3, extra_calls=3)
        assert await _settle(ix.graph, want) == want
    finally:
        for client in (a, b):
            await client.shutdown_session()
    assert export(ix.graph) == reference_export(ws, store, tmp_path)
    rep = ix.index_all()
    assert rep.mode == "unchanged" and rep.notes == []
    ix.graph.delete()
    ix.cache_path.unlink(missing_ok=True)
