"""Human forms of a change-impact result (``impact.analyse``): plain text for a terminal and
Markdown for a pull-request comment (with a Mermaid diagram of the blast radius, capped for
readability, totals always exact). Both end with the Cypher that was run (Markdown: folded)."""

from __future__ import annotations

import re

from orbit_lsp.changes.selection import is_test_support

LIST_CAP = 25  # rows per section in text and Markdown
DIAGRAM_CAP = 30  # nodes in the Mermaid diagram


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _where(row: dict) -> str:
    return f"{row['file']}:{row['line']}" if row.get("line") else row["file"]


def _symbol_line(s: dict) -> str:
    extra = ""
    if s["status"] == "renamed":
        extra = f"  (was {s['old_qual']})"
    elif s["status"] == "removed":
        return f"  removed   {s['qual']} ({s['kind']})  {s['old_file']}:{s['old_line']}"
    elif s.get("old_qual") and s["old_qual"] != s["qual"]:
        extra = f"  (was {s['old_qual']})"
    return f"  {s['status']:<9} {s['qual']} ({s['kind']})  {_where(s)}{extra}"


def _capped(rows: list, cap: int) -> tuple[list, int]:
    return rows[:cap], max(0, len(rows) - cap)


def coverage_lines(result: dict) -> list[str]:
    """The narrowing by a coverage map (``coverage_map.analyse``): a summary line, then one
    line per changed symbol (narrowed or kept static, and why); [] without a map."""
    c = result.get("tests", {}).get("coverage")
    if not c:
        return []
    n = sum(1 for s in c["symbols"] if s["mode"] == "narrowed")
    where = f" in {c['recorded_root']}" if c.get("recorded_root") else ""
    if c.get("tests_under"):
        where += f", pytest run from {c['tests_under']}/"
    out = [f"Coverage map {c['path']} (recorded {c['mtime_iso']}{where}): {_plural(c['narrowed'], 'test')} selected "
           f"(static: {c['static']}); {n} of {_plural(len(c['symbols']), 'changed symbol')} narrowed"
           + (f"; may be affected: {c['narrowed_may']} (static: {c['static_may']})" if c["static_may"] else "")]
    for s in c["symbols"]:
        out.append(f"  {s['mode']:<8}  {s['qual']}  ({s['reason']})")
    for key, what in (("not_in_map", "not in the map"), ("stale", "map stale for their file"),
                      ("fixture_scope", "sharing a fixture scope")):
        if c["kept"][key]:
            out.append(f"  kept, {what}: {len(c['kept'][key])}")
    return out


def text(result: dict, cap: int = LIST_CAP, cypher: bool = True) -> str:
    """The result for a terminal."""
    t = result["totals"]
    opts = result["options"]
    out = [f"Change: {result['change']['description']} — {_plural(t['files'], 'file')}, "
           f"{_plural(t['symbols'], 'changed symbol')}"]
    for f in result["files"]:
        if f["status"] != "modified":
            was = f" (from {f['old_path']})" if f["status"] == "renamed" else ""
            out.append(f"  file {f['status']}: {f['path']}{was}")
    if result.get("comment_only"):
        out.append(f"Comment-only changes (no code change): {_plural(len(result['comment_only']), 'file')}: "
                   + ", ".join(result["comment_only"][:cap]) + (" …" if len(result["comment_only"]) > cap else ""))
    if result["symbols"]:
        out.append("")
        out.append("Changed symbols:")
        rows, more = _capped(result["symbols"], cap)
        out += [_symbol_line(s) for s in rows] + ([f"  … and {more} more"] if more else [])
    out.append("")
    by = ", ".join(f"{n} at {d}" for d, n in enumerate(t["callers_by_depth"], 1) if n)
    out.append(f"Blast radius: {_plural(t['callers'], 'caller')} within {opts['depth']} hops" + (f" ({by})" if by else ""))
    rows, more = _capped(result["callers"], cap)
    for r in rows:
        out.append(f"  {r['depth']}  {r['qual']}  {_where(r)}  → {r['reaches']}")
    if more:
        out.append(f"  … and {more} more")
    out.append(f"Dependent files: {t['dependents']} within {opts['depth']} hops")
    rows, more = _capped(result["dependents"], cap)
    out += [f"  {d['hops']}  {d['path']}  (depends on {d['of']})" for d in rows] + ([f"  … and {more} more"] if more else [])
    out.append(f"May be affected (unbound calls using a changed name, not counted above): {t['may_be_affected']}")
    rows, more = _capped(result["may_be_affected"], cap)
    out += [f"  {r['depth']}  {r['qual']}  {_where(r)}  (name {r['reaches']})" for r in rows]
    out += [f"  … and {more} more"] if more else []
    tests = result["tests"]
    if opts["tests"]:
        out.append("")
        total = f" of {tests['total']}" if tests.get("total") is not None else ""
        out.append(f"Tests: {t['tests']} selected{total}")
        out += coverage_lines(result)
        rows, more = _capped(tests["selected"], cap)
        out += [f"  {x['id']}  ({x['reason']})" for x in rows] + ([f"  … and {more} more"] if more else [])
        cmd = tests["commands"]
        if cmd["pytest"]:
            out.append(f"Run: {cmd['pytest']}")
        if cmd["js_files"]:
            out.append("JS/TS test files: " + " ".join(cmd["js_files"]))
        if tests["removed"]:
            out.append("Removed tests: " + ", ".join(tests["removed"]))
        out.append(f"Tests that may be affected (only through unbound calls): {t['tests_may_be_affected']}")
        rows, more = _capped(tests["may_be_affected"], cap)
        out += [f"  {x['id']}  ({x['reason']})" for x in rows] + ([f"  … and {more} more"] if more else [])
    for n in result["notes"]:
        out.append(f"note: {n}")
    if cypher and result.get("cypher"):
        c = result["cypher"]
        out.append("")
        out.append(f"Cypher ({_plural(len(c), 'statement')}):")
        for i, q in enumerate(c, 1):
            out.append(f"  {i}. {q['query']}")
    return "\n".join(out) + "\n"


_ID = re.compile(r"[^A-Za-z0-9_]")


def _node_id(qual: str, ids: dict) -> str:
    if qual not in ids:
        ids[qual] = f"n{len(ids)}_{_ID.sub('_', qual)[-40:]}"
    return ids[qual]


def _label(text: str) -> str:
    return text.replace('"', "'").replace("<", "‹").replace(">", "›")


def mermaid(result: dict, cap: int = DIAGRAM_CAP) -> str:
    """A Mermaid flowchart: changed symbols (highlighted), their callers (nearest first, at most
    ``cap`` nodes) with edges caller → callee, and a note node with what was left out."""
    ids: dict[str, str] = {}
    lines = ["flowchart RL"]
    changed = [s for s in result["symbols"] if s["status"] != "removed"]
    shown: set[str] = set()
    for s in changed[:cap]:
        lines.append(f'  {_node_id(s["qual"], ids)}["{_label(s["qual"])}"]:::changed')
        shown.add(s["qual"])
    room = max(0, cap - len(shown))
    callers = sorted(result["callers"], key=lambda r: r["depth"])
    kept = []
    for r in callers:
        if len(kept) >= room:
            break
        if r["via"] in shown or any(k["qual"] == r["via"] for k in kept):
            kept.append(r)
            shown.add(r["qual"])
    for r in kept:
        test = ":::test" if is_test_support(r["file"]) else ""
        lines.append(f'  {_node_id(r["qual"], ids)}["{_label(r["qual"])}"]{test}')
        lines.append(f'  {_node_id(r["qual"], ids)} --> {_node_id(r["via"], ids)}')
    left = (len(changed) - min(len(changed), cap)) + (len(result["callers"]) - len(kept))
    if left:
        lines.append(f'  more["… {left} more symbols not drawn (totals below)"]')
    lines.append("  classDef changed fill:#ffd8a8,stroke:#e8590c")
    lines.append("  classDef test fill:#d3f9d8,stroke:#2b8a3e")
    return "\n".join(lines)


def markdown(result: dict, cap: int = LIST_CAP, diagram_cap: int = DIAGRAM_CAP) -> str:
    """The result as a pull-request comment: summary, Mermaid diagram, tables, runnable test
    command, and the Cypher in a folded section."""
    t = result["totals"]
    opts = result["options"]
    out = ["## Orbit change impact", "",
           f"{result['change']['description']}: **{_plural(t['files'], 'file')}**, "
           f"**{_plural(t['symbols'], 'changed symbol')}**, **{_plural(t['callers'], 'caller')}** within "
           f"{opts['depth']} hops ({t['public']} public), **{_plural(t['dependents'], 'dependent file')}**, "
           f"**{t['tests']} tests selected**" + (f" of {result['tests']['total']}" if result["tests"].get("total") else "")
           + f"; {t['may_be_affected']} symbols and {t['tests_may_be_affected']} tests *may* be affected "
           "(unbound calls)." + (f" Comment-only changes (no code change): "
                                 f"{_plural(len(result['comment_only']), 'file')}." if result.get("comment_only") else ""),
           ""]
    if result["symbols"]:
        out += ["```mermaid", mermaid(result, diagram_cap), "```", ""]
        out += ["| Change | Symbol | Kind | Where |", "|---|---|---|---|"]
        rows, more = _capped(result["symbols"], cap)
        for s in rows:
            where = f"{s['old_file']}:{s['old_line']}" if s["status"] == "removed" else _where(s)
            was = f" (was `{s['old_qual']}`)" if s.get("old_qual") and s["old_qual"] != s["qual"] else ""
            out.append(f"| {s['status']} | `{s['qual']}`{was} | {s['kind']} | `{where}` |")
        if more:
            out.append(f"| … | {more} more | | |")
        out.append("")
    if result["callers"]:
        out += [f"<details><summary>Blast radius: {_plural(t['callers'], 'caller')}</summary>", "",
                "| Hops | Caller | Where | Reaches |", "|---|---|---|---|"]
        rows, more = _capped(result["callers"], cap)
        out += [f"| {r['depth']} | `{r['qual']}` | `{_where(r)}` | `{r['reaches']}` |" for r in rows]
        out += [f"| … | {more} more | | |"] if more else []
        out += ["", "</details>", ""]
    tests = result["tests"]
    if opts["tests"]:
        cov = coverage_lines(result)
        if cov:
            out += [cov[0], ""] + [f"- {x.strip()}" for x in cov[1:]] + ([""] if cov[1:] else [])
        if tests["selected"]:
            out += [f"<details><summary>Tests to run: {len(tests['selected'])}</summary>", ""]
            rows, more = _capped(tests["selected"], cap)
            out += [f"- `{x['id']}` — {x['reason']}" for x in rows] + ([f"- … and {more} more"] if more else [])
            out += ["", "</details>", ""]
            if tests["commands"]["pytest"]:
                out += ["```sh", tests["commands"]["pytest"], "```", ""]
            if tests["commands"]["js_files"]:
                out += ["JS/TS test files: " + " ".join(f"`{f}`" for f in tests["commands"]["js_files"]), ""]
        if tests["may_be_affected"]:
            out += [f"<details><summary>Tests that may be affected (unbound calls only): "
                    f"{len(tests['may_be_affected'])}</summary>", ""]
            rows, more = _capped(tests["may_be_affected"], cap)
            out += [f"- `{x['id']}` — {x['reason']}" for x in rows] + ([f"- … and {more} more"] if more else [])
            out += ["", "</details>", ""]
        if tests["removed"]:
            out += ["Removed tests: " + ", ".join(f"`{x}`" for x in tests["removed"]), ""]
    for n in result["notes"]:
        out.append(f"> note: {n}")
    if result.get("cypher"):
        out += ["", f"<details><summary>Cypher ({_plural(len(result['cypher']), 'statement')})</summary>", "",
                "```cypher"] + [q["query"] for q in result["cypher"]] + ["```", "", "</details>"]
    return "\n".join(out) + "\n"
