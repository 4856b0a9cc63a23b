"""Call hierarchy (``textDocument/prepareCallHierarchy``, ``callHierarchy/incomingCalls``,
``callHierarchy/outgoingCalls``) and ``workspace/symbol``, served from the graph.

Results are plain JSON in LSP's shapes (``CallHierarchyItem``, ``…IncomingCall``,
``…OutgoingCall``): a hundred callers as lsprotocol objects cost more to unstructure than to
find. Files are not read to convert positions on the lines of their indexed content that are
ASCII (a byte column is then the character in every encoding), unless the client has them
open. Items carry ``data = {"file", "qual"}`` (workspace-relative path and qualified name): the incoming/outgoing
requests look the symbol up by exactly that, so same-named symbols elsewhere are never mixed
in. An item's ``range`` spans the definition's full lines, their ends included (from ``line`` to
the start of the line after ``end_line``, as LSP says whole lines), its ``selectionRange`` the
name; call sites (``fromRanges``) are the callee expressions, converted from the graph's UTF-8
byte columns into the negotiated encoding on the file that contains them (the caller's file
for incoming calls, the item's own file for outgoing
calls). A call made at module level comes from the file's module symbol, shown as a Module
item named after the file. While a folder's first index runs (``OrbitServer.indexing``) the call
hierarchy and implementations of its files answer an error saying so (no caller is known yet).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

from lsprotocol import types

from orbit_lsp.graph import queries
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.server.app import OrbitServer
from orbit_lsp.server.lines import AsciiLines, LineCache, Lines

WORKSPACE_SYMBOL_LIMIT = 200

KINDS = {
    "function": types.SymbolKind.Function,
    "method": types.SymbolKind.Method,
    "class": types.SymbolKind.Class,
    "variable": types.SymbolKind.Variable,
    "module": types.SymbolKind.Module,
    "interface": types.SymbolKind.Interface,  # TypeScript
    "type": types.SymbolKind.TypeParameter,
    "enum": types.SymbolKind.Enum,
    "namespace": types.SymbolKind.Namespace,  # TypeScript
}


def _range(start: tuple[int, int], end: tuple[int, int]) -> dict:
    return {"start": {"line": start[0], "character": start[1]}, "end": {"line": end[0], "character": end[1]}}


def _sites(lines: Lines | AsciiLines, row: dict) -> list[dict]:
    """A CALLS edge's call sites (``fromRanges``); ``lines``: the file that contains them."""
    out = []
    for ln, c, e in zip(row["lines"] or [], row["cols"] or [], row["end_cols"] or []):
        a = lines.character(ln, c)
        out.append(_range((ln - 1, a), (ln - 1, max(a, lines.character(ln, max(c, e))))))
    return out


def _data(item: types.CallHierarchyItem) -> tuple[str, str] | None:
    data = item.data
    if hasattr(data, "_asdict"):
        data = data._asdict()
    if isinstance(data, dict) and isinstance(data.get("file"), str) and isinstance(data.get("qual"), str):
        return data["file"], data["qual"]
    return None


class Feature:
    def __init__(self, server: OrbitServer):
        self.server = server

    def register(self) -> None:
        ls = self.server
        ls.on(types.TEXT_DOCUMENT_PREPARE_CALL_HIERARCHY, self.prepare, types.CallHierarchyOptions())
        ls.on(types.CALL_HIERARCHY_INCOMING_CALLS, self.incoming)
        ls.on(types.CALL_HIERARCHY_OUTGOING_CALLS, self.outgoing)
        ls.on(types.WORKSPACE_SYMBOL, self.workspace_symbol, types.WorkspaceSymbolOptions(resolve_provider=False))
        ls.on(types.TEXT_DOCUMENT_IMPLEMENTATION, self.implementation, types.ImplementationOptions())

    # -- items -------------------------------------------------------------------------------
    def item(self, ix: WorkspaceIndexer, s: dict, lines: Lines | AsciiLines,
             spell: Callable[[Path, str], str] | None = None) -> dict:
        """A ``CallHierarchyItem`` (as plain JSON) for graph symbol dict ``s``
        (``queries.SYMBOL_FIELDS`` shape); ``lines``: its file's (``self.lines_of``); ``spell``:
        the client's spelling of file URIs (``OrbitServer.uri_speller``), else canonical URIs."""
        line = s["line"] or 1
        # whole lines, their ends included: up to the start of the line after the last one
        end = (max(line, s["end_line"] or line), 0)
        if s["kind"] == "module":
            name = s["file"]
            start = sel_start = sel_end = (0, 0)
        else:
            name = s["name"]
            c = lines.character(line, s["col"] or 0)
            sel_start, sel_end = (line - 1, c), (line - 1, c + lines.units(name))
            start = (line - 1, 0)
        return {"name": name, "kind": KINDS.get(s["kind"], types.SymbolKind.Function).value,
                "uri": (spell or self.server.rel_uri)(ix.root, s["file"]), "range": _range(start, end),
                "selectionRange": _range(sel_start, sel_end), "detail": s["qual"],
                "data": {"file": s["file"], "qual": s["qual"]}}

    @staticmethod
    def lines_of(ix: WorkspaceIndexer, rel: str, lines: LineCache) -> Lines | AsciiLines:
        """Lines of a file of ``ix`` for converting graph positions: read only for a position
        on a line of its indexed content that is not ASCII, unless the client has it open."""
        return lines.of(ix.root / rel, nonascii=ix.nonascii_lines(rel))

    async def _warm(self, ix: WorkspaceIndexer, rels: Any) -> None:
        """Read off the event loop the files whose lines converting positions will need: those
        with non-ASCII lines in their indexed content, or not known (``lines_of``)."""
        await self.server.warm_lines([ix.root / r for r in rels if ix.nonascii_lines(r) != frozenset()])

    async def _target(self, item: types.CallHierarchyItem) -> tuple[WorkspaceIndexer, str, str] | None:
        """(indexer, file, qual) of an item: from its ``data``, else from what the graph has at
        the start of its selection range."""
        ls = self.server
        owner = ls.locate(item.uri)
        if owner is None:
            return None
        ix, rel = owner
        ls.refuse_while_indexing(ix, "callers and callees are")
        got = _data(item)
        if got is not None:
            return ix, got[0], got[1]
        await ls.warm_lines([ix.root / rel])
        line1, col = ls.lines().graph_position(ix.root / rel, item.selection_range.start)
        at = await ls.answer(ix, queries.target_at, rel, line1, col)
        syms = [r["symbol"] for r in at.rows if r["type"] == "symbol"]
        return (ix, syms[0]["file"], syms[0]["qual"]) if syms else None

    # -- handlers ----------------------------------------------------------------------------
    async def _symbol_at(self, uri: str, position: types.Position) -> tuple | None:
        """``(indexer, symbol row)`` of the innermost non-module symbol at ``position`` of the
        document ``uri``, or None (no workspace, or no symbol there)."""
        ls = self.server
        owner = ls.locate(uri)
        if owner is None:
            return None
        ix, rel = owner
        ls.refuse_while_indexing(ix, "callers, callees and implementations are")
        await ls.warm_lines([ix.root / rel])
        line1, col = ls.lines().graph_position(ix.root / rel, position)
        at = await ls.answer(ix, queries.target_at, rel, line1, col)
        syms = [r["symbol"] for r in at.rows if r["type"] == "symbol" and r["symbol"]["kind"] != "module"]
        return (ix, syms[0]) if syms else None

    async def prepare(self, params: types.CallHierarchyPrepareParams) -> list[dict] | None:
        ls = self.server
        found = await self._symbol_at(params.text_document.uri, params.position)
        if found is None:
            return None
        ix, sym = found
        await self._warm(ix, [sym["file"]])
        return [self.item(ix, sym, self.lines_of(ix, sym["file"], ls.lines()),
                          ls.uri_speller(params.text_document.uri))]

    async def incoming(self, params: types.CallHierarchyIncomingCallsParams) -> list[dict] | None:
        target = await self._target(params.item)
        if target is None:
            return None
        ix, rel, qual = target
        ls = self.server
        limit = ls.settings.max_callers
        ans = await ls.answer(ix, queries.symbol_callers, rel, qual, None, limit)
        if ans.total is not None:
            # LSP has no way to say a list is partial: say it once per request, in a message
            shown = f"the first {limit}" if ans.total <= queries.SORT_ALL_MAX else f"{limit} of them (the first found)"
            ls.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Info,
                message=f"Orbit: {params.item.name} has {ans.total} callers; the call hierarchy shows {shown} "
                        f"(setting orbit.maxCallers)"))
        await self._warm(ix, {row["file"] for row in ans.rows})
        lines = self.server.lines()
        spell = ls.uri_speller(params.item.uri)
        out = []
        for row in ans.rows:
            caller = self.lines_of(ix, row["file"], lines)
            out.append({"from": self.item(ix, row, caller, spell), "fromRanges": _sites(caller, row)})
        return out

    async def implementation(self, params: types.ImplementationParams) -> list[dict] | None:
        """Implementations of the interface, class or method at the position
        (``queries.symbol_implementations``): locations of their names."""
        ls = self.server
        found = await self._symbol_at(params.text_document.uri, params.position)
        if found is None:
            return None
        ix, sym = found
        ans = await ls.answer(ix, queries.symbol_implementations, sym["file"], sym["qual"])
        await self._warm(ix, {row["file"] for row in ans.rows})
        lines = ls.lines()
        spell = ls.uri_speller(params.text_document.uri)
        return [{"uri": it["uri"], "range": it["selectionRange"]}
                for it in (self.item(ix, row, self.lines_of(ix, row["file"], lines), spell) for row in ans.rows)]

    async def outgoing(self, params: types.CallHierarchyOutgoingCallsParams) -> list[dict] | None:
        target = await self._target(params.item)
        if target is None:
            return None
        ix, rel, qual = target
        ans = await self.server.answer(ix, queries.symbol_callees, rel, qual)
        rows = ans.rows
        # an instantiation is bound both to the class and to its __init__: show the class once
        classes = {(r["file"], r["qual"], tuple(r["lines"] or []), tuple(r["cols"] or []))
                   for r in rows if r["resolved"] == "class"}
        await self._warm(ix, {rel} | {row["file"] for row in rows})
        lines = self.server.lines()
        own = self.lines_of(ix, rel, lines)
        spell = self.server.uri_speller(params.item.uri)
        out = []
        for row in rows:
            if row["resolved"] == "init" and (row["file"], row["qual"].rpartition(".")[0], tuple(row["lines"] or []),
                                              tuple(row["cols"] or [])) in classes:
                continue
            out.append({"to": self.item(ix, row, self.lines_of(ix, row["file"], lines), spell),
                        "fromRanges": _sites(own, row)})
        return out

    async def workspace_symbol(self, params: types.WorkspaceSymbolParams) -> list[types.WorkspaceSymbol]:
        """Symbols whose name contains the query (case-insensitive) across every served folder,
        best matches first, at most ``WORKSPACE_SYMBOL_LIMIT``."""
        ls = self.server
        folders = ls.workspaces.all()
        answers = await asyncio.gather(*(ls.query(queries.workspace_symbols, ix.graph, params.query or "",
                                                  WORKSPACE_SYMBOL_LIMIT) for ix in folders))
        found: list[tuple[Any, ...]] = []
        for ix, ans in zip(folders, answers):
            for r in ans.rows:
                found.append((r["rank"], r["name"], str(ix.root), r["file"], r["line"] or 0, ix, r))
        found.sort(key=lambda t: t[:5])
        await ls.warm_lines([t[5].root / t[3] for t in found[:WORKSPACE_SYMBOL_LIMIT]])
        lines = ls.lines()
        spell = ls.uri_speller()
        out = []
        for *_, ix, r in found[:WORKSPACE_SYMBOL_LIMIT]:
            path = ix.root / r["file"]
            out.append(types.WorkspaceSymbol(
                name=r["name"], kind=KINDS.get(r["kind"], types.SymbolKind.Variable),
                location=types.Location(uri=spell(ix.root, r["file"]),
                                        range=lines.name_range(path, r["line"] or 1, r["col"] or 0, r["name"])),
                container_name=r["qual"].rpartition(".")[0] or None))
        return out
