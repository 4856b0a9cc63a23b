"""Which workspace a command reads, and indexing it on demand (rules in the package docstring).

The registry of workspaces (``orbit_lsp.index.workspaces.WorkspaceRegistry``, in
``<data dir>/workspaces.json``) records when the command line indexed which root, and when a
command last used it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from orbit_lsp.cli.context import Ctx
from orbit_lsp.cli.errors import InProcessOnly, UsageError

log = logging.getLogger("orbit_lsp.cli")

# False in the query helper: a query whose workspace has no graph is not indexed there but
# raises ``InProcessOnly`` (the client then runs it in-process, indexing with progress).
INDEX_ON_DEMAND = True


def registry(ctx: Ctx):
    from orbit_lsp.index.workspaces import WorkspaceRegistry

    return WorkspaceRegistry(ctx.settings.data_dir)


def load_recent(ctx: Ctx) -> dict[str, float]:
    """Root -> when ``orbit-lsp`` last indexed it (any of its graphs: branches, keys)."""
    out: dict[str, float] = {}
    for rec in registry(ctx).load().values():
        if rec.indexed is not None and rec.indexed > out.get(rec.root, 0.0):
            out[rec.root] = rec.indexed
    return out


def record_indexed(ctx: Ctx, root: Path, graph: str | None = None) -> None:
    registry(ctx).record(root, indexed=True, graph=graph, key=ctx.settings.graph_key)


def graph_name(ctx: Ctx, root: Path | str) -> str:
    """The graph of ``root`` for this command: the ``--graph-key`` one, else the folder's on its
    checked-out git branch (``graph.keys``)."""
    from orbit_lsp.graph import keys

    return keys.graph_name(root, ctx.settings.graph_key)


def is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def resolve_workspace(ctx: Ctx, file_arg: str | None = None) -> Path:
    """The workspace root whose graph answers (see the package docstring)."""
    def code_graph_name(d) -> str:
        return graph_name(ctx, d)

    if getattr(ctx.args, "workspace", None):
        root = Path(ctx.args.workspace).expanduser()
        if not root.is_dir():
            raise UsageError(f"--workspace {ctx.args.workspace}: not a directory")
        return Path(os.path.realpath(root))

    graphs = set(ctx.store.list_graphs())
    cwd = Path(os.path.realpath(os.getcwd()))
    recent = load_recent(ctx)

    def indexed_ancestors(start: Path) -> list[Path]:
        return [d for d in (start, *start.parents) if code_graph_name(d) in graphs]

    def pick(cands: list[Path]) -> Path | None:
        # the most recently indexed by this CLI; among the others, the deepest
        return max(cands, key=lambda d: (recent.get(str(d), 0.0), len(d.parts)), default=None)

    chosen: Path | None = None
    others: list[Path] = []  # the other workspaces that could have answered
    if file_arg:
        p = Path(file_arg).expanduser()
        cand = p if p.is_absolute() else cwd / p
        if cand.exists():
            real = Path(os.path.realpath(cand))
            chosen = pick(indexed_ancestors(real if real.is_dir() else real.parent))
            if chosen is None:
                if not is_within(real, cwd):
                    raise UsageError(f"{file_arg} is outside the current directory and no indexed "
                                     f"workspace contains it: pass --workspace")
                chosen = cwd
    if chosen is None:
        below = [Path(r) for r in recent if is_within(Path(r), cwd) and code_graph_name(r) in graphs]
        cands = list(dict.fromkeys(indexed_ancestors(cwd) + below))
        chosen = pick(cands) or cwd
        others = [d for d in cands if d != chosen]
    if others:
        shown = ", ".join(str(d) for d in others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        ctx.note(f"workspace {chosen} (the most recently indexed here; also indexed: {shown}; "
                 f"--workspace PATH chooses)")
    elif chosen != cwd:
        ctx.note(f"workspace {chosen}")
    return chosen


def index_workspace(ctx: Ctx, root: Path, progress=None, rebuild: bool = False):
    """Index ``root`` (``rebuild``: from scratch, ignoring the cache); returns (indexer, report).
    Says on stderr when another process is writing the graph and this one waits for it."""
    from orbit_lsp.index.indexer import WorkspaceIndexer

    indexer = WorkspaceIndexer(root, ctx.store, ctx.settings)
    indexer.write_lock.on_wait = lambda: ctx.note(
        f"another orbit process is indexing {indexer.root}; waiting for it to finish")
    report = indexer.index_all(progress=progress, rebuild=rebuild)
    record_indexed(ctx, indexer.root, indexer.graph.name)
    return indexer, report


def interrupted_build(ctx: Ctx, graph_name: str) -> bool:
    """Whether the last full build of ``graph_name`` stopped before it was complete: its
    scratch graph is there and the graph itself is not (a build writes into the scratch graph
    and renames it over the graph only when complete)."""
    from orbit_lsp.index.indexer import build_graph_name

    graphs = set(ctx.store.list_graphs())
    return build_graph_name(graph_name) in graphs and graph_name not in graphs


def _which_graph(ctx: Ctx, root: Path) -> str:
    """``root`` as a note names its graph: with the git branch (``/repo (branch feature)``) or
    the graph key it is keyed by, since each has its own graph."""
    from orbit_lsp.graph import keys

    gk = keys.workspace_key(Path(os.path.realpath(root)), ctx.settings.graph_key)
    if gk.key is not None:
        return f"{root} (graph key {gk.key})"
    return f"{root} (branch {gk.branch})" if gk.branch is not None else str(root)


def workspace_graph(ctx: Ctx, file_arg: str | None = None):
    """(root, graph) for a query; indexes the workspace first when it has no graph yet, with
    progress on stderr, saying so before the work starts (and when the last index of it did not
    finish)."""
    from orbit_lsp.cli.progress import ProgressBar

    root = resolve_workspace(ctx, file_arg)
    graph = ctx.store.graph(graph_name(ctx, root))
    if not graph.exists():
        if not INDEX_ON_DEMAND:
            raise InProcessOnly(f"{root} has no graph yet")
        if interrupted_build(ctx, graph.name):
            def start(total: int) -> None:  # inside the write lock: the build is really gone
                if interrupted_build(ctx, graph.name):
                    ctx.note(f"the last index of {root} did not finish; indexing it now ({total} files)")
                else:
                    ctx.note(f"indexing {root} ({total} files)")
        else:
            def start(total: int) -> None:
                ctx.note(f"{_which_graph(ctx, root)} is not indexed yet; indexing it first ({total} files)")
        progress = ProgressBar(f"indexing {root.name or root}", on_start=start)
        try:
            _, rep = index_workspace(ctx, root, progress)
        finally:
            progress.finish()
        for note in rep.notes:  # e.g. a new branch's graph started from another branch's
            ctx.note(note)
        ctx.note(f"indexed {rep.files} files, {rep.symbols} symbols in {rep.seconds:.2f} s")
    else:
        registry(ctx).record(root, graph=graph.name, key=ctx.settings.graph_key)  # its last use
        if getattr(ctx.args, "exclude", None):
            ctx.note(f"--exclude applies when a workspace is indexed; {root} is indexed already "
                     f"(to change its graph: orbit-lsp index {root} --exclude ...)")
    return root, graph


def rel_file(file_arg: str, root: Path) -> str:
    """Workspace-relative path (``/`` separators) of FILE: relative to the workspace, relative
    to the current directory, or absolute."""
    p = Path(file_arg).expanduser()
    cands = [p] if p.is_absolute() else [root / p, Path.cwd() / p]
    for c in cands:
        if not os.path.lexists(c):
            continue
        for form in (os.path.abspath(c), os.path.realpath(c)):
            if is_within(Path(form), root) or is_within(Path(form), Path(os.path.realpath(root))):
                base = root if is_within(Path(form), root) else Path(os.path.realpath(root))
                rel = os.path.relpath(form, base).replace(os.sep, "/")
                if rel == ".":
                    raise UsageError(f"{file_arg} is the workspace itself, not a file")
                return rel
        raise UsageError(f"{file_arg} is outside the workspace {root}")
    if p.is_absolute():
        raise UsageError(f"no such file: {file_arg}")
    rel = p.as_posix()
    while rel.startswith("./"):
        rel = rel[2:]
    return rel  # not on disk: maybe a deleted file that the graph still holds
