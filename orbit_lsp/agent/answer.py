"""The Markdown shown to the user for one question: the answer, who answered, the memories it
used (recalled for the question or by the ``recall`` tool, each with its id, state and the Cypher
that found them) and a memory it proposed, then every step with its tool, arguments, the Cypher
it ran and its row count."""

from __future__ import annotations

import json

from orbit_lsp.agent.loop import AskResult
from orbit_lsp.markdown import code


def render(result: AskResult) -> str:
    """Markdown for ``result`` (also stored in ``result.markdown`` by the caller)."""
    out: list[str] = []
    if result.error:
        out.append(f"**Error:** {result.error}")
    if result.answer:
        out.append(result.answer.strip())
    if result.planner:
        out.append(f"*{result.notes[0]}*" if result.notes else "*No model was used.*")
    elif result.model:
        out.append(f"*Answered by model {code(result.model)}.*" if result.answer else f"*Last model: {code(result.model)}.*")
    extra = result.notes[1:] if result.planner else result.notes
    if extra:
        out.append("\n".join(f"- {n}" for n in extra))
    if result.memories:
        out.append(_memories(result))
    if result.proposed_memory is not None:
        p = result.proposed_memory
        out.append(f"### Proposed memory\n\nmemory #{p.id} “{p.text}” is saved **unconfirmed**: it is not "
                   f"recalled until you confirm it (VS Code: *Orbit: Confirm memory*; Neovim: "
                   f"`:OrbitConfirmMemory {p.id}`; terminal: `orbit-lsp memory confirm {p.id}`).")
    if result.steps:
        out.append(f"### Steps ({len(result.steps)})")
        for s in result.steps:
            args = json.dumps(s.args, ensure_ascii=False, default=str)
            status = f"error: {s.error}" if s.error else f"{s.rows} row{'s' if s.rows != 1 else ''}"
            lines = [f"{s.index}. {code(s.tool)} {code(args)} — {status}"]
            for c in s.cypher:
                q = c["query"]
                if c.get("params"):
                    q += "\n// params: " + json.dumps(c["params"], ensure_ascii=False, default=str)
                lines.append("   ```cypher\n" + "\n".join("   " + ln for ln in q.splitlines()) + "\n   ```")
            out.append("\n".join(lines))
    else:
        out.append("*No graph steps were run.*")
    return "\n\n".join(out) + "\n"


def _memories(result: AskResult) -> str:
    n = len(result.memories)
    how = "quoted by the built-in planner" if result.planner else "given to the model"
    lines = [f"### Memories used ({n})", "", f"Recalled for this question and {how}:"]
    for m in result.memories:
        about = ", ".join(code(p["root"]) for p in m.projects) or "no project in particular"
        extra = f"; matched {', '.join(m.matched)}" if m.matched else ""
        stale = f"; **possibly stale**: {m.stale_reason}" if m.stale else ""
        lines.append(f"- memory #{m.id} “{m.text}” — about {about}{extra}{stale}")
    for c in result.memory_cypher:
        q = c["query"]
        if c.get("params"):
            q += "\n// params: " + json.dumps(c["params"], ensure_ascii=False, default=str)
        lines.append("\n  ```cypher\n" + "\n".join("  " + ln for ln in q.splitlines()) + "\n  ```")
    return "\n".join(lines)
