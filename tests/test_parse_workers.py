"""Parsing in worker processes (``parsing.parse_many``) gives what parsing in this process gives,
for every parsed language: Python, JavaScript and TypeScript files go to the same workers, and
each file's line count and non-ASCII lines come back with its facts."""

from __future__ import annotations

import pytest
from test_incremental import new_indexer, workspaces, write

from orbit_lsp.index import parsing
from orbit_lsp.index.parsing import Parsed, parse_many

FILES = {
    "pkg/__init__.py": "",
    "pkg/base.py": "class Base:\n    def run(self):\n        return 1\n",
    "pkg/sub.py": "from pkg.base import Base\n\n"
                  "class Sub(Base):\n    def run(self):\n        return super().run()\n",
    "pkg/text.py": "# café\nNAME = 'naïve'\r\nX = 1\r",  # non-ASCII lines 1 and 2; CR line ends
    "pkg/broken.py": "def f(:\n    pass\n",
    "web/app.ts": "import { helper } from './util';\nexport function main(): number {\n  return helper();\n}\n",
    "web/util.js": "export function helper() {\n  return 1;\n}\n",
    # a syntax error that the error-tolerant parser still finds a function in
    "web/broken.ts": "export function ok(): number {\n  return 1;\n}\nfunction broken( {\n",
}


@pytest.fixture
def workers_for_a_few_files(monkeypatch):
    monkeypatch.setattr(parsing, "PARALLEL_MIN_FILES", 1)


def _items() -> list[tuple[str, bytes]]:
    # many copies, so that the workers take batches too (this process takes the small end)
    return [(f"c{i}/{rel}", text.encode()) for i in range(40) for rel, text in FILES.items()]


def test_workers_parse_every_language_as_this_process_does(workers_for_a_few_files, monkeypatch):
    monkeypatch.setattr(parsing, "BATCH_BYTES", 64)  # many small batches
    items = _items()
    here = parse_many(items, workers=1, keep=False)
    spread = parse_many(items, workers=2, keep=False)
    assert set(here) == set(spread) == {rel for rel, _ in items}
    assert all(isinstance(p, Parsed) for p in spread.values())
    assert spread == here  # blobs (deterministic), errors, counts, lines

    for i in (0, 39):
        got = {rel[len(f"c{i}/"):]: p for rel, p in spread.items() if rel.startswith(f"c{i}/")}
        assert got["pkg/text.py"].lines == 3 and got["pkg/text.py"].nonascii_lines == {1, 2}
        assert got["pkg/base.py"].lines == 3 and got["pkg/base.py"].nonascii_lines == frozenset()
        assert got["pkg/sub.py"].class_bases is True and got["pkg/base.py"].class_bases is False
        assert got["pkg/broken.py"].blob is None and got["pkg/broken.py"].error.startswith("line 1:")
        assert got["web/app.ts"].error is None and got["web/app.ts"].blob is not None
        assert got["web/app.ts"].class_bases is None  # only Python facts have class bases
        # JS/TS: an error, and what the error-tolerant parse still found
        assert got["web/broken.ts"].error is not None and got["web/broken.ts"].blob is not None
        assert got["web/broken.ts"].symbols >= 1


@pytest.mark.parametrize("workers", [1, 2])
def test_progress_counts_files_and_bytes_parsed(workers_for_a_few_files, monkeypatch, workers):
    monkeypatch.setattr(parsing, "BATCH_BYTES", 256)
    items = _items()
    calls: list[tuple[int, int]] = []
    parse_many(items, workers=workers, keep=False, progress=lambda n, nbytes: calls.append((n, nbytes)))
    assert calls == sorted(calls)  # both only grow
    assert calls[-1] == (len(items), sum(len(data) for _, data in items))
    if workers == 2:
        assert len(calls) > 2  # one report per batch taken


def _twenty_copies(make, store):
    """A workspace of 20 copies of ``FILES`` (``c0/`` to ``c19/``) and its indexer, not indexed yet."""
    root = make() / "ws"
    for i in range(20):
        for rel, text in FILES.items():
            write(root, f"c{i}/{rel}", text)
    return root, new_indexer(make, root, store)


def test_an_index_keeps_what_a_broken_typescript_file_still_holds(store, workers_for_a_few_files):
    """The indexer takes TypeScript facts parsed by a worker even when the file has a syntax
    error (no last good graph to keep): its function is in the graph, its error reported."""
    with workspaces() as make:
        _, ix = _twenty_copies(make, store)
        rep = ix.index_all()
        assert rep.mode == "full" and rep.parsed == 20 * len(FILES)
        assert set(rep.parse_errors) == {f"c{i}/{rel}" for i in range(20) for rel in ("pkg/broken.py", "web/broken.ts")}
        rows = ix.graph.query("MATCH (s:Symbol) WHERE s.file = $f RETURN s.name ORDER BY s.name",
                              {"f": "c3/web/broken.ts"}).rows
        assert ["ok"] in rows
        st = ix.state["c3/pkg/text.py"]
        assert (st.lines, st.nonascii_lines) == (3, {1, 2})
        calls = ix.graph.query("MATCH (a:Symbol)-[:CALLS]->(b:Symbol) WHERE a.file = $f RETURN a.name, b.file",
                               {"f": "c3/web/app.ts"}).rows
        assert calls == [["main", "c3/web/util.js"]]


def test_a_bug_extracting_one_file_is_its_parse_error_and_the_index_goes_on(store, monkeypatch):
    """An exception from orbit's own extraction (not a syntax error) on one file becomes that
    file's parse error; the other files are indexed."""
    from orbit_lsp.index import python as pyx

    extract = pyx.extract

    def buggy(rel, data, *rest):
        if rel.endswith("sub.py"):
            raise RuntimeError("a bug")
        return extract(rel, data, *rest)

    monkeypatch.setattr(pyx, "extract", buggy)
    with workspaces() as make:
        root = make() / "ws"
        for rel, text in FILES.items():
            write(root, rel, text)
        ix = new_indexer(make, root, store)
        rep = ix.index_all()
        assert rep.mode == "full" and rep.parsed == len(FILES)
        assert rep.parse_errors["pkg/sub.py"] == "line 0: orbit could not extract this file (RuntimeError: a bug)"
        assert ix.state["pkg/base.py"].facts_blob is not None and "pkg/base.py" not in rep.parse_errors


def test_workers_parse_while_the_files_are_still_read(workers_for_a_few_files, monkeypatch):
    """``items`` may be a generator that reads as it goes (the indexer's): the workers are
    started once ``PARALLEL_MIN_FILES`` files were given, before the last one is read, and the
    result is that of a list."""
    import multiprocessing

    monkeypatch.setattr(parsing, "BATCH_BYTES", 64)
    monkeypatch.setattr(parsing, "PARALLEL_MIN_FILES", 20)
    items = _items()
    workers_seen: list[int] = []

    def reading():
        for i, item in enumerate(items):
            if i == len(items) - 1:
                workers_seen.append(len(multiprocessing.active_children()))
            yield item

    assert parse_many(reading(), workers=2, keep=False) == parse_many(items, workers=1, keep=False)
    assert workers_seen[0] >= 1


def test_an_error_reading_the_files_is_raised_as_it_is(workers_for_a_few_files, monkeypatch):
    """What the items raise while the workers run is raised, not taken for a failed worker
    (whose files this process would parse instead, dropping the files not read yet)."""
    monkeypatch.setattr(parsing, "BATCH_BYTES", 64)
    items = _items()

    def reading():
        yield from items[:100]
        raise PermissionError("the disk said no")

    with pytest.raises(PermissionError, match="the disk said no"):
        parse_many(reading(), workers=2, keep=False)


def test_a_stopped_parse_returns_early_and_a_cancelled_index_writes_nothing(store, workers_for_a_few_files):
    """``stop`` set while the files are read: ``parse_many`` returns without parsing the rest,
    and the index is "cancelled", its graph as before."""
    import threading

    from orbit_lsp.graph.queries import export

    items = _items()
    stop = threading.Event()

    def reading():
        for i, item in enumerate(items):
            if i == 40:
                stop.set()
            yield item

    assert len(parse_many(reading(), workers=2, keep=False, stop=stop)) < len(items)
    with workspaces() as make:
        root, ix = _twenty_copies(make, store)
        assert ix.index_all().mode == "full"
        before = export(ix.graph)
        write(root, "c0/pkg/extra.py", "def extra():\n    pass\n")
        cancel = threading.Event()

        def progress(done, total, rel, phase="read", work=None):
            if phase in ("read", "check") and done > 1:
                cancel.set()
        progress.phases = True

        rep = ix.index_all(progress=progress, cancel=cancel, rebuild=True)
        assert rep.mode == "cancelled"
        assert export(ix.graph) == before
