"""JS/TS module resolution rules (``orbit_lsp/index/js_modules.py``) and extraction details
(``orbit_lsp/index/javascript.py``) on small workspaces written to disk. No database needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from orbit_lsp.index import javascript as jsx
from orbit_lsp.index.js_modules import JsModules, builtin_name, package_name
from orbit_lsp.index.walk import LANGS, classify_file


def make(root: Path, tree: dict[str, str]) -> JsModules:
    for rel, text in tree.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    files = {rel for rel in tree if Path(rel).suffix in LANGS}
    return JsModules(root, files)


def test_relative_extension_probing_and_directories(tmp_path):
    m = make(tmp_path, {
        "src/a.ts": "", "src/b.tsx": "", "src/c.d.ts": "", "src/d.js": "", "src/e.jsx": "",
        "src/dir/index.ts": "", "src/dir.ts": "", "src/only/index.js": "",
        "src/m.mts": "", "src/k.cts": "", "src/src.ts": "", "src/both.ts": "", "src/both.js": "",
        "src/pkg/package.json": '{"main": "lib/main.js"}', "src/pkg/lib/main.ts": "",
        "src/data.json": "{}",
    })
    r = lambda spec, frm="src/x.ts": m.resolve(spec, frm)  # noqa: E731
    assert r("./a") == ("file", "src/a.ts")
    assert r("./b") == ("file", "src/b.tsx")
    assert r("./c") == ("file", "src/c.d.ts")
    assert r("./d") == ("file", "src/d.js")
    assert r("./e") == ("file", "src/e.jsx")
    assert r("./a.js") == ("file", "src/a.ts")  # .js names the .ts source
    assert r("./b.js") == ("file", "src/b.tsx")
    assert r("./m.mjs") == ("file", "src/m.mts")
    assert r("./k.cjs") == ("file", "src/k.cts")
    assert r("./a.ts") == ("file", "src/a.ts")  # allowImportingTsExtensions
    assert r("./both") == ("file", "src/both.ts")  # .ts before .js
    assert r("./dir") == ("file", "src/dir.ts")  # the file shadows the directory
    assert r("./dir/") == ("file", "src/dir/index.ts")  # trailing slash: the directory
    assert r("./only") == ("file", "src/only/index.js")
    assert r("./pkg") == ("file", "src/pkg/lib/main.ts")  # package.json main, .js -> .ts
    assert r("../src/a", "src/sub/y.ts") == ("missing", "../src/a") or r("../a", "src/sub/y.ts") == ("file", "src/a.ts")
    assert r("./data.json") == ("other", "src/data.json")
    assert r("./nope") == ("missing", "./nope")
    assert r("../../outside") == ("missing", "../../outside")
    assert r(".", "src/dir/z.ts") == ("file", "src/dir/index.ts")


def test_bare_specifiers_packages_and_builtins(tmp_path):
    m = make(tmp_path, {"a.ts": ""})
    assert m.resolve("lodash/chunk", "a.ts") == ("package", "lodash")
    assert m.resolve("@scope/name/deep/x", "a.ts") == ("package", "@scope/name")
    assert m.resolve("fs", "a.ts") == ("builtin", "node:fs")
    assert m.resolve("fs/promises", "a.ts") == ("builtin", "node:fs")
    assert m.resolve("node:path", "a.ts") == ("builtin", "node:path")
    assert m.resolve("node:test", "a.ts") == ("builtin", "node:test")
    assert m.resolve("test", "a.ts") == ("package", "test")  # only node:test is the built-in
    assert package_name("@a/b") == "@a/b" and package_name("a/b/c") == "a"
    assert builtin_name("os") == "node:os" and builtin_name("react") is None


def test_tsconfig_paths_base_url_extends_jsonc(tmp_path):
    m = make(tmp_path, {
        "tsconfig.json": '{"extends": ["./cfg/base.json"], "compilerOptions": {"baseUrl": "./src"}}',
        "cfg/base.json": """{
            // comments and trailing commas are valid
            "compilerOptions": {
                "paths": {"@/*": ["app/*"], "@/special/*": ["special/*", "fallback/*"], "exact": ["lib/exact.ts"],},
            },
        }""",
        "src/app/x.ts": "", "src/special/y.ts": "", "src/fallback/z.ts": "", "src/lib/exact.ts": "",
        "src/top.ts": "", "src/main.ts": "",
    })
    r = lambda spec: m.resolve(spec, "src/main.ts")  # noqa: E731
    # paths are relative to baseUrl once one is set (here by the extending config)
    assert r("@/x") == ("file", "src/app/x.ts")
    assert r("@/special/y") == ("file", "src/special/y.ts")  # the longest prefix wins
    assert r("@/special/z") == ("file", "src/fallback/z.ts")  # substitutions in order
    assert r("exact") == ("file", "src/lib/exact.ts")
    assert r("top") == ("file", "src/top.ts")  # baseUrl
    assert r("react") == ("package", "react")


def test_paths_without_base_url_are_relative_to_their_config(tmp_path):
    m = make(tmp_path, {
        "tsconfig.json": '{"extends": "./config/base"}',  # ".json" added as tsc does
        "config/base.json": '{"compilerOptions": {"paths": {"~/*": ["../src/*"]}}}',
        "src/a.ts": "", "src/b.ts": "",
    })
    assert m.resolve("~/a", "src/b.ts") == ("file", "src/a.ts")
    assert m.resolve("a", "src/b.ts") == ("package", "a")  # no baseUrl: not a project path


def test_extends_from_a_package_and_broken_configs(tmp_path):
    m = make(tmp_path, {
        "tsconfig.json": '{"extends": "@acme/tsconfig/base.json", "compilerOptions": {}}',
        "node_modules/@acme/tsconfig/base.json": '{"compilerOptions": {"baseUrl": "../../../src"}}',
        "src/a.ts": "", "src/b.ts": "",
        "broken/tsconfig.json": '{"compilerOptions": {"baseUrl": ',
        "broken/c.ts": "", "broken/d.ts": "",
        "loop/tsconfig.json": '{"extends": "./other.json"}', "loop/other.json": '{"extends": "./tsconfig.json"}',
        "loop/e.ts": "",
    })
    assert m.resolve("a", "src/b.ts") == ("file", "src/a.ts")
    # an invalid nested config is reported and ignored (the file still resolves relative imports)
    assert m.resolve("./d", "broken/c.ts") == ("file", "broken/d.ts")
    assert m.resolve("a", "broken/c.ts") == ("package", "a")
    assert any(p.endswith("broken/tsconfig.json") for p in m.problems)
    assert m.resolve("x", "loop/e.ts") == ("package", "x")  # an extends cycle terminates


def test_nested_tsconfig_for_sub_projects(tmp_path):
    m = make(tmp_path, {
        "tsconfig.json": '{"compilerOptions": {"baseUrl": "."}}',
        "web/tsconfig.json": '{"compilerOptions": {"baseUrl": "src"}}',
        "web/src/util.ts": "", "web/src/app/main.ts": "", "util.ts": "", "api/main.ts": "",
    })
    assert m.resolve("util", "web/src/app/main.ts") == ("file", "web/src/util.ts")
    assert m.resolve("util", "api/main.ts") == ("file", "util.ts")


def test_workspace_packages_exports_and_main(tmp_path):
    m = make(tmp_path, {
        "package.json": '{"name": "root", "private": true, "workspaces": ["packages/*"]}',
        "packages/core/package.json": """{"name": "@acme/core", "exports": {
            ".": {"types": "./src/index.ts", "default": "./dist/index.js"},
            "./utils/*": {"import": "./src/utils/*.ts"},
            "./package.json": "./package.json"}}""",
        "packages/core/src/index.ts": "", "packages/core/src/utils/str.ts": "",
        "packages/legacy/package.json": '{"name": "legacy", "main": "lib/index.js"}',
        "packages/legacy/lib/index.js": "", "packages/legacy/lib/extra.js": "",
        "packages/app/package.json": '{"name": "app", "imports": {"#internal/*": "./src/internal/*.ts"}}',
        "packages/app/src/main.ts": "", "packages/app/src/internal/db.ts": "",
    })
    r = lambda spec: m.resolve(spec, "packages/app/src/main.ts")  # noqa: E731
    assert r("@acme/core") == ("file", "packages/core/src/index.ts")  # conditions in key order
    assert r("@acme/core/utils/str") == ("file", "packages/core/src/utils/str.ts")  # subpath pattern
    assert r("@acme/core/not-exported") == ("package", "@acme/core")  # exports close the package
    assert r("legacy") == ("file", "packages/legacy/lib/index.js")  # main
    assert r("legacy/lib/extra") == ("file", "packages/legacy/lib/extra.js")
    assert r("#internal/db") == ("file", "packages/app/src/internal/db.ts")  # subpath imports
    assert r("#nope") == ("missing", "#nope")
    assert m.workspace_packages() == {"root": "", "@acme/core": "packages/core", "legacy": "packages/legacy",
                                      "app": "packages/app"}


# -- extraction -------------------------------------------------------------------------------------
def facts(src: str, rel: str = "m.ts") -> jsx.JsFacts:
    return jsx.extract(rel, src.encode())


def test_extraction_symbols_and_import_forms():
    f = facts("""
import def, { a as b, type T } from "./x";
import * as ns from "./ns";
import type { U } from "./types";
import "./side";
import eq = require("./eq");
export { c } from "./c";
export * from "./star";
export * as grouped from "./grouped";
const r = require("./req");
async function dyn() { return import("./dyn"); }
export default class Widget extends Base {
  count = 0;
  handler = () => this.render();
  constructor() { super(); }
  render(): void { helper(); }
  static make() { return new Widget(); }
}
export const api = { get() { return 1; }, put: (x: number) => x };
export function helper() {}
interface Shape { kind: string }
type Id = string;
enum Color { Red }
declare function ambient(): void;
""")
    kinds = {s.qual: s.kind for s in f.symbols}
    assert kinds == {"dyn": "function", "Widget": "class", "Widget.handler": "method",
                     "Widget.constructor": "method", "Widget.render": "method", "Widget.make": "method",
                     "api": "variable", "api.get": "function", "api.put": "function", "helper": "function",
                     "Shape": "interface", "Id": "type", "Color": "enum", "ambient": "function"}
    assert [(i.spec, i.kind) for i in f.imports] == [
        ("./x", "import"), ("./ns", "import"), ("./types", "type"), ("./side", "side"), ("./eq", "import-equals"),
        ("./c", "reexport"), ("./star", "star"), ("./grouped", "reexport"), ("./req", "require"),
        ("./dyn", "dynamic")]
    top = f.scopes[0].names
    assert top["def"] == [("imp", "./x", "default")] and top["b"] == [("imp", "./x", "a")]
    assert top["ns"] == [("imp", "./ns", "*")] and top["eq"] == [("imp", "./eq", "*")]
    assert top["r"] == [("imp", "./req", "*")]
    assert f.exports["c"] == ("imp", "./c", "c") and f.exports["grouped"] == ("imp", "./grouped", "*")
    assert f.exports["default"] == ("n", "Widget") and f.stars == ["./star"]
    assert f.classes["Widget"].heritage == ("n", "Base")
    sym = {s.qual: s for s in f.symbols}
    assert (sym["helper"].line, sym["helper"].col) == (20, 16)  # 1-based line, UTF-8 byte column


def test_syntax_errors_raise_and_template_specifiers():
    with pytest.raises(jsx.JsSyntaxError) as ei:
        facts("export function broken( {\n  return 1;\n")
    assert ei.value.lineno >= 1 and ei.value.msg.endswith("(tree-sitter)")
    # TS variance annotations, unknown to the grammar, are mended (js_parse): no error
    assert facts('export interface Box<out A> { a: A }\n').exports == {"Box": ("n", "Box")}
    with pytest.raises(jsx.JsSyntaxError) as ei:  # a real error
        facts('import { x } from "./x";\nexport interface Box<A { a: A }\nexport function ok() { x(); }\n')
    partial = ei.value.facts  # what the error-tolerant tree still yields
    assert [i.spec for i in partial.imports] == ["./x"] and "ok" in {s.qual for s in partial.symbols}
    f = facts("const a = import(`./fixed.js`);\nconst b = (x) => import(`./l/${x}.js`);\n", "m.js")
    assert [(i.spec, i.kind) for i in f.imports] == [("./fixed.js", "dynamic")]


def test_import_types_are_type_imports():
    f = facts('let a: import("./x").T;\nconst b = import("./y");\n'
              'export function g(p: typeof import("./z")) { return import("./w").then((m) => m.q()); }\n')
    assert [(i.spec, i.kind, i.line) for i in f.imports] == [
        ("./y", "dynamic", 2), ("./w", "dynamic", 3), ("./x", "type", 1), ("./z", "type", 3)]


def test_generated_and_minified_js_are_skipped():
    assert classify_file(Path("a.js"), b"var x = 1;\n//# sourceMappingURL=a.js.map\n", 10**6).startswith("generated")
    assert classify_file(Path("b.js"), b"/******/ (() => { var __webpack_modules__ = {};\n", 10**6) == \
        "generated bundle (webpack)"
    assert classify_file(Path("c.ts"), b"// @generated by protoc\nexport const a = 1;\n", 10**6).startswith("generated")
    assert classify_file(Path("d.ts"), b"export const a = 1;\n", 10**6) is None
    assert classify_file(Path("e.py"), b"# x\n/******/\n", 10**6) is None  # only JS/TS
