"""``BackgroundExecutor``: one daemon thread running long read-only work in order.

A ``ThreadPoolExecutor``'s threads are joined when the process exits, so a server asked to
exit would wait for a minute-long computation nobody wants any more; this thread is not
waited for (the work only reads). It is an ``Executor``, so ``loop.run_in_executor`` takes it.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from typing import Any, Callable


class BackgroundExecutor(concurrent.futures.Executor):
    """Runs submitted callables one at a time, in submission order, in one daemon thread
    (started on the first submit). ``shutdown`` drops the work not started."""

    def __init__(self, name: str):
        self._name = name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new work after shutdown")
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()
            self._queue.put((future, fn, args, kwargs))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
        while True:  # work not started is cancelled
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        self._queue.put(None)  # ends the thread once the work it runs returns
        if wait and self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args, kwargs = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to whoever awaits the future
                future.set_exception(exc)
            else:
                future.set_result(result)
