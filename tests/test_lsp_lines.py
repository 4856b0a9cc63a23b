"""Line splitting of open documents: only \\n, \\r\\n and \\r end a line (as in LSP and Python)."""

from lsprotocol import types
from pygls.workspace import Workspace

from orbit_lsp.server.app import split_lines, use_lsp_lines


def test_split_lines_keeps_form_feeds_inside_lines():
    assert split_lines("a\x0cb\nc\r\nd\re") == ["a\x0cb\n", "c\r\n", "d\r", "e"]
    assert split_lines("x\n") == ["x\n"] and split_lines("") == []


def test_incremental_change_after_a_form_feed_lands_on_the_right_line():
    ws = Workspace(None, types.TextDocumentSyncKind.Incremental)
    use_lsp_lines(ws)
    uri = "file:///tmp/ff.py"
    ws.put_text_document(types.TextDocumentItem(uri=uri, language_id="python", version=1,
                                                text="a = 1\n\x0c\ndef f():\n    return g()\n"))
    ws.update_text_document(types.VersionedTextDocumentIdentifier(uri=uri, version=2), types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(3, 11), types.Position(3, 12)), text="h"))
    assert ws.get_text_document(uri).source == "a = 1\n\x0c\ndef f():\n    return h()\n"


def test_rel_uri_equals_uri_of_the_joined_path():
    from pathlib import Path

    from pygls.uris import from_fs_path

    from orbit_lsp.server.app import OrbitServer

    class _Bare:  # rel_uri needs no running server
        _root_uri = OrbitServer._root_uri

    for root, rel in [("/a b/c", "x y/ü#%?.py"), ("/", "a.py"), ("/r", "d/é€😀.py"), ("/x:y", "a;b=c.py")]:
        assert OrbitServer.rel_uri(_Bare, Path(root), rel) == from_fs_path(str(Path(root) / rel))
