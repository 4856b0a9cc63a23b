"""The ``orbit-lsp`` console script: a query through the query helper, anything else in-process.

Imports only the standard library until it knows the command runs in-process (then
``orbit_lsp.cli.main``). For a read-only query (``protocol.QUERY_COMMANDS`` among the arguments)
it asks the user's helper (``orbit_lsp.query_helper``) and prints its answer; when there is no
helper it starts one in the background and runs the query in-process; whenever the helper cannot
answer (see the package docstring) the query runs in-process with the same output.
"""

from __future__ import annotations

import os
import sys
import time

from orbit_lsp.query_helper import protocol
from orbit_lsp.stdio import complete_stdout, write_all

SERVER_MODULE = "orbit_lsp.query_helper.server"
FAILED_START_PAUSE_S = 600.0  # after a helper failed to start, no new attempt with the same code for this long


def main(argv: list[str] | None = None) -> int:
    """Run ``orbit-lsp`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    complete_stdout()  # no output lost when stdout is unbuffered (see ``orbit_lsp.stdio``)
    if not _looks_like_query(argv) or protocol.disabled():
        return _in_process(argv, None)
    try:
        rc, why = _through_helper(argv)
    except KeyboardInterrupt:  # Ctrl-C before the helper took the query
        return _interrupted()
    except Exception as exc:  # noqa: BLE001 - any failure of the thin path: the full path answers
        rc, why = None, f"client error: {type(exc).__name__}: {exc}"
    if rc is not None:
        _trace("helper")
        return rc
    return _in_process(argv, why)


# the helper directory where a helper is to be started once the in-process query is done (so
# that its start-up does not compete with the query for the cores)
_start_after: list[str] = []


def _in_process(argv: list[str], why: str | None) -> int:
    if why is not None:
        _trace(f"in-process: {why}")
    try:
        from orbit_lsp.cli import main as cli_main

        return cli_main(argv)
    finally:
        for folder in _start_after:
            _start_helper(folder)
        _start_after.clear()


def _trace(text: str) -> None:
    """With ``ORBIT_HELPER_TRACE=FILE``: one line per command saying which path answered it."""
    path = os.environ.get(protocol.ENV_TRACE)
    if path:
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(f"{os.getpid()} {text}\n")
        except OSError:
            pass


def _looks_like_query(argv: list[str]) -> bool:
    """A query command among the arguments before ``--`` and no help or server option (the
    helper checks properly with the real parser and declines the rest)."""
    args = argv[:argv.index("--")] if "--" in argv else argv
    if not protocol.QUERY_COMMANDS.intersection(args):
        return False
    return not any(a in ("-h", "--help", "--version", "--stdio") for a in args)


def _stream_info(stream) -> dict:
    return {"encoding": stream.encoding, "errors": stream.errors, "tty": stream.isatty()}


def _through_helper(argv: list[str]) -> tuple[int | None, str | None]:
    """(exit status, None) when the helper answered; (None, why) when the query must run
    in-process (a helper is started in the background when there was none or it was stale)."""
    import socket

    folder = protocol.helper_dir()
    if not protocol.private_dir(folder, create=True):
        return None, f"{folder} is not a private directory of this user"
    path = os.path.join(folder, f"q-{protocol.helper_key()}.sock")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        _start_after.append(folder)
        return None, "no helper running (starting one)"
    if (st.st_mode & 0o170000) != 0o140000 or st.st_uid != os.getuid():
        return None, f"{path} is not a socket of this user"
    if sys.stdout is None or sys.stderr is None:
        return None, "no stdout or stderr"
    umask = os.umask(0o022)
    os.umask(umask)
    request = {"protocol": protocol.PROTOCOL, "stamp": protocol.code_stamp(), "argv": argv,
               "cwd": os.getcwd(), "env": dict(os.environ), "umask": umask,
               "stdout": _stream_info(sys.stdout), "stderr": _stream_info(sys.stderr)}
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(protocol.CONNECT_TIMEOUT_S)
        try:
            sock.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):  # a helper that died: its socket is left
            _start_after.append(folder)
            return None, "no helper running (stale socket; starting one)"
        except OSError as exc:
            return None, f"cannot connect: {exc}"
        uid = protocol.peer_uid(sock)
        if uid is not None and uid != os.getuid():
            return None, f"the helper socket is served by user {uid}"
        try:
            sock.sendall(protocol.json_frame(b"Q", request))
            first = protocol.read_frame(sock)
        except (TimeoutError, socket.timeout):
            return None, f"the helper did not take the query within {protocol.CONNECT_TIMEOUT_S:g} s"
        if first is None:
            return None, "the helper closed the connection"
        if first[0] == b"M":
            _start_after.append(folder)
            return None, "the helper runs other code (restarting it)"
        if first[0] != b"A":
            return None, f"unexpected reply {first[0]!r}"
        child = protocol.loads(first[1])["pid"]
        sock.settimeout(None)  # the query itself may take as long as its own timeout
        return _collect(sock, child)
    finally:
        sock.close()


def _collect(sock, child: int) -> tuple[int | None, str | None]:
    """Read the child's output and exit status; Ctrl-C meanwhile goes to the child, which
    reports it as the in-process path does. Writes the output only once complete."""
    import signal

    interrupted = []

    def forward(signum, frame):  # noqa: ARG001
        interrupted.append(signum)
        try:
            os.kill(child, signal.SIGINT)
        except OSError:
            pass

    previous = signal.signal(signal.SIGINT, forward)
    chunks: list[tuple[bytes, bytes]] = []
    try:
        while True:
            got = protocol.read_frame(sock)
            if got is None:
                if interrupted:
                    return _interrupted(), None
                return None, "the helper died during the query"
            kind, payload = got
            if kind in (b"O", b"E"):
                chunks.append((kind, payload))
            elif kind == b"X":
                rc = protocol.loads(payload)["rc"]
                break
            elif kind == b"F":
                if interrupted:
                    return _interrupted(), None
                return None, f"declined: {protocol.loads(payload).get('reason')}"
            else:
                return None, f"unexpected frame {kind!r}"
    finally:
        signal.signal(signal.SIGINT, previous)
    return _write(chunks, rc), None


def _interrupted() -> int:
    print("orbit-lsp: interrupted", file=sys.stderr)
    return 130


def _write(chunks: list[tuple[bytes, bytes]], rc: int) -> int:
    """Write the output in the order the child wrote it; a closed stdout (``| head``) ends
    quietly with status 1, as the in-process path does."""
    out, err = sys.stdout, sys.stderr
    try:
        for kind, data in chunks:
            if kind == b"O":
                out.flush()
                write_all(out.buffer, data)  # every byte, also when stdout is unbuffered
            else:
                out.flush()
                out.buffer.flush()
                err.flush()
                write_all(err.buffer, data)
        out.flush()
        out.buffer.flush()
    except BrokenPipeError:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, out.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    return rc


def _start_helper(folder: str) -> None:
    """Start the helper detached (its own session, no terminal, stdio away from ours), unless
    another client is starting one (its start lock is taken) or the last start failed with
    this code."""
    import fcntl

    lock_path = os.path.join(folder, f"q-{protocol.helper_key()}.lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return  # a helper holds it: starting, or exiting
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    failed = os.path.join(folder, f"q-{protocol.helper_key()}.failed")
    try:
        with open(failed, encoding="utf-8") as fh:  # the last start with this code failed
            if fh.read().strip() == protocol.code_stamp() and \
                    time.time() - os.fstat(fh.fileno()).st_mtime < FAILED_START_PAUSE_S:
                return
    except OSError:
        pass
    import subprocess

    # it runs in "/": what the environment names relative to here is made absolute
    env = dict(os.environ)
    env[protocol.ENV_DIR] = folder
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) if p else os.getcwd()
                                            for p in env["PYTHONPATH"].split(os.pathsep))
    log = os.path.join(folder, f"q-{protocol.helper_key()}.log")
    try:
        with open(log, "ab") as err:
            subprocess.Popen([sys.executable, "-m", SERVER_MODULE], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=err, cwd="/", env=env, close_fds=True,
                             start_new_session=True)
    except OSError:
        pass


if __name__ == "__main__":
    raise SystemExit(main())
