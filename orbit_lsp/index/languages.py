"""Per-language dispatch for the indexer: which parser extracts a file, which resolver binds it.

Python files go to ``python.py``/``resolve.py``, JavaScript/TypeScript files to
``javascript.py``/``js_resolve.py``; both produce facts with ``symbols`` (``PySymbol``) and an
``interface()``, and both resolvers produce ``py_edges.FileEdges``, so the indexer, the writer and
the graph schema are shared. The languages never consult each other.
"""

from __future__ import annotations

from pathlib import Path

from orbit_lsp.index import javascript as jsx
from orbit_lsp.index import js_resolve
from orbit_lsp.index import py_interface
from orbit_lsp.index.javascript import JS_EXTS
from orbit_lsp.index.js_resolve import JsResolver, configs_changed  # noqa: F401 - used by the indexer
from orbit_lsp.index.resolve import Resolver
from orbit_lsp.index.py_edges import FileEdges

PARSED_LANGS = frozenset({"python", "javascript", "typescript"})


def is_js(rel: str) -> bool:
    """True for a JavaScript/TypeScript path (by extension, case-insensitive)."""
    return rel.lower().endswith(JS_EXTS)


def parse_js(rel: str, data: bytes) -> tuple[jsx.JsFacts | None, str | None]:
    """Extract facts from one JS/TS file: ``(facts, None)``, or ``(partial facts, "line N:
    message")`` when tree-sitter found errors (the indexer keeps the last good facts instead
    when it has them), or ``(None, "line 0: …")``."""
    try:
        return jsx.extract(rel, data), None
    except jsx.JsSyntaxError as exc:
        return exc.facts, f"line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return None, f"line 0: {type(exc).__name__}: {exc}"


def parse_file(rel: str, data: bytes):
    """``(facts, error)`` of a source file of any indexed language. With an error, ``facts`` is
    None (Python) or what an error-tolerant parse still yields (JS/TS)."""
    if is_js(rel):
        return parse_js(rel, data)
    from orbit_lsp.index.parsing import parse_python

    return parse_python(rel, data)


def changed_entities(rel: str, old, new) -> tuple[set[tuple], set[tuple]]:
    """``py_interface.changed_entities`` for any language."""
    if is_js(rel):
        return js_resolve.changed_entities(rel, old, new)
    return py_interface.changed_entities(rel, old, new)


class WorkspaceResolver:
    """The Python ``Resolver`` and the ``JsResolver`` of one workspace behind the interface the
    indexer uses (``set_facts``, ``invalidate``, ``resolve_file``); any other attribute is the
    Python resolver's."""

    def __init__(self, facts: dict, files: set[str], aliases: dict[str, str] | None, root_package: str,
                 root: Path | str, value_flow: bool = True, sys_paths: dict[str, tuple] | None = None,
                 pythonpath: tuple[str, ...] = ()):
        if hasattr(facts, "only"):  # decoded on use (indexer.LazyFacts): split without decoding
            py, js = facts.only(lambda r: not is_js(r)), facts.only(is_js)
        else:
            py = {r: f for r, f in facts.items() if not is_js(r)}
            js = {r: f for r, f in facts.items() if is_js(r)}
        self.python = Resolver(py, files, aliases, root_package, value_flow=value_flow,
                               sys_paths={} if sys_paths is None and hasattr(py, "only") else sys_paths,
                               pythonpath=pythonpath)
        self.js = JsResolver(js, files, aliases, root)
        self._last_python: tuple | None = None  # (everyone, its Python files): ``_python_of``

    def set_facts(self, rel: str, facts) -> None:
        (self.js if is_js(rel) else self.python).set_facts(rel, facts)

    def invalidate(self, entities) -> int:
        entities = set(entities)
        js = {e for e in entities if is_js(e[0])}
        return self.python.invalidate(entities - js) + self.js.invalidate(js)

    def resolve_file(self, rel: str) -> FileEdges:
        return (self.js if is_js(rel) else self.python).resolve_file(rel)

    def seed(self, states) -> None:
        """Tell a new resolver the value flows of the graph as it stands: ``(rel, FileState)``
        pairs, whose edges' flows and whose parameter values (``FileState.pvals``) were computed
        by an earlier resolver. Without them a resolver starting from a kept graph would bind
        calls through parameters differently from the build that made the graph."""
        py = self.python
        for rel, st in states:
            if st is None or is_js(rel):
                continue
            if st.edges is not None:
                py.seed_inherits(rel, st.edges)
            if st.edges is not None and st.edges.flows:
                py.apply_flows(None, st.edges.flows, pending=False)
            if st.pvals:
                py.seed_params(((rel, q), vd) for q, vd in st.pvals.items())

    def prepare(self, everyone) -> None:
        """Compute now what the first ``resolve_many`` over ``everyone`` (every file with facts)
        would compute before resolving anything: the Python subclass relation; and what the first
        edit would make before its first evaluation: the directories ``sys.path`` additions put on
        the path (``ModuleLookup.scoped_paths``) and the index its interface changes look their
        consulters up in (``ClassModel.implied``)."""
        self.python._ensure_subclasses(self._python_of(everyone))
        self.python.scoped_paths()
        self.python._inherit_consulters_index()

    def resolve_many(self, rels, previous, everyone, removed=(), progress=None) -> dict[str, FileEdges]:
        """Resolve ``rels`` (any language) and, for Python, follow value flows to a fixpoint
        (``Resolver.resolve_fixpoint``): returns the new edges of every file resolved.
        ``previous(rel)``: a file's edges before (whose flows the resolver holds); ``everyone``:
        every file with facts; ``removed``: files gone since ``previous`` (their flows leave);
        ``progress(done, total, rel)``: called every 200 files of the first resolution."""
        total = len(rels)
        out = {}
        for rel in sorted(r for r in rels if is_js(r)):
            out[rel] = self.js.resolve_file(rel)
            if progress is not None and (len(out) % 200 == 0 or len(out) == total):
                progress(len(out), total, rel)
        py = {rel for rel in rels if not is_js(rel)}
        done_js = len(out)
        if progress is not None:
            inner = progress
            progress = lambda i, n, rel: inner(done_js + i, total, rel)  # noqa: E731 - counts after the JS files
        for rel in removed:
            e = previous(rel)
            if e is not None and e.flows and not is_js(rel):
                self.python.apply_flows(e.flows, None)
        out.update(self.python.resolve_fixpoint(py, previous, self._python_of(everyone), progress))
        return out

    def _python_of(self, everyone) -> list[str]:
        """The Python files of ``everyone``; the last answer again for the same list object (the
        indexer passes the same list while no file gains or loses facts: ``_with_facts``)."""
        last = self._last_python
        if last is not None and last[0] is everyone:
            return last[1]
        py = [r for r in everyone if not is_js(r)]
        self._last_python = (everyone, py)
        return py
