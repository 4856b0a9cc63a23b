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


def as_dict(obj):
    """pygls returns custom-request results as namedtuples: turn them into plain data."""
    if hasattr(obj, "_asdict"):
        return {k: as_dict(v) for k, v in obj._asdict().items()}
    if isinstance(obj, (list, tuple)):
        return [as_dict(v) for v in obj]
    return obj
