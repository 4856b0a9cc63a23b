"""Answers echo document URIs as the client spells them, and CR-only files have the right
``File.lines`` (issue 20 item 18). Real ``orbit-lsp`` process over a raw JSON-RPC client; real
FalkorDB for the line counts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pygls.uris import from_fs_path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench` is not an installed package

from bench.raw_lsp import RawLsp  # noqa: E402
from orbit_lsp.index.indexer import WorkspaceIndexer  # noqa: E402

BOUND_S = 20.0


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("spelling") / "ws"
    root.mkdir()
    (root / "app.py").write_text("def helper():\n    return 1\n\n\ndef main():\n    return helper()\n")
    (root / "use.py").write_text("from app import helper\n\n\ndef run():\n    return helper()\n")
    return root


def _odd_spelling(path: Path) -> str:
    """A valid URI of ``path`` spelled unlike the canonical one: its last letter percent-encoded."""
    canonical = from_fs_path(str(path))
    head, dot, ext = canonical.rpartition(".")
    return f"{head[:-1]}%{ord(head[-1]):02X}{dot}{ext}"


def test_answers_echo_the_clients_spelling_of_a_uri(ws):
    lsp = RawLsp().start()
    try:
        lsp.initialize(ws)
        app_sent = _odd_spelling(ws / "app.py")
        assert app_sent != from_fs_path(str(ws / "app.py"))
        pos = {"line": 0, "character": 4}  # helper
        impact = lsp.request("orbit/impact", {"textDocument": {"uri": app_sent}, "position": pos}, timeout=BOUND_S)
        assert impact["result"]["target"]["uri"] == app_sent, impact
        file_impact = lsp.request("orbit/impact", {"textDocument": {"uri": app_sent}}, timeout=BOUND_S)
        assert file_impact["result"]["target"]["uri"] == app_sent
        # a file the client did not name keeps the canonical URI
        assert [d["uri"] for d in file_impact["result"]["dependents"]] == [from_fs_path(str(ws / "use.py"))]

        items = lsp.request("textDocument/prepareCallHierarchy", {"textDocument": {"uri": app_sent}, "position": pos},
                            timeout=BOUND_S)["result"]
        assert [i["uri"] for i in items] == [app_sent]
        # the caller in use.py, open in the client under its own spelling: that spelling
        use_sent = _odd_spelling(ws / "use.py")
        lsp.notify("textDocument/didOpen", {"textDocument": {"uri": use_sent, "languageId": "python", "version": 1,
                                                             "text": (ws / "use.py").read_text()}})
        calls = lsp.request("callHierarchy/incomingCalls", {"item": items[0]}, timeout=BOUND_S)["result"]
        assert sorted(c["from"]["uri"] for c in calls) == sorted([app_sent, use_sent])
    finally:
        lsp.stop()


def test_file_lines_count_every_line_end(tmp_path, store):
    root = tmp_path / "ws"
    root.mkdir()
    bodies = {"cr.py": b"a = 1\rb = 2\rc = 3\r", "cr_open.py": b"a = 1\rb = 2",
              "crlf.py": b"a = 1\r\nb = 2\r\n", "lf.py": b"a = 1\nb = 2\nc = 3", "mixed.py": b"a = 1\r\n\rb = 2\n"}
    for name, data in bodies.items():
        (root / name).write_bytes(data)
    ix = WorkspaceIndexer(root, store)
    try:
        ix.index_all()
        got = {p: n for p, n in ix.graph.query("MATCH (f:File) RETURN f.path, f.lines").rows}
        assert got == {"cr.py": 3, "cr_open.py": 2, "crlf.py": 2, "lf.py": 3, "mixed.py": 3}
    finally:
        ix.graph.delete()
