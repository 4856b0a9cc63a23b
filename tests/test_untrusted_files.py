"""Files a client names that the server must never open (issue 20 items 2 and 13): FIFOs and
sockets with a source name, ``.env`` files, links to them, links leaving the workspace. Each is
a trap: a FIFO blocks whoever opens it for reading until a writer comes, so a server that opens
one hangs. Requests on them get an empty answer or an error, promptly, and the server stays
healthy. Real ``orbit-lsp`` process, raw JSON-RPC client (``bench/raw_lsp.py``)."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest
from pygls.uris import from_fs_path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench` is not an installed package

from bench.raw_lsp import RawLsp  # noqa: E402
from orbit_lsp.index.walk import RefusedFile, read_workspace_file, workspace_file_refusal  # noqa: E402

BOUND_S = 10.0


@pytest.fixture(scope="module")
def traps(tmp_path_factory):
    base = tmp_path_factory.mktemp("traps")
    root, outside = base / "ws", base / "outside"
    root.mkdir(), outside.mkdir()
    (root / "app.py").write_text("def helper():\n    return 1\n\n\ndef main():\n    return helper()\n")
    os.mkfifo(root / "pipe.py")
    os.mkfifo(root / ".env")
    os.mkfifo(root / ".env.local")
    (root / "config").mkdir()
    os.mkfifo(root / "config" / ".env.production")
    os.symlink(".env", root / "settings.py")  # a link to a .env file
    os.symlink("config/.env.production", root / "prod.py")
    os.mkfifo(outside / "fifo.py")
    os.symlink(str(outside / "fifo.py"), root / "out.py")  # a link leaving the workspace
    os.symlink("/etc/passwd", root / "passwd.py")
    sock = socket.socket(socket.AF_UNIX)
    sock_path = root / "sock.py"
    if len(os.fsencode(sock_path)) < 100:
        sock.bind(str(sock_path))
    yield root
    sock.close()


@pytest.fixture(scope="module")
def lsp(traps):
    client = RawLsp().start()
    client.initialize(traps)
    yield client
    client.stop()


TRAPS = ["pipe.py", ".env", ".env.local", "config/.env.production", "settings.py", "prod.py", "out.py",
         "passwd.py", "sock.py"]


def _requests(uri: str) -> list[tuple[str, dict]]:
    pos = {"line": 0, "character": 4}
    td = {"uri": uri}
    return [("textDocument/hover", {"textDocument": td, "position": pos}),
            ("textDocument/codeLens", {"textDocument": td}),
            ("textDocument/prepareCallHierarchy", {"textDocument": td, "position": pos}),
            ("textDocument/codeAction", {"textDocument": td, "range": {"start": pos, "end": pos},
                                         "context": {"diagnostics": []}}),
            ("orbit/impact", {"textDocument": td, "position": pos}),
            ("workspace/executeCommand", {"command": "orbit.showImpact", "arguments": [uri, pos]})]


@pytest.mark.parametrize("name", TRAPS)
def test_requests_on_untrusted_files_are_answered_without_opening_them(lsp, traps, name):
    if not os.path.lexists(traps / name):
        pytest.skip("socket path too long for AF_UNIX here")
    uri = from_fs_path(str(traps / name))
    for method, params in _requests(uri):
        got = lsp.request(method, params, timeout=BOUND_S)
        result = got.get("result")
        assert "error" in got or result in (None, []) or method in ("orbit/impact", "workspace/executeCommand"), \
            (method, got)
        if "error" in got:
            assert got["error"]["code"] != -32603, (method, got)  # never an internal error
    hover = lsp.request("textDocument/hover", {"textDocument": {"uri": from_fs_path(str(traps / "app.py"))},
                                               "position": {"line": 0, "character": 4}}, timeout=BOUND_S)
    assert "helper" in json.dumps(hover["result"])  # still healthy, event loop not blocked


def test_refusals_name_the_reason(traps):
    assert workspace_file_refusal(traps, traps / ".env") == "a .env file"
    assert workspace_file_refusal(traps, traps / "config" / ".env.production") == "a .env file"
    assert workspace_file_refusal(traps, traps / "settings.py") == "a link to a .env file"
    assert workspace_file_refusal(traps, traps / "out.py") == "outside the workspace"
    assert workspace_file_refusal(traps, traps / "passwd.py") == "outside the workspace"
    assert workspace_file_refusal(traps, traps / "app.py") is None
    with pytest.raises(RefusedFile, match="not a regular file"):
        read_workspace_file(traps, traps / "pipe.py")  # refused, not waited on
    assert read_workspace_file(traps, traps / "app.py").startswith(b"def helper")
    with pytest.raises(RefusedFile, match="larger than 3 bytes"):
        read_workspace_file(traps, traps / "app.py", limit=3)


def test_a_dot_dot_after_a_link_is_refused_where_the_system_would_open_it(tmp_path):
    """``ws/link/../secret`` with ``link -> ../out/dir`` opens ``out/secret`` (the system follows
    the link before it applies ``..``): outside the workspace, so refused, and never read;
    ``ws/sub/back/../secret`` with ``back -> ../src`` opens ``ws/secret``: inside, read. The
    check and the read take the same real path."""
    ws, out = tmp_path / "ws", tmp_path / "out"
    (out / "dir").mkdir(parents=True)
    (out / "secret").write_text("OUTSIDE\n")
    (ws / "src").mkdir(parents=True)
    (ws / "sub").mkdir()
    (ws / "secret").write_text("inside\n")
    (ws / "link").symlink_to("../out/dir")
    (ws / "sub" / "back").symlink_to("../src")
    escape = f"{ws}/link/../secret"
    assert open(escape).read() == "OUTSIDE\n"  # (what the system opens)
    assert workspace_file_refusal(ws, escape) == "outside the workspace"
    with pytest.raises(RefusedFile, match="outside the workspace"):
        read_workspace_file(ws, escape)
    inside = f"{ws}/sub/back/../secret"
    assert open(inside).read() == "inside\n"
    assert workspace_file_refusal(ws, inside) is None
    assert read_workspace_file(ws, inside) == b"inside\n"
