"""Agent-proposed changes and "ask about this symbol", offered as code actions.

Code actions (built by ``actions``, offered by ``code_actions``):

- "Orbit: propose a change…" (kind ``refactor.rewrite``) on a non-empty selection (that range),
  or with the cursor inside a symbol of the graph (the symbol's whole lines, offered only while
  the buffer is the indexed text). Its command ``orbit.proposeChange`` carries
  ``[{"uri", "range", "version"}]``; the client supplies the instruction, either as
  ``"instruction"`` in that object or as a second argument (a string). Editors that can prompt
  for text may instead send the request ``orbit/proposeChange``:
  ``{"textDocument": {"uri", "version"?}, "range"? | "position"?, "instruction"}`` (a position
  means the symbol around it; no version means the document's current one). Without a model
  the action is marked ``disabled`` with the reason (``NO_MODEL``) for clients that declare
  ``codeAction.disabledSupport``, and not offered to the others (it could only fail, after the
  user typed the instruction).
- "Orbit: ask about this symbol" on any symbol (definition or use): ``orbit.askAboutSymbol``
  with ``[{"uri", "position", "qual"}]`` runs ``orbit/ask`` with "What depends on `qual` and who
  calls it?" (answered by the model, or by the built-in planner without one), shows the first
  lines of the Markdown answer with ``window/showMessage`` (not when the argument has
  ``"clientShowsAnswer": true``: the editor shows the result itself) and returns the full
  ``orbit/ask`` result.

Proposing (``orbit_lsp.agent.propose``): the configured model gets the instruction and the
selected text (redacted), may run the read-only graph tools (``read_file`` asks the user, as
``orbit/ask`` does; ``recall`` reads the user's memories), and replies with a replacement. The
edit then takes the shared approval path (``orbit_lsp.server.approval``): stored as a proposal,
sent with ``workspace/applyEdit`` on the versioned document with a change annotation that needs
confirmation, refused as stale when the document changed since ``version`` (before asking the
model, and again before sending), every outcome audited. The agent has no write tool: the file
changes only when the client applies it.

Result: ``{"proposal": id | null, "status": "applied" | "rejected" | "stale" | "failed",
"reason", "diff", "explanation", "model", "steps", "notes", "redactions"}``; ``failed``: no edit
could be proposed (model error, the model declined, unrestorable redactions, no change).
Errors: InvalidParams for malformed arguments or a document outside the workspace folders;
RequestFailed when no model is configured ("proposing a change needs a model …") or FalkorDB is
offline.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from orbit_lsp.agent.model import Cancelled
from orbit_lsp.agent.propose import run_propose
from orbit_lsp.agent.redact import redact
from orbit_lsp.agent.tools import Toolbox
from orbit_lsp.graph import queries
from orbit_lsp.graph.errors import FalkorDBOffline, GraphError
from orbit_lsp.index.indexer import content_hash
from orbit_lsp.server.app import REQUEST_FAILED, OrbitServer, lsp_position, raw_params
from orbit_lsp.server.approval import Approvals, Change
from orbit_lsp.index.buffers import index_lock
from orbit_lsp.server.lenses import Snapshot
from orbit_lsp.server.lines import split_lines

log = logging.getLogger("orbit_lsp.server.propose")

PROPOSE_CHANGE = "orbit.proposeChange"
ASK_ABOUT_SYMBOL = "orbit.askAboutSymbol"
PROPOSE_TITLE = "Orbit: propose a change…"
ASK_TITLE = "Orbit: ask about this symbol"
NO_MODEL = ("Orbit: proposing a change needs a model: configure an OpenAI-compatible endpoint "
            "(ORBIT_MODEL, OPENAI_BASE_URL, OPENAI_API_KEY or the orbit.agent settings). "
            "The built-in planner only answers questions; it never writes code.")
SHORT_MESSAGE_CHARS = 300


def ask_question(qual: str) -> str:
    """The question "ask about this symbol" asks (the planner understands both forms)."""
    if "/" in qual:  # a JS/TS qual (path#name): the planner would read it as a file
        return f"Who calls `{qual}`?"
    return f"What depends on `{qual}` and who calls it?"


def short_message(result: dict, limit: int = SHORT_MESSAGE_CHARS) -> str:
    """One short paragraph for window/showMessage from an ``orbit/ask`` result."""
    text = result.get("answer") or (f"Error: {result['error']}" if result.get("error") else "no answer")
    para = text.strip().split("\n\n")[0].strip()
    if len(para) > limit:
        para = para[:limit - 1].rstrip() + "…"
    return f"Orbit: {para}"


# -- code actions ------------------------------------------------------------------------------
def enclosing(ix, rel: str, data: bytes, line1: int) -> dict | None:
    """Query-thread: the innermost symbol around 1-based ``line1`` when the buffer ``data`` is
    the indexed text (else None: line numbers would not be the graph's)."""
    with index_lock(ix) as locked:
        rec = queries.file_record(ix.graph, rel)
        if not (locked and rec.found and rec.rows[0]["hash"] == content_hash(data)):
            return None
        rows = queries.symbol_at(ix.graph, rel, line1).rows
    return rows[0] if rows and rows[0]["kind"] != "module" else None


def symbol_range(snap: Snapshot, sym: dict) -> types.Range:
    """The whole lines of ``sym`` (1-based ``line``..``end_line``), with the last line's end."""
    texts = snap.lines.texts
    end0 = sym["end_line"]  # 0-based line after the symbol
    if end0 < len(texts):
        end = types.Position(end0, 0)
    else:
        last = len(texts) - 1
        end = types.Position(last, snap.lines.units(texts[last]))
    return types.Range(types.Position(sym["line"] - 1, 0), end)


def supports_disabled_actions(ls: OrbitServer) -> bool:
    """Whether the client shows code actions marked ``disabled`` (with their reason) instead
    of running them (``textDocument.codeAction.disabledSupport``)."""
    caps = ls.client_capabilities
    ca = caps.text_document.code_action if caps and caps.text_document else None
    return bool(ca and ca.disabled_support)


def actions(ls: OrbitServer, snap: Snapshot, rng: types.Range, target: dict | None, sym: dict | None,
            wanted) -> list[types.CodeAction]:
    """The propose/ask code actions for a request on ``rng``: ``target`` is the graph target
    under the cursor, ``sym`` the symbol enclosing the cursor (``enclosing``)."""
    out: list[types.CodeAction] = []
    doc = ls.workspace.text_documents.get(snap.uri)
    version = doc.version if doc is not None else None
    selected = rng.start != rng.end
    edit_range = rng if selected else (symbol_range(snap, sym) if sym is not None else None)
    no_model = ls.settings.agent_model is None
    if edit_range is not None and wanted(types.CodeActionKind.RefactorRewrite) and (
            not no_model or supports_disabled_actions(ls)):
        out.append(types.CodeAction(
            title=PROPOSE_TITLE, kind=types.CodeActionKind.RefactorRewrite,
            disabled=types.CodeActionDisabled(reason=NO_MODEL) if no_model else None,
            command=types.Command(title=PROPOSE_TITLE, command=PROPOSE_CHANGE, arguments=[{
                "uri": snap.uri, "version": version,
                "range": {"start": {"line": edit_range.start.line, "character": edit_range.start.character},
                          "end": {"line": edit_range.end.line, "character": edit_range.end.character}}}])))
    if target is not None and target.get("type") == "symbol" and wanted(None):
        s = target["symbol"]
        at = rng.start
        if target.get("how") == "definition":
            at = snap.position(s["line"], s["col"])
        out.append(types.CodeAction(
            title=ASK_TITLE,
            command=types.Command(title=ASK_TITLE, command=ASK_ABOUT_SYMBOL, arguments=[{
                "uri": snap.uri, "position": {"line": at.line, "character": at.character}, "qual": s["qual"]}])))
    return out


# -- argument checking -----------------------------------------------------------------------
def _pos(v: Any, what: str) -> types.Position:
    return lsp_position(v, what)


def _range(v: Any, what: str) -> types.Range:
    if not isinstance(v, dict):
        raise JsonRpcInvalidParams(f"{what} must be a range {{start, end}}")
    r = types.Range(_pos(v.get("start"), f"{what}.start"), _pos(v.get("end"), f"{what}.end"))
    if (r.end.line, r.end.character) < (r.start.line, r.start.character):
        raise JsonRpcInvalidParams(f"{what}: end is before start")
    return r


def _instruction(v: Any, what: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise JsonRpcInvalidParams(f"{what} (a non-empty string: what to change) is required; the editor asks the "
                                   "user for it")
    return v.strip()


def _version(v: Any, what: str) -> int | None:
    if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not -2 ** 31 <= v <= 2 ** 31 - 1):
        raise JsonRpcInvalidParams(f"{what} must be an integer (-2^31 .. 2^31 - 1) or null")
    return v


def _offset(kept: list[str], snap: Snapshot, pos: types.Position) -> int:
    """Code-point offset in the document text of an LSP position (clamped to the text)."""
    if pos.line >= len(kept):
        return sum(len(k) for k in kept)
    return sum(len(k) for k in kept[:pos.line]) + snap.lines.char_index(pos)


class Feature:
    def __init__(self, server: OrbitServer):
        self.server = server
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="orbit-propose")

    def register(self) -> None:
        ls = self.server
        ls.on("orbit/proposeChange", self.propose_request)

        ls.on_command(PROPOSE_CHANGE, self.propose_command)
        ls.on_command(ASK_ABOUT_SYMBOL, self.ask_about_symbol)

    @property
    def approvals(self) -> Approvals:
        return Approvals.of(self.server)

    def _ask_feature(self):
        from orbit_lsp.server import ask

        found = next((f for f in self.server.features if isinstance(f, ask.Feature)), None)
        if found is None:
            raise JsonRpcException("orbit/ask is not available", code=REQUEST_FAILED)
        return found

    # -- entry points --------------------------------------------------------------------------
    async def propose_command(self, *args) -> dict:
        """``orbit.proposeChange [{uri, range, version, instruction?}, instruction?]``."""
        arg = raw_params(args[0] if args else None)
        uri = arg.get("uri")
        if not isinstance(uri, str) or not uri:
            raise JsonRpcInvalidParams(f"{PROPOSE_CHANGE} needs [{{uri, range, version}}, instruction]")
        rng = _range(arg.get("range"), f"{PROPOSE_CHANGE}: range")
        version = _version(arg.get("version"), f"{PROPOSE_CHANGE}: version")
        instr = arg.get("instruction") if arg.get("instruction") is not None else (args[1] if len(args) > 1 else None)
        instruction = _instruction(instr, f"{PROPOSE_CHANGE}: the instruction")
        return await self.propose(uri, rng, None, version, instruction)

    async def propose_request(self, params: Any) -> dict:
        """``orbit/proposeChange {textDocument: {uri, version?}, range? | position?, instruction}``."""
        p = raw_params(params)
        td = p.get("textDocument")
        uri = td.get("uri") if isinstance(td, dict) else None
        if not isinstance(uri, str) or not uri:
            raise JsonRpcInvalidParams("params.textDocument.uri (a string) is required")
        instruction = _instruction(p.get("instruction"), "params.instruction")
        rng = _range(p["range"], "params.range") if p.get("range") is not None else None
        pos = _pos(p["position"], "params.position") if rng is None and p.get("position") is not None else None
        if rng is None and pos is None:
            raise JsonRpcInvalidParams("params.range or params.position is required")
        if "version" in td:
            version = _version(td.get("version"), "params.textDocument.version")
        else:
            doc = self.server.workspace.text_documents.get(uri)
            version = doc.version if doc is not None else None
        return await self.propose(uri, rng, pos, version, instruction)

    # -- proposing ------------------------------------------------------------------------------
    async def propose(self, uri: str, rng: types.Range | None, pos: types.Position | None, version: int | None,
                      instruction: str) -> dict:
        ls = self.server
        snap = await Snapshot.load(ls, uri)
        if snap is None:
            raise JsonRpcInvalidParams(f"{uri} is not in an indexed workspace folder")
        root, rel, text = str(snap.ix.root), snap.rel, snap.text
        shown = redact(instruction)[0]  # the title goes to the store, the audit and messages
        title = f"Orbit: {shown if len(shown) <= 60 else shown[:59] + '…'}"
        asker = self._ask_feature()._asker()
        model = asker.model()
        if model is None:
            self.approvals.audit("proposal", "failed", root=root, rel=rel, title=title, version=version,
                                 reason="no model configured")
            raise JsonRpcException(NO_MODEL, code=REQUEST_FAILED)
        if ls.offline is not None:
            raise JsonRpcException(str(ls.offline), code=REQUEST_FAILED)
        doc = ls.workspace.text_documents.get(uri)
        now = doc.version if doc is not None else None
        if now != version:
            return self.approvals.refuse("proposal", root, rel, title, text, version,
                                         f"the document changed since the action was offered (version {version}, now {now})")
        # what to replace, and the symbol around it (context for the model)
        line1 = (rng.start if rng is not None else pos).line + 1
        try:
            sym = await ls.query(enclosing, snap.ix, rel, snap.data, line1)
        except FalkorDBOffline as exc:
            ls.went_offline(exc)
            raise JsonRpcException(str(exc), code=REQUEST_FAILED) from exc
        if rng is None:
            if sym is None:
                return self.approvals.failed("proposal", root, rel, title, version,
                                             f"no symbol of the graph around line {line1} (save the file, or select "
                                             "the text to change)")
            rng = symbol_range(snap, sym)
        kept = split_lines(text)
        a, b = _offset(kept, snap, rng.start), _offset(kept, snap, rng.end)
        selection = text[a:b]
        if not selection.strip():
            return self.approvals.failed("proposal", root, rel, title, version, "the selection is empty")
        context = None
        if sym is not None:
            context = (f"the selection is in {sym['kind']} {sym['qual']} (lines {sym['line']}-{sym['end_line']} "
                       f"of {rel})")
        result = await self._run_model(asker, model, snap, instruction, selection, rng, context)
        extra = {"explanation": result.explanation, "model": result.model,
                 "steps": [s.to_dict() for s in result.steps], "notes": result.notes,
                 "redactions": result.redactions}
        if result.error is not None or result.new_text is None:
            out = self.approvals.failed("proposal", root, rel, title, version, result.error or "no edit proposed",
                                        model=result.model)
            return {**out, **extra}
        if result.new_text == selection:
            out = self.approvals.failed("proposal", root, rel, title, version,
                                        "the model proposed the selected text unchanged", model=result.model)
            return {**out, **extra}
        new_doc = text[:a] + result.new_text + text[b:]
        out = await self.approvals.send(Change(
            origin="proposal", uri=uri, version=version, root=root, rel=rel, title=title, old_text=text,
            new_text=new_doc, range=rng, replacement=result.new_text,
            description=result.explanation or shown))
        return {**out, **extra}

    async def _run_model(self, asker, model, snap: Snapshot, instruction: str, selection: str,
                         rng: types.Range, context: str | None):
        ls = self.server
        loop = asyncio.get_running_loop()
        cancel = threading.Event()
        ask_feature = self._ask_feature()
        hist = self.approvals.history

        consent = ask_feature.consent_asker(loop, cancel)  # asks as orbit/ask does

        s = asker.settings
        start_line, end_line = rng.start.line + 1, rng.end.line + (1 if rng.end.character else 0)

        def work():
            # the user's memories (coding preferences…) through the recall tool, when available
            toolbox = Toolbox(snap.ix.graph, snap.ix.root, s, consent=consent, history=hist,
                              memory=asker.memory(snap.ix.graph))
            return run_propose(instruction, selection, model, toolbox, path=snap.rel, start_line=start_line,
                               end_line=max(start_line, end_line), context=context, max_steps=s.agent_max_steps,
                               time_limit_s=s.agent_time_limit_s, cancel=cancel,
                               audit=lambda kind, **d: hist.audit(kind, **d))

        try:
            return await loop.run_in_executor(self.pool, work)
        except asyncio.CancelledError:
            cancel.set()
            raise
        except Cancelled:
            raise asyncio.CancelledError() from None
        except FalkorDBOffline as exc:
            ls.went_offline(exc)
            raise JsonRpcException(str(exc), code=REQUEST_FAILED) from exc
        except GraphError as exc:
            raise JsonRpcException(f"{type(exc).__name__}: {exc}", code=REQUEST_FAILED) from exc

    # -- ask about this symbol -----------------------------------------------------------------
    async def ask_about_symbol(self, *args) -> dict:
        """``orbit.askAboutSymbol [{uri, position, qual}]``: the ``orbit/ask`` result for
        ``ask_question(qual)``, its first paragraph shown with window/showMessage unless the
        argument says ``"clientShowsAnswer": true`` (the editor shows the result itself)."""
        arg = raw_params(args[0] if args else None)
        uri, qual = arg.get("uri"), arg.get("qual")
        if not isinstance(uri, str) or not uri or not isinstance(qual, str) or not qual:
            raise JsonRpcInvalidParams(f"{ASK_ABOUT_SYMBOL} needs [{{uri, position, qual}}]")
        pos = _pos(arg.get("position"), f"{ASK_ABOUT_SYMBOL}: position")
        shown_by_client = arg.get("clientShowsAnswer") is True
        result = await self._ask_feature().ask({
            "question": ask_question(qual), "textDocument": {"uri": uri},
            "position": {"line": pos.line, "character": pos.character}})
        if not shown_by_client:  # an editor that shows the result itself does not get it twice
            self.server.window_show_message(types.ShowMessageParams(
                types.MessageType.Error if result.get("error") else types.MessageType.Info, short_message(result)))
        return result
