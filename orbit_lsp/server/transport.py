"""Serving LSP over stdin/stdout with stdin read by the event loop, every frame answered.

pygls's stdio server reads each message with three blocking calls in its thread pool (the
header line, the blank line, the body), so every message costs three thread hand-offs before
it is even parsed, and messages that arrive together (an editor resolving the code lenses on
screen sends a dozen at once) are read one hand-off after another. Here stdin is an asyncio
pipe (``loop.connect_read_pipe``) read into an ``asyncio.StreamReader``: what has arrived is
parsed without leaving the event loop. When stdin is not a pipe, socket or terminal (a regular
file, say), pygls's thread reader is used.

The message loop (``serve_frames``) is this module's, not pygls's ``run_async``: pygls drops a
frame it cannot parse or structure without answering, so a client waits forever for the
answer to a request with a malformed body. Here framing is checked (a ``Content-Length``
header, case-insensitive, at most ``MAX_BODY_BYTES``) and each body is handed to
``OrbitProtocol.handle_frame``, which answers every request: ParseError (-32700, id null) for
a body that is not UTF-8 JSON, InvalidRequest (-32600) for a body that is not a JSON-RPC
message, InvalidParams (-32602) for params the method's type refuses (see
``server.protocol``).

Messages to the client are written whole (``CompleteWriter``), also when stdout is unbuffered
(``PYTHONUNBUFFERED``) and a signal interrupts a write to the full pipe (``orbit_lsp.stdio``).
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import stat
import sys
import threading
from typing import Any, BinaryIO

from pygls.io_ import StdinAsyncReader
from pygls.server import JsonRPCServer

from orbit_lsp.stdio import write_all

log = logging.getLogger(__name__)

READ_LIMIT = 1 << 20  # longest header line (bytes)
MAX_BODY_BYTES = 256 << 20  # longest message body (bytes); a longer one is skipped and answered
MAX_HEADER_LINES = 64  # header lines of one frame before it is declared malformed
PIPE_BYTES = 1 << 20  # the capacity asked for a stdout pipe (Linux allows up to /proc/sys/fs/pipe-max-size)
PARSE_ERROR = -32700


async def _stdin_reader(stdin: BinaryIO) -> asyncio.StreamReader | None:
    """An ``asyncio.StreamReader`` fed from ``stdin`` by the running loop; None when the loop
    cannot watch it: anything but a pipe or a socket (a regular file, a terminal, ``/dev/null``,
    which epoll refuses after the transport is made, so the server would wait forever), or a
    platform without pipe transports for it."""
    try:
        mode = os.fstat(stdin.fileno()).st_mode
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return None
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    except (ValueError, OSError, NotImplementedError) as exc:
        log.info("stdin read by pygls's thread reader: %s", exc)
        return None
    return reader


async def _readexactly(reader: Any, n: int) -> bytes | None:
    """``n`` bytes, or None at end of input (a short read of pygls's thread reader included)."""
    try:
        data = await reader.readexactly(n)
    except asyncio.IncompleteReadError:
        return None
    return data if len(data) == n else None


async def _skip(reader: Any, n: int) -> bool:
    """Read and drop ``n`` bytes (a body too long to keep); False at end of input."""
    while n > 0:
        chunk = await _readexactly(reader, min(n, 1 << 20))
        if chunk is None:
            return False
        n -= len(chunk)
    return True


async def serve_frames(stop_event: threading.Event, reader: Any, protocol: Any) -> None:
    """Read LSP frames (headers, a blank line, a body of ``Content-Length`` bytes) from
    ``reader`` (``readline()`` / ``readexactly(n)`` coroutines) until end of input or
    ``stop_event``; each body goes to ``protocol.handle_frame``. A frame without a valid
    ``Content-Length``, or one longer than ``MAX_BODY_BYTES``, is answered with a ParseError
    (id null) and skipped; the loop goes on with the next frame."""
    while not stop_event.is_set():
        length: int | None = None
        bad: str | None = None
        lines = 0
        while True:
            try:
                line = await reader.readline()
            except ValueError:  # a header line over READ_LIMIT (asyncio drops it)
                bad = f"header line longer than {READ_LIMIT} bytes"
                continue
            if not line:
                return  # end of input
            if not line.endswith(b"\n"):
                return  # end of input inside a header
            text = line.strip()
            if not text:
                if length is None and bad is None and lines == 0:
                    continue  # stray blank line between frames
                break
            lines += 1
            if lines > MAX_HEADER_LINES:
                bad = bad or f"more than {MAX_HEADER_LINES} header lines"
                continue
            name, sep, value = text.partition(b":")
            if sep and name.strip().lower() == b"content-length":
                value = value.strip()
                if value.isdigit() and len(value) <= 12:
                    length = int(value)
                else:
                    bad = bad or f"invalid Content-Length {value[:40]!r}"
            elif not sep:
                bad = bad or f"malformed header line {text[:40]!r}"
        if length is None:
            protocol.reply_error(None, PARSE_ERROR, f"malformed frame: {bad or 'no Content-Length header'}")
            continue
        if length > MAX_BODY_BYTES:
            protocol.reply_error(None, PARSE_ERROR,
                                 f"message of {length} bytes is longer than the limit of {MAX_BODY_BYTES}")
            if not await _skip(reader, length):
                return
            continue
        body = await _readexactly(reader, length) if length else b""
        if body is None:
            return
        protocol.handle_frame(body)


class CompleteWriter:
    """pygls's writer interface (``write(data)``, ``close()``) over a binary stream, writing
    every byte of each message (``stdio.write_all``). pygls's ``StdoutWriter`` writes once and
    ignores the count, which under ``PYTHONUNBUFFERED`` loses the rest of a message that a
    signal interrupted (see ``orbit_lsp.stdio``)."""

    def __init__(self, stream: BinaryIO):
        self._stream = stream

    def close(self) -> None:
        self._stream.close()

    def write(self, data: bytes) -> None:
        write_all(self._stream, data)


def widen_pipe(stream: BinaryIO) -> int | None:
    """Ask for a ``PIPE_BYTES`` pipe when ``stream`` is one (Linux's default is 64 KiB): an
    answer of a few hundred KB (an impact listing thousands of files: 444 KB) then goes into
    the pipe in one write, instead of in pieces that each wait for the client to read the
    last one while the event loop does nothing else. Returns the pipe's capacity now, or None
    when it is not a pipe or the platform cannot tell; a refusal (the user's pipe memory is at
    its limit) leaves the pipe as it was."""
    try:
        import fcntl

        fd = stream.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode) or not hasattr(fcntl, "F_SETPIPE_SZ"):
            return None
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except OSError as exc:
            log.info("stdout pipe left at its size: %s", exc)
        return fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
    except (ImportError, AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def serve_stdio(server: JsonRPCServer, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """Run ``server`` on stdin/stdout until the client closes stdin or sends ``exit``; what
    pygls's ``start_io`` does, with stdin read by the event loop and every frame answered
    (see the module's doc)."""
    stdin = stdin or sys.stdin.buffer
    server._stop_event = threading.Event()  # pygls's shutdown() sets it to end the loop
    stdout = stdout or sys.stdout.buffer
    widen_pipe(stdout)
    server.protocol.set_writer(CompleteWriter(stdout))

    async def main() -> None:
        reader = await _stdin_reader(stdin) or StdinAsyncReader(stdin, server.thread_pool)
        await serve_frames(server._stop_event, reader, server.protocol)

    try:
        asyncio.run(main())
    except BrokenPipeError:
        log.error("Connection to the client is lost! Shutting down the server.")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
