"""orbit/impact and orbit/status over LSP, under both client profiles."""

from __future__ import annotations

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient

from conftest import shared_case
from lsp_harness import PROFILES, SERVER, as_dict, copy_case, start_session, uri

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.shared_cases("005-py-aliased-imports", fixture="client")]


@pytest.fixture(scope="module")
def ws005(tmp_path_factory):
    return copy_case(shared_case("005-py-aliased-imports"), tmp_path_factory.mktemp("lsp") / "ws005")


@pytest_lsp.fixture(scope="module", config=SERVER, params=PROFILES)
async def client(lsp_client: LanguageClient, ws005, request):
    await start_session(lsp_client, ws005, request.param)
    yield
    await lsp_client.shutdown_session()


async def impact(client, params):
    return as_dict(await client.protocol.send_request_async("orbit/impact", params))


async def test_impact_of_file(client: LanguageClient, ws005):
    res = await impact(client, {"textDocument": {"uri": uri(ws005 / "greet.py")}})
    assert res["target"]["type"] == "file" and res["target"]["path"] == "greet.py"
    assert {d["path"]: d["hops"] for d in res["dependents"]} == {
        "plain.py": 1, "mod_alias.py": 1, "name_import.py": 1, "name_alias.py": 1}
    assert res["callers"] is None
    assert res["cypher"] and all("query" in c for c in res["cypher"])


async def test_impact_of_symbol_at_position(client: LanguageClient, ws005):
    # greet.py line 0 is "def hello(name):" -> the name starts at character 4
    res = await impact(client, {"textDocument": {"uri": uri(ws005 / "greet.py")},
                                "position": {"line": 0, "character": 5}})
    assert res["target"]["type"] == "symbol" and res["target"]["qual"] == "greet.hello"
    assert sorted(c["qual"] for c in res["callers"]) == ["mod_alias.b", "name_import.c", "plain.a"]


async def test_impact_on_alias_import(client: LanguageClient, ws005):
    # mod_alias.py line 0 "import greet as G": the import leads to greet.py
    res = await impact(client, {"textDocument": {"uri": uri(ws005 / "mod_alias.py")},
                                "position": {"line": 0, "character": 16}})
    assert res["target"] == {"type": "file", "path": "greet.py", "uri": uri(ws005 / "greet.py")}
    assert len(res["dependents"]) == 4


@pytest.mark.parametrize("params", [
    {},
    {"textDocument": "nope"},
    {"textDocument": {"uri": 3}},
    {"textDocument": {"uri": "file:///x.py"}, "position": {"line": -1, "character": 0}},
    {"textDocument": {"uri": "file:///x.py"}, "position": "here"},
])
async def test_bad_params_get_invalid_params(client: LanguageClient, params):
    with pytest.raises(Exception) as ei:
        await client.protocol.send_request_async("orbit/impact", params)
    assert "InvalidParams" in type(ei.value).__name__ or "-32602" in str(ei.value) or "required" in str(ei.value) \
        or "must" in str(ei.value)


async def test_status(client: LanguageClient, ws005):
    st = as_dict(await client.protocol.send_request_async("orbit/status", {}))
    assert st["falkordb"]["online"] is True
    # an empty array is no params (Neovim sends an empty Lua table as []); other arrays are not
    assert as_dict(await client.protocol.send_request_async("orbit/status", []))["falkordb"]["online"] is True
    with pytest.raises(Exception) as ei:
        await client.protocol.send_request_async("orbit/impact", [{"textDocument": {"uri": "file:///x.py"}}])
    assert "must be an object" in str(ei.value) or "-32602" in str(ei.value)
    [w] = st["workspaces"]
    assert w["root"] == str(ws005.resolve()) and w["files"] == 8 and w["last_index"]
