"""Custom requests: ``orbit/impact`` and ``orbit/status``.

Params are taken raw and validated here, so a malformed request gets an InvalidParams error
instead of no answer at all.

``orbit/impact`` params: ``{"textDocument": {"uri"}, "position"?: {"line", "character"}}``.
Result: ``{"target": {...}, "dependents": [{"path", "uri", "hops"}], "dependentsTotal": {"all",
"byHops"}, "callers": [...] | null, "callersTotal": {"all", "byDepth"} | null, "cypher": [{"query",
"params"}], "notes": [...]}``; ``target`` is ``{"type": "file", "path", "uri"}`` or ``{"type":
"symbol", "qual", "name", "kind", "path", "uri", "line"}`` (1-based) or ``{"type": "package",
"name"}``; ``callers`` is set when a symbol is targeted (each with ``path``, ``uri``, ``qual``,
``line``, ``depth``). Dependents are the files importing the target's file (for a package: the
files using it, at 1 hop), nearest first (by hops, then path), at most ``settings.max_dependents``
of them; callers at most ``settings.max_callers``. The totals count every one (``byHops``/
``byDepth``: how many at each hop, the first at 1), and a note says when a list is cut.

``orbit/status`` params: none. Result: ``{"falkordb": {"where", "mode", "online", "error"},
"workspaces": [{"root", "graph", "branch", "graph_key", "files", "symbols", "calls", "imports",
"last_index"}],
"agent": {"model", "endpoint", "apiKey"}}`` (``endpoint``: where model requests, with the API key
when one is set, are sent; ``apiKey``: whether one is set).
"""

from __future__ import annotations

from typing import Any

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from orbit_lsp.graph import keys, queries
from orbit_lsp.index.buffers import file_impact
from orbit_lsp.server.app import REQUEST_FAILED, OrbitServer, lsp_position, raw_params


def _text_document_uri(params: dict) -> str:
    td = params.get("textDocument")
    uri = td.get("uri") if isinstance(td, dict) else None
    if not isinstance(uri, str) or not uri:
        raise JsonRpcInvalidParams("params.textDocument.uri (a string) is required")
    return uri


def _position(params: dict) -> tuple[int, int] | None:
    pos = params.get("position")
    if pos is None:
        return None
    p = lsp_position(pos, "params.position")
    return p.line, p.character


OPENAI_DEFAULT_ENDPOINT = "https://api.openai.com/v1"  # the openai package's default base URL


def agent_status(settings) -> dict:
    """Where model requests go, so the user sees which endpoint receives the API key:
    ``{"model": str | None, "endpoint": str, "apiKey": bool}`` (the key itself never)."""
    return {"model": settings.agent_model, "endpoint": settings.agent_base_url or OPENAI_DEFAULT_ENDPOINT,
            "apiKey": settings.agent_api_key is not None and bool(settings.agent_api_key.get_secret_value())}


def cut_note(target: dict, total: int, listed: int, max_hops: int) -> str:
    """The note of an ``orbit/impact`` answer about ``target`` listing ``listed`` of ``total``
    dependent files (``total`` > ``listed``: the list was cut at ``max_dependents``)."""
    which = (f"{total} files use package {target['name']}; listing the first {listed} by path"
             if target["type"] == "package" else
             f"{total} files depend on {target['path']} within {max_hops} hops; listing the nearest {listed}")
    return f"{which} (setting orbit.maxDependents)"


class Feature:
    def __init__(self, server: OrbitServer):
        self.server = server

    def register(self) -> None:
        self.server.on("orbit/impact", self.impact)
        self.server.on("orbit/status", self.status)

    async def impact(self, params: Any) -> dict:
        p = raw_params(params)
        return await self.impact_of(_text_document_uri(p), _position(p))

    async def impact_of(self, uri: str, pos: tuple[int, int] | None, at: dict | None = None) -> dict:
        """The ``orbit/impact`` result for a document and optional LSP (line, character). ``at``:
        the target already found (a ``queries.target_at`` row, e.g. by the lens command, which
        knows the symbol even when the buffer differs from the graph) instead of looking at
        ``pos``."""
        from lsprotocol import types

        ls = self.server
        owner = ls.locate(uri)
        if owner is None:
            raise JsonRpcException(f"{uri} is not in an indexed workspace folder", code=REQUEST_FAILED)
        ix, rel = owner
        ls.refuse_while_indexing(ix, "impact is")  # the graph is not final: no count would be right
        path = ix.root / rel
        spell = ls.uri_speller(uri)
        target: dict | None = None
        cypher: list[dict] = []
        notes: list[str] = []
        if at is not None:
            target = at
        elif pos is not None:
            await ls.warm_lines([path])  # the file is read off the event loop
            line1, col = ls.to_graph_position(path, types.Position(*pos))
            at = await ls.answer(ix, queries.target_at, rel, line1, col)
            cypher += at.cypher
            if at.rows:
                target = at.rows[0]
        callers = callers_total = None
        if target is None or target["type"] == "file":
            file_rel = target["path"] if target else rel
            ans = await ls.query(file_impact, ix, file_rel, ls.settings.max_hops)
            target = {"type": "file", "path": file_rel, "uri": spell(ix.root, file_rel)}
        elif target["type"] == "package":
            ans = await ls.answer(ix, queries.package_users, target["name"])
            target = {"type": "package", "name": target["name"]}
        else:
            s = target["symbol"]
            ans = await ls.query(file_impact, ix, s["file"], ls.settings.max_hops)
            walk = await ls.answer(ix, queries.symbol_impact, s["file"], s["qual"], ls.settings.max_hops,
                                  ls.settings.max_callers)
            cypher += walk.cypher
            notes += walk.notes
            callers_total = {"all": walk.total, "byDepth": walk.by_depth}
            callers = [{"qual": c["qual"], "name": c["name"], "kind": c["kind"], "path": c["file"],
                        "uri": spell(ix.root, c["file"]), "line": c["line"], "depth": c["depth"]}
                       for c in walk.rows]
            target = {"type": "symbol", "qual": s["qual"], "name": s["name"], "kind": s["kind"],
                      "path": s["file"], "uri": spell(ix.root, s["file"]), "line": s["line"]}
        cypher += ans.cypher
        notes += ans.notes
        if target["type"] == "package":  # its users import it directly: 1 hop each
            total, by_hops = len(ans.rows), [len(ans.rows)] if ans.rows else []
        else:
            total, by_hops = ans.total or 0, list(ans.by_depth or [])
        dependents = [{"path": r["path"], "uri": spell(ix.root, r["path"]), "hops": r.get("hops", 1)}
                      for r in ans.rows[:ls.settings.max_dependents]]
        if len(dependents) < total:
            notes.append(cut_note(target, total, len(dependents), ls.settings.max_hops))
        return {"target": target, "dependents": dependents, "dependentsTotal": {"all": total, "byHops": by_hops},
                "callers": callers, "callersTotal": callers_total, "cypher": cypher, "notes": notes}

    async def status(self, params: Any = None) -> dict:
        raw_params(params)
        ls = self.server
        online = ls.offline is None and await self._healthy()
        out = {"falkordb": {"where": ls.store.where, "mode": "embedded" if ls.store.embedded else "external",
                            "online": online, "error": str(ls.offline) if ls.offline else None},
               "workspaces": [], "agent": agent_status(ls.settings)}
        for ix in ls.workspaces.all():
            entry: dict[str, Any] = {"root": str(ix.root), "graph": ix.graph.name,
                                     "last_index": ix.last_index_time, "skipped": len(ix.skipped),
                                     "indexing": ls.indexing(ix), "progress": ls.first_index.get(ix.root)}
            gk = keys.workspace_key(ix.root, ls.settings.graph_key)  # which branch or key the graph is of
            entry["branch"], entry["graph_key"] = (gk.branch, gk.key) if gk.name == ix.graph.name else (None, None)
            if online and ix.last_index_time is not None:
                counts = (await ls.query(queries.counts, ix.graph)).rows[0]
                entry.update(counts)
            out["workspaces"].append(entry)
        return out

    async def _healthy(self) -> bool:
        import asyncio

        return await asyncio.get_running_loop().run_in_executor(self.server.query_pool, self.server.store.healthy)
