"""``orbit/ask``: a free question answered by the agent (or the built-in planner) on the graph.

Params (taken raw, validated here; a malformed request gets InvalidParams):
``{"question": str, "textDocument"?: {"uri"}, "position"?: {"line", "character"},
"conversationId"?: int, "workDoneToken"?: str | int}``. The text document picks the workspace
folder (default: the only folder, else the first) and, with a position, gives the agent the file
and symbol under the cursor as context.

Result: ``{"question", "answer" (text or null), "markdown" (answer, who answered, every step with
its tool, arguments, Cypher and row count), "steps": [{"index", "tool", "args", "cypher":
[{"query", "params"}], "rows", "error", "ms", "note"}], "model" (null for the planner),
"planner", "error" (why there is no answer: model unreachable, rate-limited, step/time limit…),
"memories" (the user's memories recalled and given to the agent, see ``orbit_lsp.memory``),
"proposedMemory" (saved unconfirmed from "remember that …", or null), "turnId",
"notes", "conversationId", "workspace"}``.

While it runs: work-done progress, one report per step (client token ``workDoneToken``, else a
server-created one when the client supports it); ``window/showMessageRequest`` before any file
is read ("Allow once" / "Always for this workspace" / "Deny"; no answer within
``CONSENT_TIMEOUT_S`` = deny). ``$/cancelRequest`` stops it between steps (the answer is
RequestCancelled). The agent runs in its own threads: other requests keep being answered.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from orbit_lsp.agent.model import Cancelled
from orbit_lsp.agent.service import Asker, InvalidQuestion, UnknownConversation
from orbit_lsp.graph import queries
from orbit_lsp.graph.errors import FalkorDBOffline, GraphError
from orbit_lsp.server.app import ID_MAX, REQUEST_FAILED, OrbitServer, raw_params
from orbit_lsp.server.requests import _position, _text_document_uri

log = logging.getLogger("orbit_lsp.server.ask")

AGENT_READ_TIMEOUT_MS = 2000  # cap on the timeout of each graph read of the agent (ms)
AGENT_GATE_WAIT_S = 30.0  # longest wait of an agent read for re-indexing to finish, then it runs anyway
CONSENT_TIMEOUT_S = 300.0
PROGRESS_CREATE_TIMEOUT_S = 5.0
ALLOW_ONCE, ALLOW_ALWAYS, DENY = "Allow once", "Always for this workspace", "Deny"
_DECISIONS = {ALLOW_ONCE: "once", ALLOW_ALWAYS: "always", DENY: "deny"}


def _params(params: Any) -> dict:
    p = raw_params(params)
    q = p.get("question")
    if not isinstance(q, str) or not q.strip():
        raise JsonRpcInvalidParams("params.question (a non-empty string) is required")
    out = {"question": q.strip(), "uri": None, "pos": None, "conversation": None, "token": None}
    if p.get("textDocument") is not None:
        out["uri"] = _text_document_uri(p)
        out["pos"] = _position(p)
    elif p.get("position") is not None:
        raise JsonRpcInvalidParams("params.position needs params.textDocument")
    conv = p.get("conversationId")
    if conv is not None and (not isinstance(conv, int) or isinstance(conv, bool) or not 1 <= conv <= ID_MAX):
        raise JsonRpcInvalidParams(f"params.conversationId must be an integer from 1 to {ID_MAX}")
    out["conversation"] = conv
    token = p.get("workDoneToken")
    if token is not None and not isinstance(token, (str, int)):
        raise JsonRpcInvalidParams("params.workDoneToken must be a string or an integer")
    out["token"] = token
    return out


class AgentGraph:
    """The code graph as ``orbit/ask``'s agent reads it in the language server, so editor
    traffic never waits behind the agent (issue 20 item 5).

    FalkorDB makes a write wait for the reads running on its graph, and every read that
    arrives meanwhile wait behind that write: one long model-written read held a ``didSave``
    re-index, and every hover after it, for its whole duration. Here each read of the agent
    holds the folder's graph gate (``OrbitServer.graph_gate``), which the server's indexing
    also holds, so a re-index waits in this process instead of as a FalkorDB writer (hovers,
    lenses and other editor reads run meanwhile), and the agent's reads wait while the
    indexer writes (at most ``AGENT_GATE_WAIT_S``). Each read's timeout is capped at
    ``cap_ms``, which bounds how long a re-index can wait. Everything else is the graph's."""

    def __init__(self, graph: Any, gate: threading.Lock, cap_ms: int = AGENT_READ_TIMEOUT_MS,
                 gate_wait_s: float = AGENT_GATE_WAIT_S):
        self._graph = graph
        self._gate = gate
        self._cap_ms = cap_ms
        self._gate_wait_s = gate_wait_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self._graph, name)

    def _timeout(self, timeout_ms: int | None) -> int:
        asked = timeout_ms or self._graph.store.settings.query_timeout_ms
        return max(1, min(int(asked), self._cap_ms))

    def _read(self, run: Any, cypher: str, params: dict | None, timeout_ms: int | None) -> Any:
        got = self._gate.acquire(timeout=self._gate_wait_s)
        try:
            return run(cypher, params, timeout_ms=self._timeout(timeout_ms))
        finally:
            if got:
                self._gate.release()

    def ro_query(self, cypher: str, params: dict | None = None, timeout_ms: int | None = None) -> Any:
        return self._read(self._graph.ro_query, cypher, params, timeout_ms)

    def query(self, cypher: str, params: dict | None = None, timeout_ms: int | None = None) -> Any:
        return self._read(self._graph.query, cypher, params, timeout_ms)


class Feature:
    def __init__(self, server: OrbitServer):
        self.server = server
        self.asker: Asker | None = None
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="orbit-agent")

    def register(self) -> None:
        self.server.on("orbit/ask", self.ask)

    def _asker(self) -> Asker:
        if self.asker is None:
            self.asker = Asker(self.server.settings)
        self.asker.settings = self.server.settings  # settings may have changed since
        return self.asker

    async def ask(self, params: Any) -> dict:
        p = _params(params)
        ls = self.server
        if ls.offline is not None:
            raise JsonRpcException(str(ls.offline), code=REQUEST_FAILED)
        ix, context = await self._workspace(p)
        loop = asyncio.get_running_loop()
        token = await self._progress_begin(p["token"], p["question"])
        cancel = threading.Event()

        def progress(message: str) -> None:  # agent thread
            if token is not None:
                loop.call_soon_threadsafe(ls.work_done_progress.report, token,
                                          types.WorkDoneProgressReport(message=message))

        consent = self.consent_asker(loop, cancel)

        asker = self._asker()
        work = loop.run_in_executor(self.pool, lambda: asker.ask(
            p["question"], AgentGraph(ix.graph, ls.graph_gate(ix)), ix.root, context=context, conversation_id=p["conversation"],
            consent=consent, progress=progress, cancel=cancel))
        done_msg = "cancelled"
        try:
            result = await work
            done_msg = "done" if result.error is None else "stopped"
        except asyncio.CancelledError:
            cancel.set()  # the agent thread stops at its next check
            raise
        except Cancelled:
            raise asyncio.CancelledError() from None
        except UnknownConversation as exc:
            raise JsonRpcInvalidParams(f"params.conversationId: {exc}") from None
        except InvalidQuestion as exc:
            raise JsonRpcInvalidParams(f"params.question: {exc}") from None
        except FalkorDBOffline as exc:
            ls.went_offline(exc)
            raise JsonRpcException(str(exc), code=REQUEST_FAILED) from exc
        except GraphError as exc:
            raise JsonRpcException(f"{type(exc).__name__}: {exc}", code=REQUEST_FAILED) from exc
        finally:
            if token is not None:
                ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=done_msg))
                ls.work_done_progress.tokens.pop(token, None)
        out = result.to_dict()
        out["workspace"] = str(ix.root)
        return out

    async def _workspace(self, p: dict):
        """(indexer, context sentence or None) for the request."""
        ls = self.server
        if p["uri"] is None:
            folders = ls.workspaces.all()
            if not folders:
                raise JsonRpcException("no workspace folder is open", code=REQUEST_FAILED)
            return folders[0], None
        owner = ls.locate(p["uri"])
        if owner is None:
            raise JsonRpcException(f"{p['uri']} is not in an indexed workspace folder", code=REQUEST_FAILED)
        ix, rel = owner
        context = f"the user is looking at file {rel}"
        if p["pos"] is not None:
            await ls.warm_lines([ix.root / rel])  # the file is read off the event loop
            line1, col = ls.to_graph_position(ix.root / rel, types.Position(*p["pos"]))
            at = await ls.query(queries.target_at, ix.graph, rel, line1, col)
            if at.rows and at.rows[0]["type"] == "symbol":
                s = at.rows[0]["symbol"]
                context += f", with the cursor on {s['kind']} {s['qual']} (defined in {s['file']}:{s['line']})"
            elif at.rows and at.rows[0]["type"] == "file":
                context += f", with the cursor on an import of {at.rows[0]['path']}"
            elif at.rows:
                context += f", with the cursor on an import of package {at.rows[0]['name']}"
            else:
                context += f", line {line1}"
        return ix, context

    async def _progress_begin(self, token, question: str):
        ls = self.server
        if token is None:
            caps = ls.client_capabilities
            if not (caps and caps.window and caps.window.work_done_progress):
                return None
            token = f"orbit-ask-{uuid.uuid4().hex[:12]}"
            try:
                await asyncio.wait_for(ls.work_done_progress.create_async(token), PROGRESS_CREATE_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - progress is a courtesy
                log.info("work done progress refused: %s", exc)
                return None
        title = question if len(question) <= 60 else question[:57] + "…"
        ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=f"Orbit: {title}", cancellable=False))
        return token

    def consent_asker(self, loop: asyncio.AbstractEventLoop, cancel: threading.Event) -> Callable[[str], str]:
        """A ``consent(path) -> "once" | "always" | "deny"`` for an agent thread: asks the user on
        the event loop (``window/showMessageRequest``) and waits for the answer; a cancelled
        question, a failed request or no answer within ``CONSENT_TIMEOUT_S`` is a "deny"."""
        def consent(path: str) -> str:
            fut = asyncio.run_coroutine_threadsafe(self._consent(path), loop)
            deadline = time.monotonic() + CONSENT_TIMEOUT_S
            while not cancel.is_set() and time.monotonic() < deadline:
                try:
                    return fut.result(timeout=0.2)
                except concurrent.futures.TimeoutError:
                    continue
                except Exception:  # noqa: BLE001 - a failed request is a "no"
                    break
            fut.cancel()
            return "deny"

        return consent

    async def _consent(self, path: str) -> str:
        item = await self.server.window_show_message_request_async(types.ShowMessageRequestParams(
            type=types.MessageType.Info,
            message=f"orbit-lsp: the agent wants to read {path} to answer your question "
                    f"(secrets are redacted before anything reaches the model).",
            actions=[types.MessageActionItem(title=t) for t in (ALLOW_ONCE, ALLOW_ALWAYS, DENY)]))
        title = getattr(item, "title", None) if item is not None else None
        return _DECISIONS.get(title, "deny")
