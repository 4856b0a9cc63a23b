"""Test-file scans kept between processes (``changes.scan_store``): a new process takes them from
the store instead of scanning again, and gets exactly what scanning gives; a changed file,
another version of the scanning code, a damaged or foreign store and an unusable folder each
give what scanning gives."""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orbit_lsp.changes import scan_store, selection
from orbit_lsp.changes.scan_store import ScanStore
from orbit_lsp.changes.selection import MARKS, SCANS, TestIndex, scan_python
from orbit_lsp.index.fingerprint import content_digest

FILES = {
    "pkg/engine.py": """
        class Engine:
            def run(self):
                return 1
    """,
    "tests/conftest.py": """
        import pytest
        from pkg.engine import Engine

        @pytest.fixture
        def engine():
            return Engine()
    """,
    "tests/test_engine.py": """
        def test_runs(engine):
            assert engine.run() == 1

        class TestMore:
            def test_again(self, engine):
                engine.run()
    """,
    "tests/test_plain.py": """
        def test_nothing():
            assert True
    """,
}


def _workspace(root: Path) -> Path:
    for rel, text in FILES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return root


def _reader(root: Path):
    def read(rel: str) -> bytes | None:
        try:
            return (root / rel).read_bytes()
        except OSError:
            return None
    return read


def _answers(index: TestIndex) -> dict:
    """What the index found: every test file's scan and marks, and the typed sites."""
    files = index.py_tests + index.conftests
    return {"scans": {f: repr(index.scan(f)) for f in files},
            "marks": {f: repr(index.marks(f)) for f in files},
            "sites": sorted(repr(k) for k in index._typed_sites())}


def _new_process_caches() -> None:
    """Forget this process's scans, as a new process starts without them."""
    SCANS.clear()
    MARKS.clear()


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    return _workspace(tmp_path / "ws")


def _index(ws: Path, store: ScanStore | None) -> TestIndex:
    return TestIndex(sorted(FILES), _reader(ws), store)


def test_a_new_process_takes_every_scan_from_the_store_and_finds_the_same(ws, tmp_path):
    _new_process_caches()
    first = ScanStore(tmp_path / "data" / "cache" / scan_store.STORE_FILE)
    want = _answers(_index(ws, None))  # what scanning gives, without a store
    _new_process_caches()
    index = _index(ws, first)
    assert _answers(index) == want
    index.flush()
    assert first.misses == first.written == 6  # marks of 3 files, scans of 3 files
    first.close()

    script = textwrap.dedent("""
        import json, sys
        from pathlib import Path
        sys.path.insert(0, sys.argv[3])
        from test_scan_store import _answers, _index
        from orbit_lsp.changes import scan_store, selection
        calls = []
        real = selection.scan_python
        selection.scan_python = lambda *a: calls.append(a[0]) or real(*a)
        store = scan_store.store_for(Path(sys.argv[1]))
        got = _answers(_index(Path(sys.argv[2]), store))
        print(json.dumps({"answers": got, "hits": store.hits, "misses": store.misses, "parsed": calls}))
    """)
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "data"), str(ws), str(Path(__file__).parent)],
                         capture_output=True, text=True, check=True, cwd=str(Path(__file__).parent.parent))
    second = json.loads(out.stdout)
    assert second["answers"] == want
    assert (second["hits"], second["misses"], second["parsed"]) == (6, 0, [])


def test_a_changed_test_file_is_scanned_again_and_its_new_tests_found(ws, tmp_path):
    store = ScanStore(tmp_path / "data" / "cache" / scan_store.STORE_FILE)
    _new_process_caches()
    before = _index(ws, store).scan("tests/test_plain.py")
    assert [i.id for i in before.items] == ["tests/test_plain.py::test_nothing"]
    store.flush()
    (ws / "tests/test_plain.py").write_text("def test_nothing():\n    pass\n\ndef test_new():\n    pass\n")
    _new_process_caches()
    after = _index(ws, ScanStore(store.path)).scan("tests/test_plain.py")
    assert [i.id for i in after.items] == ["tests/test_plain.py::test_nothing", "tests/test_plain.py::test_new"]
    assert after == scan_python("tests/test_plain.py", (ws / "tests/test_plain.py").read_bytes())


def test_rows_of_another_version_of_the_scanning_code_are_deleted_when_the_store_opens(ws, tmp_path):
    path = tmp_path / "data" / "cache" / scan_store.STORE_FILE
    store = ScanStore(path)
    _new_process_caches()
    _index(ws, store).scan("tests/test_engine.py")
    store.close()
    data = (ws / "tests/test_engine.py").read_bytes()
    wrong = pickle.dumps(selection.PyTestFile("tests/test_engine.py"))  # no tests: not what scanning gives
    with sqlite3.connect(path) as db:  # as an older orbit would have kept it
        assert db.execute("UPDATE scans SET version = 'an older version', value = ? WHERE kind = 'scan'",
                          (wrong,)).rowcount == 1
    reopened = ScanStore(path)
    _new_process_caches()
    got = _index(ws, reopened).scan("tests/test_engine.py")
    assert got == scan_python("tests/test_engine.py", data) and len(got.items) == 2
    assert reopened.hits == 0
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM scans WHERE version != ?", (reopened.version,)).fetchone() == (0,)


def test_a_row_that_would_build_anything_but_a_scan_is_refused_and_the_file_scanned(ws, tmp_path):
    path = tmp_path / "data" / "cache" / scan_store.STORE_FILE
    store = ScanStore(path)
    assert store.get("scan", "tests/none.py", bytes(16)) is None  # (opens it: the table is made)
    data = (ws / "tests/test_engine.py").read_bytes()

    class Planted:
        def __reduce__(self):
            return (os.makedirs, (str(tmp_path / "planted"),))

    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO scans VALUES ('scan', 'tests/test_engine.py', ?, ?, ?)",
                   (content_digest(data), store.version, pickle.dumps(Planted())))
    _new_process_caches()
    got = _index(ws, store).scan("tests/test_engine.py")
    assert got == scan_python("tests/test_engine.py", data)
    assert not (tmp_path / "planted").exists()
    assert (store.hits, store.misses) == (0, 2)


def test_a_row_of_the_scan_classes_with_wrong_fields_is_refused_and_the_file_scanned(ws, tmp_path):
    """Rows that build only allowed classes, but not as scanning makes them (another program
    wrote the file): marks of the wrong field types, a scan whose tests are not a list, a scan
    of another file kept as a file's marks. Each is refused: the files are scanned again."""
    path = tmp_path / "data" / "cache" / scan_store.STORE_FILE
    store = ScanStore(path)
    assert store.get("scan", "tests/none.py", bytes(16)) is None  # (opens it: the table is made)
    test_file, conftest = "tests/test_engine.py", "tests/conftest.py"
    bad_marks = selection.FileMarks.__new__(selection.FileMarks)
    object.__setattr__(bad_marks, "__dict__", {"methods": 5, "receivers": [], "fixtures": "x"})
    no_items = scan_python(test_file, (ws / test_file).read_bytes())
    no_items.items = None
    elsewhere = scan_python("tests/other.py", (ws / test_file).read_bytes())
    with sqlite3.connect(path) as db:
        for kind, rel, value in (("marks", test_file, bad_marks), ("scan", test_file, no_items),
                                 ("marks", conftest, elsewhere), ("scan", conftest, elsewhere)):
            db.execute("INSERT INTO scans VALUES (?, ?, ?, ?, ?)",
                       (kind, rel, content_digest((ws / rel).read_bytes()), store.version, pickle.dumps(value)))
    _new_process_caches()
    assert _answers(_index(ws, store)) == _answers(_index(ws, None))
    assert store.hits == 0


def test_a_store_that_is_not_a_database_is_made_anew(ws, tmp_path):
    path = tmp_path / "data" / "cache" / scan_store.STORE_FILE
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not SQLite" * 500)
    store = ScanStore(path)
    _new_process_caches()
    index = _index(ws, store)
    assert _answers(index) == _answers(_index(ws, None))
    index.flush()
    assert store.written == 6
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM scans").fetchone() == (6,)


def test_a_store_that_cannot_be_made_leaves_the_answers_as_without_it(ws, tmp_path):
    blocked = tmp_path / "data"
    blocked.write_text("a file where the data folder should be")
    store = scan_store.store_for(blocked)
    _new_process_caches()
    index = _index(ws, store)
    assert _answers(index) == _answers(_index(ws, None))
    index.flush()
    assert store.written == 0 and store.hits == 0


def test_past_its_bound_the_store_keeps_the_rows_written_last(ws, tmp_path, monkeypatch):
    monkeypatch.setattr(scan_store, "MAX_ROWS", 4)
    monkeypatch.setattr(scan_store, "PRUNE_TO", 3)
    store = ScanStore(tmp_path / "data" / "cache" / scan_store.STORE_FILE)
    for i in range(6):
        store.put("marks", f"tests/test_{i}.py", bytes(16), selection.NO_MARKS)
        store.flush()
    with sqlite3.connect(store.path) as db:
        kept = [p for (p,) in db.execute("SELECT path FROM scans ORDER BY rowid")]
    # at the fifth row the two written first went (down to 3); the sixth makes 4 again
    assert kept == ["tests/test_2.py", "tests/test_3.py", "tests/test_4.py", "tests/test_5.py"]


def test_processes_writing_the_store_at_once_each_keep_their_rows(tmp_path):
    """Two processes fill one store at the same moment (two servers of two workspaces): SQLite's
    write lock makes them take turns; every row of both is kept and reads back whole."""
    script = textwrap.dedent("""
        import sys
        from pathlib import Path
        from orbit_lsp.changes import scan_store, selection
        store = scan_store.store_for(Path(sys.argv[1]))
        sys.stdin.readline()  # both start writing together
        for i in range(2000):
            store.put("marks", f"{sys.argv[2]}/test_{i}.py", i.to_bytes(16, "big"),
                      selection.FileMarks(frozenset({f"m{i}"}), frozenset(), False))
        store.close()
        print(store.written, store.path.exists())
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "data"), name], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=str(Path(__file__).parent.parent))
             for name in ("one", "two")]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert outs == [["2000", "True"], ["2000", "True"]]
    store = ScanStore(tmp_path / "data" / "cache" / scan_store.STORE_FILE)
    for name in ("one", "two"):
        for i in (0, 999, 1999):
            assert store.get("marks", f"{name}/test_{i}.py", i.to_bytes(16, "big")) == \
                selection.FileMarks(frozenset({f"m{i}"}), frozenset(), False)
    with sqlite3.connect(store.path) as db:
        assert db.execute("SELECT count(*) FROM scans").fetchone() == (4000,)


def test_closing_a_store_never_opened_makes_no_folder(tmp_path):
    """A process's exit closes every store it made (``store_for``): one that was never opened
    (its rows all pending) does not make its data dir again after the folder was removed."""
    data = tmp_path / "data"
    store = ScanStore(data / "cache" / scan_store.STORE_FILE)
    store.put("marks", "tests/test_a.py", bytes(16), selection.NO_MARKS)
    store.close()
    assert not data.exists() and store.written == 0
