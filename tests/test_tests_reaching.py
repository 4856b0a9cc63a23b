"""The tests a symbol's "N tests reach this" lens counts (``changes.reach.tests_reaching``): the
same answer in every process, and the standard-library names a class inherits found again when
a file they were read from changes (``impact._library_names_kept``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from collections import UserDict
from json import JSONEncoder

from orbit_lsp.changes import impact

FILES = {
    "pkg/__init__.py": "",
    "pkg/lib.py": """
        def target():
            return 1
    """,
    # module-level code of a conftest runs before every test under it
    "tests/conftest.py": """
        from pkg.lib import target

        VALUE = target()
    """,
    "tests/test_a.py": """
        from pkg.lib import target

        def test_x():
            assert target() == 1
    """,
}

ANSWER = """
import json, sys
from pathlib import Path
from orbit_lsp.changes import reach
from orbit_lsp.config import Settings
from orbit_lsp.graph.connection import GraphStore
from orbit_lsp.index.indexer import WorkspaceIndexer

settings = Settings(data_dir=Path(sys.argv[1]), falkordb_url=None)
store = GraphStore(settings)
store.connect()
ix = WorkspaceIndexer(Path(sys.argv[2]), store, settings)
ix.index_all()
print(json.dumps(reach.tests_for(ix, "pkg/lib.py", ["pkg.lib.target"])["pkg.lib.target"]))
"""


def test_a_test_reached_two_ways_at_one_depth_has_the_same_reason_in_every_process(index_files, store):
    """``test_x`` calls ``target`` and so does the module-level code of the conftest above it:
    both reach it in one hop. Which reason the answer gives must not depend on the order of a
    set of strings, which changes with each process's hash seed: the walk takes a symbol's
    callers in the order of their keys, so the conftest's module (``tests/conftest.py`` sorts
    before ``tests/test_a.py``) names it."""
    ix = index_files(FILES)
    answers = set()
    for seed in ("1", "2", "3", "4"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", ANSWER, str(store.settings.data_dir), str(ix.root)],
                             capture_output=True, text=True, env=env, timeout=120, check=True).stdout
        answers.add(out.strip().splitlines()[-1])
    assert len(answers) == 1
    (tests,) = [json.loads(a) for a in answers]
    assert [(t["id"], t["depth"], t["reason"]) for t in tests] == [
        ("tests/test_a.py::test_x", 1, "calls pkg.lib.target (1 hop); module-level code of tests/conftest.py")]


def test_library_names_kept_are_read_again_when_a_file_they_came_from_changes():
    """``Enc`` derives from ``JSONEncoder``, which a workspace module re-exports: the names its
    library base defines are ``json.JSONEncoder``'s. When the re-exporting module changes to
    export ``collections.UserDict`` under that name, the kept answer is not given again: the
    names are ``UserDict``'s."""
    files = {
        "pkg/enc.py": textwrap.dedent("""
            from pkg.compat import JSONEncoder

            class Enc(JSONEncoder):
                def default(self, o):
                    return str(o)
        """).encode(),
        "pkg/compat.py": b"from json import JSONEncoder\n",
    }

    def read(path: str) -> bytes | None:
        return files.get(path)

    def own_names(cls) -> set[str]:  # what a library class defines beyond ``object``
        return {n for n in dir(cls) if not (n.startswith("__") and n.endswith("__"))} - set(dir(object))

    impact._LIBRARY_NAMES.clear()
    first = impact._library_names_kept(read, "pkg/enc.py", "pkg.enc.Enc", frozenset(), "")
    assert first == own_names(JSONEncoder) and "default" in first
    assert impact._library_names_kept(read, "pkg/enc.py", "pkg.enc.Enc", frozenset(), "") == first
    files["pkg/compat.py"] = b"from collections import UserDict as JSONEncoder\n"
    second = impact._library_names_kept(read, "pkg/enc.py", "pkg.enc.Enc", frozenset(), "")
    assert second == own_names(UserDict) and "setdefault" in second and "default" not in second


def test_the_tests_lens_bench_counts_a_files_functions(index_files, store, capsys):
    """``bench/tests_lens.py`` on the workspace above (re-opened from the graph ``index_files``
    built, deleted after): one function, reached by one test, counted twice and listed; run again,
    it starts from the test scans the first run kept in the data dir and lists the same."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench` is not an installed package
    from bench import tests_lens

    ix = index_files(FILES)
    capsys.readouterr()
    rows, kept = [], []
    for fresh in (["--fresh-scans"], []):  # the second run starts from the scans the first kept
        tests_lens.main([str(ix.root), "pkg/lib.py", "--data-dir", str(store.settings.data_dir), *fresh])
        out = capsys.readouterr().out
        kept.append(int(next(line for line in out.splitlines() if line.startswith("test scans kept"))
                        .split(": ")[1].split()[0].replace(",", "")))
        row = next(line for line in out.splitlines() if line.startswith("| pkg/lib.py |"))
        rows.append([c.strip() for c in row.strip("|").split("|")])
    for cells in rows:
        assert cells[1] == "1" and cells[5] == "1"  # one function; test_x reaches it
        assert all(float(c) >= 0 for c in cells[2:5])
    assert kept[0] == 0 and kept[1] > 0
    assert rows[0][6] == rows[1][6]  # the same lists, scanned or kept


CONFTEST_FILES = {
    "pkg/__init__.py": "",
    "pkg/lib.py": """
        def target():
            return 1

        def helper():
            return target()
    """,
    "tests/conftest.py": """
        import pytest

        from pkg.lib import helper, target

        VALUE = helper()

        @pytest.fixture
        def f():
            return target()
    """,
    "tests/test_a.py": """
        def test_x(f):
            assert f == 1
    """,
    "tests/test_b.py": """
        def test_y():
            assert True
    """,
}


def test_a_lens_counts_what_the_list_holds_through_a_conftests_fixture_and_its_module_code(index_files):
    """``target`` runs in the conftest's fixture ``f`` (one hop) and in its module-level code
    through ``helper`` (two hops): pytest imports a conftest before the tests under it, so both
    ``test_x`` (which requests ``f``) and ``test_y`` (which requests nothing) run it. The lens's
    number (counted without making the list) is the list's length, for each function."""
    from orbit_lsp.changes import reach

    ix = index_files(CONFTEST_FILES)
    quals = ["pkg.lib.target", "pkg.lib.helper"]
    reach.forget_answers()
    counts = reach.test_counts(ix, "pkg/lib.py", quals)
    reach.forget_answers()
    lists = reach.tests_for(ix, "pkg/lib.py", quals)
    assert {q: [(t["id"], t["depth"]) for t in tests] for q, tests in lists.items()} == {
        "pkg.lib.target": [("tests/test_a.py::test_x", 1), ("tests/test_b.py::test_y", 2)],
        "pkg.lib.helper": [("tests/test_a.py::test_x", 1), ("tests/test_b.py::test_y", 1)]}
    assert counts == {q: len(tests) for q, tests in lists.items()} == {"pkg.lib.target": 2, "pkg.lib.helper": 2}
