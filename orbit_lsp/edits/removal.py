"""Graph-derived removal of an unused function or method: proven unused, or not offered.

``removal(graph, root, rel, text, qual, max_hops)`` says whether the function/method ``qual`` of
workspace file ``rel`` (text ``text``, which must be the indexed text: ``File.hash`` equal) can
be removed, and if so the lines to remove and the resulting text. It is offered only when every
check holds (the honest answer otherwise is "unknown", not "unused"):

- a ``function`` or ``method`` of the graph, not a dunder (``__x__``), not decorated (a
  decorator may register it: routes, fixtures, entry points), not named in ``__all__``, and not
  the only statement of its class or function body (removing it would not parse);
- the graph has no ``CALLS`` edge into it from any other symbol, and no call site that could not
  be bound uses its name (``Symbol.unresolved_names``: such a call may reach it);
- not collected by name: not in a test file (``test_*.py``, ``*_test.py``, ``conftest.py``) and
  not named ``test*``; a method only when its class has no base class other than ``object``
  (a base from a library may call it by name: ``setUp``, ``do_GET``, ``visit_Name``);
- its name appears nowhere else in its own file (outside its own lines), in no other file of the
  graph (so in no file importing it), and not in ``pyproject.toml``, ``setup.cfg`` or
  ``setup.py`` at the workspace root (entry points). The text check is a whole-word match, so
  strings (``getattr(m, "f")``) and comments count too;
- no lookup by a computed name (``getattr(``, ``globals()``, ``vars(``, ``__dict__``,
  ``import_module(``, ``__import__(``, ``attrgetter(``, ``methodcaller(``) in its file or in the
  files importing it, directly or transitively (``IMPORTS`` edges, followed to the end).

Files are read from disk only to look for the name; nothing read is stored. Raises what the
graph layer raises (``FalkorDBOffline``, ``QueryTimeout``).
"""

from __future__ import annotations

import ast
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from orbit_lsp.graph import queries
from orbit_lsp.graph.connection import Graph
from orbit_lsp.graph.queries import Answer

ALL_HOPS = 64  # importers are followed until none are left (bounded for safety)
SCAN_BUDGET_S = 2.0  # longest time spent reading the workspace's files for the name: then "unknown"
ENTRY_POINT_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test|conftest)\.pyi?$")
DYNAMIC = re.compile(r"\b(getattr|import_module|__import__|attrgetter|methodcaller|vars)\s*\(|\bglobals\s*\(\s*\)|__dict__")
_LINE_END = re.compile(r"(?<=\r\n)|(?<=\r)(?!\n)|(?<=\n)")


@dataclass
class Removal:
    """``ok``: removable; ``reason``: why not (or a summary of the proof); ``start``/``end``:
    0-based line range to delete (end exclusive); ``new_text``: the text without them;
    ``symbol``: the graph's symbol dict; ``cypher``: the queries run."""

    ok: bool
    reason: str
    start: int = 0
    end: int = 0
    new_text: str = ""
    symbol: dict | None = None
    cypher: list[dict] = field(default_factory=list)


def _lines(text: str) -> list[str]:
    parts = _LINE_END.split(text)
    return parts[:-1] if parts and parts[-1] == "" else parts


def _word(name: str) -> re.Pattern:
    return re.compile(r"(?<![\w])" + re.escape(name) + r"(?![\w])")


def _find_def(tree: ast.Module, name: str, line: int):
    """(def node, the body list holding it, the node owning that body) for the def of ``name``
    at ``line``."""
    stack: list = [tree]
    while stack:
        node = stack.pop()
        for fld in ("body", "orelse", "finalbody", "handlers"):
            body = getattr(node, fld, None)
            if not isinstance(body, list):
                continue
            for child in body:
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and child.name == name \
                        and child.lineno == line:
                    return child, body, node
                if isinstance(child, ast.AST):
                    stack.append(child)
    return None, None, None


def _in_all(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            for c in ast.walk(node):
                if isinstance(c, ast.Constant) and c.value == name:
                    return True
    return False


def _read_text(root: Path, path: str, texts: dict[str, str | None] | None) -> str | None:
    if texts is not None and path in texts:
        return texts[path]
    try:
        text = (root / path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = None
    if texts is not None:
        texts[path] = text
    return text


@dataclass
class UnusedReport:
    """``unused_functions``' answer. ``proven``: removals that hold (``Removal.symbol`` the
    function, ``reason`` the proof); ``unproven``: functions without a ``CALLS`` edge into them
    that a check keeps (``reason`` why); ``candidates``: how many functions and methods have no
    ``CALLS`` edge into them; ``checked``: how many of them were checked; ``note``: why some were
    not; ``cypher``: the distinct queries run (first parameters of each)."""

    proven: list[Removal] = field(default_factory=list)
    unproven: list[Removal] = field(default_factory=list)
    candidates: int = 0
    checked: int = 0
    note: str | None = None
    cypher: list[dict] = field(default_factory=list)


CANDIDATES = ("MATCH (s:Symbol) WHERE s.kind IN ['function', 'method'] AND NOT (:Symbol)-[:CALLS]->(s) "
              f"RETURN {queries.SYMBOL_FIELDS} ORDER BY file, line")


def unused_functions(graph: Graph, root: Path, limit: int = 300, budget_s: float = 30.0) -> UnusedReport:
    """Functions and methods of the graph proven unused, by the checks of ``removal`` (the
    "remove unused" code action): the symbols without a ``CALLS`` edge into them, each checked
    against its file's text on disk, which must be the indexed text (``File.hash``; else it is
    "unknown"). At most ``limit`` are checked, within ``budget_s`` seconds (the rest are
    counted in ``note``). Files are read only to look for names. Raises what the graph layer
    raises (``FalkorDBOffline``, ``QueryTimeout``)."""
    from orbit_lsp.index.parsing import content_hash

    root = Path(root)
    rep = UnusedReport()
    ans = Answer()
    cands = [queries._sym(r) for r in ans.run(graph, CANDIDATES)]
    hashes = dict(ans.run(graph, "MATCH (f:File) RETURN f.path, f.hash"))
    cypher = list(ans.cypher)
    rep.candidates = len(cands)
    texts: dict[str, str | None] = {}  # every file as read, for the name search
    indexed: dict[str, str | None] = {}  # candidates' files, when they are the indexed text
    deadline = time.monotonic() + budget_s
    for sym in cands:
        if rep.checked >= limit or time.monotonic() > deadline:
            rep.note = (f"{rep.candidates - rep.checked} more functions without callers were not checked "
                        f"({'the limit of ' + str(limit) if rep.checked >= limit else f'the {budget_s:g} s time limit'}): "
                        "whether they are used is unknown.")
            break
        rel = sym["file"]
        rep.checked += 1
        if rel not in indexed:
            try:
                data = (root / rel).read_bytes()
            except OSError:
                data = None
            indexed[rel] = (data.decode("utf-8", errors="surrogatepass")
                            if data is not None and content_hash(data) == hashes.get(rel) else None)
        text = indexed[rel]
        if text is None:
            rep.unproven.append(Removal(False, f"{rel} differs from the indexed text (index it again)", symbol=sym))
            continue
        r = check(graph, root, rel, text, sym, texts=texts,
                  scan_budget_s=max(0.0, min(SCAN_BUDGET_S, deadline - time.monotonic())))
        cypher += r.cypher
        (rep.proven if r.ok else rep.unproven).append(r)
    seen: set[str] = set()
    rep.cypher = [c for c in cypher if not (c["query"] in seen or seen.add(c["query"]))]
    return rep


def blank_lines_around(lines: list[str], start: int, end: int) -> tuple[int, int]:
    """The range to delete for the definition on lines ``[start, end)`` (0-based, ``end``
    exclusive) so that the blank lines left where it was follow PEP 8 as they did around it:
    between the code before and after it, as many as the larger of the two gaps it had (two
    before a top-level ``def`` that followed a class's last method, one between methods); none
    at the start of the file and none at its end (the file ends with the code before it)."""
    before = 0
    while start - before > 0 and not lines[start - before - 1].strip():
        before += 1
    after = 0
    while end + after < len(lines) and not lines[end + after].strip():
        after += 1
    at_start, at_end = start - before == 0, end + after == len(lines)
    keep = 0 if at_start or at_end else max(before, after)
    drop_after = min(after, before + after - keep)
    drop_before = before + after - keep - drop_after
    return start - drop_before, end + drop_after


def removal(graph: Graph, root: Path, rel: str, text: str, qual: str, max_hops: int = ALL_HOPS,
            scan_budget_s: float = SCAN_BUDGET_S) -> Removal:
    """See the module docstring. ``qual`` is the graph's qualified name (``pkg.mod.f``)."""
    found = queries.find_symbols(graph, qual)
    sym = next((s for s in found.rows if s["file"] == rel and s["qual"] == qual), None)
    if sym is None:
        return Removal(False, f"{qual} is not in the graph of {rel}", cypher=found.cypher)
    return check(graph, root, rel, text, sym, max_hops, found.cypher, scan_budget_s)


def check(graph: Graph, root: Path, rel: str, text: str, sym: dict, max_hops: int = ALL_HOPS,
          cypher: list[dict] | None = None, scan_budget_s: float = SCAN_BUDGET_S,
          texts: dict[str, str | None] | None = None) -> Removal:
    """``removal`` for a symbol dict already read from the graph. Reading the workspace's files
    stops after ``scan_budget_s`` seconds (then not removable: unknown), which keeps a code-action
    request well inside the server's answer timeout. ``texts``: a cache of the workspace's file
    texts by path (None: unreadable), filled as files are read, for checking many symbols."""
    cypher = list(cypher or [])
    name, kind = sym["name"], sym["kind"]

    def no(reason: str) -> Removal:
        return Removal(False, reason, symbol=sym, cypher=cypher)

    if not rel.endswith((".py", ".pyi")):
        return no(f"{rel} is not a Python file: removals are offered for Python only")
    if kind not in ("function", "method"):
        return no(f"{name} is a {kind}: only functions and methods are offered for removal")
    if name.startswith("__") and name.endswith("__"):
        return no(f"{name} is a dunder method: Python calls it")
    if TEST_FILE.search(rel) or name.startswith("test"):
        return no(f"{name} may be collected by a test runner by its name")
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return no(f"{rel} does not parse")
    node, body, owner = _find_def(tree, name, sym["line"])
    if node is None:
        return no(f"no definition of {name} at line {sym['line']} of {rel}")
    if node.decorator_list:
        return no(f"{name} is decorated: the decorator may register it")
    if len(body) == 1:
        return no(f"{name} is the only statement of its body")
    if isinstance(owner, ast.ClassDef) and (owner.keywords or any(
            not (isinstance(b, ast.Name) and b.id == "object") for b in owner.bases)):
        return no(f"{name} is a method of a class with a base class, which may call it by name")
    if _in_all(tree, name):
        return no(f"{name} is exported in __all__")
    lines = _lines(text)
    start, end = node.lineno - 1, node.end_lineno
    word = _word(name)
    for i, ln in enumerate(lines):
        if not (start <= i < end) and word.search(ln):
            return no(f"{name} is mentioned on line {i + 1} of {rel}")
    if DYNAMIC.search(text):
        return no(f"{rel} looks names up dynamically (getattr, globals, ...): whether {name} is used is unknown")
    # the graph: callers, and unbound calls that use the name
    summary = queries.symbol_summary(graph, rel, sym["qual"], 1, limit=1)
    cypher += summary.cypher
    if not summary.found:
        return no(f"{sym['qual']} is not in the graph")
    s = summary.rows[0]
    if s["callers_total"]:
        return no(f"{name} has {s['callers_total']} caller(s)")
    if s["unresolved_elsewhere"]:
        return no(f"{s['unresolved_elsewhere']} function(s) make calls to '{name}' that could not be bound: "
                  "whether it is used is unknown")
    imp = queries.impact(graph, rel, max_hops)
    cypher += imp.cypher
    importers = {d["path"] for d in imp.rows}
    every = Answer()
    paths = [r[0] for r in every.run(graph, "MATCH (f:File) RETURN f.path ORDER BY f.path")]
    cypher += every.cypher
    deadline = time.monotonic() + scan_budget_s
    for path in paths + [p for p in ENTRY_POINT_FILES if p not in paths]:
        if path == rel:
            continue
        if time.monotonic() > deadline:
            return no(f"reading the workspace's {len(paths)} files for '{name}' took over {scan_budget_s:g} s: "
                      "whether it is used is unknown")
        other = _read_text(Path(root), path, texts)
        if other is None:
            continue
        if word.search(other):
            return no(f"{name} is mentioned in {path}")
        if path in importers and DYNAMIC.search(other):
            return no(f"{path} imports {rel} and looks names up dynamically (getattr, globals, ...): "
                      f"whether {name} is used is unknown")
    start, end = blank_lines_around(lines, start, end)
    new_text = "".join(lines[:start] + lines[end:])
    why = (f"no callers, no unbound calls named '{name}', not mentioned elsewhere in the {len(paths)} "
           f"file(s) of the workspace ({len(importers)} of them importing {rel})")
    return Removal(True, why, start, end, new_text, sym, cypher)
