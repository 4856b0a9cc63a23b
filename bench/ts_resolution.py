"""Agreement of orbit's JS/TS import resolution with the TypeScript compiler's.

    python -m bench.run ts-resolution [--package rxjs@7.8.1] [--typescript typescript@5.6.3]
    python -m bench.run ts-resolution --corpus DIR      (an existing directory instead)

Fetches a real TypeScript project at benchmark time with ``npm pack`` into the cache dir
(``<cache dir>/npm/``, outside the repository; reused on later runs), installs the ``typescript``
package there too, indexes the project with orbit (the benchmark's own data dir), and for every
import specifier of every JS/TS file orbit indexed compares what orbit resolved it to with
``ts.resolveModuleName`` (``bench/ts_resolve.mjs``, run with ``node``), each file under its
nearest ``tsconfig.json``/``jsconfig.json``; and each file's import list as the compiler's own
parser (``ts.createSourceFile``) finds it, so imports orbit failed to extract show up too.

Both answers are reduced to "this workspace source file" or "no workspace source file" (a
package, a Node built-in, a missing file, a ``.json``); they agree when they are equal. Files
are compared as wholes too: the file's ``IMPORTS`` edges in the graph against the set of
workspace files TypeScript resolved its specifiers to. Every disagreement is listed.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

DEFAULT_PACKAGE = "rxjs@7.8.1"  # ships src/ (260 .ts files) with a tsconfig using baseUrl + paths
DEFAULT_TYPESCRIPT = "typescript@5.6.3"
NODE_SCRIPT = Path(__file__).resolve().parent / "ts_resolve.mjs"
SOURCE_EXTS = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")


def add_parser(sub, common) -> None:
    """Register the ``ts-resolution`` subcommand on ``bench.run``'s parser."""
    p = sub.add_parser("ts-resolution", parents=[common],
                       help="orbit's JS/TS import resolution against ts.resolveModuleName on a real project")
    p.add_argument("--package", default=DEFAULT_PACKAGE, help="npm package spec fetched with `npm pack`")
    p.add_argument("--typescript", default=DEFAULT_TYPESCRIPT, help="npm spec of the compiler to compare with")
    # no set_defaults(corpus=None) here: the parent's --corpus action is shared by every
    # subcommand, and set_defaults would change its default for all of them


def missing_tools() -> list[str]:
    return [t for t in ("node", "npm") if shutil.which(t) is None]


def _safe(spec: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in spec)


def _npm(args: list[str], cwd: Path) -> str:
    res = subprocess.run(["npm", *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise SystemExit(f"bench: npm {' '.join(args)} failed: {res.stderr.strip()[-2000:]}")
    return res.stdout


def fetch_package(spec: str, cache_dir: Path) -> Path:
    """``npm pack SPEC`` into ``<cache_dir>/npm/<spec>/`` (once) and extract it; returns the
    extracted ``package/`` directory."""
    base = Path(cache_dir).expanduser() / "npm" / _safe(spec)
    pkg = base / "package"
    if (base / ".done").exists() and pkg.is_dir():
        return pkg
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    out = _npm(["pack", spec, "--json", "--silent"], base)
    tgz = base / json.loads(out)[0]["filename"]
    with tarfile.open(tgz) as tar:
        tar.extractall(base, filter="data")
    (base / ".done").write_text(spec + "\n")
    return pkg


def ensure_typescript(spec: str, cache_dir: Path) -> Path:
    """``npm install SPEC`` into ``<cache_dir>/npm/<spec>/`` (once); returns the package dir."""
    base = Path(cache_dir).expanduser() / "npm" / _safe(spec)
    mod = base / "node_modules" / "typescript"
    if not (mod / "package.json").exists():
        base.mkdir(parents=True, exist_ok=True)
        _npm(["install", "--prefix", str(base), spec, "--no-audit", "--no-fund", "--silent"], base)
    return mod


def ts_resolve(root: Path, typescript: Path, queries: list[tuple[str, str, str]], files: list[str] = ()) -> dict:
    """Run ``ts_resolve.mjs`` on ``(abs file, specifier, kind)`` queries, and on ``files`` (their
    imports as the compiler's parser finds them)."""
    payload = json.dumps({"root": str(root), "typescript": str(typescript), "queries": queries,
                          "files": list(files)})
    res = subprocess.run(["node", str(NODE_SCRIPT)], input=payload, capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise SystemExit(f"bench: node {NODE_SCRIPT.name} failed: {res.stderr.strip()[-2000:]}")
    return json.loads(res.stdout)


def _ts_answer(root: Path, r: dict) -> str | None:
    """The workspace source file TypeScript resolved to (relative), or None. A package found
    through a ``node_modules`` symlink into the workspace (npm/yarn/pnpm workspaces) counts as a
    workspace file: TypeScript flags it external but resolves it to its real path."""
    p = r.get("resolved")
    if not p:
        return None
    try:
        rel = Path(p).resolve().relative_to(root).as_posix()
    except ValueError:
        return None
    if "node_modules/" in rel or not rel.lower().endswith(SOURCE_EXTS):
        return None
    return rel


def _orbit_answer(res: tuple) -> str | None:
    return res[1] if res[0] == "file" else None


def _describe(res: tuple) -> str:
    return {"file": "{}", "other": "non-source file {}", "builtin": "Node built-in {}", "package": "package {}",
            "missing": "unresolved"}[res[0]].format(res[1])


def run_ts_resolution(corpus: Path, label: str, settings, command: str, typescript: Path):
    """Index ``corpus``, resolve every import specifier with orbit and with TypeScript, compare.
    Returns a ``bench.run.Report`` whose ``data`` holds the figures and the disagreements."""
    from bench.run import Report, Table, log, open_store
    from orbit_lsp.index.javascript import JsFacts
    from orbit_lsp.index.js_modules import JsModules
    from orbit_lsp.index.indexer import WorkspaceIndexer

    store = open_store(settings)
    try:
        ix = WorkspaceIndexer(corpus, store, settings)
        if ix.graph.exists():  # always a cold build: what this code resolves, not a cache of older code
            ix.graph.delete()
        ix.cache_path.unlink(missing_ok=True)
        t = time.perf_counter()
        rep = ix.index_all()
        index_s = time.perf_counter() - t
        root = ix.root
        graph_imports: dict[str, set[str]] = {}
        for a, b in ix.graph.query("MATCH (a:File)-[:IMPORTS]->(b:File) RETURN a.path, b.path").rows:
            graph_imports.setdefault(a, set()).add(b)
        modules = JsModules(root, set(ix.state), ix.aliases)
        queries, keys = [], []
        seen = set()
        js_files = 0
        for rel in sorted(ix.state):
            facts = ix.state[rel].facts
            if not isinstance(facts, JsFacts):
                continue
            js_files += 1
            for imp in facts.imports:
                k = (rel, imp.spec, imp.kind in ("require", "import-equals"), imp.kind == "dynamic")
                if k in seen:
                    continue
                seen.add(k)
                keys.append((rel, imp.spec, imp.kind))
                queries.append((str(root / rel), imp.spec, imp.kind))
        log(f"{js_files} JS/TS files, {len(queries)} specifiers: asking TypeScript")
        t = time.perf_counter()
        js_rels = [rel for rel in sorted(ix.state) if isinstance(ix.state[rel].facts, JsFacts)]
        ts_out = ts_resolve(root, typescript, queries, [str(root / rel) for rel in js_rels])
        ts_s = time.perf_counter() - t
    finally:
        store.close()

    agree = 0
    disagreements = []
    by_kind: dict[str, list[int]] = {}
    for (rel, spec, kind), r in zip(keys, ts_out["results"]):
        mine = modules.resolve(spec, rel)
        theirs = _ts_answer(root, r)
        ok = _orbit_answer(mine) == theirs
        agree += ok
        by_kind.setdefault(kind, [0, 0])[0] += ok
        by_kind[kind][1] += 1
        if not ok:
            tsc = theirs if theirs is not None else (
                "unresolved" if not r.get("resolved") else f"not a workspace source file ({Path(r['resolved']).name})")
            disagreements.append([rel, spec, kind, _describe(mine), tsc])
    # the compiler's own list of each file's imports (ts.createSourceFile): specifiers orbit did not
    # extract, or that the compiler does not list, are disagreements too; the file-level check
    # compares the graph's IMPORTS edges with the files the compiler resolved its own list to
    ts_sets = {}
    ts_specs: dict[str, set[str]] = {}
    orbit_specs: dict[str, set[str]] = {}
    for rel, spec, _ in keys:
        orbit_specs.setdefault(rel, set()).add(spec)
    only_ts = only_orbit = 0
    for abs_file, imps in sorted(ts_out.get("files", {}).items()):
        rel = Path(abs_file).relative_to(root).as_posix()
        for imp in imps:
            ts_specs.setdefault(rel, set()).add(imp["spec"])
            target = _ts_answer(root, imp)
            if target is not None and target != rel:
                ts_sets.setdefault(rel, set()).add(target)
            if imp["spec"] not in orbit_specs.get(rel, ()):
                only_ts += 1
                disagreements.append([rel, imp["spec"], "?", "not extracted", target or "(listed, no workspace file)"])
    for rel, specs in sorted(orbit_specs.items()):
        for spec in sorted(specs - ts_specs.get(rel, set())):
            only_orbit += 1
            kind = next(k for r, sp, k in keys if r == rel and sp == spec)
            disagreements.append([rel, spec, kind, _describe(modules.resolve(spec, rel)), "not found by the compiler's parser"])
    files_with_imports = sorted(set(orbit_specs) | {r for r, v in ts_specs.items() if v})
    file_agree = [f for f in files_with_imports if graph_imports.get(f, set()) == ts_sets.get(f, set())]
    file_disagree = [[f, ", ".join(sorted(ts_sets.get(f, set()) - graph_imports.get(f, set()))) or "–",
                      ", ".join(sorted(graph_imports.get(f, set()) - ts_sets.get(f, set()))) or "–"]
                     for f in files_with_imports if f not in file_agree]
    total = len(keys)
    pct = 100.0 * agree / total if total else 100.0
    configs = ts_out.get("configs", {})
    summary = Table("Agreement with ts.resolveModuleName", ["metric", "value"], [
        ["JS/TS files indexed", js_files],
        ["files with imports", len(files_with_imports)],
        ["import specifiers extracted by orbit, each resolved by both", total],
        ["same resolution", agree],
        ["agreement (%)", round(pct, 2)],
        ["specifiers the compiler's parser finds that orbit did not extract", only_ts],
        ["specifiers orbit extracted that the compiler's parser does not find", only_orbit],
        ["files whose IMPORTS edges equal the files TypeScript resolves its own import list to",
         f"{len(file_agree)} / {len(files_with_imports)}"],
        ["disagreements (listed below)", len(disagreements)],
        ["TypeScript", ts_out.get("version")],
        ["moduleResolution of the configs used", ", ".join(sorted({f"{Path(c).relative_to(root).as_posix()}: {m}"
                                                                   for c, m in configs.items()})) or "defaults"],
        ["orbit index (s)", index_s],
        ["tsc resolution (s)", ts_s],
        ["files skipped by orbit", len(rep.skipped)],
        ["parse errors", len(rep.parse_errors)],
    ])
    kinds = Table("By import form", ["form", "agree", "compared"],
                  [[k, v[0], v[1]] for k, v in sorted(by_kind.items())])
    tables = [summary, kinds]
    if disagreements:
        tables.append(Table("Every disagreement", ["file", "specifier", "form", "orbit", "tsc"], disagreements))
    if file_disagree:
        tables.append(Table("Files whose IMPORTS edges differ", ["file", "only tsc", "only orbit"], file_disagree))
    notes = [f"skipped: {sorted({why.split(' (')[0] for _, why in rep.skipped})}" if rep.skipped else "no file skipped"]
    if rep.parse_errors:
        notes.append("parse errors: " + "; ".join(f"{p}: {e}" for p, e in sorted(rep.parse_errors.items())[:10]))
    return Report("ts-resolution", label, command, tables, notes,
                  {"agree": agree, "total": total, "agreement": pct, "disagreements": disagreements,
                   "files": len(files_with_imports), "files_agree": len(file_agree), "only_ts": only_ts,
                   "only_orbit": only_orbit, "graph": ix.graph.name})


def run(args, settings, command: str):
    """Entry point from ``bench.run.main``: fetch (or take ``--corpus``), then compare."""
    from bench.run import log

    gone = missing_tools()
    if gone:
        raise SystemExit(f"bench: ts-resolution needs {' and '.join(gone)} on PATH")
    cache = Path(args.cache_dir).expanduser()
    if args.corpus and args.corpus != "stdlib":  # "stdlib": the shared default, i.e. not given
        corpus = Path(args.corpus).expanduser().resolve()
        label = corpus.name
    else:
        log(f"npm pack {args.package} -> {cache / 'npm'}")
        corpus = fetch_package(args.package, cache)
        pj = json.loads((corpus / "package.json").read_text())
        label = f"{pj.get('name')}@{pj.get('version')} (npm pack)"
    typescript = ensure_typescript(args.typescript, cache)
    orbit_log = logging.getLogger("orbit_lsp")
    level = orbit_log.level
    if not args.verbose:  # parse errors are counted in the table
        orbit_log.setLevel(logging.ERROR)
    try:
        return run_ts_resolution(corpus, label, settings, command, typescript)
    finally:
        orbit_log.setLevel(level)


__all__ = ["add_parser", "run", "run_ts_resolution", "fetch_package", "ensure_typescript", "missing_tools"]
