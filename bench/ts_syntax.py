"""False syntax errors on real TypeScript: which grammar build parses modern TypeScript.

    python -m bench.run ts-syntax [--package zod@3.25.76 --package effect@3.22.4]
    python -m bench.run ts-syntax --corpus DIR      (an existing directory instead)

Fetches each package with ``npm pack`` at benchmark time (``<cache dir>/npm/``, reused), and
counts, per grammar candidate, the files whose tree has an ERROR or MISSING node, over the
package's ``src/`` (its TypeScript sources: the acceptance set) and over every JS/TS file the
package ships (with its build output and ``.d.ts``/``.d.cts`` declarations). The sources are
valid: the packages were compiled from them by ``tsc``, so every file in error is a false error.

Candidates, each used when importable:

- ``pypi``: ``tree-sitter-typescript`` / ``tree-sitter-javascript`` from PyPI, parsed as they are
  (the grammar orbit ships with);
- ``orbit``: the same grammars through ``orbit_lsp.index.js_parse`` (the gaps mended, a
  JavaScript file still in error parsed with the TSX grammar): what orbit indexes;
- ``language-pack``: ``tree-sitter-language-pack`` (a maintained build of many grammars) when it
  is installed and its grammars load without a download (its 1.x releases fetch parsers from
  the network on first use and are reported as unavailable here).

Each file in error is listed with its first error (``file:line: source line``). Parse time per
candidate (``src/``, files/s, the best of three passes) shows what mending costs.
"""

from __future__ import annotations

import time
from pathlib import Path

DEFAULT_PACKAGES = ("zod@3.25.76", "effect@3.22.4")
REPEAT = 3
SOURCE_EXTS = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")


def add_parser(sub, common) -> None:
    """Register the ``ts-syntax`` subcommand on ``bench.run``'s parser."""
    p = sub.add_parser("ts-syntax", parents=[common],
                       help="files with false syntax errors per TypeScript grammar build, on npm packages")
    p.add_argument("--package", action="append", default=None,
                   help=f"npm package spec fetched with `npm pack` (repeatable; default {' '.join(DEFAULT_PACKAGES)})")


def _grammar(rel: str) -> str:
    from orbit_lsp.index.js_syntax import grammar_for

    return grammar_for(rel)


def candidates() -> tuple[dict, list[str]]:
    """``{name: parse(rel, bytes) -> tree}`` of the candidates that load, and notes on those
    that do not."""
    import tree_sitter

    from orbit_lsp.index import js_parse
    from orbit_lsp.index.js_syntax import language

    out, notes = {}, []
    parsers: dict = {}

    def pypi(rel: str, data: bytes):
        g = _grammar(rel)
        if g not in parsers:
            parsers[g] = tree_sitter.Parser(language(g))
        return parsers[g].parse(data)

    out["pypi"] = pypi
    out["orbit"] = lambda rel, data: js_parse.parse(rel, data).tree
    try:
        import tree_sitter_language_pack as pack

        langs = {g: pack.get_language(g) for g in ("typescript", "tsx", "javascript")}
        pparsers = {g: tree_sitter.Parser(lang) for g, lang in langs.items()}
        out["language-pack"] = lambda rel, data: pparsers[_grammar(rel)].parse(data)
    except ImportError:
        notes.append("language-pack: tree-sitter-language-pack is not installed (pip install it to compare)")
    except Exception as exc:  # noqa: BLE001 - its 1.x releases download grammars: report why not
        notes.append(f"language-pack: unavailable here ({type(exc).__name__}: {str(exc)[:160]})")
    return out, notes


def first_error(tree, data: bytes) -> str:
    from orbit_lsp.index.js_syntax import first_error as fe

    row, _ = fe(tree.root_node)
    lines = data.splitlines()
    text = lines[row].decode("utf-8", "replace").strip()[:100] if row < len(lines) else ""
    return f"{row + 1}: {text}"


def measure(root: Path, parse) -> dict:
    """Files in error under ``root`` (``src/`` and all) with ``parse``, and the parse rate of ``src/``."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name.lower().endswith(SOURCE_EXTS)
                   and "node_modules" not in p.parts)
    out = {"src": 0, "src_bad": [], "all": 0, "all_bad": [], "src_seconds": 0.0}
    src_items = []
    for p in files:
        rel = p.relative_to(root).as_posix()
        data = p.read_bytes()
        in_src = rel.startswith("src/") and rel.lower().endswith((".ts", ".tsx", ".mts", ".cts"))
        tree = parse(rel, data)
        if in_src:
            src_items.append((rel, data))
            out["src"] += 1
        out["all"] += 1
        if tree.root_node.has_error:
            where = f"{rel}:{first_error(tree, data)}"
            out["all_bad"].append(where)
            if in_src:
                out["src_bad"].append(where)
    best = None
    for _ in range(REPEAT):  # the best of a few passes: the machine is shared
        t = time.perf_counter()
        for rel, data in src_items:
            parse(rel, data)
        took = time.perf_counter() - t
        best = took if best is None else min(best, took)
    out["src_seconds"] = best or 0.0
    return out


def run(args, settings, command: str):
    """Fetch the packages, measure every candidate on each; returns a ``bench.run.Report``."""
    from bench.run import Report, Table
    from bench.ts_resolution import fetch_package, missing_tools

    if args.corpus and args.corpus != "stdlib":  # "stdlib": the shared default, i.e. not given
        roots = [(Path(args.corpus).expanduser().resolve(), str(args.corpus))]
    else:
        if missing_tools():
            raise SystemExit("bench: ts-syntax needs " + " and ".join(missing_tools()) + " on PATH")
        cache = Path(args.cache_dir).expanduser()
        roots = [(fetch_package(spec, cache), spec) for spec in (args.package or DEFAULT_PACKAGES)]
    cands, notes = candidates()
    rep = Report("ts-syntax", ", ".join(label for _, label in roots), command, notes=list(notes))
    rows, data = [], {}
    for root, label in roots:
        for name, parse in cands.items():
            m = measure(root, parse)
            data[(label, name)] = m
            rate = m["src"] / m["src_seconds"] if m["src_seconds"] else None
            rows.append([label, name, f"{len(m['src_bad'])} / {m['src']}", f"{len(m['all_bad'])} / {m['all']}", rate])
            for where in m["src_bad"][:10]:
                rep.notes.append(f"{label} {name}: src error {where}")
            if len(m["src_bad"]) > 10:
                rep.notes.append(f"{label} {name}: … and {len(m['src_bad']) - 10} more src files in error")
            if name == "orbit":
                for where in m["all_bad"]:
                    rep.notes.append(f"{label} orbit: error {where}")
    rep.tables.append(Table("Files with syntax errors per grammar candidate (all files are valid TypeScript/"
                            "JavaScript, compiled by tsc: every error is a false one)",
                            ["package", "candidate", "src/ files in error", "all JS/TS files in error",
                             "src/ parse rate (files/s)"], rows))
    rep.data = {f"{k[0]} {k[1]}": {"src": v["src"], "src_errors": len(v["src_bad"]), "all": v["all"],
                                   "all_errors": len(v["all_bad"])} for k, v in data.items()}
    return rep
