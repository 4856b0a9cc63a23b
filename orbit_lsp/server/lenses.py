"""Code lenses (``textDocument/codeLens`` + ``codeLens/resolve``) and the ``orbit.showImpact``
command they run.

- Line 0 of every indexed file: "N dependents, H hops" (files importing it, transitively up to
  ``settings.max_hops``; H is the largest minimal hop count), "0 dependents" when none.
- On the name of each function, method and class: "N callers" (distinct direct callers, the
  symbol itself excluded; "· recursive" when it calls itself), and, when call sites that could
  not be bound use the same name, a note that they may add more: a lower bound is said to be one.

One lens request costs a fixed handful of graph queries (``queries.file_lens_data``), whatever
the number of symbols. ``codeLens`` returns lenses without a command whose ``data`` is
``{"uri", "target": {"type": "file", "path"} | {"type": "symbol", "qual", "name"}, "counts":
{...}}`` (counts that are zero or false are left out); ``codeLens/resolve`` turns the counts
into the title and the command ``orbit.showImpact`` with arguments ``[uri]`` (file lens) or
``[uri, {"line", "character"}]`` (the start of the lens's range: the symbol's name). The command answers what ``orbit/impact`` answers for that
target and shows a one-line summary with ``window/showMessage``.

Buffer consistency: graph line numbers are only put on text whose content hash equals the
indexed one (``File.hash``). When the open document differs (unsaved edits, or a file rewritten
on disk and not yet reloaded), its symbols are re-extracted in memory (no graph writes) and the
lenses sit on the buffer's lines, for the symbols the graph also has (counts from the graph); a
buffer that does not parse gets only the file lens. Reads hold the indexer's lock (bounded wait)
so that a lens never mixes two versions of a file that is being re-indexed.

``Snapshot`` is shared with ``hover`` and the code actions; the buffer-aware graph reads
(``lens_work``, ``targets_at``) are in ``index.buffers``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from orbit_lsp.index.buffers import lens_work, targets_at
from orbit_lsp.index.indexer import WorkspaceIndexer
from orbit_lsp.server.app import OrbitServer
from orbit_lsp.server.lines import Lines

SHOW_IMPACT = "orbit.showImpact"


# -- what the client sees ---------------------------------------------------------------------------
@dataclass
class Snapshot:
    """One document as the client sees it at request time: the open buffer, else the file on
    disk. Positions are converted against this text only, so an edit that arrives while a
    request is being answered cannot shift its results."""

    uri: str
    path: Path
    ix: WorkspaceIndexer
    rel: str
    text: str
    data: bytes
    lines: Lines

    @classmethod
    def take(cls, ls: OrbitServer, uri: str) -> "Snapshot | None":
        owner = ls.locate(uri)
        if owner is None:
            return None
        ix, rel = owner
        path = ix.root / rel
        doc = ls.workspace.text_documents.get(uri) or ls.workspace.text_documents.get(ls.uri_of(path))
        if doc is not None:
            text = doc.source
            data = text.encode("utf-8", errors="surrogatepass")
        else:
            try:
                data = path.read_bytes()
            except OSError:
                return None
            text = data.decode("utf-8", errors="replace")
        return cls(uri, path, ix, rel, text, data, Lines.of(text, ls.workspace.position_codec))

    @property
    def codec(self) -> Any:
        return self.lines.codec

    def position(self, line1: int, byte_col: int) -> types.Position:
        return self.lines.position(line1, byte_col)

    def graph_position(self, pos: types.Position) -> tuple[int, int]:
        return self.lines.graph_position(pos)

    def word_range(self, pos: types.Position) -> types.Range | None:
        return self.lines.word_range(pos)


# -- titles ------------------------------------------------------------------------------------------
def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def file_title(counts: dict) -> str:
    n, hops = counts.get("dependents", 0), counts.get("hops", 0)
    return "0 dependents" if not n else f"{_plural(n, 'dependent')}, {_plural(hops, 'hop')}"


def symbol_title(name: str, counts: dict) -> str:
    title = _plural(counts.get("callers", 0), "caller")
    if counts.get("recursive"):
        title += " · recursive"
    unresolved = counts.get("unresolved_elsewhere", 0)
    if unresolved:
        title += f" · unresolved calls to '{name}' in {_plural(unresolved, 'function')} may add more"
    return title


# -- the feature ---------------------------------------------------------------------------------------
class Feature:
    def __init__(self, server: OrbitServer):
        self.server = server

    def register(self) -> None:
        ls = self.server
        ls.on(types.TEXT_DOCUMENT_CODE_LENS, self.code_lens, types.CodeLensOptions(resolve_provider=True))
        ls.on(types.CODE_LENS_RESOLVE, self.resolve)

        ls.on_command(SHOW_IMPACT, self.show_impact)

    async def code_lens(self, params: types.CodeLensParams) -> list[dict]:
        """The lenses as plain JSON (each a ``CodeLens``): a large file has hundreds, and
        having cattrs unstructure each ``types.CodeLens`` costs more than the rest of the
        request."""
        ls = self.server
        uri = params.text_document.uri
        snap = Snapshot.take(ls, uri)
        if snap is None or snap.ix.last_index_time is None:
            return []  # not in a served folder, or the initial index has not finished
        res = await ls.query(lens_work, snap.ix, snap.rel, snap.data, ls.settings.max_hops)
        if res is None:
            return []  # not in the graph (skipped, excluded, not indexed yet)
        zero = {"line": 0, "character": 0}
        lenses = [{"range": {"start": zero, "end": zero}, "data": {
            "uri": uri, "target": {"type": "file", "path": snap.rel},
            "counts": {"dependents": res["dependents"], "hops": res["hops"]}}}]
        lines = snap.lines
        for s in res["symbols"]:
            line0, c = max(0, s["line"] - 1), lines.character(s["line"], s["col"])
            counts = {"callers": s["callers"]}
            if s["recursive"]:
                counts["recursive"] = True
            if s["unresolved_elsewhere"]:
                counts["unresolved_elsewhere"] = s["unresolved_elsewhere"]
            lenses.append({"range": {"start": {"line": line0, "character": c},
                                     "end": {"line": line0, "character": c + lines.units(s["name"])}},
                           "data": {"uri": uri, "target": {"type": "symbol", "qual": s["qual"], "name": s["name"]},
                                    "counts": counts}})
        return lenses

    def resolve(self, lens: types.CodeLens) -> types.CodeLens:
        data = lens.data if isinstance(lens.data, dict) else None
        target = data.get("target") if data else None
        if not (data and isinstance(target, dict) and isinstance(data.get("uri"), str)):
            raise JsonRpcInvalidParams("codeLens/resolve: this lens was not made by orbit-lsp (no data)")
        counts = data.get("counts") or {}
        if target.get("type") == "file":
            lens.command = types.Command(title=file_title(counts), command=SHOW_IMPACT, arguments=[data["uri"]])
        else:
            at = lens.range.start
            lens.command = types.Command(title=symbol_title(str(target.get("name", "")), counts), command=SHOW_IMPACT,
                                         arguments=[data["uri"], {"line": at.line, "character": at.character}])
        return lens

    # -- orbit.showImpact ----------------------------------------------------------------------
    async def show_impact(self, *args) -> dict:
        """``orbit.showImpact(uri, position?)``: the ``orbit/impact`` result for that file or the
        symbol at ``position`` (found in the buffer as the lens saw it), plus a showMessage."""
        ls = self.server
        uri = args[0] if args else None
        if not isinstance(uri, str) or not uri:
            raise JsonRpcInvalidParams(f"{SHOW_IMPACT} needs a document URI as its first argument")
        pos = _position_arg(args[1] if len(args) > 1 else None)
        requests = next((f for f in ls.features if hasattr(f, "impact_of")), None)
        if requests is None:
            raise JsonRpcInvalidParams(f"{SHOW_IMPACT}: orbit/impact is not available")
        at = None
        lookup: list[dict] = []
        if pos is not None:
            snap = Snapshot.take(ls, uri)
            if snap is not None and snap.ix.last_index_time is not None:
                line1, col = snap.graph_position(pos)
                found = await ls.query(targets_at, snap.ix, snap.rel, snap.data, line1, col)
                if found is not None:
                    at = found.rows[0] if found.rows else None
                    lookup = found.cypher
        result = await requests.impact_of(uri, None, at=at)
        result["cypher"] = lookup + result["cypher"]
        ls.window_show_message(types.ShowMessageParams(types.MessageType.Info, impact_message(result)))
        return result


def _position_arg(value: Any) -> types.Position | None:
    if value is None:
        return None
    if hasattr(value, "_asdict"):
        value = value._asdict()
    if isinstance(value, types.Position):
        return value
    if isinstance(value, dict):
        line, ch = value.get("line"), value.get("character")
        if isinstance(line, int) and isinstance(ch, int) and not isinstance(line, bool) and line >= 0 and ch >= 0:
            return types.Position(line, ch)
    raise JsonRpcInvalidParams(f"{SHOW_IMPACT}: the second argument must be a position {{line, character}}")


def impact_message(result: dict) -> str:
    """One line for window/showMessage from an ``orbit/impact`` result."""
    t = result.get("target") or {}
    deps = result.get("dependents") or []
    hops = max((d["hops"] for d in deps), default=0)
    dep_text = f"{_plural(len(deps), 'dependent file')}" + (f" (up to {_plural(hops, 'hop')})" if deps else "")
    if t.get("type") == "symbol":
        callers = result.get("callers") or []
        total = result.get("callersTotal") or {}
        by_depth = total.get("byDepth") or []
        direct = by_depth[0] if by_depth else sum(1 for c in callers if c.get("depth") == 1)
        n = total.get("all", len(callers))
        msg = (f"orbit: {t.get('kind')} {t.get('qual')}: {_plural(direct, 'direct caller')}, "
               f"{_plural(n, 'caller')} in all" + (f" (up to {_plural(len(by_depth), 'hop')})" if by_depth else "")
               + f"; {t.get('path')} has {dep_text}")
    elif t.get("type") == "package":
        msg = f"orbit: package {t.get('name')} is used by {_plural(len(deps), 'file')}"
    else:
        msg = f"orbit: {t.get('path')} has {dep_text}"
    notes = result.get("notes") or []
    return msg + (f" ({'; '.join(notes)})" if notes else "")
