"""A graph read that takes longer than the server waits for (``OrbitServer.answer_timeout``)
while FalkorDB answers PING fails alone ("too slow"): the server does not declare FalkorDB
offline, which would refuse every request and re-index every folder once it "came back" (a
slow multi-query answer, e.g. the tests lens on a large workspace right after its index, used
to do that). The real session FalkorDB; a worker that sleeps stands for the slow read."""

from __future__ import annotations

import asyncio
import time

import pytest
from pygls.exceptions import JsonRpcException

from orbit_lsp.server import app


def test_slow_read_while_falkordb_answers_is_not_offline(store, settings, monkeypatch):
    monkeypatch.setattr(app, "ANSWER_MARGIN_S", 0.0)
    ls = app.OrbitServer()
    ls.store.close()
    ls.store = store  # the session's embedded FalkorDB: it answers PING
    ls.settings = settings.model_copy(update={"query_timeout_ms": 200})  # answers within 0.2 s

    async def go():
        with pytest.raises(JsonRpcException, match="too slow"):
            await ls.query(time.sleep, 1.0)
        assert ls.offline is None  # still online: the next request is answered
        assert await ls.query(lambda: 42) == 42

    try:
        asyncio.run(go())
    finally:
        ls.query_pool.shutdown(wait=True)
