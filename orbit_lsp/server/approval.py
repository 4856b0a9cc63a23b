"""The one path by which orbit changes a file: a proposal the client must approve.

Used by the graph-derived removal (``code_actions``) and by agent-proposed changes
(``propose``). ``Approvals.of(server)`` (one per server) holds the proposal store
(``orbit_lsp.edits.proposals``, ``<data_dir>/proposals.sqlite3``) and the history whose audit log
(``orbit_lsp.agent.history``, ``<data_dir>/history.sqlite3``) gets one ``edit_decision`` record
per outcome.

``await approvals.send(change)`` stores a proposal for a ``Change`` and sends
``workspace/applyEdit``: a ``TextDocumentEdit`` on the versioned document with an
``AnnotatedTextEdit`` whose change annotation needs confirmation (editors show a preview to
accept), or plain ``changes`` to a client that does not declare ``documentChanges``. Outcome,
stored on the proposal, audited and answered as ``{"proposal": id, "status", "reason", "diff"}``:

- the document changed since the edit was computed (another version) → ``stale``, nothing is
  sent, the file is untouched;
- the client applied it → ``applied``; it answered ``applied: false`` or an error → ``rejected``
  (or ``stale`` when the document changed while it was being asked), with its reason.

``approvals.refuse(...)`` records a change refused before anything was sent (``stale``), and
``approvals.failed(...)`` audits a change that could not even be proposed (no proposal is
stored: there is no edit). Audit records (kind ``edit_decision``) hold ``origin``
(``"removal"`` | ``"proposal"``), ``decision`` (``applied`` | ``rejected`` | ``stale`` |
``failed``), ``proposal`` (id or null), ``workspace``, ``path``, ``title``, ``version``,
``reason`` — never file contents.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types

from orbit_lsp.agent.history import History
from orbit_lsp.edits.proposals import ProposalStore

log = logging.getLogger("orbit_lsp.server.approval")

AUDIT_KIND = "edit_decision"


@dataclass
class Change:
    """One edit of one document, computed against ``old_text`` (the whole document at
    ``version``): ``range`` (client position encoding) is replaced by ``replacement``, giving
    ``new_text``. ``origin``: ``"removal"`` | ``"proposal"``; ``description``: shown with the
    change annotation."""

    origin: str
    uri: str
    version: int | None
    root: str
    rel: str
    title: str
    old_text: str
    new_text: str
    range: types.Range
    replacement: str
    description: str


class Approvals:
    """Proposal store + audit + the ``workspace/applyEdit`` round trip for one server."""

    def __init__(self, server):
        self.server = server
        self._store: ProposalStore | None = None
        self._history: History | None = None

    @classmethod
    def of(cls, server) -> "Approvals":
        """The server's instance (created on first use)."""
        inst = getattr(server, "_orbit_approvals", None)
        if inst is None:
            inst = cls(server)
            server._orbit_approvals = inst
        return inst

    @property
    def store(self) -> ProposalStore:
        """Proposal store in the current data dir (re-opened when settings move it)."""
        ddir = Path(self.server.settings.data_dir)
        if self._store is None or self._store.path.parent != ddir:
            self._store = ProposalStore.in_data_dir(ddir)
        return self._store

    @property
    def history(self) -> History:
        """History (audit log) in the current data dir (re-opened when settings move it)."""
        ddir = Path(self.server.settings.data_dir)
        if self._history is None or self._history.path.parent != ddir:
            if self._history is not None:
                self._history.close()
            self._history = History.open(ddir)
        return self._history

    def audit(self, origin: str, decision: str, *, root: str, rel: str, title: str, version: int | None,
              reason: str | None, proposal: int | None = None, **extra) -> None:
        """One ``edit_decision`` audit record; a broken history never breaks the edit path."""
        try:
            self.history.audit(AUDIT_KIND, origin=origin, decision=decision, proposal=proposal, workspace=root,
                               path=rel, title=title, version=version, reason=reason, **extra)
        except Exception:  # noqa: BLE001 - logged; the decision itself is in the proposal store
            log.exception("audit of %s decision failed", origin)

    def failed(self, origin: str, root: str, rel: str, title: str, version: int | None, reason: str, **extra) -> dict:
        """A change that could not be proposed (no edit exists): audited, shown, answered as
        ``{"proposal": None, "status": "failed", "reason", "diff": None}``."""
        self.audit(origin, "failed", root=root, rel=rel, title=title, version=version, reason=reason, **extra)
        log.info("%s (%s in %s): failed (%s)", origin, title, rel, reason)
        self.server.window_show_message(types.ShowMessageParams(types.MessageType.Warning,
                                                                f"orbit: {title}: failed ({reason})"))
        return {"proposal": None, "status": "failed", "reason": reason, "diff": None}

    def refuse(self, origin: str, root: str, rel: str, title: str, text: str, version: int | None, reason: str,
               new_text: str | None = None) -> dict:
        """A change refused as stale before anything was sent: stored (with its diff when
        ``new_text`` is known), audited, shown."""
        prop = self.store.create(root, rel, title, text, text if new_text is None else new_text, version,
                                 status="stale", reason=reason)
        self.audit(origin, "stale", root=root, rel=rel, title=title, version=version, reason=reason, proposal=prop.id)
        log.info("proposal %s (%s in %s): stale (%s)", prop.id, title, rel, reason)
        self.server.window_show_message(types.ShowMessageParams(types.MessageType.Warning,
                                                                f"orbit: {title}: refused as stale: {reason}"))
        return {"proposal": prop.id, "status": prop.status, "reason": prop.reason, "diff": prop.diff}

    def _now_version(self, uri: str) -> int | None:
        doc = self.server.workspace.text_documents.get(uri)
        return doc.version if doc is not None else None

    async def send(self, ch: Change) -> dict:
        """Store ``ch`` as a proposal and ask the client to apply it (see the module docstring)."""
        ls = self.server
        now = self._now_version(ch.uri)
        if now != ch.version:
            return self.refuse(ch.origin, ch.root, ch.rel, ch.title, ch.old_text, ch.version,
                               f"the document changed since the edit was computed (version {ch.version}, now {now})",
                               new_text=ch.new_text)
        prop = self.store.create(ch.root, ch.rel, ch.title, ch.old_text, ch.new_text, ch.version)
        edit = self._workspace_edit(ch, prop.id)
        try:
            res = await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=ch.title))
            applied = bool(getattr(res, "applied", False))
            reason = getattr(res, "failure_reason", None)
        except Exception as exc:  # noqa: BLE001 - the client's error is an unapplied edit
            applied, reason = False, f"the client answered with an error: {exc}"
        if applied:
            prop = self.store.mark(prop.id, "applied")
        else:
            now = self._now_version(ch.uri)
            moved = now != ch.version
            prop = self.store.mark(prop.id, "stale" if moved else "rejected",
                                   reason or ("the document changed while the edit was pending" if moved
                                              else "not applied by the client"))
        self.audit(ch.origin, prop.status, root=ch.root, rel=ch.rel, title=ch.title, version=ch.version,
                   reason=prop.reason, proposal=prop.id)
        log.info("proposal %s (%s in %s): %s%s", prop.id, ch.title, ch.rel, prop.status,
                 f" ({prop.reason})" if prop.reason else "")
        if prop.status != "applied":
            ls.window_show_message(types.ShowMessageParams(types.MessageType.Info,
                                                           f"orbit: {ch.title}: {prop.status} ({prop.reason})"))
        return {"proposal": prop.id, "status": prop.status, "reason": prop.reason, "diff": prop.diff}

    def _workspace_edit(self, ch: Change, pid: int) -> types.WorkspaceEdit:
        caps = self.server.client_capabilities
        we = caps.workspace.workspace_edit if caps and caps.workspace else None
        if we is not None and we.document_changes:
            ann_id = f"orbit-proposal-{pid}"
            annotated = we.change_annotation_support is not None
            te = (types.AnnotatedTextEdit(range=ch.range, new_text=ch.replacement, annotation_id=ann_id) if annotated
                  else types.TextEdit(range=ch.range, new_text=ch.replacement))
            return types.WorkspaceEdit(
                document_changes=[types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(uri=ch.uri, version=ch.version),
                    edits=[te])],
                change_annotations={ann_id: types.ChangeAnnotation(
                    label=ch.title, needs_confirmation=True,
                    description=f"orbit proposal {pid}: {ch.description}")} if annotated else None)
        return types.WorkspaceEdit(changes={ch.uri: [types.TextEdit(range=ch.range, new_text=ch.replacement)]})

