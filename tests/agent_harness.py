"""A real HTTP server on 127.0.0.1 speaking OpenAI chat completions with scripted replies, for
agent tests (the ``openai`` client talks to it over TCP; nothing is monkeypatched).

``ModelServer()`` (a context manager, or ``start()``/``stop()``): ``url`` is the base URL
(``http://127.0.0.1:PORT/v1``); ``script(model, *replies)`` queues replies per model name (the
``model`` field of the request), each either a full ``{"status", "headers", "body", "delay"}``
dict or built with ``action``/``answer``/``content``/``reasoning_only``/``cut_off``/``rate_limited``;
``default`` answers when a model's queue is empty (else HTTP 500 "script exhausted").
``requests`` records every request: ``{"t", "model", "body" (raw text), "json", "headers"}``.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


def completion(message: dict, model: str = "m") -> dict:
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 1764500000, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", **message}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def content(text: str, delay: float = 0.0) -> dict:
    return {"status": 200, "headers": {}, "body": completion({"content": text}), "delay": delay}


def action(tool: str, **args: Any) -> dict:
    return content(json.dumps({"tool": tool, "args": args}))


def answer(text: str) -> dict:
    return content(json.dumps({"answer": text}))


def reasoning_only(reasoning: str, field: str = "reasoning_content") -> dict:
    return {"status": 200, "headers": {}, "body": completion({"content": "", field: reasoning})}


def cut_off(reasoning: str = "", text: str = "", completion_tokens: int = 1024) -> dict:
    """A reply stopped by its token budget (``finish_reason: "length"``): ``text`` (content) and
    ``reasoning`` hold only what was written before the cut."""
    body = completion({"content": text, "reasoning_content": reasoning})
    body["choices"][0]["finish_reason"] = "length"
    body["usage"] = {"prompt_tokens": 10, "completion_tokens": completion_tokens,
                     "total_tokens": 10 + completion_tokens}
    return {"status": 200, "headers": {}, "body": body}


def rate_limited(headers: dict | None = None, code: str = "rate_limit_exceeded") -> dict:
    return {"status": 429, "headers": headers or {},
            "body": {"error": {"message": "Rate limit reached for requests.", "type": code, "param": None,
                               "code": code}}}


def server_error(status: int = 502) -> dict:
    return {"status": status, "headers": {}, "body": {"error": {"message": "upstream exploded", "type": "server_error"}}}


class ModelServer:
    def __init__(self) -> None:
        self.queues: dict[str, list[dict]] = {}
        self.default: dict | Callable[[dict], dict] | None = None
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self.t0 = time.monotonic()

    # -- scripting ------------------------------------------------------------------------------
    def script(self, model: str, *replies: dict) -> "ModelServer":
        with self._lock:
            self.queues.setdefault(model, []).extend(replies)
        return self

    def reset(self) -> None:
        with self._lock:
            self.queues.clear()
            self.requests.clear()
            self.default = None
            self.t0 = time.monotonic()

    def bodies(self) -> list[str]:
        with self._lock:
            return [r["body"] for r in self.requests]

    def models(self) -> list[str]:
        with self._lock:
            return [r["model"] for r in self.requests]

    def _next(self, req: dict) -> dict:
        with self._lock:
            self.requests.append(req)
            q = self.queues.get(req["model"])
            if q:
                return q.pop(0)
            d = self.default
        if callable(d):
            return d(req)
        if d is not None:
            return d
        return {"status": 500, "headers": {}, "body": {"error": {"message": f"script exhausted for {req['model']}"}}}

    # -- server ---------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> "ModelServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(n).decode("utf-8", "replace")
                try:
                    data = json.loads(raw)
                except ValueError:
                    data = {}
                req = {"t": time.monotonic() - server.t0, "path": self.path, "model": data.get("model"),
                       "body": raw, "json": data, "headers": {k.lower(): v for k, v in self.headers.items()}}
                reply = server._next(req)
                if reply.get("delay"):
                    time.sleep(reply["delay"])
                body = json.dumps(reply.get("body", {})).encode()
                try:
                    self.send_response(reply.get("status", 200))
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    for k, v in (reply.get("headers") or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True, name="model-server").start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "ModelServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
