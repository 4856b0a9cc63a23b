"""Errors reported outside a request's answer (``OrbitServer.report_server_error``) never
recurse: when the client's pipe is closed, the failed write is logged, not reported to the
client by another write that fails the same way (a server exiting while it published
diagnostics spun for minutes, each level logging a longer traceback)."""

from __future__ import annotations

import logging

from lsprotocol import types

from orbit_lsp.server.app import OrbitServer


class _ClosedPipe:
    def __init__(self):
        self.writes = 0

    def write(self, data: bytes) -> None:
        self.writes += 1
        raise ValueError("I/O operation on closed file")

    def close(self) -> None:
        pass


def test_a_write_to_a_closed_pipe_is_logged_once_and_not_sent_again(caplog):
    server = OrbitServer()
    pipe = _ClosedPipe()
    server.protocol.set_writer(pipe)
    with caplog.at_level(logging.ERROR, logger="orbit_lsp"):
        server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri="file:///x.py", diagnostics=[]))
    assert pipe.writes == 1
    reports = [r for r in caplog.records if r.name.startswith("orbit_lsp")]
    assert len(reports) == 1 and "I/O operation on closed file" in reports[0].getMessage()


class _Pipe:
    def __init__(self):
        self.sent: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    def close(self) -> None:
        pass


def test_a_failed_notification_handler_is_still_reported_to_the_client():
    server = OrbitServer()
    pipe = _Pipe()
    server.protocol.set_writer(pipe)
    server.report_server_error(RuntimeError("boom"), types.TEXT_DOCUMENT_DID_SAVE)
    assert len(pipe.sent) == 1 and b"window/logMessage" in pipe.sent[0] and b"RuntimeError: boom" in pipe.sent[0]
