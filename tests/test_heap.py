"""The idle garbage collector: full collections only when no message came for a while."""

from __future__ import annotations

import asyncio
import gc

from orbit_lsp.server import heap


def test_full_collection_waits_for_quiet_time(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(heap.time, "monotonic", lambda: now[0])
    c = heap.IdleCollector()
    c.touch()
    junk = [[i] for i in range(5000)]  # objects that survive into generation 2
    gc.collect(1)
    assert c.pending()
    assert not c.collect_if_idle()  # a message just came
    now[0] += heap.IDLE_S / 2
    assert not c.collect_if_idle()
    now[0] += heap.IDLE_S
    assert c.collect_if_idle() and c.collections == 1
    assert not c.pending() and not c.collect_if_idle()  # nothing new since
    del junk


def test_start_makes_automatic_full_collections_rare_and_stop_ends_the_task():
    saved = gc.get_threshold()

    async def run():
        c = heap.IdleCollector()
        c.start()
        assert gc.get_threshold()[2] == heap.FULL_EVERY and c.task is not None
        c.stop()
        assert c.task is None

    try:
        asyncio.run(run())
    finally:
        gc.set_threshold(*saved)
