"""What the thin client (``orbit_lsp.launch``) and the helper (``query_helper.server``) share:
where the socket is, which code a helper runs, and the framing of their messages.

Standard library only, and only its light modules: the client imports this on every query.

Wire format (one connection per query, the client speaks first):

- every message is a frame: one kind byte, a 4-byte big-endian length, then the payload;
- client -> helper: ``Q`` with a JSON request ``{"protocol", "stamp", "argv", "cwd", "env",
  "umask", "stdout": {"encoding", "errors", "tty"}, "stderr": {...}}``;
- helper -> client: ``M`` (the helper runs other code: the client falls back and the helper
  exits) or ``A`` ``{"pid"}`` (a child of the helper took the query; ``pid`` receives the
  client's SIGINT), then the output as ``O`` (stdout bytes) and ``E`` (stderr bytes) frames in
  the order written, and last ``X`` ``{"rc"}`` (the exit status) or ``F`` ``{"reason"}`` (the
  helper declined: the client discards what came and runs the query in-process). A connection
  closed before ``X`` or ``F`` is a helper that died: the client falls back too.

A client and a helper of different code never go past the first exchange (the helper answers
``M`` to a request whose ``stamp`` or ``protocol`` is not its own), so only the ``Q`` frame and the
``M`` answer must stay readable across versions; everything after may change with ``PROTOCOL``.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys

PROTOCOL = 1

# Read-only queries the helper answers; every other command runs in-process.
QUERY_COMMANDS = frozenset({"callers", "impact", "implementations", "chain", "cypher"})

ENV_DISABLE = "ORBIT_NO_HELPER"      # "1": no helper (every command in-process, none started)
ENV_DIR = "ORBIT_HELPER_DIR"         # where the sockets live (default: see ``helper_dir``)
ENV_IDLE = "ORBIT_HELPER_IDLE_S"     # seconds without a query before the helper exits (600)
ENV_TRACE = "ORBIT_HELPER_TRACE"     # a file: the client appends which path each command took

DEFAULT_IDLE_S = 600.0
CONNECT_TIMEOUT_S = 2.0  # connect, send the request, get the child's acknowledgement

_HEADER = struct.Struct(">cI")
MAX_FRAME = 1 << 30

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../orbit_lsp


def disabled(env=None) -> bool:
    """Whether ``ORBIT_NO_HELPER`` turns the helper off (any value but empty, ``0``, ``false``, ``no``)."""
    value = (os.environ if env is None else env).get(ENV_DISABLE, "")
    return value.strip().lower() not in ("", "0", "false", "no")


def idle_seconds(env=None) -> float:
    """``ORBIT_HELPER_IDLE_S`` (seconds, > 0) or the default 600."""
    try:
        value = float((os.environ if env is None else env).get(ENV_IDLE, ""))
    except ValueError:
        return DEFAULT_IDLE_S
    return value if value > 0 else DEFAULT_IDLE_S


def helper_dir(env=None) -> str:
    """The per-user directory of the helpers' sockets: ``$ORBIT_HELPER_DIR``, else
    ``$XDG_RUNTIME_DIR/orbit-lsp``, else ``<temp dir>/orbit-lsp-<uid>``."""
    env = os.environ if env is None else env
    if env.get(ENV_DIR):
        return os.path.abspath(os.path.expanduser(env[ENV_DIR]))
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime) and os.path.isdir(runtime):
        return os.path.join(runtime, "orbit-lsp")
    tmp = env.get("TMPDIR") or "/tmp"
    return os.path.join(tmp, f"orbit-lsp-{os.getuid()}")


def private_dir(path: str, create: bool) -> bool:
    """Whether ``path`` is a directory of this user that nobody else can enter (mode 0700 or
    stricter, not a symlink); ``create``: make it (0700) when missing."""
    if create:
        try:
            os.makedirs(path, mode=0o700)
        except FileExistsError:
            pass
        except OSError:
            return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (st.st_mode & 0o170000) == 0o040000 and st.st_uid == os.getuid() and not st.st_mode & 0o077


def _digest(text: str) -> str:
    try:
        from _blake2 import blake2b  # what hashlib uses, without loading OpenSSL (~3 ms)
    except ImportError:  # pragma: no cover - other builds
        from hashlib import blake2b
    return blake2b(text.encode("utf-8", "surrogateescape"), digest_size=10).hexdigest()


def helper_key(env=None) -> str:
    """Which helper serves this client: one per Python installation or virtual environment
    (``sys.prefix``: ``python`` and ``python3`` of one venv share it), orbit package directory and
    ``PYTHONPATH`` (a helper imports what its first client's environment finds)."""
    env = os.environ if env is None else env
    return _digest("\0".join([sys.prefix, sys.version, PACKAGE_DIR, env.get("PYTHONPATH", ""), str(os.getuid())]))


def socket_path(env=None) -> str:
    return os.path.join(helper_dir(env), f"q-{helper_key(env)}.sock")


def code_stamp() -> str:
    """A digest of the code a process runs: orbit's files (path, size, mtime) and the
    site-packages directories (their mtime changes when a package is installed or removed),
    with the interpreter's version. A helper whose stamp differs from the client's is stale."""
    parts = [sys.version]
    for entry in sys.path:
        if entry.endswith("-packages"):
            try:
                parts.append(f"{entry}:{os.stat(entry).st_mtime_ns}")
            except OSError:
                pass
    stack = [PACKAGE_DIR]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.name == "__pycache__":
                continue
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                elif e.name.endswith(".py"):
                    st = e.stat()
                    parts.append(f"{e.path}:{st.st_size}:{st.st_mtime_ns}")
            except OSError:
                continue
    return _digest("\n".join(parts))


def peer_uid(sock: socket.socket) -> int | None:
    """The user id of the process at the other end of a Unix socket (Linux ``SO_PEERCRED``);
    None where the platform cannot tell (the directory's permissions then keep others out)."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i")))
    return uid


def frame(kind: bytes, payload: bytes) -> bytes:
    return _HEADER.pack(kind, len(payload)) + payload


def json_frame(kind: bytes, obj) -> bytes:
    return frame(kind, json.dumps(obj, separators=(",", ":")).encode("utf-8", "surrogateescape"))


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        data = sock.recv(min(left, 1 << 20))
        if not data:
            return None
        chunks.append(data)
        left -= len(data)
    return b"".join(chunks)


def read_frame(sock: socket.socket) -> tuple[bytes, bytes] | None:
    """(kind, payload) of the next frame; None when the connection closed (between frames or
    within one). Raises ``OSError`` (``TimeoutError`` included) and ``ValueError`` (a frame
    too large to be ours)."""
    head = _read_exact(sock, _HEADER.size)
    if head is None:
        return None
    kind, size = _HEADER.unpack(head)
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes")
    payload = _read_exact(sock, size) if size else b""
    return None if payload is None else (kind, payload)


def loads(payload: bytes):
    return json.loads(payload.decode("utf-8", "surrogateescape"))
