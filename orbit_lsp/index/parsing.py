"""Parsing source files into facts, and the content measures the indexer keeps per file.

``parse_many`` parses source files (Python, JavaScript, TypeScript) in this process and, for
large workspaces, in worker processes (``forkserver``); ``parse_python`` parses one Python file. Facts travel and are stored pickled
(``pickle_facts``). ``gc_paused`` pauses the cyclic GC around allocation-heavy work (parsing,
unpickling).
"""

from __future__ import annotations

import contextlib
import copyreg
import gc
import io
import itertools
import logging
import os
import pickle
import re
import struct
import threading
from collections.abc import Callable, Iterable
from typing import NamedTuple

# imported with this module, never on first use: resolution forks processes while other threads
# run (``py_parallel``), and a child forked while a thread was importing it would wait forever
# for that import's lock
import zstandard

from orbit_lsp.index import python as pyx
from orbit_lsp.index.py_facts import PyFacts, Scope
from orbit_lsp.index.fingerprint import content_hash  # noqa: F401 (re-exported)
from orbit_lsp.index.walk import read_text

log = logging.getLogger("orbit_lsp.index")


FREEZE_MIN_OBJECTS = 10_000  # a paused block that left fewer new objects lets the GC scan them
COMPACT_GROWTH = 2.0  # the permanent generation is collected once it grew this much since the last time
COMPACT_MIN_OBJECTS = 200_000  # ...and holds at least this many objects
_compacted_at = 0  # size of the permanent generation after the last collection of it
_frozen = 0  # objects frozen since (an upper bound: frozen objects freed since are still counted)


@contextlib.contextmanager
def gc_paused():
    """Pause the cyclic GC. Extraction, (un)pickling and resolution allocate hundreds of
    thousands of small acyclic objects (AST nodes, facts, memoised values); with the GC running,
    its repeated scans of the growing heap made them 2.5-3x slower. Reference counting still
    frees everything.

    When the paused block left many new tracked objects (a full index: millions; a one-file
    re-index: 10-150 thousand facts and memoised values of the files it consulted), they are
    moved to the GC's permanent generation (``gc.freeze``) before the GC resumes: otherwise the
    first collection after the pause scans all of them (~0.8 s after a full index of the
    standard library, 20-80 ms after a re-index, most of a re-index's time) and later full
    collections do again. Frozen objects are still freed by reference counting when released.
    Reference cycles among them are not collected while frozen (orbit's own data makes none:
    measured, 0 cyclic garbage objects over 20 re-indexes of the standard library; other
    threads' garbage can be frozen along): so once the permanent generation has grown
    ``COMPACT_GROWTH`` times since it was last collected, it is unfrozen and collected once
    (one full collection, amortised over that growth)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_count()[0] >= FREEZE_MIN_OBJECTS:
                _freeze()
            gc.enable()


def _freeze() -> None:
    """``gc.freeze()``, counting what was frozen (``gc.get_count()[0]``, the objects the paused
    block left: ``gc.get_freeze_count()`` walks the whole permanent generation, ~20 ms per
    million objects), and the occasional collection of the permanent generation."""
    global _compacted_at, _frozen
    _frozen += gc.get_count()[0]
    gc.freeze()
    if not _compacted_at:
        _compacted_at = _frozen
    elif _frozen > max(_compacted_at * COMPACT_GROWTH, COMPACT_MIN_OBJECTS):
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        _compacted_at = _frozen = gc.get_freeze_count()


_LINE_BREAK = re.compile(rb"\r\n|\r|\n")  # as Python's tokenizer and LSP count lines


def nonascii_lines(data: bytes) -> frozenset[int]:
    """1-based numbers of the lines of ``data`` that hold a non-ASCII byte."""
    if data.isascii():
        return frozenset()
    return frozenset(i for i, line in enumerate(_LINE_BREAK.split(data), 1) if not line.isascii())


def count_lines(data: bytes) -> int:
    """Lines of ``data`` as LSP and Python's tokenizer count them: ends are ``\\r\\n``, ``\\r``
    and ``\\n`` (a CR-only file has as many lines as CRs); a last line without an end counts."""
    if not data:
        return 0
    breaks = data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")
    return breaks + (0 if data.endswith((b"\n", b"\r")) else 1)


FACTS_ZSTD_LEVEL = 1  # zstd level of the facts streams. On 3,000 files of the scale corpus (50.6 MB
#   of pickles, 2026-12-04): compressed 3.0x faster than zlib level 1 (which these streams were
#   before), decompressed 2.3x faster, 3.8x smaller (zlib: 3.7x); levels 2 and 3 no faster to decode
MAX_FACTS_PICKLE = 64 << 20  # bytes a stored facts pickle may decompress to (the largest seen: 2.2 MB)
# A Python file's facts are kept as three zstd streams (frames with their content size and a
# checksum), so that what is read most often decodes
# least: its symbols (what a full build's Symbol rows read), the rest without call sites (what
# resolving *other* files consults: bound names, classes, imports) and its call sites (read only
# when the file itself is resolved; about half of the decoding time of the whole). The blob is
# ``FACTS_PARTS`` (not a zstd frame's magic number), the compressed lengths of the first
# two streams (``_PART_LENGTHS``), then the three streams.
FACTS_PARTS = b"OF3"
_PART_LENGTHS = struct.Struct("<II")
_HEAD = len(FACTS_PARTS) + _PART_LENGTHS.size


def _without(cls, name: str):
    """A reduction of the slotted dataclass ``cls`` (as ``compact_pickle``'s) with field
    ``name`` pickled as an empty list."""
    import dataclasses
    import operator

    names = [f.name for f in dataclasses.fields(cls)]
    get, at = operator.attrgetter(*names), names.index(name)

    def reduce(obj):
        values = get(obj)
        return cls, values[:at] + ([],) + values[at + 1:]
    return reduce


# the pickler's dispatch table for the middle stream: ``copyreg``'s reductions, with ``PyFacts``
# pickled without its symbols and ``Scope`` without its call sites (filled again when decoded)
_BODY_REDUCTIONS = {**copyreg.dispatch_table, PyFacts: _without(PyFacts, "symbols"), Scope: _without(Scope, "calls")}


def pickle_facts(facts) -> bytes:
    """The facts as the indexer keeps them (``FileState.facts_blob``): pickled, then compressed
    with zstd (``_compress``: deterministic, so equal facts give equal blobs). ``PyFacts`` are
    kept in three parts (``FACTS_PARTS``); any other facts in one stream."""
    if not isinstance(facts, PyFacts):
        return _compress(pickle.dumps(facts, protocol=pickle.HIGHEST_PROTOCOL))
    facts.with_calls()
    buf = io.BytesIO()
    body = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    body.dispatch_table = _BODY_REDUCTIONS
    body.dump(facts)
    a = _compress(pickle.dumps(facts.symbols, protocol=pickle.HIGHEST_PROTOCOL))
    b = _compress(buf.getvalue())
    c = _compress(pickle.dumps([sc.calls for sc in facts.scopes], protocol=pickle.HIGHEST_PROTOCOL))
    return b"".join((FACTS_PARTS, _PART_LENGTHS.pack(len(a), len(b)), a, b, c))


# this thread's zstd contexts (a context serves one thread at a time): (compressor, decompressor)
_ZSTD = threading.local()


def _zstd_contexts():
    """This thread's ``(zstandard.ZstdCompressor, zstandard.ZstdDecompressor)``, made on first use."""
    contexts = getattr(_ZSTD, "contexts", None)
    if contexts is None:
        contexts = _ZSTD.contexts = (zstandard.ZstdCompressor(level=FACTS_ZSTD_LEVEL, write_checksum=True),
                                     zstandard.ZstdDecompressor())
    return contexts


def _compress(data: bytes) -> bytes:
    """``data`` as one zstd frame (level ``FACTS_ZSTD_LEVEL``, with its content size and a checksum)."""
    return _zstd_contexts()[0].compress(data)


def _parts(blob: bytes) -> tuple[memoryview, memoryview, memoryview] | None:
    """The three compressed streams of a ``FACTS_PARTS`` blob (None for a one-stream blob).
    Raises ``pickle.UnpicklingError`` when its lengths do not fit it."""
    if not blob.startswith(FACTS_PARTS):
        return None
    if len(blob) < _HEAD:
        raise pickle.UnpicklingError("facts blob: truncated")
    la, lb = _PART_LENGTHS.unpack_from(blob, len(FACTS_PARTS))
    if _HEAD + la + lb > len(blob):
        raise pickle.UnpicklingError("facts blob: truncated")
    view = memoryview(blob)
    return view[_HEAD:_HEAD + la], view[_HEAD + la:_HEAD + la + lb], view[_HEAD + la + lb:]


def _inflate(data) -> bytes:
    """One zstd frame of a facts blob decompressed (a ``bytes`` or a ``memoryview`` of one).
    Raises ``pickle.UnpicklingError`` for data that is not one whole zstd frame recording its
    content size, whose checksum fails, or that would decompress past ``MAX_FACTS_PICKLE``
    bytes (a bomb from a shared server): the size is read from the frame's header and checked
    before anything is allocated."""
    try:
        size = zstandard.frame_content_size(data)
        if not 0 <= size <= MAX_FACTS_PICKLE:
            raise pickle.UnpicklingError("facts blob: a stream without its size, or past its limit")
        return _zstd_contexts()[1].decompress(data, allow_extra_data=False)
    except zstandard.ZstdError as exc:
        raise pickle.UnpicklingError(f"facts blob: {exc}") from None


def facts_pickles(blob: bytes) -> list[bytes]:
    """The pickles inside a ``pickle_facts`` blob (one, or three for ``PyFacts``). Raises
    ``pickle.UnpicklingError`` for a blob that is not made of zstd frames or whose part
    decompresses past ``MAX_FACTS_PICKLE`` bytes (a shared state from elsewhere, see
    ``overlay.check_state_blob``)."""
    parts = _parts(blob)
    return [_inflate(blob)] if parts is None else [_inflate(p) for p in parts]


def unpickle_facts(blob: bytes, calls: bool = True):
    """The facts of a ``pickle_facts`` blob. ``calls=False``: a ``PyFacts``' call sites stay
    compressed until ``PyFacts.with_calls`` is called (its scopes' ``calls`` are empty until
    then): what consulting a file's facts to resolve another needs."""
    parts = _parts(blob)
    if parts is None:
        return pickle.loads(_inflate(blob))
    facts = pickle.loads(_inflate(parts[1]))
    facts.symbols = pickle.loads(_inflate(parts[0]))
    facts.pending_calls = bytes(parts[2])
    return facts.with_calls() if calls else facts


def unpickle_calls(data: bytes) -> list[list]:
    """The call sites of each scope, from the third stream of a ``FACTS_PARTS`` blob."""
    return pickle.loads(_inflate(data))


def unpickle_symbols(blob: bytes) -> list:
    """Only the symbols of a ``pickle_facts`` blob of ``PyFacts`` (for any other facts: their
    ``symbols``, decoding the whole)."""
    parts = _parts(blob)
    if parts is None:
        return pickle.loads(_inflate(blob)).symbols
    return pickle.loads(_inflate(parts[0]))


def parse_python(rel: str, data: bytes) -> tuple[PyFacts | None, str | None]:
    """Extract facts from one Python file: ``(facts, None)`` or ``(None, "line N: message")``."""
    try:
        try:
            return pyx.extract(rel, data), None
        except SyntaxError as exc:
            if "unicode error" not in str(exc) and "encoding" not in str(exc) and "utf-8" not in str(exc).lower():
                raise
            return pyx.extract(rel, data, read_text(data)), None
    except SyntaxError as exc:
        return None, f"line {exc.lineno or 0}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return None, f"line 0: {type(exc).__name__}: {exc}"


def parse_guarded(rel: str, data: bytes) -> tuple[object | None, str | None]:
    """``languages.parse_file`` of a source file of any parsed language, with an exception
    raised by orbit's own extraction (a bug on one file) logged and turned into the file's parse
    error (``"line 0: orbit could not extract this file (…)"``): it must not stop the index."""
    from orbit_lsp.index.languages import parse_file

    try:
        return parse_file(rel, data)
    except Exception as exc:  # noqa: BLE001 - a bug on one file must not stop the index
        log.exception("extracting %s failed", rel)
        return None, f"line 0: orbit could not extract this file ({type(exc).__name__}: {exc})"


class Parsed(NamedTuple):
    """What parsing one source file gives (``parse_many``)."""

    facts: object | None  # the facts objects: only when kept (``parse_many``'s ``keep``), else None
    blob: bytes | None  # the facts pickled (``pickle_facts``; what the indexer keeps), None: no facts
    error: str | None  # "line N: message" when the file did not parse (JS/TS: facts may still be found)
    symbols: int  # how many symbols the facts hold
    sys_path: tuple  # the facts' ``sys_path`` (Python)
    class_bases: bool | None  # whether a class of the facts has a base (``has_class_bases``)
    lines: int  # ``count_lines`` of the source
    nonascii_lines: frozenset[int]  # ``nonascii_lines`` of the source


def parse_one(rel: str, data: bytes, keep: bool = True) -> Parsed:
    """Parse one source file of any parsed language (``parse_guarded``): its ``Parsed``, the
    facts objects only with ``keep``."""
    lines, nonascii = count_lines(data), nonascii_lines(data)
    facts, err = parse_guarded(rel, data)
    if facts is None:
        return Parsed(None, None, err, 0, (), None, lines, nonascii)
    return Parsed(facts if keep else None, pickle_facts(facts), err, len(facts.symbols), getattr(facts, "sys_path", ()),
                  has_class_bases(facts), lines, nonascii)


def _parse_batch(items: list[tuple[str, bytes]], keep: bool = False) -> list[tuple[str, Parsed]]:
    """``(rel, parse_one(rel, source))`` of a batch of (rel, source) pairs, the cyclic GC paused.
    A facts object not kept is freed as its file is done, while its objects are still in the CPU
    cache (not after the next file's parse evicted them): ~2% of the batch. Facts kept by a
    worker would only be pickled twice."""
    with gc_paused():
        return [(rel, parse_one(rel, data, keep)) for rel, data in items]


def has_class_bases(facts) -> bool | None:
    """Whether a class of Python ``facts`` has a base expression (``class A(B):``): a file
    without one adds nothing to the subclass relation, which is then known without decoding
    its facts (``FileState.class_bases``). None for anything but Python facts."""
    if not isinstance(facts, PyFacts):
        return None
    return any(c.bases for c in facts.classes.values())


def refuse_in_a_starting_worker() -> None:
    """Raise ``RuntimeError`` in a process that multiprocessing is starting: forkserver and spawn
    import the main module again in each worker, so a script that indexes at its top level
    (no ``if __name__ == "__main__":`` guard) would index again there, and wait forever for the
    workspace's write lock its parent holds while the parent waits for the worker. Refused, the
    worker ends, and ``parse_many`` parses in its own process."""
    import multiprocessing.process

    if getattr(multiprocessing.process.current_process(), "_inheriting", False):
        raise RuntimeError("orbit-lsp: an index was started while a worker process imported the main module; "
                           "put the script's code under `if __name__ == \"__main__\":` (Python's multiprocessing "
                           "guide, 'Safe importing of main module')")


PARALLEL_MIN_FILES = 300
BATCH_BYTES = 256 * 1024  # source bytes per batch handed to a worker (~50 ms of parsing)


def _batches(items: list[tuple[str, bytes]]) -> list[list[tuple[str, bytes]]]:
    """Consecutive batches of about ``BATCH_BYTES``, largest files first."""
    out: list[list] = []
    cur: list = []
    size = 0
    for it in sorted(items, key=lambda it: -len(it[1])):
        cur.append(it)
        size += len(it[1])
        if size >= BATCH_BYTES:
            out.append(cur)
            cur, size = [], 0
    if cur:
        out.append(cur)
    return out


class _ItemsRaised(Exception):
    """What ``parse_many``'s ``items`` raised (its ``__cause__``), apart from the workers' errors."""


def _raised_apart(it):
    """The items of ``it``; what getting one raises is raised as ``_ItemsRaised`` from it."""
    while True:
        try:
            item = next(it)
        except StopIteration:
            return
        except BaseException as exc:
            raise _ItemsRaised() from exc
        yield item


def parse_many(items: Iterable[tuple[str, bytes]], workers: int | None = None,
               progress: Callable[[int, int], None] | None = None, keep: bool = True,
               stop: threading.Event | None = None) -> dict[str, Parsed]:
    """Parse many source files of the parsed languages: this process parses too, and
    ``workers - 1`` worker processes help when there are enough files to pay for starting them.
    Returns ``{rel: Parsed}``, ``Parsed.facts`` the objects when parsed in this process and
    ``keep`` (else None: a large workspace's full build keeps only the compact blobs, see
    ``full_build.FullBuild._full_build``).

    ``items`` may be a generator that reads the files as it goes (the indexer's): once it has
    given ``PARALLEL_MIN_FILES`` files the workers start, and they parse batches of the files
    given so far while this process takes the next ones from ``items`` (reading a large
    workspace takes seconds of this process's core, during which the workers' cores would
    otherwise wait). This process parses only once ``items`` is exhausted.

    The facts a worker parses cost a pickle there and an unpickle here (together about a third
    of parsing them), so this process does its share itself: it takes batches from the small
    end of a shared queue while the workers take from the large end, and keeps at most four
    batches handed to each worker, so the split follows whichever side is faster.
    ``progress(files, nbytes)`` is called with the number of files and of bytes parsed so far,
    after each batch once ``items`` is exhausted (the bytes measure the work: this process's
    batches hold many small files, the workers' few large ones). ``stop`` set: returns what was
    parsed so far, the rest not parsed (a cancelled index)."""
    workers = workers or min(os.cpu_count() or 1, 8)
    it = iter(items)
    head = list(itertools.islice(it, PARALLEL_MIN_FILES))
    source = itertools.chain(head, it)
    if workers < 2 or len(head) < PARALLEL_MIN_FILES:
        rest = head + list(it)
        if stop is not None and stop.is_set():
            return {}
        out = dict(_parse_batch(rest, keep=keep))
        if progress is not None:
            progress(len(out), sum(len(data) for _, data in rest))
        return out
    import collections
    import concurrent.futures as cf
    import multiprocessing

    out: dict[str, Parsed] = {}
    given: list[tuple[str, bytes]] = []  # every item taken from ``items`` (what a failed pool leaves is parsed here)
    pending: collections.deque = collections.deque()  # batches not handed out yet
    futures: dict = {}  # future -> bytes of its batch
    parsed_bytes = 0
    in_flight = 4 * (workers - 1)

    def take_done() -> None:
        nonlocal parsed_bytes
        for fut in [f for f in futures if f.done()]:
            out.update(fut.result())
            parsed_bytes += futures.pop(fut)

    def hand_out(pool) -> None:
        while pending and len(futures) < in_flight:
            batch = pending.popleft()
            futures[pool.submit(_parse_batch, batch)] = sum(len(data) for _, data in batch)

    pool = None
    try:
        # forkserver: safe in a multi-threaded process (the language server), unlike fork; the
        # server imports the parser once, so each worker starts in milliseconds
        method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
        ctx = multiprocessing.get_context(method)
        if method == "forkserver":
            ctx.set_forkserver_preload(["__main__", __name__])
        pool = cf.ProcessPoolExecutor(max_workers=workers - 1, mp_context=ctx)
        # while ``items`` reads: batches in the order given, to the workers as they free up
        batch: list[tuple[str, bytes]] = []
        size = 0
        for item in _raised_apart(source):
            given.append(item)
            batch.append(item)
            size += len(item[1])
            if size >= BATCH_BYTES:
                pending.append(batch)
                batch, size = [], 0
                take_done()
                hand_out(pool)
        # the rest, largest files first to the workers, this process from the small end
        rest = [item for b in pending for item in b] + batch
        pending.clear()
        pending.extend(_batches(rest))
        del rest, batch
        while pending or futures:
            if stop is not None and stop.is_set():
                break
            hand_out(pool)
            if pending:
                batch = pending.pop()
                out.update(_parse_batch(batch, keep=keep))
                parsed_bytes += sum(len(data) for _, data in batch)
            else:
                cf.wait(futures, return_when=cf.FIRST_COMPLETED)
            take_done()
            if progress is not None:
                progress(len(out), parsed_bytes)
    except _ItemsRaised as exc:
        raise exc.__cause__ from None  # an error of ``items`` (reading), not of the workers
    except (OSError, cf.process.BrokenProcessPool) as exc:
        log.warning("parallel parsing failed (%s); parsing in this process", exc)
        given.extend(source)  # what was not read yet
        rest = [item for item in given if item[0] not in out]
        out.update(_parse_batch(rest, keep=keep))
    finally:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
    return out
