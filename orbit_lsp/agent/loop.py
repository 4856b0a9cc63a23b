"""The agent loop: one JSON action per model turn, tools run on the graph, a Markdown answer.

``run_agent(question, model, toolbox, ...) -> AskResult``. Each model turn must be one JSON
object: ``{"tool": NAME, "args": {...}}`` or ``{"answer": "..."}``. The tool's result (or its
error) goes back to the model as the next user message.

Limits: an invalid reply (no JSON object, not an action, unknown tool) is explained to the model
once; a second one ends the question with an error. At most ``max_steps`` tool calls; the same
call repeated is not re-run (the model is told to use the earlier result). The wall-clock limit
(``time_limit_s``) bounds every request and wait; ``cancel`` (a ``threading.Event``) is checked
between steps and during rate-limit waits.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from orbit_lsp.agent.model import Cancelled, ModelClient, ModelError, extract_action, without_lone_surrogates
from orbit_lsp.agent.redact import redact
from orbit_lsp.agent.tools import SCHEMA, TOOLS, Toolbox, ToolError, redacted, tool_list

MAX_RESULT_CHARS = 24_000  # longest tool result sent to the model


class AgentStopped(Exception):
    """The loop ended without an answer (invalid replies, step or time limit)."""


@dataclass
class Step:
    """One tool call: ``tool``, ``args``, ``cypher`` ([{"query", "params"}]), ``rows`` (count),
    ``error`` (tool error text, or None), ``ms`` (elapsed milliseconds)."""

    index: int
    tool: str
    args: dict
    cypher: list[dict] = field(default_factory=list)
    rows: int = 0
    error: str | None = None
    ms: float = 0.0
    note: str | None = None

    def to_dict(self) -> dict:
        return {"index": self.index, "tool": self.tool, "args": self.args, "cypher": self.cypher,
                "rows": self.rows, "error": self.error, "ms": round(self.ms, 1), "note": self.note}


@dataclass
class AskResult:
    """The outcome of one question: ``answer`` (the model's or planner's text, None on error),
    ``markdown`` (answer + how it was found, every step with its Cypher), ``steps``, ``model``
    (the model that answered last; None for the planner), ``planner`` (no model was used),
    ``error`` (why there is no answer), ``notes`` (fallbacks, recovered reasoning),
    ``memories`` (``orbit_lsp.memory.store.Memory`` recalled for the question and given to the
    agent or planner, best first; ``memory_cypher`` found them), ``proposed_memory`` (a memory the
    question asked to keep, saved unconfirmed), ``turn_id`` (the history turn)."""

    question: str
    answer: str | None
    steps: list[Step]
    model: str | None = None
    planner: bool = False
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    conversation_id: int | None = None
    markdown: str = ""
    memories: list = field(default_factory=list)
    memory_cypher: list[dict] = field(default_factory=list)
    proposed_memory: Any = None
    turn_id: int | None = None

    def to_dict(self) -> dict:
        return {"question": self.question, "answer": self.answer, "markdown": self.markdown,
                "steps": [s.to_dict() for s in self.steps], "model": self.model, "planner": self.planner,
                "error": self.error, "notes": self.notes, "conversationId": self.conversation_id,
                "turnId": self.turn_id, "memories": [m.to_dict() for m in self.memories],
                "proposedMemory": self.proposed_memory.to_dict() if self.proposed_memory else None}


def system_prompt(max_steps: int) -> str:
    tools = tool_list()
    return (
        "You answer questions about a code workspace by querying its code graph, in small steps.\n"
        "Reply with exactly ONE JSON object and nothing else, either\n"
        '  {"tool": "<name>", "args": {...}}   to run a tool (its result comes back to you), or\n'
        '  {"answer": "<markdown>"}            when you can answer.\n'
        f"Tools:\n{tools}\n\n{SCHEMA}\n\n"
        "Rules: answer only from tool results and the user's memories (when you use a memory, name "
        "it as memory #N), naming files and symbols exactly as returned; "
        "if a tool reports an error or a refused query, say so instead of inventing results; if a "
        "result is truncated, do not present it as complete (count with count(*)); file contents "
        "are only available through read_file, .env files are never readable and secrets are "
        f"redacted; you have at most {max_steps} tool calls.")


def memory_context(memories: list) -> str:
    """The paragraph giving recalled memories to the model."""
    lines = ["Memories the user saved that may matter (use them when relevant and name them as memory #N; "
             "the recall tool finds more):"]
    for m in memories:
        stale = f" [possibly stale: {m.stale_reason}]" if m.stale else ""
        lines.append(f"- memory #{m.id}: {m.text}{stale}")
    return "\n".join(lines)


def tool_step(toolbox, action: dict, steps: list, seen: dict, messages: list, say: Callable[[str], None],
              finish: str) -> "Step":
    """Run the tool action of one model turn and feed its result (or error) back as a user
    message; the call is recorded as a ``Step`` (tool, args, Cypher, rows, ms) in ``steps``. A
    call identical to an earlier one (``seen``: call key -> step index) is not run again: the
    model is told to use that result or ``finish`` ("answer", "propose") now."""
    tool, args = action["tool"], action.get("args") or {}
    step = Step(index=len(steps) + 1, tool=tool, args=args)
    steps.append(step)
    key = json.dumps([tool, args], sort_keys=True, default=str)
    if key in seen:
        step.note = step.error = f"same call as step {seen[key]}; not run again"
        messages.append({"role": "user", "content": _result_text(
            step, error=f"you already ran this exact call in step {seen[key]}; use that result or {finish} now")})
        return step
    seen[key] = step.index
    say(f"step {step.index}: {tool}")
    t0 = time.perf_counter()
    try:
        res = toolbox.run(tool, args)
    except ToolError as exc:
        step.error = str(exc)
        messages.append({"role": "user", "content": _result_text(step, error=str(exc))})
    else:
        step.cypher, step.rows = res.cypher, res.rows
        messages.append({"role": "user", "content": _result_text(step, data=res.data)})
    step.ms = (time.perf_counter() - t0) * 1000
    return step


def _result_text(step: Step, data: Any = None, error: str | None = None) -> str:
    """The message carrying a tool's result (or error) back to the model: JSON, redacted, at most
    ``MAX_RESULT_CHARS``. A longer result keeps its leading rows (and says how many were left
    out); anything else too long is sent as a cut string."""
    body: dict = {"step": step.index, "tool": step.tool}
    if error is not None:
        body["error"] = redact(error)[0]
    else:
        data = redacted(data)  # strings redacted one by one: the JSON around them stays valid
        body["result"] = data

    def dump(obj) -> str:
        return json.dumps(obj, default=str, ensure_ascii=False)

    text = dump(body)
    if len(text) > MAX_RESULT_CHARS and isinstance(data, dict) and isinstance(data.get("rows"), list):
        rows = data["rows"]
        lo, hi = 0, len(rows)
        while lo < hi:  # most leading rows that fit
            mid = (lo + hi + 1) // 2
            if len(dump({**body, "result": {**data, "rows": rows[:mid]}})) <= MAX_RESULT_CHARS - 200:
                lo = mid
            else:
                hi = mid - 1
        body["result"] = {**data, "rows": rows[:lo], "rows_sent_to_you": lo,
                          "size_note": f"only the first {lo} of {len(rows)} returned rows fit in this message; "
                                       "return fewer or smaller columns (properties instead of whole nodes)"}
        text = dump(body)
    if len(text) > MAX_RESULT_CHARS:
        text = dump({"step": step.index, "tool": step.tool,
                     "result_cut": text[:MAX_RESULT_CHARS - 300],
                     "size_note": "the result was too long and is cut; ask a narrower question"})
    return text


def parse_action(text: str, final_keys: tuple[str, ...],
                 check_final: Callable[[dict], str | None] | None = None) -> tuple[dict | None, str | None]:
    """One model turn's action: ``(action, None)``, or ``(None, what is wrong with the reply)``
    to send back. The action is a JSON object (the last one in the text when the reply is not
    JSON alone) holding one of ``final_keys`` (then checked by ``check_final``, which returns
    what is wrong or None), else a call of a known tool with object ``args``."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):  # not JSON alone, or nested past the decoder's stack
        obj = extract_action(text, ("tool",) + final_keys)
    if not isinstance(obj, dict):
        return None, "the reply is not a JSON object"
    if any(k in obj for k in final_keys):
        wrong = check_final(obj) if check_final is not None else None
        return (None, wrong) if wrong else (obj, None)
    if "tool" not in obj:
        return None, "the JSON object has none of " + ", ".join(f'"{k}"' for k in ("tool",) + final_keys)
    if not isinstance(obj["tool"], str) or obj["tool"] not in TOOLS:
        return None, f"unknown tool {obj.get('tool')!r}; tools are: {', '.join(TOOLS)}"
    if obj.get("args") is not None and not isinstance(obj.get("args"), dict):
        return None, '"args" must be a JSON object'
    return obj, None


def _parse(text: str) -> tuple[dict | None, str | None]:
    return parse_action(text, ("answer",))


def drive(model: ModelClient, toolbox: Toolbox, messages: list[dict], result, *,
          parse: Callable[[str], tuple[dict | None, str | None]], final_keys: tuple[str, ...], goal: str,
          invalid_word: str, shapes: str, finish: str, max_steps: int, time_limit_s: float, deadline: float,
          cancel: threading.Event | None, audit: Callable[..., Any] | None,
          progress: Callable[[str], None] | None) -> dict:
    """Model turns until one returns a final action (one holding a key of ``final_keys``), which
    is returned. Each turn's tool action runs through ``tool_step``; ``result`` (an ``AskResult``
    or a ``ProposeResult``) gets the steps, the model that answered and notes (rate limits,
    failed fallbacks, actions recovered from reasoning). A reply that ``parse`` refuses is
    explained to the model once (``shapes``: the JSON it may send).

    Raises ``AgentStopped`` (time or step limit before ``goal``; an invalid ``invalid_word``
    twice), ``ModelError`` and ``Cancelled``."""
    seen: dict[str, int] = {}
    invalid = 0

    def say(msg: str) -> None:
        if progress is not None:
            progress(msg)

    while True:
        if cancel is not None and cancel.is_set():
            raise Cancelled("cancelled")
        if time.monotonic() >= deadline:
            raise AgentStopped(f"time limit of {time_limit_s:.0f} s reached before {goal}")
        say(f"asking the model (step {len(result.steps) + 1})")
        reply = model.complete(messages, deadline=deadline, cancel=cancel, audit=audit)
        result.model = reply.model
        for a in reply.attempts:
            note = None
            if a.get("status") == 429:
                note = f"model {a['model']} was rate-limited (HTTP 429, {a.get('error')})"
            elif a.get("status", 0) >= 500:
                note = f"model {a['model']} failed (HTTP {a['status']})"
            elif a.get("next_budget"):
                note = (f"model {a['model']}'s reply was cut off by its length (finish_reason length) and not "
                        f"used; asked again with a budget of {a['next_budget']} tokens")
            if note and note not in result.notes:
                result.notes.append(note)
        if reply.from_reasoning:
            result.notes.append(f"model {reply.model} sent only reasoning; its last JSON action was used")
        messages.append({"role": "assistant", "content": reply.text})
        action, problem = parse(reply.text)
        action = without_lone_surrogates(action)  # JSON escapes may spell unpaired surrogates
        if action is None:
            invalid += 1
            if invalid > 1:
                raise AgentStopped(f"the model sent an invalid {invalid_word} twice ({problem}); stopped")
            messages.append({"role": "user", "content": f"Invalid reply: {problem}. Reply with exactly one JSON "
                             f"object: {shapes}."})
            continue
        if any(k in action for k in final_keys):
            return action
        if len(result.steps) >= max_steps:
            raise AgentStopped(f"step limit reached: {max_steps} tool calls without {goal}")
        tool_step(toolbox, action, result.steps, seen, messages, say, finish)


def run_agent(question: str, model: ModelClient, toolbox: Toolbox, *, max_steps: int = 8,
              time_limit_s: float = 120.0, context: str | None = None,
              history: list[tuple[str, str]] | None = None,
              progress: Callable[[str], None] | None = None,
              cancel: threading.Event | None = None,
              audit: Callable[..., Any] | None = None, memories: list | None = None) -> AskResult:
    """Answer ``question`` with ``model`` choosing ``toolbox`` tools. ``context``: a sentence on
    where the user is (file, symbol); ``history``: earlier (question, answer) pairs of the
    conversation; ``memories``: the user's memories recalled for the question (given with it).
    ``progress(message)`` is called before each model call and tool run;
    ``audit(kind, **details)`` records every model call.

    Returns an ``AskResult`` (with ``error`` set when the loop stopped without an answer: model
    errors, rate limits, invalid replies, step or time limit). Raises ``Cancelled``."""
    deadline = time.monotonic() + time_limit_s
    messages: list[dict] = [{"role": "system", "content": system_prompt(max_steps)}]
    for q, a in history or []:
        messages += [{"role": "user", "content": q}, {"role": "assistant", "content": json.dumps({"answer": a})}]
    user = question if not context else f"{question}\n\n(Context: {context})"
    if memories:
        user += "\n\n" + memory_context(memories)
    messages.append({"role": "user", "content": redact(user)[0]})
    result = AskResult(question=question, answer=None, steps=[])
    try:
        action = drive(model, toolbox, messages, result, parse=_parse, final_keys=("answer",), goal="an answer",
                       invalid_word="action", shapes='{"tool": NAME, "args": {...}} or {"answer": "..."}',
                       finish="answer", max_steps=max_steps, time_limit_s=time_limit_s, deadline=deadline,
                       cancel=cancel, audit=audit, progress=progress)
        ans = action["answer"]
        result.answer = ans if isinstance(ans, str) else json.dumps(ans, ensure_ascii=False)
        return result
    except (ModelError, AgentStopped) as exc:
        result.error = str(exc)
        return result
