"""Modern TypeScript syntax (``orbit_lsp/index/js_parse.py``), type-only imports
(``IMPORTS.type_only``, import cycles) and JS/TS symbol names (``queries.find_symbols``),
asserted on files written to disk and indexed into a real embedded FalkorDB.

Every snippet below is valid TypeScript (``tsc --noEmit`` accepts it) or JavaScript; the PyPI
grammars reject some of them (see bench/RESULTS.md "TypeScript grammars"), ``js_parse`` mends
them, so none may end in a syntax error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orbit_lsp.agent.planner import run_planner
from orbit_lsp.agent.tools import Toolbox
from orbit_lsp.graph import queries
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.index.languages import parse_js

from test_cases_python import rows


def facts_of(rel: str, src: str):
    facts, err = parse_js(rel, src.encode())
    assert err is None, f"{rel}: {err}"
    return facts


# -- 2. parsing modern TypeScript ------------------------------------------------------------------
VARIANCE = """export interface ZodType<out Output = unknown, in Input = unknown> {
  parse(data: unknown): Output;
}
export interface Both<in out T> { v: T }
export type Producer<out T> = () => T;
export class Box<const in T> {
  put(x: T): void {}
}
export interface ZodObject<
  /** @ts-ignore Cast variance */
  out Shape extends object = {},
  out Config = unknown,
> {}
"""


@pytest.mark.parametrize("rel", ["src/v.ts", "src/v.mts", "src/v.cts", "src/v.tsx"])
def test_variance_annotations_parse_with_their_definitions(rel):
    f = facts_of(rel, VARIANCE)
    assert {(s.qual, s.kind) for s in f.symbols} == {
        ("ZodType", "interface"), ("Both", "interface"), ("Producer", "type"), ("Box", "class"),
        ("Box.put", "method"), ("ZodObject", "interface"), ("ZodType.parse", "method")}  # interface methods too
    assert set(f.exports) == {"ZodType", "Both", "Producer", "Box", "ZodObject"}


def test_modern_syntax_without_false_errors():
    src = """import data from "./d.json" with { type: "json" };
export type * from "./types.js";
export type * as ns from "./ns.js";
export { enumType as enum, nullType as null };
let a: import("./x.js").T;
const config = { port: 1 } satisfies Record<string, number>;
function dec(_t: unknown, _c: unknown) {}
@dec
export class Service {
  accessor count = 0;
  static accessor shared: number = 1;
  override accessor other = 2;
  @dec method(@dec arg: string): void { helper(); }
}
function helper<const T extends readonly unknown[]>(x?: T) {
  using res = open();
}
async function run() { await using conn = open(); }
function open() { return { [Symbol.dispose]() {}, [Symbol.asyncDispose]: async () => {} }; }
const enumType = 1, nullType = 2;
type M<U extends string> = `use \\`${U}\\` here`;
export const dual: {
  <A>(item: A): <E>(self: E) => void
  <A, E>(self: E, item: A): void
} = null as any
"""
    f = facts_of("src/modern.ts", src)
    assert {(i.spec, i.kind) for i in f.imports} == {
        ("./d.json", "import"), ("./types.js", "type-star"), ("./ns.js", "type-reexport"), ("./x.js", "type")}
    assert f.stars == ["./types.js"]  # types still flow through the barrel
    assert f.exports["enum"] == ("n", "enumType") and f.exports["null"] == ("n", "nullType")
    assert f.exports["ns"] == ("imp", "./ns.js", "*")
    assert {s.qual for s in f.symbols} == {"a", "config", "dec", "Service", "Service.method", "helper", "run",
                                           "open", "enumType", "nullType", "M", "dual"}
    assert [(sc.qual, c.name) for sc in f.scopes for c in sc.calls if c.name] == [
        ("Service", "dec"), ("Service.method", "dec"), ("Service.method", "helper"), ("helper", "open"), ("run", "open")]


def test_declaration_file_anonymous_default_function():
    f = facts_of("types/locale.d.ts", """import type * as errors from "../core/errors.js";
export default function (): {
    localeError: errors.ErrorMap;
};
export declare const current: import("../FiberRef.js").FiberRef<errors.Map<string>>;
declare const Base: new <A>(args: import("./Types.js").VoidIfEmpty<{ readonly [P in keyof A]: A[P] }>) => object;
""")
    assert [(s.qual, s.name, s.kind, s.line, s.end_line) for s in f.symbols] == [
        ("default", "default", "function", 2, 4), ("current", "current", "variable", 5, 5),
        ("Base", "Base", "variable", 6, 6)]
    assert f.exports == {"default": ("def", "default"), "current": ("n", "current")}
    assert sorted((i.spec, i.line, i.kind) for i in f.imports) == [
        ("../FiberRef.js", 5, "type"), ("../core/errors.js", 1, "type"), ("./Types.js", 6, "type")]


def test_javascript_reserved_words_as_export_names():
    f = facts_of("lib/external.js", """const _null = 1;
function enumType() { return helper(); }
function helper() {}
export { _null as null, enumType as enum };
export { function as fn, default as def } from "./core.js";
""")
    assert f.exports == {"null": ("n", "_null"), "enum": ("n", "enumType"),
                         "fn": ("imp", "./core.js", "function"), "def": ("imp", "./core.js", "default")}
    assert {s.qual for s in f.symbols} == {"_null", "enumType", "helper"}
    calls = [(sc.qual, c.name) for sc in f.scopes for c in sc.calls]
    assert calls == [("enumType", "helper")]


def test_real_errors_are_still_reported():
    facts, err = parse_js("src/bad.ts", b"export function f( {\n  return 1\n")
    assert err is not None and err.startswith("line ")
    assert facts is not None  # the error-tolerant tree still yields facts
    facts, err = parse_js("src/bad.ts", b"interface I<out> { }\nlet x = in out;\n")
    assert err is not None


def test_a_parse_that_mending_does_not_improve_keeps_its_text():
    """tree-sitter's error recovery is tried on a mended copy; when the mended tree is no
    better, the first tree is kept, and it must still have its text (``Tree.edit`` on it made
    every ``Node.text`` None: Airflow's ``FilterTasks.tsx`` failed with AttributeError and lost
    its facts). Reduced from that file: a closing tag without its opening one."""
    facts, err = parse_js("src/a.tsx", b'import x from "./x";\n          <MdArrowDropDown size="16px" />\n'
                                       b'      </MenuButton>')
    assert err is not None and err.startswith("line ")
    assert facts is not None and [i.spec for i in facts.imports] == ["./x"]


# -- 5. type-only imports --------------------------------------------------------------------------
def write(root: Path, tree: dict[str, str]) -> None:
    for rel, text in tree.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def index(root: Path, store, settings) -> WorkspaceIndexer:
    ix = WorkspaceIndexer(root, store, settings)
    ix.index_all()
    return ix


def edges(g) -> dict[tuple[str, str], bool]:
    return {(a, b): t for a, b, t in rows(g, "MATCH (a:File)-[e:IMPORTS]->(b:File) RETURN a.path, b.path, e.type_only")}


TYPE_ONLY_TREE = {
    # a.ts <-> b.ts only through types: no run-time cycle
    "src/a.ts": 'import type { B } from "./b";\nimport { make } from "./c";\nexport interface A { b: B }\n'
                'export function build(): A { return { b: make() }; }\n',
    "src/b.ts": 'import { type A } from "./a";\nexport interface B { a?: A }\n',
    "src/c.ts": 'import { helper, type H } from "./d";\nexport function make() { return helper() as any as H; }\n',
    "src/d.ts": 'export type H = number;\nexport function helper() { return 1; }\n'
                'export type { A } from "./a";\n',
    "src/barrel.mts": 'export type * from "./b";\nexport type * as dd from "./d";\nexport * from "./c";\n',
    "src/view.tsx": 'import type { A } from "./a";\nimport { build } from "./a";\n'
                    'export function View(p: { a: A }) { build(); return <div/>; }\n',
    # a run-time cycle through JS with JSDoc
    "lib/x.js": 'import { y } from "./y.js";\n/** @returns {number} */\nexport function x() { return y(); }\n',
    "lib/y.js": 'import { x } from "./x.js";\nexport function y() { return x(); }\n',
    # d.ts -> a.ts is type-only too, so d -> a -> c -> d has a type-only hop: not a run-time cycle
}


def test_type_only_import_edges_and_cycles(tmp_path, store, settings):
    write(tmp_path, TYPE_ONLY_TREE)
    ix = index(tmp_path, store, settings)
    try:
        assert edges(ix.graph) == {
            ("src/a.ts", "src/b.ts"): True, ("src/a.ts", "src/c.ts"): False,
            ("src/b.ts", "src/a.ts"): True,
            ("src/c.ts", "src/d.ts"): False,
            ("src/d.ts", "src/a.ts"): True,
            ("src/barrel.mts", "src/b.ts"): True, ("src/barrel.mts", "src/d.ts"): True,
            ("src/barrel.mts", "src/c.ts"): False,
            ("src/view.tsx", "src/a.ts"): False,  # one of its two imports of a.ts is a value
            ("lib/x.js", "lib/y.js"): False, ("lib/y.js", "lib/x.js"): False,
        }
        cyc = queries.import_cycles(ix.graph)
        assert {(r["path"], r["imports"]) for r in cyc.rows} == {("lib/x.js", "lib/y.js"), ("lib/y.js", "lib/x.js")}
        assert cyc.notes == ["import cycle among 2 files: lib/x.js, lib/y.js"]
        every = queries.import_cycles(ix.graph, type_only=True)
        assert {r["path"] for r in every.rows} == {"lib/x.js", "lib/y.js", "src/a.ts", "src/b.ts", "src/c.ts",
                                                   "src/d.ts"}
    finally:
        ix.graph.delete()


# -- 4. names ------------------------------------------------------------------------------------
NAMES_TREE = {
    "src/v3/types.ts": "export class ZodType {\n  safeParse(x: unknown) { return this.parse(x); }\n"
                       "  parse(x: unknown) { return x; }\n}\nexport function parse() {}\n",
    "src/v4/types.mts": "export class ZodType {\n  safeParse(x: unknown) { return x; }\n}\n",
    "src/use.js": 'import { ZodType } from "./v3/types.ts";\nexport function check() { return new ZodType(); }\n',
    "pkg/mod.py": "class Engine:\n    def start(self):\n        return 1\n",
}


def test_names_work_alike_for_js_ts_and_python(tmp_path, store, settings):
    write(tmp_path, NAMES_TREE)
    ix = index(tmp_path, store, settings)
    g = ix.graph
    try:
        found = lambda text: [(s["file"], s["qual"]) for s in queries.find_symbols(g, text).rows]  # noqa: E731
        both = [("src/v3/types.ts", "src/v3/types.ts#ZodType.safeParse"),
                ("src/v4/types.mts", "src/v4/types.mts#ZodType.safeParse")]
        assert found("ZodType.safeParse") == both
        assert found("safeParse") == both
        assert found("src/v3/types.ts#ZodType.safeParse") == both[:1]
        assert found("v3/types.ts#ZodType.safeParse") == both[:1]
        assert found("types.mts#ZodType.safeParse") == both[1:]
        assert found("types.mts#safeParse") == both[1:]
        assert found("ypes.mts#safeParse") == []  # a path suffix starts at a "/"
        assert found("Engine.start") == [("pkg/mod.py", "pkg.mod.Engine.start")]
        assert found("pkg/mod.py#Engine.start") == [("pkg/mod.py", "pkg.mod.Engine.start")]
        callers = queries.callers(g, "v3/types.ts#ZodType.parse")
        assert [(c["qual"], c["lines"]) for r in callers.rows for c in r["callers"]] == [
            ("src/v3/types.ts#ZodType.safeParse", [2])]
        # unknown names suggest the closest qualified ones
        miss = queries.callers(g, "ZodTyp.safeParse")
        assert miss.rows == []
        assert miss.notes == ["no symbol named 'ZodTyp.safeParse' in the graph; closest: "
                              "src/v3/types.ts#ZodType.safeParse, src/v4/types.mts#ZodType.safeParse"]
        assert queries.suggest_symbols(g, "Engine.stop") == []
        assert queries.suggest_symbols(g, "Engine.strat") == ["pkg.mod.Engine.start"]
        chain = queries.call_chain(g, "check", "Zodtype.safeParse")
        assert chain.notes[-1].startswith("no symbol named 'Zodtype.safeParse' (target); closest: ")
        # workspace/symbol (the LSP request) takes the same forms
        ws = lambda text: [(s["qual"], s["rank"]) for s in queries.workspace_symbols(g, text).rows]  # noqa: E731
        assert ws("ZodType.safeParse") == [("src/v3/types.ts#ZodType.safeParse", 0),
                                           ("src/v4/types.mts#ZodType.safeParse", 0)]
        assert ws("v4/types.mts#zodtype.safe") == [("src/v4/types.mts#ZodType.safeParse", 2)]
        assert ws("Engine.start") == [("pkg.mod.Engine.start", 0)]
        # the planner (no model) answers with them too
        tb = Toolbox(g, tmp_path, settings)
        text = run_planner("who calls v3/types.ts#ZodType.parse?", tb).answer
        assert text == ("**`src/v3/types.ts#ZodType.parse` (`src/v3/types.ts:3`)** has 1 direct caller:\n"
                        "- `src/v3/types.ts#ZodType.safeParse` (`src/v3/types.ts:2`)")
        text = run_planner("what depends on ZodTyp.safeParse?", tb).answer
        assert text == ("`ZodTyp.safeParse` is not a file or symbol in the code graph (not indexed, skipped, or "
                        "misspelt). Closest symbols: `src/v3/types.ts#ZodType.safeParse`, "
                        "`src/v4/types.mts#ZodType.safeParse`.")
    finally:
        g.delete()


# -- 3. declaration files and build output ---------------------------------------------------------
BUILD_TREE = {
    "package.json": '{"name": "root"}',
    "src/a.ts": "export function a() { return 1; }\n",
    "src/a.d.ts": "export declare function a(): number;\n",
    "src/b.ts": 'import { a } from "./a";\nexport function b() { return a(); }\n',
    "src/b.js": 'import { a } from "./a";\nexport function b() { return a(); }\n',
    "src/view.tsx": "export function View() { return null; }\n",
    "dist/a.js": "export function a() { return 1; }\n",
    "dist/a.d.ts": "export declare function a(): number;\n",
    "dist/esm/b.mjs": "export function b() {}\n",
    "dist/chunk-3f2a.js": "export function helper() {}\n",
    "dist/view.d.ts": "export declare function View(): null;\n",
    "view.js": "export function View() { return null; }\n",  # a package's build outside src/, zod-style
    "types/only.d.ts": "export declare function only(): void;\n",  # no source: declarations stay
    "vendor/x.js": "export function x() {}\n",
    "packages/p/package.json": '{"name": "p", "types": "dist/index.d.ts", "main": "dist/index.js"}',
    "packages/p/src/index.ts": "export function p() { return 1; }\n",
    "packages/p/dist/index.d.ts": "export declare function p(): number;\n",
    "packages/p/dist/index.js": "export function p() { return 1; }\n",
    "app/main.ts": 'import { p } from "p";\nimport { a } from "../dist/a.js";\nimport { only } from "../types/only";\n'
                   'import type { View } from "../dist/view";\nexport function main() { p(); a(); only(); }\n',
}
BUILD_SKIPS = {
    "src/a.d.ts": "declarations of src/a.ts",
    "src/b.js": "build output of src/b.ts",
    "dist/a.js": "build output of src/a.ts",
    "dist/a.d.ts": "declarations of src/a.ts",
    "dist/esm/b.mjs": "build output of src/b.ts",
    "dist/chunk-3f2a.js": "build output (dist/ mirrors src/)",
    "dist/view.d.ts": "declarations of src/view.tsx",
    "view.js": "build output of src/view.tsx",
    "packages/p/dist/index.d.ts": "declarations of packages/p/src/index.ts",
    "packages/p/dist/index.js": "build output of packages/p/src/index.ts",
}


def test_build_output_skipped_and_resolved_to_sources(tmp_path, store, settings):
    from orbit_lsp.index.walk import WorkspaceFilter, walk_workspace

    write(tmp_path, BUILD_TREE)
    walk = walk_workspace(tmp_path)
    assert dict(walk.skipped) == BUILD_SKIPS
    assert [f.rel for f in walk.files] == ["app/main.ts", "packages/p/src/index.ts", "src/a.ts", "src/b.ts",
                                           "src/view.tsx", "types/only.d.ts", "vendor/x.js"]
    flt = WorkspaceFilter(tmp_path)
    assert [r for r in sorted(BUILD_TREE) if flt.accepts(tmp_path / r)] == [f.rel for f in walk.files]
    assert walk_workspace(tmp_path, build_output=None).skipped == []  # skip_build_output: false
    assert dict(walk_workspace(tmp_path, build_output=("out",)).skipped) == {  # build_output_dirs: [out]
        **{k: v for k, v in BUILD_SKIPS.items() if not k.startswith(("dist/", "packages/p/dist/"))},
        # dist/ is no build directory now: its declarations beside their JavaScript still are
        "dist/a.d.ts": "declarations of dist/a.js", "packages/p/dist/index.d.ts": "declarations of packages/p/dist/index.js"}
    ix = index(tmp_path, store, settings)
    try:
        assert ix.skipped == BUILD_SKIPS
        assert edges(ix.graph) == {
            ("app/main.ts", "packages/p/src/index.ts"): False,  # package.json types: dist/index.d.ts
            ("app/main.ts", "src/a.ts"): False,  # ../dist/a.js: the source of the build output
            ("app/main.ts", "types/only.d.ts"): False,
            ("app/main.ts", "src/view.tsx"): True,
            ("src/b.ts", "src/a.ts"): False}
        c = {(a, b) for a, b in rows(ix.graph, "MATCH (a:Symbol)-[:CALLS]->(b:Symbol) RETURN a.qual, b.qual")}
        assert c == {("app/main.ts#main", "packages/p/src/index.ts#p"), ("app/main.ts#main", "src/a.ts#a"),
                     ("app/main.ts#main", "types/only.d.ts#only"), ("src/b.ts#b", "src/a.ts#a")}
    finally:
        ix.graph.delete()
    # with build output indexed, imports of declarations still resolve to their sources
    ix = index(tmp_path, store, settings.model_copy(update={"skip_build_output": False}))
    try:
        assert ix.skipped == {}
        out = edges(ix.graph)
        assert out[("app/main.ts", "packages/p/src/index.ts")] is False
        assert out[("app/main.ts", "src/a.ts")] is False
        assert ("app/main.ts", "packages/p/dist/index.d.ts") not in out
    finally:
        ix.graph.delete()


def test_impact_follows_type_only_edges_and_says_so(tmp_path, store, settings):
    from orbit_lsp.graph.imports import ImportGraph

    write(tmp_path, TYPE_ONLY_TREE)
    ix = index(tmp_path, store, settings)
    g = ix.graph
    try:
        # b.ts is imported for types only by a.ts and barrel.mts; a.ts by b, d (types) and view
        # (a value); c.ts by a.ts and barrel.mts at run time
        want = [{"path": "src/a.ts", "hops": 1, "type_only": True},
                {"path": "src/barrel.mts", "hops": 1, "type_only": True},
                {"path": "src/d.ts", "hops": 2, "type_only": True},  # d -> a (type) -> b
                {"path": "src/view.tsx", "hops": 2, "type_only": True},  # view -> a (value) -> b (type)
                {"path": "src/c.ts", "hops": 3, "type_only": True}]  # c -> d -> a -> b
        assert queries.impact(g, "src/b.ts").rows == want
        imports = ImportGraph.load(g)
        assert queries.impact(g, "src/b.ts", imports=imports).rows == want
        # c.ts: a.ts imports it at run time, so do view.tsx (through a) and barrel.mts; b.ts and
        # d.ts reach it only through type-only imports of a.ts
        want_c = [{"path": "src/a.ts", "hops": 1}, {"path": "src/barrel.mts", "hops": 1},
                  {"path": "src/b.ts", "hops": 2, "type_only": True}, {"path": "src/d.ts", "hops": 2, "type_only": True},
                  {"path": "src/view.tsx", "hops": 2}]
        assert queries.impact(g, "src/c.ts").rows == want_c
        assert queries.impact(g, "src/c.ts", imports=imports).rows == want_c
        assert queries.impact(g, "lib/x.js", imports=imports).rows == [{"path": "lib/y.js", "hops": 1}]
    finally:
        g.delete()


def test_generic_call_signatures_without_semicolons():
    """effect's style: overloads in an object type, one per line, no ``;``, JSDoc between them;
    TypeScript reads no type arguments across a line break, the grammar did (``B | C`` newline
    ``<A>`` as ``C<A>``)."""
    f = facts_of("src/Option.ts", """export const match: {
  /**
   * @since 2.0.0
   */
  <B, A, C = B>(options: { readonly onNone: LazyArg<B> }): (self: Option<A>) => B | C
  /**
   * Data-first.
   */
  <A, B, C = B>(
    self: Option<A>,
    options: { readonly onNone: LazyArg<B> }
  ): B | C
} = dual(2, <A, B, C = B>(self: Option<A>, { onNone }: { onNone: LazyArg<B> }): B | C => onNone())
export const getOrElse: {
  <B>(onNone: LazyArg<B>): <A>(self: Option<A>) => A | B
  <A, B>(self: Option<A>, onNone: LazyArg<B>): A | B
} = dual(2, (self: any, onNone: any) => onNone())
export const satisfies = <A>() => <B extends A>(b: B) => b
export const unsafeCoerce: <A, B>(a: A) => B = identity as any
function dual(_n: number, f: any) { return f; }
function identity<A>(a: A) { return a; }
""")
    assert {s.qual for s in f.symbols} >= {"match", "getOrElse", "satisfies", "unsafeCoerce", "dual", "identity"}
    assert [(sc.qual, c.name, c.line) for sc in f.scopes for c in sc.calls if c.name == "dual"] == [
        ("", "dual", 13), ("", "dual", 17)]  # module level: an initializer


@pytest.mark.parametrize("rel", ["src/k.ts", "src/k.tsx", "src/k.mts", "lib/k.js"])
def test_contextual_keywords_as_names(rel):
    f = facts_of(rel, """class Field {
  accessor() { return using(1); }
  abstract = 1
  m() { this.accessor(); }
}
function using(x) { return x; }
const alias = using;
alias(using);
""")
    assert [(s.qual, s.kind, s.line) for s in f.symbols] == [
        ("", "module", 1), ("Field", "class", 1), ("Field.accessor", "method", 2), ("Field.m", "method", 4),
        ("using", "function", 6), ("alias", "variable", 7)]
    assert [(sc.qual, c.name, c.line, c.col) for sc in f.scopes for c in sc.calls] == [
        ("", "alias", 8, 0), ("Field.accessor", "using", 2, 22), ("Field.m", "accessor", 4, 8)]
    assert f.scopes[0].names["alias"] == [("n", "using")]
