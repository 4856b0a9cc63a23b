"""Value flow in the Python call graph, before and after: how many call sites are bound, how
many stay unbound, and what the resolution costs, for the same corpora in one run (three rows
per corpus: the code at ``--base``, the working tree as configured by default, and the working
tree with parameter values from call sites, ``valueFlow``).

``python -m bench.value_flow [--base REF] [--corpus SPEC ...]`` resolves every corpus twice, in
fresh processes: with the code at ``REF`` (a git ref of this repository, checked out under the
cache dir; default: the commit before value flow) and with the working tree. Each process
parses every Python file (``orbit_lsp.index.python.extract``, timed as ``parse``), then binds
them in memory (``Resolver``: the first resolution and the value-flow rounds after it), without
FalkorDB, so the figures are the analysis alone. Corpora: ``stdlib``, a folder, or
``pypi:NAME==VERSION`` (the sdist, fetched once with ``pip download --no-binary :all:``).

Columns: files, bound call sites (distinct (file, line, target) of every CALLS edge), unbound
call sites (counted on their callers), the unbound share of all call sites, parse seconds,
resolve seconds (first resolution; ``flow`` the later rounds) and rounds. The machine is shared:
compare the two rows of one corpus, not rows across runs. Appends its table to
``bench/RESULTS.md`` (``--no-record`` to skip).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
DEFAULT_BASE = "9bcc54a"  # the last commit before the value-flow layer

_WORKER = r'''
import json, os, sys, time
from pathlib import Path
from orbit_lsp.config import Settings
from orbit_lsp.index.python import extract
from orbit_lsp.index.resolve import Resolver
from orbit_lsp.index.walk import walk_workspace
root = sys.argv[1]
flow = sys.argv[2] == "1" if len(sys.argv) > 2 else None  # parameter values from call sites
files = {}
walk = walk_workspace(Path(root), Settings().max_file_bytes, [], classify=False)  # the files orbit indexes
t = time.perf_counter()
for sf in walk.files:
    if sf.rel.endswith(".py"):
        try:
            files[sf.rel] = extract(sf.rel, (Path(root) / sf.rel).read_bytes())
        except (SyntaxError, ValueError, RecursionError, OSError):
            pass
parse_s = time.perf_counter() - t
try:
    res = Resolver(files, set(files), value_flow=flow) if flow is not None else Resolver(files, set(files))
except TypeError:  # code from before the setting
    res = Resolver(files, set(files))
t = time.perf_counter()
if hasattr(res, "resolve_fixpoint"):
    out = res.resolve_fixpoint(sorted(files), lambda r: None, sorted(files))
    stats = res.flow_stats
else:
    out = {r: res.resolve_file(r) for r in sorted(files)}
    stats = {"rounds": 1, "first_s": time.perf_counter() - t, "more_s": 0.0}
bound = sum(len(c.lines) for e in out.values() for c in e.calls.values())
unbound = sum(len(v) for e in out.values() for v in e.unresolved.values())
print(json.dumps({"files": len(files), "bound": bound, "unbound": unbound, "parse_s": parse_s,
                  "resolve_s": stats["first_s"], "flow_s": stats["more_s"], "rounds": stats["rounds"]}))
'''


def corpus_dir(spec: str, cache: Path) -> tuple[Path, str]:
    """The corpus to resolve: the stdlib copy the other benchmarks index, a folder, or an sdist
    (``bench.corpora.resolve_spec``: fetched and unpacked once)."""
    sys.path.insert(0, str(HERE))
    from bench.corpora import resolve_spec
    from bench.run import prepare_corpus

    if spec == "stdlib":
        return prepare_corpus("stdlib", cache.parent)
    root = Path(resolve_spec(spec, cache.parent)).expanduser().resolve()
    return root, spec.removeprefix("pypi:")


def base_tree(ref: str, cache: Path) -> Path:
    """The repository's code at ``ref`` (only ``orbit_lsp/``), exported once under ``cache``."""
    sha = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", ref], check=True,
                         capture_output=True, text=True).stdout.strip()
    dest = cache / f"code-{sha}"
    if not (dest / "orbit_lsp").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(HERE), "archive", sha, "orbit_lsp"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def measure(code: Path, root: Path, flow: bool | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code))
    args = [str(root)] + ([] if flow is None else ["1" if flow else "0"])
    out = subprocess.run([sys.executable, "-c", _WORKER, *args], env=env, check=True, capture_output=True,
                         text=True, cwd=str(code))
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.value_flow", description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default=DEFAULT_BASE, help="git ref of the code to compare with")
    ap.add_argument("--corpus", action="append", help="stdlib, a folder or pypi:NAME==VERSION (repeatable)")
    ap.add_argument("--cache-dir", default="~/.cache/orbit-bench/value-flow")
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--skip-flow", action="store_true", help="leave out the valueFlow-on row (the slowest)")
    args = ap.parse_args(argv)
    cache = Path(args.cache_dir).expanduser()
    cache.mkdir(parents=True, exist_ok=True)
    corpora = args.corpus or ["stdlib", "pypi:flask==3.0.3", "pypi:requests==2.32.3", "pypi:rich==13.9.4",
                              "pypi:django==5.1"]
    before = base_tree(args.base, cache)
    rows = []
    for spec in corpora:
        root, label = corpus_dir(spec, cache)
        for which, code, flow in ((f"before ({args.base})", before, None),
                                  ("after, default (parameters off)", HERE, False),
                                  ("after, valueFlow on", HERE, True))[:2 if args.skip_flow else 3]:
            m = measure(code, root, flow)
            share = m["unbound"] / max(1, m["unbound"] + m["bound"])
            rows.append([label, which, m["files"], m["bound"], m["unbound"], f"{share:.1%}", f"{m['parse_s']:.2f}",
                         f"{m['resolve_s']:.2f}", f"{m['flow_s']:.2f}", m["rounds"]])
            print(" | ".join(str(x) for x in rows[-1]), file=sys.stderr)
    head = ["corpus", "code", "files", "bound sites", "unbound sites", "unbound share", "parse s", "resolve s",
            "flow s", "rounds"]
    table = "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                      + ["| " + " | ".join(str(x) for x in r) + " |" for r in rows])
    import datetime as dt
    import platform

    load = os.getloadavg()
    text = (f"## {dt.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')} · value flow · before/after\n\n"
            f"- machine: {os.cpu_count()} cores, Python {platform.python_version()}, load average at end "
            f"{load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f} (shared machine: compare rows of one corpus)\n"
            f"- command: `python -m bench.value_flow {' '.join(argv if argv is not None else sys.argv[1:])}`\n\n"
            + table + "\n\nparse = `extract` of every file; resolve = the first resolution; flow = the value-flow "
            "rounds after it (in memory, no FalkorDB).\n")
    print(text)
    if not args.no_record:
        with open(HERE / "bench" / "RESULTS.md", "a", encoding="utf-8") as fh:
            fh.write("\n" + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
