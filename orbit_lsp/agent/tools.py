"""The agent's tools: graph questions, read-only Cypher and consented, redacted file reads.

``Toolbox(graph, root, settings, ...)`` runs one tool call: ``toolbox.run(name, args) ->
ToolResult``. Every tool reads; there is no write tool. Results carry the data the model sees
(``data``, JSON-serialisable, redacted), every Cypher statement run (``cypher``) and a row count.
Bad arguments, unknown files, refused queries and refused reads raise ``ToolError`` with a
message meant for the model (and shown to the user in the steps).

Tools (``TOOLS`` describes their arguments for the model):

- ``find_symbol {name}``: where symbols of that name are defined, with their direct callers and
  callees (one entry per candidate when ambiguous);
- ``impact_of {path, max_hops?}``: files depending on a file through IMPORTS, up to 4 hops;
- ``call_chain {source, target}``: shortest CALLS path(s) between two functions (every pair of
  candidates when names are ambiguous);
- ``file_context {path}``: imports, importers, packages, symbol count and impact of a file;
- ``package_users {name}``: files using a package;
- ``cypher_query {query, params?}``: model-written Cypher through ``run_readonly``
  (``GRAPH.RO_QUERY``, timeout, row cap, ``LOAD CSV`` refused);
- ``read_file {path, start_line?, end_line?}``: lines of a workspace file that a previous step
  returned, never ``.env*`` (nor a link to one), after the user's consent, redacted;
- ``recall {query}``: the user's confirmed memories sharing concepts with ``query``
  (``orbit_lsp.memory``), best first; the ones returned are listed with the answer;
- ``change_impact {base?, staged?, depth?}``: what the uncommitted changes (or the staged ones,
  or a branch since its merge base with ``base``) can break: changed symbols, their callers,
  dependent files, the tests to run and what may be affected through unbound calls
  (``orbit_lsp.changes``; the graph is read as indexed).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from orbit_lsp.agent.redact import redact, text_problem
from orbit_lsp.config import Settings
from orbit_lsp.graph import queries
from orbit_lsp.graph.connection import Graph
from orbit_lsp.graph.errors import QueryRejected, QueryTimeout
from orbit_lsp.graph.readonly import run_readonly
from orbit_lsp.index.walk import is_dotenv

MAX_READ_LINES = 200
MAX_READ_BYTES = 64_000
MAX_LIST = 50  # longest list of rows shown to the model per tool (the count is always exact)
MAX_ARGS_CHARS = 16_000  # longest tool arguments (as JSON) accepted from the model

# consent decisions, as returned by the consent callback
ALLOW_ONCE, ALLOW_ALWAYS, DENY = "once", "always", "deny"

SCHEMA = """Graph schema (FalkorDB, openCypher):
(:File {path, lang, lines})  path is workspace-relative with '/' separators
(:Symbol {name, qual, kind, file, line, end_line})  kind: module|class|function|method|variable; qual = dotted module path + name (e.g. pkg.mod.Class.method; JS/TS: path#name, e.g. src/cart.ts#Cart.add); line 1-based
(:Package {name, stdlib, dist})
(:File)-[:DEFINES]->(:Symbol)
(:File)-[:IMPORTS {line, type_only}]->(:File)  type_only: TS imports for types only (no run-time dependency)
(:File)-[:USES_PACKAGE {line}]->(:Package)
(:Symbol)-[:CALLS {line, resolved}]->(:Symbol)
(:Symbol)-[:INHERITS]->(:Symbol)
Indexed: File.path, Symbol.name, Symbol.qual. Queries are read-only, capped in rows and time."""

TOOLS: dict[str, dict] = {
    "find_symbol": {"args": {"name": "symbol name, Class.method or qualified name"},
                    "doc": "where it is defined, its direct callers and callees"},
    "impact_of": {"args": {"path": "workspace-relative file path", "max_hops": "optional, 1-4 (default 4)"},
                  "doc": "files that import the file, directly or transitively, with hop counts"},
    "call_chain": {"args": {"source": "calling function", "target": "called function"},
                   "doc": "shortest call path(s) from source to target"},
    "file_context": {"args": {"path": "workspace-relative file path"},
                     "doc": "imports, importers, packages, symbol count and dependents of a file"},
    "package_users": {"args": {"name": "package name (e.g. requests)"},
                      "doc": "files that use a package"},
    "cypher_query": {"args": {"query": "one read-only openCypher statement", "params": "optional object"},
                     "doc": "run your own read-only query on the graph (schema below)"},
    "read_file": {"args": {"path": "a file path returned by a previous step", "start_line": "optional, 1-based",
                           "end_line": "optional"},
                  "doc": f"read up to {MAX_READ_LINES} lines of a source file (asks the user; secrets are redacted)"},
    "recall": {"args": {"query": "words about what you need (e.g. deploy project)"},
               "doc": "the user's saved memories (notes, preferences, decisions) matching the words"},
    "change_impact": {"args": {"base": "optional git ref: the branch's changes since its merge base with it",
                               "staged": "optional true: only the staged changes", "depth": "optional, 1-6 (default 4)"},
                      "doc": "what the uncommitted changes can break: changed symbols, callers, tests to run"},
}


def workspace_rel(root: Path, path: str) -> str | None:
    """A workspace-relative posix path from what a model wrote: absolute paths inside ``root``
    and ``./`` prefixes are accepted; None for a path outside the workspace."""
    p = path.replace("\\", "/")
    if os.path.isabs(p):
        try:
            p = Path(os.path.realpath(p)).relative_to(root).as_posix()
        except ValueError:
            return None
    while p.startswith("./"):
        p = p[2:]
    return p


class ToolError(Exception):
    """A tool call that cannot run; the message is for the model and the user."""


class _Changed(Exception):
    """The file checked before the consent question is not the one found after it."""


@dataclass(frozen=True)
class _Target:
    """A file checked for ``read_file``: its real path's components under the workspace, and
    its device and inode numbers."""

    parts: tuple[str, ...]
    dev: int
    ino: int


@dataclass
class ToolResult:
    """``data``: what the model sees (redacted); ``cypher``: [{"query", "params"}] run;
    ``rows``: row count of the answer; ``paths``: workspace files this result mentions (they
    become readable by ``read_file``)."""

    data: Any
    cypher: list[dict] = field(default_factory=list)
    rows: int = 0
    paths: set[str] = field(default_factory=set)


def redacted(value: Any) -> Any:
    """``value`` with every string redacted (graph data holds no contents, but be sure)."""
    if isinstance(value, str):
        return redact(value)[0]
    if isinstance(value, dict):
        return {k: redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redacted(v) for v in value]
    return value


def _paths_in(value: Any, out: set[str]) -> set[str]:
    """Every string under a ``path``/``file``/``importers``/``imports`` key (files named by a
    result)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k in ("path", "file", "importers", "imports") and isinstance(v, str):
                out.add(v)
            elif k in ("importers", "imports") and isinstance(v, list):
                out.update(x for x in v if isinstance(x, str))
            else:
                _paths_in(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _paths_in(v, out)
    return out


def _str_arg(args: dict, name: str, required: bool = True) -> str | None:
    v = args.get(name)
    if v is None and not required:
        return None
    if not isinstance(v, str) or not v.strip():
        raise ToolError(f"argument '{name}' (a non-empty string) is required")
    problem = text_problem(v)
    if problem:
        raise ToolError(f"argument '{name}' {problem}")
    return v.strip()


def _int_arg(args: dict, name: str, default: int | None, lo: int, hi: int) -> int | None:
    v = args.get(name, default)
    if v is None:
        return None
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise ToolError(f"argument '{name}' must be a whole number from {lo} to {hi}")
    return v


class Toolbox:
    """Runs tool calls for one question on one workspace graph.

    - ``consent(path) -> "once" | "always" | "deny"``: asks the user before a file is read (the
      LSP layer shows ``window/showMessageRequest``); None means reads are refused.
    - ``history``: an ``orbit_lsp.agent.history.History`` (consents "always" and the audit log),
      optional; ``conversation_id`` tags audit records.
    - ``memory``: an ``orbit_lsp.memory.store.MemoryStore`` for ``recall`` (None: the tool
      reports that memory is unavailable); memories it returned are in ``recalled`` (by id).
    """

    def __init__(self, graph: Graph, root: Path | str, settings: Settings, *,
                 consent: Callable[[str], str] | None = None, history=None,
                 conversation_id: int | None = None, memory=None):
        self.graph = graph
        self.root = Path(os.path.realpath(os.fspath(root)))
        self.settings = settings
        self.consent = consent
        self.history = history
        self.conversation_id = conversation_id
        self.readable: set[str] = set()  # files returned by previous steps
        self.memory = memory
        self.recalled: dict = {}  # memory id -> orbit_lsp.memory.store.Memory returned by recall

    # -- plumbing -------------------------------------------------------------------------------
    def _audit(self, kind: str, **details: Any) -> None:
        if self.history is not None:
            self.history.audit(kind, conversation_id=self.conversation_id, **details)

    def run(self, name: str, args: Any) -> ToolResult:
        """Run tool ``name`` with ``args`` (a dict). Raises ``ToolError`` (bad call, refused
        query or read, query timeout) and ``FalkorDBOffline``."""
        fn = getattr(self, "t_" + name, None) if name in TOOLS else None
        if fn is None:
            raise ToolError(f"unknown tool '{name}'; tools: {', '.join(TOOLS)}")
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise ToolError("'args' must be a JSON object")
        size = len(json.dumps(args, default=str))
        if size > MAX_ARGS_CHARS:
            self._audit("query", tool=name, refused=f"arguments of {size} characters")
            raise ToolError(f"the arguments are {size} characters long; at most {MAX_ARGS_CHARS} are accepted")
        try:
            res = fn(args)
        except QueryRejected as exc:
            self._audit("query", tool=name, cypher=exc.query, refused=str(exc))
            shown = exc.query if len(exc.query) <= 600 else exc.query[:600] + f"… ({len(exc.query)} characters)"
            raise ToolError(f"query refused: {exc}. Query: {shown}") from None
        except QueryTimeout as exc:
            self._audit("query", tool=name, args=args, timeout=str(exc))
            raise ToolError(f"query timed out: {exc}") from None
        if name != "read_file":
            self._audit("query", tool=name, args=args, cypher=[c["query"] for c in res.cypher], rows=res.rows)
        res.data = redacted(res.data)
        res.paths = {p for p in _paths_in(res.data, res.paths) if not is_dotenv(p)}
        self.readable |= res.paths
        return res

    def _list(self, rows: list, total: int | None = None) -> dict:
        total = len(rows) if total is None else total
        out = {"count": total, "items": rows[:MAX_LIST]}
        if total > MAX_LIST:
            out["note"] = f"only the first {MAX_LIST} of {total} are listed"
        return out

    # -- graph tools ----------------------------------------------------------------------------
    def t_find_symbol(self, args: dict) -> ToolResult:
        name = _str_arg(args, "name")
        found = queries.callers(self.graph, name, 1)
        cypher = list(found.cypher)
        cands = []
        for row in found.rows[:MAX_LIST]:
            s = row["target"]
            callees = queries.symbol_callees(self.graph, s["file"], s["qual"])
            cypher += callees.cypher
            cand = {"qual": s["qual"], "kind": s["kind"], "file": s["file"], "line": s["line"],
                    "callers": [{"qual": c["qual"], "file": c["file"], "line": c["line"]} for c in row["callers"]],
                    "callees": [{"qual": c["qual"], "file": c["file"], "line": c["line"]} for c in callees.rows]}
            if row["unresolved_elsewhere"]:
                cand["note"] = (f"{row['unresolved_elsewhere']} call sites elsewhere use the name "
                                f"'{s['name']}' but could not be bound: the callers list is a lower bound")
            if s.get("unresolved_calls"):
                cand["unbound_calls_inside"] = s["unresolved_calls"]
            cands.append(cand)
        data: dict = {"symbol": name, "matches": len(found.rows), "candidates": cands}
        if not found.rows:
            # queries.callers' note: the closest qualified names when there are any
            data["note"] = next((n for n in found.notes if n.startswith("no symbol named")),
                                f"no symbol named '{name}' in the graph")
        elif len(found.rows) > 1:
            data["note"] = f"'{name}' is ambiguous: {len(found.rows)} symbols match; each is listed"
        return ToolResult(data, cypher, len(found.rows))

    def t_impact_of(self, args: dict) -> ToolResult:
        path = self._graph_path(_str_arg(args, "path"))
        hops = _int_arg(args, "max_hops", min(4, self.settings.max_hops), 1, 4)
        ans = queries.impact(self.graph, path, hops)
        data = {"file": path, "max_hops": hops, "found": ans.found, "dependents": self._list(ans.rows),
                "notes": ans.notes}
        return ToolResult(data, ans.cypher, len(ans.rows), {path} if ans.found else set())

    def t_call_chain(self, args: dict) -> ToolResult:
        src, dst = _str_arg(args, "source"), _str_arg(args, "target")
        ans = queries.call_chain(self.graph, src, dst)
        data = {"source": src, "target": dst, "paths": self._list(ans.rows), "notes": ans.notes}
        return ToolResult(data, ans.cypher, len(ans.rows))

    def t_file_context(self, args: dict) -> ToolResult:
        path = self._graph_path(_str_arg(args, "path"))
        ctx = queries.file_context(self.graph, path)
        if not ctx.found:
            return ToolResult({"file": path, "found": False, "notes": ctx.notes}, ctx.cypher, 0)
        imp = queries.impact(self.graph, path, min(4, self.settings.max_hops))
        data = {"file": path, "found": True, **{k: v for k, v in ctx.rows[0].items() if k != "path"},
                "dependents": self._list(imp.rows), "notes": ctx.notes + imp.notes}
        return ToolResult(data, ctx.cypher + imp.cypher, 1, {path})

    def t_package_users(self, args: dict) -> ToolResult:
        name = _str_arg(args, "name")
        ans = queries.package_users(self.graph, name)
        data = {"package": name, "files": self._list(ans.rows), "notes": ans.notes}
        return ToolResult(data, ans.cypher, len(ans.rows))

    def t_cypher_query(self, args: dict) -> ToolResult:
        query = _str_arg(args, "query")
        params = args.get("params")
        if params is not None and not isinstance(params, dict):
            raise ToolError("argument 'params' must be a JSON object")
        res = run_readonly(self.graph, query, params, row_cap=self.settings.row_cap,
                           timeout_ms=self.settings.query_timeout_ms)
        data = res.to_dict()
        data.pop("elapsed_ms", None)
        # strings in the rows that name files (read_file still checks that the graph has them)
        cells = {v for row in data["rows"] for v in row if isinstance(v, str) and ("/" in v or "." in v)}
        return ToolResult(data, [{"query": res.executed, "params": params or {}}], len(res.rows), cells)

    def t_change_impact(self, args: dict) -> ToolResult:
        from orbit_lsp.changes import diff, impact

        base = _str_arg(args, "base", required=False)
        staged = args.get("staged", False)
        if not isinstance(staged, bool):
            raise ToolError("argument 'staged' must be true or false")
        if base is not None and (staged or base.startswith("-") or not base.strip()):
            raise ToolError("give either 'base' (a git ref) or 'staged', not both; a ref never starts with '-'")
        depth = _int_arg(args, "depth", impact.DEFAULT_DEPTH, 1, 6)
        try:
            change = diff.from_git(self.root, "staged" if staged else "base" if base else "worktree", base)
        except diff.ChangeError as exc:
            raise ToolError(str(exc)) from None
        root_package = self.root.name if (self.root / "__init__.py").is_file() and self.root.name.isidentifier() else ""
        r = impact.analyse(self.graph, change, root_package, impact.Options(depth=depth))
        brief = lambda c: {"qual": c["qual"], "file": c["file"], "line": c["line"]}  # noqa: E731
        tests = r["tests"]
        data = {"change": r["change"]["description"], "totals": r["totals"],
                "changed": self._list([{**brief(s), "status": s["status"], **({"was": s["old_qual"]} if s["status"] == "renamed" else {})}
                                       for s in r["symbols"]]),
                "callers": self._list([{**brief(c), "depth": c["depth"], "reaches": c["reaches"]} for c in r["callers"]]),
                "dependents": self._list(r["dependents"]),
                "may_be_affected": self._list([{**brief(c), "names": c.get("names", [])} for c in r["may_be_affected"]]),
                "tests_to_run": self._list([{"id": t["id"], "reason": t["reason"]} for t in tests["selected"]]),
                "run": tests["commands"]["pytest"], "js_test_files": tests["commands"]["js_files"],
                "tests_that_may_be_affected": self._list([t["id"] for t in tests["may_be_affected"]]),
                "removed_tests": tests["removed"], "comment_only_files": r["comment_only"], "notes": r["notes"]}
        return ToolResult(data, r["cypher"], len(r["symbols"]))

    def t_recall(self, args: dict) -> ToolResult:
        query = _str_arg(args, "query")
        if self.memory is None:
            raise ToolError("memory is not available for this question")
        rec = self.memory.recall(query, project=self.root)
        for m in rec.memories:
            self.recalled.setdefault(m.id, m)
        items = [{"memory": m.id, "text": m.text, "matched": m.matched, "score": m.score,
                  **({"possibly_stale": m.stale_reason} if m.stale else {})} for m in rec.memories]
        data = {"query": query, "concepts": rec.concepts, "memories": items}
        if not rec.concepts:
            data["note"] = "the query has no words to match (only stop words)"
        elif not items:
            data["note"] = "no confirmed memory matches these words"
        return ToolResult(data, rec.cypher, len(items))

    def _graph_path(self, path: str) -> str:
        """A workspace-relative posix path from what the model wrote (``workspace_rel``)."""
        p = workspace_rel(self.root, path)
        if p is None:
            raise ToolError(f"{path} is outside the workspace")
        return p

    # -- files ---------------------------------------------------------------------------------
    def t_read_file(self, args: dict) -> ToolResult:
        path = self._graph_path(_str_arg(args, "path"))
        start = _int_arg(args, "start_line", 1, 1, 10_000_000)
        end = _int_arg(args, "end_line", None, 1, 10_000_000)
        refuse, target = self._read_refusal(path)
        if refuse:
            self._audit("file_read", path=path, allowed=False, reason=refuse)
            raise ToolError(f"read_file refused for {path}: {refuse}")
        decision = self._consent(path)
        if decision == DENY:
            self._audit("file_read", path=path, allowed=False, reason="the user declined")
            raise ToolError(f"read_file refused for {path}: the user declined to share this file")
        try:
            raw = self._read_checked(target)
        except _Changed as exc:
            self._audit("file_read", path=path, allowed=False, reason=str(exc))
            raise ToolError(f"read_file refused for {path}: {exc}; nothing was read (ask again)") from None
        except OSError as exc:
            self._audit("file_read", path=path, allowed=False, reason=str(exc.strerror))
            raise ToolError(f"cannot read {path}: {exc.strerror}") from None
        text = raw[:MAX_READ_BYTES].decode("utf-8", errors="replace")
        lines = text.splitlines()
        end = min(end or start + MAX_READ_LINES - 1, start + MAX_READ_LINES - 1, len(lines))
        excerpt = "\n".join(f"{i}: {lines[i - 1]}" for i in range(start, end + 1)) if start <= len(lines) else ""
        excerpt, hidden = redact(excerpt)
        self._audit("file_read", path=path, allowed=True, lines=[start, end], redactions=hidden)
        data = {"path": path, "start_line": start, "end_line": end, "total_lines": len(lines),
                "truncated": len(raw) > MAX_READ_BYTES or end < len(lines), "redactions": hidden,
                "text": excerpt}
        return ToolResult(data, [], max(0, end - start + 1), {path})

    def _read_refusal(self, path: str) -> tuple[str | None, "_Target | None"]:
        """Why ``path`` may not be read (or None) and, when it may, the file that was checked:
        its real path inside the workspace and its device and inode numbers."""
        if is_dotenv(path):
            return ".env files are never read or indexed", None
        parts = path.split("/")
        if ".." in parts or not path:
            return "not a workspace-relative path", None
        full = self.root / path
        real = Path(os.path.realpath(full))
        if is_dotenv(real):
            return "it links to a .env file, which is never read", None
        if real != self.root and self.root not in real.parents:
            return "it lies outside the workspace", None
        if path not in self.readable:
            return "only files returned by a previous step may be read (ask the graph about it first)", None
        rows = self.graph.ro_query("MATCH (f:File {path: $p}) RETURN count(f)", {"p": path}).rows
        if not rows or not rows[0][0]:
            return "the file is not in the code graph (not indexed or skipped)", None
        try:
            st = os.stat(real)
        except OSError as exc:
            return f"cannot read it: {exc.strerror}", None
        if not stat.S_ISREG(st.st_mode):
            return "it is not a regular file", None
        return None, _Target(real.relative_to(self.root).parts, st.st_dev, st.st_ino)

    def _read_checked(self, target: "_Target") -> bytes:
        """The first ``MAX_READ_BYTES + 1`` bytes of the file checked by ``_read_refusal``, opened
        after the user's consent without following any link: each component of its real path is
        opened relative to the workspace directory with ``O_NOFOLLOW``, and the file opened must
        be a regular file with the checked device and inode (a file swapped for a link, another
        file or a FIFO while the user was asked raises ``_Changed``; nothing is read)."""
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        dir_flags = flags | getattr(os, "O_DIRECTORY", 0)
        fd = os.open(self.root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            for part in target.parts[:-1]:
                try:
                    nxt = os.open(part, dir_flags, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise _Changed(f"folder {part} was replaced by a link while you were asked") from None
                    raise
                os.close(fd)
                fd = nxt
            try:
                file_fd = os.open(target.parts[-1], flags | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0), dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.EMLINK):
                    raise _Changed("the file was replaced by a link while you were asked") from None
                raise
        finally:
            os.close(fd)
        with os.fdopen(file_fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise _Changed("the file was replaced by something that is not a regular file while you were asked")
            if (st.st_dev, st.st_ino) != (target.dev, target.ino):
                raise _Changed("the file was replaced by another file while you were asked")
            os.set_blocking(fh.fileno(), True)
            return fh.read(MAX_READ_BYTES + 1)

    def _consent(self, path: str) -> str:
        ws = str(self.root)
        if self.history is not None and self.history.has_consent(ws, path):
            return ALLOW_ALWAYS
        decision = DENY
        if self.consent is not None:
            try:
                decision = self.consent(path) or DENY
            except Exception:  # noqa: BLE001 - no answer from the user is a "no"
                decision = DENY
        if decision not in (ALLOW_ONCE, ALLOW_ALWAYS):
            decision = DENY
        if decision == ALLOW_ALWAYS and self.history is not None:
            self.history.remember_consent(ws, "*")
        self._audit("consent", path=path, decision=decision)
        return decision


def tool_list() -> str:
    """The tools for a system prompt: one line each, ``- name: doc. args: {...}``."""
    return "\n".join(f"- {name}: {spec['doc']}. args: {json.dumps(spec['args'])}" for name, spec in TOOLS.items())
