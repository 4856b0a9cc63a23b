"""Every byte of a message reaches the pipe when a signal interrupts a write to it.

Under ``PYTHONUNBUFFERED=1`` (or ``python -u``) ``sys.stdout.buffer`` is the raw ``FileIO``: a
write to a full pipe that a signal interrupts (here SIGSTOP then SIGCONT, what Ctrl-Z and ``fg``
of an editor in a terminal, or a profiler sampling the server, do) writes only part and returns
that count. The language server used to drop the rest, after which its client read the next
message as the rest of this one and waited forever.

- ``write_all`` against the plain ``write``, made deterministic: the child blocks on a full
  pipe, is stopped and continued, and only then is the pipe read.
- A real ``orbit-lsp`` process under ``PYTHONUNBUFFERED=1``, stopped and continued hundreds of
  times while it sends code lenses of ~700 KB: every answer arrives whole and parses.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import termios
import threading
import time
from array import array
from pathlib import Path

import pytest
from pygls.uris import from_fs_path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench` is not an installed package

from bench.raw_lsp import RawLsp  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and pipes")

MESSAGE_BYTES = 600_000  # several times a pipe's capacity (64 KiB by default on Linux)

WRITER = """
import sys
from orbit_lsp.stdio import complete_stdout, write_all
assert type(sys.stdout.buffer).__name__ == "FileIO", type(sys.stdout.buffer)  # unbuffered stdout
data = bytes(range(256)) * ({n} // 256)
if sys.argv[1] == "write_all":
    write_all(sys.stdout.buffer, data)
elif sys.argv[1] == "print":  # the command line's output, once ``launch.main`` made it complete
    assert complete_stdout()
    print(data.decode("latin-1"), end="")
else:
    sys.stdout.buffer.write(data)  # what pygls's StdoutWriter did
    sys.stdout.buffer.flush()
"""


def _pipe_bytes(fd: int) -> int:
    buf = array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, buf, True)
    return buf[0]


def _written_after_stop(how: str) -> bytes:
    """What a child writing one ``MESSAGE_BYTES`` message with ``how`` gets through, when it is
    stopped and continued while blocked on the full pipe."""
    child = subprocess.Popen([sys.executable, "-c", WRITER.format(n=MESSAGE_BYTES), how], stdout=subprocess.PIPE,
                             env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        fd = child.stdout.fileno()
        deadline, last, since = time.monotonic() + 30, -1, time.monotonic()
        while time.monotonic() < deadline:  # the pipe is full once its content stops growing
            now = _pipe_bytes(fd)
            if now != last:
                last, since = now, time.monotonic()
            elif now > 0 and time.monotonic() - since > 0.3:
                break
            time.sleep(0.02)
        assert 0 < last < MESSAGE_BYTES, f"the writer never blocked on the pipe ({last} bytes)"
        child.send_signal(signal.SIGSTOP)
        time.sleep(0.1)
        child.send_signal(signal.SIGCONT)
        out = child.stdout.read()
        child.wait(30)
        assert child.returncode == 0
        return out
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.parametrize("how", ["write_all", "print"])
def test_interrupted_writes_are_continued(how):
    expected = bytes(range(256)) * (MESSAGE_BYTES // 256)
    got = _written_after_stop(how)
    assert (got.decode("utf-8").encode("latin-1") if how == "print" else got) == expected


def test_the_command_line_makes_an_unbuffered_stdout_complete():
    """``launch.main`` (every ``orbit-lsp`` command) replaces a raw ``sys.stdout`` by a buffered
    one; a buffered one is left as it is."""
    check = ("import sys\nfrom orbit_lsp import launch\nrc = launch.main(['--version'])\n"
             "print(rc, type(sys.stdout.buffer).__name__, sys.stdout.encoding, file=sys.stderr)")
    for env, kind in (({"PYTHONUNBUFFERED": "1"}, "BufferedWriter"), ({}, "BufferedWriter")):
        run_env = dict(os.environ, PYTHONIOENCODING="utf-8", **env)
        if not env:
            run_env.pop("PYTHONUNBUFFERED", None)
        done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=run_env, timeout=60)
        assert done.stdout.startswith("orbit-lsp "), done
        assert done.stderr.split() == ["0", kind, "utf-8"], done.stderr


def test_the_plain_write_loses_the_rest_of_the_message():
    """The failure ``write_all`` exists for, reproduced: the plain write returns after the part
    that fitted the pipe, and nothing more is written."""
    got = _written_after_stop("write")
    assert len(got) < MESSAGE_BYTES
    assert got == (bytes(range(256)) * (MESSAGE_BYTES // 256))[:len(got)]


@pytest.fixture(scope="module")
def many_functions(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("complete_writes") / "ws"
    root.mkdir()
    (root / "many.py").write_text("".join(f"def function_number_{i}(value):\n    return value + {i}\n\n\n"
                                          for i in range(3000)))
    (root / "use.py").write_text("from many import function_number_1\n\nfunction_number_1(2)\n")
    return root


def test_the_server_sends_whole_answers_while_stopped_and_continued(many_functions):
    lsp = RawLsp(env={"PYTHONUNBUFFERED": "1"}).start()
    stop = threading.Event()

    def stop_and_continue():  # the server stopped and continued every few milliseconds
        while not stop.is_set():
            try:
                lsp.proc.send_signal(signal.SIGSTOP)
                time.sleep(0.001)
                lsp.proc.send_signal(signal.SIGCONT)
            except ProcessLookupError:
                return
            time.sleep(0.002)

    try:
        lsp.initialize(many_functions)
        uri = from_fs_path(str(many_functions / "many.py"))
        params = {"textDocument": {"uri": uri}}
        expected = lsp.request("textDocument/codeLens", params)["result"]
        assert len(expected) > 3000 and len(json.dumps(expected)) > 5 * 65536  # many pipes' worth
        signals = threading.Thread(target=stop_and_continue, daemon=True)
        signals.start()
        try:
            for _ in range(15):
                got = lsp.request("textDocument/codeLens", params, timeout=30)  # the reader parses each frame
                assert got["result"] == expected
        finally:
            stop.set()
            signals.join(5)
        assert lsp.request("orbit/status", {})["result"]["workspaces"]
        assert lsp.alive()
    finally:
        stop.set()
        if lsp.alive():
            lsp.proc.send_signal(signal.SIGCONT)  # never leave it stopped
        lsp.stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ is Linux's")
def test_the_servers_stdout_pipe_is_widened(many_functions):
    """A 1 MiB pipe takes a few hundred KB answer in one write (``transport.widen_pipe``)."""
    from orbit_lsp.server.transport import PIPE_BYTES, widen_pipe

    r, w = os.pipe()
    with os.fdopen(r, "rb") as reader, os.fdopen(w, "wb") as writer:
        assert fcntl.fcntl(w, fcntl.F_GETPIPE_SZ) < PIPE_BYTES  # Linux's default: 64 KiB
        assert widen_pipe(writer) == PIPE_BYTES
        assert fcntl.fcntl(reader.fileno(), fcntl.F_GETPIPE_SZ) == PIPE_BYTES
    with open(many_functions / "many.py", "rb") as regular:
        assert widen_pipe(regular) is None  # not a pipe: left alone

    lsp = RawLsp().start()
    try:
        lsp.initialize(many_functions)
        with open(f"/proc/{lsp.proc.pid}/fd/1", "wb") as server_stdout:  # the same pipe, another end
            assert fcntl.fcntl(server_stdout.fileno(), fcntl.F_GETPIPE_SZ) == PIPE_BYTES
    finally:
        lsp.stop()
