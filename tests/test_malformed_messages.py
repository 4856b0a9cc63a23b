"""Malformed messages to a real ``orbit-lsp`` process, through a raw JSON-RPC client over pipes
(``bench/raw_lsp.py``), some written one byte per write: every request gets an answer, the
right JSON-RPC error, promptly, with no ``window/showMessage`` popup, and the server stays
healthy (issue 20 item 3). Includes a seeded fuzz of a few hundred generated messages."""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import pytest
from pygls.uris import from_fs_path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench` is not an installed package

from bench.raw_lsp import RawLsp  # noqa: E402

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
ANSWER_BOUND_S = 10.0  # generous: 2 shared cores; a hang is what is caught


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("malformed") / "ws"
    root.mkdir()
    (root / "app.py").write_text("def helper():\n    return 1\n\n\ndef main():\n    return helper()\n")
    return root


@pytest.fixture(scope="module")
def lsp(ws):
    client = RawLsp().start()
    client.initialize(ws)
    yield client
    client.stop()


def _hover(ws: Path, line: int = 0, character: int = 4) -> dict:
    return {"textDocument": {"uri": from_fs_path(str(ws / "app.py"))}, "position": {"line": line, "character": character}}


def _assert_healthy(lsp: RawLsp, ws: Path) -> None:
    got = lsp.request("textDocument/hover", _hover(ws), timeout=ANSWER_BOUND_S)
    assert "error" not in got, got
    assert "helper" in json.dumps(got["result"])
    assert lsp.alive()


def _popups(lsp: RawLsp) -> list[dict]:
    """Messages shown to the user, except the announcement of invalid settings (sent once per
    distinct problem, by design: the fuzz sends bad ``workspace/didChangeConfiguration``s)."""
    return [m for m in lsp.notifications("window/showMessage")
            if not m["params"]["message"].startswith("orbit-lsp: invalid setting")]


@pytest.mark.parametrize("bytewise", [False, True], ids=["one-write", "byte-by-byte"])
def test_standard_request_with_unstructurable_params_gets_invalid_params(lsp, ws, bytewise):
    before = len(_popups(lsp))
    for params in (_hover(ws, line=-1), {"textDocument": _hover(ws)["textDocument"]},
                   _hover(ws, line=2 ** 31), {"textDocument": {}, "position": {"line": 0, "character": 0}},
                   {"textDocument": "x", "position": [0, 0]}, None, [], "hover"):
        got = lsp.request("textDocument/hover", params, timeout=ANSWER_BOUND_S, bytewise=bytewise)
        assert got["error"]["code"] == INVALID_PARAMS, (params, got)
        assert "textDocument/hover" in got["error"]["message"]
    got = lsp.request("textDocument/hover", _hover(ws, line=-1), timeout=ANSWER_BOUND_S)
    assert "position.line" in got["error"]["message"].lower()  # names the offending field
    assert len(_popups(lsp)) == before
    _assert_healthy(lsp, ws)


def test_orbit_requests_without_params_member_are_answered(lsp, ws):
    # no params member: status takes none (answered); impact needs a document (InvalidParams)
    assert "workspaces" in lsp.request("orbit/status", timeout=ANSWER_BOUND_S)["result"]
    for method in ("orbit/impact", "orbit/remember", "orbit/forget", "orbit/confirm", "orbit/ask",
                   "orbit/proposeChange"):
        got = lsp.request(method, timeout=ANSWER_BOUND_S)
        assert got["error"]["code"] == INVALID_PARAMS, (method, got)
    _assert_healthy(lsp, ws)
    time.sleep(0.2)  # stderr is read by a thread
    assert "Traceback" not in "".join(lsp.stderr_lines)  # the input was at fault: no traceback logged


@pytest.mark.parametrize("bytewise", [False, True], ids=["one-write", "byte-by-byte"])
def test_unparsable_frames_get_parse_error_with_null_id(lsp, ws, bytewise):
    before = len(_popups(lsp))
    bodies = [b'{"jsonrpc": "2.0", "id": 7, "method": "textDocument/hover", ',  # truncated JSON
              b'{"jsonrpc": "2.0", "id": 8, "method": "orbit/status", "params": {"a": "\xff\xfe"}}',  # not UTF-8
              b"\xc3\x28", b"", b"[" * 100_000, b"nul\x00"]
    for body in bodies:
        lsp.send(body, bytewise=bytewise and len(body) < 200)
        got = lsp.response(None, timeout=ANSWER_BOUND_S)
        assert got["error"]["code"] == PARSE_ERROR, (body[:40], got)
        assert got["id"] is None
    assert lsp.responses(7) == [] and lsp.responses(8) == []  # nothing answered under a guessed id
    assert len(_popups(lsp)) == before
    _assert_healthy(lsp, ws)


def test_frames_that_are_not_json_rpc_messages_get_invalid_request(lsp, ws):
    cases = [([1, 2], None), ("text", None), ({"id": 9, "method": "orbit/status"}, 9),  # no jsonrpc
             ({"jsonrpc": "1.0", "id": 10, "method": "orbit/status"}, 10),
             ({"jsonrpc": "2.0", "id": 11, "method": 5}, 11),
             ({"jsonrpc": "2.0", "id": {"x": 1}, "method": "orbit/status"}, None),
             ({"jsonrpc": "2.0", "id": 1.5, "method": "orbit/status"}, None),
             ({"jsonrpc": "2.0"}, None)]
    for msg, expect_id in cases:
        lsp.send(msg)
        got = lsp.response(expect_id, timeout=ANSWER_BOUND_S)
        assert got["error"]["code"] == INVALID_REQUEST, (msg, got)
    _assert_healthy(lsp, ws)


def test_bad_framing_is_answered_and_the_stream_recovers(lsp, ws):
    lsp.send(b"Content-Length: abc\r\n\r\n", raw=True)
    assert lsp.response(None, timeout=ANSWER_BOUND_S)["error"]["code"] == PARSE_ERROR
    lsp.send(b"X-Nothing: 1\r\n\r\n", raw=True)  # no Content-Length
    assert lsp.response(None, timeout=ANSWER_BOUND_S)["error"]["code"] == PARSE_ERROR
    body = json.dumps({"jsonrpc": "2.0", "id": 12, "method": "orbit/status"}).encode()
    lsp.send(b"content-length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n%s"
             % (len(body), body), raw=True, bytewise=True)  # header names are case-insensitive
    assert "result" in lsp.response(12, timeout=ANSWER_BOUND_S)
    _assert_healthy(lsp, ws)


def test_unknown_method_and_cancel_without_params(lsp, ws):
    assert lsp.request("orbit/nothing", {}, timeout=ANSWER_BOUND_S)["error"]["code"] == -32601
    lsp.send({"jsonrpc": "2.0", "method": "$/cancelRequest"})  # a notification: nothing to answer
    lsp.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": 3}})
    _assert_healthy(lsp, ws)
    assert not _popups(lsp)


# -- fuzz ---------------------------------------------------------------------------------------------
_METHODS = ["textDocument/hover", "textDocument/codeLens", "codeLens/resolve", "textDocument/prepareCallHierarchy",
            "callHierarchy/incomingCalls", "callHierarchy/outgoingCalls", "workspace/symbol",
            "textDocument/codeAction", "orbit/impact", "orbit/status", "orbit/memories", "orbit/remember",
            "orbit/forget", "orbit/confirm", "orbit/proposeChange", "workspace/executeCommand"]
_NOTIFICATIONS = ["textDocument/didOpen", "textDocument/didChange", "textDocument/didClose", "textDocument/didSave",
                  "$/cancelRequest", "workspace/didChangeConfiguration", "$/setTrace"]
_ODD_VALUES = [None, True, -1, 2 ** 31, 2 ** 70, -2 ** 63, 1.5, "", "x" * 5000, "\x00", "\ud800", "file:///\x00.py",
               "file:///etc/passwd", "not a uri", [], {}, [None], {"line": "0"}, {"uri": None}]


def _mutate(rng: random.Random, value, depth: int = 0):
    """A copy of ``value`` (JSON data) with one part dropped, replaced or retyped."""
    if isinstance(value, dict) and value and depth < 4 and rng.random() < 0.7:
        key = rng.choice(sorted(value))
        out = dict(value)
        roll = rng.random()
        if roll < 0.25:
            del out[key]
        elif roll < 0.5:
            out[key] = rng.choice(_ODD_VALUES)
        else:
            out[key] = _mutate(rng, value[key], depth + 1)
        return out
    return rng.choice(_ODD_VALUES)


def _fuzz_messages(ws: Path, n: int, seed: int) -> list[tuple[bytes, object]]:
    """``n`` (frame body, expected response id or "none"/"null") pairs."""
    rng = random.Random(seed)
    good_uri = from_fs_path(str(ws / "scratch.py"))  # notifications may open it: app.py stays as on disk
    base = {"textDocument": {"uri": good_uri, "version": 1, "text": "x = 1\n", "languageId": "python"},
            "position": {"line": 0, "character": 4}, "query": "h", "context": {"diagnostics": []},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
            "item": {"name": "helper", "uri": good_uri}, "id": 3, "command": "orbit.nothing", "arguments": [],
            "contentChanges": [{"text": "y"}], "settings": {"orbit": {"maxHops": "many"}}}
    out: list[tuple[bytes, object]] = []
    for i in range(n):
        kind = rng.random()
        msg_id = 50_000 + i
        if kind < 0.08:  # not UTF-8 / not JSON
            body = rng.choice([b"\xff" * rng.randint(1, 9), b'{"jsonrpc": "2.0", "id": %d' % msg_id,
                               bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))])
            try:
                json.loads(body.decode("utf-8"))
                continue
            except (ValueError, UnicodeDecodeError):
                out.append((body, "null"))
            continue
        if kind < 0.25:  # notification with odd params: nothing to answer, nothing to break
            msg = {"jsonrpc": "2.0", "method": rng.choice(_NOTIFICATIONS), "params": _mutate(rng, base)}
            if msg["method"] == "textDocument/didOpen" and rng.random() < 0.5:
                msg["params"] = {"textDocument": {**base["textDocument"], "uri": rng.choice(_ODD_VALUES)}}
            out.append((json.dumps(msg).encode(), "none"))
            continue
        msg = {"jsonrpc": "2.0", "id": msg_id, "method": rng.choice(_METHODS)}
        roll = rng.random()
        if roll < 0.15:
            pass  # no params member
        elif roll < 0.3:
            msg["params"] = rng.choice(_ODD_VALUES)
        else:
            msg["params"] = _mutate(rng, base)
        out.append((json.dumps(msg).encode(), msg_id))
    return out


def test_fuzz_every_request_is_answered_and_the_server_stays_healthy(lsp, ws):
    before = len(_popups(lsp))
    messages = _fuzz_messages(ws, 300, seed=20)
    requests = sum(isinstance(e, int) for _, e in messages)
    assert requests >= 150  # a few hundred messages, most of them requests
    unanswered = []
    for body, expect in messages:
        lsp.send(body)
        try:
            if expect == "null":
                assert lsp.response(None, timeout=ANSWER_BOUND_S)["error"]["code"] == PARSE_ERROR
            elif isinstance(expect, int):
                got = lsp.response(expect, timeout=ANSWER_BOUND_S)
                assert "result" in got or got["error"]["code"] != -32603 or "Traceback" not in got["error"]["message"]
        except TimeoutError:
            unanswered.append(body[:200])
    assert not unanswered, unanswered
    for _, expect in messages:
        if isinstance(expect, int):
            assert len(lsp.responses(expect)) == 1  # exactly one answer each
    assert len(_popups(lsp)) == before, _popups(lsp)[before:]
    _assert_healthy(lsp, ws)


# -- input at fault: clear InvalidParams, never an internal error (issue 20 item 16) ----------------
def test_unusable_uris_and_out_of_range_integers_are_invalid_params(lsp, ws):
    app = from_fs_path(str(ws / "app.py"))
    pos = {"line": 0, "character": 4}
    cases = [
        ("textDocument/hover", {"textDocument": {"uri": app + "\x00"}, "position": pos}, "params.textDocument.uri"),
        ("textDocument/hover", {"textDocument": {"uri": app[:-3] + "\ud800.py"}, "position": pos},
         "params.textDocument.uri"),
        ("orbit/impact", {"textDocument": {"uri": "file:///\x00"}}, "params.textDocument.uri"),
        ("orbit/impact", {"textDocument": {"uri": app}, "position": {"line": 2 ** 31, "character": 0}},
         "params.position.line"),
        ("orbit/impact", {"textDocument": {"uri": app}, "position": {"line": 0, "character": 2 ** 70}},
         "params.position.character"),
        ("orbit/ask", {"question": "who calls helper?", "conversationId": 2 ** 70}, "params.conversationId"),
        ("orbit/ask", {"question": "who calls \udc00 helper?"}, "params.question"),
        ("workspace/symbol", {"query": "help\x00er"}, "params.query"),  # a NUL would end the Cypher text
        ("workspace/executeCommand", {"command": "orbit.showImpact", "arguments": [app, {"line": 2 ** 31, "character": 0}]},
         "line"),
    ]
    for method, params, named in cases:
        got = lsp.request(method, params, timeout=ANSWER_BOUND_S)
        assert got.get("error", {}).get("code") == INVALID_PARAMS, (method, params, got)
        assert named in got["error"]["message"], got
    # a percent-encoded NUL decodes to no file: an empty answer, not an internal error
    got = lsp.request("textDocument/hover", {"textDocument": {"uri": app[:-3] + "%00.py"}, "position": pos},
                      timeout=ANSWER_BOUND_S)
    assert got == {**got, "result": None}, got
    _assert_healthy(lsp, ws)


def test_an_invalid_falkordb_url_is_named_and_the_default_used(ws):
    client = RawLsp().start()
    try:
        from pygls.uris import from_fs_path as uri_of

        root = uri_of(str(ws))
        client.request("initialize", {"processId": None, "rootUri": root, "capabilities": {},
                                      "initializationOptions": {"falkordbUrl": "not a url"},
                                      "workspaceFolders": [{"uri": root, "name": "ws"}]}, timeout=60)
        client.notify("initialized", {})
        status = client.request("orbit/status", {}, timeout=ANSWER_BOUND_S)
        assert status["result"]["falkordb"]["mode"] == "embedded" and status["result"]["falkordb"]["online"]
        shown = [m["params"]["message"] for m in client.notifications("window/showMessage")]
        assert any("orbit.falkordbUrl" in m and "using the default" in m for m in shown), shown
        assert not any("not a url" in m for m in shown)  # the value itself (it may hold a password) is not echoed
    finally:
        client.stop()
