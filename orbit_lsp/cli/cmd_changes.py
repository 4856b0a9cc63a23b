"""``changes``: the impact of a change (working tree, staged, against a base ref, or a diff):
changed symbols, their callers, dependent files, what may be affected through unbound calls, and
the tests to run (issue 16), narrowed by a coverage map with ``--coverage PATH``
(``orbit_lsp.changes.coverage_map``; the JSON result's ``tests.coverage`` then says what was
narrowed: {"path", "mtime", "mtime_iso", "static", "narrowed", "static_may", "narrowed_may",
"symbols": [{"qual", "file", "status", "kind", "mode": narrowed|static, "reason", "entering"}],
"kept": {"not_in_map", "stale", "fixture_scope"}, "seconds"}; each selected test has
"coverage": enters|static|not in map|stale|fixture scope). A missing, unreadable or
context-less map is a usage error (2). The work is ``orbit_lsp.changes``; this module only
translates.

Exit status: 0, 1 (error), 2 (usage), 3 when a ``--fail-on`` threshold is exceeded (the report
is printed first)."""

from __future__ import annotations

import sys

from orbit_lsp.cli.context import Ctx
from orbit_lsp.cli.errors import PROG, CliError, UsageError
from orbit_lsp.cli.output import emit_json
from orbit_lsp.cli.parser import Parents, positive_int
from orbit_lsp.cli.workspace import index_workspace, resolve_workspace

FAIL_KEYS = {  # --fail-on KEY: what is counted (result["totals"] key)
    "files": "files", "symbols": "symbols", "callers": "callers", "public": "public",
    "dependents": "dependents", "may": "may_be_affected", "tests": "tests", "tests-may": "tests_may_be_affected",
}
EXIT_THRESHOLD = 3


def _fail_on(text: str) -> tuple[str, int]:
    import argparse

    key, sep, value = text.partition("=")
    if not sep or key not in FAIL_KEYS:
        raise argparse.ArgumentTypeError(f"expected KEY=N with KEY one of {', '.join(FAIL_KEYS)}, got {text!r}")
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number after '{key}=', got {value!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{key}={n}: the threshold must be 0 or more")
    return key, n


def add_parsers(subs, parents: Parents) -> None:
    p = subs.add_parser(
        "changes", parents=[parents.common, parents.json, parents.workspace],
        help="impact of a change: changed symbols, blast radius, tests to run",
        description="The impact of the uncommitted changes (default: working tree and index vs HEAD, "
                    "untracked files included), of the staged ones (--staged), of everything since the "
                    "merge base with REF (--base REF: what a pull request changes), or of a unified diff "
                    "(--diff FILE, - for stdin). The workspace is indexed first (only changed files are "
                    "parsed).")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--base", metavar="REF", help="compare the working tree with the merge base of REF and HEAD")
    which.add_argument("--staged", action="store_true", help="only the staged changes (index vs HEAD)")
    which.add_argument("--diff", metavar="FILE", help="a unified diff to analyse (- reads stdin); its new "
                                                      "version is the working tree")
    p.add_argument("--depth", type=positive_int, default=4, metavar="N",
                   help="hops of the blast radius: callers and dependent files (default 4)")
    p.add_argument("--tests", action="store_true", help="select the tests that reach the change")
    p.add_argument("--test-depth", type=positive_int, default=12, metavar="N",
                   help="hops a selected test may be from a changed symbol (default 12)")
    p.add_argument("--coverage", metavar="PATH",
                   help="a coverage.py data file of the base version recorded with a context per test "
                        "(pytest --cov=PKG --cov-context=test): narrows the tests to those that ran the "
                        "changed functions, static elsewhere (implies --tests)")
    p.add_argument("--format", choices=("text", "json", "markdown"), default=None,
                   help="output form (default text; --json is --format json); markdown is made for a "
                        "pull-request comment")
    p.add_argument("--fail-on", type=_fail_on, action="append", default=[], metavar="KEY=N",
                   help="exit with status 3 when a count exceeds N; KEY: " + ", ".join(FAIL_KEYS)
                        + " (repeatable), e.g. --fail-on public=20; tests and tests-may imply --tests")


def cmd_changes(ctx: Ctx) -> int:
    from orbit_lsp.changes import diff, impact, render

    args = ctx.args
    fmt = args.format or ("json" if ctx.json else "text")
    if ctx.json and args.format not in (None, "json"):
        raise UsageError("--json and --format " + args.format + " exclude each other")
    if args.base is not None and (not args.base.strip() or args.base.startswith("-")):
        raise UsageError(f"--base {args.base!r}: not a git ref")
    root = resolve_workspace(ctx)
    cmap = None
    if args.coverage is not None:
        from orbit_lsp.changes.coverage_map import CoverageMap, CoverageMapError

        try:
            cmap = CoverageMap(args.coverage, root)
        except CoverageMapError as exc:
            raise UsageError(f"--coverage: {exc}") from None
    try:
        if args.diff is not None:
            if args.diff == "-":
                text = sys.stdin.read()
            else:
                try:
                    with open(args.diff, encoding="utf-8", errors="replace") as fh:
                        text = fh.read()
                except OSError as exc:
                    raise UsageError(f"--diff {args.diff}: {exc.strerror}") from None
            change = diff.from_text(root, text)
        else:
            change = diff.from_git(root, "staged" if args.staged else "base" if args.base else "worktree", args.base)
    except diff.NotAGitWorkTree as exc:
        raise CliError(f"{exc}; give the change as a unified diff: {PROG} changes --diff FILE "
                       f"(- for stdin)") from None
    except diff.ChangeError as exc:
        raise CliError(str(exc)) from None
    ix, _rep = index_workspace(ctx, root)
    # a threshold on tests needs the tests: --fail-on tests=N implies --tests (else it never fires)
    tests = args.tests or cmap is not None or any(k in ("tests", "tests-may") for k, _ in args.fail_on)
    opts = impact.Options(depth=args.depth, test_depth=args.test_depth, tests=tests, coverage=cmap)
    result = impact.analyse(ix.graph, change, ix.root_package, opts)
    if fmt == "json":
        cypher = result.pop("cypher")
        emit_json("changes", result, cypher, workspace=str(ix.root), graph=ix.graph.name)
    elif fmt == "markdown":
        sys.stdout.write(render.markdown(result))
    else:
        sys.stdout.write(render.text(result))
    exceeded = [(k, n, result["totals"][FAIL_KEYS[k]]) for k, n in args.fail_on if result["totals"][FAIL_KEYS[k]] > n]
    for k, n, got in exceeded:
        ctx.note(f"--fail-on {k}={n}: {got} exceeds it")
    return EXIT_THRESHOLD if exceeded else 0


COMMANDS = {"changes": cmd_changes}
