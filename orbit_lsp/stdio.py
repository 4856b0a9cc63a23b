"""Writing every byte of a message to a pipe, whatever Python's buffering of the stream.

With ``PYTHONUNBUFFERED=1`` or ``python -u`` (set in many containers, CI images and editor
configurations), ``sys.stdout.buffer`` is the raw ``FileIO``: its ``write`` makes one
``write(2)`` call and returns how many bytes it wrote. When the pipe is full and a signal
interrupts the wait (the process stopped and continued: Ctrl-Z and ``fg`` of an editor in a
terminal, a debugger or profiler attaching), that is only part of the data. A caller that
ignores the count loses the rest: an LSP client then reads the next message as the rest of
this one and waits forever (measured: 100 KB of a 231 KB ``orbit/impact`` answer lost while
``py-spy`` sampled the server, which stops it for each sample).

Only ``os`` and ``select``: the command line's fast path (``launch``) imports this.
"""

from __future__ import annotations

import select
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
