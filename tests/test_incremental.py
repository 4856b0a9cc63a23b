"""Incremental indexing must equal a full rebuild.

A hypothesis property test generates small Python workspaces (a package ``pkg`` with a few
modules, ``pkg/__init__.py`` and a top-level ``main.py``) from a vocabulary of constructs that
create cross-file structure, applies a random sequence of edits through
``WorkspaceIndexer.reindex_file`` / ``remove_file``, and compares ``export()`` of the incremental
graph with the export of a fresh index of a copy of the same files. Deterministic tests cover the
common edits one by one.

Every example makes its own temporary workspaces (hypothesis runs many examples per test
function, function-scoped fixtures are not reset between them) and deletes its graphs and cache
files afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from orbit_lsp.graph.queries import export
from orbit_lsp.graph.schema import UNBOUND_MARKER
from orbit_lsp.index.indexer import WorkspaceIndexer

MODS = ["a", "b", "c", "d"]
FUNCS = ["f", "g", "h"]
CLASSES = ["K", "L"]
METHODS = ["m", "n"]
NAMES = FUNCS + CLASSES
BROKEN = "\ndef broken(:\n    pass\n"
ALL_FILES = ["pkg/__init__.py", "main.py"] + [f"pkg/{m}.py" for m in MODS] + ["pkg/sub/e.py"]


# -- helpers -----------------------------------------------------------------------------------
def write(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def files_of(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*.py"))}


@contextlib.contextmanager
def workspaces():
    """Yields a factory of temporary workspace dirs; removes them, their graphs and cache files."""
    dirs: list[Path] = []
    indexers: list[WorkspaceIndexer] = []

    def make() -> Path:
        d = Path(tempfile.mkdtemp(prefix="orbit-inc-"))
        dirs.append(d)
        return d

    make.indexers = indexers  # type: ignore[attr-defined]
    try:
        yield make
    finally:
        for ix in indexers:
            with contextlib.suppress(Exception):
                ix.graph.delete()
            with contextlib.suppress(OSError):
                ix.cache_path.unlink()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


VALUE_FLOW = [False]  # parameter values from call sites (``Settings.value_flow``) for the indexers below


def new_indexer(make, root: Path, store) -> WorkspaceIndexer:
    settings = store.settings.model_copy(update={"value_flow": VALUE_FLOW[0]})
    ix = WorkspaceIndexer(root, store, settings)
    make.indexers.append(ix)
    return ix


def rebuild_export(make, root: Path, store) -> dict:
    """Export of a fresh index of a copy of ``root`` (another path, so another graph)."""
    copy = make() / "ws"
    shutil.copytree(root, copy)
    ix = new_indexer(make, copy, store)
    rep = ix.index_all()
    assert rep.mode == "full"
    assert not rep.parse_errors
    return export(ix.graph)


def diff_exports(inc: dict, full: dict) -> str:
    """Human-readable difference of two exports (for assertion messages)."""
    out = []
    for part in ("files", "symbols", "packages", "unbound_names", "edges"):
        a = [repr(x) for x in inc[part]]
        b = [repr(x) for x in full[part]]
        only_inc = [x for x in a if x not in b]
        only_full = [x for x in b if x not in a]
        for x in only_inc:
            out.append(f"  {part} only in incremental: {x}")
        for x in only_full:
            out.append(f"  {part} only in rebuild:     {x}")
    return "\n".join(out)


def recounted_unbound_names(exported: dict) -> list[dict]:
    """The ``UnboundName`` nodes an export should have, counted from its symbols as the queries
    count them without those nodes: per name, the symbols whose ``unresolved_names`` hold it,
    and the sites (``"name@line"``) of each that start with it, a symbol without sites counting
    one; plus the marker node (``schema.UNBOUND_MARKER``)."""
    counts: dict[str, list[int]] = {}
    for s in exported["symbols"]:
        for n in s.get("unresolved_names") or []:
            k = len([x for x in s.get("unresolved_sites") or [] if x.startswith(n + "@")])
            c = counts.setdefault(n, [0, 0])
            c[0] += 1
            c[1] += k if k else 1
    rows = [{"name": UNBOUND_MARKER, "symbols": 0, "sites": 0}] + [{"name": n, "symbols": a, "sites": b} for n, (a, b) in counts.items()]
    return sorted(rows, key=lambda d: sorted((k, repr(v)) for k, v in d.items()))


def assert_same(ix: WorkspaceIndexer, make, store, context: str = "") -> dict:
    inc = export(ix.graph)
    full = rebuild_export(make, ix.root, store)
    if inc != full:
        raise AssertionError(f"incremental graph != rebuild {context}\n{diff_exports(inc, full)}")
    assert inc["unbound_names"] == recounted_unbound_names(inc), context
    return inc


# -- generators ----------------------------------------------------------------------------------
@st.composite
def import_line(draw, rel: str) -> str:
    m = draw(st.sampled_from(MODS))
    n = draw(st.sampled_from(NAMES))
    choices = [
        f"from pkg.{m} import {n}",
        f"from pkg.{m} import {n} as {n}{n}",
        f"import pkg.{m} as {m.upper()}",
        f"import pkg.{m}",
        f"from pkg import {m}",
        f"from pkg import {n}",
        f"from pkg.sub.e import {n}",
        "import pkg.sub.e as E",
        "import os",
        "import requests",
        "from pkg.nothere import zz",
    ]
    if rel.startswith("pkg/sub/"):
        choices += [f"from .. import {m}", f"from ..{m} import {n}", "from . import e"]
    elif rel.startswith("pkg/"):
        choices += [f"from . import {m}", f"from .{m} import {n}", f"from .{m} import {n} as {n}{n}",
                    f"from .sub.e import {n}", "from .missing import zz"]
    # star imports (cycles of them included: see test_star_import_cycle)
    choices.append(f"from pkg.{m} import *")
    if rel.startswith("pkg/") and not rel.startswith("pkg/sub/"):
        choices.append(f"from .{m} import *")
    return draw(st.sampled_from(choices))


@st.composite
def call_expr(draw, in_method: bool) -> str:
    m = draw(st.sampled_from(MODS))
    n = draw(st.sampled_from(NAMES))
    meth = draw(st.sampled_from(METHODS))
    n2 = draw(st.sampled_from(NAMES))
    choices = [f"{n}()", f"{n}{n}()", f"{m.upper()}.{n}()", f"{m}.{n}()", f"pkg.{m}.{n}()", f"E.{n}()",
               f"e.{n}()", f"{n}().{meth}()", "missing()", "os.path.join('x')", f"v.{meth}()",
               f"K.{meth}(v)",
               # values flowing between files: functions, classes and instances as arguments,
               # containers of them, results of calls
               f"{n}({n2})", f"{n}(cb={n2})", f"{m}.{n}({n2}())", f"{n}([{n2}])", f"REG.append({n2})",
               f"{n}()()", "REG[0]()", f"{n}(v)"]
    if in_method:
        choices += [f"self.{meth}()", f"super().{meth}()", "self.x.m()", f"type(self).{meth}()"]
    return draw(st.sampled_from(choices))


@st.composite
def body(draw, indent: str, in_method: bool) -> list[str]:
    calls = draw(st.lists(call_expr(in_method), min_size=0, max_size=3))
    lines = [indent + c for c in calls]
    if draw(st.booleans()):
        lines.append(indent + "return " + draw(st.sampled_from(NAMES + [c + "()" for c in CLASSES])))
    return lines or [indent + "pass"]


@st.composite
def function_def(draw) -> list[str]:
    name = draw(st.sampled_from(FUNCS))
    deco = draw(st.sampled_from([[], [], ["@f"], [f"@{draw(st.sampled_from(MODS))}.g"]]))
    if draw(st.booleans()):
        # a parameter: what it holds comes from call sites in any file
        meth = draw(st.sampled_from(METHODS))
        uses = draw(st.lists(st.sampled_from(["cb()", f"cb.{meth}()", "cb()()", "for h in cb:\n        h()",
                                              "REG.append(cb)", "return cb"]), min_size=1, max_size=2))
        return deco + [f"def {name}(cb=None):"] + ["    " + u for u in uses]
    return deco + [f"def {name}():"] + draw(body("    ", False))


@st.composite
def class_def(draw) -> list[str]:
    name = draw(st.sampled_from(CLASSES))
    m = draw(st.sampled_from(MODS))
    base = draw(st.sampled_from(["", "K", "L", f"{m.upper()}.K", f"{m}.L", "E.K", "object", "Missing"]))
    lines = [f"class {name}({base}):" if base else f"class {name}:"]
    methods = draw(st.lists(st.sampled_from(METHODS + ["__init__"]), min_size=0, max_size=3))
    for meth in methods:
        lines.append(f"    def {meth}(self):")
        if meth == "__init__" and draw(st.booleans()):
            lines.append("        self.x = " + draw(st.sampled_from(["K()", "L()", f"{m.upper()}.K()"])))
        lines += draw(body("        ", True))
    if not methods:
        lines.append("    pass")
    return lines


@st.composite
def module_source(draw, rel: str) -> str:
    items = draw(st.lists(st.one_of(
        import_line(rel).map(lambda s: [s]),
        function_def(),
        class_def(),
        call_expr(False).map(lambda s: [s]),
        st.sampled_from(CLASSES).map(lambda c: [f"v = {c}()"]),
        st.sampled_from(NAMES).map(lambda n: [f"{n}{n} = {n}"]),
        st.sampled_from(NAMES).map(lambda n: [f"REG = [{n}]"]),
        st.just(["for h in REG:", "    h()"]),
    ), min_size=0, max_size=6))
    text = "\n".join(line for item in items for line in item) + "\n"
    if draw(st.integers(0, 9)) == 0:  # occasionally a syntax error
        text += BROKEN
    return text


def is_broken(text: str) -> bool:
    try:
        compile(text, "<test>", "exec")
    except SyntaxError:
        return True
    return False


def tweak(text: str, name: str, where: int) -> str:
    """A body-only edit (same interface): a comment line shifts every line below ``where``,
    and a call is added at the top of the first function named ``name``."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        if i == where % max(len(lines), 1):
            out.append("# edited")
        out.append(line)
        stripped = line.lstrip()
        if stripped.startswith(f"def {name}("):
            indent = line[: len(line) - len(stripped)] + "    "
            out.append(indent + "missing()")
            out.append(indent + "f()")
    return "\n".join(out)


def rename(text: str, name: str) -> str:
    """Rename the definitions of ``name`` (not its uses)."""
    return text.replace(f"def {name}(", f"def {name}9(").replace(f"class {name}(", f"class {name}9(") \
        .replace(f"class {name}:", f"class {name}9:")


@st.composite
def initial_workspace(draw) -> dict[str, str]:
    mods = draw(st.lists(st.sampled_from(MODS), min_size=2, max_size=4, unique=True))
    rels = ["pkg/__init__.py", "main.py"] + [f"pkg/{m}.py" for m in sorted(mods)]
    if draw(st.booleans()):
        rels.append("pkg/sub/e.py")
    return {rel: draw(module_source(rel)) for rel in rels}


EDIT_KINDS = ["write", "write", "tweak", "rename", "delete", "break", "touch", "rmdir"]


# -- the property ----------------------------------------------------------------------------
@hsettings(max_examples=int(os.environ.get("ORBIT_HYPOTHESIS_EXAMPLES", "25")), deadline=None, database=None,
           suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_incremental_equals_rebuild_with_parameter_values(store, data):
    """The same property with parameter values from call sites (``value_flow``: the fixpoint,
    its delete-and-re-derive when a flow goes, and the values kept in the cache)."""
    VALUE_FLOW[0] = True
    try:
        _incremental_equals_rebuild(store, data)
    finally:
        VALUE_FLOW[0] = False


@hsettings(max_examples=int(os.environ.get("ORBIT_HYPOTHESIS_EXAMPLES", "25")), deadline=None, database=None,
           suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_incremental_equals_rebuild(store, data):
    _incremental_equals_rebuild(store, data)


def _incremental_equals_rebuild(store, data):
    """Per-file path (``via == "reindex"``): every edit is followed by ``reindex_file`` or
    ``remove_file``, broken intermediate states included. Re-open path (``via == "index_all"``):
    the edits happen on disk while nobody watches, then ``index_all()`` brings the graph up to
    date from the pickled cache (mode "incremental"), once with the broken files and once after
    they are fixed. Both must end equal to a fresh index of the same files."""
    files = data.draw(initial_workspace(), label="initial")
    via = data.draw(st.sampled_from(["reindex", "reindex", "index_all"]), label="via")
    with workspaces() as make:
        root = make() / "ws"
        for rel, text in files.items():
            write(root, rel, text)
        ix = new_indexer(make, root, store)
        assert ix.index_all().mode == "full"
        n_edits = data.draw(st.integers(1, 4), label="n_edits")
        log = [("via", via)]

        def reindex(path: Path, how: str = "reindex_file"):
            if via == "reindex":
                return getattr(ix, how)(path)
            return None

        for _ in range(n_edits):
            kind = data.draw(st.sampled_from(EDIT_KINDS), label="edit")
            rel = data.draw(st.sampled_from(ALL_FILES), label="file")
            path = root / rel
            if kind == "write":
                text = data.draw(module_source(rel), label=f"content of {rel}")
                write(root, rel, text)
                log.append(("write", rel, text))
                reindex(path)
                continue
            if kind == "rmdir":  # a whole directory goes: remove_file(dir)
                sub = root / "pkg/sub"
                if sub.exists():
                    shutil.rmtree(sub)
                    log.append(("rmdir", "pkg/sub"))
                    reindex(sub, "remove_file")
                continue
            if not path.exists():
                continue
            text = path.read_text()
            if kind == "delete":
                path.unlink()
                how = data.draw(st.sampled_from(["remove_file", "reindex_file"]), label="delete via")
                log.append(("delete", rel, how))
                reindex(path, how)
            elif kind == "touch":  # saved again without a change
                log.append(("touch", rel))
                rep = reindex(path)
                assert rep is None or rep.mode == "unchanged"
            elif kind in ("tweak", "rename"):
                name = data.draw(st.sampled_from(NAMES + METHODS), label="name")
                if kind == "tweak":
                    text = tweak(text, name, data.draw(st.integers(0, 30), label="at line"))
                else:
                    text = rename(text, name)
                write(root, rel, text)
                log.append((kind, rel, text))
                reindex(path)
            else:  # break
                if data.draw(st.booleans(), label="rewrite while breaking"):
                    text = data.draw(module_source(rel), label=f"content of {rel}")
                text += BROKEN
                same = path.read_text() == text
                write(root, rel, text)
                log.append(("break", rel, text))
                rep = reindex(path)
                assert rep is None or (rep.mode == "unchanged" if same else rel in rep.parse_errors)
        if via == "index_all":
            rep = ix.index_all()
            assert rep.mode in ("incremental", "unchanged")
        # fix every broken file as the last edits
        for rel, text in sorted(files_of(root).items()):
            if is_broken(text):
                fixed = text.replace(BROKEN, "")
                if is_broken(fixed) or data.draw(st.booleans(), label="fix with new content"):
                    fixed = data.draw(module_source(rel).filter(lambda s: not is_broken(s)),
                                      label=f"fixed content of {rel}")
                write(root, rel, fixed)
                log.append(("fix", rel, fixed))
                rep = reindex(root / rel)
                assert rep is None or not rep.parse_errors
        if via == "index_all":
            rep = ix.index_all()
            assert rep.mode in ("incremental", "unchanged")
            assert not rep.parse_errors
        context = "after edits:\n" + "\n".join(repr(e) for e in log)
        inc = assert_same(ix, make, store, context)

        # re-open: nothing changed on disk since the last re-index, so index_all on the same
        # indexer is "unchanged" (twice), and keeps the graph
        assert ix.index_all().mode == "unchanged"
        assert export(ix.graph) == inc
        assert ix.index_all().mode == "unchanged"
        # a new indexer on the same root reuses the pickled cache
        ix2 = new_indexer(make, root, store)  # the same settings (value flow or not)
        assert ix2.index_all().mode == "unchanged"
        assert export(ix2.graph) == inc


# -- deterministic cases -----------------------------------------------------------------------
def _calls_into(graph, file: str) -> list[tuple]:
    return sorted(tuple(r) for r in graph.query(
        "MATCH (a:Symbol)-[e:CALLS]->(b:Symbol {file: $f}) RETURN a.qual, b.qual, e.resolved",
        {"f": file}).rows)


def _unresolved(graph, qual: str) -> int:
    return graph.query("MATCH (s:Symbol {qual: $q}) RETURN s.unresolved_calls", {"q": qual}).rows[0][0]


BASE_FILES = {
    "pkg/__init__.py": "from .a import f\n",
    "pkg/a.py": "def f():\n    return 1\n\n\ndef g():\n    f()\n",
    "pkg/b.py": "from pkg.a import f, g\nimport pkg.a as A\n\n\ndef caller():\n    f()\n    A.g()\n",
    "main.py": "from pkg import f\nfrom pkg import b\n\n\ndef main():\n    f()\n    b.caller()\n",
}


def _setup(make, store, files=BASE_FILES):
    root = make() / "ws"
    for rel, text in files.items():
        write(root, rel, text)
    ix = new_indexer(make, root, store)
    assert ix.index_all().mode == "full"
    return root, ix


def _edit_then_same(ix, make, store, rel: str, text: str, context: str) -> None:
    """Write ``rel``, re-index it, and assert the graph is a rebuild's."""
    write(ix.root, rel, text)
    ix.reindex_file(ix.root / rel)
    assert_same(ix, make, store, context)


def test_body_edit_keeps_incoming_calls(store):
    with workspaces() as make:
        root, ix = _setup(make, store)
        before = _calls_into(ix.graph, "pkg/a.py")
        assert ("pkg.b.caller", "pkg.a.f", "import") in before
        assert ("main.main", "pkg.a.f", "import") in before
        # body change and line shift, same interface
        write(root, "pkg/a.py", "# a comment\n\ndef f():\n    x = 2\n    return x\n\n\ndef g():\n    f()\n    f()\n")
        ix.reindex_file(root / "pkg/a.py")
        assert _calls_into(ix.graph, "pkg/a.py") == before
        assert_same(ix, make, store)


def test_rename_drops_incoming_calls_and_counts_unresolved(store):
    with workspaces() as make:
        root, ix = _setup(make, store)
        assert _unresolved(ix.graph, "pkg.b.caller") == 0
        write(root, "pkg/a.py", "def f2():\n    return 1\n\n\ndef g():\n    f2()\n")
        ix.reindex_file(root / "pkg/a.py")
        into = _calls_into(ix.graph, "pkg/a.py")
        assert not [c for c in into if c[1] == "pkg.a.f"]
        assert ("pkg.b.caller", "pkg.a.g", "module") in into
        assert _unresolved(ix.graph, "pkg.b.caller") == 1
        assert _unresolved(ix.graph, "main.main") == 1
        assert_same(ix, make, store)


def test_new_file_resolves_import(store):
    with workspaces() as make:
        files = dict(BASE_FILES)
        files["main.py"] = "from pkg.c import h\n\n\ndef main():\n    h()\n"
        root, ix = _setup(make, store, files)
        g = ix.graph
        assert g.query("MATCH (:File {path: 'main.py'})-[e:IMPORTS]->() RETURN count(e)").rows[0][0] == 0
        assert _unresolved(g, "main.main") == 1
        write(root, "pkg/c.py", "def h():\n    pass\n")
        ix.reindex_file(root / "pkg/c.py")
        rows = g.query("MATCH (:File {path: 'main.py'})-[e:IMPORTS]->(b:File) RETURN b.path, e.line").rows
        assert rows == [["pkg/c.py", 1]]
        assert _calls_into(g, "pkg/c.py") == [("main.main", "pkg.c.h", "import")]
        assert _unresolved(g, "main.main") == 0
        assert_same(ix, make, store)


def test_delete_file_removes_node_symbols_edges(store):
    with workspaces() as make:
        root, ix = _setup(make, store)
        for how in ("remove_file", "reindex_file"):
            if how == "reindex_file":
                write(root, "pkg/a.py", BASE_FILES["pkg/a.py"])
                ix.reindex_file(root / "pkg/a.py")
                assert_same(ix, make, store)
            (root / "pkg/a.py").unlink()
            getattr(ix, how)(root / "pkg/a.py")
            g = ix.graph
            assert g.query("MATCH (f:File {path: 'pkg/a.py'}) RETURN count(f)").rows[0][0] == 0
            assert g.query("MATCH (s:Symbol {file: 'pkg/a.py'}) RETURN count(s)").rows[0][0] == 0
            assert g.query("MATCH ()-[e]->(:File {path: 'pkg/a.py'}) RETURN count(e)").rows[0][0] == 0
            assert _unresolved(g, "pkg.b.caller") == 2
            assert_same(ix, make, store)


def test_broken_file_keeps_last_good_graph_then_fix(store):
    with workspaces() as make:
        root, ix = _setup(make, store)
        before = export(ix.graph)
        write(root, "pkg/a.py", BASE_FILES["pkg/a.py"] + BROKEN)
        rep = ix.reindex_file(root / "pkg/a.py")
        assert "pkg/a.py" in rep.parse_errors
        during = export(ix.graph)
        assert during["symbols"] == before["symbols"] and during["edges"] == before["edges"]
        [fa] = [f for f in during["files"] if f["path"] == "pkg/a.py"]
        assert fa["parse_error"].startswith("line ")
        write(root, "pkg/a.py", "def g():\n    pass\n")  # fixed, with another interface
        assert not ix.reindex_file(root / "pkg/a.py").parse_errors
        assert_same(ix, make, store)


def test_star_import_cycle(store):
    """Mutual (or self) star imports are legal Python; resolving a name through them must
    terminate (unresolved), not recurse until RecursionError."""
    with workspaces() as make:
        files = {"pkg/__init__.py": "", "pkg/a.py": "from .b import *\n\n\ndef f():\n    nothing()\n",
                 "pkg/b.py": "from .a import *\n\n\ndef g():\n    f()\n"}
        root, ix = _setup(make, store, files)
        assert _unresolved(ix.graph, "pkg.a.f") == 1
        assert _calls_into(ix.graph, "pkg/a.py") == [("pkg.b.g", "pkg.a.f", "import")]
        write(root, "pkg/b.py", "from .b import *\n\n\ndef g():\n    nothing()\n")  # self star import
        ix.reindex_file(root / "pkg/b.py")
        assert _unresolved(ix.graph, "pkg.b.g") == 1
        assert_same(ix, make, store)


def test_deep_alias_chain_same_as_rebuild(store):
    """A chain of aliases longer than the resolver's evaluation depth limit: whether ``main``'s
    call binds must not depend on which other calls the resolver happened to evaluate (and
    memoise) before it in the same run: not on an unrelated call in ``a.py`` (full build), not
    on whether ``a.py`` is resolved again in the same run (incremental)."""
    from orbit_lsp.index import resolve

    n = getattr(resolve, "_MAX_DEPTH", 48) + 12
    chain = "def f0():\n    pass\n" + "".join(f"f{i} = f{i - 1}\n" for i in range(1, n + 1))
    files = {"pkg/__init__.py": "", "pkg/a.py": chain + f"f{n // 2}()\n",
             "pkg/b.py": f"from pkg.a import f{n}\n\n\ndef main():\n    f{n}()\n"}
    with workspaces() as make:
        root, ix = _setup(make, store, files)
        full = export(ix.graph)
        write(root, "pkg/b.py", "# edited\n" + files["pkg/b.py"])
        ix.reindex_file(root / "pkg/b.py")  # body-only edit: only b.py is resolved again
        assert_same(ix, make, store)
        # the full build must not depend on the unrelated module-level call in a.py
        write(root, "pkg/a.py", chain + "f0()\n")
        ix2_root = make() / "ws"
        shutil.copytree(root, ix2_root)
        ix2 = new_indexer(make, ix2_root, store)
        ix2.index_all()

        def calls(e: dict) -> list[tuple]:
            return [(x["from"], x["to"]) for x in e["edges"]
                    if x["type"] == "CALLS" and x["from"].startswith("pkg/b.py")]

        assert calls(export(ix2.graph)) == calls(full)


def test_index_all_after_reindex_is_unchanged(store):
    """After edits re-indexed one file at a time, nothing changed on disk since: re-opening
    (``index_all`` on the same indexer, or a new indexer on the same root as after a restart)
    must find the graph up to date, not rebuild it from scratch."""
    with workspaces() as make:
        root, ix = _setup(make, store)
        write(root, "pkg/a.py", "def f():\n    return 2\n\n\ndef g():\n    f()\n")
        ix.reindex_file(root / "pkg/a.py")
        assert WorkspaceIndexer(root, store, ix.settings).index_all().mode == "unchanged"
        assert ix.index_all().mode == "unchanged"


PREPARED_FILES = {
    "base.py": "class Base:\n    def run(self):\n        self.step()\n\n    def step(self):\n        pass\n",
    "sub.py": "from base import Base\n\n\nclass Sub(Base):\n    def step(self):\n        self.helper = make()\n\n\n"
              "def make():\n    return Base()\n",
    "use.py": "from sub import Sub\n\n\ndef go(cb):\n    Sub().run()\n    cb()\n\n\ndef h():\n    pass\n\n\n"
              "def start():\n    go(h)\n",
}


def test_a_resolver_prepared_at_open_gives_the_graph_of_a_rebuild(store):
    """The language server prepares the resolver edits use right after opening a folder
    (``prepare_edits``: seeded from the graph as it stands); edits re-indexed with it give the
    graph a rebuild gives, as edits re-indexed by a resolver built at the first edit do."""
    with workspaces() as make:
        root, first = _setup(make, store, PREPARED_FILES)
        ix = new_indexer(make, root, store)  # a second process opening the folder: no resolver yet
        assert ix.index_all().mode == "unchanged"
        assert ix.prepare_edits() > 0.0
        assert ix.prepare_edits() == 0.0  # already prepared
        _edit_then_same(ix, make, store, "base.py",
                        "class Base:\n    def run(self):\n        self.step()\n        self.finish()\n\n"
                        "    def step(self):\n        pass\n\n    def finish(self):\n        pass\n",
                        "after an edit of the base class")
        _edit_then_same(ix, make, store, "sub.py",
                        "from base import Base\n\n\nclass Sub(object):\n    def step(self):\n        pass\n",
                        "after the subclass left the hierarchy")
        _edit_then_same(ix, make, store, "use.py", PREPARED_FILES["use.py"] + "\n\ndef again():\n    go(start)\n",
                        "after a new parameter flow")


BASES_FROM_SUBCLASS_ATTRS = {
    "helpers.py": "class Helper:\n    def step(self):\n        pass\n",
    "runner.py": "from helpers import Helper\n\n\nclass Runner:\n    def make(self):\n"
                 "        class Local(self.base_type):\n            def go(self):\n                self.step()\n"
                 "        return Local\n\n\nclass Special(Runner):\n    base_type = Helper\n",
}


def test_a_base_read_from_an_attribute_only_subclasses_set_is_the_same_after_an_edit(store):
    """``class Local(self.base_type)`` where only a subclass of Runner sets ``base_type``: class
    bases are evaluated without the subclass relation (it is what they build), in a full build
    and after an edit alike, so the edit gives the graph of a rebuild (scale2's finding: the
    pairs differed with the order in which the relation was built)."""
    with workspaces() as make:
        _, ix = _setup(make, store, BASES_FROM_SUBCLASS_ATTRS)
        runner = BASES_FROM_SUBCLASS_ATTRS["runner.py"]
        _edit_then_same(ix, make, store, "runner.py", runner + "\n\ndef extra():\n    return Runner().make()\n",
                        "after an edit of the file whose class base reads a subclass attribute")
        _edit_then_same(ix, make, store, "helpers.py", "class Helper:\n    def step(self):\n        return 1\n",
                        "after an edit of the base's module")
        # again, now that this indexer's resolver has built the relation
        _edit_then_same(ix, make, store, "runner.py", runner + "\n\ndef extra2():\n    return 2\n",
                        "after a second edit, with the relation built")


def test_a_dependency_an_edit_adds_is_followed_by_the_next_interface_change(store):
    """Which files an interface change re-resolves comes from an index of what each file's
    resolution consulted (``_consulters``), kept up to date edit by edit: ``use.py`` starts
    calling ``lib.f`` in one edit, and the next edit renames ``f`` — ``use.py``'s call must
    become unbound, as in a rebuild; the third edit brings ``f`` back. Prepared as the language
    server prepares (the index is made then), and not prepared (made at the first change)."""
    files = {"lib.py": "def f():\n    pass\n", "use.py": "def go():\n    pass\n", "other.py": "x = 1\n"}
    for prepared in (True, False):
        with workspaces() as make:
            root, ix = _setup(make, store, files)
            if prepared:
                ix.prepare_edits()
            _edit_then_same(ix, make, store, "use.py", "from lib import f\n\n\ndef go():\n    f()\n",
                            "after use.py started calling lib.f")
            _edit_then_same(ix, make, store, "lib.py", "def g():\n    pass\n", "after f was renamed")
            _edit_then_same(ix, make, store, "lib.py", "def f():\n    pass\n", "after f came back")
            rows = ix.graph.ro_query("MATCH (a:Symbol {qual: 'use.go'})-[:CALLS]->(b:Symbol) RETURN b.qual").rows
            assert rows == [["lib.f"]]


def test_a_base_an_edit_adds_is_followed_by_the_next_interface_change_of_its_file(store):
    """Which files' subclass pairs an interface change finds again comes from an index of what
    each file's pairs consulted (``ClassModel._inherit_consulters_index``), kept up to date edit
    by edit: ``sub.py`` starts subclassing ``base.Base`` in one edit (so ``Base.run``'s
    ``self.step()`` runs ``Sub.step``), and the next edit makes ``Base`` another name of a new
    class ``Real`` — ``Sub`` now subclasses ``Real``, whose ``run`` calls ``Sub.step``, as in a
    rebuild; the third edit brings the first ``base.py`` back. Prepared as the language server
    prepares (the index is made then), and not prepared (made at the first interface change)."""
    files = {"base.py": "class Base:\n    def run(self):\n        self.step()\n",
             "sub.py": "class Sub:\n    def step(self):\n        pass\n", "other.py": "x = 1\n"}
    calls = "MATCH (a:Symbol)-[:CALLS]->(b:Symbol {qual: 'sub.Sub.step'}) RETURN a.qual"
    inherits = "MATCH (a:Symbol)-[:INHERITS]->(b:Symbol) RETURN a.qual, b.qual"
    for prepared in (True, False):
        with workspaces() as make:
            root, ix = _setup(make, store, files)
            if prepared:
                ix.prepare_edits()
            _edit_then_same(ix, make, store, "sub.py", "from base import Base\n\n\nclass Sub(Base):\n"
                            "    def step(self):\n        pass\n", "after sub.py started subclassing base.Base")
            assert ix.graph.ro_query(calls).rows == [["base.Base.run"]]
            _edit_then_same(ix, make, store, "base.py", "class Real:\n    def run(self):\n        self.step()\n\n\n"
                            "Base = Real\n", "after Base became another name of Real")
            assert ix.graph.ro_query(inherits).rows == [["sub.Sub", "base.Real"]]
            assert ix.graph.ro_query(calls).rows == [["base.Real.run"]]
            _edit_then_same(ix, make, store, "base.py", files["base.py"], "after base.py came back")
            assert ix.graph.ro_query(calls).rows == [["base.Base.run"]]


SUBCLASS_ATTR_FILES = {
    "base.py": "class Base:\n    def run(self):\n        self.helper.work()\n",
    "tools.py": "class A:\n    def work(self):\n        pass\n\n\nclass B:\n    def work(self):\n        pass\n",
    "sub.py": "from base import Base\nfrom tools import A, B\n\n\nclass Sub(Base):\n"
              "    def __init__(self):\n        self.helper = A()\n",
}


def test_an_attribute_only_a_subclass_sets_follows_an_edit_of_the_subclass(store):
    """``self.helper.work()`` in Base, where only the subclass Sub sets ``helper``: the call
    binds to what Sub assigns, and after Sub's file changes what it assigns (or another
    subclass appears), to the new value, as a rebuild binds it (the resolver keeps where
    subclasses define an attribute while their facts stand)."""
    with workspaces() as make:
        _, ix = _setup(make, store, SUBCLASS_ATTR_FILES)

        def from_run() -> list[str]:
            return [c[1] for c in _calls_into(ix.graph, "tools.py") if c[0] == "base.Base.run"]

        assert from_run() == ["tools.A.work"]
        _edit_then_same(ix, make, store, "sub.py", SUBCLASS_ATTR_FILES["sub.py"].replace("A()", "B()"),
                        "after the subclass assigned another class's instance")
        assert from_run() == ["tools.B.work"]
        # again, with the resolver the last edit built and kept
        _edit_then_same(ix, make, store, "sub.py", SUBCLASS_ATTR_FILES["sub.py"],
                        "after the subclass assigned the first class's instance again")
        assert from_run() == ["tools.A.work"]
        _edit_then_same(ix, make, store, "sub.py", SUBCLASS_ATTR_FILES["sub.py"].replace("self.helper", "self.other"),
                        "after the subclass stopped setting the attribute")
        assert from_run() == []
        _edit_then_same(ix, make, store, "sub.py", SUBCLASS_ATTR_FILES["sub.py"],
                        "after the subclass set the attribute again")
        assert from_run() == ["tools.A.work"]
        _edit_then_same(ix, make, store, "other.py",
                        "from base import Base\nfrom tools import B\n\n\nclass Other(Base):\n"
                        "    def __init__(self):\n        self.helper = B()\n",
                        "after a second subclass appeared")
        assert from_run() == ["tools.A.work", "tools.B.work"]


def test_a_full_builds_tally_of_one_symbol_counts_as_the_site_strings_do():
    """``report.tally_symbol`` (what a full build adds per symbol) gives the counts of
    ``report.unbound_tally`` over the symbol's ``unresolved_sites`` strings: a name once per
    symbol, its sites as often as it is called, one site when the lines are not known."""
    from orbit_lsp.index.report import tally_symbol, unbound_tally, unresolved_sites

    symbols = [
        (["run", "log", "run", "x"], [12, 3, 7, 7]),  # "run" twice, two names on line 7
        (["log"], [40]),
        (["run", "run"], None),  # sites not known (edges of an older version)
        (["log", "x"], [1]),  # lines that do not match the names: not known either
        ([], []),  # no unbound call
    ]
    by_strings: dict = {}
    by_symbol: dict = {}
    for names, lines in symbols:
        if not names:
            continue
        distinct = sorted(set(names))
        sites = unresolved_sites(names, lines)
        unbound_tally([(distinct, sites)], by_strings)
        tally_symbol(by_symbol, distinct, names if sites is not None else None)
    assert by_symbol == by_strings == {"run": [2, 3], "log": [3, 3], "x": [2, 2]}
