"""orbit/changes over LSP: the change as the editor shows it (unsaved buffers included)."""

from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from changes_repo import make_repo, record_coverage
from lsp_harness import SERVER, as_dict, start_session, uri

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    r = make_repo(tmp_path_factory.mktemp("lspchg") / "ws")
    # a saved (uncommitted) edit on disk
    r.edit("app/core.py", "    return x + 1\n", "    return x + 2\n")
    return r


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, repo):
    await start_session(lsp_client, repo.root, "visual-studio-code")
    yield
    await lsp_client.shutdown_session()


async def changes(client, params):
    return as_dict(await client.protocol.send_request_async("orbit/changes", params))


async def test_saved_change(client: LanguageClient, repo):
    res = await changes(client, {})
    assert [(s["qual"], s["status"]) for s in res["symbols"]] == [("app.core.helper", "modified")]
    assert res["symbols"][0]["uri"] == uri(repo.root / "app/core.py")
    assert [t["id"] for t in res["tests"]["selected"]] == [
        "tests/test_core.py::test_compute", "tests/test_core.py::test_helper", "tests/test_engine.py::test_run",
        "tests/test_service.py::test_serve"]
    assert res["tests"]["selected"][0]["uri"] == uri(repo.root / "tests/test_core.py")
    assert res["unsaved"] == [] and res["workspace"] == uri(repo.root)
    assert res["cypher"] and all("query" in c for c in res["cypher"])


async def test_unsaved_buffer_counts(client: LanguageClient, repo):
    path = repo.root / "app/service.py"
    text = path.read_text()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=uri(path), language_id="python", version=1, text=text)))
    edited = text.replace("    return old_name(y)\n", "    return old_name(y) + 0\n")
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri(path), version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=edited)]))
    res = await changes(client, {"textDocument": {"uri": uri(path)}})
    assert res["unsaved"] == ["app/service.py"]
    assert [(s["qual"], s["status"]) for s in res["symbols"]] == [
        ("app.core.helper", "modified"), ("app.service.uses_old", "modified")]
    assert "tests/test_service.py::test_uses_old" in [t["id"] for t in res["tests"]["selected"]]
    # without buffers: the disk only
    res = await changes(client, {"unsaved": False})
    assert [s["qual"] for s in res["symbols"]] == ["app.core.helper"]
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri=uri(path))))


async def test_depth_and_base(client: LanguageClient, repo):
    res = await changes(client, {"depth": 1, "base": "HEAD", "tests": False})
    assert {c["qual"] for c in res["callers"]} == {"app.core.compute", "tests.test_core.test_helper"}
    assert res["tests"]["selected"] == []


@pytest.mark.parametrize("params, message", [
    ({"depth": 0}, "depth"),
    ({"depth": "2"}, "depth"),
    ({"base": 3}, "base"),
    ({"base": "--output=x"}, "base"),
    ({"staged": "yes"}, "staged"),
    ({"staged": True, "base": "HEAD"}, "exclude"),
    ({"textDocument": {"uri": 5}}, "uri"),
    ([1], "object"),
])
async def test_bad_params(client: LanguageClient, params, message):
    with pytest.raises(Exception) as ei:
        await client.protocol.send_request_async("orbit/changes", params)
    assert message in str(ei.value)


async def test_unknown_ref_is_a_clear_error(client: LanguageClient):
    with pytest.raises(Exception) as ei:
        await client.protocol.send_request_async("orbit/changes", {"base": "no-such-branch"})
    assert "unknown ref 'no-such-branch'" in str(ei.value)


async def test_coverage_map_narrows(client: LanguageClient, repo):
    # the map is recorded on the working tree: its one edit (helper's ``x + 1`` -> ``x + 2``)
    # keeps every line where it is in the base, so the map describes the base's lines too;
    # helper's body runs in test_helper, test_compute, test_run, test_serve and test_dynamic
    # (``e.run`` on a parametrize argument, unbound: the static selection misses it, the map does not)
    record_coverage(repo.root, repo.root.parent / "lsp.coverage")
    res = await changes(client, {"coverage": "../lsp.coverage"})
    assert [t["id"] for t in res["tests"]["selected"]] == [
        "tests/test_core.py::test_compute", "tests/test_core.py::test_helper", "tests/test_engine.py::test_dynamic",
        "tests/test_engine.py::test_run", "tests/test_service.py::test_serve"]
    cov = res["tests"]["coverage"]
    assert cov["path"] == str(repo.root.parent / "lsp.coverage")
    assert (cov["static"], cov["narrowed"], cov["static_may"], cov["narrowed_may"]) == (4, 5, 0, 0)
    assert [(s["qual"], s["mode"]) for s in cov["symbols"]] == [("app.core.helper", "narrowed")]
    dynamic = res["tests"]["selected"][2]
    assert dynamic["depth"] is None and dynamic["uri"] == uri(repo.root / "tests/test_engine.py")
    for bad, message in (({"coverage": 3}, "params.coverage must be the path"),
                         ({"coverage": "no-such.coverage"}, "no such file")):
        with pytest.raises(Exception) as ei:
            await client.protocol.send_request_async("orbit/changes", bad)
        assert message in str(ei.value)
