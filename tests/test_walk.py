"""Tests for orbit_lsp.index.walk (no FalkorDB needed)."""

from __future__ import annotations

import codecs
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import shared_case
from orbit_lsp.index.walk import (
    LANGS, SourceFile, WalkResult, WorkspaceFilter, classify_file, is_dotenv, read_text,
    walk_workspace,
)

def build_case(name: str, dest: Path) -> Path:
    script = shared_case(name) / "make_workspace.sh"
    subprocess.run(["sh", str(script), str(dest)], check=True, capture_output=True)
    return dest


def write(root: Path, rel: str, text: str | bytes = "x = 1\n") -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


def rels(result: WalkResult) -> list[str]:
    return [f.rel for f in result.files]


def all_paths(root: Path) -> list[str]:
    """Every entry of the tree (not following symlinks) as a rel path."""
    out = []
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            out.append(os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/"))
    return sorted(out)


# --- audit hook: records every path opened while armed -----------------------------------
_OPENED: list[str] | None = None
_HOOKED = False


def _audit(event, args):
    if _OPENED is not None and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append(os.fsdecode(args[0]))


@pytest.fixture
def opened():
    global _OPENED, _HOOKED
    if not _HOOKED:
        sys.addaudithook(_audit)
        _HOOKED = True
    _OPENED = []
    try:
        yield _OPENED
    finally:
        _OPENED = None


# --- basics ----------------------------------------------------------------------------------
def test_langs_and_dotenv():
    assert LANGS == {
        ".py": "python", ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript",
        ".cjs": "javascript", ".ts": "typescript", ".tsx": "typescript", ".mts": "typescript",
        ".cts": "typescript",
    }
    for p in [".env", ".env.local", "a/b/.env.production", Path("x/.env.example")]:
        assert is_dotenv(p)
    for p in ["env", ".envrc", "a.env", "dotenv.py", ".env/x.py"]:
        assert not is_dotenv(p)


def test_read_text_decodings():
    assert read_text(codecs.BOM_UTF8 + "é = 1\n".encode()) == "é = 1\n"
    assert read_text(codecs.BOM_UTF16_LE + "x = 'ü'\n".encode("utf-16-le")) == "x = 'ü'\n"
    assert read_text("naïve\n".encode("latin-1")) == "na\ufffdve\n"  # no crash
    cookie = "# -*- coding: latin-1 -*-\ns = 'café'\n".encode("latin-1")
    assert read_text(cookie).endswith("s = 'café'\n")
    assert read_text(b"# coding: no-such-codec\n\xff\n") == "# coding: no-such-codec\n\ufffd\n"
    assert read_text(b"") == ""


def test_classify_file():
    p = Path("x.js")
    assert classify_file(p, b"export const a = 1;\n", 100) is None
    assert classify_file(p, b"a" * 101, 100) == "larger than 100 bytes"
    assert classify_file(p, b"const a = 1;\x00", 100) == "binary"
    assert classify_file(Path("x.py"), b"\x89PNG\r\n\x1a\nabc", 100) == "binary"
    assert classify_file(p, bytes(range(1, 32)) * 10, 10_000) == "binary"
    assert classify_file(p, b"function a(){}" * 200, 10_000) == "minified"  # one 2800-char line
    assert classify_file(Path("lib.min.js"), b"var a=1;\n", 100) == "minified"
    header = b"/* license */\n" * 30
    assert classify_file(p, header + b"function a(){return 1};" * 900, 100_000) == "minified"
    # a long string or data literal is not minified code (zod's string.test.ts: one 32,333-char
    # line of emoji in a 64 KB test file)
    emoji = "😀😁😂🤣😃".encode() * 1600
    assert classify_file(Path("s.test.ts"), b'const e = [\n    "' + emoji + b'",\n];\n' + b"test(() => {});\n" * 50,
                         100_000) is None
    assert classify_file(p, header + b"x" * 20_000, 100_000) is None
    # one long data line in an otherwise normal file is fine
    normal = b"def f():\n    return 1\n" * 300 + b"S = '" + b"y" * 6000 + b"'\n"
    assert classify_file(Path("d.py"), normal, 100_000) is None
    # latin-1 text is not binary
    assert classify_file(Path("l.py"), "s = 'café'\n".encode("latin-1"), 100) is None


# --- shared cases ----------------------------------------------------------------------------
def test_case_019_symlink_loops(tmp_path):
    ws = build_case("019-symlink-loops", tmp_path / "ws")
    res = walk_workspace(ws)
    assert res.root == ws.resolve()
    assert rels(res) == sorted([
        "main.py", "foo/__init__.py", "foo/it.py", "bar/__init__.py", "bar/other.py",
        "real_vendor/__init__.py", "real_vendor/helper.py"])
    assert res.aliases["vendor_link"] == "real_vendor"
    assert res.aliases.get("foo/bar") == "bar" and res.aliases.get("bar/foo") == "foo"
    assert res.skipped == []
    for f in res.files:
        assert f.abs == res.root / f.rel and f.abs.is_file() and f.lang == "python"
        assert f.size == f.abs.stat().st_size
    flt = WorkspaceFilter(ws)
    for f in res.files:
        assert flt.accepts(f.abs)
        assert flt.accepts(Path(f.rel))
    for alias in ["vendor_link/helper.py", "foo/bar/other.py", "bar/foo/it.py", "lib/up/main.py",
                  "self/main.py", "self/foo/it.py", "outside/etc/x.py", "dangling"]:
        assert not flt.accepts(ws / alias), alias
    assert flt.accepts(ws / "bar" / "new.py")  # a file created later


def test_case_021_huge_minified_binary(tmp_path, caplog, opened):
    ws = build_case("021-huge-generated-minified-binary", tmp_path / "ws")
    caplog.set_level(logging.INFO, logger="orbit_lsp.index")
    res = walk_workspace(ws)
    assert rels(res) == ["app.py", "gen/__init__.py", "gen/big_table.py", "page.js"]
    assert dict(res.skipped) == {"assets/blob.js": "binary", "assets/logo.py": "binary",
                                 "dist/app.min.js": "minified"}
    assert {f.rel: f.lang for f in res.files}["page.js"] == "javascript"
    assert "dist/app.min.js" in caplog.text and "minified" in caplog.text

    opened.clear()
    small = walk_workspace(ws, max_file_bytes=1_000_000)
    assert "gen/big_table.py" not in rels(small)
    assert ("gen/big_table.py", "larger than 1000000 bytes") in small.skipped
    assert "app.py" in rels(small) and "page.js" in rels(small)
    # the size check comes from stat: the big file is never opened
    assert not [p for p in opened if p.endswith("big_table.py")]


def test_case_024_dotenv_never_opened(tmp_path, opened):
    ws = build_case("024-dotenv-never-read", tmp_path / "ws")
    # links with *source* extensions to dotenv files: only the realpath check stops them
    os.symlink(".env", ws / "secrets.py")
    os.symlink("../../.env.production", ws / "services" / "billing" / "creds.py")
    os.symlink(".env.local", ws / "local.js")
    opened.clear()
    res = walk_workspace(ws)
    flt = WorkspaceFilter(ws)
    verdicts = {p: flt.accepts(ws / p) for p in all_paths(ws)}
    assert opened, "audit hook did not record anything"
    for p in opened:
        assert not is_dotenv(p) and not is_dotenv(os.path.realpath(p)), p
    assert rels(res) == ["app.js", "config.py", "services/billing/client.py"]
    assert res.skipped == []
    for bad in ["notes.txt", "services/billing/settings.cfg", "secrets.py", "local.js",
                "services/billing/creds.py", ".env", ".env.local", "services/billing/.env"]:
        assert bad not in rels(res)
        assert verdicts[bad] is False, bad
    assert {p for p, ok in verdicts.items() if ok} == set(rels(res))


# --- rules -----------------------------------------------------------------------------------
def test_gitignore_root_and_nested(tmp_path):
    write(tmp_path, ".gitignore", "out/\n*.gen.py\n!keep.gen.py\n/toponly.py\n")
    write(tmp_path, "pkg/.gitignore", "local_*.py\n!special.gen.py\n")
    for rel in ["a.py", "out/x.py", "sub/out/y.py", "x.gen.py", "keep.gen.py", "toponly.py",
                "sub/toponly.py", "pkg/local_a.py", "local_b.py", "pkg/special.gen.py",
                "pkg/other.gen.py", "pkg/deep/local_c.py", "pkg/mod.ts"]:
        write(tmp_path, rel)
    res = walk_workspace(tmp_path)
    assert rels(res) == ["a.py", "keep.gen.py", "local_b.py", "pkg/mod.ts",
                         "pkg/special.gen.py", "sub/toponly.py"]
    assert all(WorkspaceFilter(tmp_path).accepts(tmp_path / r) == (r in rels(res))
               for r in all_paths(tmp_path))


def test_builtin_excludes(tmp_path):
    for rel in [".git/hooks/x.py", ".hg/x.py", ".svn/x.py", "node_modules/lib/index.js",
                "web/node_modules/a.js", "__pycache__/m.py", ".venv/lib/m.py", ".tox/m.py",
                ".nox/m.py", ".mypy_cache/m.py", ".pytest_cache/m.py",
                "lib/python3/site-packages/m.py", "venv/lib/m.py", "myenv/lib/m.py",
                "env/m.py", "dist/app.js", "build/gen.py", "src/app.tsx", ".env/bin/m.py"]:
        write(tmp_path, rel)
    write(tmp_path, "venv/pyvenv.cfg", "home = /usr\n")
    write(tmp_path, "myenv/pyvenv.cfg", "home = /usr\n")
    res = walk_workspace(tmp_path)
    # env/ without pyvenv.cfg is ordinary code; dist/ and build/ are walked, but dist/app.js is
    # the build output of src/app.tsx (skipped with that reason, see test_ts_syntax.py)
    assert rels(res) == ["build/gen.py", "env/m.py", "src/app.tsx"]
    assert ("dist/app.js", "build output of src/app.tsx") in res.skipped
    flt = WorkspaceFilter(tmp_path)
    assert {r for r in all_paths(tmp_path) if flt.accepts(tmp_path / r)} == set(rels(res))


def test_extra_exclude_patterns(tmp_path):
    for rel in ["a.py", "generated/x.py", "proto/m_pb2.py", "proto/keep_pb2.py", "web/x.test.ts"]:
        write(tmp_path, rel)
    exclude = ["generated/", "*_pb2.py", "!keep_pb2.py", "*.test.ts"]
    res = walk_workspace(tmp_path, exclude=exclude)
    assert rels(res) == ["a.py", "proto/keep_pb2.py"]
    flt = WorkspaceFilter(tmp_path, exclude=exclude)
    assert {r for r in all_paths(tmp_path) if flt.accepts(tmp_path / r)} == set(rels(res))


def test_symlinked_files_and_dirs(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "real.py")
    write(ws, "data.txt", "x = 2\n")
    write(ws, ".gitignore", "hidden_src/\n")
    write(ws, "hidden_src/mod.py")
    write(tmp_path, "outside_dir/o.py")
    write(tmp_path, "outside.py")
    os.symlink("real.py", ws / "a_alias.py")          # same file: listed once, as real.py
    os.symlink("data.txt", ws / "via_link.py")        # target not a source file: listed as link
    os.symlink("../outside.py", ws / "out.py")         # leaves the root: ignored
    os.symlink("../outside_dir", ws / "out_dir")       # leaves the root: ignored
    os.symlink("hidden_src", ws / "src_link")          # target not walked: walked via the link
    os.symlink("nowhere.py", ws / "dangling.py")
    os.symlink("loop_b.py", ws / "loop_a.py")
    os.symlink("loop_a.py", ws / "loop_b.py")
    res = walk_workspace(ws)
    assert rels(res) == ["real.py", "src_link/mod.py", "via_link.py"]
    assert res.files[1].abs == ws.resolve() / "src_link" / "mod.py"
    flt = WorkspaceFilter(ws)
    assert {r for r in all_paths(ws) + ["src_link/mod.py"] if flt.accepts(ws / r)} == set(rels(res))
    assert not flt.accepts(ws / "a_alias.py") and not flt.accepts(ws / "hidden_src/mod.py")


def test_walk_is_deterministic_and_reports_unreadable_root(tmp_path):
    for rel in ["b/z.py", "b/a.js", "a/m.ts", "c.mjs", "README.md", "x.pyi"]:
        write(tmp_path, rel)
    first, second = walk_workspace(tmp_path), walk_workspace(tmp_path)
    assert rels(first) == rels(second) == ["a/m.ts", "b/a.js", "b/z.py", "c.mjs"]
    assert isinstance(first.files[0], SourceFile) and first.files[0].lang == "typescript"
    with pytest.raises(NotADirectoryError):
        walk_workspace(tmp_path / "c.mjs")


def test_filter_follows_gitignore_changes_and_paths(tmp_path):
    write(tmp_path, "pkg/mod.py")
    flt = WorkspaceFilter(tmp_path)
    assert flt.accepts(tmp_path / "pkg/mod.py") and flt.accepts(Path("pkg/mod.py"))
    assert flt.accepts(tmp_path / "pkg/deleted_later.py")  # deletions must still be seen
    write(tmp_path, ".gitignore", "pkg/\n")
    assert not flt.accepts(tmp_path / "pkg/mod.py")
    write(tmp_path, ".gitignore", "# nothing ignored any more\n")
    assert flt.accepts(tmp_path / "pkg/mod.py")
    assert not flt.accepts(tmp_path / "pkg")           # a directory
    assert not flt.accepts(tmp_path / "pkg/notes.md")  # not a source extension
    assert not flt.accepts(tmp_path.parent / "elsewhere.py")
    assert not flt.accepts(tmp_path / ".env")
    assert not flt.accepts(tmp_path / ".env.local")
