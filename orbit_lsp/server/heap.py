"""Python's cyclic garbage collector, run while the language server is idle.

A full (generation 2) collection walks every container object the process holds: 10–50 ms
for a server that has the standard library indexed, long enough to double a request's latency
when it lands inside one (measured: pauses of 11, 27 and 41 ms during the LSP benchmark). So
automatic full collections are made rare (``FULL_EVERY``: the interpreter runs one after that
many younger ones, against its default of 10) and ``IdleCollector`` runs them instead once no
message has arrived for ``IDLE_S``. The younger generations are collected as usual: their
pauses are short. After the first index, the indexer's long-lived state is frozen out of the
collector's view altogether (``gc.freeze``, see ``lifecycle``).
"""

from __future__ import annotations

import asyncio
import gc
import time

IDLE_S = 1.0  # quiet time (no message from the client) before a full collection
CHECK_S = 0.5  # how often the idle collector looks
FULL_EVERY = 1000  # generation-1 collections between automatic full ones (the safety net)


class IdleCollector:
    """Full collections when the server is idle. ``touch()`` on every incoming message;
    ``start()`` on the event loop once; ``stop()`` at shutdown."""

    def __init__(self) -> None:
        self.last_message = time.monotonic()
        self.task: asyncio.Task | None = None
        self.collections = 0  # full collections run here (for tests and status)

    def touch(self) -> None:
        self.last_message = time.monotonic()

    def start(self) -> None:
        if self.task is not None:
            return
        g0, g1, _ = gc.get_threshold()
        gc.set_threshold(g0, g1, FULL_EVERY)
        self.task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.task = None

    def pending(self) -> bool:
        """True when generation 2 has had objects added since its last collection."""
        return gc.get_count()[2] > 0

    def collect_if_idle(self) -> bool:
        """One full collection when no message came for ``IDLE_S`` and there is something to
        collect. Returns whether it ran."""
        if time.monotonic() - self.last_message < IDLE_S or not self.pending():
            return False
        gc.collect()
        self.collections += 1
        return True

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(CHECK_S)
            self.collect_if_idle()
