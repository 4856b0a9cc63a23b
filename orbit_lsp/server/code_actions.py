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

``orbit.removeSymbol`` re-checks the proof against the current text, stores a proposal
(``orbit_lsp.edits.proposals``, in the data dir) and sends ``workspace/applyEdit``: a
``TextDocumentEdit`` on the versioned document with an ``AnnotatedTextEdit`` whose change
annotation needs confirmation (editors show a preview to accept), or plain ``changes`` to a
client that does not declare ``documentChanges``. Outcome, stored on the proposal and answered
as ``{"proposal": id, "status", "reason"}``:

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
from orbit_lsp.server.app import OrbitServer, raw_params
from orbit_lsp.server.lenses import SHOW_IMPACT, Snapshot, index_lock, targets_at

log = logging.getLogger("orbit_lsp.server.code_actions")

REMOVE_SYMBOL = "orbit.removeSymbol"
SHOW_IMPACT_TITLE = "Orbit: show impact"


def remove_title(name: str) -> str:
    return f"Remove `{name}` (no callers, no importers in the workspace)"


def plan(ix, rel: str, data: bytes, line1: int, col: int) -> dict:
    """Query-thread part of a code-action request: ``{"target": targets_at row | None,
    "removal": Removal | None}``. The removal is checked only when the buffer is the indexed
    text and the cursor is on a function/method definition line."""
    found = targets_at(ix, rel, data, line1, col)
    target = found.rows[0] if found is not None and found.rows else None
    with index_lock(ix) as locked:
        rec = queries.file_record(ix.graph, rel)
        same = locked and rec.found and rec.rows[0]["hash"] == content_hash(data)
        sym = None
        if same:
            if target and target["type"] == "symbol" and target["how"] == "definition":
                sym = target["symbol"]
            else:  # anywhere on a def line
                at = queries.symbol_at(ix.graph, rel, line1).rows
                if at and at[0]["line"] == line1 and at[0]["kind"] in ("function", "method"):
                    sym = at[0]
                    if target is None:
                        target = {"type": "symbol", "symbol": sym, "how": "definition"}
        result = None
        if sym is not None and sym["kind"] in ("function", "method"):
            result = rm.check(ix.graph, ix.root, rel, data.decode("utf-8", errors="surrogatepass"), sym)
    return {"target": target, "removal": result}


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
        self._store: ProposalStore | None = None

    @property
    def store(self) -> ProposalStore:
        """Proposal store in the current data dir (re-opened when settings move it)."""
        ddir = self.server.settings.data_dir
        if self._store is None or self._store.path.parent != ddir:
            self._store = ProposalStore.in_data_dir(ddir)
        return self._store

    def register(self) -> None:
        ls = self.server
        ls.on(types.TEXT_DOCUMENT_CODE_ACTION, self.code_action, types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.RefactorRewrite], resolve_provider=False))

        async def remove_symbol(*args):  # pygls commands must be plain functions
            return await self.remove_symbol(*args)

        ls.command(REMOVE_SYMBOL)(remove_symbol)

    # -- textDocument/codeAction ----------------------------------------------------------------
    async def code_action(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        ls = self.server
        uri = params.text_document.uri
        snap = Snapshot.take(ls, uri)
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
        return actions

    # -- orbit.removeSymbol ------------------------------------------------------------------------
    async def remove_symbol(self, *args) -> dict:
        ls = self.server
        arg = raw_params(args[0] if args else None)
        uri, version, qual = arg.get("uri"), arg.get("version"), arg.get("qual")
        if not isinstance(uri, str) or not isinstance(qual, str) or not (version is None or isinstance(version, int)):
            raise JsonRpcInvalidParams(f"{REMOVE_SYMBOL} needs [{{uri: string, version: integer | null, qual: string}}]")
        snap = Snapshot.take(ls, uri)
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
        prop = self.store.create(root, rel, title, text, rem.new_text, version)
        edit = self._workspace_edit(snap, uri, version, rem, title, prop.id)
        try:
            res = await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=title))
            applied = bool(getattr(res, "applied", False))
            reason = getattr(res, "failure_reason", None)
        except Exception as exc:  # noqa: BLE001 - the client's error is an unapplied edit
            applied, reason = False, f"the client answered with an error: {exc}"
        if applied:
            prop = self.store.mark(prop.id, "applied")
        else:
            cur = ls.workspace.text_documents.get(uri)
            moved = cur is not None and cur.version != version
            prop = self.store.mark(prop.id, "stale" if moved else "rejected",
                                   reason or ("the document changed while the edit was pending" if moved
                                              else "not applied by the client"))
        log.info("proposal %s (%s in %s): %s%s", prop.id, title, rel, prop.status,
                 f" ({prop.reason})" if prop.reason else "")
        if prop.status != "applied":
            ls.window_show_message(types.ShowMessageParams(types.MessageType.Info,
                                                           f"orbit: {title}: {prop.status} ({prop.reason})"))
        return {"proposal": prop.id, "status": prop.status, "reason": prop.reason}

    def _refuse(self, root: str, rel: str, title: str, text: str, version, reason: str) -> dict:
        prop = self.store.create(root, rel, title, text, text, version, status="stale", reason=reason)
        log.info("proposal %s (%s in %s): stale (%s)", prop.id, title, rel, reason)
        self.server.window_show_message(types.ShowMessageParams(types.MessageType.Warning,
                                                                f"orbit: {title}: refused as stale: {reason}"))
        return {"proposal": prop.id, "status": prop.status, "reason": prop.reason}

    def _workspace_edit(self, snap: Snapshot, uri: str, version, rem: rm.Removal, title: str, pid: int) -> types.WorkspaceEdit:
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
        rng = types.Range(start, end)
        caps = self.server.client_capabilities
        we = caps.workspace.workspace_edit if caps and caps.workspace else None
        if we is not None and we.document_changes:
            ann_id = f"orbit-proposal-{pid}"
            annotated = we.change_annotation_support is not None
            te = (types.AnnotatedTextEdit(range=rng, new_text="", annotation_id=ann_id) if annotated
                  else types.TextEdit(range=rng, new_text=""))
            return types.WorkspaceEdit(
                document_changes=[types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                    edits=[te])],
                change_annotations={ann_id: types.ChangeAnnotation(
                    label=title, needs_confirmation=True,
                    description=f"orbit proposal {pid}: {rem.reason}")} if annotated else None)
        return types.WorkspaceEdit(changes={uri: [types.TextEdit(range=rng, new_text="")]})
