"""The MCP tools: what each one asks and answers, and how a call becomes graph queries.

Translation only: the questions are answered by ``graph.queries``, the agent's ``Toolbox``
(``agent.tools``: symbol lookup, call chains, file context, package users, recall, guarded file
reads), the read-only Cypher runner (``graph.readonly``) and the memory store (``memory``).

Every answer (``Answer.structured``, validated by clients against the tool's output schema)::

    {"result": {...tool-specific...}, "total": int | null, "shown": int, "truncated": bool,
     "notes": [str], "cypher": [{"query", "params"}], "graph": {"updated", "pending_files",
     "reindexed_now"}}

``total`` is the true size of the answer's main list (null only for a ``cypher`` result cut at
its cap: a count needs ``count(*)``), ``shown`` how many are listed (``limit``); paths are
workspace-relative. ``Answer.text`` is the same answer in compact lines for the model.
Bad arguments raise ``ToolError`` with what was wrong and what is valid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orbit_lsp.agent.tools import SCHEMA, Toolbox, ToolError, redacted, workspace_rel
from orbit_lsp.graph import queries
from orbit_lsp.graph.errors import QueryRejected, QueryTimeout
from orbit_lsp.graph.implicit import implicit_note
from orbit_lsp.graph.readonly import run_readonly

DEFAULT_LIMIT = 20
MAX_LIMIT = 50  # the agent's Toolbox lists at most 50 of anything (agent.tools.MAX_LIST)
MAX_DEPTH = 5
CYPHER_DEFAULT_ROWS = 50
CYPHER_MAX_ROWS = 200
MAX_CHAIN_PAIRS = 25  # most (source, target) candidate pairs call_chain searches

from orbit_lsp.mcp.options import ALL_TOOLS, DEFAULT_TOOLS, OPTIONAL_TOOLS  # noqa: F401 - re-exported


@dataclass
class Answer:
    result: dict
    total: int | None
    shown: int
    lines: list[str]  # the text form, without notes, freshness and Cypher
    cypher: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rest: str = f"pass a higher limit (at most {MAX_LIMIT}) or a narrower target for the rest"

    @property
    def truncated(self) -> bool:
        return self.total is None or self.shown < self.total

    def structured(self, graph: dict) -> dict:
        return {"result": self.result, "total": self.total, "shown": self.shown, "truncated": self.truncated,
                "notes": self.notes, "cypher": shown_cypher(self.cypher), "graph": graph}

    def text(self, freshness: str) -> str:
        out = list(self.lines)
        if self.total is not None and self.shown < self.total:
            out.append(f"listed {self.shown} of {self.total}: {self.rest}")
        out += [f"note: {n}" for n in self.notes]
        out.append(freshness)
        out.append(cypher_text(self.cypher))
        return "\n".join(out)


MAX_PARAM_ITEMS = 5  # longer list parameters (traversal frontiers of node ids) are shown abridged


def _abridged(value):
    if isinstance(value, list) and len(value) > MAX_PARAM_ITEMS:
        return [_abridged(v) for v in value[:MAX_PARAM_ITEMS]] + [f"… {len(value) - MAX_PARAM_ITEMS} more"]
    if isinstance(value, dict):
        return {k: _abridged(v) for k, v in value.items()}
    return value


def shown_cypher(cypher: list[dict]) -> list[dict]:
    """The statements run with their parameters, list parameters longer than
    ``MAX_PARAM_ITEMS`` abridged to their first items and ``"… N more"`` (a traversal's frontier
    of thousands of node ids would be most of an answer)."""
    return [{"query": c["query"], "params": _abridged(c.get("params") or {})} for c in cypher]


def cypher_text(cypher: list[dict]) -> str:
    """The statements run, one line each; a statement run several times is listed once with
    how often (its parameters from the first run, abridged as ``shown_cypher``)."""
    seen: dict[str, list] = {}
    for c in shown_cypher(cypher):
        entry = seen.setdefault(c["query"], [c.get("params") or {}, 0])
        entry[1] += 1
    lines = [f"cypher ({len(cypher)} statement{'s' if len(cypher) != 1 else ''} run):"]
    for q, (params, n) in seen.items():
        p = f" params {json.dumps(params, default=str, ensure_ascii=False)}" if params else ""
        lines.append(f"- {' '.join(q.split())}{p}" + (f" (x{n})" if n > 1 else ""))
    return "\n".join(lines)


# -- arguments ------------------------------------------------------------------------------------
def _check_args(name: str, spec: dict, args: Any) -> dict:
    """``args`` checked against the tool's input schema (types, ranges, required, unknown
    names); returns them with defaults filled in. Raises ``ToolError`` saying what is valid."""
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ToolError(f"{name}: arguments must be a JSON object")
    props = spec["input"]["properties"]
    unknown = sorted(set(args) - set(props))
    if unknown:
        raise ToolError(f"{name}: unknown argument(s) {', '.join(unknown)}; valid: {', '.join(props)}")
    out = {}
    for key, schema in props.items():
        v = args.get(key)
        if v is None:
            if key in spec["input"].get("required", ()):
                raise ToolError(f"{name}: argument '{key}' is required ({schema.get('description', schema['type'])})")
            if "default" in schema:
                out[key] = schema["default"]
            continue
        t = schema["type"]
        if t == "string":
            if not isinstance(v, str) or not v.strip():
                raise ToolError(f"{name}: argument '{key}' must be a non-empty string")
            v = v.strip()
        elif t == "integer":
            if isinstance(v, str) and v.strip().lstrip("-").isdigit():
                v = int(v)
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            lo, hi = schema.get("minimum"), schema.get("maximum")
            if not isinstance(v, int) or isinstance(v, bool) or (lo is not None and v < lo) or (hi is not None and v > hi):
                raise ToolError(f"{name}: argument '{key}' must be a whole number from {lo} to {hi}, got {v!r}")
        elif t == "object":
            if not isinstance(v, dict):
                raise ToolError(f"{name}: argument '{key}' must be a JSON object")
        elif t == "boolean":
            if not isinstance(v, bool):
                raise ToolError(f"{name}: argument '{key}' must be true or false")
        out[key] = v
    return out


def _int(desc: str | None, lo: int, hi: int, default: int) -> dict:
    out = {"type": "integer", "minimum": lo, "maximum": hi, "default": default}
    return {**out, "description": desc} if desc else out


_LIMIT = {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}


def _input(required: dict, optional: dict | None = None) -> dict:
    return {"type": "object", "properties": {**required, **(optional or {})}, "required": list(required)}


def _str(desc: str) -> dict:
    return {"type": "string", "description": desc}


SYMBOL = _str("function/class name, Class.method or dotted qualified name")
PATH = _str("workspace-relative file path")


# -- the tools ----------------------------------------------------------------------------------
class Tools:
    """Runs tool calls on one workspace graph. ``toolbox``: the agent's ``Toolbox`` for that
    graph (its ``readable`` set is the files answers returned, the only ones ``read_file``
    serves); ``memory``: a ``MemoryStore`` or None; ``history``: an ``agent.history.History``
    recording each ``recall`` as a turn of one conversation (provenance), or None;
    ``root_package()``: the workspace's root package as the indexer names it (``change_impact``);
    ``imports()``: the graph's IMPORTS edges in memory (``graph.imports.ImportGraph``) or None."""

    def __init__(self, toolbox: Toolbox, memory=None, history=None, client_name: str = "mcp", root_package=None,
                 imports=None):
        self.root_package = root_package or (lambda: "")  # the indexer's, for change_impact
        self.imports = imports or (lambda: None)  # an ImportGraph kept current, or None: frontier queries
        self.toolbox = toolbox
        self.graph = toolbox.graph
        self.root = toolbox.root
        self.settings = toolbox.settings
        self.memory = memory
        self.history = history
        self.client_name = client_name
        self._conversation: int | None = None

    def run(self, name: str, args: Any) -> Answer:
        """Raises ``ToolError`` (bad call, refused query or read, timeout) and
        ``FalkorDBOffline``."""
        spec = SPECS.get(name)
        if spec is None:
            raise ToolError(f"unknown tool '{name}'")
        args = _check_args(name, spec, args)
        try:
            ans: Answer = getattr(self, "t_" + name)(args)
        except QueryRejected as exc:
            raise ToolError(f"query refused: {exc}") from None
        except QueryTimeout as exc:
            raise ToolError(f"query timed out: {exc}") from None
        ans.result = redacted(ans.result)
        ans.lines = redacted(ans.lines)
        # files this answer named become readable by read_file
        self.toolbox.readable |= _files_named(ans.result)
        return ans

    def _box(self, name: str, args: dict):
        return self.toolbox.run(name, args)

    # -- symbols ---------------------------------------------------------------------------------
    def _candidates(self, name: str, lim: int, cypher: list, notes: list) -> tuple[list[dict], int]:
        """The first ``lim`` symbols matching ``name`` (``queries.find_symbols``) and how many
        match; a note when it is ambiguous."""
        found = queries.find_symbols(self.graph, name)
        cypher += found.cypher
        n = len(found.rows)
        if n > 1:
            notes.append(f"'{name}' matches {n} symbols" + (f"; the first {lim} (by file) are answered, "
                                                             "give a qualified name to pick one" if n > lim else
                                                             "; each is answered"))
        return found.rows[:lim], n

    @staticmethod
    def _sym(s: dict) -> dict:
        return {k: s[k] for k in ("qual", "kind", "file", "line")}

    def t_find_symbol(self, a: dict) -> Answer:
        lim = a["limit"]
        cypher: list = []
        notes: list = []
        cands, n = self._candidates(a["name"], lim, cypher, notes)
        lines = [f"{n} symbol(s) named '{a['name']}'" + (":" if n else "")]
        out = []
        for c in cands:
            callers = queries.symbol_callers(self.graph, c["file"], c["qual"], limit=lim)
            callees = queries.symbol_callees(self.graph, c["file"], c["qual"])
            cypher += callers.cypher + callees.cypher
            n_callers = callers.total if callers.total is not None else len(callers.rows)
            cand = {**self._sym(c), "callers_total": n_callers, "callees_total": len(callees.rows),
                    "callers": [self._sym(x) for x in callers.rows[:lim]],
                    "callees": [self._sym(x) for x in callees.rows[:lim]]}
            if c.get("unresolved_calls"):
                cand["unbound_calls"] = c["unresolved_calls"]
            out.append(cand)
            lines.append(f"- {c['kind']} {c['qual']} at {c['file']}:{c['line']}")
            for label, lst, total in (("callers", cand["callers"], n_callers), ("callees", cand["callees"], len(callees.rows))):
                shown = ", ".join(f"{x['qual']} ({x['file']}:{x['line']})" for x in lst)
                lines.append(f"  {label} ({total}): {shown or '-'}" + (f" … {total - len(lst)} more" if total > len(lst) else ""))
        if not n:
            notes.append(queries.not_found_note(self.graph, a["name"], queries.Answer()))
        return Answer({"symbol": a["name"], "candidates": out}, n, len(out), lines, cypher, notes)

    def _walk(self, a: dict, incoming: bool) -> Answer:
        fn = queries.callers if incoming else queries.callees
        key = "callers" if incoming else "callees"
        lim = a["limit"]
        cypher: list = []
        notes: list = []
        cands, n = self._candidates(a["symbol"], lim, cypher, notes)
        targets, total, shown, lines = [], 0, 0, []
        if not n:
            lines.append(queries.not_found_note(self.graph, a["symbol"], queries.Answer()))
        for c in cands:
            # by qualified name, then the candidate's own file (a name is never mixed with its namesakes)
            ans = fn(self.graph, c["qual"], a["depth"])
            cypher += ans.cypher
            row = next((r for r in ans.rows if r["target"]["file"] == c["file"]), None)
            if row is None:
                continue
            t, found = row["target"], row[key]
            left = max(0, lim - shown)
            items = [{"qual": x["qual"], "kind": x["kind"], "file": x["file"], "line": x["line"],
                      "depth": x["depth"], "via": x["via"], "call_lines": x.get("lines")} for x in found[:left]]
            total += len(found)
            shown += len(items)
            entry = {"symbol": self._sym(t), "total": len(found), key: items}
            lines.append(f"{key} of {t['kind']} {t['qual']} ({t['file']}:{t['line']}), depth ≤ {a['depth']}: {len(found)}"
                         + (f", {len(items)} shown" if len(items) < len(found) else ""))
            for x in items:
                via = f" via {x['via']}" if x["depth"] > 1 else ""
                at = f" lines {','.join(map(str, x['call_lines']))}" if x.get("call_lines") and x["depth"] == 1 and incoming else ""
                lines.append(f"  {x['depth']} {x['file']}:{x['line']} {x['qual']}{via}{at}")
            if incoming and row.get("implicit"):
                entry["implicit"] = row["implicit"]
                notes.append(implicit_note(t["qual"], row["implicit"]))
            if incoming and row.get("unresolved_elsewhere"):
                may = row["unresolved_elsewhere"]
                entry["may_call"] = may
                lines.append(f"  may call it (not counted): {may} function(s) with unbound calls named '{t['name']}'")
            elif not incoming and t.get("unresolved_calls"):
                entry["unbound_calls"] = t["unresolved_calls"]
                lines.append(f"  plus {t['unresolved_calls']} call(s) inside it that could not be bound")
            targets.append(entry)
        return Answer({"query": a["symbol"], "depth": a["depth"], "targets": targets}, total, shown, lines,
                      cypher, notes)

    def t_callers(self, a: dict) -> Answer:
        return self._walk(a, True)

    def t_callees(self, a: dict) -> Answer:
        return self._walk(a, False)

    def t_impact(self, a: dict) -> Answer:
        target, hops, lim = a["target"], a["max_hops"], a["limit"]
        path = self._rel(target)
        rec = queries.file_record(self.graph, path)
        if rec.found:
            ans = queries.impact(self.graph, path, hops, imports=self.imports())
            ans.cypher = rec.cypher + ans.cypher
            deps = ans.rows[:lim]
            lines = [f"files depending on {path} (≤ {hops} hops): {ans.total}"
                     + (f" ({', '.join(f'{n} at {i + 1}' for i, n in enumerate(ans.by_depth or []))})" if ans.total else "")]
            lines += [f"  {r['hops']} {r['path']}" for r in deps]
            result = {"kind": "file", "file": path, "max_hops": hops, "by_hops": ans.by_depth or [], "dependents": deps}
            return Answer(result, ans.total or 0, len(deps), lines, ans.cypher, ans.notes)
        cypher: list = list(rec.cypher)
        notes: list = []
        cands, n = self._candidates(target, lim, cypher, notes)
        if not n:
            raise ToolError(f"impact: '{target}' is neither a file in the graph nor a symbol name; "
                            "give a workspace-relative path (e.g. pkg/mod.py) or a name (f, Class.method, pkg.mod.f)")
        targets, total, shown, lines = [], 0, 0, []
        for s in cands:
            walk = queries.symbol_impact(self.graph, s["file"], s["qual"], hops, max(0, lim - shown))
            cypher += walk.cypher
            notes += walk.notes
            callers = [{"qual": c["qual"], "kind": c["kind"], "file": c["file"], "line": c["line"], "hops": c["depth"]}
                       for c in walk.rows]
            files = queries.impact(self.graph, s["file"], hops, paths=False, imports=self.imports())
            cypher += files.cypher
            total += walk.total or 0
            shown += len(callers)
            targets.append({"symbol": {k: s[k] for k in ("qual", "kind", "file", "line")}, "callers_total": walk.total,
                            "by_hops": walk.by_depth, "callers": callers, "file_dependents": files.total or 0})
            lines.append(f"{s['kind']} {s['qual']} ({s['file']}:{s['line']}): {walk.total} caller(s) within {hops} hops"
                         + (f" ({', '.join(f'{n} at {i + 1}' for i, n in enumerate(walk.by_depth))})" if walk.total else "")
                         + f"; {files.total or 0} file(s) import its file")
            lines += [f"  {c['hops']} {c['file']}:{c['line']} {c['qual']}" for c in callers]
        result = {"kind": "symbol", "query": target, "max_hops": hops, "targets": targets}
        return Answer(result, total, shown, lines, cypher, notes)

    def t_call_chain(self, a: dict) -> Answer:
        # every pair of candidates is searched: ambiguous names on both sides are refused first
        pairs = 1
        for key in ("source", "target"):
            found = queries.find_symbols(self.graph, a[key]).rows
            pairs *= max(1, len(found))
            if len(found) > 1 and pairs > MAX_CHAIN_PAIRS:
                some = ", ".join(f"{c['qual']} ({c['file']})" for c in found[:5])
                raise ToolError(f"call_chain: '{a[key]}' matches {len(found)} symbols ({some}{', …' if len(found) > 5 else ''}); "
                                f"give qualified names (at most {MAX_CHAIN_PAIRS} source/target pairs are searched)")
        res = self._box("call_chain", {"source": a["source"], "target": a["target"]})
        d = res.data
        paths = d["paths"]["items"][:a["limit"]]
        total = d["paths"]["count"]
        lines = [f"call paths {a['source']} → {a['target']}: {total}" + (" (shortest first)" if total else "")]
        for p in paths:
            lines.append("  " + " → ".join(f"{n['qual']} ({n['file']}:{n['line']})" for n in p["path"]))
        return Answer({"source": a["source"], "target": a["target"], "paths": paths}, total, len(paths), lines,
                      res.cypher, list(d.get("notes") or []))

    # -- files and packages ------------------------------------------------------------------------
    def t_file_context(self, a: dict) -> Answer:
        path = self._rel(a["path"])
        lim = a["limit"]
        ctx = queries.file_context(self.graph, path)
        if not ctx.found:
            raise ToolError(f"file_context: {path} is not in the code graph (not indexed, skipped or misspelled); "
                            "paths are workspace-relative, e.g. pkg/mod.py")
        imp = queries.impact(self.graph, path, min(4, self.settings.max_hops), imports=self.imports())
        d = {**ctx.rows[0], "dependents": {"count": imp.total or 0, "items": imp.rows}}
        cypher, notes = ctx.cypher + imp.cypher, ctx.notes + imp.notes
        deps = d["dependents"]
        result = {"file": path, "lang": d.get("lang"), "lines": d.get("lines"), "symbols": d.get("symbols"),
                  "parse_error": d.get("parse_error"), "unresolved_imports": d.get("unresolved_imports") or [],
                  "packages": d.get("packages", [])[:lim], "imports": d.get("imports", [])[:lim],
                  "importers": d.get("importers", [])[:lim], "imports_total": len(d.get("imports", [])),
                  "importers_total": len(d.get("importers", [])), "dependents": deps["items"][:lim],
                  "dependents_total": deps["count"]}
        lines = [f"{path}: {d.get('lang')}, {d.get('lines')} lines, {d.get('symbols')} symbols"
                 + (f", syntax error {d['parse_error']}" if d.get("parse_error") else "")]
        for key in ("imports", "importers", "packages"):
            full = d.get(key, [])
            lines.append(f"{key} ({len(full)}): {', '.join(full[:lim]) or '-'}" + (" …" if len(full) > lim else ""))
        lines.append(f"dependents within {min(4, self.settings.max_hops)} hops ({deps['count']}): "
                     + (", ".join(f"{r['path']} ({r['hops']})" for r in deps["items"][:lim]) or "-")
                     + (" …" if deps["count"] > lim else ""))
        if result["unresolved_imports"]:
            lines.append(f"unresolved imports: {', '.join(result['unresolved_imports'])}")
        shown = min(lim, deps["count"])
        return Answer(result, deps["count"], shown, lines, cypher, notes)

    def t_package_users(self, a: dict) -> Answer:
        res = self._box("package_users", {"name": a["name"]})
        d = res.data
        files = d["files"]["items"][:a["limit"]]
        total = d["files"]["count"]
        lines = [f"files using package {a['name']}: {total}"] + [f"  {f['path']}:{f['line']}" for f in files]
        return Answer({"package": a["name"], "files": files}, total, len(files), lines, res.cypher,
                      list(d.get("notes") or []))

    # -- Cypher --------------------------------------------------------------------------------------
    def t_cypher(self, a: dict) -> Answer:
        res = run_readonly(self.graph, a["query"], a.get("params"), row_cap=a["limit"],
                           timeout_ms=self.settings.query_timeout_ms)
        d = res.to_dict()
        rows = d["rows"]
        total = None if res.truncated else len(rows)
        lines = [" | ".join(d["header"])] + [" | ".join(json.dumps(c, default=str, ensure_ascii=False)
                                                        if not isinstance(c, str) else c for c in r) for r in rows]
        result = {"header": d["header"], "rows": rows, "executed": d["executed"]}
        return Answer(result, total, len(rows), lines,
                      [{"query": d["executed"], "params": a.get("params") or {}}], [d["note"]])

    # -- change impact ---------------------------------------------------------------------------------
    def t_change_impact(self, a: dict) -> Answer:
        from orbit_lsp.changes import diff, impact, render

        if a.get("base") is not None and a.get("staged"):
            raise ToolError("change_impact: give either 'base' or 'staged', not both")
        base = a.get("base")
        if base is not None and base.startswith("-"):
            raise ToolError(f"change_impact: base {base!r} is not a git ref")
        mode = "base" if base else "staged" if a.get("staged") else "worktree"
        cmap = None
        if a.get("coverage") is not None:
            from orbit_lsp.changes.coverage_map import CoverageMapError, open_map

            rel = workspace_rel(Path(self.root), a["coverage"])
            if rel is None or rel == ".." or rel.startswith("../"):
                raise ToolError("change_impact: coverage must be a file inside the workspace")
            try:
                cmap = open_map(Path(self.root) / rel, self.root)
            except CoverageMapError as exc:
                raise ToolError(f"change_impact: {exc}") from None
        try:
            change = diff.from_git(self.root, mode, base)
        except diff.ChangeError as exc:
            raise ToolError(f"change_impact: {exc}") from None
        res = impact.analyse(self.graph, change, self.root_package(),
                             impact.Options(depth=a["depth"], tests=a["tests"] or cmap is not None, coverage=cmap))
        lim = a["limit"]
        t = res["totals"]
        tests = res["tests"]
        result = {"change": res["change"], "totals": t,
                  **{k: res[k][:lim] for k in ("files", "symbols", "callers", "dependents", "may_be_affected")},
                  "tests": {"selected": tests["selected"][:lim], "may_be_affected": tests["may_be_affected"][:lim],
                            "commands": tests["commands"],
                            **({"coverage": tests["coverage"]} if "coverage" in tests else {})}}
        lines = render.text(res, cap=lim, cypher=False).rstrip("\n").split("\n")
        return Answer(result, t["callers"], min(lim, t["callers"]), lines, res["cypher"], list(res["notes"]))

    # -- memory --------------------------------------------------------------------------------------
    def t_recall(self, a: dict) -> Answer:
        if self.memory is None:
            raise ToolError("recall: memory is not available")
        res = self._box("recall", {"query": a["query"]})
        d = res.data
        mems = d["memories"]
        turn = self._record_recall(a["query"], [m["memory"] for m in mems])
        lines = [f"memories matching '{a['query']}': {len(mems)}"]
        lines += [f"  #{m['memory']} {m['text']}" + (f" (possibly stale: {m['possibly_stale']})"
                                                      if m.get("possibly_stale") else "") for m in mems]
        notes = [d["note"]] if d.get("note") else []
        result = {"query": a["query"], "memories": mems}
        if turn is not None:
            result["turn"] = turn
        return Answer(result, len(mems), len(mems), lines, res.cypher, notes)

    def _record_recall(self, query: str, ids: list[int]) -> int | None:
        """One history turn per recall that returned memories, linked to them in the memory
        graph (``(:Turn)-[:RECALLED]->(:Memory)``): which answers used which memory."""
        if self.history is None or not ids:
            return None
        turn = self.history.add_turn(self._conversation_id(), query, f"recalled {', '.join(f'#{i}' for i in ids)}",
                                     f"mcp:{self.client_name}", [], None)
        self.memory.link_turn(self._conversation, turn, ids, query)  # made by _conversation_id above
        return turn

    def _conversation_id(self) -> int | None:
        """This server's history conversation (one per session, made on first use): recalls are
        its turns, memories saved are audited under it."""
        if self.history is None:
            return None
        if self._conversation is None:
            self._conversation = self.history.start_conversation(str(self.root))
        return self._conversation

    def t_remember(self, a: dict) -> Answer:
        if self.memory is None:
            raise ToolError("remember: memory is not available")
        from orbit_lsp.memory.store import InvalidMemory

        try:
            m = self.memory.remember(a["text"], confirmed=False, source="agent", project=self.root,
                                     conversation_id=self._conversation_id())
        except InvalidMemory as exc:
            raise ToolError(f"remember: {exc}") from None
        lines = [f"saved memory #{m.id} (unconfirmed): {m.text}",
                 f"the user confirms it with `orbit-lsp memory confirm {m.id}`; only confirmed memories are recalled"]
        result = {"memory": m.id, "text": m.text, "confirmed": m.confirmed, "source": m.source,
                  "redactions": m.redactions}
        from orbit_lsp.memory.store import CREATE
        return Answer(result, 1, 1, lines, [{"query": CREATE, "params": {"text": m.text}}])

    # -- files ---------------------------------------------------------------------------------------
    def t_read_file(self, a: dict) -> Answer:
        args = {"path": self._rel(a["path"]), "start_line": a["start_line"]}
        if a.get("end_line") is not None:
            args["end_line"] = a["end_line"]
        res = self._box("read_file", args)
        d = res.data
        n = max(0, d["end_line"] - d["start_line"] + 1)
        lines = [f"{d['path']} lines {d['start_line']}-{d['end_line']} of {d['total_lines']}"
                 + (f" ({d['redactions']} secret(s) redacted)" if d["redactions"] else ""), d["text"]]
        return Answer(d, d["total_lines"], min(n, d["total_lines"]), lines, res.cypher,
                      rest="ask for other lines with start_line and end_line (at most 200 at once)")

    # -- helpers -------------------------------------------------------------------------------------
    def _rel(self, path: str) -> str:
        """A workspace-relative posix path from what the model wrote (``agent.tools.workspace_rel``)."""
        p = workspace_rel(self.root, path)
        if p is None:
            raise ToolError(f"{path} is outside the workspace {self.root}")
        return p


def _files_named(value: Any, out: set[str] | None = None) -> set[str]:
    out = set() if out is None else out
    if isinstance(value, dict):
        for k, v in value.items():
            if k in ("file", "path") and isinstance(v, str):
                out.add(v)
            elif k in ("imports", "importers") and isinstance(v, list):
                out.update(x for x in v if isinstance(x, str))
            else:
                _files_named(v, out)
    elif isinstance(value, list):
        for v in value:
            _files_named(v, out)
    return out


# -- schemas -------------------------------------------------------------------------------------
def _output(result_desc: str) -> dict:
    """The answer envelope (see the module docstring); ``result_desc`` names the result's keys."""
    return {"type": "object", "properties": {"result": {"type": "object", "description": result_desc},
                                             "total": {"type": ["integer", "null"]}},
            "required": ["result", "total"]}


SPECS: dict[str, dict] = {
    "find_symbol": {
        "description": "Where a symbol is defined, with its direct callers and callees (every match if ambiguous).",
        "input": _input({"name": SYMBOL}, {"limit": _LIMIT}),
        "output": _output("symbol, candidates[{qual,kind,file,line,callers,callees,callers_total,callees_total}]"),
    },
    "callers": {
        "description": "Who calls a function, transitively up to depth hops; unbound call sites that may call it are counted apart.",
        "input": _input({"symbol": SYMBOL}, {"depth": _int(None, 1, MAX_DEPTH, 1), "limit": _LIMIT}),
        "output": _output("targets[{symbol,total,callers[{qual,file,line,depth,via}],may_call}]"),
    },
    "callees": {
        "description": "What a function calls, transitively up to depth hops.",
        "input": _input({"symbol": SYMBOL}, {"depth": _int(None, 1, MAX_DEPTH, 1), "limit": _LIMIT}),
        "output": _output("targets[{symbol,total,callees[{qual,file,line,depth,via}],unbound_calls}]"),
    },
    "impact": {
        "description": "What an edit affects: for a file, the files importing it (with hops); for a symbol, its "
                       "transitive callers (with hops) and how many files import its file.",
        "input": _input({"target": _str("workspace-relative file path or symbol name")},
                        {"max_hops": _int(None, 1, 4, 4), "limit": _LIMIT}),
        "output": _output("kind file: dependents[{path,hops}], by_hops; kind symbol: targets[{symbol,callers_total,"
                          "callers[{qual,file,line,hops}],file_dependents}]"),
    },
    "call_chain": {
        "description": "Shortest call path(s) from one function to another.",
        "input": _input({"source": SYMBOL, "target": SYMBOL}, {"limit": _LIMIT}),
        "output": _output("paths[{from,to,path[{qual,file,line}]}]"),
    },
    "file_context": {
        "description": "A file's imports, importers, packages, symbol count, syntax error and dependents.",
        "input": _input({"path": PATH}, {"limit": _LIMIT}),
        "output": _output("file,lang,lines,symbols,imports,importers,packages,dependents[{path,hops}],*_total"),
    },
    "change_impact": {
        "description": "Impact of the uncommitted changes (or staged, or since the merge base with base): changed "
                       "symbols, their callers and dependent files with hops, what may be affected via unbound "
                       "calls, tests to run.",
        "input": _input({}, {"base": _str("git ref"), "staged": {"type": "boolean"},
                             "coverage": _str("narrow tests: .coverage of pytest --cov-context=test"),
                             "tests": {"type": "boolean", "default": True}, "depth": _int(None, 1, 4, 4),
                             "limit": _LIMIT}),
        "output": _output("change, totals, files, symbols, callers, dependents, may_be_affected, tests"),
    },
    "package_users": {
        "description": "Files that import a package (stdlib or third-party).",
        "input": _input({"name": _str("package name, e.g. requests")}, {"limit": _LIMIT}),
        "output": _output("package, files[{path,line}]"),
    },
    "cypher": {
        "description": "Run one read-only openCypher query on the code graph (GRAPH.RO_QUERY; timeout; rows capped "
                       "at limit; LOAD CSV refused). Prefer the other tools. " + SCHEMA.split("\n", 1)[1],
        "input": _input({"query": _str("one read-only Cypher statement")},
                        {"params": {"type": "object", "description": "$parameters"},
                         "limit": _int("most rows", 1, CYPHER_MAX_ROWS, CYPHER_DEFAULT_ROWS)}),
        "output": _output("header, rows, executed (the text sent, with its LIMIT)"),
    },
    "recall": {
        "description": "The user's confirmed memories (notes, decisions, preferences) matching some words.",
        "input": _input({"query": _str("words, e.g. deploy database")}),
        "output": _output("memories[{memory,text,matched,score}], turn"),
    },
    "remember": {
        "description": "Save a note for later sessions (unconfirmed until the user confirms it; secrets redacted).",
        "input": _input({"text": _str("the note")}),
        "output": _output("memory id, text, confirmed"),
    },
    "read_file": {
        "description": "Lines of a file an earlier answer named (never .env; secrets redacted; at most 200 lines).",
        "input": _input({"path": PATH}, {"start_line": _int("1-based", 1, 10_000_000, 1),
                                         "end_line": {"type": "integer", "minimum": 1, "description": "inclusive"}}),
        "output": _output("path,start_line,end_line,total_lines,text"),
    },
}


def select_tools(spec: str | None) -> list[str]:
    """Tool names from a selection: None/"" or "default" (``DEFAULT_TOOLS``), "all", a
    comma-separated list of names, or "+name"/"-name" items changing the default set (e.g.
    ``+recall,+remember``). Raises ``ValueError`` naming an unknown tool."""
    spec = (spec or "default").strip()
    chosen: list[str] = []
    base = list(DEFAULT_TOOLS)
    items = [x.strip() for x in spec.split(",") if x.strip()]
    relative = all(x[0] in "+-" or x in ("default", "all") for x in items)
    if relative:
        chosen = list(base)
    for x in items:
        if x == "default":
            chosen += [t for t in DEFAULT_TOOLS if t not in chosen]
            continue
        if x == "all":
            chosen += [t for t in ALL_TOOLS if t not in chosen]
            continue
        op, name = (x[0], x[1:]) if x[0] in "+-" else ("+", x)
        if name not in SPECS:
            raise ValueError(f"unknown tool '{name}'; tools: {', '.join(ALL_TOOLS)}")
        if op == "-":
            chosen = [t for t in chosen if t != name]
        elif name not in chosen:
            chosen.append(name)
    return [t for t in ALL_TOOLS if t in chosen]


