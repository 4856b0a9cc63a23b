"""Writing every byte of a message to a pipe, whatever Python's buffering of the stream.

With ``PYTHONUNBUFFERED=1`` or ``python -u`` (set in many containers, CI images and editor
configurations), ``sys.stdout.buffer`` is the raw ``FileIO``: its ``write`` makes one
``write(2)`` call and returns how many bytes it wrote. When the pipe is full and a signal
interrupts the wait (the process stopped and continued: Ctrl-Z and ``fg`` of an editor in a
terminal, a debugger or profiler attaching), that is only part of the data. A caller that
ignores the count loses the rest: an LSP client then reads the next message as the rest of
this one and waits forever (measured: 100 KB of a 231 KB ``orbit/impact`` answer lost while
``py-spy`` sampled the server, which stops it for each sample).

``print`` and ``sys.stdout.write`` lose the rest the same way (the text layer ignores the count
its raw stream returns): ``complete_stdout`` gives the command line a buffered ``sys.stdout``.

Only ``io``, ``select`` and ``sys``: the command line's fast path (``launch``) imports this.
"""

from __future__ import annotations

import io
import select
import sys
from typing import BinaryIO

WAIT_S = 1.0  # longest single wait for a non-blocking pipe to take more (then it is tried again)


def write_all(stream: BinaryIO, data: bytes) -> None:
    """Write all of ``data`` to ``stream`` and flush it. A raw stream's partial writes are
    continued from where they stopped; a non-blocking one (``write`` returning None, or
    ``BlockingIOError``) is waited on until it takes more. Raises what the stream raises
    otherwise (``BrokenPipeError`` when the reader is gone)."""
    view = memoryview(data)
    while view:
        try:
            n = stream.write(view)
        except BlockingIOError as exc:
            n = exc.characters_written
            _wait_writable(stream)
        if n is None:  # a non-blocking raw stream that took nothing
            _wait_writable(stream)
            n = 0
        view = view[n:]
    while True:
        try:
            stream.flush()
            return
        except BlockingIOError:
            _wait_writable(stream)


def _wait_writable(stream: BinaryIO) -> None:
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    select.select([], [fd], [], WAIT_S)


def complete_stdout() -> bool:
    """When ``sys.stdout`` writes straight to its raw stream (``PYTHONUNBUFFERED``, ``python -u``),
    replace it with a text layer over a ``BufferedWriter`` of that stream (same encoding and
    error handler), which continues interrupted writes. Line-buffered, so output still reaches
    a pipe line by line; the rest is flushed at exit. Returns whether it replaced it."""
    out = sys.stdout
    raw = getattr(out, "buffer", None)
    if not isinstance(raw, io.RawIOBase) or not raw.writable():
        return False
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(raw), encoding=out.encoding, errors=out.errors,
                                  line_buffering=True, write_through=True)
    return True
