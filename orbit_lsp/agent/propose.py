"""Proposed changes: the model rewrites a selected piece of a document, with the graph tools for
context. Nothing here writes a file: the result is a replacement text that the caller turns into
a proposal the user approves or rejects (``orbit_lsp.server.approval``).

``run_propose(instruction, selection, model, toolbox, path=…, ...) -> ProposeResult``.

Protocol (told to the model in ``system_prompt``): each model turn is ONE JSON object,

- ``{"tool": NAME, "args": {...}}``: a read-only graph tool of ``tools.TOOLS`` (its result, or
  its error, comes back as the next user message — the same tools and result format as
  ``orbit/ask``);
- ``{"edit": {"new_text": "...", "explanation": "..."}}``: the complete replacement for the
  selected text; ends the run;
- ``{"no_change": "why"}``: the instruction cannot or should not be carried out; ends the run
  with ``error`` set to that reason.

What reaches the model is redacted (``redact.redact``): the instruction, the selection and the
context sentence one by one, tool results as in ``loop``.
Where the selection had secrets, the model sees ``[REDACTED]``; ``restore`` puts the original
values back into the replacement, in order, and refuses (``Unrestorable``) when it cannot tell
which secret a placeholder stood for — a proposal never writes ``[REDACTED]`` over a secret.

Limits as in ``loop``: an invalid reply is explained once, a second one ends the run; at most
``max_steps`` tool calls; the same call is not re-run; ``time_limit_s`` bounds the whole run;
``cancel`` is checked between steps. Model failures (``ModelError``, rate limits) end up in
``result.error``; ``Cancelled`` is raised.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from orbit_lsp.agent.loop import AgentStopped, Step, drive, parse_action
from orbit_lsp.agent.model import ModelClient, ModelError
from orbit_lsp.agent.redact import MARK, redact
from orbit_lsp.agent.tools import SCHEMA, Toolbox, tool_list

FINAL_KEYS = ("edit", "no_change")
MAX_SELECTION_CHARS = 40_000  # longest selection sent to the model


class Unrestorable(ValueError):
    """The replacement holds ``[REDACTED]`` placeholders that cannot be mapped back to the
    secrets they stand for."""


@dataclass
class ProposeResult:
    """``new_text``: the replacement for the selection (secrets restored), None when there is
    none; ``explanation``: the model's summary; ``error``: why there is no replacement (model
    error, ``no_change`` reason, invalid replies, limits); ``steps``: tool calls (as ``loop.Step``);
    ``model``: the model that answered last; ``redactions``: secrets hidden from the model in
    the selection; ``notes``: fallbacks and recoveries."""

    instruction: str
    new_text: str | None = None
    explanation: str | None = None
    error: str | None = None
    steps: list[Step] = field(default_factory=list)
    model: str | None = None
    redactions: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"instruction": self.instruction, "explanation": self.explanation, "error": self.error,
                "steps": [s.to_dict() for s in self.steps], "model": self.model, "redactions": self.redactions,
                "notes": self.notes}


def system_prompt(max_steps: int) -> str:
    tools = tool_list()
    return (
        "You propose a change to a selected piece of a source file in a code workspace, following the "
        "user's instruction. You cannot write files: your edit is shown to the user as a proposal, "
        "which they approve or reject.\n"
        "Reply with exactly ONE JSON object and nothing else, one of\n"
        '  {"tool": "<name>", "args": {...}}   to run a read-only graph tool for context (its result comes back to you);\n'
        '  {"edit": {"new_text": "<replacement>", "explanation": "<one or two sentences>"}}\n'
        "      new_text replaces the WHOLE selected text: write all of it as it must appear in the file "
        "(same indentation, and keep the selection's final line break if it had one);\n"
        '  {"no_change": "<why>"}   when the instruction cannot or should not be carried out.\n'
        f"Tools:\n{tools}\n\n{SCHEMA}\n\n"
        "Rules: change only what the instruction asks for; use the tools when the change depends on "
        "how the code is used (callers, importers); keep every [REDACTED] placeholder exactly as it is and "
        "in the same order (it stands for a secret that orbit hid from you and puts back itself); "
        f"you have at most {max_steps} tool calls.")


def user_message(instruction: str, selection: str, path: str, context: str | None, start_line: int,
                 end_line: int) -> tuple[str, int]:
    """The first user message (redacted) and the number of secrets hidden in the selection."""
    sel, hidden = redact(selection)
    instr = redact(instruction)[0]
    ctx = f"\nContext: {redact(context)[0]}" if context else ""
    return (f"Instruction: {instr}\n"
            f"File: {path} (selected lines {start_line}-{end_line}){ctx}\n"
            "Selected text, exactly as in the file, between the markers (the markers are not part of it):\n"
            f"<<<SELECTION\n{sel}\nSELECTION>>>"), hidden


def _mark_keys(text: str) -> list[str | None]:
    """For each ``[REDACTED]`` in ``text``: the last word before it on its line (``API_KEY`` in
    ``API_KEY = "[REDACTED]"``), None when there is none."""
    keys: list[str | None] = []
    pieces = text.split(MARK)
    for before in pieces[:-1]:
        seg = before.rsplit("\n", 1)[-1]
        words = re.findall(r"\w+", seg)
        keys.append(words[-1] if words else None)
    return keys


def _hidden_values(original: str, redacted_text: str) -> list[str] | None:
    """The text each ``[REDACTED]`` of ``redacted_text`` stands for in ``original`` (in order),
    or None when ``redacted_text`` is not ``original`` with spans replaced. Each value is the
    shortest that lets the next unredacted piece follow (linear time: one ``find`` per piece)."""
    pieces = redacted_text.split(MARK)
    if len(pieces) < 2 or not original.startswith(pieces[0]):
        return None
    pos, values = len(pieces[0]), []
    for k, piece in enumerate(pieces[1:], 1):
        if k == len(pieces) - 1:  # the last piece ends the text
            end = len(original) - len(piece)
            if end < pos or not original.endswith(piece):
                return None
        else:
            end = original.find(piece, pos + 1) if piece else -1  # two marks side by side: ambiguous
            if end < 0:
                return None
        values.append(original[pos:end])
        pos = end + len(piece)
    return values


def restore(original: str, redacted_text: str, new_text: str) -> str:
    """``new_text`` with the ``[REDACTED]`` placeholders that ``redact`` put into ``original``
    (giving ``redacted_text``) replaced by the original values.

    Each placeholder is identified by the word before it on its line (``API_KEY = "[REDACTED]"``):
    when every placeholder of ``new_text`` has such a word that names exactly one placeholder of
    the selection, that one's value is used (lines may be moved, dropped or repeated). Otherwise,
    when ``new_text`` holds as many placeholders as the selection, they are mapped by rank (the
    same secrets in the same order, e.g. after a rename). Anything else raises ``Unrestorable``:
    a proposal never writes a guessed secret, nor ``[REDACTED]``, into the file."""
    n_new = new_text.count(MARK)
    if n_new == 0:
        return new_text
    values = _hidden_values(original, redacted_text)
    if values is None:
        raise Unrestorable(f"the proposed text holds {n_new} [REDACTED] placeholder(s) that do not stand for "
                           "secrets of the selection")
    old_keys, new_keys = _mark_keys(redacted_text), _mark_keys(new_text)
    if all(k is not None and old_keys.count(k) == 1 for k in new_keys):
        chosen = [values[old_keys.index(k)] for k in new_keys]
    elif n_new == len(values):
        chosen = values
    else:
        raise Unrestorable(f"the proposed text holds {n_new} [REDACTED] placeholder(s) where the selection "
                           f"had {len(values)}: which secret each stands for is unknown")
    it = iter(chosen)
    return re.sub(re.escape(MARK), lambda _m: next(it), new_text)


def _check_final(obj: dict) -> str | None:
    """What is wrong with a final proposal action, or None."""
    if "edit" not in obj:
        return None  # no_change
    e = obj["edit"]
    if not isinstance(e, dict) or not isinstance(e.get("new_text"), str):
        return '"edit" must be an object with "new_text" (a string)'
    if e.get("explanation") is not None and not isinstance(e["explanation"], str):
        return '"edit.explanation" must be a string'
    return None


def _parse(text: str) -> tuple[dict | None, str | None]:
    return parse_action(text, FINAL_KEYS, _check_final)


def run_propose(instruction: str, selection: str, model: ModelClient, toolbox: Toolbox, *, path: str,
                start_line: int, end_line: int, context: str | None = None, max_steps: int = 8,
                time_limit_s: float = 120.0, progress: Callable[[str], None] | None = None,
                cancel: threading.Event | None = None, audit: Callable[..., Any] | None = None) -> ProposeResult:
    """Ask ``model`` for a replacement of ``selection`` (lines ``start_line``-``end_line``, 1-based,
    of workspace file ``path``) following ``instruction``. ``context``: a sentence on where the
    selection is (enclosing symbol). See the module docstring for the protocol and limits."""
    result = ProposeResult(instruction=instruction)
    if len(selection) > MAX_SELECTION_CHARS:
        result.error = (f"the selection has {len(selection)} characters; at most {MAX_SELECTION_CHARS} are "
                        "sent to the model: select less")
        return result
    deadline = time.monotonic() + time_limit_s
    first, result.redactions = user_message(instruction, selection, path, context, start_line, end_line)
    redacted_sel = redact(selection)[0]
    messages: list[dict] = [{"role": "system", "content": system_prompt(max_steps)},
                            {"role": "user", "content": first}]
    try:
        action = drive(model, toolbox, messages, result, parse=_parse, final_keys=FINAL_KEYS, goal="a proposal",
                       invalid_word="reply", shapes='{"tool": NAME, "args": {...}}, {"edit": {"new_text": "...", '
                       '"explanation": "..."}} or {"no_change": "why"}', finish="propose", max_steps=max_steps,
                       time_limit_s=time_limit_s, deadline=deadline, cancel=cancel, audit=audit, progress=progress)
    except (ModelError, AgentStopped) as exc:
        result.error = str(exc)
        return result
    if "no_change" in action:
        why = action["no_change"]
        result.error = "the model proposed no change: " + (why if isinstance(why, str) else json.dumps(why))
        return result
    e = action["edit"]
    result.explanation = e.get("explanation")
    try:
        result.new_text = restore(selection, redacted_sel, e["new_text"])
    except Unrestorable as exc:
        result.error = str(exc)
    return result
