"""Diagnostics from the graph, published with ``textDocument/publishDiagnostics`` after every
(re-)index of a folder, for every file of the folder that has some (open in the editor or not):

- **import cycles** (Warning, code ``import-cycle``): every import line of a file whose
  imported file is in the same strongly connected component, naming the shortest cycle
  through that import ("import cycle: a.py → b.py → a.py"), with the other imports of the
  cycle as related information when the client takes it;
- **syntax errors** (Error, code ``syntax-error``): the line of ``File.parse_error``, saying
  that the file's last good graph is kept (or that it is not in the graph yet);
- **unresolved workspace imports** (Hint, code ``unresolved-import``).

A re-index of one file can change cycles anywhere (and the resolution of other files), so every
refresh recomputes the folder's whole set from the graph — every IMPORTS edge (components are
computed in Python, ``queries.import_cycles``) and the files with problems
(``queries.file_problems``) — off the event loop, and publishes only the files whose
diagnostics changed, including empty lists for files whose diagnostics went away. A file's
diagnostics are rebuilt (which reads its lines, to size the ranges in the client's encoding)
only when its graph facts changed or it was re-indexed; the cycles answer is grouped by file
once per answer (it changes only with the IMPORTS edges), and a list reused as it was is not
compared again when published: a save in a folder of thousands of files with diagnostics costs
a pass over their names, not a rebuild. Refreshes of one folder never overlap: a re-index
during a refresh schedules one more.
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import NamedTuple

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from orbit_lsp.graph import queries
from orbit_lsp.graph.cache import ANSWERS
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.server.app import OrbitServer
from orbit_lsp.server.lines import LineCache

log = logging.getLogger("orbit_lsp.server")
SOURCE = "orbit"
REFRESH_DELAY_S = 0.1  # from a re-index to recomputing the diagnostics
_PARSE_ERROR = re.compile(r"^line (\d+): (.*)$", re.S)

Key = tuple


class CycleFacts:
    """What each file's diagnostics take from one ``queries.import_cycles`` answer (``rows``):
    ``by_file[rel] = (its rows, a key of what they say, the files those cycles go through)``
    and ``line_of[(path, imported path)]`` = the line of that import."""

    def __init__(self, rows: list[dict]):
        self.rows = rows
        self.line_of = {(r["path"], r["imports"]): r["line"] for r in rows}
        grouped: dict[str, list[dict]] = {}
        for r in rows:
            grouped.setdefault(r["path"], []).append(r)
        self.by_file: dict[str, tuple[list[dict], tuple, frozenset[str]]] = {}
        for rel, cyc in grouped.items():
            key = (tuple((r["line"], r["imports"], tuple(r["cycle"]), len(r["component"])) for r in cyc),
                   tuple(self.line_of.get((a, b)) for r in cyc for a, b in zip(r["cycle"][1:-1], r["cycle"][2:])))
            self.by_file[rel] = (cyc, key, frozenset({rel, *(p for r in cyc for p in r["cycle"])}))


NO_CYCLES: tuple[list[dict], tuple, frozenset[str]] = ([], (), frozenset())


class Built(NamedTuple):
    """A file's diagnostics as last built: ``key`` (the graph facts they were built from),
    ``diagnostics`` and the file's ``uri``."""

    key: tuple
    diagnostics: list[types.Diagnostic]
    uri: str


def _key(d: types.Diagnostic) -> Key:
    r = d.range
    return (r.start.line, r.start.character, r.end.line, r.end.character, d.severity, d.code, d.message)


class Feature:
    def __init__(self, server: OrbitServer):
        self.server = server
        # folder root -> uri -> (the published diagnostics, their keys)
        self.published: dict[Path, dict[str, tuple[list[types.Diagnostic], tuple[Key, ...]]]] = {}
        # folder root -> rel -> the file's diagnostics as last built, and the facts they came from
        self.built: dict[Path, dict[str, Built]] = {}
        # folder root -> the last import-cycles answer, grouped by file
        self.cycle_facts: dict[Path, CycleFacts] = {}
        # folder root -> files re-indexed since the last refresh (None: all of them)
        self.pending: dict[Path, set[str] | None] = {}
        self.tasks: dict[Path, asyncio.Task] = {}

    def register(self) -> None:
        pass  # diagnostics are pushed after indexing (``after_index``), not requested

    # -- scheduling ---------------------------------------------------------------------------
    def after_index(self, ix: WorkspaceIndexer, rels: set[str] | None) -> None:
        """Called on the event loop after (re-)indexing ``ix`` (``rels``: the files re-indexed,
        None for the whole folder). Schedules a refresh of the folder's diagnostics."""
        if rels is None or ix.root in self.pending and self.pending[ix.root] is None:
            self.pending[ix.root] = None
        else:
            self.pending.setdefault(ix.root, set()).update(rels)  # type: ignore[union-attr]
        task = self.tasks.get(ix.root)
        if task is None or task.done():
            self.tasks[ix.root] = asyncio.ensure_future(self._refresh(ix))

    async def _refresh(self, ix: WorkspaceIndexer) -> None:
        ls = self.server
        # after the code lenses: the client asks for them again as soon as it hears of the
        # re-index, and the whole-folder problem query would otherwise compete with that request
        await asyncio.sleep(REFRESH_DELAY_S)
        while ix.root in self.pending:
            changed = self.pending.pop(ix.root)
            try:
                # import cycles change only with IMPORTS edges: most saves reuse the last answer
                cycles = await ls.query(ANSWERS.get, ix.graph, ix.imports_generation, queries.import_cycles)
                problems = await ls.query(queries.file_problems, ix.graph)
                loop = asyncio.get_running_loop()
                wanted = await loop.run_in_executor(ls.query_pool, self.build, ix, cycles.rows, problems.rows, changed)
            except JsonRpcException as exc:  # FalkorDB offline: recovery re-indexes, which calls us again
                log.info("diagnostics of %s not refreshed: %s", ix.root, exc)
                self.built.pop(ix.root, None)
                return
            except Exception:  # noqa: BLE001 - never let a bug here take the server down
                log.exception("diagnostics of %s failed", ix.root)
                self.built.pop(ix.root, None)
                return
            self.publish(ix.root, wanted)
        self.forget_removed()

    # -- building -----------------------------------------------------------------------------
    def build(self, ix: WorkspaceIndexer, cycles: list[dict], problems: list[dict],
              changed: set[str] | None = None) -> dict[str, list[types.Diagnostic]]:
        """uri -> diagnostics of every file of folder ``ix`` that has some. ``changed``: the
        files re-indexed since the last build (None: all); the diagnostics of any other file
        whose graph facts are the same as last time are reused as they were (their ranges need
        the file's lines: this runs in a worker thread and reads only what it must)."""
        ls = self.server
        lines = ls.lines()
        caps = ls.client_capabilities
        pd = caps.text_document.publish_diagnostics if caps and caps.text_document else None
        related_ok = bool(pd and pd.related_information)

        if ls.workspaces.get(ix.root) is not ix:
            return {}  # the folder is no longer served
        # the cycles answer is the same list until the IMPORTS edges change (``_refresh`` reads
        # it from the cache): what each file's diagnostics take from it is grouped once per list
        grouped = self.cycle_facts.get(ix.root)
        if grouped is None or grouped.rows is not cycles:
            grouped = self.cycle_facts[ix.root] = CycleFacts(cycles)
        probs = {p["path"]: p for p in problems}

        before = self.built.get(ix.root, {})
        built: dict[str, Built] = {}
        result: dict[str, list[types.Diagnostic]] = {}
        # only files of the folder that serves them: not those of a folder served inside it (a
        # prefix test: looking up each file's owner, thousands of times, held the GIL for long
        # enough to slow the lens requests answered meanwhile)
        inner = tuple(n + "/" for n in ls.workspaces.nested_in(ix.root))
        for rel in sorted(grouped.by_file.keys() | probs.keys()):
            if inner and rel.startswith(inner):
                continue
            cyc, cycle_key, files = grouped.by_file.get(rel, NO_CYCLES)
            prob = probs.get(rel) or {}
            key = (cycle_key, prob.get("parse_error"), prob.get("has_graph"), tuple(prob.get("unresolved_imports") or ()))
            old = before.get(rel)
            if old is not None and old.key == key and changed is not None and changed.isdisjoint(files or (rel,)):
                built[rel] = old  # the same facts, no file of it re-indexed: the same diagnostics
            else:
                diags = self._diagnostics(ix, rel, cyc, prob, grouped.line_of, lines, related_ok)
                built[rel] = Built(key, diags, old.uri if old is not None else ls.uri_of(ix.root / rel))
            result[built[rel].uri] = built[rel].diagnostics
        self.built[ix.root] = built
        return result

    def _diagnostics(self, ix: WorkspaceIndexer, rel: str, cycles: list[dict], problem: dict,
                     line_of: dict[tuple[str, str], int], lines: LineCache, related_ok: bool) -> list[types.Diagnostic]:
        ls = self.server
        path = ix.root / rel
        out: list[types.Diagnostic] = []
        seen: set[tuple[int, str]] = set()
        for r in cycles:
            message = "import cycle: " + " → ".join(r["cycle"])
            if (r["line"], message) in seen:
                continue
            seen.add((r["line"], message))
            if len(r["component"]) > len(r["cycle"]) - 1:
                message += f" (one of {len(r['component'])} files that import each other in a loop)"
            related = None
            if related_ok:
                related = []
                cyc = r["cycle"]
                for a, b in zip(cyc[1:-1], cyc[2:]):
                    p = ix.root / a
                    related.append(types.DiagnosticRelatedInformation(
                        location=types.Location(uri=ls.uri_of(p), range=lines.line_range(p, line_of.get((a, b)) or 1)),
                        message=f"{a} imports {b}"))
            out.append(types.Diagnostic(
                range=lines.line_range(path, r["line"] or 1), message=message, severity=types.DiagnosticSeverity.Warning,
                code="import-cycle", source=SOURCE, related_information=related or None))

        err = problem.get("parse_error")
        if err:
            m = _PARSE_ERROR.match(err)
            line1, msg = (int(m.group(1)), m.group(2)) if m else (1, err)
            keep = ("the last good graph of this file is kept until it parses again" if problem.get("has_graph")
                    else "this file is not in the graph until it parses")
            out.append(types.Diagnostic(
                range=lines.line_range(path, max(1, line1)), message=f"syntax error: {msg} ({keep})",
                severity=types.DiagnosticSeverity.Error, code="syntax-error", source=SOURCE))
        for entry in problem.get("unresolved_imports") or ():
            ln, _, module = str(entry).partition(":")
            try:
                line1 = int(ln)
            except ValueError:
                line1, module = 1, str(entry)
            out.append(types.Diagnostic(
                range=lines.line_range(path, max(1, line1)),
                message=f"unresolved import '{module}': no such module in this workspace",
                severity=types.DiagnosticSeverity.Hint, code="unresolved-import", source=SOURCE))
        out.sort(key=lambda d: (d.range.start.line, d.severity or 0, d.message))
        return out

    # -- publishing ---------------------------------------------------------------------------
    def publish(self, root: Path, wanted: dict[str, list[types.Diagnostic]]) -> None:
        """Send the files whose diagnostics changed since the last publish for ``root``
        (an empty list for files that have none any more). A file's list that ``build`` reused
        (the same object as last published) is not compared again: on the event loop, after
        every save, for thousands of files."""
        before = self.published.get(root, {})
        now: dict[str, tuple[list[types.Diagnostic], tuple[Key, ...]]] = {}
        for uri, diags in wanted.items():
            last = before.get(uri)
            if last is not None and last[0] is diags:
                now[uri] = last
                continue
            keys = tuple(_key(d) for d in diags)
            now[uri] = (diags, keys)
            if last is None or last[1] != keys:
                self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diags))
        for uri in before:
            if uri not in now:
                self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        self.published[root] = now

    def forget_removed(self) -> None:
        """Clear the diagnostics of folders that are no longer served."""
        served = {ix.root for ix in self.server.workspaces.all()}
        for root in [r for r in self.published if r not in served]:
            self.publish(root, {})
            del self.published[root]
            self.built.pop(root, None)
            self.cycle_facts.pop(root, None)
