"""One entry point for a question, used by ``orbit/ask`` and ``orbit-lsp ask``.

``Asker(settings)`` keeps the model client (its rate-limit cooldowns carry over between
questions) and the history database. ``asker.ask(question, graph, root, ...)`` answers with the
configured model, or with the built-in planner when no model is configured, records the turn and
returns an ``AskResult`` with its Markdown.

Memory (``orbit_lsp.memory``): the user's confirmed memories recalled for the question are given
to the model (or quoted by the planner), the ``recall`` tool finds more, the answer lists them,
and the turn is linked to each (``(:Turn)-[:RECALLED]->(:Memory)``, turn id = the history's). A
question saying "remember that …" saves that as an unconfirmed memory (proposed by the agent).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable

from orbit_lsp.agent.answer import render
from orbit_lsp.agent.history import History
from orbit_lsp.agent.loop import AskResult, run_agent
from orbit_lsp.agent.model import ModelClient
from orbit_lsp.agent.planner import run_planner
from orbit_lsp.agent.redact import text_problem
from orbit_lsp.agent.tools import Toolbox
from orbit_lsp.config import Settings
from orbit_lsp.graph.connection import Graph
from orbit_lsp.memory.intent import proposed_memory
from orbit_lsp.memory.store import InvalidMemory, MemoryStore

log = logging.getLogger("orbit_lsp.agent")


def _model_key(s: Settings) -> tuple:
    key = s.agent_api_key.get_secret_value() if s.agent_api_key else ""
    return (s.agent_base_url, key, s.agent_model, tuple(s.agent_fallback_models), s.agent_request_timeout_s,
            s.agent_max_wait_s)


class UnknownConversation(ValueError):
    """A ``conversation_id`` that the history does not hold."""


class InvalidQuestion(ValueError):
    """A question that cannot be asked: not a string, empty, longer than ``MAX_QUESTION_CHARS``,
    or holding a NUL character or an unpaired surrogate. The message says which."""


MAX_QUESTION_CHARS = 20_000
MAX_CONVERSATION_ID = 2**63 - 1  # SQLite's largest integer key


def check_question(question: object) -> str:
    """``question`` if it can be asked, else ``InvalidQuestion``."""
    if not isinstance(question, str) or not question.strip():
        raise InvalidQuestion("the question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise InvalidQuestion(f"the question is {len(question)} characters long; at most {MAX_QUESTION_CHARS}")
    problem = text_problem(question)
    if problem:
        raise InvalidQuestion(f"the question {problem}")
    return question


class Asker:
    """Answers questions; thread-safe. ``history``: a ``History`` (default: the data dir's)."""

    def __init__(self, settings: Settings, history: History | None = None):
        self.settings = settings
        self._history = history
        self._model: ModelClient | None = None
        self._model_key: tuple | None = None
        self._memory: MemoryStore | None = None
        self._lock = threading.Lock()

    @property
    def history(self) -> History:
        with self._lock:
            if self._history is None:
                self._history = History.open(self.settings.data_dir)
            return self._history

    def model(self) -> ModelClient | None:
        """The model client for the current settings, None when no model is configured."""
        s = self.settings
        if not s.agent_model:
            return None
        with self._lock:
            key = _model_key(s)
            if self._model is None or self._model_key != key:
                if self._model is not None:
                    self._model.close()
                self._model = ModelClient(s)
                self._model_key = key
            return self._model

    def memory(self, graph: Graph) -> MemoryStore:
        """The memory store in ``graph``'s FalkorDB (settings ``memory_graph``)."""
        hist = self.history
        with self._lock:
            m = self._memory
            if m is None or m.store is not graph.store or m.graph_name != self.settings.memory_graph:
                m = self._memory = MemoryStore(graph.store, self.settings.memory_graph, history=hist)
            return m

    def close(self) -> None:
        with self._lock:
            if self._model is not None:
                self._model.close()
                self._model = None
            if self._history is not None:
                self._history.close()
                self._history = None

    def ask(self, question: str, graph: Graph, root: Path | str, *, context: str | None = None,
            conversation_id: int | None = None, consent: Callable[[str], str] | None = None,
            progress: Callable[[str], None] | None = None,
            cancel: threading.Event | None = None) -> AskResult:
        """Answer ``question`` about the workspace at ``root`` (graph ``graph``).

        ``conversation_id``: continue a conversation (its earlier answers are given to the model);
        None starts one. ``consent(path)`` → "once" | "always" | "deny" before a file is read.
        Raises ``InvalidQuestion`` and ``UnknownConversation`` (``ValueError``s: the caller's
        input is at fault), ``Cancelled`` and ``FalkorDBOffline``; model failures are in
        ``result.error``."""
        check_question(question)
        if context is not None:
            problem = text_problem(context) if isinstance(context, str) else "is not a string"
            if problem:
                raise InvalidQuestion(f"the question's context {problem}")
        hist = self.history
        if conversation_id is not None and (
                isinstance(conversation_id, bool) or not isinstance(conversation_id, int)
                or not 0 < conversation_id <= MAX_CONVERSATION_ID
                or not hist.has_conversation(conversation_id)):
            raise UnknownConversation(f"no conversation {conversation_id} in the history")
        conv = conversation_id if conversation_id is not None else hist.start_conversation(str(root))
        earlier = [(t["question"], t["answer"]) for t in hist.turns(conv) if t["answer"]][-5:]
        memory = self.memory(graph)
        proposed, proposal_problem = None, None
        keep = proposed_memory(question)
        if keep:
            try:
                proposed = memory.remember(keep, confirmed=False, source="agent", project=root, conversation_id=conv)
            except InvalidMemory as exc:
                proposal_problem = f"nothing was saved from “remember …”: {exc}"
        recall = memory.recall(question, project=root)
        toolbox = Toolbox(graph, root, self.settings, consent=consent, history=hist, conversation_id=conv,
                          memory=memory)
        model = self.model()
        if model is None:
            result = run_planner(question, toolbox, progress, memories=recall.memories)
        else:
            result = run_agent(question, model, toolbox, max_steps=self.settings.agent_max_steps,
                               time_limit_s=self.settings.agent_time_limit_s, context=context,
                               history=earlier, progress=progress, cancel=cancel,
                               audit=lambda kind, **d: hist.audit(kind, conversation_id=conv, **d),
                               memories=recall.memories)
        result.conversation_id = conv
        used = {m.id: m for m in recall.memories}
        for mid, m in toolbox.recalled.items():
            used.setdefault(mid, m)
        result.memories = list(used.values())
        result.memory_cypher = recall.cypher if recall.memories else []
        result.proposed_memory = proposed
        if proposal_problem:
            result.notes.append(proposal_problem)
        result.markdown = render(result)
        result.turn_id = hist.add_turn(conv, question, result.answer,
                                       result.model or ("planner" if result.planner else None),
                                       [s.to_dict() for s in result.steps], result.error)
        if result.memories and result.answer is not None:  # an answer used them; a failed turn did not
            memory.link_turn(conv, result.turn_id, list(used), question)
        return result
