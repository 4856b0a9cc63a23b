"""A raw JSON-RPC client of a real ``orbit-lsp`` process over pipes, for the hardening tests
and the attack benchmark (``bench/attack.py``): frames are written as given (malformed ones
included), optionally one byte per write, and every frame the server sends is collected.

``RawLsp(env).start()`` runs ``python -m orbit_lsp``; ``send(obj | bytes)`` writes a frame (a
dict is JSON-encoded, bytes are sent as the body verbatim, ``raw=True`` sends bytes as they
are, headers included); ``response(id, timeout)`` waits for the answer to a request;
``request(method, params)`` does both. ``messages`` holds everything received, in order.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

_ABSENT = object()


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class RawLsp:
    def __init__(self, env: dict[str, str] | None = None, cwd: Path | None = None):
        self.env = dict(os.environ, **(env or {}))
        self.cwd = cwd
        self.proc: subprocess.Popen | None = None
        self.messages: list[dict] = []
        self._cond = threading.Condition()
        self._next_id = 1_000_000
        self.stderr_lines: list[str] = []

    # -- process ------------------------------------------------------------------------------
    def start(self) -> "RawLsp":
        self.proc = subprocess.Popen([sys.executable, "-m", "orbit_lsp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env, cwd=self.cwd)
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        return self

    def _drain_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr_lines.append(line.decode("utf-8", "replace"))

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    with self._cond:
                        self._cond.notify_all()
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = out.read(length or 0)
            msg = json.loads(body)
            with self._cond:
                self.messages.append(msg)
                self._cond.notify_all()
            if "method" in msg and "id" in msg:  # a server->client request: answer it
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> int | None:
        if self.proc is None:
            return None
        try:
            self.request("shutdown", None, timeout=timeout)
            self.send({"jsonrpc": "2.0", "method": "exit"})
            return self.proc.wait(timeout)
        except Exception:  # noqa: BLE001 - a stuck server is killed
            self.proc.kill()
            return self.proc.wait(timeout)
        finally:
            for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                try:
                    f.close()
                except OSError:
                    pass

    # -- writing ------------------------------------------------------------------------------
    def send(self, msg: Any, *, raw: bool = False, bytewise: bool = False) -> None:
        """Write one frame: a dict as JSON, bytes as the body (``raw``: bytes as they are)."""
        data = msg if raw else frame(msg if isinstance(msg, bytes) else json.dumps(msg).encode())
        stdin = self.proc.stdin
        if bytewise:
            for i in range(len(data)):
                stdin.write(data[i:i + 1])
                stdin.flush()
        else:
            stdin.write(data)
            stdin.flush()

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def request(self, method: str, params: Any = _ABSENT, timeout: float = 30.0, bytewise: bool = False) -> dict:
        """Send a request and return its response message (``result`` or ``error``)."""
        msg_id = self.new_id()
        msg = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not _ABSENT:
            msg["params"] = params
        self.send(msg, bytewise=bytewise)
        return self.response(msg_id, timeout)

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    # -- reading ------------------------------------------------------------------------------
    def responses(self, msg_id: Any) -> list[dict]:
        with self._cond:
            return [m for m in self.messages if "method" not in m and m.get("id") == msg_id]

    def response(self, msg_id: Any, timeout: float = 30.0) -> dict:
        """The response with ``msg_id`` (``None``: the next id-null response not yet taken),
        waiting at most ``timeout`` s; raises TimeoutError."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for i, m in enumerate(self.messages):
                    if "method" not in m and m.get("id") == msg_id and not m.get("_taken"):
                        m["_taken"] = True
                        return m
                left = deadline - time.monotonic()
                if left <= 0 or not self.alive():
                    raise TimeoutError(f"no response to id {msg_id!r} within {timeout} s")
                self._cond.wait(min(left, 0.2))

    def notifications(self, method: str) -> list[dict]:
        with self._cond:
            return [m for m in self.messages if m.get("method") == method and "id" not in m]

    def initialize(self, root: Path, timeout: float = 60.0) -> dict:
        """initialize + initialized with ``root`` as the only folder; waits until it is indexed."""
        from pygls.uris import from_fs_path

        uri = from_fs_path(str(root))
        got = self.request("initialize", {"processId": os.getpid(), "rootUri": uri, "capabilities": {},
                                          "workspaceFolders": [{"uri": uri, "name": root.name}]}, timeout)
        self.notify("initialized", {})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.request("orbit/status", {}, timeout)["result"]
            if st["workspaces"] and all(w["last_index"] for w in st["workspaces"]):
                return got
            time.sleep(0.05)
        raise TimeoutError("workspace not indexed")
