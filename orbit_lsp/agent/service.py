"""One entry point for a question, used by ``orbit/ask`` and ``orbit-lsp ask``.

``Asker(settings)`` keeps the model client (its rate-limit cooldowns carry over between
questions) and the history database. ``asker.ask(question, graph, root, ...)`` answers with the
configured model, or with the built-in planner when no model is configured, records the turn and
returns an ``AskResult`` with its Markdown.
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
from orbit_lsp.agent.tools import Toolbox
from orbit_lsp.config import Settings
from orbit_lsp.graph.connection import Graph

log = logging.getLogger("orbit_lsp.agent")


def _model_key(s: Settings) -> tuple:
    key = s.agent_api_key.get_secret_value() if s.agent_api_key else ""
    return (s.agent_base_url, key, s.agent_model, tuple(s.agent_fallback_models), s.agent_request_timeout_s,
            s.agent_max_wait_s)


class UnknownConversation(ValueError):
    """A ``conversation_id`` that the history does not hold."""


class Asker:
    """Answers questions; thread-safe. ``history``: a ``History`` (default: the data dir's)."""

    def __init__(self, settings: Settings, history: History | None = None):
        self.settings = settings
        self._history = history
        self._model: ModelClient | None = None
        self._model_key: tuple | None = None
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
        Raises ``UnknownConversation`` (a ``ValueError``), ``Cancelled`` and ``FalkorDBOffline``;
        model failures are in ``result.error``."""
        hist = self.history
        if conversation_id is not None and not hist.has_conversation(conversation_id):
            raise UnknownConversation(f"no conversation {conversation_id} in the history")
        conv = conversation_id if conversation_id is not None else hist.start_conversation(str(root))
        earlier = [(t["question"], t["answer"]) for t in hist.turns(conv) if t["answer"]][-5:]
        toolbox = Toolbox(graph, root, self.settings, consent=consent, history=hist, conversation_id=conv)
        model = self.model()
        if model is None:
            result = run_planner(question, toolbox, progress)
        else:
            result = run_agent(question, model, toolbox, max_steps=self.settings.agent_max_steps,
                               time_limit_s=self.settings.agent_time_limit_s, context=context,
                               history=earlier, progress=progress, cancel=cancel,
                               audit=lambda kind, **d: hist.audit(kind, conversation_id=conv, **d))
        result.conversation_id = conv
        result.markdown = render(result)
        hist.add_turn(conv, question, result.answer, result.model or ("planner" if result.planner else None),
                      [s.to_dict() for s in result.steps], result.error)
        return result
