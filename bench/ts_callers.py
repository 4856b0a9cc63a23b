"""orbit's callers of TypeScript functions and methods against the TypeScript language service's.

    python -m bench.run ts-callers [--package zod@3.25.76 --package rxjs@7.8.1] [--top 30]
                                   [--typescript typescript@5.6.3]
    python -m bench.run ts-callers --corpus DIR      (an existing source directory instead)

Each package is fetched at benchmark time with ``npm pack`` into the cache dir (``<cache
dir>/npm/``, reused later) and its ``src/`` copied to ``<cache dir>/npm/<spec>/corpus/``: the
workspace both sides see. The package's imports of itself (``zod/v4`` in zod's tests) are mapped
to those sources by a ``tsconfig.json`` written beside them (``paths``, taken from the package's
own ``tsconfig.json`` paths or from its ``exports`` entries that point into ``src/``), as the
project's own development setup does; orbit and TypeScript read the same file.

Targets: the functions and methods most called according to TypeScript. Candidates are ranked
without looking at what orbit bound: the number of call sites (all of them, bound or not) that
call the declaration's name, divided by the number of declarations with that name; the best
``--candidates`` are asked to TypeScript (``provideCallHierarchyIncomingCalls``, ``bench/
ts_callers.mjs``) and the ``--top`` with most incoming call sites are compared.

A call site is (file, line, UTF-16 column where the callee expression starts, called name), as
orbit records sites (``CALLS.lines``/``cols``) and as the Node script derives them from the
reference TypeScript reports. References TypeScript's call hierarchy counts that are no call
(``x.method`` passed as a value) are listed but not compared. Precision = sites orbit bound to a
target that TypeScript also lists / all sites orbit bound to targets; recall = sites TypeScript
lists that orbit bound to the same target / all TypeScript sites. Every disagreement is
classified: for sites only TypeScript lists, what orbit did with that site (unbound, bound
elsewhere, external, not extracted); for sites only orbit lists, where TypeScript's
``getDefinitionAtPosition`` says the call goes.

Also reported per project: the share of unbound call sites in the whole graph (unbound /
(bound + unbound); calls of globals and packages are neither) and the JS/TS indexing throughput
(files/s of a cold index of the corpus).
"""

from __future__ import annotations

import collections
import json
import logging
import re
import shutil
import subprocess
import time
from pathlib import Path

DEFAULT_PACKAGES = ("zod@3.25.76", "rxjs@7.8.1")
DEFAULT_TYPESCRIPT = "typescript@5.6.3"
NODE_SCRIPT = Path(__file__).resolve().parent / "ts_callers.mjs"
NODE_TIMEOUT_S = 1800


def add_parser(sub, common) -> None:
    """Register the ``ts-callers`` subcommand on ``bench.run``'s parser."""
    p = sub.add_parser("ts-callers", parents=[common],
                       help="orbit's callers of the most-called TS functions/methods against the TypeScript "
                            "language service's call hierarchy")
    p.add_argument("--package", action="append", default=None,
                   help=f"npm package spec fetched with `npm pack` (repeatable; default {', '.join(DEFAULT_PACKAGES)})")
    p.add_argument("--typescript", default=DEFAULT_TYPESCRIPT, help="npm spec of the compiler to compare with")
    p.add_argument("--top", type=int, default=30, help="targets compared per project")
    p.add_argument("--candidates", type=int, default=90, help="declarations asked to TypeScript per project")


# -- corpus ---------------------------------------------------------------------------------------
def _self_paths(pkg: Path) -> dict[str, list[str]]:
    """``paths`` mapping the package's imports of itself to its ``src/`` (relative to ``src/``)."""
    out: dict[str, list[str]] = {}
    tsconfig = pkg / "tsconfig.json"
    if tsconfig.exists():
        try:
            cfg = json.loads(re.sub(r"^\s*//.*$", "", tsconfig.read_text(), flags=re.M))
        except ValueError:
            cfg = {}
        for key, targets in (cfg.get("compilerOptions", {}).get("paths") or {}).items():
            mapped = [t[len("./src/"):] if t.startswith("./src/") else None for t in targets]
            if all(mapped):
                out[key] = ["./" + t for t in mapped]
    pj = json.loads((pkg / "package.json").read_text())
    name = pj.get("name", "")
    exports = pj.get("exports")
    if isinstance(exports, dict):
        for key, entry in exports.items():
            if not key.startswith(".") or key == "./package.json" or not isinstance(entry, dict):
                continue
            src = next((v for v in entry.values() if isinstance(v, str) and v.startswith("./src/")), None)
            if src is not None:
                out.setdefault(name + key[1:], ["./" + src[len("./src/"):]])
    return out


def prepare_package(spec: str, cache: Path) -> tuple[Path, str]:
    """Fetch ``spec`` (``npm pack``) and lay its ``src/`` out as the corpus; returns (dir, label)."""
    from bench.ts_resolution import fetch_package

    pkg = fetch_package(spec, cache)
    src = pkg / "src"
    if not src.is_dir():
        raise SystemExit(f"bench: {spec} ships no src/ directory")
    corpus = pkg.parent / "corpus"
    if not (corpus / ".done").exists():
        shutil.rmtree(corpus, ignore_errors=True)
        shutil.copytree(src, corpus, ignore=shutil.ignore_patterns("tsconfig*.json"))
        paths = _self_paths(pkg)
        cfg = {"compilerOptions": {"target": "esnext", "module": "esnext", "moduleResolution": "bundler",
                                   "strict": True, "lib": ["esnext", "dom"], "baseUrl": ".", "paths": paths}}
        (corpus / "tsconfig.json").write_text(json.dumps(cfg, indent=2) + "\n")
        (corpus / ".done").write_text(spec + "\n")
    pj = json.loads((pkg / "package.json").read_text())
    return corpus, f"{pj.get('name')}@{pj.get('version')} src/ (npm pack)"


# -- columns ------------------------------------------------------------------------------------
class Lines:
    """UTF-8 byte column <-> UTF-16 column conversion for the corpus' files."""

    def __init__(self, root: Path):
        self.root = root
        self._lines: dict[str, list[str]] = {}

    def line(self, rel: str, line1: int) -> str:
        ls = self._lines.get(rel)
        if ls is None:
            ls = self._lines[rel] = (self.root / rel).read_text(encoding="utf-8", errors="replace").split("\n")
        return ls[line1 - 1] if 0 < line1 <= len(ls) else ""

    def utf16(self, rel: str, line1: int, col8: int) -> int:
        prefix = self.line(rel, line1).encode("utf-8")[:col8].decode("utf-8", "replace")
        return len(prefix.encode("utf-16-le")) // 2

    def utf8(self, rel: str, line1: int, col16: int) -> int:
        text = self.line(rel, line1)
        units = 0
        for i, ch in enumerate(text):
            if units >= col16:
                return len(text[:i].encode("utf-8"))
            units += 2 if ord(ch) > 0xFFFF else 1
        return len(text.encode("utf-8"))


def _node(payload: dict) -> dict:
    res = subprocess.run(["node", str(NODE_SCRIPT)], input=json.dumps(payload), capture_output=True, text=True,
                         timeout=NODE_TIMEOUT_S)
    if res.returncode != 0:
        raise SystemExit(f"bench: node {NODE_SCRIPT.name} failed: {res.stderr.strip()[-2000:]}")
    return json.loads(res.stdout)


# -- one project ----------------------------------------------------------------------------------
def compare_project(corpus: Path, label: str, settings, typescript: Path, top: int, candidates: int) -> dict:
    """Index ``corpus`` cold, pick the targets, ask TypeScript, compare. Returns the figures."""
    from bench.run import log, open_store
    from orbit_lsp.index.indexer import WorkspaceIndexer
    from orbit_lsp.index.js_facts import JsFacts

    store = open_store(settings)
    try:
        ix = WorkspaceIndexer(corpus, store, settings)
        if ix.graph.exists():  # always a cold build of this code
            ix.graph.delete()
        ix.cache_path.unlink(missing_ok=True)
        t = time.perf_counter()
        rep = ix.index_all()
        index_s = time.perf_counter() - t
        root = ix.root
        g = ix.graph
        js = {rel: st.facts for rel, st in ix.state.items() if isinstance(st.facts, JsFacts)}
        edges = g.query("MATCH (a:Symbol)-[e:CALLS]->(b:Symbol) RETURN a.qual, b.qual, e.lines, e.cols, e.resolved").rows
        unbound_rows = g.query("MATCH (s:Symbol) WHERE s.unresolved_calls > 0 "
                               "RETURN s.file, s.unresolved_calls, s.unresolved_sites").rows
        inherits = g.query("MATCH (a:Symbol)-[:INHERITS]->(b:Symbol) RETURN a.qual, b.qual").rows
        all_syms = {q for (q,) in g.query("MATCH (s:Symbol) RETURN s.qual").rows}
    finally:
        store.close()
    lines = Lines(root)
    parse_s, bind_s = _throughput(root, sorted(js), ix.aliases)

    # every call site orbit extracted, and what became of it
    sites: dict[tuple, str] = {}  # (rel, line, col8, name) -> caller qual
    names_at: dict[tuple, list[str]] = collections.defaultdict(list)  # (rel, line, col8) -> called names
    name_calls: collections.Counter = collections.Counter()
    decls: list[tuple[str, object]] = []
    for rel, facts in js.items():
        for sc in facts.scopes:
            for cs in sc.calls:
                if cs.name:
                    sites[(rel, cs.line, cs.col, cs.name)] = sc.qual
                    names_at[(rel, cs.line, cs.col)].append(cs.name)
                    name_calls[cs.name] += 1
        for sym in facts.symbols:
            if sym.kind in ("function", "method") and sym.name not in ("constructor", "default"):
                decls.append((rel, sym))
    bound: dict[tuple, list[tuple[str, str]]] = collections.defaultdict(list)  # site key -> [(dst, resolved)]
    n_bound = 0
    for src, dst, lns, cols, how in edges:
        rel = src.split("#", 1)[0]
        name = dst.rsplit("#", 1)[-1].rsplit(".", 1)[-1]
        for ln, col in zip(lns, cols):
            here = names_at.get((rel, ln, col), [])
            # the called name (``x.spa()`` bound through ``spa = this.safeParseAsync`` is ``spa``)
            called = name if name in here or len(set(here)) != 1 else here[0]
            bound[(rel, ln, col, called)].append((dst, how))
            n_bound += 1
    family = _families(inherits, all_syms)
    unbound_at: set[tuple] = set()  # (rel, line, name)
    n_unbound = 0
    for file, count, sites_field in unbound_rows:
        n_unbound += count
        for s in sites_field or []:
            name, _, ln = s.rpartition("@")
            unbound_at.add((file, int(ln), name))

    # targets: ranked by calls of their name per declaration of that name, then by TypeScript
    per_name = collections.Counter(sym.name for _, sym in decls)
    ranked = sorted(decls, key=lambda d: (-name_calls[d[1].name] / per_name[d[1].name], d[0], d[1].line))
    cands = ranked[:candidates]
    target_pos = [[str(root / rel), sym.line - 1, lines.utf16(rel, sym.line, sym.col)] for rel, sym in cands]
    log(f"{label}: {len(js)} JS/TS files indexed in {index_s:.1f} s; asking TypeScript about {len(cands)} candidates")
    t = time.perf_counter()
    ts_out = _node({"root": str(root), "typescript": str(typescript), "files": [str(root / r) for r in sorted(js)],
                    "targets": target_pos})
    ts_s = time.perf_counter() - t

    def rel_of(abs_path: str) -> str | None:
        try:
            return Path(abs_path).resolve().relative_to(root).as_posix()
        except ValueError:
            return None

    scored = []
    for (rel, sym), r in zip(cands, ts_out["results"]):
        calls = [c for c in r["calls"] if rel_of(c["file"]) is not None]
        scored.append((sum(1 for c in calls if c["isCall"]), rel, sym, r, calls))
    scored.sort(key=lambda s: (-s[0], s[1], s[2].line))
    chosen = [s for s in scored if s[0] > 0][:top]

    # compare call sites
    tp = fp = fn = 0
    strict = [0, 0, 0]  # tp, fp, fn against the declaration alone
    not_calls = []
    only_ts, only_orbit = [], []
    per_target = []
    orbit_sites_of: dict[str, collections.Counter] = {}
    target_line: dict[str, tuple[str, int]] = {}
    for n_ts, rel, sym, r, calls in chosen:
        dst = f"{rel}#{sym.qual}"
        target_line[dst] = (rel, sym.line)
        ts_keys: collections.Counter = collections.Counter()
        seen_names: set = set()
        for c in calls:
            crel = rel_of(c["file"])
            at = (crel, c["nameLine"], c["nameCharacter"])
            if at in seen_names:  # the same reference reported twice (through a re-export)
                continue
            seen_names.add(at)
            key = (crel, c["line"] + 1, c["character"], sym.name)
            if not c["isCall"]:
                not_calls.append([dst, f"{crel}:{c['nameLine'] + 1}"])
                continue
            ts_keys[key] += 1
        mine: collections.Counter = collections.Counter()
        exact: collections.Counter = collections.Counter()
        fam = family(dst)
        for (srel, ln, col8, name), targets in bound.items():
            hits = collections.Counter(d for d, _how in targets if d in fam)
            if hits:
                key = (srel, ln, lines.utf16(srel, ln, col8), name)
                # a site bound to several members of the family (a union) is one site; the same
                # member twice at one key is two sites (``z.string().refine(…).refine(…)``)
                mine[key] += max(hits.values())
                exact[key] += hits[dst]
        exact = +exact
        strict[0] += sum((ts_keys & exact).values())
        strict[1] += sum((exact - ts_keys).values())
        strict[2] += sum((ts_keys - exact).values())
        orbit_sites_of[dst] = mine
        both = ts_keys & mine
        a, b = ts_keys - mine, mine - ts_keys
        tp += sum(both.values())
        fn += sum(a.values())
        fp += sum(b.values())
        per_target.append([dst, r.get("prepared"), len(fam), sum(ts_keys.values()), sum(mine.values()),
                           sum(both.values()), sum((ts_keys & exact).values())])
        for k in a.elements():
            only_ts.append((dst, k))
        for k in b.elements():
            only_orbit.append((dst, k))

    # classify: sites only TypeScript lists -> what orbit did with them
    classes: collections.Counter = collections.Counter()
    rows = []
    for dst, (rel, ln, col16, name) in only_ts:
        col8 = lines.utf8(rel, ln, col16)
        key = (rel, ln, col8, name)
        if key in bound:
            why = "orbit bound it elsewhere: " + ", ".join(f"{d} ({h})" for d, h in bound[key])
            cls = "bound to a declaration outside the target's override family"
        elif (rel, ln, name) in unbound_at:
            why, cls = "orbit: unbound (unresolved call)", "unbound in orbit"
        elif key in sites:
            why, cls = "orbit: external (a global or package value)", "taken as external"
        else:
            why, cls = "orbit extracted no call here", "no call site extracted"
        classes["TS only: " + cls] += 1
        rows.append([dst, f"{rel}:{ln}", lines.line(rel, ln).strip()[:90], "TS only", why])
    # sites only orbit lists -> where TypeScript says they go
    site_q = [[str(root / rel), ln - 1, col16, name] for _, (rel, ln, col16, name) in only_orbit]
    defs = _node({"root": str(root), "typescript": str(typescript), "files": [str(root / r) for r in sorted(js)],
                  "targets": [], "sites": site_q})["sites"] if site_q else []
    for (dst, (rel, ln, col16, name)), d in zip(only_orbit, defs):
        if not d["found"]:
            why, cls = "TypeScript finds no such callee here", "site not found by TypeScript"
        elif not d["defs"]:
            why, cls = "TypeScript: no definition (untyped / any)", "TypeScript has no definition"
        else:
            where = sorted({f"{rel_of(x['file']) or Path(x['file']).name}:{x['line'] + 1} {x['container']}.{x['name']}"
                            for x in d["defs"]})
            trel, tline = target_line[dst]
            if any(rel_of(x["file"]) == trel and x["line"] + 1 == tline for x in d["defs"]):
                cls = "TypeScript's definition is the target too (through an alias), its call hierarchy omits it"
            else:
                cls = "TypeScript binds it to another declaration"
            why = "TypeScript: " + "; ".join(where)[:200]
        classes["orbit only: " + cls] += 1
        rows.append([dst, f"{rel}:{ln}", lines.line(rel, ln).strip()[:90], "orbit only", why])

    total_sites = n_bound + n_unbound
    return {
        "label": label, "files": len(js), "index_s": index_s, "files_per_s": len(js) / index_s if index_s else None,
        "parse_errors": dict(rep.parse_errors), "ts_s": ts_s, "ts_version": ts_out["version"],
        "parse_s": parse_s, "bind_s": bind_s,
        "mem_files_per_s": len(js) / (parse_s + bind_s) if parse_s + bind_s else None,
        "targets": len(chosen), "tp": tp, "fp": fp, "fn": fn, "not_calls": not_calls, "strict": strict,
        "strict_precision": 100.0 * strict[0] / (strict[0] + strict[1]) if strict[0] + strict[1] else 100.0,
        "strict_recall": 100.0 * strict[0] / (strict[0] + strict[2]) if strict[0] + strict[2] else 100.0,
        "precision": 100.0 * tp / (tp + fp) if tp + fp else 100.0,
        "recall": 100.0 * tp / (tp + fn) if tp + fn else 100.0,
        "bound_sites": n_bound, "unbound_sites": n_unbound,
        "unbound_share": 100.0 * n_unbound / total_sites if total_sites else 0.0,
        "per_target": per_target, "classes": dict(classes), "disagreements": rows,
        "graph": ix.graph.name,
    }


def _throughput(root: Path, rels: list[str], aliases, repeat: int = 3) -> tuple[float, float]:
    """Best of ``repeat`` runs of extracting every JS/TS file and binding them all, in memory
    (no FalkorDB, one process): (extract seconds, bind seconds)."""
    from orbit_lsp.index import javascript as jsx
    from orbit_lsp.index.js_resolve import JsResolver

    data = {rel: (root / rel).read_bytes() for rel in rels}
    best = (float("inf"), float("inf"))
    for _ in range(repeat):
        t = time.perf_counter()
        facts = {}
        for rel, src in data.items():
            try:
                facts[rel] = jsx.extract(rel, src)
            except jsx.JsSyntaxError as exc:
                facts[rel] = exc.facts
        t1 = time.perf_counter()
        resolver = JsResolver(facts, set(rels), aliases, root)
        for rel in rels:
            resolver.resolve_file(rel)
        t2 = time.perf_counter()
        if t2 - t < sum(best):
            best = (t1 - t, t2 - t1)
    return best


def _families(inherits, all_syms):
    """``family(dst)``: the set of symbols (``file#qual``) whose calls TypeScript's call hierarchy
    counts as calls of ``dst``: for a method ``C.m``, every ``D.m`` whose type ``D`` is below (or
    is) a type of the chain above ``C`` that declares ``m``; for anything else, ``{dst}``."""
    up: dict[str, set[str]] = collections.defaultdict(set)
    down: dict[str, set[str]] = collections.defaultdict(set)
    for a, b in inherits:
        up[a].add(b)
        down[b].add(a)

    def closure(start: str, edges) -> set[str]:
        seen, stack = {start}, [start]
        while stack:
            for n in edges.get(stack.pop(), ()):
                if n not in seen:
                    seen.add(n)
                    stack.append(n)
        return seen

    def family(dst: str) -> set[str]:
        owner, _, name = dst.rpartition(".")
        if "#" not in owner or owner not in all_syms:
            return {dst}
        roots = {t for t in closure(owner, up) if f"{t}.{name}" in all_syms}
        out = set()
        for r in roots:
            out |= {f"{t}.{name}" for t in closure(r, down) if f"{t}.{name}" in all_syms}
        return out or {dst}

    return family


def run(args, settings, command: str):
    """Entry point from ``bench.run.main``."""
    from bench.run import Report, Table, log
    from bench.ts_resolution import ensure_typescript, missing_tools

    gone = missing_tools()
    if gone:
        raise SystemExit(f"bench: ts-callers needs {' and '.join(gone)} on PATH")
    cache = Path(args.cache_dir).expanduser()
    projects = []
    if args.corpus and args.corpus != "stdlib":  # "stdlib": the shared default, i.e. not given
        corpus = Path(args.corpus).expanduser().resolve()
        projects.append((corpus, corpus.name))
    else:
        for spec in args.package or DEFAULT_PACKAGES:
            log(f"npm pack {spec} -> {cache / 'npm'}")
            projects.append(prepare_package(spec, cache))
    typescript = ensure_typescript(args.typescript, cache)
    orbit_log = logging.getLogger("orbit_lsp")
    level = orbit_log.level
    if not args.verbose:
        orbit_log.setLevel(logging.ERROR)
    try:
        results = [compare_project(c, lab, settings, typescript, args.top, args.candidates) for c, lab in projects]
    finally:
        orbit_log.setLevel(level)
    summary = Table("Callers of the most-called functions and methods: orbit against the TypeScript language service",
                    ["project", "targets", "TS call sites", "orbit sites", "agreeing", "precision (%)", "recall (%)",
                     "declaration only: precision / recall (%)",
                     "unbound share of all call sites (%)", "JS/TS files", "cold index (s)", "files/s",
                     "extract + bind in memory, best of 3 (s)", "files/s in memory", "parse errors"],
                    [[r["label"], r["targets"], r["tp"] + r["fn"], r["tp"] + r["fp"], r["tp"], round(r["precision"], 2),
                      round(r["recall"], 2), f"{r['strict_precision']:.1f} / {r['strict_recall']:.1f}",
                      f"{r['unbound_share']:.1f} ({r['unbound_sites']:,} of "
                      f"{r['unbound_sites'] + r['bound_sites']:,})", r["files"], r["index_s"],
                      r["files_per_s"], f"{r['parse_s']:.2f} + {r['bind_s']:.2f}", r["mem_files_per_s"],
                      len(r["parse_errors"])] for r in results])
    tables = [summary]
    for r in results:
        tables.append(Table(f"{r['label']}: disagreements by class", ["class", "sites"],
                            sorted(([k, v] for k, v in r["classes"].items()), key=lambda kv: -kv[1])))
        tables.append(Table(f"{r['label']}: targets", ["declaration", "TS name", "override family", "TS sites",
                                                       "orbit sites", "agreeing", "agreeing, declaration only"],
                            r["per_target"]))
        if r["disagreements"]:
            tables.append(Table(f"{r['label']}: every disagreement", ["target", "site", "code", "side", "why"],
                                r["disagreements"]))
    notes = ["Callers are compared as TypeScript counts them: the calls of a method include those bound to the "
             "members of its override family (the same-named members of the classes and interfaces it extends or "
             "implements, transitively, and of every type below those; from orbit's INHERITS edges). "
             "'declaration only' compares the calls bound to the target declaration itself.",
             f"TypeScript {results[0]['ts_version'] if results else '?'} language service "
             "(provideCallHierarchyIncomingCalls, getDefinitionAtPosition) over the same files with the corpus' "
             "tsconfig.json (moduleResolution bundler, paths mapping the package's self-imports to its sources)."]
    notes.append("cold index = `WorkspaceIndexer.index_all` of the corpus into the benchmark's embedded FalkorDB "
                 "(parse workers, resolution, graph write; wall time); in memory = `javascript.extract` of every "
                 "file and `JsResolver.resolve_file` of every file in this process, best of 3.")
    for r in results:
        if r["not_calls"]:
            notes.append(f"{r['label']}: {len(r['not_calls'])} references TypeScript's call hierarchy lists are no "
                         "call (a method passed as a value) and are not compared.")
        if r["parse_errors"]:
            notes.append(f"{r['label']}: parse errors: " + "; ".join(f"{p}: {e}" for p, e in sorted(r["parse_errors"].items())[:8]))
    return Report("ts-callers", " + ".join(r["label"] for r in results), command, tables, notes,
                  {"projects": results})


__all__ = ["add_parser", "run", "compare_project", "prepare_package"]
