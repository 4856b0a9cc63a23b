"""JS/TS call binding in the graph and the incremental path (``reindex_file`` / ``remove_file``):
an incremental graph must equal a full rebuild, a file with a syntax error keeps its last good
graph, and calls *into* an edited file from other files (through barrels too) are re-bound."""

from __future__ import annotations

import contextlib

from orbit_lsp.graph.queries import export
from test_incremental import assert_same, new_indexer, workspaces, write

BASE = """export class Base {
  constructor() {}
  greet() { return this.name(); }
  name() { return "b"; }
}
"""
CHILD = """import { Base } from "./base";
export class Child extends Base {
  run() { this.greet(); this.own(); this.nope(); }
  own() {}
}
"""
MAIN = """import { Child } from "./child";
import * as b from "./base";
import { helper } from "./barrel";
export function start() {
  const c = new Child();
  c.run();
  new b.Base();
  unknownFn();
  console.log(helper());
}
"""
BARREL = 'export * from "./core";\n'
CORE = "export function helper() { return 1; }\n"
TREE = {"src/base.ts": BASE, "src/child.ts": CHILD, "src/main.ts": MAIN, "src/barrel.ts": BARREL,
        "src/core.ts": CORE, "tsconfig.json": '{"compilerOptions": {"strict": true}}'}


@contextlib.contextmanager
def tree_indexed(store):
    """``TREE`` written to a fresh workspace and indexed: yields ``(make, root, indexer)``."""
    with workspaces() as make:
        root = make()
        for rel, text in TREE.items():
            write(root, rel, text)
        ix = new_indexer(make, root, store)
        ix.index_all()
        yield make, root, ix


def calls(g) -> dict[tuple[str, str], str]:
    return {(a, b): r for a, b, r in g.query("MATCH (a:Symbol)-[e:CALLS]->(b:Symbol) "
                                             "RETURN a.qual, b.qual, e.resolved").rows}


def unresolved(g) -> dict[str, list]:
    return {q: names for q, names in g.query("MATCH (s:Symbol) WHERE s.unresolved_calls > 0 "
                                             "RETURN s.qual, s.unresolved_names").rows}


def test_js_calls_this_inherited_new_constructor(store):
    with tree_indexed(store) as (make, root, ix):
        g = ix.graph
        assert calls(g) == {
            ("src/child.ts#Child.run", "src/base.ts#Base.greet"): "self",  # inherited workspace method
            ("src/child.ts#Child.run", "src/child.ts#Child.own"): "self",
            ("src/base.ts#Base.greet", "src/base.ts#Base.name"): "self",
            ("src/main.ts#start", "src/child.ts#Child"): "class",  # new Child -> the class ...
            ("src/main.ts#start", "src/base.ts#Base.constructor"): "init",  # ... and its (inherited) constructor
            ("src/main.ts#start", "src/child.ts#Child.run"): "instance",
            ("src/main.ts#start", "src/base.ts#Base"): "class",  # new b.Base() through the namespace
            ("src/main.ts#start", "src/core.ts#helper"): "import",  # through the export * barrel
        }
        # unknown calls are counted on their caller, never matched by name; globals are not unknown
        assert unresolved(g) == {"src/main.ts#start": ["unknownFn"], "src/child.ts#Child.run": ["nope"]}
        assert g.query("MATCH (a:Symbol)-[:INHERITS]->(b:Symbol) RETURN a.qual, b.qual").rows == [
            ["src/child.ts#Child", "src/base.ts#Base"]]


def test_js_incremental_equals_rebuild(store):
    with tree_indexed(store) as (make, root, ix):
        g = ix.graph
        assert_same(ix, make, store, "after the first build")

        # an edit behind the barrel: main's call into core re-binds without touching main
        core = write(root, "src/core.ts", "export function other() {}\nexport function helper() { return 2; }\n")
        rep = ix.reindex_file(core)
        assert rep.mode == "incremental"
        assert g.query("MATCH (s:Symbol {qual: 'src/core.ts#helper'}) RETURN s.line").rows == [[2]]
        assert ("src/main.ts#start", "src/core.ts#helper") in calls(g)
        assert_same(ix, make, store, "after moving helper")

        # the callee disappears: the call becomes unresolved, the edge goes
        write(root, "src/core.ts", "export function other() {}\n")
        ix.reindex_file(root / "src/core.ts")
        assert ("src/main.ts#start", "src/core.ts#helper") not in calls(g)
        assert sorted(unresolved(g)["src/main.ts#start"]) == ["helper", "unknownFn"]
        assert_same(ix, make, store, "after removing helper")

        # a method added to the base class binds this.nope() in the subclass (another file)
        write(root, "src/base.ts", BASE.replace('  name() { return "b"; }', '  name() { return "b"; }\n  nope() {}'))
        ix.reindex_file(root / "src/base.ts")
        assert calls(g)[("src/child.ts#Child.run", "src/base.ts#Base.nope")] == "self"
        assert_same(ix, make, store, "after adding Base.nope")

        # a syntax error keeps the last good graph and records the error
        before = export(g)
        write(root, "src/child.ts", CHILD.replace("run() {", "run( {"))
        rep = ix.reindex_file(root / "src/child.ts")
        err = rep.parse_errors["src/child.ts"]
        assert err.startswith("line ")
        assert g.query("MATCH (f:File {path: 'src/child.ts'}) RETURN f.parse_error").rows == [[err]]
        after = export(g)
        strip = lambda e: [f for f in e["files"] if f["path"] != "src/child.ts"]  # noqa: E731
        assert strip(after) == strip(before) and after["symbols"] == before["symbols"]
        assert after["edges"] == before["edges"]
        write(root, "src/child.ts", CHILD)
        assert not ix.reindex_file(root / "src/child.ts").parse_errors
        assert_same(ix, make, store, "after fixing the syntax error")

        # a new file, then removed
        write(root, "src/extra.ts", 'import { Child } from "./child";\nexport const mk = () => new Child();\n')
        ix.reindex_file(root / "src/extra.ts")
        assert ("src/extra.ts#mk", "src/child.ts#Child") in calls(g)
        assert_same(ix, make, store, "after adding extra.ts")
        (root / "src/extra.ts").unlink()
        ix.remove_file(root / "src/extra.ts")
        assert not g.query("MATCH (f:File {path: 'src/extra.ts'}) RETURN f").rows
        assert_same(ix, make, store, "after removing extra.ts")

        # removing the barrel's target: main's import of the barrel stays, its call is unresolved
        (root / "src/core.ts").unlink()
        ix.remove_file(root / "src/core.ts")
        assert g.query("MATCH (:File {path: 'src/barrel.ts'})-[:IMPORTS]->(b) RETURN b.path").rows == []
        assert g.query("MATCH (f:File {path: 'src/barrel.ts'}) RETURN f.unresolved_imports").rows == [["1:./core"]] \
            or g.query("MATCH (f:File {path: 'src/barrel.ts'}) RETURN f.unresolved_imports").rows == [[["1:./core"]]]
        assert_same(ix, make, store, "after removing core.ts")


def test_js_reopen_uses_the_cache(store):
    with tree_indexed(store) as (make, root, ix):
        first = export(ix.graph)
        again = new_indexer(make, root, store)
        rep = again.index_all()
        assert rep.mode == "unchanged" and rep.reused == len(TREE) - 1
        write(root, "src/core.ts", "export function helper() { return 3; }\nexport const z = 1;\n")
        rep = again.index_all()
        assert rep.mode == "incremental" and rep.parsed == 1
        assert [e for e in export(again.graph)["edges"] if e["type"] == "CALLS"] == \
            [e for e in first["edges"] if e["type"] == "CALLS"]
        assert_same(again, make, store, "after a re-open with one changed file")


def test_js_file_with_errors_and_no_last_graph_keeps_what_parses(store):
    """A grammar gap (or a real error) on the first index: the partial facts of tree-sitter's
    error-tolerant tree are indexed and the error is recorded; a later broken edit keeps them."""
    with workspaces() as make:
        root = make()
        # (variance annotations were such a gap until js_parse mended them: a real error now)
        write(root, "a.ts", 'import { f } from "./b";\nexport const broken = ;\nexport function g() { f(); }\n')
        write(root, "b.ts", "export function f() {}\n")
        ix = new_indexer(make, root, store)
        rep = ix.index_all()
        assert rep.parse_errors["a.ts"].startswith("line 2: ")
        g = ix.graph
        assert ("a.ts#g", "b.ts#f") in calls(g)
        assert g.query("MATCH (f:File {path: 'a.ts'}) RETURN f.parse_error").rows == [[rep.parse_errors["a.ts"]]]
        write(root, "a.ts", 'import { f } from "./b";\nexport function g( { f(); }\n')
        rep = ix.reindex_file(root / "a.ts")
        assert "a.ts" in rep.parse_errors and ("a.ts#g", "b.ts#f") in calls(g)


def test_js_config_edit_is_picked_up_by_the_next_index(store):
    """Resolution depends on tsconfig/package.json files: the next ``index_all`` (what the server
    runs when one changes) notices an edited, created or deleted one and resolves again."""
    with workspaces() as make:
        root = make()
        write(root, "tsconfig.json", '{"compilerOptions": {"paths": {"@x/*": ["./one/*"]}}}')
        write(root, "one/m.ts", "export function f() {}\n")
        write(root, "two/m.ts", "export function f() {}\n")
        write(root, "app/main.ts", 'import { f } from "@x/m";\nexport function g() { f(); }\n')
        ix = new_indexer(make, root, store)
        ix.index_all()
        g = ix.graph
        imports = lambda: {b for (b,) in g.query(  # noqa: E731
            "MATCH (:File {path: 'app/main.ts'})-[:IMPORTS]->(b) RETURN b.path").rows}
        assert imports() == {"one/m.ts"}
        assert ix.index_all().mode == "unchanged"
        write(root, "tsconfig.json", '{\n  // now two\n  "compilerOptions": {"paths": {"@x/*": ["./two/*"],},},\n}')
        assert ix.index_all().mode == "full"
        assert imports() == {"two/m.ts"} and ("app/main.ts#g", "two/m.ts#f") in calls(g)
        # a nearer config appears for app/: it owns app/ (no paths: "@x/m" is a package now)
        write(root, "app/tsconfig.json", "{}")
        assert ix.index_all().mode == "full"
        assert imports() == set()
        assert g.query("MATCH (:File {path: 'app/main.ts'})-[:USES_PACKAGE]->(p) RETURN p.name").rows == [["@x/m"]]
        assert_same(ix, make, store, "after the config edits")


# -- property: random JS/TS workspaces and edits, incremental == rebuild ------------------------------
import os  # noqa: E402

from hypothesis import HealthCheck, given  # noqa: E402
from hypothesis import settings as hsettings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

JS_FILES = ["a.ts", "b.ts", "c.ts", "index.ts", "main.ts", "lib/d.js", "lib/index.js"]
IMPORTS = ['import { f } from "./a";', 'import { f as ff } from "./b";', 'import * as A from "./a";',
           'import def from "./c";', 'export * from "./b";', 'export { g } from "./c";',
           'import { K, L } from "./index";', 'const D = require("./lib/d");', 'import "./missing";',
           'import x from "lodash/fp";', 'import * as I from "./index";', 'export * from "./a";',
           'const { h } = require("./lib");']
CALLS = ["f()", "ff()", "A.f()", "A.g()", "def()", "new K()", "new A.L()", "D.h()", "g()", "missing()",
         "I.f()", "h()", "x()"]


@st.composite
def js_source(draw, rel: str) -> str:
    lines = []
    cjs = rel.endswith(".js")
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["import", "func", "arrow", "class", "call", "default"]))
        body = "; ".join(draw(st.lists(st.sampled_from(CALLS), max_size=3)))
        name = draw(st.sampled_from(["f", "g", "h"]))
        if kind == "import":
            imp = draw(st.sampled_from(IMPORTS))
            if rel.startswith("lib/"):
                imp = imp.replace('"./', '"../').replace('"../lib', '"./')
            lines.append(imp)
        elif kind == "func":
            lines.append(f"exports.{name} = function () {{ {body} }};" if cjs else
                         f"export function {name}() {{ {body} }}")
        elif kind == "arrow":
            lines.append(f"module.exports = {{ {name}: () => {{ {body} }} }};" if cjs else
                         f"export const {name} = () => {{ {body} }};")
        elif kind == "class" and not cjs:
            cls = draw(st.sampled_from(["K", "L"]))
            base = draw(st.sampled_from(["", " extends L", " extends A.L", " extends Missing"]))
            if base == " extends L" and cls == "L":
                base = ""
            lines.append(f"export class {cls}{base} {{ constructor() {{ {body} }} m() {{ this.n(); {body} }} "
                         f"n() {{ this.m(); }} }}")
        elif kind == "default" and not cjs:
            lines.append(f"export default function {name}() {{ {body} }}")
        else:
            lines.append(body + ";" if body else "")
    return "\n".join(lines) + "\n"


@hsettings(max_examples=int(os.environ.get("ORBIT_HYPOTHESIS_EXAMPLES", "25")) // 2 or 1, deadline=None,
           database=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_js_incremental_equals_rebuild_property(store, data):
    """Random small JS/TS workspaces (ESM, CommonJS, barrels, classes), a few random edits each
    followed by ``reindex_file`` / ``remove_file`` (a broken intermediate state included), then
    the graph must equal a fresh index of the same files."""
    rels = data.draw(st.lists(st.sampled_from(JS_FILES), min_size=2, max_size=6, unique=True), label="files")
    with workspaces() as make:
        root = make() / "ws"
        for rel in rels:
            write(root, rel, data.draw(js_source(rel), label=rel))
        ix = new_indexer(make, root, store)
        assert ix.index_all().mode == "full"
        broken = set()
        for _ in range(data.draw(st.integers(1, 4), label="n_edits")):
            kind = data.draw(st.sampled_from(["write", "write", "delete", "break"]), label="edit")
            rel = data.draw(st.sampled_from(JS_FILES), label="file")
            path = root / rel
            if kind == "delete":
                if path.exists():
                    path.unlink()
                ix.remove_file(path)
                broken.discard(rel)
            elif kind == "break":
                if path.exists():
                    write(root, rel, path.read_text() + "\nexport function broken( {\n")
                    ix.reindex_file(path)
                    broken.add(rel)
            else:
                write(root, rel, data.draw(js_source(rel), label=f"content of {rel}"))
                ix.reindex_file(path)
                broken.discard(rel)
        for rel in sorted(broken):  # fix what is still broken: the rebuild has no last good graph
            text = (root / rel).read_text().replace("\nexport function broken( {\n", "")
            write(root, rel, text)
            ix.reindex_file(root / rel)
        assert_same(ix, make, store, "after random edits")


def test_npm_packages_are_not_python_modules(store):
    """An npm package named like a Python stdlib module (``queue``) is not marked stdlib."""
    with workspaces() as make:
        root = make()
        write(root, "a.js", 'const q = require("queue");\nconst fs = require("node:fs");\n')
        ix = new_indexer(make, root, store)
        ix.index_all()
        assert sorted(ix.graph.query("MATCH (:File)-[:USES_PACKAGE]->(p:Package) RETURN p.name, p.stdlib, p.dist").rows) \
            == [["node:fs", True, ""], ["queue", False, "queue"]]


def test_jsx_components_and_decorators(store):
    with workspaces() as make:
        root = make()
        write(root, "ui.tsx", "export function Button(p: any) { return <button>{p.children}</button>; }\n"
                              "export const UI = { Card: () => <div/> };\n")
        write(root, "deco.ts", "export function Component(o: object) { return (c: any) => c; }\n"
                               "export function Input(t: any, k: string) {}\nexport function mk() { return {}; }\n")
        write(root, "app.tsx", 'import { Button, UI } from "./ui";\nimport { Component, Input, mk } from "./deco";\n'
                               "import { Other } from \"some-lib\";\n"
                               "@Component({ a: mk() })\n"
                               "export class App {\n  @Input label = 1;\n  @Input size() {}\n"
                               "  render() { return <Button><UI.Card/><Other/><Missing/></Button>; }\n}\n")
        ix = new_indexer(make, root, store)
        ix.index_all()
        g = ix.graph
        assert {k: v for k, v in calls(g).items() if k[0].startswith("app.tsx")} == {
            ("app.tsx#App", "deco.ts#Component"): "import",  # @Component(...) is a plain call ...
            ("app.tsx#App", "deco.ts#mk"): "import",  # ... evaluated outside the class
            ("app.tsx#App", "deco.ts#Input"): "decorator",  # @Input on a field: the class owns it
            ("app.tsx#App.size", "deco.ts#Input"): "decorator",
            ("app.tsx#App.render", "ui.tsx#Button"): "jsx",
            ("app.tsx#App.render", "ui.tsx#UI.Card"): "jsx",
        }
        # <Other/> comes from a package (known external); <Missing/> is unknown: counted
        assert unresolved(g)["app.tsx#App.render"] == ["Missing"]
        assert_same(ix, make, store, "jsx and decorators")
