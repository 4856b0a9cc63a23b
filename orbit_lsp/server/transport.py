"""Serving LSP over stdin/stdout with stdin read by the event loop.

pygls's stdio server reads each message with three blocking calls in its thread pool (the
header line, the blank line, the body), so every message costs three thread hand-offs before
it is even parsed, and messages that arrive together (an editor resolving the code lenses on
screen sends a dozen at once) are read one hand-off after another. Here stdin is an asyncio
pipe (``loop.connect_read_pipe``) read into an ``asyncio.StreamReader``: what has arrived is
parsed without leaving the event loop. The message loop itself is pygls's (``run_async``).
When stdin is not a pipe, socket or terminal (a regular file, say), pygls's reader is used.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from typing import BinaryIO

from pygls.io_ import StdinAsyncReader, StdoutWriter, run_async
from pygls.server import JsonRPCServer

log = logging.getLogger(__name__)

READ_LIMIT = 1 << 20  # longest header line (bytes); bodies are read by length, unbounded


async def _stdin_reader(stdin: BinaryIO) -> asyncio.StreamReader | None:
    """An ``asyncio.StreamReader`` fed from ``stdin`` by the running loop; None when the loop
    cannot watch it (a regular file, or a platform without pipe transports for it)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    except (ValueError, OSError, NotImplementedError) as exc:
        log.info("stdin read by pygls's thread reader: %s", exc)
        return None
    return reader


def serve_stdio(server: JsonRPCServer, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """Run ``server`` on stdin/stdout until the client closes stdin or sends ``exit``; what
    pygls's ``start_io`` does, with stdin read by the event loop (see the module's doc)."""
    stdin = stdin or sys.stdin.buffer
    server._stop_event = threading.Event()  # pygls's shutdown() sets it to end the loop
    server.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))

    async def main() -> None:
        reader = await _stdin_reader(stdin) or StdinAsyncReader(stdin, server.thread_pool)
        await run_async(stop_event=server._stop_event, reader=reader, protocol=server.protocol,
                        logger=log, error_handler=server.report_server_error)

    try:
        asyncio.run(main())
    except (BrokenPipeError, asyncio.IncompleteReadError):
        log.error("Connection to the client is lost! Shutting down the server.")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
