"""A full build in a child process, for long-lived processes (the language server).

Building a workspace's graph from scratch decodes every file's facts and resolves every call:
on the standard library the process peaks at about 600 MB, and CPython's allocator keeps most
of it after the objects are freed. Done in a child process, that memory goes back to the system
when the child exits; the server then re-opens the folder from the cache the child wrote (the
incremental path: well under a second, and only the lean per-file state stays resident).

The child gets the folder and the settings, reports progress ``(done, total, rel, phase, work)``
through a pipe (passed on as ``indexer.report_progress`` does: every phase to a phase-aware
callback), and stops between files when cancelled (as ``index_all`` does in-process). When the child
cannot be started or fails, the build runs in this process instead, so errors (e.g.
``FalkorDBOffline``) surface exactly as they would have.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
from typing import TYPE_CHECKING

from orbit_lsp.config import Settings

if TYPE_CHECKING:
    from orbit_lsp.index.indexer import IndexReport, Progress, WorkspaceIndexer

log = logging.getLogger("orbit_lsp.index")


def _child(root: str, settings: Settings, conn, cancel, graph_name: str | None = None) -> None:
    """Child process entry point: index ``root`` and send ``("progress", done, total, rel, phase, work)``
    messages, then ``("done", report)`` or ``("error", text)``."""
    from orbit_lsp.graph.connection import GraphStore
    from orbit_lsp.index.indexer import WorkspaceIndexer

    class _Cancel:  # the indexer polls ``is_set`` between files
        def is_set(self) -> bool:
            return cancel.is_set()

    try:
        store = GraphStore(settings)
        ix = WorkspaceIndexer(root, store, settings, graph_name=graph_name)

        def forward(done: int, total: int, rel: str, phase: str = "read", work: float | None = None) -> None:
            conn.send(("progress", done, total, rel, phase, work))
        forward.phases = True  # every phase goes to the parent, which passes on what its callback takes

        rep = ix.index_all(progress=forward, cancel=_Cancel())
        conn.send(("done", rep))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which redoes the work
        try:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
        except OSError:
            pass
    finally:
        conn.close()


def index_all_isolated(ix: "WorkspaceIndexer", progress: "Progress | None" = None,
                       cancel: threading.Event | None = None) -> "IndexReport":
    """``ix.index_all`` with a full build done in a child process (see the module docstring);
    an incremental re-open runs in this process. Then the resolver that edits use is prepared
    (``WorkspaceIndexer.prepare_edits``, ``timings["prepare"]``): this process goes on to
    re-index edits. Returns the build's ``IndexReport``."""
    return _prepared(ix, _index_all_isolated(ix, progress, cancel))


def _prepared(ix: "WorkspaceIndexer", rep: "IndexReport") -> "IndexReport":
    if rep.mode in ("unchanged", "incremental", "full"):
        rep.timings["prepare"] = ix.prepare_edits()
    return rep


def _index_all_isolated(ix: "WorkspaceIndexer", progress: "Progress | None" = None,
                        cancel: threading.Event | None = None) -> "IndexReport":
    if not ix.needs_full_build():
        return ix.index_all(progress, cancel)
    ctx = multiprocessing.get_context("spawn")
    parent_conn, child_conn = ctx.Pipe(duplex=False)
    child_cancel = ctx.Event()
    try:
        proc = ctx.Process(target=_child, args=(str(ix.root), ix.settings, child_conn, child_cancel, ix.graph.name),
                           name=f"orbit-index-{ix.root.name}", daemon=False)
        proc.start()
    except (OSError, RuntimeError) as exc:
        log.warning("could not start an indexing process (%s); indexing in this one", exc)
        return ix.index_all(progress, cancel)
    child_conn.close()
    result = None
    try:
        while True:
            if cancel is not None and cancel.is_set():
                child_cancel.set()
            if parent_conn.poll(0.1):
                try:
                    msg = parent_conn.recv()
                except EOFError:
                    break
                if msg[0] == "progress":
                    from orbit_lsp.index.indexer import report_progress

                    report_progress(progress, *msg[1:])
                else:
                    result = msg
                    break
            elif not proc.is_alive():
                break
    finally:
        proc.join()
        parent_conn.close()
    if result is None or result[0] != "done":
        log.warning("indexing process failed (%s); indexing in this one",
                    result[1] if result else f"exit code {proc.exitcode}")
        return ix.index_all(progress, cancel)
    rep = result[1]
    if rep.mode == "cancelled":
        return rep
    reopened = ix.index_all(None, None)  # loads what the child wrote: the cache, not the build
    if reopened.mode not in ("unchanged", "incremental", "full"):
        return reopened
    rep.seconds += reopened.seconds
    rep.timings["reopen"] = reopened.seconds
    if reopened.mode != "unchanged":  # files changed while the child ran: that work counts too
        rep.written_files += reopened.written_files
    return rep
