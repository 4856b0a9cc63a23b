"""Resolving many Python files on every core: ``resolve_files`` splits one round of a
``resolve_fixpoint`` between this process and forked copies of it; above
``PARALLEL_MAX_FILES`` files, forked copies that each resolve a bounded number of files do all
of it (``_resolve_in_children``), and find the subclass relation before (``inherits_in_children``).

A forked child starts with this process's resolver exactly as it stands (facts, memo, subclass
relation, parameter values), resolves the files it takes and sends their ``FileEdges`` back
through a pipe, pickled a chunk at a time as it resolves them (it holds no more than one
chunk's edges; a thread of this process drains the pipe meanwhile), then exits. Resolving a
file reads the resolver's state and only adds to its caches (the memo holds what evaluating
again gives), so the files can be resolved in any split and order: the edges are those of
resolving them one after the other in one process. What the children memoise stays in the
children; this process keeps only its own.

Files are taken in consecutive chunks of the sorted list (neighbouring files consult the same
modules, so each process's memo serves its next chunk): this process from the end, children
from the start, so the split follows whichever side is faster.

Forking a process that has other threads is safe here because a child runs only the resolver
(pure Python over objects it owns, no locks another thread may hold, no I/O but its pipe) and
leaves with ``os._exit``.
"""

from __future__ import annotations

import io
import logging
import os
import pickle
import threading
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

from orbit_lsp.index.state import DECODES

if TYPE_CHECKING:
    from orbit_lsp.index.resolve import Resolver
    from orbit_lsp.index.py_edges import FileEdges

log = logging.getLogger("orbit_lsp.index")

PARALLEL_MIN_FILES = 400  # fewer files than this resolve in this process (a fork costs ~10-50 ms)
# more files than this resolve in short-lived children only (``_resolve_in_children``), at most
# ``LARGE_WORKERS`` at once. A child forked from a process that resolves soon writes most of its
# parent's pages (refcounts, and new objects placed in the free slots of the parent's arenas),
# and a resolving process's resident memory grows far past what it holds (on the 22,148 Python
# files of the scale corpus: ~200 MB of live objects, 1.26 GB resident in one process; a parent
# and one child sharing the files: 1.71 GB). Children forked from a parent that resolves
# nothing, each ending after ``CHILD_FILES`` files: 1.35 GB, the resolution 111 -> 75 s
PARALLEL_MAX_FILES = 10_000
# files a child resolves before it ends and a new one takes its place (``_resolve_in_children``)
CHILD_FILES = 2_000
LARGE_WORKERS = 2  # children resolving at once above ``PARALLEL_MAX_FILES`` files (memory: each holds its own)
CHUNK_FILES = 16  # files taken at once: a chunk is consecutive in sorted order (memo locality)
_DECODED = "\0decoded"  # the key of a child's last message: the facts it decoded (no file has this name)


def default_workers(python_files: int = 0) -> int:
    """Processes a full build of ``python_files`` Python files resolves with:
    ``ORBIT_RESOLVE_WORKERS`` when set (1: resolve in this process only), else the cores this
    process may run on, at most 8, or at most ``LARGE_WORKERS`` above ``PARALLEL_MAX_FILES``
    files (memory)."""
    env = os.environ.get("ORBIT_RESOLVE_WORKERS", "").strip()
    if env.isdigit() and int(env) >= 1:
        return int(env)
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    if python_files > PARALLEL_MAX_FILES:
        return max(1, min(n, LARGE_WORKERS))
    return max(1, min(n, 8))


def in_short_lived_children(files: int, workers: int) -> bool:
    """Whether ``files`` files are resolved (and their subclass relation found) by short-lived
    children only: above ``PARALLEL_MAX_FILES`` files, with ``workers`` ≥ 2, where processes fork."""
    return files > PARALLEL_MAX_FILES and workers >= 2 and hasattr(os, "fork")


def resolve_files(resolver: Resolver, rels: list[str], workers: int = 1,
                  progress: Callable[[int, int, str], None] | None = None) -> dict[str, FileEdges]:
    """``{rel: resolver.resolve_file(rel)}`` for ``rels`` (sorted), with ``workers`` processes
    (this one and ``workers - 1`` forked children) when there are at least
    ``PARALLEL_MIN_FILES`` files and the platform can fork (above ``PARALLEL_MAX_FILES``:
    ``workers`` short-lived children, ``_resolve_in_children``); else in this process.
    ``progress(done, total, rel)`` is called about every 200 files. A child that fails (killed,
    out of memory) loses nothing: this process resolves the files it did not send back."""
    n = len(rels)
    if in_short_lived_children(n, workers):
        return _resolve_in_children(resolver, rels, workers, progress)
    if workers < 2 or n < PARALLEL_MIN_FILES or not hasattr(os, "fork"):
        return _resolve_here(resolver, rels, progress)
    import multiprocessing

    chunks = [rels[i:i + CHUNK_FILES] for i in range(0, n, CHUNK_FILES)]
    ctx = multiprocessing.get_context("fork")
    # [next chunk from the front, next chunk from the back (exclusive), files done]
    cursor = ctx.Array("q", [0, len(chunks), 0])
    parent = os.getpid()
    # each child's pid, and a thread draining its pipe as it writes (the bytes only: decoding
    # waits for the end)
    children = [_fork(lambda w: _child(resolver, chunks, cursor, w, parent)) for _ in range(workers - 1)]
    out: dict[str, FileEdges] = {}
    reported = 0
    while True:
        with cursor.get_lock():
            if cursor[0] >= cursor[1]:
                break
            cursor[1] -= 1
            chunk = chunks[cursor[1]]
        for rel in chunk:
            out[rel] = resolver.resolve_file(rel)
        with cursor.get_lock():
            cursor[2] += len(chunk)
            done = cursor[2]
        if progress is not None and done - reported >= 200:
            reported = done
            progress(done, n, chunk[-1])
    for pid, reader, got in children:
        _take(reader, got, os.waitpid(pid, 0)[1], out, "a resolution process")
    missing = [rel for rel in rels if rel not in out]
    for rel in missing:
        out[rel] = resolver.resolve_file(rel)
    if progress is not None:
        progress(n, n, rels[-1])
    return {rel: out[rel] for rel in rels}


def _resolve_in_children(resolver: Resolver, rels: list[str], workers: int,
                         progress: Callable[[int, int, str], None] | None) -> dict[str, FileEdges]:
    """``resolve_files`` of a large workspace: ``workers`` forked children resolve every file
    while this process only waits for them and keeps the pickled chunks they send; a child
    ends after ``CHILD_FILES`` files and a new one is forked from this process in its place.

    Memory: a resolution process's resident memory grows much faster than what it holds (the
    decoded facts it keeps replacing leave its heap's pages part-used, pinned by the values it
    keeps), and a forked child soon writes most of its parent's pages; a child that lives for a
    bounded number of files, forked from a parent that resolves nothing, gives all of that back
    when it exits. The edges are decoded once every child has ended."""
    import multiprocessing

    n = len(rels)
    chunks = [rels[i:i + CHUNK_FILES] for i in range(0, n, CHUNK_FILES)]
    ctx = multiprocessing.get_context("fork")
    cursor = ctx.Array("q", [0, len(chunks), 0])  # as in ``resolve_files``; only the front moves
    parent = os.getpid()
    running: dict[int, tuple[threading.Thread, list[bytes]]] = {}
    finished: list[tuple[threading.Thread, list[bytes], int]] = []  # (reader, what it read, exit status)
    reported = 0

    def more_chunks() -> bool:
        with cursor.get_lock():
            return cursor[0] < cursor[1]

    while True:
        while len(running) < workers and more_chunks():
            pid, reader, parts = _fork(lambda w: _child(resolver, chunks, cursor, w, parent, CHILD_FILES))
            running[pid] = (reader, parts)
        if not running:
            break
        # only our own children are waited for (this process may have others: an embedded FalkorDB)
        ended = [(pid, status) for pid, status in (os.waitpid(p, os.WNOHANG) for p in running) if pid]
        if not ended:
            time.sleep(0.05)
        for pid, status in ended:
            finished.append((*running.pop(pid), status))  # decoded once every child has ended
        if progress is not None:
            with cursor.get_lock():
                done = cursor[2]
            if done - reported >= 200:
                reported = done
                progress(done, n, rels[min(done, n) - 1])
    out: dict[str, FileEdges] = {}
    for reader, parts, status in finished:
        _take(reader, parts, status, out, "a resolution process")
    for rel in rels:
        if rel not in out:
            out[rel] = resolver.resolve_file(rel)
    if progress is not None:
        progress(n, n, rels[-1])
    return {rel: out[rel] for rel in rels}


def inherits_in_children(resolver: Resolver, rels: list[str], workers: int) -> dict[str, tuple]:
    """``{rel: resolver._file_inherits(rel)}`` (the pairs of the subclass relation, each with
    its class bases' memo thrown away after) for ``rels``, computed by ``workers`` forked
    children, one consecutive share each; what a child did not send back is computed here.

    Each child also sends the outlines of the classes it found a base for
    (``_file_inherits`` takes them while the file's facts are decoded), which are kept in
    ``resolver._class_outlines`` as they are when this process finds them itself: the walks
    down the hierarchy read them instead of decoding each subclass's file again (on the scale
    corpus, a sixth of the resolution children's decoding was for outlines)."""
    share = -(-len(rels) // max(1, workers))
    slices = [rels[i:i + share] for i in range(0, len(rels), share)]

    def find(part: list[str], w: int) -> None:
        with resolver._bases_memo():
            found = {rel: resolver._file_inherits(rel) for rel in part}
        outlines = resolver._class_outlines
        _send(w, {rel: (pairs, outlines.get(rel)) for rel, pairs in found.items()})

    running = [_fork(lambda w, part=part: find(part, w)) for part in slices]
    sent: dict[str, tuple] = {}
    for pid, reader, parts in running:
        _take(reader, parts, os.waitpid(pid, 0)[1], sent, "a process finding subclasses")
    got: dict[str, tuple] = {}
    for rel, (pairs, outlines) in sent.items():
        got[rel] = pairs
        if outlines:
            resolver._class_outlines.setdefault(rel, {}).update(outlines)
    missing = [rel for rel in rels if rel not in got]
    if missing:
        with resolver._bases_memo():
            got.update((rel, resolver._file_inherits(rel)) for rel in missing)
    return got


def _fork(work: Callable[[int], None]) -> tuple[int, threading.Thread, list[bytes]]:
    """Fork a child that runs ``work(w)`` (``w``: the write end of a pipe to this process) and
    leaves with ``os._exit`` (status 0 when ``work`` returned, 1 when it raised). Returns the
    child's pid, and a started thread of this process appending what the child writes to the
    returned list until the child closes its end or exits."""
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork with threads (see above)
        pid = os.fork()
    if pid == 0:  # the child
        os.close(r)
        code = 1
        try:
            decoded = DECODES.here
            work(w)
            code = 0
            try:  # last: how many facts it decoded (``_take`` adds them up here)
                _send(w, {_DECODED: DECODES.here - decoded})
            except OSError:
                pass
        finally:
            os._exit(code)
    os.close(w)
    parts: list[bytes] = []
    reader = threading.Thread(target=_read_all, args=(r, parts), daemon=True, name="orbit-resolve-pipe")
    reader.start()
    return pid, reader, parts


def _send(w: int, value) -> None:
    """Write ``value`` pickled to pipe ``w`` (whole: a reader decodes what arrived complete)."""
    view = memoryview(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    while view:
        view = view[os.write(w, view):]


def _take(reader: threading.Thread, parts: list[bytes], status: int, out: dict, who: str) -> None:
    """What an ended child sent (``parts``, complete once ``reader`` is joined), decoded into
    ``out``; a child that did not end well (``status``, as ``os.waitpid`` gives it) is logged:
    the caller computes what it did not send."""
    reader.join()
    if status != 0:
        log.warning("%s ended with status %s; what it did not send is computed here", who, status)
    _decode_chunks(parts, out)
    decoded = out.pop(_DECODED, None)
    if decoded:
        DECODES.add(decoded, children=True)


def _resolve_here(resolver: Resolver, rels: list[str], progress) -> dict[str, FileEdges]:
    out = {}
    n = len(rels)
    for i, rel in enumerate(rels, 1):
        out[rel] = resolver.resolve_file(rel)
        if progress is not None and (i % 200 == 0 or i == n):
            progress(i, n, rel)
    return out


def _child(resolver: Resolver, chunks: list[list[str]], cursor, w: int, parent: int,
           max_files: int | None = None) -> None:
    """A child's work: take chunks from the front until none is left (or, with ``max_files``,
    until it has resolved that many files), sending each chunk's edges, pickled, through ``w``.
    A child whose parent is gone (killed) stops at its next chunk instead of resolving for
    nobody."""
    resolver.memo_keys = False  # a child never invalidates: see ``Resolver.memo_keys``
    taken = 0
    while max_files is None or taken < max_files:
        if os.getppid() != parent:
            return
        with cursor.get_lock():
            if cursor[0] >= cursor[1]:
                break
            chunk = chunks[cursor[0]]
            cursor[0] += 1
        taken += len(chunk)
        _send(w, {rel: resolver.resolve_file(rel) for rel in chunk})
        with cursor.get_lock():
            cursor[2] += len(chunk)


def _read_all(fd: int, parts: list[bytes]) -> None:
    """Append what ``fd`` delivers to ``parts`` until end of file, then close it."""
    try:
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            parts.append(b)
    finally:
        os.close(fd)


def _decode_chunks(parts: list[bytes], out: dict) -> None:
    """Add to ``out`` the edges of every complete chunk a child sent (one pickle a chunk, one
    after the other in ``parts``; emptied as it goes). A chunk cut short (the child died while
    writing it) ends the decoding: its files are resolved in this process."""
    data = b"".join(parts)
    parts.clear()
    size, stream = len(data), io.BytesIO(data)
    del data
    while stream.tell() < size:
        try:
            out.update(pickle.load(stream))
        except Exception:  # noqa: BLE001 - a truncated chunk: resolved here (``resolve_files``)
            break
