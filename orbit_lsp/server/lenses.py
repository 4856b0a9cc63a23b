"""Code lenses (``textDocument/codeLens`` + ``codeLens/resolve``) and the ``orbit.showImpact``
command they run.

- Line 0 of every indexed file: "N dependents, H hops" (files importing it, transitively up to
  ``settings.max_hops``; H is the largest minimal hop count), "0 dependents" when none.
- On the name of each function, method and class: "N callers" (distinct direct callers, the
  symbol itself excluded; "· recursive" when it calls itself), and, when call sites that could
  not be bound use the same name, a note that they may add more: a lower bound is said to be one.

``codeLens`` answers where the lenses go, in two graph queries whatever the number of symbols
(``index.buffers.lens_work``): lenses without a command whose ``data`` is ``{"uri", "target":
{"type": "file"} | {"type": "symbol", "qual", "name"}}``. ``codeLens/resolve`` reads the counts
of that lens from the graph as it is then (``index.buffers.lens_counts``: the dependents walked
over the in-memory IMPORTS edges; symbols' counts in two queries for all the lenses of a file
resolved together, as an editor resolves those on screen), so an editor pays only for the
lenses it shows, and turns them into the title and the command ``orbit.showImpact`` with
arguments ``[uri]`` (file lens) or ``[uri, {"line", "character"}]`` (the start of the lens's
range: the symbol's name). The command answers what ``orbit/impact`` answers for that target
and shows a one-line summary with ``window/showMessage``.

Buffer consistency: graph line numbers are only put on text whose content hash equals the
indexed one (``File.hash``). When the open document differs (unsaved edits, or a file rewritten
on disk and not yet reloaded), its symbols are re-extracted in memory (no graph writes) and the
lenses sit on the buffer's lines, for the symbols the graph also has (counts from the graph); a
buffer that does not parse gets only the file lens. Reads hold the indexer's lock (bounded wait)
so that a lens never mixes two versions of a file that is being re-indexed.

Tests lens (issue 16): on each function and method (test functions of test modules excepted) of
a workspace that has tests, "N tests reach this" ("no test reaches this"): the tests ``orbit-lsp
changes`` would select if that symbol alone changed (``changes.reach``; computed in resolve, for
the lenses of a file resolved together, cached per graph generation). The selections are
computed by the server's selection process (``server.worker``, a child process of lower
priority, asked from the slow pool's one thread), never in the query pool that answers hovers
and counts: in a workspace with thousands of test files the selection of a much-used function
reads many of them. A lens whose selection is not known within the ``tests_lens_wait_ms``
setting says "tests: counting…", and the client is asked to refresh its lenses
(``workspace/codeLens/refresh``) once it is; when each of the last ``SLOW_SELECTIONS``
selections of the folder took longer than that wait (or a lens stopped waiting for it), the
lens says it at once (VS Code shows a line's lenses only once all of them are resolved:
waiting for a count that will not come in time holds up the callers lens beside it). A failed
selection says "tests unknown: <error>" for ``FAILURE_KEPT_S`` before it is tried again. Its command
``orbit.showTests`` with arguments ``[uri, {"line", "character"}, qual]`` answers
``{"target": qual, "tests": [test dict + "uri"], "locations": [Location of each test],
"commands": selection.commands(tests)}`` (a references-style
list and the command lines that run them) and shows the command line with
``window/showMessage``.

``Snapshot`` is shared with ``hover`` and the code actions; the buffer-aware graph reads
(``lens_work``, ``targets_at``) are in ``index.buffers``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from orbit_lsp.changes.reach import cached_counts, has_tests
from orbit_lsp.changes.selection import commands as test_commands
from orbit_lsp.index.buffers import lens_counts, lens_work, targets_at
from orbit_lsp.index.cold import cold_sites
from orbit_lsp.index.py_fixtures import is_python_test_file
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.index.walk import read_workspace_file
from orbit_lsp.lru import LRU
from orbit_lsp.server.app import REQUEST_FAILED, OrbitServer, lsp_position
from orbit_lsp.server.lines import Lines

log = logging.getLogger(__name__)

SHOW_IMPACT = "orbit.showImpact"
SHOW_TESTS = "orbit.showTests"
SHOW_INDEXING = "orbit.indexing"
INDEXING_TITLE = "indexing…"
TEST_LENS_KINDS = ("function", "method")
COUNTING_TITLE = "tests: counting…"
LAST_COUNTS_KEPT = 4096  # tests lenses whose last count is kept to show while they count again
FAILURE_KEPT_S = 60.0  # a failed selection is answered with its error this long before it is tried again
SLOW_SELECTIONS = 3  # a folder's last selections all slower than the lens's wait: it does not wait
REFRESH_DELAY_S = 0.2  # selections ending within this of each other share one lens refresh


# -- what the client sees ---------------------------------------------------------------------------
@dataclass
class Snapshot:
    """One document as the client sees it at request time: the open buffer, else the file on
    disk. Positions are converted against this text only, so an edit that arrives while a
    request is being answered cannot shift its results."""

    uri: str
    path: Path
    ix: WorkspaceIndexer
    rel: str
    text: str
    data: bytes
    lines: Lines

    @classmethod
    async def load(cls, ls: OrbitServer, uri: str) -> "Snapshot | None":
        """The document of ``uri``: its open buffer, else the file on disk read in a worker
        thread (never on the event loop) through ``walk.read_workspace_file``: ``.env*`` files,
        links to them or out of the workspace, FIFOs, devices and sockets are never opened and
        give None, as do files outside every workspace folder and unreadable ones."""
        found = cls._buffer(ls, uri)
        if found is None or isinstance(found, cls):
            return found
        ix, rel, path = found
        try:
            data = await asyncio.get_running_loop().run_in_executor(
                ls.file_pool, read_workspace_file, ix.root, path, ls.settings.max_file_bytes)
        except OSError as exc:
            log.info("not reading %s: %s", path, exc)
            return None
        return cls._of_bytes(ls, uri, ix, rel, path, data)

    @classmethod
    def take(cls, ls: OrbitServer, uri: str) -> "Snapshot | None":
        """``load`` reading the file (if not open) on the calling thread."""
        found = cls._buffer(ls, uri)
        if found is None or isinstance(found, cls):
            return found
        ix, rel, path = found
        try:
            data = read_workspace_file(ix.root, path, ls.settings.max_file_bytes)
        except OSError:
            return None
        return cls._of_bytes(ls, uri, ix, rel, path, data)

    @classmethod
    def _buffer(cls, ls: OrbitServer, uri: str) -> "Snapshot | tuple[WorkspaceIndexer, str, Path] | None":
        """The snapshot of the open buffer; else (indexer, rel, path) to read; None outside the
        workspace folders."""
        owner = ls.locate(uri)
        if owner is None:
            return None
        ix, rel = owner
        path = ix.root / rel
        doc = ls.workspace.text_documents.get(uri) or ls.workspace.text_documents.get(ls.uri_of(path))
        if doc is None:
            return ix, rel, path
        text = doc.source
        data = text.encode("utf-8", errors="surrogatepass")
        return cls(uri, path, ix, rel, text, data, Lines.of(text, ls.workspace.position_codec))

    @classmethod
    def _of_bytes(cls, ls: OrbitServer, uri: str, ix: WorkspaceIndexer, rel: str, path: Path, data: bytes) -> "Snapshot":
        text = data.decode("utf-8", errors="replace")
        return cls(uri, path, ix, rel, text, data, Lines.of(text, ls.workspace.position_codec))

    @property
    def codec(self) -> Any:
        return self.lines.codec

    def position(self, line1: int, byte_col: int) -> types.Position:
        return self.lines.position(line1, byte_col)

    def graph_position(self, pos: types.Position) -> tuple[int, int]:
        return self.lines.graph_position(pos)

    def word_range(self, pos: types.Position) -> types.Range | None:
        return self.lines.word_range(pos)


# -- titles ------------------------------------------------------------------------------------------
def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def file_title(counts: dict) -> str:
    n, hops = counts.get("dependents", 0), counts.get("hops", 0)
    return "0 dependents" if not n else f"{_plural(n, 'dependent')}, {_plural(hops, 'hop')}"


def symbol_title(name: str, counts: dict) -> str:
    syntax = counts.get("implicit")
    if syntax and not counts.get("callers"):
        return f"callers unknown: runs on {syntax}, which the graph does not follow"
    title = _plural(counts.get("callers", 0), "caller")
    if syntax:
        title += f" · more through {syntax}, not followed"
    if counts.get("recursive"):
        title += " · recursive"
    unresolved = counts.get("unresolved_elsewhere", 0)
    if unresolved:
        title += f" · unresolved calls to '{name}' in {_plural(unresolved, 'function')} may add more"
    return title


def counting_title(last: tuple[bool, int | None]) -> str:
    """The title of a tests lens whose count is not known yet: "tests: counting…", with the
    count it showed before (an edit changed the graph since) when there is one (``last``:
    ``LRU.lookup``'s ``(found, count)``)."""
    found, n = last
    return f"{COUNTING_TITLE} (was {n})" if found and n is not None else COUNTING_TITLE


def tests_title(n: int) -> str:
    """The title of a tests lens reached by ``n`` tests."""
    return "no test reaches this" if n == 0 else f"{_plural(n, 'test')} reach{'es' * (n == 1)} this"


def _wants_test_lens(rel: str, symbol: dict) -> bool:
    """Functions and methods, but not the tests themselves (a test reaches only itself)."""
    if symbol.get("kind") not in TEST_LENS_KINDS:
        return False
    return not (is_python_test_file(rel) and symbol.get("name", "").startswith("test"))


# -- the feature ---------------------------------------------------------------------------------------
class Feature:
    def __init__(self, server: OrbitServer):
        self.server = server
        self._batches: dict[tuple, list] = {}  # (indexer id, file) -> [(qual, name, future)] to read
        self._test_batches: dict[tuple, list] = {}  # (indexer id, file) -> [(qual, future)]
        self._test_work: dict[tuple, asyncio.Future] = {}  # (graph, generation, file, qual) -> running
        self._refresh_due: asyncio.TimerHandle | None = None
        # (graph, generation, file, qual) -> (monotonic time, error) of a selection that failed
        self._test_failed: dict[tuple, tuple[float, JsonRpcException]] = {}
        self._reading: set[asyncio.Task] = set()
        self.selection_times = SelectionTimes()
        # (graph, file, qual) -> the last count a tests lens showed, whatever the generation: a
        # lens counting again after an edit says what it was (``counting_title``)
        self._last_counts = LRU(LAST_COUNTS_KEPT)

    def register(self) -> None:
        ls = self.server
        ls.on(types.TEXT_DOCUMENT_CODE_LENS, self.code_lens, types.CodeLensOptions(resolve_provider=True))
        ls.on(types.CODE_LENS_RESOLVE, self.resolve)

        ls.on_command(SHOW_IMPACT, self.show_impact)
        ls.on_command(SHOW_TESTS, self.show_tests)
        ls.on_command(SHOW_INDEXING, self.show_indexing)

    async def code_lens(self, params: types.CodeLensParams) -> list[dict]:
        """The lenses as plain JSON (each a ``CodeLens`` without a command): a large file has
        hundreds, and having cattrs unstructure each ``types.CodeLens`` costs more than the
        rest of the request."""
        ls = self.server
        uri = params.text_document.uri
        await ls.wait_served()  # asked for on attach: the folders are served right after ``initialized``
        snap = await Snapshot.load(ls, uri)
        if snap is None:
            return []  # not in a served folder
        if snap.ix.last_index_time is None:
            if not ls.indexing(snap.ix):
                return []  # not indexed (the index failed or was cancelled)
            # the first index is running: the lenses go where the file's own definitions are
            # (parsed now, in memory); their counts say "indexing…" until it is done
            res = await asyncio.get_running_loop().run_in_executor(
                ls.file_pool, cold_sites, snap.ix, snap.rel, snap.path, snap.data)
            with_tests = False  # which tests exist is known once the folder is indexed
        else:
            res = await ls.query(lens_work, snap.ix, snap.rel, snap.data)
            with_tests = None
        if res is None:
            return []  # not in the graph (skipped, excluded, not indexed yet)
        zero = {"line": 0, "character": 0}
        lenses = [{"range": {"start": zero, "end": zero}, "data": {"uri": uri, "target": {"type": "file"}}}]
        lines = snap.lines
        if with_tests is None:
            with_tests = (any(_wants_test_lens(snap.rel, s) for s in res["symbols"])
                          and await ls.query(has_tests, snap.ix))
        for s in res["symbols"]:
            line0, c = max(0, s["line"] - 1), lines.character(s["line"], s["col"])
            rng = {"start": {"line": line0, "character": c}, "end": {"line": line0, "character": c + lines.units(s["name"])}}
            lenses.append({"range": rng,
                           "data": {"uri": uri, "target": {"type": "symbol", "qual": s["qual"], "name": s["name"]}}})
            if with_tests and _wants_test_lens(snap.rel, s):
                lenses.append({"range": rng,
                               "data": {"uri": uri, "target": {"type": "tests", "qual": s["qual"], "name": s["name"]}}})
        return lenses

    async def resolve(self, lens: types.CodeLens) -> dict:
        """Fill in a lens's command: its title from the counts the graph has now (a lens whose
        file or symbol has left the graph since says so) and ``orbit.showImpact``."""
        ls = self.server
        data = lens.data if isinstance(lens.data, dict) else None
        target = data.get("target") if data else None
        uri = data.get("uri") if data else None
        kind = target.get("type") if isinstance(target, dict) else None
        qual, name = (target.get("qual"), target.get("name")) if kind in ("symbol", "tests") else (None, "")
        if not (isinstance(uri, str) and (kind == "file" or (isinstance(qual, str) and isinstance(name, str)))):
            raise JsonRpcInvalidParams("codeLens/resolve: this lens was not made by orbit-lsp (no data)")
        owner = ls.locate(uri)
        if owner is not None and ls.indexing(owner[0]):
            return self._indexing_lens(lens, data, uri)
        if kind == "tests":
            return await self._resolve_tests(lens, data, owner, uri, qual, name)
        counts = None
        if owner is not None and owner[0].last_index_time is not None:
            counts = await self._counts(owner[0], owner[1], qual, name)
        if kind == "file":
            title = file_title(counts) if counts is not None else "dependents unknown: the file is not in the graph now"
            arguments: list = [uri]
        else:
            title = (symbol_title(name, counts) if counts is not None
                     else f"callers unknown: {name} is not in the graph now")
            arguments = [uri, {"line": lens.range.start.line, "character": lens.range.start.character}]
        # plain JSON, as ``code_lens`` answers: an editor resolves every lens of a large file
        r = lens.range
        return {"range": {"start": {"line": r.start.line, "character": r.start.character},
                          "end": {"line": r.end.line, "character": r.end.character}},
                "command": {"title": title, "command": SHOW_IMPACT, "arguments": arguments}, "data": data}

    @staticmethod
    def _indexing_lens(lens: types.CodeLens, data: dict, uri: str) -> dict:
        """A lens of a folder whose first index is running: its counts are not final (a caller or
        an importer may be in any file not indexed yet), so it says "indexing…"; its command
        (``orbit.indexing``) only says how far the index is. The server asks the client to
        refresh its lenses once the index is done."""
        r = lens.range
        return {"range": {"start": {"line": r.start.line, "character": r.start.character},
                          "end": {"line": r.end.line, "character": r.end.character}},
                "command": {"title": INDEXING_TITLE, "command": SHOW_INDEXING, "arguments": [uri]}, "data": data}

    async def show_indexing(self, *args) -> dict:
        """``orbit.indexing(uri?)``: how far the first index of that document's folder is (all
        folders without a URI), also shown with ``window/showMessage``. Answers ``{"indexing":
        bool, "folders": [{"root", "progress"}]}`` (the folders still being indexed)."""
        ls = self.server
        uri = args[0] if args else None
        owner = ls.locate(uri) if isinstance(uri, str) else None
        folders = [owner[0]] if owner is not None else ls.workspaces.all()
        busy = [ix for ix in folders if ls.indexing(ix)]
        if busy:
            msg = "orbit: " + "; ".join(ls.indexing_note(ix) for ix in busy) + " (counts appear when it is done)"
        else:
            msg = "orbit: indexed"
        ls.window_show_message(types.ShowMessageParams(types.MessageType.Info, msg))
        return {"indexing": bool(busy),
                "folders": [{"root": str(ix.root), "progress": ls.first_index.get(ix.root) or ""} for ix in busy]}

    async def _resolve_tests(self, lens: types.CodeLens, data: dict, owner, uri: str, qual: str, name: str) -> dict:
        ls = self.server
        title = f"tests unknown: {name} is not in the graph now"
        if owner is not None and owner[0].last_index_time is not None:
            ix, rel = owner
            work = self._test_count(ix, rel, qual)
            try:
                # the selection of a much-used function can read thousands of test files: past
                # this wait the lens says so, and the editor is asked to refresh once it is known
                wait = ls.settings.tests_lens_wait_ms / 1000
                if self.selection_times.all_over(ix.root, wait):
                    wait = 0  # a count known by now is still shown
                count = await asyncio.wait_for(asyncio.shield(work), wait)
            except asyncio.TimeoutError:
                if wait > 0:  # its selection takes longer than the wait: a lower bound
                    self.selection_times.add(ix.root, math.inf)
                work.add_done_callback(self._refresh_when_known)
                title = counting_title(self._last_counts.lookup((ix.graph.name, rel, qual)))
            except JsonRpcException as exc:
                title = f"tests unknown: {exc.message}"
            else:
                if count is not None:
                    title = tests_title(count)
                    self._last_counts.put((ix.graph.name, rel, qual), count)
        r = lens.range
        start = {"line": r.start.line, "character": r.start.character}
        return {"range": {"start": start, "end": {"line": r.end.line, "character": r.end.character}},
                "command": {"title": title, "command": SHOW_TESTS, "arguments": [uri, start, qual]}, "data": data}

    def _test_count(self, ix: WorkspaceIndexer, rel: str, qual: str) -> asyncio.Future:
        """A future of the number of tests reaching one symbol (None: not in the graph now),
        computed in the server's slow pool with those of the other tests lenses of the same
        file asked for meanwhile (batched like ``_counts``); one computation per symbol and
        graph generation however many lenses wait for it. Its exception is a JSON-RPC error."""
        loop = asyncio.get_running_loop()
        key = (ix.graph.name, ix.generation, rel, qual)
        work = self._test_work.get(key)
        if work is not None:
            return work
        work = loop.create_future()
        known = cached_counts(ix, rel, [qual])
        if qual in known:
            work.set_result(known[qual])
            return work
        failed = self._test_failed.get(key)
        if failed is not None and time.monotonic() - failed[0] < FAILURE_KEPT_S:
            work.set_exception(failed[1])  # not tried again at once: a refresh would loop
            return work
        self._test_work[key] = work
        work.add_done_callback(lambda _, key=key: self._test_work.pop(key, None))
        batch_key = (id(ix), rel)
        batch = self._test_batches.get(batch_key)
        if batch is None:
            batch = self._test_batches[batch_key] = []
            loop.call_soon(self._start_test_batch, batch_key, ix, rel)
        batch.append((qual, work))
        return work

    def _refresh_when_known(self, work: asyncio.Future) -> None:
        """Ask the client for its lenses again (once for the selections that end together) so
        that "counting…" becomes the count."""
        if work.cancelled() or self._refresh_due is not None:
            return
        self._refresh_due = asyncio.get_running_loop().call_later(REFRESH_DELAY_S, self._refresh)

    def _refresh(self) -> None:
        self._refresh_due = None
        self.server.refresh_lenses()

    def _start_test_batch(self, key: tuple, ix: WorkspaceIndexer, rel: str) -> None:
        task = asyncio.ensure_future(self._read_test_batch(key, ix, rel))
        self._reading.add(task)
        task.add_done_callback(self._reading.discard)

    async def _read_test_batch(self, key: tuple, ix: WorkspaceIndexer, rel: str) -> None:
        batch = self._test_batches.pop(key)
        try:
            found = await self.server.slow_query(self._selected_counts, ix, rel, [q for q, _ in batch])
        except Exception as exc:  # noqa: BLE001 - every lens of the batch gets the error
            failure = exc if isinstance(exc, JsonRpcException) else JsonRpcException(f"{type(exc).__name__}: {exc}",
                                                                                          code=REQUEST_FAILED)
            failed_at = time.monotonic()
            self._test_failed = {k: v for k, v in self._test_failed.items() if failed_at - v[0] < FAILURE_KEPT_S}
            for q, answer in batch:
                self._test_failed[(ix.graph.name, ix.generation, rel, q)] = (failed_at, failure)
                if not answer.done():
                    answer.set_exception(failure)
                    answer.exception()  # retrieved: a lens no longer waiting need not see it
            return
        for q, answer in batch:
            if not answer.done():
                answer.set_result(found.get(q))

    def _selected_counts(self, ix: WorkspaceIndexer, rel: str, quals: list[str]) -> dict[str, int | None]:
        """``reach.test_counts`` computed by the selection process (in the slow pool's thread),
        its duration kept in ``selection_times``."""
        started = time.monotonic()
        counts = self.server.selections.test_counts(ix, rel, quals)
        self.selection_times.add(ix.root, time.monotonic() - started)
        return counts

    def _selected_tests(self, ix: WorkspaceIndexer, rel: str, qual: str) -> list[dict] | None:
        """``reach.tests_for`` of one symbol computed by the selection process (None: not in
        the graph now)."""
        return self.server.selections.tests_for(ix, rel, [qual]).get(qual)

    async def _counts(self, ix: WorkspaceIndexer, rel: str, qual: str | None, name: str) -> dict | None:
        """One lens's counts, read together with those of the other lenses of the same file
        asked for meanwhile: an editor resolves the lenses on screen at once, and the lenses
        read in one batch cost two queries instead of one each. The batch is read once every
        request already received has been dispatched (``call_soon``), so the first lens does not
        wait for lenses that have not arrived."""
        loop = asyncio.get_running_loop()
        key = (id(ix), rel)
        batch = self._batches.get(key)
        if batch is None:
            batch = self._batches[key] = []
            loop.call_soon(self._start_batch, key, ix, rel)
        answer = loop.create_future()
        batch.append((qual, name, answer))
        return await answer

    def _start_batch(self, key: tuple, ix: WorkspaceIndexer, rel: str) -> None:
        task = asyncio.ensure_future(self._read_batch(key, ix, rel))
        self._reading.add(task)  # (the loop keeps only a weak reference to a task)
        task.add_done_callback(self._reading.discard)

    async def _read_batch(self, key: tuple, ix: WorkspaceIndexer, rel: str) -> None:
        batch = self._batches.pop(key)
        try:
            found = await self.server.query(lens_counts, ix, rel, [(q, n) for q, n, _ in batch], self.server.settings.max_hops)
        except Exception as exc:  # noqa: BLE001 - every lens of the batch gets the error
            for _, _, answer in batch:
                if not answer.done():
                    answer.set_exception(exc)
            return
        for (_, _, answer), counts in zip(batch, found):
            if not answer.done():
                answer.set_result(counts)

    # -- orbit.showImpact ----------------------------------------------------------------------
    async def show_impact(self, *args) -> dict:
        """``orbit.showImpact(uri, position?)``: the ``orbit/impact`` result for that file or the
        symbol at ``position`` (found in the buffer as the lens saw it), plus a showMessage."""
        ls = self.server
        uri = args[0] if args else None
        if not isinstance(uri, str) or not uri:
            raise JsonRpcInvalidParams(f"{SHOW_IMPACT} needs a document URI as its first argument")
        pos = _position_arg(args[1] if len(args) > 1 else None)
        requests = next((f for f in ls.features if hasattr(f, "impact_of")), None)
        if requests is None:
            raise JsonRpcInvalidParams(f"{SHOW_IMPACT}: orbit/impact is not available")
        at = None
        lookup: list[dict] = []
        if pos is not None:
            snap = await Snapshot.load(ls, uri)
            if snap is not None and snap.ix.last_index_time is not None:
                line1, col = snap.graph_position(pos)
                found = await ls.query(targets_at, snap.ix, snap.rel, snap.data, line1, col)
                if found is not None:
                    at = found.rows[0] if found.rows else None
                    lookup = found.cypher
        result = await requests.impact_of(uri, None, at=at)
        result["cypher"] = lookup + result["cypher"]
        ls.window_show_message(types.ShowMessageParams(types.MessageType.Info, impact_message(result)))
        return result


    # -- orbit.showTests -----------------------------------------------------------------------
    async def show_tests(self, *args) -> dict:
        """``orbit.showTests(uri, position, qual)``: the tests reaching the symbol ``qual`` of
        that document (see the module docstring), plus a showMessage with the command line."""
        ls = self.server
        uri = args[0] if args else None
        qual = args[2] if len(args) > 2 else None
        if not isinstance(uri, str) or not uri:
            raise JsonRpcInvalidParams(f"{SHOW_TESTS} needs a document URI as its first argument")
        _position_arg(args[1] if len(args) > 1 else None)
        if not isinstance(qual, str) or not qual:
            raise JsonRpcInvalidParams(f"{SHOW_TESTS} needs the symbol's qualified name as its third argument")
        owner = ls.locate(uri)
        if owner is None or owner[0].last_index_time is None:
            raise JsonRpcInvalidParams(f"{SHOW_TESTS}: {uri} is not in an indexed workspace folder")
        ix, rel = owner
        # however long it takes (the user asked for it), in the slow pool, newest first
        tests = await ls.slow_query(self._selected_tests, ix, rel, qual)
        if tests is None:
            msg = f"orbit: {qual} is not in the graph now"
            tests = []
        else:
            cmds = test_commands(tests)
            run = cmds["pytest"] or (("JS/TS test files " + " ".join(cmds["js_files"])) if cmds["js_files"] else "")
            msg = f"orbit: {tests_title(len(tests)).replace('this', qual)}" + (f": {run}" if run else "")
        out = []
        locations = []
        for t in tests:
            t_uri = ls.uri_of(ix.root / t["file"])
            out.append(dict(t, uri=t_uri))
            pos = {"line": max(0, t["line"] - 1), "character": 0}
            locations.append({"uri": t_uri, "range": {"start": pos, "end": pos}})
        ls.window_show_message(types.ShowMessageParams(types.MessageType.Info, msg))
        return {"target": qual, "tests": out, "locations": locations, "commands": test_commands(tests)}


class SelectionTimes:
    """How long the last ``SLOW_SELECTIONS`` tests-lens selections of each folder took, in
    seconds: a selection's duration when it ends, ``math.inf`` when a lens stopped waiting for
    it (longer than the wait; the large workspace's first selections take minutes, so few end
    before many lenses have waited). ``add`` is called from the slow pool's thread and the
    event loop, ``all_over`` from the event loop."""

    def __init__(self, kept: int | None = None):
        self.kept = kept or SLOW_SELECTIONS
        self._times: dict[Path, deque] = {}

    def add(self, root: Path, seconds: float) -> None:
        times = self._times.get(root)
        if times is None:
            times = self._times.setdefault(root, deque(maxlen=self.kept))
        times.append(seconds)

    def all_over(self, root: Path, seconds: float) -> bool:
        """True when ``kept`` selections of ``root`` are known and each took over ``seconds``."""
        times = list(self._times.get(root, ()))
        return len(times) == self.kept and min(times) > seconds


def _position_arg(value: Any) -> types.Position | None:
    if value is None:
        return None
    if hasattr(value, "_asdict"):
        value = value._asdict()
    if isinstance(value, types.Position):
        return value
    return lsp_position(value, f"{SHOW_IMPACT}: the second argument")


def impact_message(result: dict) -> str:
    """One line for window/showMessage from an ``orbit/impact`` result."""
    t = result.get("target") or {}
    dep_total = result["dependentsTotal"]  # every dependent, also those the list leaves out
    n_deps, hops = dep_total["all"], len(dep_total["byHops"])
    dep_text = f"{_plural(n_deps, 'dependent file')}" + (f" (up to {_plural(hops, 'hop')})" if n_deps else "")
    if t.get("type") == "symbol":
        callers = result.get("callers") or []
        total = result.get("callersTotal") or {}
        by_depth = total.get("byDepth") or []
        direct = by_depth[0] if by_depth else sum(1 for c in callers if c.get("depth") == 1)
        n = total.get("all", len(callers))
        msg = (f"orbit: {t.get('kind')} {t.get('qual')}: {_plural(direct, 'direct caller')}, "
               f"{_plural(n, 'caller')} in all" + (f" (up to {_plural(len(by_depth), 'hop')})" if by_depth else "")
               + f"; {t.get('path')} has {dep_text}")
    elif t.get("type") == "package":
        msg = f"orbit: package {t.get('name')} is used by {_plural(n_deps, 'file')}"
    else:
        msg = f"orbit: {t.get('path')} has {dep_text}"
    notes = result.get("notes") or []
    return msg + (f" ({'; '.join(notes)})" if notes else "")
