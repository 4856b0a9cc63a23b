"""A tests lens whose selection is not known in time says "tests: counting…", the server asks the
client to refresh its lenses once it is, and the lens then carries the count (``testsLensWaitMs``
0: the lens never waits, so every first resolve is "counting…" whatever the machine's speed).
The repository and its call graph are ``changes_repo``'s."""

from __future__ import annotations

import asyncio
import time

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from changes_repo import make_repo
from lsp_harness import SERVER, as_dict, save_and_wait_indexed, start_session, tests_lenses, uri

pytestmark = pytest.mark.asyncio(loop_scope="module")
T = 30
COUNTING = "tests: counting…"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_repo(tmp_path_factory.mktemp("counting") / "ws")


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, repo):
    lsp_client.refreshes = []

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def on_register(params=None):  # VS Code registers for didChangeConfiguration
        return None

    @lsp_client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def on_refresh(params=None):
        lsp_client.refreshes.append(time.monotonic())
        return None

    await start_session(lsp_client, repo.root, "visual-studio-code", init_options={"testsLensWaitMs": 0})
    yield
    await lsp_client.shutdown_session()


async def wait_refresh(client, after: int) -> None:
    deadline = time.monotonic() + T
    while len(client.refreshes) <= after:
        assert time.monotonic() < deadline, "no workspace/codeLens/refresh"
        await asyncio.sleep(0.05)


async def test_counting_then_refreshed_with_the_count(client: LanguageClient, repo):
    await asyncio.sleep(0.5)  # the refresh that follows the first index has arrived
    before = len(client.refreshes)
    first = await tests_lenses(client, repo.root / "app/core.py")
    assert {q: x.command.title for q, x in first.items()} == {
        "app.core.helper": COUNTING, "app.core.compute": COUNTING, "app.core.old_name": COUNTING,
        "app.core.Engine.run": COUNTING}
    # the lens already runs the command, which waits for the selection
    assert first["app.core.helper"].command.command == "orbit.showTests"
    await wait_refresh(client, before)
    again = await tests_lenses(client, repo.root / "app/core.py")
    assert {q: x.command.title for q, x in again.items()} == {
        "app.core.helper": "4 tests reach this", "app.core.compute": "3 tests reach this",
        "app.core.old_name": "1 test reaches this", "app.core.Engine.run": "1 test reaches this"}


async def test_the_command_waits_for_the_selection(client: LanguageClient, repo):
    """Asked before any lens of the file, the command answers the whole selection."""
    lens = (await tests_lenses(client, repo.root / "app/service.py"))["app.service.serve"]
    assert lens.command.title == COUNTING
    res = as_dict(await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=lens.command.command, arguments=lens.command.arguments)), T))
    assert [t["id"] for t in res["tests"]] == ["tests/test_service.py::test_serve"]


async def test_a_folder_whose_selections_are_slow_is_not_waited_for():
    """``SelectionTimes``: a tests lens stops waiting for its count once each of the folder's
    last selections took longer than the wait, and waits again once one did not."""
    import math
    from pathlib import Path

    from orbit_lsp.server.lenses import SelectionTimes

    times = SelectionTimes(kept=3)
    a, b = Path("/ws/a"), Path("/ws/b")
    assert not times.all_over(a, 0.2)  # nothing known
    times.add(a, 5.0)
    times.add(a, 3.0)
    assert not times.all_over(a, 0.2)  # two known, three needed
    times.add(a, 0.5)
    assert times.all_over(a, 0.2) and not times.all_over(a, 1.0) and not times.all_over(b, 0.2)
    times.add(a, 0.1)  # a fast one: wait again
    assert not times.all_over(a, 0.2)
    for _ in range(3):
        times.add(a, 0.3)
    assert times.all_over(a, 0.2)
    # lenses that stopped waiting: their selections took longer than the wait, however long
    times.add(b, math.inf)
    times.add(b, math.inf)
    times.add(b, 0.4)
    assert times.all_over(b, 0.2) and not times.all_over(b, 0.5)


async def test_a_lens_counting_again_after_an_edit_says_what_it_was(client: LanguageClient, repo):
    """A test calling ``helper`` is added and saved: the graph changes, so each lens counts again.
    Meanwhile it says "counting…" with the count it showed before the edit (4, from the first
    test here), then the new count once known (5: the new test calls ``helper`` directly)."""
    before = len(client.refreshes)
    known = await tests_lenses(client, repo.root / "app/core.py")
    if known["app.core.helper"].command.title == COUNTING:  # this test run alone: not counted yet
        await wait_refresh(client, before)
        known = await tests_lenses(client, repo.root / "app/core.py")
    assert known["app.core.helper"].command.title == "4 tests reach this"
    path = repo.root / "tests/test_core.py"
    await save_and_wait_indexed(client, path, path.read_text() + "\n\ndef test_helper_again():\n    assert helper(2) == 3\n")
    before = len(client.refreshes)
    during = await tests_lenses(client, repo.root / "app/core.py")
    assert during["app.core.helper"].command.title == "tests: counting… (was 4)"
    await wait_refresh(client, before)
    after = await tests_lenses(client, repo.root / "app/core.py")
    assert after["app.core.helper"].command.title == "5 tests reach this"
