"""The built-in planner: answers the common questions without a model, with the agent's tools.

Recognised questions (case-insensitive, trailing ``?`` optional, names may be in backticks):

- "what depends on FILE" (also "… and who calls it") / "who imports FILE" / "what breaks if I change FILE" /
  "impact of FILE" → ``impact_of`` (FILE may be a unique suffix such as ``errors.py``; it is
  resolved with a ``cypher_query`` step). A symbol instead of a file → ``find_symbol`` (callers)
  and ``impact_of`` its file;
- "who calls X" / "what calls X" / "callers of X" → ``find_symbol``;
- "how does A reach B" / "how does A call B" / "call chain from A to B" / "path from A to B"
  → ``call_chain``;
- "which files use P" / "who uses package P" / "users of package P" → ``package_users``;
- "what does my change break" / "impact of my changes" / "which tests should I run" →
  ``change_impact`` (the uncommitted changes).

Anything else is answered from the user's memories recalled for the question (quoted, with their
ids: the planner does not reason about them) when there are any, else with what the planner can
do. Every answer says that no model was used.
"""

from __future__ import annotations

import re
from typing import Callable

from orbit_lsp.agent.loop import AskResult, Step
from orbit_lsp.agent.tools import Toolbox, ToolError, ToolResult
from orbit_lsp.markdown import code

NO_MODEL = ("No model is configured (set ORBIT_MODEL / OPENAI_BASE_URL / OPENAI_API_KEY or the "
            "agent settings): this answer comes from orbit's built-in planner, no model was used.")

HELP = ("The built-in planner understands: *what depends on FILE*, *who calls SYMBOL*, "
        "*how does A reach B*, *which files use package P*, *what does my change break*.")

_NAME = r"[`'\"]?(?P<{g}>[^\s`'\"?]+?)[`'\"]?(?:\(\))?"

_PATTERNS: list[tuple[str, re.Pattern]] = [
    ("changes", re.compile(r"\bwhat\s+(?:does|do|can|could|will|might)\s+my\s+(?:changes?|diff|edits?)\s+break\b", re.I)),
    ("changes", re.compile(r"\b(?:impact|blast\s+radius)\s+of\s+my\s+(?:changes?|diff|edits?)\b", re.I)),
    ("changes", re.compile(r"\bwhich\s+tests\s+(?:should|do|must)\s+I\s+run\b", re.I)),
    # "what depends on X and who calls it" (the "ask about this symbol" code action): before "who calls"
    ("depends", re.compile(r"\b(?:what|which\s+files?|who)\s+(?:depends?|relies|rely)\s+on\s+" + _NAME.format(g="x")
                           + r"\s+and\s+(?:who|what)\s+calls\s+it\s*[?.!]*$", re.I)),
    ("chain", re.compile(r"\bhow\s+(?:does|do|can|is)\s+" + _NAME.format(g="a") +
                         r"\s+(?:reach|reached|call|calls|get\s+to|lead\s+to|end\s+up\s+in|invoke)\s+"
                         + _NAME.format(g="b") + r"\s*[?.!]*$", re.I)),
    ("chain", re.compile(r"\b(?:call\s+)?(?:chain|path)\s+from\s+" + _NAME.format(g="a") + r"\s+to\s+"
                         + _NAME.format(g="b") + r"\s*[?.!]*$", re.I)),
    ("callers", re.compile(r"\b(?:who|what|which\s+functions?)\s+calls?\s+" + _NAME.format(g="x") + r"\s*[?.!]*$", re.I)),
    ("callers", re.compile(r"\bcallers\s+of\s+" + _NAME.format(g="x") + r"\s*[?.!]*$", re.I)),
    ("package", re.compile(r"\b(?:which|what)\s+files?\s+(?:use|uses|import|imports)\s+(?:the\s+)?(?:package\s+)?"
                           + _NAME.format(g="p") + r"(?:\s+package)?\s*[?.!]*$", re.I)),
    ("package", re.compile(r"\b(?:who\s+uses|users\s+of)\s+(?:the\s+)?package\s+" + _NAME.format(g="p") + r"\s*[?.!]*$", re.I)),
    ("depends", re.compile(r"\b(?:what|which\s+files?|who)\s+(?:depends?|relies|rely)\s+on\s+" + _NAME.format(g="x")
                           + r"\s*[?.!]*$", re.I)),
    ("depends", re.compile(r"\b(?:who|what|which\s+files?)\s+imports?\s+" + _NAME.format(g="x") + r"\s*[?.!]*$", re.I)),
    ("depends", re.compile(r"\bwhat\s+breaks\s+if\s+I\s+(?:change|edit|modify|delete)\s+" + _NAME.format(g="x")
                           + r"\s*[?.!]*$", re.I)),
    ("depends", re.compile(r"\b(?:impact|dependents)\s+of\s+" + _NAME.format(g="x") + r"\s*[?.!]*$", re.I)),
]

_FILE_LIKE = re.compile(r"/|\.(?:py|pyi|js|jsx|ts|tsx|mjs|cjs)$")


def match(question: str) -> tuple[str, dict] | None:
    """(kind, names) of a question the planner understands, else None."""
    q = " ".join(question.strip().split())
    for kind, pat in _PATTERNS:
        m = pat.search(q)
        if m:
            return kind, {k: v.strip("`'\".,") for k, v in m.groupdict().items()}
    return None


class _Run:
    def __init__(self, toolbox: Toolbox, progress: Callable[[str], None] | None):
        self.toolbox, self.progress, self.steps = toolbox, progress, []

    def tool(self, name: str, args: dict) -> ToolResult | None:
        step = Step(index=len(self.steps) + 1, tool=name, args=args)
        self.steps.append(step)
        if self.progress:
            self.progress(f"step {step.index}: {name}")
        try:
            res = self.toolbox.run(name, args)
        except ToolError as exc:
            step.error = str(exc)
            return None
        step.cypher, step.rows = res.cypher, res.rows
        return res


def _resolve_file(run: _Run, text: str) -> tuple[str | None, list[str]]:
    """The graph path of FILE as written: exact, else the unique path ending in ``/FILE``."""
    res = run.tool("cypher_query", {
        "query": "MATCH (f:File) WHERE f.path = $p OR f.path ENDS WITH $suffix RETURN f.path ORDER BY f.path",
        "params": {"p": text.lstrip("./"), "suffix": "/" + text.lstrip("./")}})
    paths = [r[0] for r in (res.data["rows"] if res else [])]
    if text.lstrip("./") in paths:
        return text.lstrip("./"), paths
    return (paths[0] if len(paths) == 1 else None), paths


def _where(c: dict) -> str:
    """A symbol as Markdown: qualified name and ``file:line``, both code spans (``markdown.code``:
    ``pkg/__init__.py`` must not render as a bold ``init.py``)."""
    return f"{code(c['qual'])} ({code(str(c['file']) + ':' + str(c['line']))})"


def _depends(run: _Run, x: str) -> str:
    if not _FILE_LIKE.search(x):
        sym = run.tool("find_symbol", {"name": x})
        if sym and sym.data["candidates"]:
            parts = [_callers_text(sym.data)]
            for f in sorted({c["file"] for c in sym.data["candidates"]}):
                parts.append(_impact_text(run, f))
            return "\n\n".join(parts)
    path, cands = _resolve_file(run, x)
    if path is None:
        if cands:
            return f"`{x}` matches several files: " + ", ".join(f"`{c}`" for c in cands) + ". Ask with the full path."
        return f"`{x}` is not a file or symbol in the code graph (not indexed, skipped, or misspelt)."
    return _impact_text(run, path)


def _impact_text(run: _Run, path: str) -> str:
    res = run.tool("impact_of", {"path": path})
    if res is None:
        return f"Could not compute the dependents of `{path}`: {run.steps[-1].error}"
    deps = res.data["dependents"]
    if not deps["count"]:
        return f"Nothing in the workspace imports `{path}` (0 dependents within {res.data['max_hops']} hops)."
    lines = [f"**{deps['count']} file{'s' if deps['count'] != 1 else ''} depend on `{path}`** "
             f"(through imports, up to {res.data['max_hops']} hops):"]
    lines += [f"- {code(d['path'])} — {d['hops']} hop{'s' if d['hops'] != 1 else ''}" for d in deps["items"]]
    if deps.get("note"):
        lines.append(f"({deps['note']})")
    return "\n".join(lines)


def _callers_text(data: dict) -> str:
    cands = data["candidates"]
    if not cands:
        return f"No symbol named `{data['symbol']}` is in the code graph."
    out = []
    if len(cands) > 1:
        out.append(f"`{data['symbol']}` is ambiguous: {len(cands)} symbols match.")
    for c in cands:
        n = len(c["callers"])
        head = f"**{_where(c)}** has {n} direct caller{'s' if n != 1 else ''}" + (":" if n else ".")
        out.append(head)
        out += [f"- {_where(k)}" for k in c["callers"]]
        if c.get("note"):
            out.append(f"  Note: {c['note']}.")
    return "\n".join(out)


def _chain_text(run: _Run, a: str, b: str) -> str:
    res = run.tool("call_chain", {"source": a, "target": b})
    if res is None:
        return f"Could not compute a call chain: {run.steps[-1].error}"
    paths = res.data["paths"]["items"]
    notes = res.data["notes"]
    if not paths:
        return f"No call path from `{a}` to `{b}` in the graph." + (" " + "; ".join(notes) + "." if notes else "")
    out = [f"**`{a}` reaches `{b}`** in {len(paths[0]['path']) - 1} call{'s' if len(paths[0]['path']) != 2 else ''}:"]
    for k, p in enumerate(paths):
        if k:
            out.append(f"\nAlternative ({p['from']} → {p['to']}):")
        out += [f"{i + 1}. {_where(n)}" for i, n in enumerate(p["path"])]
    if notes:
        out.append("\nNotes: " + "; ".join(notes) + ".")
    return "\n".join(out)


def _package_text(run: _Run, p: str) -> str:
    res = run.tool("package_users", {"name": p})
    if res is None:
        return f"Could not list the users of `{p}`: {run.steps[-1].error}"
    files = res.data["files"]
    if not files["count"]:
        return f"No file in the workspace uses a package named `{p}`."
    kind = f" ({'; '.join(res.data['notes'])})" if res.data["notes"] else ""
    lines = [f"**{files['count']} file{'s' if files['count'] != 1 else ''} use `{p}`**{kind}:"]
    lines += [f"- {code(f['path'])} (line {f['line']})" for f in files["items"]]
    return "\n".join(lines)


def _changes_text(run: _Run) -> str:
    res = run.tool("change_impact", {})
    if res is None:
        return f"Could not compute the impact of your changes: {run.steps[-1].error}"
    d = res.data
    if not d["changed"]["count"]:
        return f"No changed function, method, class or module in the {d['change']} (nothing to break)."
    lines = [f"**Your changes** ({d['change']}) touch {d['changed']['count']} symbol(s):"]
    lines += [f"- {s['status']} {_where(s)}" + (f" (was {code(s['was'])})" if s.get("was") else "")
              for s in d["changed"]["items"]]
    callers = d["callers"]
    lines.append(f"\n**{callers['count']} caller(s)** may break (through calls, nearest first):")
    lines += [f"- {_where(c)} — {c['depth']} hop(s) from {code(c['reaches'])}" for c in callers["items"][:20]]
    if callers["count"] > 20:
        lines.append(f"- … and {callers['count'] - 20} more")
    tests = d["tests_to_run"]
    lines.append(f"\n**Tests to run: {tests['count']}**" + (":" if tests["count"] else "."))
    lines += [f"- {code(t['id'])} — {t['reason']}" for t in tests["items"][:20]]
    if d["run"]:
        lines.append(f"\n```sh\n{d['run']}\n```")
    may = d["may_be_affected"]["count"]
    tmay = d["tests_that_may_be_affected"]["count"]
    if may or tmay:
        lines.append(f"\n{may} symbol(s) and {tmay} test(s) *may* be affected through calls the graph could not bind.")
    return "\n".join(lines)


def _memories_text(memories: list) -> str:
    lines = ["**From your memories** (what you asked orbit to remember that bears on this question):"]
    for m in memories:
        shared = f" (shares: {', '.join(m.matched)})" if m.matched else ""
        stale = f" — *possibly stale: {m.stale_reason}*" if m.stale else ""
        lines.append(f"- memory #{m.id}: “{m.text}”{shared}{stale}")
    lines.append("\nThe built-in planner quotes your memories; it does not reason beyond them. " + HELP)
    return "\n".join(lines)


def run_planner(question: str, toolbox: Toolbox, progress: Callable[[str], None] | None = None,
                memories: list | None = None) -> AskResult:
    """Answer ``question`` without a model. Always returns an ``AskResult`` with
    ``planner=True``; a question it does not understand is answered from ``memories`` (the
    user's memories recalled for it, ``orbit_lsp.memory.store.Memory``) when there are any, else
    gets ``HELP`` as its answer. Raises ``FalkorDBOffline`` from the graph."""
    run = _Run(toolbox, progress)
    m = match(question)
    if m is None and memories:
        text = _memories_text(memories)
    elif m is None:
        text = f"The built-in planner does not understand this question. {HELP}"
    else:
        kind, names = m
        if kind == "depends":
            text = _depends(run, names["x"])
        elif kind == "callers":
            sym = run.tool("find_symbol", {"name": names["x"]})
            text = _callers_text(sym.data) if sym else f"Could not look up `{names['x']}`: {run.steps[-1].error}"
        elif kind == "chain":
            text = _chain_text(run, names["a"], names["b"])
        elif kind == "changes":
            text = _changes_text(run)
        else:
            text = _package_text(run, names["p"])
        if memories:
            text += "\n\n" + "\n".join(["Your memories that may bear on this:"] + [
                f"- memory #{mm.id}: “{mm.text}”" + (f" — *possibly stale: {mm.stale_reason}*" if mm.stale else "")
                for mm in memories])
    return AskResult(question=question, answer=text, steps=run.steps, planner=True, notes=[NO_MODEL])
