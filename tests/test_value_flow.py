"""Value flow in the Python call graph: calls bound through the values names hold (arguments,
defaults, returns, containers, attributes, annotations, implicit calls, decorators), the C3
method resolution order, and unbound call sites counted and located whatever their shape.

Each workspace is small and the expected edges are derived from Python's semantics (what the
call runs when the program executes), with the exact ``CALLS.resolved`` kind and the exact
unbound call sites (name and line) of each caller. The graph is a real one in the session's
embedded FalkorDB."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import small_workspaces

from orbit_lsp.index.indexer import WorkspaceIndexer


def build(tmp_path: Path, store, files: dict[str, str]) -> WorkspaceIndexer:
    """Index ``files`` under ``tmp_path / "ws"`` with parameter values on (``Settings.value_flow``)."""
    return small_workspaces.build(tmp_path / "ws", store, files, value_flow=True)


@pytest.fixture
def index(index_files):
    return lambda files: index_files(files, value_flow=True)


def edges(ix: WorkspaceIndexer) -> dict[tuple[str, str], tuple[list[int], str]]:
    rows = ix.graph.ro_query("MATCH (a:Symbol)-[c:CALLS]->(b:Symbol) RETURN a.qual, b.qual, c.lines, c.resolved").rows
    return {(a, b): (lines, how) for a, b, lines, how in rows}


def out_of(ix, caller: str) -> dict[str, str]:
    """callee qual -> resolved kind, for one caller."""
    return {b: how for (a, b), (_, how) in edges(ix).items() if a == caller}


def unbound(ix, caller: str) -> list[str]:
    rows = ix.graph.ro_query("MATCH (s:Symbol {qual: $q}) RETURN s.unresolved_calls, s.unresolved_sites",
                             {"q": caller}).rows
    assert rows, caller
    n, sites = rows[0]
    assert n == len(sites or []), (n, sites)
    return sites or []


# -- 1. functions and classes as values -------------------------------------------------------------
FUNCTIONS_AS_VALUES = {"flow.py": '''
    def handler():
        pass

    def other():
        pass

    def run(cb):
        return cb()

    def main():
        run(handler)
        run(cb=other)

    def with_default(cb=handler):
        cb()

    def factory():
        def inner():
            pass
        return inner

    def use_factory():
        factory()()

    square = lambda x: handler()

    def use_lambda():
        square(2)

    class Notifier:
        def notify(self):
            pass

    class Service:
        def __init__(self, notifier):
            self.notifier = notifier

        def go(self):
            self.notifier.notify()

    def wire():
        Service(Notifier()).go()

    def pick(kind):
        return Notifier if kind else Service

    def make(kind):
        pick(kind)()
'''}


def test_functions_and_classes_as_values(index):
    ix = index(FUNCTIONS_AS_VALUES)
    # run's parameter holds what every call site passes: handler (positional) and other (keyword)
    assert out_of(ix, "flow.run") == {"flow.handler": "param", "flow.other": "param"}
    assert unbound(ix, "flow.run") == []
    assert out_of(ix, "flow.with_default") == {"flow.handler": "param"}  # the default
    assert out_of(ix, "flow.use_factory") == {"flow.factory": "local", "flow.factory.inner": "return"}
    # a lambda is a Symbol under the scope it is written in; what it calls stays with that scope
    assert out_of(ix, "flow.use_lambda") == {"flow.<lambda>": "local"}
    assert ("flow", "flow.handler") in edges(ix)
    # an instance passed to __init__ and kept in an attribute
    assert out_of(ix, "flow.Service.go") == {"flow.Notifier.notify": "instance"}
    assert unbound(ix, "flow.Service.go") == []
    assert out_of(ix, "flow.wire") == {"flow.Service": "class", "flow.Service.__init__": "init",
                                       "flow.Notifier": "class", "flow.Service.go": "instance"}
    # a call whose callee may hold several values gets an edge to each
    assert out_of(ix, "flow.make") == {"flow.pick": "local", "flow.Notifier": "class", "flow.Service": "class",
                                       "flow.Service.__init__": "init"}


# -- 2. containers ---------------------------------------------------------------------------------
CONTAINERS = {"reg.py": '''
    def a():
        pass

    def b():
        pass

    def c():
        pass

    def d():
        pass

    HANDLERS = {"a": a}
    HANDLERS["b"] = b
    LIST = [a]
    LIST.append(c)
    REGISTRY = {}


    def register(fn):
        REGISTRY[fn.__name__] = fn
        return fn


    @register
    def plugin():
        pass


    def by_key(name):
        HANDLERS[name]()


    def by_constant():
        HANDLERS["b"]()


    def by_loop():
        for h in LIST:
            h()


    def by_registry(name):
        REGISTRY[name]()


    def by_unpacking():
        pair = (a, d)
        x, y = pair
        y()


    def by_values():
        for f in HANDLERS.values():
            f()
'''}


def test_containers(index):
    ix = index(CONTAINERS)
    # a dict written after its literal holds every value stored into it
    assert out_of(ix, "reg.by_key") == {"reg.a": "container", "reg.b": "container"}
    assert out_of(ix, "reg.by_constant") == {"reg.b": "container"}
    assert out_of(ix, "reg.by_loop") == {"reg.a": "container", "reg.c": "container"}
    # a registry filled by a decorator (the decorated function flows into ``fn``)
    assert out_of(ix, "reg.by_registry") == {"reg.plugin": "container"}
    assert out_of(ix, "reg.plugin") == {"reg.register": "decorator"}
    assert out_of(ix, "reg.by_unpacking") == {"reg.d": "container"}
    assert out_of(ix, "reg.by_values") == {"reg.a": "container", "reg.b": "container"}
    for caller in ("by_key", "by_constant", "by_loop", "by_registry", "by_unpacking", "by_values"):
        assert unbound(ix, f"reg.{caller}") == [], caller


# -- 3. annotations --------------------------------------------------------------------------------
ANNOTATIONS = {
    "app.py": '''
        from __future__ import annotations

        import typing
        from typing import TYPE_CHECKING, Optional

        from werkzeug.local import LocalProxy

        if TYPE_CHECKING:
            from helpers import Helper


        class Flask:
            def url_for(self):
                pass

            def make_response(self):
                pass


        current_app: Flask = LocalProxy(lambda: None)


        def url_for():
            return current_app.url_for()


        def respond(app: Optional[Flask]):
            app.make_response()


        def respond_union(app: "Flask | None"):
            app.make_response()


        def helped(h: Helper):
            h.help()


        def cast(x):
            typing.cast(Flask, x).url_for()
    ''',
    "helpers.py": '''
        class Helper:
            def help(self):
                pass
    ''',
}


def test_annotations_bind_where_the_value_is_unknown(index):
    ix = index(ANNOTATIONS)
    # flask: ``current_app: Flask = LocalProxy(...)``: the declared type wins over the external value
    assert out_of(ix, "app.url_for") == {"app.Flask.url_for": "instance"}
    assert out_of(ix, "app.respond") == {"app.Flask.make_response": "param"}
    assert out_of(ix, "app.respond_union") == {"app.Flask.make_response": "param"}
    assert out_of(ix, "app.helped") == {"helpers.Helper.help": "param"}  # a TYPE_CHECKING import
    assert out_of(ix, "app.cast") == {"app.Flask.url_for": "instance"}
    for caller in ("url_for", "respond", "respond_union", "helped", "cast"):
        assert unbound(ix, f"app.{caller}") == [], caller


DECLARED = {"store.py": '''
    import json


    class Store:
        def connect(self):
            pass


    class CachedStore(Store):
        def connect(self):
            pass


    class Cache:
        def connect(self):
            pass


    def ping(store: Store):
        store.connect()


    class Sync:
        def __init__(self, store: Store):
            self.store = store

        def write(self):
            self.store.connect()


    def callers(raw, unknown):
        ping(json.loads(raw))
        ping(unknown)
        ping(CachedStore())
        Sync(json.loads(raw))
        Sync(unknown)
'''}


def test_a_declared_parameter_type_wins_over_unknown_values_passed_in(index):
    """``store: Store`` is what pyright binds ``store.connect()`` to, whatever the callers pass:
    an unknown or external argument must be a ``Store`` too, so the site is bound and not also
    listed as an unbound use of ``connect`` (which ``callers Cache.connect`` would show as "may
    call it"). A workspace value that flows in stays: ``CachedStore()`` runs its override."""
    ix = index(DECLARED)
    assert out_of(ix, "store.ping") == {"store.Store.connect": "param", "store.CachedStore.connect": "param"}
    assert out_of(ix, "store.Sync.write") == {"store.Store.connect": "instance"}
    assert unbound(ix, "store.ping") == []
    assert unbound(ix, "store.Sync.write") == []
    assert "store.Cache.connect" not in {b for (_, b) in edges(ix)}


# -- 4. implicit calls -----------------------------------------------------------------------------
IMPLICIT = {
    "requests/sessions.py": '''
        class Session:
            def __enter__(self):
                return self

            def __exit__(self, *args):
                pass

            def request(self, method):
                pass
    ''',
    "requests/api.py": '''
        from . import sessions


        def request(method):
            with sessions.Session() as session:
                return session.request(method)
    ''',
    "requests/__init__.py": "",
    "live.py": '''
        import threading
        from functools import partial


        class Console:
            def print(self):
                pass


        class Live:
            def __init__(self):
                self._console = Console()

            @property
            def console(self) -> Console:
                return self._console

            def refresh(self):
                self.console.print()


        class Item:
            def use(self):
                pass


        class Counter:
            def __iter__(self):
                return self

            def __next__(self):
                return Item()


        class Boom(Exception):
            def __init__(self):
                pass


        def loop():
            for it in Counter():
                it.use()


        def fail():
            raise Boom


        def double(x):
            return x


        def keyfn(x):
            return x


        def worker():
            pass


        def hand_over(xs):
            list(map(double, xs))
            sorted(xs, key=keyfn)
            threading.Thread(target=worker)
            partial(worker)()
    ''',
}


def test_implicit_calls(index):
    ix = index(IMPLICIT)
    # requests: ``with sessions.Session() as session: return session.request(...)``
    assert out_of(ix, "requests.api.request") == {
        "requests.sessions.Session": "class", "requests.sessions.Session.__enter__": "implicit",
        "requests.sessions.Session.__exit__": "implicit", "requests.sessions.Session.request": "instance"}
    # rich: ``self.console.print()`` through a @property returning Console
    assert out_of(ix, "live.Live.refresh") == {"live.Live.console": "property", "live.Console.print": "instance"}
    assert unbound(ix, "live.Live.refresh") == []
    assert out_of(ix, "live.loop") == {"live.Counter": "class", "live.Counter.__iter__": "implicit",
                                       "live.Counter.__next__": "implicit", "live.Item.use": "container"}
    assert out_of(ix, "live.fail") == {"live.Boom": "implicit", "live.Boom.__init__": "implicit"}
    # functions handed to builtins and library functions that call them (one edge per pair: the
    # kind of its first site)
    assert out_of(ix, "live.hand_over") == {"live.double": "implicit", "live.keyfn": "implicit",
                                            "live.worker": "implicit"}


# -- 5. decorators ---------------------------------------------------------------------------------
DECORATORS = {"deco.py": '''
    import functools


    def passthrough(fn):
        return fn


    def wrapping(fn):
        def wrapper(*args):
            return fn(*args)
        return wrapper


    def wrapped(fn):
        @functools.wraps(fn)
        def inner(*args):
            return fn(*args)
        return inner


    def factory(tag):
        def deco(fn):
            return fn
        return deco


    @passthrough
    def p1():
        pass


    @wrapping
    def p2():
        pass


    @wrapped
    def p3():
        pass


    @factory("x")
    def p4():
        pass


    @functools.lru_cache(maxsize=None)
    def p5():
        pass


    def caller():
        p1()
        p2()
        p3()
        p4()
        p5()
'''}


def test_decorators(index):
    ix = index(DECORATORS)
    # what the decorator returns: the function itself (returned argument, functools.wraps, a
    # decorator outside the workspace), or its inner function (which calls the original)
    assert out_of(ix, "deco.caller") == {"deco.p1": "decorated", "deco.wrapping.wrapper": "decorated",
                                         "deco.p3": "decorated", "deco.p4": "decorated", "deco.p5": "decorated"}
    assert out_of(ix, "deco.wrapping.wrapper") == {"deco.p2": "param"}
    assert out_of(ix, "deco.wrapped.inner") == {"deco.p3": "param"}
    # applying a decorator is a call of it, attributed to the decorated definition
    assert out_of(ix, "deco.p1") == {"deco.passthrough": "decorator"}
    assert out_of(ix, "deco.p4") == {"deco.factory": "local", "deco.factory.deco": "decorator"}


# -- 6. C3 method resolution order ------------------------------------------------------------------
def test_diamond_uses_c3(index):
    ix = index({"mro.py": '''
        class A:
            def func(self):
                pass

        class B(A):
            pass

        class C(A):
            def func(self):
                pass

        class D(B, C):
            pass

        def use():
            D().func()
    '''})
    # D.__mro__ is (D, B, C, A, object): C.func, never A.func
    assert out_of(ix, "mro.use") == {"mro.D": "class", "mro.C.func": "instance"}


# -- 7. honest unknowns ----------------------------------------------------------------------------
def test_unbound_calls_of_every_shape_are_counted_and_located(index):
    ix = index({"unk.py": '''
        def g(a, d, f):
            a[0]()
            d["k"]()
            f()()
            a.b.c()
    '''})
    # nothing in the workspace calls g: its parameters are unknown; every call site is counted
    assert unbound(ix, "unk.g") == ["a[]@2", "d[]@3", "f@4", "f()@4", "c@5"]


def test_values_from_outside_stay_unbound_and_counted(index):
    ix = index({"ext.py": '''
        import json

        def local():
            pass

        def run(cb):
            cb()

        def main(loaded):
            run(local)
            run(json.loads)
            run(loaded)
    '''})
    # one value per call site: a workspace function (edge), an external one (no edge, not
    # unknown), and an unknown (counted): the site is bound to local and still counted
    assert out_of(ix, "ext.run") == {"ext.local": "param"}
    assert unbound(ix, "ext.run") == ["cb@7"]


# -- 7b. unbound sites are located: callers, chain ------------------------------------------------------
def test_callers_list_the_unbound_sites_that_use_the_name(index):
    from orbit_lsp.graph import queries

    ix = index({"loc.py": '''
        class Session:
            def request(self):
                pass

        def direct():
            Session().request()

        def unknown(s):
            s.request()

        def subscript(items):
            items[0].request()
    '''})
    ans = queries.callers(ix.graph, "Session.request")
    (row,) = ans.rows
    assert [c["qual"] for c in row["callers"]] == ["loc.direct"]
    # two call sites could not be bound and use the name: counted and located, never guessed
    assert row["unbound"] == {"total": 2, "sites": [{"file": "loc.py", "caller": "loc.unknown", "line": 9},
                                                    {"file": "loc.py", "caller": "loc.subscript", "line": 12}]}
    imp = queries.symbol_impact(ix.graph, "loc.py", "loc.Session.request")
    assert imp.unbound["total"] == 2
    assert any("loc.py:9" in n and "loc.py:12" in n for n in imp.notes)


def test_chain_says_where_an_unbound_call_breaks_the_path(index):
    from orbit_lsp.graph import queries

    ix = index({"brk.py": '''
        def target():
            pass

        def middle():
            target()

        def start(cb):
            helper(cb)

        def helper(cb):
            cb.middle()
    '''})
    ans = queries.call_chain(ix.graph, "start", "target")
    assert ans.rows == []
    # start -> helper is bound; helper's ``cb.middle()`` is not (cb is unknown) and middle reaches target
    assert [(b["caller"], b["file"], b["line"], b["name"], b["callee"], b["hops_from"], b["hops_to"])
            for b in ans.breaks] == [("brk.helper", "brk.py", 11, "middle", "brk.middle", 1, 1)]
    assert any("brk.py:11" in n for n in ans.notes)


def test_parameter_values_are_on_up_to_a_workspace_size(tmp_path, store):
    """By default parameters hold what the workspace's call sites pass (``value_flow``), for
    workspaces of at most ``value_flow_max_files`` Python files; above it (or with
    ``value_flow`` false) a parameter holds only its default and annotation, so ``cb()`` stays
    unbound (counted), and the index says why. A cache of the other mode is not reused."""
    from orbit_lsp.config import Settings

    ws = tmp_path / "sized"
    ws.mkdir()
    (ws / "m.py").write_text("def handler():\n    pass\n\n\ndef run(cb):\n    cb()\n\n\ndef main():\n    run(handler)\n")
    (ws / "n.py").write_text("")

    def settings(**kw) -> Settings:
        return Settings(data_dir=store.settings.data_dir, falkordb_url=None, **kw)

    ix = WorkspaceIndexer(ws, store, settings())
    assert ix.settings.value_flow is True and ix.settings.value_flow_max_files == 1000
    try:
        rep = ix.index_all()
        assert ix.value_flow and not any("parameter values" in n for n in rep.notes)
        assert out_of(ix, "m.run") == {"m.handler": "param"}
        assert unbound(ix, "m.run") == []
        # two Python files, a limit of one: off, said, and a full build (the cache was of the other mode)
        small = WorkspaceIndexer(ws, store, settings(value_flow_max_files=1))
        rep = small.index_all()
        assert not small.value_flow and rep.mode == "full"
        assert "parameter values are off: 2 Python files, more than valueFlowMaxFiles (1)" in rep.notes
        assert out_of(small, "m.run") == {}
        assert unbound(small, "m.run") == ["cb@6"]
        assert out_of(small, "m.main") == {"m.run": "local"}
        # a new indexer on that graph goes by the cache's size before its first walk: no rebuild
        again = WorkspaceIndexer(ws, store, settings(value_flow_max_files=1))
        assert not again.value_flow and not again.needs_full_build()
        assert again.index_all().mode == "unchanged"
        # off by the setting, whatever the size; 0 is no limit
        assert not WorkspaceIndexer(ws, store, settings(value_flow=False)).value_flow
        assert WorkspaceIndexer(ws, store, settings(value_flow_max_files=0)).value_flow
    finally:
        ix.graph.delete()


def test_a_site_bound_to_the_symbol_is_not_listed_again_as_unbound(index):
    """A call site whose callee may be the symbol or an unknown value is a caller (bound) and is
    counted unbound on its caller too; ``callers`` lists it once, among the callers."""
    from orbit_lsp.graph import queries

    ix = index({"twice.py": '''
        class Box:
            def open(self):
                pass

        def use(flag, other):
            b = Box() if flag else other
            b.open()
    '''})
    (row,) = queries.callers(ix.graph, "Box.open").rows
    assert [c["qual"] for c in row["callers"]] == ["twice.use"]
    assert unbound(ix, "twice.use") == ["open@7"]  # still counted on its caller
    assert row["unbound"] == {"total": 0, "sites": []}


# -- parameter values past the cap, and values passed around in a cycle ----------------------------
def _many(n: int, prefix: str) -> str:
    return "\n".join(f"def {prefix}{i}():\n    pass\n" for i in range(n))


PASSED_AROUND = {"ring.py": _many(10, "f") + _many(7, "g") + '''
def first(cb, depth):
    cb()
    if depth:
        second(cb, depth - 1)

def second(cb, depth):
    cb()
    if depth:
        first(cb, depth - 1)

def small(cb):
    cb()

def go():
''' + "".join(f"    first(f{i}, 3)\n" for i in range(10)) + "".join(f"    second(g{i}, 3)\n" for i in range(7))
    + "    small(f0)\n    small(g0)\n"}


def test_parameters_passed_around_a_cycle_past_the_cap_are_unknown_in_both(index):
    """``first`` and ``second`` pass their callback to each other: each may hold all seventeen
    functions (ten passed to ``first``, seven to ``second``), more than the cap of sixteen
    (``MAX_PARAM_VALUES``), so neither ``cb()`` is bound: each is an unbound site, in both
    functions. Binding ``second``'s call to its seven own functions only would be a partial
    answer given as a whole one."""
    ix = index(PASSED_AROUND)
    lines = textwrap.dedent(PASSED_AROUND["ring.py"]).lstrip("\n").splitlines()
    cb = [n for n, text in enumerate(lines, 1) if text == "    cb()"]
    assert {b: h for b, h in out_of(ix, "ring.first").items() if h == "param"} == {}
    assert {b: h for b, h in out_of(ix, "ring.second").items() if h == "param"} == {}
    assert unbound(ix, "ring.first") == [f"cb@{cb[0]}"]
    assert unbound(ix, "ring.second") == [f"cb@{cb[1]}"]
    # below the cap every value is followed
    assert out_of(ix, "ring.small") == {"ring.f0": "param", "ring.g0": "param"}


SUBCLASS_ATTRIBUTES = {"app.py": '''
class Notifier:
    def notify(self):
        pass

class Mailer:
    def notify(self):
        pass

class Base:
    def run(self):
        self.notifier.notify()

    def missing(self):
        self.nobody_sets_this.notify()

class Child(Base):
    def __init__(self):
        self.notifier = Notifier()

class GrandChild(Child):
    notifier = Mailer()  # shadowed: Child.__init__ sets the instance's own notifier

class Plain(Base):
    notifier = Notifier()

class Printer:
    def notify(self):
        pass

class OtherChild(Child):
    def __init__(self):
        self.notifier = Printer()
'''}


def test_attributes_set_only_in_subclasses_are_read_in_the_base(index):
    """``Base.run`` reads ``self.notifier``, which only subclasses set: there ``self`` is an
    instance of a subclass, so the call reaches what each subclass assigns: ``Child`` and
    ``OtherChild`` in ``__init__``, ``Plain`` in its class body. ``GrandChild``'s class attribute
    never reaches ``self.notifier``: ``Child.__init__`` gives each instance its own. An
    attribute no class sets stays unbound."""
    ix = index(SUBCLASS_ATTRIBUTES)
    assert out_of(ix, "app.Base.run") == {"app.Notifier.notify": "instance", "app.Printer.notify": "instance"}
    assert unbound(ix, "app.Base.run") == []
    assert out_of(ix, "app.Base.missing") == {}
    assert unbound(ix, "app.Base.missing") == ["notify@14"]


def test_subclass_attributes_follow_an_edit_of_the_bases(tmp_path, store):
    """Incremental == rebuild when a subclass stops deriving from the base."""
    ix = build(tmp_path, store, SUBCLASS_ATTRIBUTES)
    try:
        path = ix.root / "app.py"
        path.write_text(path.read_text().replace("class Child(Base):", "class Child:"))
        ix.reindex_file(path)
        # Child's subclasses no longer derive from Base either: only Plain sets Base's notifier
        assert out_of(ix, "app.Base.run") == {"app.Notifier.notify": "instance"}
        path.write_text(path.read_text().replace("class Plain(Base):", "class Plain:"))
        ix.reindex_file(path)
        assert out_of(ix, "app.Base.run") == {}
        assert unbound(ix, "app.Base.run") == ["notify@11"]
        path.write_text(path.read_text().replace("class Child:", "class Child(Base):"))
        ix.reindex_file(path)
        assert out_of(ix, "app.Base.run") == {"app.Notifier.notify": "instance", "app.Printer.notify": "instance"}
    finally:
        ix.graph.delete()


def test_an_unsaved_buffer_binds_subclass_attributes_like_the_saved_file(tmp_path, store):
    """The editor's buffer analysis (``buffers.analyse_buffer``, one file resolved on its own)
    binds ``Base.run``'s call as the index does, and follows the buffer's own bases."""
    from orbit_lsp.index.buffers import analyse_buffer
    from orbit_lsp.index.indexer import content_hash

    ix = build(tmp_path, store, SUBCLASS_ATTRIBUTES)
    try:
        def bound_from_run(text: str) -> set[str]:
            data = text.encode()
            _, edges = analyse_buffer(ix, "app.py", data, content_hash(data), True)
            return {k[2] for k in edges.calls if k[0] == "Base.run"}

        saved = (ix.root / "app.py").read_text()
        assert bound_from_run(saved) == {"Notifier.notify", "Printer.notify"}
        unsaved = saved.replace("class Child(Base):", "class Child:").replace("class Plain(Base):", "class Plain:")
        assert bound_from_run(unsaved) == set()
    finally:
        ix.graph.delete()


def test_implementations_of_a_python_method_are_the_overrides_below_it(index):
    """``queries.symbol_implementations`` for a Python method: the same-named methods of the
    classes below its class (never the method itself), and nothing for a plain function."""
    from orbit_lsp.graph import queries

    ix = index({"adapters.py": '''
class BaseAdapter:
    def send(self):
        raise NotImplementedError

class HTTPAdapter(BaseAdapter):
    def send(self):
        pass

class Retrying(HTTPAdapter):
    def send(self):
        pass

class Quiet(BaseAdapter):
    pass

def send():
    pass
'''})
    got = queries.symbol_implementations(ix.graph, "adapters.py", "adapters.BaseAdapter.send")
    assert [r["qual"] for r in got.rows] == ["adapters.HTTPAdapter.send", "adapters.Retrying.send"]
    found = queries.find_symbols(ix.graph, "BaseAdapter.send")
    again = queries.symbol_implementations(ix.graph, "adapters.py", "adapters.send", found)
    assert again.rows == []


def test_calls_on_what_library_code_returns_are_counted_not_dropped(index):
    """A value derived from a library call (an item of an ``OrderedDict``, what
    ``ctx.ensure_object(ScriptInfo)`` returns) may be a workspace object: a method called on it
    is an unbound site, counted and located, never silently taken as external. A library
    function or method called by name stays outside the workspace (not counted)."""
    ix = index({"sessions.py": '''
import json

import click
import registry_lib

class HTTPAdapter:
    def send(self, request):
        pass

class Session:
    def __init__(self):
        self.adapters = registry_lib.Registry()
        self.adapters["http://"] = HTTPAdapter()

    def get_adapter(self, url):
        for prefix, adapter in self.adapters.items():
            return adapter

    def send(self, request):
        adapter = self.get_adapter(request)
        return adapter.send(request)

def load(ctx: click.Context, text):
    json.loads(text)
    return ctx.ensure_object(Session).send(text)
'''})
    # the items of a library's container are the library's (unlike ``OrderedDict()``'s)
    assert unbound(ix, "sessions.Session.send") == ["send@21"]
    # ctx.ensure_object is click's own method: outside the workspace; what it returns is not
    assert unbound(ix, "sessions.load") == ["send@25"]


SHIFTED_BEFORE = textwrap.dedent('''\
    def helper(data, table={}):
        return data


    HANDLERS = [helper, lambda: helper(1)]
    KEYS = {"a": helper}
    pick = lambda k: KEYS[k]


    class Codes:
        OK = (200, "OK")
        MISSING = (404, "Not Found")
        late = lambda self: 1
    ''')


def test_lines_added_above_literals_and_lambdas_leave_the_interface_alone():
    """A container literal is identified by its scope and its order there, and a lambda is named
    by its order under its definition: a line added in ``helper``'s body moves every literal and
    lambda below it, yet no other file's resolution can see a difference (so none is re-resolved,
    and a diff of the two versions changes no lambda's name)."""
    from orbit_lsp.index.parsing import parse_python
    from orbit_lsp.index.py_interface import changed_entities

    after = SHIFTED_BEFORE.replace("    return data\n", "    print(data)\n    return data\n")
    assert after != SHIFTED_BEFORE
    old, _ = parse_python("m.py", SHIFTED_BEFORE.encode())
    new, _ = parse_python("m.py", after.encode())
    assert changed_entities("m.py", old, new) == (set(), set())
    # a lambda's line is its Symbol's line
    assert {s.qual: s.line for s in new.symbols if s.name == "<lambda>"} == {
        "<lambda>": 6, "<lambda#2>": 8, "Codes.<lambda>": 14}
    # a new literal in a scope is a change of that scope's unit only
    added = after.replace('    MISSING = (404, "Not Found")\n', '    MISSING = (404, "Not Found")\n    GONE = (410, "Gone")\n')
    newer, _ = parse_python("m.py", added.encode())
    changed, _moved = changed_entities("m.py", new, newer)
    assert changed == {("m.py", "Codes")}


def test_an_edge_lists_its_call_sites_in_source_order():
    """``callers`` shows an edge's lines as stored: sites appended in visiting order (nested
    functions visited after their parent's other calls) are put in source order, with their
    columns kept beside them."""
    from types import SimpleNamespace as Site

    from orbit_lsp.index.py_edges import FileEdges

    e = FileEdges()
    for line, col in ((9, 4), (3, 8), (9, 1), (5, 0)):
        e.add_call("main", "lib.py", "g", "import", Site(line=line, col=col, end_col=col + 3))
    e.sort_sites()
    edge = e.calls[("main", "lib.py", "g")]
    assert (edge.lines, edge.cols, edge.end_cols) == ((3, 5, 9, 9), (8, 0, 1, 4), (11, 3, 4, 7))


PROPERTY_READS = {
    "shop.py": textwrap.dedent('''\
        class Money:
            def cents(self):
                return 1


        class Cart:
            @property
            def total(self):
                return Money()

            @property
            def empty(self):
                return False

            def pay(self):
                amount = self.total
                if self.empty:
                    return None
                show(self.total)
                return self.total.cents()

            def clear(self):
                self.items = []
                del self.items


        class Special(Cart):
            def pay(self):
                return super().total


        def show(x):
            pass


        def report(cart: Cart, other):
            return cart.total, cart.empty, other.total
        '''),
}


def test_property_reads_outside_call_chains_are_calls_of_the_getter(index):
    """Reading a ``@property`` runs its getter wherever the read is (an assignment, a condition,
    an argument, a return), not only on the way to a call: each read is a site of a
    ``property`` edge to the getter. Stores and deletes of an attribute run no getter, and a read
    on an unknown value is not an unbound call (it may not be a property at all)."""
    ix = index(PROPERTY_READS)
    e = edges(ix)
    assert e[("shop.Cart.pay", "shop.Cart.total")] == ([16, 19, 20], "property")
    assert e[("shop.Cart.pay", "shop.Cart.empty")] == ([17], "property")
    assert e[("shop.Cart.pay", "shop.Money.cents")] == ([20], "instance")
    assert out_of(ix, "shop.Cart.clear") == {}
    assert out_of(ix, "shop.Special.pay") == {"shop.Cart.total": "property"}
    assert e[("shop.report", "shop.Cart.total")] == ([37], "property")
    assert e[("shop.report", "shop.Cart.empty")] == ([37], "property")
    assert unbound(ix, "shop.report") == [] and unbound(ix, "shop.Cart.pay") == []


CONSTRUCTORS = {
    "groups.py": textwrap.dedent('''\
        import click


        class AppGroup(click.Group):
            def command(self):
                self.helper()


        class FlaskGroup(AppGroup):
            def __init__(self):
                super().__init__()

            def helper(self):
                pass


        def make():
            return AppGroup()


        def make_flask():
            return FlaskGroup()
        '''),
}


def test_constructing_a_class_runs_its_own_init_never_a_subclass_one(index):
    """``AppGroup()`` constructs an AppGroup: its ``__init__`` is click's (outside the
    workspace), never the one its subclass FlaskGroup defines (flask's ``cli.AppGroup()`` was
    bound to ``FlaskGroup.__init__``). An attribute read on ``self`` in AppGroup's methods still
    finds what subclasses define (``self`` may be a FlaskGroup there)."""
    ix = index(CONSTRUCTORS)
    assert out_of(ix, "groups.make") == {"groups.AppGroup": "class"}
    assert out_of(ix, "groups.make_flask") == {"groups.FlaskGroup": "class", "groups.FlaskGroup.__init__": "init"}
    assert out_of(ix, "groups.AppGroup.command") == {"groups.FlaskGroup.helper": "self"}


# -- parameter values on demand ---------------------------------------------------------------------
UNREAD_PARAMETER = {
    "lib.py": '''
        def run(cb, other):
            return other
    ''',
    "app.py": '''
        from lib import run

        def hello():
            pass

        def bye():
            pass

        def main():
            run(hello, bye)
    ''',
}


def test_a_parameter_no_file_reads_binds_in_an_unsaved_buffer_that_calls_it(tmp_path, store):
    """``run``'s ``cb`` is read by no saved file (its value is computed only for parameters some
    evaluation reads); a buffer of lib.py that calls ``cb()`` still binds it to ``hello``, the
    function every call site passes, as the saved file will once written."""
    from orbit_lsp.index.buffers import analyse_buffer
    from orbit_lsp.index.indexer import content_hash

    ix = build(tmp_path, store, UNREAD_PARAMETER)
    try:
        assert out_of(ix, "lib.run") == {}
        text = "def run(cb, other):\n    cb()\n    other()\n"
        data = text.encode()
        _, got = analyse_buffer(ix, "lib.py", data, content_hash(data), True)
        assert {(k[1], k[2]): e.resolved for k, e in got.calls.items() if k[0] == "run"} == {
            ("app.py", "hello"): "param", ("app.py", "bye"): "param"}
        (ix.root / "lib.py").write_text(text)
        ix.reindex_file(ix.root / "lib.py")
        assert out_of(ix, "lib.run") == {"app.hello": "param", "app.bye": "param"}
    finally:
        ix.graph.delete()


def test_a_parameter_read_first_by_an_edit_elsewhere_gets_its_value(tmp_path, store):
    """A file that starts reading a parameter nothing read before (``lib.run``'s ``cb``, through
    what ``run`` returns) binds as a rebuild does; then the call site that passed the value goes
    and the binding goes with it."""
    files = dict(UNREAD_PARAMETER)
    files["lib.py"] = '''
        def run(cb, other):
            return other
    '''
    ix = build(tmp_path, store, files)
    try:
        assert out_of(ix, "app.main") == {"lib.run": "import"}
        lib = ix.root / "lib.py"
        lib.write_text("def run(cb, other):\n    return cb\n")
        ix.reindex_file(lib)
        app = ix.root / "app.py"
        app.write_text(app.read_text().replace("    run(hello, bye)", "    run(hello, bye)()"))
        ix.reindex_file(app)
        assert out_of(ix, "app.main") == {"lib.run": "import", "app.hello": "return"}
        app.write_text(app.read_text().replace("run(hello, bye)()", "run(bye, bye)()"))
        ix.reindex_file(app)
        assert out_of(ix, "app.main") == {"lib.run": "import", "app.bye": "return"}
    finally:
        ix.graph.delete()


LIBRARY_CONTAINERS = {"sessions.py": '''
import collections
from collections import OrderedDict, defaultdict, deque

class HTTPAdapter:
    def send(self, request):
        pass

class Retry:
    def run(self):
        pass

class Session:
    def __init__(self):
        self.adapters = OrderedDict()
        self.mount("https://", HTTPAdapter())
        self.queue = deque()
        self.by_kind = collections.defaultdict(list)
        self.plain = collections.OrderedDict()
        self.order: list[Retry] = []

    def mount(self, prefix, adapter):
        self.adapters[prefix] = adapter

    def later(self):
        self.queue.append(Retry())
        self.plain["x"] = Retry()
        self.order.insert(0, Retry())

    def get_adapter(self, url):
        for prefix, adapter in self.adapters.items():
            if url.startswith(prefix):
                return adapter
        raise ValueError(url)

    def send(self, request):
        adapter = self.get_adapter(request)
        return adapter.send(request)

    def drain(self):
        for job in self.queue:
            job.run()
        self.plain["x"].run()
        for r in self.order:
            r.run()
''',
    "shadow.py": '''
class OrderedDict:
    def __init__(self):
        self.items_ = []

    def keys(self):
        return self.items_

def make():
    d = OrderedDict()
    return d.keys()
'''}


def test_library_containers_made_empty_hold_what_is_stored_into_them(index):
    """``OrderedDict()``, ``collections.defaultdict(list)``, ``deque()`` are containers like
    ``{}`` and ``[]``: what a method stores into them (``mount`` called with an ``HTTPAdapter``)
    is what another method's iteration gives (requests' ``Session.send`` runs
    ``HTTPAdapter.send`` this way). An annotated attribute (``self.order: list[Retry] = []``)
    is filled the same way. A workspace class that happens to be named ``OrderedDict`` is
    still a class: calling it constructs it."""
    ix = index(LIBRARY_CONTAINERS)
    assert out_of(ix, "sessions.Session.send") == {"sessions.Session.get_adapter": "self",
                                                    "sessions.HTTPAdapter.send": "instance"}
    assert unbound(ix, "sessions.Session.send") == []
    assert out_of(ix, "sessions.Session.drain") == {"sessions.Retry.run": "container"}
    assert edges(ix)[("sessions.Session.drain", "sessions.Retry.run")][0] == [41, 42, 44]
    assert unbound(ix, "sessions.Session.drain") == []
    assert out_of(ix, "shadow.make") == {"shadow.OrderedDict": "class", "shadow.OrderedDict.__init__": "init",
                                         "shadow.OrderedDict.keys": "instance"}


def _tag_classes(n: int) -> str:
    return "".join(f"class Tag{i}(Tag):\n    def check(self):\n        pass\n\n" for i in range(n))


def test_a_parameter_binds_up_to_sixteen_values(index):
    """A parameter passed 12 different classes (flask's ``TaggedJSONSerializer.register`` gets
    its 8 default tags and the tests' own) binds the calls on each; past
    ``MAX_PARAM_VALUES`` (16) it is unknown and the call is counted as unbound."""
    from orbit_lsp.index.py_values import MAX_PARAM_VALUES

    assert MAX_PARAM_VALUES == 16
    body = "class Tag:\n    def check(self):\n        pass\n\n" + _tag_classes(17) + (
        "def register(cls):\n    return cls().check()\n\n"
        "def many(cls):\n    return cls().check()\n\n"
        "def go():\n" + "".join(f"    register(Tag{i})\n" for i in range(12))
        + "".join(f"    many(Tag{i})\n" for i in range(17)))
    ix = index({"tags.py": body})
    assert {b for b in out_of(ix, "tags.register") if b.endswith(".check")} == {
        f"tags.Tag{i}.check" for i in range(12)}
    assert unbound(ix, "tags.register") == []
    assert not any(b.endswith(".check") for b in out_of(ix, "tags.many"))
    # seventeen classes: both the construction ``cls()`` and ``.check()`` on it are unknown
    line = body.splitlines().index("def many(cls):") + 2
    assert sorted(unbound(ix, "tags.many")) == [f"check@{line}", f"cls@{line}"]


def test_a_weak_reference_called_gives_its_referent(index):
    """``weakref.ref(self)()`` is ``self`` (flask's static route: ``self_ref().send_static_file``);
    ``weakref.proxy(obj)`` acts as ``obj``; dereferencing runs no workspace code."""
    ix = index({"app.py": '''
import weakref
from weakref import proxy

class Flask:
    def __init__(self):
        self_ref = weakref.ref(self)
        self.view = lambda **kw: self_ref().send_static_file(**kw)
        self.other = proxy(self)

    def send_static_file(self, **kw):
        pass

    def go(self):
        self.other.send_static_file()
'''})
    # a lambda's calls are its defining function's
    assert out_of(ix, "app.Flask.__init__") == {"app.Flask.send_static_file": "instance"}
    assert unbound(ix, "app.Flask.__init__") == []
    assert out_of(ix, "app.Flask.go") == {"app.Flask.send_static_file": "instance"}


def test_a_function_returning_its_argument_returns_what_each_call_passes(index):
    """``ensure_sync(func)`` returns ``func`` (or something else): at each call it returns what
    that call passes, not every function any call passes (flask's ``self.ensure_sync(f)(…)``
    otherwise runs every view function from every teardown)."""
    ix = index({"app.py": '''
def one():
    pass

def two():
    pass

def fallback():
    pass

def identity(x):
    return x

class App:
    def __init__(self):
        self.fallback = fallback

    def ensure_sync(self, func):
        if func is None:
            return self.fallback
        return func

    def a(self):
        self.ensure_sync(one)()

    def b(self):
        self.ensure_sync(two)()

def c():
    identity(one)()
    identity(two)()
'''})
    assert out_of(ix, "app.App.a") == {"app.App.ensure_sync": "self", "app.one": "return", "app.fallback": "return"}
    assert out_of(ix, "app.App.b") == {"app.App.ensure_sync": "self", "app.two": "return", "app.fallback": "return"}
    assert edges(ix)[("app.c", "app.one")][0] == [29]
    assert edges(ix)[("app.c", "app.two")][0] == [30]
