"""Code actions (``textDocument/codeAction``) and the edits they propose
(``workspace/executeCommand`` → ``workspace/applyEdit``).

Offered at the cursor (``params.range.start``):

- "Orbit: show impact" on any symbol, call, import or file orbit knows: runs the server's
  ``orbit.showImpact`` command (``lenses.SHOW_IMPACT``) with ``[uri, position]``.
- "Remove `f` (no callers, no importers in the workspace)" (kind ``refactor.rewrite``) on the
  definition line of a function or method that the graph proves unused
  (``orbit_lsp.edits.removal``), only while the buffer equals the indexed text. It runs
  ``orbit.removeSymbol`` with ``[{"uri", "version", "qual"}]`` (``version``: the document
  version the action was computed for).
- "Orbit: propose a change…" (kind ``refactor.rewrite``) on a selection, or on the symbol
  under the cursor (its whole lines), and "Orbit: ask about this symbol" on any symbol: see
  ``orbit_lsp.server.propose``.

``orbit.removeSymbol`` re-checks the proof against the current text and hands the edit to the
shared approval path (``orbit_lsp.server.approval``): a stored proposal, sent through
``workspace/applyEdit`` with a change annotation that needs confirmation, its outcome audited.
Answer: ``{"proposal": id, "status", "reason", "diff"}``:

- the document changed since the action was offered (another version, or the proof no longer
  holds) → ``stale``, nothing is sent, the file is untouched;
- the client applied it → ``applied``; it answered ``applied: false`` or an error → ``rejected``
  (or ``stale`` when the document changed while it was being asked), with its reason.
"""

from __future__ import annotations

import logging

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from orbit_lsp.edits import removal as rm
from orbit_lsp.edits.proposals import ProposalStore
from orbit_lsp.graph import queries
from orbit_lsp.index.indexer import content_hash
from orbit_lsp.server import propose
from orbit_lsp.server.app import OrbitServer, raw_params
from orbit_lsp.server.approval import Approvals, Change
from orbit_lsp.index.buffers import index_lock, targets_at
from orbit_lsp.server.lenses import SHOW_IMPACT, Snapshot

log = logging.getLogger("orbit_lsp.server.code_actions")

REMOVE_SYMBOL = "orbit.removeSymbol"
SHOW_IMPACT_TITLE = "Orbit: show impact"


def remove_title(name: str) -> str:
    return f"Remove `{name}` (no callers, no importers in the workspace)"


def plan(ix, rel: str, data: bytes, line1: int, col: int) -> dict:
    """Query-thread part of a code-action request: ``{"target": targets_at row | None,
    "removal": Removal | None, "enclosing": symbol dict | None}``. The removal is checked only
    when the buffer is the indexed text and the cursor is on a function/method definition line;
    ``enclosing`` (the innermost non-module symbol around the cursor's line) is read only when
    the buffer is the indexed text too."""
    found = targets_at(ix, rel, data, line1, col)
    target = found.rows[0] if found is not None and found.rows else None
    enclosing = None
    with index_lock(ix) as locked:
        rec = queries.file_record(ix.graph, rel)
        same = locked and rec.found and rec.rows[0]["hash"] == content_hash(data)
        sym = None
        if same:
            around = queries.symbol_at(ix.graph, rel, line1).rows
            enclosing = around[0] if around and around[0]["kind"] != "module" else None
            if target and target["type"] == "symbol" and target["how"] == "definition":
                sym = target["symbol"]
            else:  # anywhere on a def line
                at = around
                if at and at[0]["line"] == line1 and at[0]["kind"] in ("function", "method"):
                    sym = at[0]
                    if target is None:
                        target = {"type": "symbol", "symbol": sym, "how": "definition"}
        result = None
        if sym is not None and sym["kind"] in ("function", "method"):
            result = rm.check(ix.graph, ix.root, rel, data.decode("utf-8", errors="surrogatepass"), sym)
    return {"target": target, "removal": result, "enclosing": enclosing}


def recheck(ix, rel: str, data: bytes, qual: str) -> rm.Removal:
    """The removal proof for ``qual`` against the current text (refused when it is not the
    indexed text)."""
    with index_lock(ix) as locked:
        rec = queries.file_record(ix.graph, rel)
        if not (locked and rec.found and rec.rows[0]["hash"] == content_hash(data)):
            return rm.Removal(False, f"{rel} differs from the indexed text (save it first)")
        return rm.removal(ix.graph, ix.root, rel, data.decode("utf-8", errors="surrogatepass"), qual)


class Feature:
    def __init__(self, server: OrbitServer):
        self.server = server

    @property
    def approvals(self) -> Approvals:
        return Approvals.of(self.server)

    @property
    def store(self) -> ProposalStore:
        """Proposal store in the current data dir (re-opened when settings move it)."""
        return self.approvals.store

    def register(self) -> None:
        ls = self.server
        ls.on(types.TEXT_DOCUMENT_CODE_ACTION, self.code_action, types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.RefactorRewrite], resolve_provider=False))

        ls.on_command(REMOVE_SYMBOL, self.remove_symbol)

    # -- textDocument/codeAction ----------------------------------------------------------------
    async def code_action(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        ls = self.server
        uri = params.text_document.uri
        snap = await Snapshot.load(ls, uri)
        if snap is None or snap.ix.last_index_time is None:
            return []
        pos = params.range.start
        line1, col = snap.graph_position(pos)
        res = await ls.query(plan, snap.ix, snap.rel, snap.data, line1, col)
        only = list(params.context.only or []) if params.context else []

        def wanted(kind: str | None) -> bool:
            return not only or (kind is not None and any(kind == o or kind.startswith(o + ".") for o in only))

        actions: list[types.CodeAction] = []
        rem: rm.Removal | None = res["removal"]
        if rem is not None and rem.ok and wanted(types.CodeActionKind.RefactorRewrite):
            doc = ls.workspace.text_documents.get(uri)
            title = remove_title(rem.symbol["name"])
            actions.append(types.CodeAction(
                title=title, kind=types.CodeActionKind.RefactorRewrite,
                command=types.Command(title=title, command=REMOVE_SYMBOL, arguments=[{
                    "uri": uri, "version": doc.version if doc is not None else None,
                    "qual": rem.symbol["qual"]}])))
        target = res["target"]
        if target is not None and wanted(None):
            at = pos
            if target["type"] == "symbol" and target["how"] == "definition":
                s = target["symbol"]
                at = snap.position(s["line"], s["col"])
            actions.append(types.CodeAction(
                title=SHOW_IMPACT_TITLE,
                command=types.Command(title=SHOW_IMPACT_TITLE, command=SHOW_IMPACT,
                                      arguments=[uri, {"line": at.line, "character": at.character}])))
        actions += propose.actions(ls, snap, params.range, target, res["enclosing"], wanted)
        return actions

    # -- orbit.removeSymbol ------------------------------------------------------------------------
    async def remove_symbol(self, *args) -> dict:
        ls = self.server
        arg = raw_params(args[0] if args else None)
        uri, version, qual = arg.get("uri"), arg.get("version"), arg.get("qual")
        if not isinstance(uri, str) or not isinstance(qual, str) or not (version is None or isinstance(version, int)):
            raise JsonRpcInvalidParams(f"{REMOVE_SYMBOL} needs [{{uri: string, version: integer | null, qual: string}}]")
        snap = await Snapshot.load(ls, uri)
        if snap is None:
            raise JsonRpcInvalidParams(f"{uri} is not in an indexed workspace folder")
        doc = ls.workspace.text_documents.get(uri)
        now_version = doc.version if doc is not None else None
        name = qual.rsplit(".", 1)[-1]
        title = remove_title(name)
        root, rel, text = str(snap.ix.root), snap.rel, snap.text
        if now_version != version:
            return self._refuse(root, rel, title, text, version,
                                f"the document changed since the action was offered (version {version}, now {now_version})")
        rem = await ls.query(recheck, snap.ix, rel, snap.data, qual)
        if not rem.ok:
            return self._refuse(root, rel, title, text, version, f"no longer proven removable: {rem.reason}")
        return await self.approvals.send(Change(
            origin="removal", uri=uri, version=version, root=root, rel=rel, title=title, old_text=text,
            new_text=rem.new_text, range=removal_range(snap, rem), replacement="", description=rem.reason))

    def _refuse(self, root: str, rel: str, title: str, text: str, version, reason: str) -> dict:
        return self.approvals.refuse("removal", root, rel, title, text, version, reason)


def removal_range(snap: Snapshot, rem: rm.Removal) -> types.Range:
    """The client range of the lines a removal deletes (whole lines with their ends; at the end of
    a document whose last line has no line end, the line end before the block goes too)."""
    lines = snap.lines.texts
    start = types.Position(rem.start, 0)
    if rem.end < len(lines) or (lines and lines[-1].endswith(("\n", "\r"))):
        end = types.Position(rem.end, 0)
    else:  # to the end of a document whose last line has no line end
        last = len(lines) - 1
        end = types.Position(last, snap.codec.client_num_units(lines[last]))
        if rem.start > 0:
            # keep the line end before the removed block out of the edit's way
            prev = lines[rem.start - 1].rstrip("\r\n")
            start = types.Position(rem.start - 1, snap.codec.client_num_units(prev))
    return types.Range(start, end)
