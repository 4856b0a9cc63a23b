"""Shared JS/TS failure cases (``/work/shared/cases`` 010, 011, 012, 014, 015, 016), asserted
against the values in each case's ``expected.md``, plus the incremental path for JS/TS files.

Conventions of the graph as built (see ``orbit_lsp/index/javascript.py``): ``Symbol.qual`` of a
JS/TS symbol is ``path#name`` (``src/core.ts#area``, ``Cart.add`` for a method); a file has a
``module`` Symbol (qual = its path) only when it makes calls at module level; Node built-ins are
``Package`` nodes named ``node:<name>`` with ``stdlib: true``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_cases_python import (  # noqa: F401 - index_case is a fixture
    assert_sane, calls, file_props, file_symbols, files, impact, imports_out, index_case, rows, symbols,
)


def packages_of(g, path: str) -> set[str]:
    return {n for (n,) in rows(g, "MATCH (:File {path: $p})-[:USES_PACKAGE]->(k:Package) RETURN k.name", p=path)}


def package_names(g) -> set[str]:
    return {n for (n,) in rows(g, "MATCH (k:Package) RETURN k.name")}


def assert_calls_defined(g) -> None:
    """No CALLS edge points at a Symbol without a DEFINES edge (016 MUST 5, every case)."""
    bad = rows(g, "MATCH (:Symbol)-[:CALLS]->(b:Symbol) WHERE NOT ()-[:DEFINES]->(b) RETURN b.qual")
    assert not bad, bad


# -- 010 directory imports through index.ts -------------------------------------------------------
def test_010_index_directory_import(index_case):
    done = index_case("010")
    g = done.graph
    assert_sane(done)
    assert imports_out(g, "src/pages/home.ts") == {"src/store/mp/index.ts", "src/store/cart.ts"}  # 1
    assert imports_out(g, "src/pages/settings.ts") == {"src/store/mp/index.ts", "src/store/cart/index.ts"}  # 2
    assert imports_out(g, "src/store/mp/index.ts") == {"src/store/mp/state.ts"}  # 3
    assert impact(g, "src/store/mp/state.ts") == {"src/store/mp/index.ts": 1, "src/pages/home.ts": 2,  # 4
                                                  "src/pages/settings.ts": 2}
    assert impact(g, "src/store/cart.ts") == {"src/pages/home.ts": 1}  # 5
    assert impact(g, "src/store/cart/index.ts") == {"src/pages/settings.ts": 1}
    assert not files(g) & {"src/store/mp.ts", "src/store/mp", "src/store/mp/.ts"}  # 6
    c = calls(g)  # 7
    assert c[("src/pages/home.ts#render", "src/store/mp/index.ts#useMp")]["resolved"] == "import"
    assert ("src/pages/home.ts#render", "src/store/cart.ts#cartSize") in c
    assert ("src/pages/home.ts#render", "src/store/cart/index.ts#cartSize") not in c
    assert ("src/pages/settings.ts#settings", "src/store/cart/index.ts#cartSize") in c
    assert_calls_defined(g)
    assert symbols(g)["src/store/mp/index.ts#useMp"]["line"] == 3


# -- 011 baseUrl bare imports ------------------------------------------------------------------
def _check_011(done) -> None:
    g = done.graph
    assert_sane(done)
    assert imports_out(g, "main.ts") == {"utils/index.ts", "features/report/build.ts"}  # 1
    assert imports_out(g, "features/report/build.ts") == {"utils/index.ts"}  # 2
    assert imports_out(g, "utils/index.ts") == {"utils/shout.ts"}  # 3
    assert impact(g, "utils/shout.ts") == {"utils/index.ts": 1, "main.ts": 2, "features/report/build.ts": 2}  # 4
    assert packages_of(g, "main.ts") == {"lodash"}  # 5
    assert not files(g) & {"lodash.ts", "lodash/chunk.ts", "utils.ts"}
    assert not package_names(g) & {"utils", "features", "lodash/chunk"}
    c = calls(g)  # through the export * barrel to the defining file
    assert ("features/report/build.ts#buildReport", "utils/shout.ts#shout") in c
    assert ("main.ts", "utils/shout.ts#shout") in c  # module-level call: the module symbol
    assert_calls_defined(g)


def test_011_baseurl_bare_import(index_case):
    _check_011(index_case("011"))


def _set_base_url(value):
    def prepare(ws: Path) -> None:
        p = ws / "tsconfig.json"
        cfg = json.loads(p.read_text())
        cfg["compilerOptions"]["baseUrl"] = value if value is not None else str(ws.resolve())
        p.chmod(0o644)
        p.write_text(json.dumps(cfg))
    return prepare


@pytest.mark.parametrize("base_url", ["./", None])  # None: the absolute path of the same directory
def test_011_should_base_url_spellings(index_case, base_url):
    _check_011(index_case("011", _set_base_url(base_url)))


# -- 012 paths aliases from an extends-ed JSONC config --------------------------------------------
def test_012_paths_alias(index_case):
    done = index_case("012")
    g = done.graph
    assert_sane(done)
    assert imports_out(g, "src/app/user.ts") == {"src/types/Pick2.ts", "src/core/log.ts"}  # 1
    assert imports_out(g, "src/app/index.ts") == {"src/app/user.ts"}  # 2
    assert impact(g, "src/core/log.ts") == {"src/app/user.ts": 1, "src/app/index.ts": 2}  # 3
    assert impact(g, "src/types/Pick2.ts") == {"src/app/user.ts": 1, "src/app/index.ts": 2}  # 4
    assert packages_of(g, "src/app/user.ts") == {"@acme/schema"}  # 5
    assert not package_names(g) & {"~", "~/types/Pick2", "@core", "@core/log", "@acme"}
    assert not {p for p in files(g) if p.startswith(("config/src/", "src/src/"))}
    # 6. the JSONC base config neither failed indexing nor lost the aliases (edges above), and
    # no unresolved import is reported
    assert all(not file_props(g, p).get("unresolved_imports") for p in files(g))
    c = calls(g)
    assert ("src/app/user.ts#publicUser", "src/core/log.ts#log") in c
    assert ("src/app/index.ts", "src/app/user.ts#publicUser") in c
    assert_calls_defined(g)


# -- 014 CommonJS require ----------------------------------------------------------------------
def test_014_commonjs_require(index_case):
    done = index_case("014")
    g = done.graph
    assert_sane(done)
    assert imports_out(g, "app.js") >= {"ser.js", "fmt.js", "lib/index.js"}  # 1
    assert imports_out(g, "app.js") - {"ser.js", "fmt.js", "lib/index.js"} <= {"config.json"}
    assert "config.json" not in {s["file"] for s in symbols(g).values()}
    assert imports_out(g, "lib/index.js") == {"fmt.js"}  # 2
    assert impact(g, "fmt.js") == {"app.js": 1, "lib/index.js": 1}  # 3
    assert impact(g, "ser.js") == {"app.js": 1}
    assert file_symbols(g, "ser.js") == {"serialize": 2}  # 4
    assert file_symbols(g, "fmt.js") == {"fmt": 1, "pad": 4}
    c = calls(g)  # 5
    assert c[("app.js#main", "ser.js#serialize")]["resolved"] == "import"
    assert ("app.js#main", "fmt.js#fmt") in c
    assert ("app.js#main", "fmt.js#pad") in c
    assert ("app.js#main", "lib/index.js#banner") in c
    assert ("lib/index.js#banner", "fmt.js#fmt") in c
    # 6. lodash by package name; path is a Node built-in, never a File
    assert packages_of(g, "app.js") == {"lodash", "node:path"}
    assert rows(g, "MATCH (k:Package {name: 'node:path'}) RETURN k.stdlib") == [[True]]
    assert rows(g, "MATCH (k:Package {name: 'lodash'}) RETURN k.stdlib, k.dist") == [[False, "lodash"]]
    assert not files(g) & {"path", "path.js", "lodash/chunk.js"}
    # every call in main is bound: nothing is left unresolved
    assert symbols(g)["app.js#main"]["unresolved_calls"] == 0
    assert_calls_defined(g)


# -- 015 dynamic import() --------------------------------------------------------------------------
def test_015_dynamic_import(index_case):
    done = index_case("015")
    g = done.graph
    assert_sane(done)
    assert imports_out(g, "b.js") == {"c.js"}  # 1 (and 3: no edge for the substituted template)
    assert imports_out(g, "router.js") == {"pages/Settings.js", "locales/en.js"}  # 2
    assert not [p for p in files(g) if "${" in p]  # 3
    assert not done.report.parse_errors
    assert imports_out(g, "c.js") == {"b.js"}  # 4
    assert impact(g, "c.js") == {"b.js": 1}
    assert impact(g, "b.js") == {"c.js": 1}
    assert impact(g, "pages/Settings.js") == {"router.js": 1}  # 5
    c = calls(g)  # SHOULD: m.leaf() on the module namespace of the dynamic import
    assert c[("b.js#loadLeaf", "c.js#leaf")]["resolved"] == "module"
    assert_calls_defined(g)


# -- 016 export * barrels ----------------------------------------------------------------------
def test_016_export_star_barrel(index_case):
    done = index_case("016")
    g = done.graph
    assert_sane(done)
    edges = {tuple(r) for r in rows(g, "MATCH (a:File)-[:IMPORTS]->(b:File) RETURN a.path, b.path")}
    assert edges == {("src/barrel.ts", "src/core.ts"), ("src/outer.ts", "src/barrel.ts"),  # 1
                     ("src/consumer.ts", "src/barrel.ts"), ("src/far.ts", "src/outer.ts"),
                     ("src/star/one.ts", "src/star/two.ts"), ("src/star/two.ts", "src/star/one.ts"),
                     ("src/star/use.ts", "src/star/one.ts")}
    assert impact(g, "src/core.ts") == {"src/barrel.ts": 1, "src/consumer.ts": 2, "src/outer.ts": 2,  # 2
                                        "src/far.ts": 3}
    assert impact(g, "src/star/two.ts") == {"src/star/one.ts": 1, "src/star/use.ts": 2}  # 3
    # 4. callers of the core symbols through the barrel, never a phantom barrel symbol
    callers = {}
    for a, b in rows(g, "MATCH (a:Symbol)-[:CALLS]->(b:Symbol) RETURN a.qual, b.qual"):
        callers.setdefault(b, set()).add(a)
    assert callers["src/core.ts#area"] == {"src/consumer.ts#size", "src/far.ts#twice"}
    assert callers["src/core.ts#perimeter"] == {"src/consumer.ts#edge"}
    assert "src/consumer.ts" in impact(g, "src/core.ts")  # Shape: a type use, seen file-level
    assert symbols(g)["src/core.ts#Shape"]["kind"] == "interface"
    # 5. barrels define nothing; no CALLS into an undefined Symbol
    assert file_symbols(g, "src/barrel.ts", include_module=True) == {}
    assert file_symbols(g, "src/outer.ts", include_module=True) == {}
    assert not [q for q in symbols(g) if q.startswith(("src/barrel.ts", "src/outer.ts"))]
    assert_calls_defined(g)


# -- 021 (the JS part): minified bundle and binary .js skipped, page.js indexed normally ------------
def test_021_js_files(index_case):
    done = index_case("021")
    g = done.graph
    skipped = dict(done.report.skipped)
    assert skipped["dist/app.min.js"] == "minified" and skipped["assets/blob.js"] == "binary"
    assert not files(g) & {"dist/app.min.js", "assets/blob.js"}
    assert file_symbols(g, "page.js") == {"hello": 1}  # 6.
    assert symbols(g)["page.js#hello"]["kind"] == "function"
