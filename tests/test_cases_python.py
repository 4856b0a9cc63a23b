"""Shared failure cases (``/work/shared/cases``) for the Python indexer, asserted against the
values in each case's ``expected.md``.

Conventions of the graph as built (see ``orbit_lsp/index/indexer.py``): ``Symbol.qual`` is the
module-dotted name (``app.jenkins.build_tree.flatten``); every Python file has one ``module``
Symbol owning module-level calls; a class instantiation makes a CALLS edge to the class Symbol
(``resolved: 'class'``) and to its ``__init__`` when one exists (``resolved: 'init'``);
decorator calls are attributed to the decorated function.

``impact()`` is computed twice, with the Cypher path query and with a plain BFS over the IMPORTS
edges in Python; every impact check asserts that both agree.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

from orbit_lsp.graph.connection import Graph
from orbit_lsp.graph.schema import ensure_indexes
from orbit_lsp.index.indexer import IndexReport, WorkspaceIndexer

MAX_HOPS = 4


# -- fixtures & helpers ----------------------------------------------------------------------
@dataclass
class Indexed:
    ix: WorkspaceIndexer
    ws: Path
    report: IndexReport

    @property
    def graph(self) -> Graph:
        return self.ix.graph


@pytest.fixture
def index_case(store, case_workspace):
    """``index_case("001", prepare=None)`` builds the case workspace (``prepare(ws)`` may change
    it first), indexes it and returns an ``Indexed``; the graph (and its cache) is deleted at the
    end of the test."""
    made: list[WorkspaceIndexer] = []

    def _index(prefix: str, prepare=None) -> Indexed:
        ws = case_workspace(prefix)
        if prepare is not None:
            prepare(ws)
        ix = WorkspaceIndexer(ws, store)
        made.append(ix)
        rep = ix.index_all()
        return Indexed(ix, Path(ix.root), rep)

    yield _index
    for ix in made:
        ix.graph.delete()
        try:
            ix.cache_path.unlink()
        except OSError:
            pass


def rows(g: Graph, cypher: str, **params) -> list[list]:
    return g.query(cypher, params).rows


def impact_cypher(g: Graph, path: str) -> dict[str, int]:
    """Dependents of ``path`` through 1..4 IMPORTS edges with their minimum hop count."""
    res = rows(g, f"MATCH p=(d:File)-[:IMPORTS*1..{MAX_HOPS}]->(t:File {{path: $p}}) "
                  "WHERE d.path <> $p RETURN d.path, min(length(p))", p=path)
    return {d: int(h) for d, h in res}


def impact_bfs(g: Graph, path: str) -> dict[str, int]:
    """The same answer by a breadth-first search in Python over all IMPORTS edges."""
    rev: dict[str, set[str]] = {}
    for a, b in rows(g, "MATCH (a:File)-[:IMPORTS]->(b:File) RETURN a.path, b.path"):
        rev.setdefault(b, set()).add(a)
    seen = {path: 0}
    out: dict[str, int] = {}
    q = deque([path])
    while q:
        cur = q.popleft()
        if seen[cur] >= MAX_HOPS:
            continue
        for d in rev.get(cur, ()):
            if d not in seen:
                seen[d] = seen[cur] + 1
                out[d] = seen[d]
                q.append(d)
    return out


def impact(g: Graph, path: str) -> dict[str, int]:
    a, b = impact_cypher(g, path), impact_bfs(g, path)
    assert a == b, f"impact({path}): Cypher path query {a} != BFS {b}"
    return a


def files(g: Graph) -> set[str]:
    return {p for (p,) in rows(g, "MATCH (f:File) RETURN f.path")}


def file_props(g: Graph, path: str) -> dict:
    res = rows(g, "MATCH (f:File {path: $p}) RETURN properties(f)", p=path)
    assert len(res) == 1, f"{len(res)} File nodes for {path!r}"
    return res[0][0]


def symbols(g: Graph) -> dict[str, dict]:
    res = rows(g, "MATCH (s:Symbol) RETURN s.qual, properties(s)")
    quals = [q for q, _ in res]
    assert len(quals) == len(set(quals)), f"duplicate Symbol quals: {sorted(quals)}"
    return {q: p for q, p in res}


def file_symbols(g: Graph, path: str, include_module: bool = False) -> dict[str, int]:
    """name -> line of the Symbols DEFINED by ``path`` (the module Symbol left out)."""
    res = rows(g, "MATCH (:File {path: $p})-[:DEFINES]->(s:Symbol) RETURN s.name, s.line, s.kind", p=path)
    names = [n for n, _, k in res if include_module or k != "module"]
    assert len(names) == len(set(names)), f"duplicate symbols in {path}: {sorted(names)}"
    return {n: line for n, line, k in res if include_module or k != "module"}


def calls(g: Graph) -> dict[tuple[str, str], dict]:
    res = rows(g, "MATCH (a:Symbol)-[e:CALLS]->(b:Symbol) RETURN a.qual, b.qual, properties(e)")
    pairs = [(a, b) for a, b, _ in res]
    assert len(pairs) == len(set(pairs)), "more than one CALLS edge for a (caller, callee) pair"
    return {(a, b): p for a, b, p in res}


def imports_out(g: Graph, path: str) -> set[str]:
    return {b for (b,) in rows(g, "MATCH (:File {path: $p})-[:IMPORTS]->(b:File) RETURN b.path", p=path)}


def edge_set(g: Graph) -> list[tuple]:
    """Every edge as (type, source key, target key, sorted properties), sorted (duplicates kept)."""
    res = rows(g, "MATCH (a)-[e]->(b) RETURN type(e), coalesce(a.qual, a.path, a.name), "
                  "coalesce(b.qual, b.path, b.name), properties(e)")
    return sorted((t, a, b, repr(sorted(p.items()))) for t, a, b, p in res)


def all_properties(g: Graph) -> list[dict]:
    nodes = [p for (p,) in rows(g, "MATCH (n) RETURN properties(n)")]
    edges = [p for (p,) in rows(g, "MATCH ()-[r]->() RETURN properties(r)")]
    return nodes + edges


def property_strings(g: Graph) -> list[str]:
    out = []

    def walk(v):
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for k, x in v.items():
                out.append(str(k))
                walk(x)

    for p in all_properties(g):
        walk(p)
    return out


def assert_sane(done: Indexed) -> None:
    """Invariants every case relies on: each File is a real file of the workspace; each Symbol is
    DEFINED by exactly one File, the one named in ``Symbol.file``; no CALLS edge duplicates a pair;
    every CALLS endpoint is a defined Symbol (no dangling call targets)."""
    g = done.graph
    for p in files(g):
        assert (done.ws / p).is_file(), f"File node for a path that is not a file: {p!r}"
    bad = rows(g, "MATCH (s:Symbol) OPTIONAL MATCH (f:File)-[:DEFINES]->(s) "
                  "WITH s, collect(f.path) AS fs WHERE size(fs) <> 1 OR fs[0] <> s.file "
                  "RETURN s.qual, fs")
    assert not bad, f"Symbols without exactly one DEFINES from their file: {bad}"
    mods = rows(g, "MATCH (f:File {lang: 'python'}) WHERE f.parse_error IS NULL "
                   "OPTIONAL MATCH (f)-[:DEFINES]->(s:Symbol {kind: 'module'}) "
                   "WITH f, count(s) AS n WHERE n <> 1 RETURN f.path, n")
    assert not mods, f"Python files without exactly one module Symbol: {mods}"
    calls(g)


def make_writable(path: Path) -> None:
    """Case copies keep the read-only modes of the shared tree."""
    path.chmod(path.stat().st_mode | stat.S_IWUSR)


def overwrite(path: Path, data: bytes) -> None:
    make_writable(path)
    path.write_bytes(data)


# -- 001 relative imports ---------------------------------------------------------------------
def test_001_relative_imports(index_case):
    done = index_case("001")
    g = done.graph
    assert_sane(done)
    # 1. diag.py imports build_tree.py only (optionally the package init)
    out = imports_out(g, "app/tools/diag.py")
    assert "app/jenkins/build_tree.py" in out
    assert out - {"app/jenkins/build_tree.py", "app/jenkins/__init__.py"} == set(), out
    assert "app/misc/flatten.py" not in out
    assert not files(g) & {"app/jenkins/build_tree/flatten.py", "flatten.py"}
    # 2. `from . import diag`, `from .. import jenkins`
    assert {"app/tools/diag.py", "app/jenkins/__init__.py"} <= imports_out(g, "app/tools/__init__.py")
    # 3. CALLS run -> the flatten defined by build_tree.py line 1
    c = calls(g)
    assert ("app.tools.diag.run", "app.jenkins.build_tree.flatten") in c
    assert ("app.tools.diag.run", "app.misc.flatten.flatten") not in c
    syms = symbols(g)
    assert syms["app.jenkins.build_tree.flatten"]["file"] == "app/jenkins/build_tree.py"
    assert syms["app.jenkins.build_tree.flatten"]["line"] == 1
    # 4. / 5.
    assert impact(g, "app/jenkins/build_tree.py") == {"app/tools/diag.py": 1, "app/tools/__init__.py": 2}
    assert impact(g, "app/misc/flatten.py") == {}
    # SHOULD: recursion edge once; impact does not loop
    assert ("app.jenkins.build_tree.flatten", "app.jenkins.build_tree.flatten") in c
    n = rows(g, "MATCH (a:Symbol {qual: $q})-[e:CALLS]->(a) RETURN count(e)", q="app.jenkins.build_tree.flatten")
    assert n == [[1]]


# -- 002 __init__ re-exports -----------------------------------------------------------------
def test_002_init_reexport(index_case):
    done = index_case("002")
    g = done.graph
    assert_sane(done)
    c = calls(g)
    syms = symbols(g)
    # 1. Child() -> the class Symbol in child_classes.py, line 1, DEFINED by that file
    child = "library.parent.child_classes.Child"
    assert ("library.other.Other.process", child) in c
    assert syms[child]["kind"] == "class" and syms[child]["line"] == 1
    assert file_symbols(g, "library/parent/child_classes.py")["Child"] == 1
    for bad in ("child_classes.Child", "library.parent.Child"):
        assert bad not in syms
        assert ("library.other.Other.process", bad) not in c
    # 2. parent.make_child()
    assert ("library.other.Other.process", "library.parent.child_classes.make_child") in c
    # 3. no nodes for paths that do not exist
    assert not files(g) & {"library/parent.py", "child_classes.py"}
    # 4. re-exports are followed through the package init: __init__ at 1 hop, other.py at 2
    assert impact(g, "library/parent/child_classes.py") == {
        "library/parent/__init__.py": 1, "library/other.py": 2}
    # SHOULD: re-indexing leaves the same edge set (no duplicated CALLS edges)
    before = edge_set(g)
    other = done.ws / "library/other.py"
    done.ix.reindex_file(other)  # didSave without a change
    assert edge_set(g) == before
    text = other.read_bytes()
    overwrite(other, text + b"\n# touched\n")
    done.ix.reindex_file(other)
    overwrite(other, text)
    done.ix.reindex_file(other)
    assert edge_set(g) == before
    done.ix.index_all()  # re-open over the existing graph
    assert edge_set(g) == before
    calls(g)


# -- 003 import a.b.c vs from a.b import c ------------------------------------------------------
USERS_003 = ("use_from_pkg", "use_dotted", "use_relative_module", "use_name")


def test_003_import_submodule_forms(index_case):
    done = index_case("003")
    g = done.graph
    assert_sane(done)
    drift = "pkg/retrieval/drift.py"
    for u in USERS_003:
        assert drift in imports_out(g, f"pkg/tools/{u}.py"), u
    imp = impact(g, drift)
    for u in USERS_003:
        assert imp.get(f"pkg/tools/{u}.py") == 1, imp
    c = calls(g)
    for u in USERS_003:
        assert (f"pkg.tools.{u}.report", "pkg.retrieval.drift.measure") in c, u
    callers = rows(g, "MATCH (a:Symbol)-[:CALLS]->(:Symbol {qual: $q}) RETURN count(DISTINCT a), "
                      "count(DISTINCT a.file)", q="pkg.retrieval.drift.measure")
    assert callers == [[4, 4]]
    # 4. code lens on measure: 4 direct dependent files
    direct = rows(g, "MATCH (d:File)-[:IMPORTS]->(:File {path: $p}) RETURN count(DISTINCT d)", p=drift)
    assert direct == [[4]]


# -- 005 aliased imports ------------------------------------------------------------------------
def test_005_aliased_imports(index_case):
    done = index_case("005")
    g = done.graph
    assert_sane(done)
    assert impact(g, "greet.py") == {"plain.py": 1, "mod_alias.py": 1, "name_import.py": 1, "name_alias.py": 1}
    c = calls(g)
    for edge in [("plain.a", "greet.hello"), ("mod_alias.b", "greet.hello"),
                 ("name_import.c", "greet.hello"), ("name_alias.d", "greet.bye")]:
        assert edge in c, edge
    names = {p["name"] for p in symbols(g).values()}
    assert not names & {"farewell", "G", "np", "st", "stats2", "avg"}
    # 3.
    assert impact(g, "lib/stats.py").get("analysis.py") == 1
    assert ("analysis.run", "lib.stats.mean") in c
    assert {b for (a, b) in c if a == "analysis.run"} == {"lib.stats.mean"}
    # 4. numpy is a package, not a file
    pk = rows(g, "MATCH (:File {path: 'analysis.py'})-[:USES_PACKAGE]->(p:Package) RETURN p.name")
    assert ["numpy"] in pk
    assert not files(g) & {"numpy.py", "np.py", "numpy/__init__.py"}
    assert imports_out(g, "analysis.py") == {"lib/stats.py"}


# -- 006 self.method, instantiation, class in a variable -----------------------------------------
def test_006_self_method_instantiation(index_case):
    done = index_case("006")
    g = done.graph
    assert_sane(done)
    c = calls(g)
    assert ("widgets.Panel.draw", "widgets.Panel._draw_one") in c
    assert c[("widgets.Panel.draw", "widgets.Panel._draw_one")]["resolved"] == "self"
    # 2./3. instantiation: class Symbol ('class') and its __init__ ('init'), for every site
    for caller in ("widgets.Panel.__init__", "widgets.make_widget"):
        assert c.get((caller, "widgets.Widget"), {}).get("resolved") == "class", caller
        assert c.get((caller, "widgets.Widget.__init__"), {}).get("resolved") == "init", caller
    assert c.get(("decoy.unrelated", "decoy.Gadget"), {}).get("resolved") == "class"
    # same convention everywhere: every edge to a class has an 'init' twin when __init__ exists
    syms = symbols(g)
    for (a, b), p in c.items():
        if syms[b]["kind"] == "class" and b + ".__init__" in syms:
            assert (a, b + ".__init__") in c, (a, b)
        if p["resolved"] == "init":
            assert (a, b.rsplit(".", 1)[0]) in c, (a, b)
    # 4. receiver returned by make_widget()
    assert ("widgets.show", "widgets.Widget.render") in c
    # 5. no cross-talk between the two `render` methods
    for a, b in c:
        if syms[a]["file"] == "widgets.py":
            assert b != "decoy.Gadget.render", (a, b)
    assert ("decoy.unrelated", "widgets.Widget.render") not in c
    # 6.
    assert ("decoy.unrelated", "decoy.Gadget.render") in c
    # `item.render()` in _draw_one: ``item`` holds what draw() passes, the Widgets of
    # ``self.items`` (parameter values, issue 14), never the same-named Gadget.render
    assert {b for a, b in c if a == "widgets.Panel._draw_one"} & {"widgets.Widget.render", "decoy.Gadget.render"} \
        == {"widgets.Widget.render"}
    assert c[("widgets.Panel._draw_one", "widgets.Widget.render")]["resolved"] == "param"


# -- 007 decorators -------------------------------------------------------------------------------
def test_007_decorators(index_case):
    done = index_case("007")
    g = done.graph
    assert_sane(done)
    syms = symbols(g)
    for q, line in [("service.lookup", 12), ("service.Account.fetch", 18),
                    ("service.Account.build", 22), ("service.Account.name", 26)]:
        assert q in syms, q
        assert syms[q]["line"] == line, (q, syms[q]["line"])
    svc = file_symbols(g, "service.py")
    assert not {"wrapper", "deco"} & set(svc)
    c = calls(g)
    for edge in [("service.Account.fetch", "service.lookup"), ("service.main", "service.Account.fetch"),
                 ("service.main", "service.Account.build"),
                 ("service.lookup", "service.normalise"), ("service.Account.name", "service.normalise")]:
        assert edge in c, edge
    assert not [e for e in c if e[1] == "tracing.trace.deco.wrapper" and e[0].startswith("service")]
    # 4. both decoration sites, attributed to the decorated functions
    assert c[("service.lookup", "tracing.trace")]["lines"] == [10]
    assert c[("service.Account.fetch", "tracing.trace")]["lines"] == [17]
    assert impact(g, "tracing.py") == {"service.py": 1}
    # SHOULD: functools is a package, not a File
    assert not {p for p in files(g) if "functools" in p}
    pk = rows(g, "MATCH (:File {path: 'service.py'})-[:USES_PACKAGE]->(p:Package) RETURN p.name, p.stdlib")
    assert ["functools", True] in pk


# -- 008 partial, lambdas, callables in attributes/dicts ----------------------------------------
def test_008_callbacks_partial_lambda(index_case):
    done = index_case("008")
    assert done.report.parse_errors == {}
    g = done.graph
    assert_sane(done)
    syms = symbols(g)
    for q in ("notify.default_sink", "notify.send", "notify.score", "notify.on_alpha", "notify.Dispatcher",
              "notify.Dispatcher.__init__", "notify.Dispatcher.emit", "notify.main"):
        assert q in syms, q
    for q, p in syms.items():
        if p["name"] == "<lambda>" or "<lambda>" in q:
            assert q.startswith("notify.main."), q
    c = calls(g)
    assert ("notify.main", "notify.score") in c
    assert ("notify.main", "notify.Dispatcher") in c or ("notify.main", "notify.Dispatcher.__init__") in c
    assert ("notify.main", "notify.Dispatcher.emit") in c
    # 4. partial(send, "ops") reaches send; nothing named send_ops or partial as a fake target
    assert ("notify.main", "notify.send") in c
    for a, b in c:
        assert syms[b]["name"] not in ("send_ops", "partial"), (a, b)
    assert not [q for q, p in syms.items() if p["name"] == "partial"]
    assert not {p for p in files(g) if "partial" in p or "functools" in p}
    # SHOULD 5. / 6.
    assert ("notify.Dispatcher.emit", "notify.default_sink") in c
    assert ("notify.main", "notify.on_alpha") in c
    assert {b for a, b in c if a == "notify.Dispatcher.emit"} <= {"notify.default_sink"}


# -- 019 symlink loops --------------------------------------------------------------------------
def test_019_symlink_loops(index_case):
    t0 = time.perf_counter()
    done = index_case("019")
    print(f"019: indexed in {time.perf_counter() - t0:.2f} s")
    g = done.graph
    fs = files(g)
    base = {"main.py", "foo/__init__.py", "foo/it.py", "bar/__init__.py", "bar/other.py"}
    vendor_real = {"real_vendor/__init__.py", "real_vendor/helper.py"}
    vendor_link = {"vendor_link/__init__.py", "vendor_link/helper.py"}
    assert fs in (base | vendor_real, base | vendor_link), sorted(fs)
    for p in fs:
        parts = p.split("/")
        assert not {"lib", "self", "outside", "up", "dangling"} & set(parts), p
        assert "foo/bar" not in p and "bar/foo" not in p, p
    assert_sane(done)
    assert impact(g, "foo/it.py") == {"bar/other.py": 1, "main.py": 1}
    helper = ({"real_vendor/helper.py", "vendor_link/helper.py"} & fs).pop()
    assert imports_out(g, "main.py") >= {helper}
    helpers = rows(g, "MATCH (:File {path: 'main.py'})-[:IMPORTS]->(h:File) WHERE h.path ENDS WITH '/helper.py' "
                      "RETURN h.path")
    assert helpers == [[helper]]


# -- 020 syntax error mid-edit --------------------------------------------------------------------
def test_020_syntax_error_mid_edit(index_case, case_dir):
    edits = case_dir("020") / "edits"
    done = index_case("020")
    g, ix = done.graph, done.ix
    inv = done.ws / "inventory.py"

    def shop_intact():
        assert imports_out(g, "shop.py") == {"inventory.py"}
        c = calls(g)
        assert ("shop.sell", "inventory.remove") in c
        assert ("shop.sell", "inventory.report") in c
        assert impact(g, "inventory.py") == {"shop.py": 1}

    # step 1
    syms = file_symbols(g, "inventory.py")
    syms.pop("STOCK", None)
    assert syms == {"add": 4, "remove": 8, "report": 12}
    shop_intact()
    assert_sane(done)

    # step 2: broken file keeps its last good graph, the error is reported
    overwrite(inv, (edits / "1-broken-inventory.py").read_bytes())
    rep = ix.reindex_file(inv)
    # expected.md: "'(' was never closed", line 12 (the broken `def restock(item, qty:`).
    # CPython 3.11-3.13 report the same message at line 13 (the inner `add(item, qty`, also
    # never closed); either line is the diagnostic of this edit.
    err = rep.parse_errors.get("inventory.py")
    assert err and "was never closed" in err, rep.parse_errors
    assert re.match(r"line 1[23]\b", err), err
    assert file_props(g, "inventory.py").get("parse_error") == err
    syms = file_symbols(g, "inventory.py")
    syms.pop("STOCK", None)
    assert syms == {"add": 4, "remove": 8, "report": 12}
    assert "inventory.restock" not in symbols(g)
    shop_intact()
    assert_sane(done)

    # step 3: fixed file
    overwrite(inv, (edits / "2-fixed-inventory.py").read_bytes())
    rep = ix.reindex_file(inv)
    assert rep.parse_errors == {}
    assert not file_props(g, "inventory.py").get("parse_error")
    syms = file_symbols(g, "inventory.py")
    syms.pop("STOCK", None)
    assert syms == {"add": 4, "remove": 8, "restock": 12, "report": 16}
    assert ("inventory.restock", "inventory.add") in calls(g)
    assert rows(g, "MATCH (s:Symbol {name: 'report'}) RETURN s.line") == [[16]]
    shop_intact()
    assert_sane(done)


# -- 021 huge, generated, minified, binary -----------------------------------------------------
def test_021_huge_generated_minified_binary(index_case, caplog):
    t0 = time.perf_counter()
    with caplog.at_level(logging.INFO, logger="orbit_lsp"):
        done = index_case("021")
    # 4. binary files: no crash, no error in the log (a skip with a reason is fine)
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert {p for p, _ in done.report.skipped} >= {"dist/app.min.js", "assets/logo.py", "assets/blob.js"} - files(
        done.graph)
    print(f"021: indexed in {time.perf_counter() - t0:.2f} s")
    g = done.graph
    assert_sane(done)
    big = "gen/big_table.py"
    # 2. indexed all-or-nothing
    assert file_props(g, big)["lines"] == 50000
    bt = file_symbols(g, big)
    assert bt["TABLE"] == 2 and bt["lookup"] == 49999
    assert impact(g, big) == {"app.py": 1}
    assert ("app.price", "gen.big_table.lookup") in calls(g)
    # no node/edge property holds file text
    for s in property_strings(g):
        assert len(s) < 1000, s[:80]
        for frag in ("'k00000'", "GENERATED FILE", "TABLE.get", "function a(t)", "return t+", "PNG"):
            assert frag not in s, (frag, s[:80])
    # 3. / 4. no symbols from the minified or binary files; < 50 symbols besides big_table's
    per_file = dict(rows(g, "MATCH (s:Symbol) RETURN s.file, count(s)"))
    for p in ("dist/app.min.js", "assets/logo.py", "assets/blob.js"):
        assert per_file.get(p, 0) == 0, p
    assert sum(n for p, n in per_file.items() if p != big) < 50
    # 6. page.js still indexed (JS symbols come with the JS extractor)
    assert file_props(g, "page.js")["lang"] in ("javascript", "js")


# -- 024 .env never read ----------------------------------------------------------------------------
_opened: list[str] | None = None


def _audit(event, args):
    if _opened is not None and event == "open" and args:
        p = args[0]
        if isinstance(p, (str, bytes, os.PathLike)):
            _opened.append(os.fsdecode(p))


_hook_installed = False


def test_024_dotenv_never_read(index_case):
    global _opened, _hook_installed
    if not _hook_installed:
        sys.addaudithook(_audit)  # cannot be removed; inert while _opened is None
        _hook_installed = True
    _opened = []
    try:
        done = index_case("024")
        ws = done.ws
        # watch events and a didSave while recording
        done.ix.reindex_file(ws / ".env")
        done.ix.reindex_file(ws / "notes.txt")
        done.ix.reindex_file(ws / "services/billing/settings.cfg")
        cfg = ws / "config.py"
        overwrite(cfg, cfg.read_bytes() + b"\n\ndef extra():\n    return settings()\n")
        done.ix.reindex_file(cfg)
        opened = list(_opened)
    finally:
        _opened = None
    # 1. (audit-hook form) no .env file and no symlink to one was opened
    secret_files = {os.path.realpath(ws / p) for p in
                    (".env", ".env.local", ".env.production", ".env.example", "services/billing/.env")}
    links = {str(ws / "notes.txt"), str(ws / "services/billing/settings.cfg")}
    bad = []
    for p in opened:
        full = p if os.path.isabs(p) else os.path.join(os.getcwd(), p)
        base = os.path.basename(full)
        if (base == ".env" or base.startswith(".env.") or os.path.realpath(full) in secret_files
                or os.path.abspath(full) in links):
            bad.append(p)
    assert not bad, f"opened: {bad}"
    assert any(p.endswith("config.py") for p in opened), "audit hook recorded nothing"

    g = done.graph
    assert_sane(done)
    # 2. no File for .env*, notes.txt, settings.cfg
    for p in files(g):
        base = p.rsplit("/", 1)[-1]
        assert base != ".env" and not base.startswith(".env."), p
        assert base not in ("notes.txt", "settings.cfg"), p
    # 3. canary nowhere
    for s in property_strings(g):
        assert "orbitcanary" not in s.lower(), s
    # 5. normal code indexed (JS symbols come later: app.js has a File node)
    syms = symbols(g)
    assert "config.settings" in syms and "services.billing.client.token" in syms
    assert "app.js" in files(g)
    assert impact(g, "config.py") == {"services/billing/client.py": 1}


# -- 025 secret strings in source ---------------------------------------------------------------
SECRET_FRAGMENTS_025 = ("ORBITFAKE", "sk-proj-ORBIT", "AKIAORBI", "xoxb-0000", "BEGIN PRIVATE KEY", "MIIEvQIB",
                        "ghp_ORBI", "glpat-ORBI", "hunter2", "sk_live_ORBI", "rk_live_ORBI", "Bearer")


def test_025_secret_string_in_source(index_case):
    done = index_case("025")
    g = done.graph
    assert_sane(done)
    syms = symbols(g)
    assert syms["settings.connect"]["line"] == 10
    assert "client.headers" in syms
    assert "web/pay.js" in files(g)  # JS symbols come with the JS extractor
    assert impact(g, "settings.py") == {"client.py": 1}
    assert ("client.headers", "settings.connect") in calls(g)
    # 2. no secret (or its first characters) in any node or edge property
    for s in property_strings(g):
        for frag in SECRET_FRAGMENTS_025:
            assert frag.lower() not in s.lower(), (frag, s)


# -- 033 escaping of paths and identifiers ----------------------------------------------------
PATHS_033 = ["app/routes/users.$id.tsx", "app/routes/${env}.ts", "src/it's.py", "src/back\\slash.py",
             "src/café_🚀.py", "src/tick`name.js"]
NEWLINE_033 = "src/new\nline.py"


def _add_newline_file(case_dir):
    def prepare(ws: Path) -> None:
        make_writable(ws / "src")
        subprocess.run(["sh", str(case_dir("033") / "make_newline_file.sh"), str(ws)], check=True,
                       capture_output=True)
    return prepare


def test_033_graph_write_escaping(index_case, caplog):
    with caplog.at_level(logging.INFO, logger="orbit_lsp"):
        done = index_case("033")
    # 1. no Cypher (or any) error in the log
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    g = done.graph
    assert done.report.parse_errors == {}
    assert_sane(done)
    assert files(g) == set(PATHS_033)
    for p in PATHS_033:
        assert rows(g, "MATCH (f:File {path: $p}) RETURN f.path", p=p) == [[p]], p
    cafe = file_symbols(g, "src/café_🚀.py")
    assert cafe == {"launch": 1, "λ_rate": 5, "find_rocket": 9}
    assert "ﬁnd_rocket" not in {p["name"] for p in symbols(g).values()}
    assert "quoted" in file_symbols(g, "src/it's.py")
    assert "slashed" in file_symbols(g, "src/back\\slash.py")
    c = calls(g)
    pairs = {(symbols(g)[a]["name"], symbols(g)[b]["name"], symbols(g)[a]["file"]) for a, b in c}
    assert ("find_rocket", "launch", "src/café_🚀.py") in pairs
    # 5. didSave of src/it's.py after an edit: one File node, new content indexed
    its = done.ws / "src/it's.py"
    overwrite(its, its.read_bytes() + b"\n\ndef again():\n    return quoted()\n")
    done.ix.reindex_file(its)
    assert rows(g, "MATCH (f:File {path: $p}) RETURN count(f)", p="src/it's.py") == [[1]]
    assert file_symbols(g, "src/it's.py") == {"quoted": 1, "again": 5}
    assert files(g) == set(PATHS_033)
    assert_sane(done)


def test_033_newline_file_name(index_case, case_dir):
    done = index_case("033", prepare=_add_newline_file(case_dir))
    g = done.graph
    assert_sane(done)
    assert files(g) == set(PATHS_033) | {NEWLINE_033}
    for p in PATHS_033 + [NEWLINE_033]:
        assert rows(g, "MATCH (f:File {path: $p}) RETURN f.path", p=p) == [[p]], repr(p)
    assert file_symbols(g, NEWLINE_033) == {"nl": 1}
    nl = done.ws / NEWLINE_033
    overwrite(nl, b"def nl():\n    return 2\n\n\ndef nl2():\n    return nl()\n")
    done.ix.reindex_file(nl)
    assert rows(g, "MATCH (f:File {path: $p}) RETURN count(f)", p=NEWLINE_033) == [[1]]
    assert file_symbols(g, NEWLINE_033) == {"nl": 1, "nl2": 5}
    assert files(g) == set(PATHS_033) | {NEWLINE_033}
    assert_sane(done)


# -- 034 bulk index ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_034_bulk_index(index_case):
    t0 = time.perf_counter()
    done = index_case("034")
    print(f"\n034: full index {time.perf_counter() - t0:.2f} s (indexer: {done.report.seconds:.2f} s, "
          f"timings {({k: round(v, 2) for k, v in done.report.timings.items()})})")
    g = done.graph
    assert rows(g, "MATCH (f:File) RETURN count(f)") == [[10_100]]
    assert rows(g, "MATCH (s:Symbol {kind: 'function'}) RETURN count(s)") == [[20_000]]
    assert rows(g, "MATCH (:File)-[e:IMPORTS]->(:File) RETURN count(e)") == [[9_900]]
    assert impact(g, "pkg000/m000.py") == {"pkg000/m001.py": 1, "pkg000/m002.py": 2,
                                           "pkg000/m003.py": 3, "pkg000/m004.py": 4}
    idx = {(label, p) for label, props in rows(g, "CALL db.indexes() YIELD label, properties "
                                                  "RETURN label, properties") for p in props}
    assert {("File", "path"), ("Symbol", "qual"), ("Package", "name")} <= idx
    # 5. index creation is idempotent
    ensure_indexes(g)
    # 4. benchmark: re-index of one file (recorded, not asserted)
    m = done.ws / "pkg042/m050.py"
    overwrite(m, m.read_bytes() + b"\n\ndef h050():\n    return g050()\n")
    t = time.perf_counter()
    rep = done.ix.reindex_file(m)
    dt = time.perf_counter() - t
    print(f"034: re-index of pkg042/m050.py {dt * 1000:.0f} ms (mode {rep.mode}, timings "
          f"{({k: round(v * 1000, 1) for k, v in rep.timings.items()})} ms)")
    assert rows(g, "MATCH (f:File) RETURN count(f)") == [[10_100]]
    assert rows(g, "MATCH (s:Symbol {kind: 'function'}) RETURN count(s)") == [[20_001]]
    assert ("pkg042.m050.h050", "pkg042.m050.g050") in {
        (a, b) for a, b in rows(g, "MATCH (a:Symbol {file: $f})-[:CALLS]->(b:Symbol) RETURN a.qual, b.qual",
                                f="pkg042/m050.py")}
    assert impact(g, "pkg042/m050.py") == {"pkg042/m051.py": 1, "pkg042/m052.py": 2,
                                           "pkg042/m053.py": 3, "pkg042/m054.py": 4}
