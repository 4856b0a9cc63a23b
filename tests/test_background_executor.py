"""``server.background.BackgroundExecutor``: the language server's slow pool (tests lenses'
selections) runs work one at a time in one daemon thread, the newest first, and a server that
exits does not wait for the work still running."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import pytest

from orbit_lsp.server.background import BackgroundExecutor


def test_work_runs_in_one_thread_and_errors_reach_the_caller():
    pool = BackgroundExecutor("orbit-test")
    seen: list[tuple[int, str]] = []

    def job(i: int) -> int:
        seen.append((i, threading.current_thread().name))
        return i * 2

    futures = [pool.submit(job, i) for i in range(5)]
    assert [f.result(timeout=10) for f in futures] == [0, 2, 4, 6, 8]
    assert sorted(seen) == [(i, "orbit-test") for i in range(5)]  # (in an order of its own: below)
    failing = pool.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.result(timeout=10)
    assert pool.submit(job, 9).result(timeout=10) == 18  # the thread survives a failure

    async def from_a_loop() -> int:
        return await asyncio.get_running_loop().run_in_executor(pool, job, 21)
    assert asyncio.run(from_a_loop()) == 42
    pool.shutdown()
    with pytest.raises(RuntimeError):
        pool.submit(job, 1)


def test_the_newest_work_waiting_runs_first():
    pool = BackgroundExecutor("orbit-test")
    gate = threading.Event()
    order: list[str] = []
    started = threading.Event()
    first = pool.submit(lambda: started.set() or gate.wait(10))  # holds the thread meanwhile
    assert started.wait(10)
    later = [pool.submit(order.append, name) for name in ("a", "b", "c")]
    gate.set()
    assert first.result(timeout=10) is True
    for f in later:
        f.result(timeout=10)
    assert order == ["c", "b", "a"]
    pool.shutdown()


def test_shutdown_cancels_work_not_started():
    pool = BackgroundExecutor("orbit-test")
    gate = threading.Event()
    started = threading.Event()
    running = pool.submit(lambda: started.set() or gate.wait(10))
    assert started.wait(10)
    queued = pool.submit(lambda: "never")
    pool.shutdown(wait=False)
    assert queued.cancelled()
    gate.set()
    assert running.result(timeout=10) is True


def test_a_process_exits_without_waiting_for_running_work():
    code = ("import time\nfrom orbit_lsp.server.background import BackgroundExecutor\n"
            "pool = BackgroundExecutor('orbit-test')\npool.submit(time.sleep, 600)\ntime.sleep(0.2)\nprint('bye')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "bye\n"  # (a ThreadPoolExecutor would wait 600 s)
