"""``BackgroundExecutor``: one daemon thread running long read-only work, newest first.

A ``ThreadPoolExecutor``'s threads are joined when the process exits, so a server asked to
exit would wait for a minute-long computation nobody wants any more; this thread is not
waited for (the work only reads). The most recently submitted work runs first: it is what the
user is looking at now (the lenses of the file on screen), while what was asked for earlier
(the lenses of a file since scrolled past or closed) can wait. It is an ``Executor``, so
``loop.run_in_executor`` takes it.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections import deque
from typing import Any, Callable


class BackgroundExecutor(concurrent.futures.Executor):
    """Runs submitted callables one at a time in one daemon thread (started on the first
    submit), the newest waiting one first. ``shutdown`` cancels the work not started."""

    def __init__(self, name: str):
        self._name = name
        self._waiting: deque = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("cannot schedule new work after shutdown")
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()
            self._waiting.append((future, fn, args, kwargs))
            self._cond.notify()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._cond:
            self._closed = True
            dropped = list(self._waiting)
            self._waiting.clear()
            self._cond.notify()
        for future, *_ in dropped:
            future.cancel()
        if wait and self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._closed:
                    self._cond.wait()
                if not self._waiting:
                    return  # shut down
                item = self._waiting.pop()
            future, fn, args, kwargs = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to whoever awaits the future
                future.set_exception(exc)
            else:
                future.set_result(result)
