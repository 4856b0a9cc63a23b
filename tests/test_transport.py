"""The server's stdio transport (``server/transport.py``): messages that arrive together in one
write are each answered, in order, whether stdin is a pipe (read by the event loop) or a
regular file (pygls's thread reader)."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def _frame(msg: dict) -> bytes:
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _session() -> bytes:
    """initialize, shutdown and exit, back to back (one write)."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"processId": None, "rootUri": None, "capabilities": {}}}
    return (_frame(init) + _frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
            + _frame({"jsonrpc": "2.0", "method": "exit"}))


def _responses(out: bytes) -> list[dict]:
    msgs = []
    while out:
        head, _, rest = out.partition(b"\r\n\r\n")
        n = int(next(h for h in head.split(b"\r\n") if h.startswith(b"Content-Length:")).split(b":")[1])
        msgs.append(json.loads(rest[:n]))
        out = rest[n:]
    return [m for m in msgs if "id" in m and "method" not in m]


def _run(stdin, tmp_path, data: bytes | None = None) -> list[dict]:
    env = dict(os.environ, ORBIT_DATA_DIR=str(tmp_path / "data"))
    proc = subprocess.run([sys.executable, "-m", "orbit_lsp"], stdin=stdin, input=data, capture_output=True,
                          timeout=60, env=env)
    return _responses(proc.stdout)


def test_messages_in_one_write_through_a_pipe(tmp_path):
    got = _run(None, tmp_path, _session())
    assert [m["id"] for m in got] == [1, 2]
    assert got[0]["result"]["serverInfo"]["name"] == "orbit-lsp" and got[1]["result"] is None


def test_messages_from_a_regular_file(tmp_path):
    script = tmp_path / "session.bin"
    script.write_bytes(_session())
    with script.open("rb") as f:
        got = _run(f, tmp_path)
    assert [m["id"] for m in got] == [1, 2]


def test_stdin_from_dev_null_ends_the_server(tmp_path):
    """``/dev/null`` is a character device the event loop accepts as a pipe, then epoll refuses
    it: the server waited forever. It now reads it like a file: end of input, exit 0."""
    env = dict(os.environ, ORBIT_DATA_DIR=str(tmp_path / "data"))
    with open(os.devnull, "rb") as f:
        proc = subprocess.run([sys.executable, "-m", "orbit_lsp"], stdin=f, capture_output=True, timeout=60, env=env)
    assert proc.returncode == 0 and proc.stdout == b""
    assert b"Traceback" not in proc.stderr


def _read_frame(out) -> dict:
    n = None
    while True:
        line = out.readline()
        assert line, "the server closed its output"
        if line in (b"\r\n", b"\n"):
            break
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    return json.loads(out.read(n))


def test_a_response_with_non_ascii_text_is_framed_by_its_bytes(tmp_path):
    """``Content-Length`` counts the bytes of the UTF-8 body: a response naming a non-ASCII
    path is read whole, and the next frame starts where its header says."""
    uri = "file:///tmp/ünïcödé/模块.py"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"processId": None, "rootUri": None, "capabilities": {}}}
    impact = {"jsonrpc": "2.0", "id": 2, "method": "orbit/impact", "params": {"textDocument": {"uri": uri}}}
    env = dict(os.environ, ORBIT_DATA_DIR=str(tmp_path / "data"))
    proc = subprocess.Popen([sys.executable, "-m", "orbit_lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    try:
        proc.stdin.write(_frame(init) + _frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
                         + _frame(impact))
        proc.stdin.flush()
        got = []
        while len(got) < 2:
            msg = _read_frame(proc.stdout)
            if "id" in msg and "method" not in msg:
                got.append(msg)
        proc.stdin.write(_frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}))
        proc.stdin.flush()
        while "id" not in (msg := _read_frame(proc.stdout)) or "method" in msg:
            pass
        got.append(msg)
        proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit"}))
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    assert [m["id"] for m in got] == [1, 2, 3]
    assert uri in got[1]["error"]["message"] and got[2]["result"] is None
