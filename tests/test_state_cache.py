"""The per-file state cache a full build leaves (``state.StateCache``): staged a batch at a time
while the build's writes are in flight, made the cache only once the new graph is swapped in.

A real embedded FalkorDB and the real SQLite cache file. The workspaces are those of
``test_integrity`` (``m<i>.py``, each defining ``f<i>``, ``g<i>`` and ``C<i>.run``).
"""

from __future__ import annotations

import os
import pickle
import sqlite3
import subprocess
import sys

import pytest

from orbit_lsp.index import full_build, state
from orbit_lsp.index.indexer import WorkspaceIndexer
from test_integrity import make_workspace, module_text


def tables(ix: WorkspaceIndexer) -> set[str]:
    with sqlite3.connect(ix.cache_path) as db:
        return {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def cached_hashes(ix: WorkspaceIndexer) -> dict[str, str]:
    with sqlite3.connect(ix.cache_path) as db:
        return {rel: pickle.loads(blob).hash for rel, blob in db.execute("SELECT rel, state FROM files")}


def test_a_full_build_leaves_every_state_and_no_stage(tmp_path, store, monkeypatch):
    monkeypatch.setattr(state, "STAGE_BATCH", 7)  # several batches for 30 files
    ws = make_workspace(tmp_path / "ws", 30)
    ix = WorkspaceIndexer(ws, store)
    try:
        assert ix.index_all().mode == "full"
        assert tables(ix) == {"meta", "files"}
        assert cached_hashes(ix) == {rel: st.hash for rel, st in ix.state.items()} and len(ix.state) == 30
        again = WorkspaceIndexer(ws, store)
        assert again.index_all().mode == "unchanged"  # the cache and the graph agree
    finally:
        ix.graph.delete()


def test_a_build_that_fails_before_its_swap_keeps_the_previous_cache(tmp_path, store, monkeypatch):
    ws = make_workspace(tmp_path / "ws", 12)
    ix = WorkspaceIndexer(ws, store)
    try:
        ix.index_all()
        before = cached_hashes(ix)
        (ws / "m3.py").write_text(module_text(3, 12, "\n\ndef h3():\n    return f3()\n"))

        def fail(self, built):
            raise RuntimeError("the swap failed")

        monkeypatch.setattr(full_build.FullBuild, "_swap_in", fail)
        with pytest.raises(RuntimeError):
            ix.index_all(rebuild=True)
        assert cached_hashes(ix) == before  # the staged states of the failed build are not the cache
        assert f"files_next_{os.getpid()}" in tables(ix)
        monkeypatch.undo()
        rep = WorkspaceIndexer(ws, store).index_all()  # the old graph and the old cache still agree
        assert rep.mode == "incremental" and rep.written_files == 1
        ix2 = WorkspaceIndexer(ws, store)
        assert ix2.index_all(rebuild=True).mode == "full"
        assert tables(ix2) == {"meta", "files"}  # this process's stage: committed, the old one gone
        assert cached_hashes(ix2)["m3.py"] != before["m3.py"]
    finally:
        ix.graph.delete()


def test_a_stage_left_by_a_gone_process_is_dropped_and_a_live_ones_kept(tmp_path, store):
    ws = make_workspace(tmp_path / "ws", 5)
    ix = WorkspaceIndexer(ws, store)
    try:
        ix.index_all()
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()
        live = os.getppid()
        with sqlite3.connect(ix.cache_path) as db:
            for pid in (gone.pid, live):
                db.execute(f'CREATE TABLE "files_next_{pid}" (rel TEXT PRIMARY KEY, state BLOB)')
                db.execute(f'INSERT INTO "files_next_{pid}" VALUES (?, ?)', ("x.py", b"junk"))
        assert ix.index_all(rebuild=True).mode == "full"
        assert tables(ix) == {"meta", "files", f"files_next_{live}"}
        assert set(cached_hashes(ix)) == {f"m{i}.py" for i in range(5)}  # never another process's stage
    finally:
        ix.graph.delete()


def test_facts_are_kept_compressed_in_three_parts_and_a_bad_blob_is_refused():
    import struct
    import zlib

    import zstandard

    from orbit_lsp.index.parsing import (FACTS_PARTS, facts_pickles, parse_python, pickle_facts, unpickle_facts,
                                         unpickle_symbols)

    src = b"import os\nclass C(Base):\n    def run(self, x):\n        return helper(os.path.join(x))\n" * 40
    facts, err = parse_python("m.py", src)
    assert err is None and sum(len(sc.calls) for sc in facts.scopes) == 80
    blob = pickle_facts(facts)
    plain = pickle.dumps(facts, protocol=pickle.HIGHEST_PROTOCOL)
    assert blob.startswith(FACTS_PARTS)
    assert len(blob) * 2 < len(plain) and blob == pickle_facts(facts)  # smaller, and deterministic
    assert unpickle_facts(blob) == facts
    assert unpickle_symbols(blob) == facts.symbols
    # without its calls: everything else is there, each scope's calls are empty (a list of its own)
    lazy = unpickle_facts(blob, calls=False)
    assert lazy.pending_calls is not None and all(sc.calls == [] for sc in lazy.scopes)
    assert len({id(sc.calls) for sc in lazy.scopes}) == len(lazy.scopes)
    assert (lazy.symbols, lazy.classes, lazy.imports, lazy.scope_of) == (facts.symbols, facts.classes, facts.imports,
                                                                          facts.scope_of)
    assert lazy.interface() == facts.interface()
    assert pickle_facts(lazy) == blob  # pickling facts whose calls are pending keeps them
    assert lazy.with_calls() is lazy and lazy == facts and lazy.pending_calls is None

    la, lb = struct.unpack_from("<II", blob, len(FACTS_PARTS))
    head = len(FACTS_PARTS) + 8
    a, b, c = blob[head:head + la], blob[head + la:head + la + lb], blob[head + la + lb:]
    # the symbols and the rest are decoded without touching the call sites' stream
    broken_calls = blob[:head + la + lb] + b"\0" + c[1:]
    assert unpickle_symbols(broken_calls) == facts.symbols
    lazy = unpickle_facts(broken_calls, calls=False)
    with pytest.raises(pickle.UnpicklingError):
        lazy.with_calls()
    with pytest.raises(pickle.UnpicklingError):
        unpickle_facts(broken_calls)

    bomb = zstandard.ZstdCompressor().compress(b"\0" * (65 << 20))  # says it holds 65 MiB: refused unread
    stream = zstandard.ZstdCompressor().compressobj()
    sizeless = stream.compress(plain) + stream.flush()  # a frame that does not say its size
    flipped = bytearray(b)
    flipped[len(b) // 2] ^= 0xFF  # its checksum fails
    bad_blobs = (plain, blob[:-4], bomb, zlib.compress(plain),  # not zstd, truncated, a bomb, zlib
                 FACTS_PARTS + b"\0\0",  # no room for its lengths
                 FACTS_PARTS + struct.pack("<II", la + len(blob), lb) + a + b + c,  # lengths past its end
                 FACTS_PARTS + struct.pack("<II", la, len(bomb)) + a + bomb + c,  # a bomb as one of its parts
                 FACTS_PARTS + struct.pack("<II", la, lb) + a + bytes(flipped) + c,
                 FACTS_PARTS + struct.pack("<II", la, lb + 2) + a + b + b"\0\0" + c,  # bytes after a frame
                 FACTS_PARTS + struct.pack("<II", la, len(sizeless)) + a + sizeless + c,
                 broken_calls)
    for bad in bad_blobs:
        with pytest.raises(pickle.UnpicklingError):
            facts_pickles(bad)


def test_the_facts_codec_is_imported_with_the_parser_not_on_first_use():
    """Resolution forks children while other threads of the process run (the graph writer decodes
    symbols meanwhile): a child forked while one of them was importing ``zstandard`` waited
    forever for that import's lock (a full build hung in CI). The codec is imported with
    ``parsing``, before any thread or fork."""
    code = "import sys, orbit_lsp.index.parsing; print('zstandard' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"
