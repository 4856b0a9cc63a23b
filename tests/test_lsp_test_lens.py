"""The "N tests reach this" code lens and its command ``orbit.showTests`` (issue 16), over LSP on
the git repository of ``changes_repo`` (call graph in its docstring)."""

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


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_repo(tmp_path_factory.mktemp("testlens") / "ws")


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, repo):
    await start_session(lsp_client, repo.root, "visual-studio-code")
    yield
    await lsp_client.shutdown_session()


async def test_counts_follow_the_selection(client: LanguageClient, repo):
    core = await tests_lenses(client, repo.root / "app/core.py")
    # functions and methods only (no lens on the class Engine)
    assert {q: x.command.title for q, x in core.items()} == {
        # test_helper (1 hop), test_compute (2), test_run (engine.run on the engine fixture, 3), test_serve (4)
        "app.core.helper": "4 tests reach this",
        "app.core.compute": "3 tests reach this",  # test_compute, test_run, test_serve
        "app.core.old_name": "1 test reaches this",  # test_uses_old -> uses_old -> old_name
        "app.core.Engine.run": "1 test reaches this",  # test_run, through the fixture's Engine
    }
    # the lens sits on the name, beside the callers lens
    lens = core["app.core.helper"]
    assert (lens.range.start.line, lens.range.start.character) == (3, 4)
    assert lens.command.command == "orbit.showTests"
    svc = await tests_lenses(client, repo.root / "app/service.py")
    assert {q: x.command.title for q, x in svc.items()} == {
        "app.service.serve": "1 test reaches this", "app.service.uses_old": "1 test reaches this"}


async def test_fixtures_and_setup_but_not_tests(client: LanguageClient, repo):
    conf = await tests_lenses(client, repo.root / "tests/conftest.py")
    # engine: requested by test_run, TestEngine.test_mode, and by fast_engine (test_fast)
    assert {q: x.command.title for q, x in conf.items()} == {
        "tests.conftest.engine": "3 tests reach this", "tests.conftest.fast_engine": "1 test reaches this"}
    eng = await tests_lenses(client, repo.root / "tests/test_engine.py")
    # a test reaches only itself: no lens on tests; setUp reaches the tests of its class
    assert {q: x.command.title for q, x in eng.items()} == {"tests.test_engine.UnitEngine.setUp": "1 test reaches this"}


async def test_command_lists_the_tests_and_the_command_line(client: LanguageClient, repo):
    lens = (await tests_lenses(client, repo.root / "app/core.py"))["app.core.helper"]
    client.messages.clear()
    res = as_dict(await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=lens.command.command, arguments=lens.command.arguments)), T))
    ids = ["tests/test_core.py::test_compute", "tests/test_core.py::test_helper", "tests/test_engine.py::test_run",
           "tests/test_service.py::test_serve"]
    assert res["target"] == "app.core.helper"
    assert [t["id"] for t in res["tests"]] == ids
    assert res["tests"][0]["uri"] == uri(repo.root / "tests/test_core.py")
    # a references-style list: where each test is defined (0-based lines)
    assert [(x["uri"], x["range"]["start"]["line"]) for x in res["locations"]] == [
        (uri(repo.root / "tests/test_core.py"), 7), (uri(repo.root / "tests/test_core.py"), 3),
        (uri(repo.root / "tests/test_engine.py"), 7), (uri(repo.root / "tests/test_service.py"), 3)]
    assert res["commands"]["pytest"] == "pytest " + " ".join(ids)
    for _ in range(100):
        if client.messages:
            break
        await asyncio.sleep(0.05)
    assert [m.message for m in client.messages] == ["orbit: 4 tests reach app.core.helper: pytest " + " ".join(ids)]


@pytest.mark.parametrize("arguments, message", [
    ([], "URI"),
    (["file:///nowhere/x.py", {"line": 0, "character": 0}, "x"], "not in an indexed"),
    ([None, {"line": 0, "character": 0}, "x"], "URI"),
])
async def test_command_bad_arguments(client: LanguageClient, repo, arguments, message):
    with pytest.raises(Exception, match=message):
        await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="orbit.showTests", arguments=arguments)), T)


async def test_counts_move_with_the_graph(client: LanguageClient, repo):
    """A test added and saved is counted once the file is re-indexed (the answers are cached per
    graph generation, never across a re-index)."""
    path = repo.root / "tests/test_core.py"
    before = (await tests_lenses(client, repo.root / "app/core.py"))["app.core.helper"].command.title
    assert before == "4 tests reach this"
    await save_and_wait_indexed(client, path, path.read_text() + "\n\ndef test_helper_again():\n    assert helper(2) == 3\n")
    deadline = time.monotonic() + T
    title = before
    while time.monotonic() < deadline:
        title = (await tests_lenses(client, repo.root / "app/core.py"))["app.core.helper"].command.title
        if title != before:
            break
        await asyncio.sleep(0.1)
    assert title == "5 tests reach this"
