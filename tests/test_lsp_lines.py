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


def test_line_texts_equal_the_regular_expression_split():
    from orbit_lsp.server.lines import LINE_BREAK, line_texts

    for text in ("", "a", "a\n", "a\nb", "a\r\nb\rc\n", "\x0c\n\n", "x\r", "é\n😋\r\n"):
        assert line_texts(text) == LINE_BREAK.split(text)


def test_ascii_lines_need_no_text(tmp_path, store):
    """Positions on the lines of a file's indexed content that are ASCII convert without
    reading it, as the text would; a position on a non-ASCII line reads it; a file open in
    the editor is converted against its text."""
    from pygls.workspace import PositionCodec

    from orbit_lsp.index.indexer import WorkspaceIndexer, nonascii_lines
    from orbit_lsp.server.lines import ASCII_LINES, AsciiLines, LineCache, Lines

    assert nonascii_lines(b"a\nb") == frozenset() and nonascii_lines("a\r\né\rx\n😋".encode()) == {2, 4}
    root = tmp_path / "ws"
    root.mkdir()
    text = "def f(a, b):\n    return g(a) + h(b)\n\n\ndef g(x):\n    return x\n"
    mixed = 'def h(x):\n    s = "😋"; return g(x)\n\n\ndef g(x):\n    return x  # é\n'
    (root / "plain.py").write_text(text)
    (root / "mixed.py").write_text(mixed)
    ix = WorkspaceIndexer(root, store)
    ix.index_all()
    try:
        assert ix.nonascii_lines("plain.py") == frozenset() and ix.nonascii_lines("mixed.py") == {2, 6}
        assert ix.nonascii_lines("nope.py") is None
        # a broken edit keeps the last good graph, and with it what its columns mean
        (root / "plain.py").write_text("def f(:\n    return 'é'\n")
        ix.reindex_file(root / "plain.py")
        assert ix.nonascii_lines("plain.py") == frozenset()
        (root / "plain.py").write_text(text)
        ix.reindex_file(root / "plain.py")
        for enc in (types.PositionEncodingKind.Utf16, types.PositionEncodingKind.Utf8):
            codec = PositionCodec(enc)
            for name, body in (("plain.py", text), ("mixed.py", mixed)):
                read = Lines.of(body, codec)
                reads = []
                cache = LineCache(codec, lambda p: None)
                fast = cache.of(root / name, nonascii=ix.nonascii_lines(name))
                if isinstance(fast, AsciiLines) and fast.load is not None:
                    load = fast.load
                    fast.load = lambda: reads.append(1) or load()
                for line1, t in enumerate(body.split("\n"), 1):
                    for col in range(len(t.encode()) + 1):
                        assert fast.character(line1, col) == read.character(line1, col), (name, line1, col)
                assert len(reads) == (1 if name == "mixed.py" else 0)  # read once, for lines 2 and 6
            cache = LineCache(codec, lambda p: None)
            assert cache.of(root / "plain.py", nonascii=frozenset()) is ASCII_LINES
            assert isinstance(cache.of(root / "plain.py"), Lines)  # asked without the hint: read
            assert cache.position(root / "plain.py", 2, 11) == types.Position(1, 11)
            opened = LineCache(codec, lambda p: "x = 1\n")  # open in the editor: its text, read
            assert isinstance(opened.of(root / "plain.py", nonascii=frozenset()), Lines)
    finally:
        ix.graph.delete()
