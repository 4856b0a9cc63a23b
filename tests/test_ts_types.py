"""Call binding through types in TypeScript and JavaScript (JSDoc), from the syntax tree only
(``orbit_lsp/index/js_types.py``, ``js_bind.py``): each construct with the exact CALLS edges
(and their ``resolved`` kind) it must produce in a real embedded FalkorDB graph, and what must
stay unbound (counted on the caller with its line, never guessed by name)."""

from __future__ import annotations

import contextlib
import json

from test_incremental import assert_same, new_indexer, workspaces, write


@contextlib.contextmanager
def indexed(store, tree: dict[str, str]):
    """``tree`` written to a fresh workspace and indexed: yields the indexer."""
    with workspaces() as make:
        root = make()
        for rel, text in tree.items():
            write(root, rel, text)
        ix = new_indexer(make, root, store)
        rep = ix.index_all()
        assert not rep.parse_errors, rep.parse_errors
        ix.make = make
        yield ix


def calls(g, src_prefix: str = "") -> dict[tuple[str, str], str]:
    rows = g.query("MATCH (a:Symbol)-[e:CALLS]->(b:Symbol) RETURN a.qual, b.qual, e.resolved").rows
    return {(a, b): r for a, b, r in rows if a.startswith(src_prefix)}


def sites(g, src: str, dst: str) -> list[int]:
    rows = g.query("MATCH (a:Symbol {qual: $a})-[e:CALLS]->(b:Symbol {qual: $b}) RETURN e.lines", {"a": src, "b": dst}).rows
    return sorted(rows[0][0]) if rows else []


def unbound(g) -> dict[str, list[str]]:
    return {q: sorted(s) for q, s in g.query("MATCH (s:Symbol) WHERE s.unresolved_calls > 0 "
                                             "RETURN s.qual, s.unresolved_sites").rows}


MODEL = """export class Item {
  constructor(public name: string) {}
  price(): number { return 1; }
}
export interface Store {
  find(id: string): Item;
  all(): Item[];
  readonly size: number;
}
export class MemoryStore implements Store {
  private items: Item[] = [];
  find(id: string): Item { return new Item(id); }
  all(): Item[] { return this.items; }
  get size(): number { return 0; }
  first() { return new Item("a"); }
}
export type ItemOrStore = Item | MemoryStore;
export abstract class Shape {
  abstract area(): number;
  describe(): string { return String(this.area()); }
}
"""
BARREL = 'export * from "./model";\nexport type { Store as Repository } from "./model";\n'


def test_declared_types_params_variables_fields_returns(store):
    use = """import { Item, MemoryStore, Store } from "./model";
import type { Repository } from "./barrel";
export class Service {
  private store: Store;
  constructor(private readonly repo: MemoryStore, store: Store) { this.store = store; }
  run(id: string): Item {
    const item: Item = this.repo.find(id);
    item.price();
    this.store.find(id).price();
    return this.repo.first();
  }
}
export function viaParam(r: Repository, m: MemoryStore) {
  r.find("x");
  m.first().price();
  const s = new Service(m, m);
  s.run("a").price();
}
"""
    with indexed(store, {"src/model.ts": MODEL, "src/barrel.ts": BARREL, "src/use.ts": use}) as ix:
        got = calls(ix.graph, "src/use.ts")
        assert got == {
            ("src/use.ts#Service.run", "src/model.ts#MemoryStore.find"): "instance",  # ctor parameter property
            ("src/use.ts#Service.run", "src/model.ts#Item.price"): "type",  # const item: Item
            ("src/use.ts#Service.run", "src/model.ts#Store.find"): "instance",  # field declared as the interface
            ("src/use.ts#Service.run", "src/model.ts#MemoryStore.first"): "instance",
            ("src/use.ts#viaParam", "src/model.ts#Store.find"): "type",  # a type re-exported as another name
            ("src/use.ts#viaParam", "src/model.ts#MemoryStore.first"): "type",
            ("src/use.ts#viaParam", "src/model.ts#Item.price"): "return",  # first()'s inferred return, run()'s declared
            ("src/use.ts#viaParam", "src/use.ts#Service"): "class",
            ("src/use.ts#viaParam", "src/use.ts#Service.constructor"): "init",
            ("src/use.ts#viaParam", "src/use.ts#Service.run"): "instance",
        }
        assert sites(ix.graph, "src/use.ts#Service.run", "src/model.ts#Item.price") == [8, 9]
        assert sites(ix.graph, "src/use.ts#viaParam", "src/model.ts#Item.price") == [15, 17]
        assert unbound(ix.graph) == {}
        # interfaces extended / implemented are INHERITS edges
        inh = ix.graph.query("MATCH (a:Symbol)-[:INHERITS]->(b:Symbol) RETURN a.qual, b.qual").rows
        assert ["src/model.ts#MemoryStore", "src/model.ts#Store"] in inh


def test_unions_interfaces_aliases_generics_chains_casts(store):
    shapes = """export interface Animal { speak(): string; }
export class Dog implements Animal { speak() { return "woof"; } fetch() {} }
export class Cat implements Animal { speak() { return "meow"; } }
export class Fish { swim() {} }
export type Pet = Dog | Cat;
export type Options = { log(msg: string): void; level: number };
export class Builder {
  a(): this { return this; }
  b(): Builder { return this; }
  build(): Dog { return new Dog(); }
}
export function builder(): Builder { return new Builder(); }
export abstract class Base { abstract run(): void; go() { this.run(); } }
export class Impl extends Base { run() {} go() { super.go(); } }
"""
    use = """import { Animal, Builder, Base, builder, Dog, Fish, Pet, Options } from "./shapes";
export function pets(p: Pet, a: Animal, opts: Options, b: Base) {
  p.speak();
  a.speak();
  opts.log("x");
  b.run();
}
export function chains() {
  builder().a().b().build().fetch();
}
export function generic<T extends Dog, U>(t: T, u: U) {
  t.fetch();
  u.fetch();
}
export function casts(x: unknown, y?: Dog | null, z: Dog | Fish) {
  (x as Dog).fetch();
  (<Fish>x).swim();
  y!.fetch();
  y?.fetch();
  z.fetch();
}
export async function later(q: Promise<Dog>) {
  (await q).fetch();
  const d = await q;
  d.fetch();
}
"""
    with indexed(store, {"src/shapes.ts": shapes, "src/use.ts": use}) as ix:
        got = calls(ix.graph, "src/use.ts")
        assert got == {
            ("src/use.ts#pets", "src/shapes.ts#Dog.speak"): "type",  # a union alias: each member's method
            ("src/use.ts#pets", "src/shapes.ts#Cat.speak"): "type",
            ("src/use.ts#pets", "src/shapes.ts#Animal.speak"): "type",  # the interface's declaration
            ("src/use.ts#pets", "src/shapes.ts#Options.log"): "type",  # a method of an object type alias
            ("src/use.ts#pets", "src/shapes.ts#Base.run"): "type",  # the abstract declaration
            ("src/use.ts#chains", "src/shapes.ts#builder"): "import",
            ("src/use.ts#chains", "src/shapes.ts#Builder.a"): "return",
            ("src/use.ts#chains", "src/shapes.ts#Builder.b"): "return",  # a(): this -> the receiver
            ("src/use.ts#chains", "src/shapes.ts#Builder.build"): "return",
            ("src/use.ts#chains", "src/shapes.ts#Dog.fetch"): "return",
            ("src/use.ts#generic", "src/shapes.ts#Dog.fetch"): "type",  # T extends Dog
            ("src/use.ts#casts", "src/shapes.ts#Dog.fetch"): "type",  # as, x!, x?., the union's member with it
            ("src/use.ts#casts", "src/shapes.ts#Fish.swim"): "type",  # <Fish>x
            ("src/use.ts#later", "src/shapes.ts#Dog.fetch"): "type",  # await of a Promise<Dog>
        }
        assert sites(ix.graph, "src/use.ts#casts", "src/shapes.ts#Dog.fetch") == [16, 18, 19, 20]
        assert sites(ix.graph, "src/use.ts#later", "src/shapes.ts#Dog.fetch") == [23, 25]
        # super.go() and this.run() inside the classes
        inner = calls(ix.graph, "src/shapes.ts")
        assert inner[("src/shapes.ts#Impl.go", "src/shapes.ts#Base.go")] == "super"
        assert inner[("src/shapes.ts#Base.go", "src/shapes.ts#Base.run")] == "self"
        # an unconstrained type parameter binds nothing: counted, with its line
        assert unbound(ix.graph) == {"src/use.ts#generic": ["fetch@13"]}


def test_namespaces_object_literal_this_getters_tsx_mts(store):
    util = """export namespace util {
  export function assertEqual(a: unknown, b: unknown): void {}
  export const arrayToEnum = (items: string[]) => items;
  export interface Named { name(): string }
}
export const counter = {
  n: 0,
  inc() { this.reset(); return this; },
  reset() {},
};
export class Box {
  get inner(): Inner { return new Inner(); }
}
export class Inner { open() {} }
"""
    view = """import { util, counter, Box } from "./util.mts";
type Props = { box: Box; named: util.Named };
export function View({ box, named }: Props) {
  util.assertEqual(1, 2);
  util.arrayToEnum(["a"]);
  counter.inc();
  box.inner.open();
  named.name();
  return <div>{String(box)}</div>;
}
"""
    with indexed(store, {"src/util.mts": util, "src/view.tsx": view}) as ix:
        assert calls(ix.graph, "src/view.tsx") == {
            ("src/view.tsx#View", "src/util.mts#util.assertEqual"): "attribute",
            ("src/view.tsx#View", "src/util.mts#util.arrayToEnum"): "attribute",
            ("src/view.tsx#View", "src/util.mts#counter.inc"): "attribute",
            ("src/view.tsx#View", "src/util.mts#Inner.open"): "type",  # a getter read as a property
            ("src/view.tsx#View", "src/util.mts#util.Named.name"): "type",  # a type inside a namespace
        }
        assert calls(ix.graph, "src/util.mts") == {
            ("src/util.mts#counter.inc", "src/util.mts#counter.reset"): "self",  # this in an object literal
            ("src/util.mts#Box.inner", "src/util.mts#Inner"): "class",
        }
        kinds = dict(ix.graph.query("MATCH (s:Symbol) RETURN s.qual, s.kind").rows)
        assert kinds["src/util.mts#util"] == "namespace" and kinds["src/util.mts#util.Named"] == "interface"
        assert unbound(ix.graph) == {}


def test_jsdoc_types_in_javascript(store):
    lib = """export class Cart {
  /** @returns {Line} */
  add() { return make(); }
  total() { return 0; }
}
export class Line { qty() { return 1; } }
function make() { return null; }
"""
    app = """import { Cart, Line } from "./lib.js";
/**
 * @param {Cart} cart the cart
 * @param {Line | null} [line]
 * @returns {Cart}
 */
export function checkout(cart, line) {
  cart.add().qty();
  line.qty();
  return cart;
}
export function again() {
  /** @type {Cart} */
  const c = load();
  c.total();
  checkout(c).total();
}
export class Holder {
  constructor() {
    /** @type {Line} */
    this.line = load();
  }
  use() { this.line.qty(); }
}
function load() { return undefined; }
"""
    with indexed(store, {"src/lib.js": lib, "src/app.js": app}) as ix:
        assert calls(ix.graph, "src/app.js") == {
            ("src/app.js#checkout", "src/lib.js#Cart.add"): "type",
            ("src/app.js#checkout", "src/lib.js#Line.qty"): "return",  # @returns {Line}
            ("src/app.js#again", "src/app.js#load"): "local",
            ("src/app.js#again", "src/lib.js#Cart.total"): "type",
            ("src/app.js#again", "src/app.js#checkout"): "local",
            ("src/app.js#Holder.constructor", "src/app.js#load"): "local",
            ("src/app.js#Holder.use", "src/lib.js#Line.qty"): "instance",  # @type on this.line
        } | {("src/app.js#checkout", "src/lib.js#Line.qty"): "return"}
        assert sites(ix.graph, "src/app.js#checkout", "src/lib.js#Line.qty") == [8, 9]
        assert sites(ix.graph, "src/app.js#again", "src/lib.js#Cart.total") == [15, 16]
        assert unbound(ix.graph) == {}


def test_callback_parameters_take_the_callees_parameter_types(store):
    lib = """export class Sub { next(v: number) {} }
export class Src { pipe() {} }
export type Init = (source: Src, sub: Sub) => void;
export function operate(init: Init) {}
export function each(items: Src[], cb: (s: Src, i: number) => void) {}
export class Obs {
  constructor(fn: (sub: Sub) => void) {}
  subscribe(cb: (v: Sub) => void) {}
}
export function untyped(cb) {}
export interface Ctor<T> { init(inst: T): void }
export function make<T extends { id: number }>(name: string, init: (inst: T) => void): Ctor<T> { return null!; }
export interface Widget { id: number; draw(): void }
"""
    use = """import { operate, each, Obs, untyped, make, Ctor, Widget } from "./lib";
export function main(obs: Obs) {
  operate((source, sub) => { sub.next(1); source.pipe(); });
  new Obs((sub) => sub.next(2));
  obs.subscribe(function (s) { s.next(3); });
  each([], (s, i) => s.pipe());
  untyped((x) => x.pipe());
}
export const W: Ctor<Widget> = make("w", (inst) => { inst.draw(); });
"""
    with indexed(store, {"src/lib.ts": lib, "src/use.ts": use}) as ix:
        got = calls(ix.graph, "src/use.ts#main")
        assert got == {
            ("src/use.ts#main", "src/lib.ts#operate"): "import",
            ("src/use.ts#main", "src/lib.ts#Sub.next"): "type",  # Init, an alias of a function type
            ("src/use.ts#main", "src/lib.ts#Src.pipe"): "type",
            ("src/use.ts#main", "src/lib.ts#Obs"): "class",
            ("src/use.ts#main", "src/lib.ts#Obs.constructor"): "init",
            ("src/use.ts#main", "src/lib.ts#Obs.subscribe"): "type",
            ("src/use.ts#main", "src/lib.ts#each"): "import",
            ("src/use.ts#main", "src/lib.ts#untyped"): "import",
        }
        assert sites(ix.graph, "src/use.ts#main", "src/lib.ts#Sub.next") == [3, 4, 5]
        assert sites(ix.graph, "src/use.ts#main", "src/lib.ts#Src.pipe") == [3, 6]
        assert unbound(ix.graph) == {"src/use.ts#main": ["pipe@7"]}  # an untyped callee's callback
        # make<T>(…): Ctor<T> initialising a Ctor<Widget>: T is Widget in the callback
        module = {k: v for k, v in calls(ix.graph).items() if k[0] == "src/use.ts"}  # module-level calls
        assert module == {("src/use.ts", "src/lib.ts#make"): "import", ("src/use.ts", "src/lib.ts#Widget.draw"): "type"}


def test_type_edits_rebind_other_files_incrementally(store):
    """Edits that change what a type, a return type or a re-export means re-bind the calls of
    the files that depend on them, and the incremental graph equals a full rebuild."""
    a = "export class A { hello() {} }\nexport class B { hello() {} bye() {} }\n"
    make_ = "import { A } from './a';\nexport function make(): A { return new A(); }\n"
    types_ = "export type { A as Thing } from './a';\n"
    use = ("import { make } from './make';\nimport type { Thing } from './types';\n"
           "export function run(t: Thing) {\n  make().hello();\n  t.hello();\n}\n")
    with indexed(store, {"src/a.ts": a, "src/make.ts": make_, "src/types.ts": types_, "src/use.ts": use}) as ix:
        root, g = ix.root, ix.graph
        assert calls(g, "src/use.ts")[("src/use.ts#run", "src/a.ts#A.hello")] == "return"
        assert_same(ix, ix.make, store, "after the first build")
        # the declared return type changes: make().hello() now binds to B.hello
        write(root, "src/make.ts", make_.replace("{ A }", "{ A, B }").replace("(): A { return new A(); }",
                                                                          "(): B { return new B(); }"))
        ix.reindex_file(root / "src/make.ts")
        got = calls(g, "src/use.ts")
        assert got[("src/use.ts#run", "src/a.ts#B.hello")] == "return"
        assert sites(g, "src/use.ts#run", "src/a.ts#A.hello") == [5]
        assert_same(ix, ix.make, store, "after changing make's return type")
        # the re-exported alias now names B: t.hello() follows
        write(root, "src/types.ts", types_.replace("A as Thing", "B as Thing"))
        ix.reindex_file(root / "src/types.ts")
        assert ("src/use.ts#run", "src/a.ts#A.hello") not in calls(g, "src/use.ts")
        assert sites(g, "src/use.ts#run", "src/a.ts#B.hello") == [4, 5]
        assert_same(ix, ix.make, store, "after re-pointing the alias")
        # the method disappears from the type: the call is unbound, with its line
        write(root, "src/a.ts", "export class A { hello() {} }\nexport class B { bye() {} }\n")
        ix.reindex_file(root / "src/a.ts")
        assert unbound(g) == {"src/use.ts#run": ["hello@4", "hello@5"]}
        assert_same(ix, ix.make, store, "after removing B.hello")


def test_arrays_this_parameters_reassigned_typed_variables_and_alternatives(store):
    lib = """export class Sub { unsubscribe() {} }
export class Action { schedule() {} }
export function run(cb: (this: Action) => void) {}
export function pick(): Sub | null { return null; }
"""
    use = """import { Sub, Action, run, pick } from "./lib";
export function main(subs: Sub[], list: Array<Sub>, other?: Sub) {
  for (const s of subs) s.unsubscribe();
  subs[0].unsubscribe();
  list.forEach((s) => s.unsubscribe());
  subs.find((s) => true)!.unsubscribe();
  let inner: Sub | null = null;
  const later = () => { inner = pick(); inner.unsubscribe(); };
  (other ?? new Sub()).unsubscribe();
  (other ? other : pick())!.unsubscribe();
  run(function (this: Action) { this.schedule(); });
  subs.length.toFixed();
}
"""
    with indexed(store, {"src/lib.ts": lib, "src/use.ts": use}) as ix:
        assert calls(ix.graph, "src/use.ts") == {
            ("src/use.ts#main", "src/lib.ts#Sub.unsubscribe"): "type",
            ("src/use.ts#main", "src/lib.ts#Sub"): "class",
            ("src/use.ts#main", "src/lib.ts#pick"): "import",
            ("src/use.ts#main", "src/lib.ts#run"): "import",
            ("src/use.ts#main", "src/lib.ts#Action.schedule"): "self",  # this: Action
            ("src/use.ts#main.later", "src/lib.ts#pick"): "import",
            ("src/use.ts#main.later", "src/lib.ts#Sub.unsubscribe"): "type",  # declared Sub | null, reassigned
        }
        assert sites(ix.graph, "src/use.ts#main", "src/lib.ts#Sub.unsubscribe") == [3, 4, 5, 6, 9, 10]
        assert unbound(ix.graph) == {}  # subs.length.toFixed(): a number's method, external


def test_declaration_merging_keeps_the_callable(store):
    lib = """export interface make { extra(): void }
export function make(): Thing { return new Thing(); }
export interface Thing { size(): number }
export class Thing { grow() { return this; } }
"""
    use = """import { make } from "./lib";
export function main() {
  make().grow().size();
}
"""
    with indexed(store, {"src/lib.ts": lib, "src/use.ts": use}) as ix:
        kinds = dict(ix.graph.query("MATCH (s:Symbol) RETURN s.qual, s.kind").rows)
        assert kinds["src/lib.ts#make"] == "function" and kinds["src/lib.ts#Thing"] == "class"
        assert kinds["src/lib.ts#make.extra"] == "method"
        assert calls(ix.graph, "src/use.ts") == {
            ("src/use.ts#main", "src/lib.ts#make"): "import",
            ("src/use.ts#main", "src/lib.ts#Thing.grow"): "return",
            ("src/use.ts#main", "src/lib.ts#Thing.size"): "return",  # the interface's member of the merged class
        }


def test_cli_implementations(capsys, tmp_path, store, data_dir, monkeypatch):
    from orbit_lsp.cli import main
    from orbit_lsp.graph.connection import code_graph_name

    monkeypatch.delenv("ORBIT_FALKORDB_URL", raising=False)
    monkeypatch.setenv("ORBIT_DATA_DIR", str(data_dir))
    ws = tmp_path / "impl"
    (ws / "src").mkdir(parents=True)
    (ws / "src/pets.ts").write_text("export interface Pet { speak(): string }\n"
                                    "export abstract class Dog implements Pet { speak() { return 'woof'; } }\n"
                                    "export class Puppy extends Dog { speak() { return 'yip'; } }\n"
                                    "export class Cat implements Pet { speak() { return 'meow'; } }\n")
    try:
        capsys.readouterr()
        assert main(["implementations", "Pet.speak", "--workspace", str(ws), "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        [entry] = doc["result"]["rows"]
        assert entry["target"]["qual"] == "src/pets.ts#Pet.speak"
        assert [r["qual"] for r in entry["implementations"]] == [
            "src/pets.ts#Dog.speak", "src/pets.ts#Puppy.speak", "src/pets.ts#Cat.speak"]
        assert main(["implementations", "Dog", "--workspace", str(ws)]) == 0
        out = capsys.readouterr().out
        assert "src/pets.ts#Dog  (class, src/pets.ts:2)" in out and "  1 implementation\n" in out
        assert "    src/pets.ts#Puppy  (class, src/pets.ts:3)" in out
    finally:
        store.graph(code_graph_name(ws)).delete()


def test_map_values(store):
    lib = "export class Sub { unsubscribe() {} }\n"
    use = """import { Sub } from "./lib";
export function main(byName: Map<string, Sub>) {
  const lookup = new Map<number, { sub: Sub }>();
  lookup.get(1)!.sub.unsubscribe();
  byName.get("a")?.unsubscribe();
  byName.forEach((s) => s.unsubscribe());
}
"""
    with indexed(store, {"src/lib.ts": lib, "src/use.ts": use}) as ix:
        # the first site is lookup.get(1)!.sub…: a value a call returned
        assert calls(ix.graph, "src/use.ts") == {("src/use.ts#main", "src/lib.ts#Sub.unsubscribe"): "return"}
        assert sites(ix.graph, "src/use.ts#main", "src/lib.ts#Sub.unsubscribe") == [4, 5, 6]
        assert unbound(ix.graph) == {}


def test_a_union_receiver_without_a_declared_type(store):
    src = """export class A { m() {} }
export class B { m() {} }
export function main(flag: boolean) {
  const x = flag ? new A() : new B();
  x.m();
}
"""
    with indexed(store, {"src/u.ts": src}) as ix:
        got = calls(ix.graph, "src/u.ts#main")
        assert got[("src/u.ts#main", "src/u.ts#A.m")] == "instance"  # instances of two classes
        assert got[("src/u.ts#main", "src/u.ts#B.m")] == "instance"
