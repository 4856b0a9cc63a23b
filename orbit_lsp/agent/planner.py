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
- "who uses X" / "where is X used" / "usages of X" (X a file: its dependents; a symbol: its
  callers; else a package: its users);
- "how is A connected to B" / "does A call B" / "path between A and B" → ``call_chain``;
- "which functions are never called" / "unused functions" / "dead code" / "what can I remove"
  → the functions and methods the graph proves unused with the checks of the "remove unused"
  code action (``orbit_lsp.edits.removal.unused_functions``), and those without callers it cannot
  prove unused, each with the reason.
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

HELP = ("The built-in planner understands: *what depends on FILE*, *who calls SYMBOL* (or *who uses X*), "
        "*how does A reach B* (or *how is A connected to B*), *which files use package P*, "
        "*which functions are never called*, *what does my change break*.")
# the start of the planner's answer to a question it does not understand (front ends may test it)
NOT_UNDERSTOOD = "The built-in planner does not understand this question."

_NAME = r"[`'\"]?(?P<{g}>[^\s`'\"?]+?)(?:\(\))?[`'\"]?(?:\(\))?"
_KIND = r"(?:\s+(?:class|function|method|module|file|symbol))?"  # "the Session class"
_END = r"\s*[?.!]*$"
_THE = r"(?:the\s+)?"


def _n(g: str) -> str:
    """A name (group ``g``), optionally after "the" and before "class"/"function"/…"""
    return _THE + _NAME.format(g=g) + _KIND


_PATTERNS: list[tuple[str, re.Pattern]] = [
    ("changes", re.compile(r"\bwhat\s+(?:does|do|can|could|will|might)\s+my\s+(?:changes?|diff|edits?)\s+break\b", re.I)),
    ("changes", re.compile(r"\b(?:impact|blast\s+radius)\s+of\s+my\s+(?:changes?|diff|edits?)\b", re.I)),
    ("changes", re.compile(r"\bwhich\s+tests\s+(?:should|do|must)\s+I\s+run\b", re.I)),
    # "what depends on X and who calls it" (the "ask about this symbol" code action): before "who calls"
    ("depends", re.compile(r"\b(?:what|which\s+files?|who)\s+(?:depends?|relies|rely)\s+on\s+" + _n("x")
                           + r"\s+and\s+(?:who|what)\s+calls\s+it" + _END, re.I)),
    # unused functions: answered with what the graph proves (the "remove unused" checks)
    ("unused", re.compile(r"\b(?:which|what)\s+(?:functions?|methods?|code|symbols?)\s+(?:are|is)\s+(?:never|not)\s+"
                          r"(?:called|used|referenced)(?:\s+anywhere)?" + _END, re.I)),
    ("unused", re.compile(r"\b(?:which|what)\s+(?:functions?|methods?|code|symbols?)\s+(?:are|is)\s+"
                          r"(?:unused|dead|uncalled|unreferenced)" + _END, re.I)),
    ("unused", re.compile(r"^(?:(?:list|find|show)(?:\s+me)?\s+|(?:are\s+there|any)\s+)?(?:the\s+|all\s+)?"
                          r"(?:unused|dead|uncalled|never[\s-]called|unreferenced)\s+(?:functions?|methods?|code)"
                          r"(?:\s+in\s+(?:this|the)\s+(?:workspace|project|repo(?:sitory)?|code(?:base)?))?" + _END, re.I)),
    ("unused", re.compile(r"\b(?:functions?|methods?)\s+(?:with\s+no|without(?:\s+any)?)\s+callers" + _END, re.I)),
    ("unused", re.compile(r"\bwhat\s+(?:functions?\s+|code\s+)?can\s+I\s+(?:safely\s+)?(?:remove|delete)" + _END, re.I)),
    # A -> B
    ("chain", re.compile(r"\bhow\s+(?:does|do|can|is)\s+" + _n("a") +
                         r"\s+(?:reach|reached|call|calls|get\s+to|lead\s+to|end\s+up\s+in|invoke)\s+"
                         + _n("b") + _END, re.I)),
    ("chain", re.compile(r"\bhow\s+(?:is|are)\s+" + _n("a") + r"\s+(?:connected|linked|related)\s+(?:to|with)\s+"
                         + _n("b") + _END, re.I)),
    ("chain", re.compile(r"\bhow\s+(?:is|are)\s+" + _n("a") + r"\s+and\s+" + _n("b")
                         + r"\s+(?:connected|linked|related)" + _END, re.I)),
    ("chain", re.compile(r"\b(?:what\s+connects|connection\s+between)\s+" + _n("a") + r"\s+(?:to|and|with)\s+"
                         + _n("b") + _END, re.I)),
    ("chain", re.compile(r"\b(?:does|can|could|will)\s+" + _n("a") + r"\s+(?:ever\s+)?(?:call|reach|invoke|lead\s+to)\s+"
                         + _n("b") + r"(?:\s+(?:directly\s+or\s+)?(?:indirectly|transitively))?" + _END, re.I)),
    ("chain", re.compile(r"\bhow\s+do\s+(?:I|we|you)\s+get\s+from\s+" + _n("a") + r"\s+to\s+" + _n("b") + _END, re.I)),
    ("chain", re.compile(r"\b(?:call\s+)?(?:chain|path|route)\s+(?:from|between)\s+" + _n("a") + r"\s+(?:to|and)\s+"
                         + _n("b") + _END, re.I)),
    # callers of X
    ("callers", re.compile(r"\b(?:who|what|which\s+(?:functions?|methods?|code))\s+(?:calls?|invokes?)\s+" + _n("x")
                           + _END, re.I)),
    ("callers", re.compile(r"\b(?:callers|invokers)\s+(?:of|for)\s+" + _n("x") + _END, re.I)),
    ("callers", re.compile(r"\bwhere\s+(?:is|are)\s+" + _n("x") + r"\s+(?:called|invoked)(?:\s+from)?" + _END, re.I)),
    # packages
    ("package", re.compile(r"\b(?:which|what)\s+files?\s+(?:use|uses|import|imports)\s+(?:the\s+)?package\s+"
                           + _NAME.format(g="p") + _END, re.I)),
    ("package", re.compile(r"\b(?:which|what)\s+files?\s+(?:use|uses|import|imports)\s+(?:the\s+)?"
                           + _NAME.format(g="p") + r"\s+package" + _END, re.I)),
    ("package", re.compile(r"\b(?:who\s+uses|users\s+of|who\s+imports|where\s+is)\s+(?:the\s+)?package\s+"
                           + _NAME.format(g="p") + r"(?:\s+used|\s+imported)?" + _END, re.I)),
    # X used by whom: a file -> its dependents, a symbol -> its callers, else a package's users
    ("uses", re.compile(r"\b(?:who|what|which\s+(?:files?|functions?|methods?|code))\s+(?:uses?|references?)\s+"
                        + _n("x") + _END, re.I)),
    ("uses", re.compile(r"\bwhere\s+(?:is|are)\s+" + _n("x") + r"\s+(?:used|referenced|imported)" + _END, re.I)),
    ("uses", re.compile(r"\b(?:usages?|uses|references|users)\s+(?:of|to)\s+" + _n("x") + _END, re.I)),
    # dependents of a file
    ("depends", re.compile(r"\b(?:what|which\s+files?|who)\s+(?:depends?|relies|rely)\s+on\s+" + _n("x") + _END, re.I)),
    ("depends", re.compile(r"\b(?:who|what|which\s+files?)\s+imports?\s+" + _n("x") + _END, re.I)),
    ("depends", re.compile(r"\bwhat\s+(?:breaks|(?:would|will|could|might)\s+break)\s+if\s+(?:I|we|you)\s+"
                           r"(?:change|changed|edit|edited|modify|modified|delete|deleted|remove|removed)\s+"
                           + _n("x") + _END, re.I)),
    ("depends", re.compile(r"\b(?:what|which\s+files?|who)\s+(?:is|are|would\s+be|gets?)\s+affected\s+(?:by|if\s+I\s+change)\s+"
                           r"(?:changing\s+|a\s+change\s+(?:to|in)\s+)?" + _n("x") + _END, re.I)),
    ("depends", re.compile(r"\b(?:impact|dependents|reverse\s+dependencies|blast\s+radius)\s+of\s+"
                           r"(?:changing\s+)?" + _n("x") + _END, re.I)),
]

# a path, unless it names a symbol in a file (``src/types.ts#ZodType.parse``)
_FILE_LIKE = re.compile(r"^(?!.*#)(?:.*/|.*\.(?:py|pyi|js|jsx|ts|tsx|mts|cts|mjs|cjs)$)")


def match(question: str) -> tuple[str, dict] | None:
    """(kind, names) of a question the planner understands, else None. Kinds: ``depends``
    (``x``), ``callers`` (``x``), ``chain`` (``a``, ``b``), ``package`` (``p``), ``uses`` (``x``:
    a file, symbol or package) and ``unused`` (no names)."""
    q = " ".join(question.strip().split())
    for kind, pat in _PATTERNS:
        m = pat.search(q)
        if m:
            return kind, {k: v.strip("`'\".,") for k, v in m.groupdict().items() if v is not None}
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
    sym = None
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
        if not _FILE_LIKE.search(x):
            users = _package_text(run, x, missing=None)
            if users is not None:
                return users
        close = ((sym.data.get("note") if sym else None) or "").partition("; closest: ")[2]
        return (f"`{x}` is not a file or symbol in the code graph (not indexed, skipped, or misspelt)."
                + (" Closest symbols: " + ", ".join(code(c) for c in close.split(", ")) + "." if close else ""))
    return _impact_text(run, path)


def _uses(run: _Run, x: str) -> str:
    """Who uses X: a file's dependents, a symbol's callers, else a package's users."""
    if _FILE_LIKE.search(x):
        return _depends(run, x)
    sym = run.tool("find_symbol", {"name": x})
    if sym and sym.data["candidates"]:
        return _callers_text(sym.data)
    users = _package_text(run, x, missing=None)
    if users is not None:
        return users
    return _depends(run, x)  # a file named without its directory, or "not in the graph"


def _unused(run: _Run) -> str:
    """Functions and methods the graph proves unused, with the checks of the "remove unused"
    code action (``orbit_lsp.edits.removal``), and those without callers it cannot prove unused."""
    from orbit_lsp.edits.removal import unused_functions

    tb = run.toolbox
    step = Step(index=len(run.steps) + 1, tool="unused_functions", args={})
    run.steps.append(step)
    if run.progress:
        run.progress(f"step {step.index}: unused_functions")
    rep = unused_functions(tb.graph, tb.root)
    step.cypher, step.rows = rep.cypher, len(rep.proven)
    step.note = (f"{rep.candidates} functions/methods without a CALLS edge into them; {rep.checked} checked "
                 "with the 'remove unused' proof")
    if not rep.candidates:
        return "Every function and method in the graph has at least one caller."
    shown = 30
    out = []
    if rep.proven:
        n = len(rep.proven)
        out.append(f"**{n} function{'s are' if n != 1 else ' is'} proven unused** — no callers, no call that "
                   "could not be bound uses the name, not mentioned anywhere else in the workspace (the checks "
                   "of the \"Remove unused\" code action):")
        out += [f"- {_where(r.symbol)}" for r in rep.proven[:shown]]
        if n > shown:
            out.append(f"- … and {n - shown} more")
    else:
        out.append("**No function is proven unused.**")
    if rep.unproven:
        n = len(rep.unproven)
        out.append(f"\n{n} more ha{'ve' if n != 1 else 's'} no caller in the graph but may still be used "
                   "(not listed as unused):")
        out += [f"- {_where(r.symbol)}: {r.reason}" for r in rep.unproven[:shown]]
        if n > shown:
            out.append(f"- … and {n - shown} more")
    if rep.note:
        out.append(f"\n{rep.note}")
    return "\n".join(out)


def _impact_text(run: _Run, path: str) -> str:
    res = run.tool("impact_of", {"path": path})
    if res is None:
        return f"Could not compute the dependents of `{path}`: {run.steps[-1].error}"
    deps = res.data["dependents"]
    if not deps["count"]:
        return f"Nothing in the workspace imports `{path}` (0 dependents within {res.data['max_hops']} hops)."
    lines = [f"**{deps['count']} file{'s' if deps['count'] != 1 else ''} depend on `{path}`** "
             f"(through imports, up to {res.data['max_hops']} hops):"]
    lines += [f"- {code(d['path'])} — {d['hops']} hop{'s' if d['hops'] != 1 else ''}"
              + (" (its types only)" if d.get("type_only") else "") for d in deps["items"]]
    if deps.get("note"):
        lines.append(f"({deps['note']})")
    return "\n".join(lines)


def _callers_text(data: dict) -> str:
    cands = data["candidates"]
    if not cands:
        close = (data.get("note") or "").partition("; closest: ")[2]
        return (f"No symbol named `{data['symbol']}` is in the code graph."
                + (" Closest: " + ", ".join(code(c) for c in close.split(", ")) + "." if close else ""))
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


_MISSING = object()


def _package_text(run: _Run, p: str, missing=_MISSING) -> str | None:
    """The files using package ``p``; ``missing`` (when given) is returned instead of saying that
    no file uses it."""
    res = run.tool("package_users", {"name": p})
    if res is None:
        return f"Could not list the users of `{p}`: {run.steps[-1].error}"
    files = res.data["files"]
    if not files["count"]:
        if missing is not _MISSING:
            return missing
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
        text = f"{NOT_UNDERSTOOD} {HELP}"
    else:
        kind, names = m
        if kind == "depends":
            text = _depends(run, names["x"])
        elif kind == "callers":
            sym = run.tool("find_symbol", {"name": names["x"]})
            text = _callers_text(sym.data) if sym else f"Could not look up `{names['x']}`: {run.steps[-1].error}"
        elif kind == "chain":
            text = _chain_text(run, names["a"], names["b"])
        elif kind == "uses":
            text = _uses(run, names["x"])
        elif kind == "unused":
            text = _unused(run)
        elif kind == "changes":
            text = _changes_text(run)
        else:
            text = _package_text(run, names["p"])
        if memories:
            text += "\n\n" + "\n".join(["Your memories that may bear on this:"] + [
                f"- memory #{mm.id}: “{mm.text}”" + (f" — *possibly stale: {mm.stale_reason}*" if mm.stale else "")
                for mm in memories])
    return AskResult(question=question, answer=text, steps=run.steps, planner=True, notes=[NO_MODEL])
