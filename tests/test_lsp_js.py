"""The language server on a small TypeScript workspace, under both client profiles: code lenses
(from the graph, and from an unsaved buffer), ``orbit/impact`` for a file and for a symbol, hover
on a call site and incoming calls, exactly as for Python files; and a tsconfig edit made outside
the editor re-binds the imports it maps."""

from __future__ import annotations

import asyncio
import time

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_harness import PROFILES, SERVER, as_dict, start_session, uri
from test_lsp_lenses_hover import T, hover, lenses, open_doc, replace_all, titles

pytestmark = pytest.mark.asyncio(loop_scope="module")

GEO = """export function area(w: number, h: number): number {
  return w * h;
}
export class Shape {
  size(): number { return area(1, 2); }
}
"""
APP = """import { area, Shape } from "@lib/index";
import * as lib from "./lib";
export function main(): number {
  return area(2, 3) + new Shape().size() + lib.area(1, 1);
}
"""
TSCONFIG = '{\n  // JSONC\n  "compilerOptions": {"baseUrl": ".", "paths": {"@lib/*": ["src/lib/*"]},},\n}\n'
TREE = {
    "tsconfig.json": TSCONFIG,
    "src/lib/geo.ts": GEO,
    "src/lib/index.ts": 'export * from "./geo";\n',
    "src/app.ts": APP,
    "src/alias.ts": 'import { area } from "@lib/geo";\nexport const unit = () => area(1, 1);\n',
    "src/pets.ts": ("export interface Pet {\n  speak(): string;\n}\n"
                    "export class Dog implements Pet {\n  speak() { return 'woof'; }\n}\n"
                    "export class Puppy extends Dog {\n  speak() { return 'yip'; }\n}\n"
                    "export function talk(p: Pet) { return p.speak(); }\n"),
}


@pytest_lsp.fixture(scope="module", config=SERVER, params=PROFILES)
async def client(lsp_client: LanguageClient, tmp_path_factory, request):
    root = lsp_client.tsws = tmp_path_factory.mktemp("lsp-ts") / "tsws"  # one copy per profile
    for rel, text in TREE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    await start_session(lsp_client, root, request.param)
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
def tsws(client):
    return client.tsws


async def impact(client, params):
    return as_dict(await asyncio.wait_for(client.protocol.send_request_async("orbit/impact", params), T))


async def test_lenses_on_a_ts_file(client, tsws):
    got = await lenses(client, tsws / "src/lib/geo.ts")
    assert titles(got) == {(0, 0): "3 dependents, 2 hops", (0, 16): "3 callers", (3, 13): "1 caller",
                           (4, 2): "1 caller"}
    area = next(x for x in got if x.range.start == types.Position(0, 16))
    assert area.data["target"]["qual"] == "src/lib/geo.ts#area"
    assert area.range.end == types.Position(0, 20)  # the name `area` (ASCII: same in every encoding)


async def test_impact_of_a_ts_file_and_symbol(client, tsws):
    geo = uri(tsws / "src/lib/geo.ts")
    res = await impact(client, {"textDocument": {"uri": geo}})
    assert res["target"]["type"] == "file" and res["target"]["path"] == "src/lib/geo.ts"
    assert {d["path"]: d["hops"] for d in res["dependents"]} == {"src/lib/index.ts": 1, "src/alias.ts": 1,
                                                                 "src/app.ts": 2}
    res = await impact(client, {"textDocument": {"uri": geo}, "position": {"line": 0, "character": 17}})
    assert res["target"]["type"] == "symbol" and res["target"]["qual"] == "src/lib/geo.ts#area"
    assert sorted(c["qual"] for c in res["callers"]) == ["src/alias.ts#unit", "src/app.ts#main",
                                                         "src/lib/geo.ts#Shape.size"]
    assert res["cypher"]


async def test_hover_and_incoming_calls(client, tsws):
    app = tsws / "src/app.ts"
    h = await hover(client, app, 3, 10)  # `area(2, 3)` in main, through the barrel and the paths alias
    assert h is not None and "`src/lib/geo.ts#area`" in h.contents.value
    items = await asyncio.wait_for(client.text_document_prepare_call_hierarchy_async(types.CallHierarchyPrepareParams(
        text_document=types.TextDocumentIdentifier(uri(tsws / "src/lib/geo.ts")), position=types.Position(0, 17))), T)
    [item] = items
    assert item.name == "area"
    inc = await asyncio.wait_for(client.call_hierarchy_incoming_calls_async(
        types.CallHierarchyIncomingCallsParams(item=item)), T)
    assert sorted(c.from_.name for c in inc) == ["main", "size", "unit"]


async def test_lenses_from_an_unsaved_ts_buffer(client, tsws):
    geo = tsws / "src/lib/geo.ts"
    open_doc(client, geo, language="typescript")
    replace_all(client, geo, "\n\n" + GEO, 2)  # two lines inserted above, not saved
    got = await lenses(client, geo)
    assert titles(got) == {(0, 0): "3 dependents, 2 hops", (2, 16): "3 callers", (5, 13): "1 caller",
                           (6, 2): "1 caller"}


async def _wait_reindexed(client, root, since: float) -> None:
    deadline = time.monotonic() + T
    while time.monotonic() < deadline:
        st = as_dict(await client.protocol.send_request_async("orbit/status", {}))
        if any(w["root"] == str(root.resolve()) and (w["last_index"] or 0) > since for w in st["workspaces"]):
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"{root} not re-indexed")


async def test_tsconfig_edit_outside_the_editor_rebinds_imports(client, tsws):
    geo = {"textDocument": {"uri": uri(tsws / "src/lib/geo.ts")}}
    since = time.time()
    await asyncio.sleep(0.05)
    (tsws / "tsconfig.json").write_text(TSCONFIG.replace("src/lib/*", "src/elsewhere/*"))  # @lib/geo: gone
    await _wait_reindexed(client, tsws, since)
    res = await impact(client, geo)
    assert {d["path"]: d["hops"] for d in res["dependents"]} == {"src/lib/index.ts": 1, "src/app.ts": 2}
    since = time.time()
    await asyncio.sleep(0.05)
    (tsws / "tsconfig.json").write_text(TSCONFIG)
    await _wait_reindexed(client, tsws, since)
    res = await impact(client, geo)
    assert {d["path"]: d["hops"] for d in res["dependents"]} == {"src/lib/index.ts": 1, "src/alias.ts": 1,
                                                                 "src/app.ts": 2}


async def test_implementations_of_an_interface_and_its_method(client, tsws):
    pets = uri(tsws / "src/pets.ts")

    async def implementations(line, character):
        res = await asyncio.wait_for(client.text_document_implementation_async(types.ImplementationParams(
            text_document=types.TextDocumentIdentifier(uri=pets), position=types.Position(line, character))), T)
        return sorted((loc.range.start.line, loc.range.start.character) for loc in res or [])

    # the interface -> the classes below it; its method -> their methods (Dog directly, Puppy through Dog)
    assert await implementations(0, 18) == [(3, 13), (6, 13)]
    assert await implementations(1, 3) == [(4, 2), (7, 2)]
    # the call p.speak() binds to the interface's declaration; from there, the implementations
    assert await implementations(9, 41) == [(4, 2), (7, 2)]
