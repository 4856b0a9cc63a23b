"""Hover (``textDocument/hover``): a Markdown impact summary of exactly what is under the cursor.

- The name of a definition, or a call site whose callee is bound: the symbol's kind, qualified
  name and ``path:line``, its decorators, its direct callers (up to ``MAX_CALLERS`` listed,
  with the total, and a note when call sites that could not be bound use the same name), the
  files depending on its file by hop, and the packages its file uses.
- An import line: the imported file's summary (dependents by hop, packages), or for a package
  the files that use it.
- Anything else (whitespace, punctuation, a name orbit did not bind): no hover (``None``).

Symbols are identified by file and qualified name, so same-named symbols elsewhere are never
mixed in. The position is looked up in the buffer as the client sees it (see ``lenses``: when
the buffer differs from the indexed file it is parsed and bound in memory). The hover range is
the identifier under the cursor.

While the folder's first index runs (``OrbitServer.indexing``), the name of a definition gets its
kind, qualified name and place (parsed from the buffer) and "indexing…" for its callers and
dependents, which are not known before every file is indexed; anything else gets no hover.
"""

from __future__ import annotations

import asyncio

from lsprotocol import types

from orbit_lsp.index.buffers import MAX_CALLERS, SHOWN_PER_HOP, summaries_at
from orbit_lsp.index.cold import cold_definition_at
from orbit_lsp.markdown import code, escape
from orbit_lsp.server.app import OrbitServer
from orbit_lsp.server.lenses import Snapshot


# -- Markdown -------------------------------------------------------------------------------------------
def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _some(items: list[str], limit: int, count: int | None = None) -> str:
    """The first ``limit`` names or paths of ``items`` as code spans, with "…" when there are
    more (``count`` of them in all when ``items`` holds only the first; by default
    ``len(items)``); only those shown are formatted (a file can have thousands of dependents)."""
    shown = items[:limit]
    return ", ".join(code(i) for i in shown) + (", …" if (len(items) if count is None else count) > len(shown) else "")


def _dependents(path: str, deps: list[dict], by_hop: list[int], max_hops: int) -> list[str]:
    """The dependents lines of a summary: ``by_hop`` counts them at each hop, and the first
    ``SHOWN_PER_HOP`` of each in ``deps`` (by path: ``index.buffers.summaries_at`` gives no more)
    are listed: a file of the scale corpus has 2,500 dependents, and listing and sorting them
    all was half of a hover's time."""
    total = sum(by_hop)
    if not total:
        return [f"**Dependents** of {code(path)}: none (no workspace file imports it, up to {_plural(max_hops, 'hop')})"]
    lines = [f"**Dependents** of {code(path)}: {_plural(total, 'file')}"]
    listed: dict[int, list[str]] = {}
    for d in deps:
        listed.setdefault(d["hops"], []).append(d["path"])
    for hop, n in enumerate(by_hop, 1):
        if n:
            lines.append(f"- hop {hop}: {_plural(n, 'file')} ({_some(listed.get(hop, []), SHOWN_PER_HOP, n)})")
    return lines


def _packages(path: str, packages: list[dict]) -> str:
    if not packages:
        return f"**Packages** used by {code(path)}: none"
    names = [code(p["name"]) + (" (stdlib)" if p["stdlib"] else "") for p in packages]
    return f"**Packages** used by {code(path)}: " + ", ".join(names)


def render(item: dict, max_hops: int) -> str:
    """Markdown of one summary from ``index.buffers.summaries_at``; every name and path is a
    code span (``markdown.code``: ``__init__.py`` stays ``__init__.py``)."""
    if item["type"] == "package":
        users = item["users"]
        about = f" ({escape(item['about'][0])})" if item["about"] else ""
        return (f"**package** {code(item['name'])}{about}\n\nUsed by {_plural(len(users), 'workspace file')}"
                + (f": {_some(users, MAX_CALLERS)}" if users else ""))
    if item["type"] == "file":
        parts = [f"**file** {code(item['path'])} · {_plural(item['symbols'], 'symbol')}"]
        parts.append("\n".join(_dependents(item["path"], item["dependents"], item["dependents_by_hop"], max_hops)))
        parts.append(_packages(item["path"], item["packages"]))
        return "\n\n".join(parts)
    s = item["symbol"]
    parts = [f"**{s['kind']}** {code(s['qual'])} · {code(str(s['file']) + ':' + str(s['line']))}"]
    if item["decorators"]:
        parts.append("Decorated with (workspace decorators) " + ", ".join(code(d) for d in item["decorators"]))
    callers, total = item["callers"], item["callers_total"]
    lines = [f"**{_plural(total, 'direct caller')}**" + (":" if callers else "")]
    for c in callers:
        at = c["lines"][0] if c.get("lines") else c["line"]
        lines.append(f"- {code(c['qual'])} · {code(str(c['file']) + ':' + str(at))}")
    if total > len(callers):
        lines.append(f"- … and {total - len(callers)} more")
    if item["recursive"]:
        lines.append("- (it also calls itself)")
    parts.append("\n".join(lines))
    if item.get("implicit"):
        parts.append(f"_It runs without a call expression ({item['implicit']}), which the graph does not follow: "
                     f"its callers are not all known, the count is a lower bound._")
    n = item["unresolved_elsewhere"]
    if n:
        parts.append(f"_{_plural(n, 'function')} {'makes' if n == 1 else 'make'} calls to {code(s['name'])} that "
                     f"could not be bound: they may call it too, so the count is a lower bound._")
        unbound = item.get("unbound") or {"total": 0, "sites": []}
        if unbound["sites"]:
            more = unbound["total"] - len(unbound["sites"])
            parts.append("Unbound calls to this name: " + ", ".join(
                f"`{x['file']}:{x['line']}` (in `{x['caller']}`)" for x in unbound["sites"])
                + (f", … and {more} more" if more > 0 else ""))
    parts.append("\n".join(_dependents(s["file"], item["dependents"], item["dependents_by_hop"], max_hops)))
    parts.append(_packages(s["file"], item["packages"]))
    return "\n\n".join(parts)


def render_indexing(symbol: dict, note: str) -> str:
    """Markdown of a definition (``index.cold.cold_definition_at``) while its folder's first index
    runs: what it is, and that its callers and dependents are not known yet."""
    return (f"**{symbol['kind']}** {code(symbol['qual'])} · {code(str(symbol['file']) + ':' + str(symbol['line']))}"
            f"\n\n_indexing…: callers and dependents are counted once the folder is indexed ({escape(note)})_")


class Feature:
    def __init__(self, server: OrbitServer):
        self.server = server

    def register(self) -> None:
        self.server.on(types.TEXT_DOCUMENT_HOVER, self.hover)

    def _markup_kind(self) -> types.MarkupKind:
        caps = self.server.client_capabilities
        td = caps.text_document if caps else None
        formats = td.hover.content_format if td and td.hover else None
        if formats and types.MarkupKind.Markdown not in formats:
            return types.MarkupKind.PlainText
        return types.MarkupKind.Markdown

    async def hover(self, params: types.HoverParams) -> types.Hover | None:
        ls = self.server
        await ls.wait_served()
        snap = await Snapshot.load(ls, params.text_document.uri)
        if snap is None:
            return None
        indexing = ls.indexing(snap.ix)
        if snap.ix.last_index_time is None and not indexing:
            return None
        rng = snap.word_range(params.position)
        if rng is None:
            return None  # whitespace, punctuation, past the end of the line
        line1, col = snap.graph_position(params.position)
        if indexing:
            found = await asyncio.get_running_loop().run_in_executor(
                ls.file_pool, cold_definition_at, snap.ix, snap.rel, snap.path, snap.data, line1, col)
            if found is None:
                return None
            return types.Hover(contents=types.MarkupContent(kind=self._markup_kind(),
                                                            value=render_indexing(found, ls.indexing_note(snap.ix))),
                               range=rng)
        items = await ls.query(summaries_at, snap.ix, snap.rel, snap.data, line1, col, ls.settings.max_hops)
        if not items:
            return None
        text = "\n\n---\n\n".join(render(i, ls.settings.max_hops) for i in items)
        return types.Hover(contents=types.MarkupContent(kind=self._markup_kind(), value=text), range=rng)
