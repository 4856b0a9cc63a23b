"""``orbit-lsp memory add|list|confirm|forget``: the user's memories."""

from __future__ import annotations

from orbit_lsp.cli.context import Ctx
from orbit_lsp.cli.errors import CliError, UsageError
from orbit_lsp.cli.output import emit_json
from orbit_lsp.cli.parser import Parents, positive_int
from orbit_lsp.cli.workspace import rel_file, resolve_workspace, workspace_graph


def add_parsers(subs, parents: Parents) -> None:
    common, out, ws = parents.common, parents.json, parents.workspace
    p = subs.add_parser("memory", parents=[common], help="your memories: add, list, confirm, forget",
                        description="Memories the agent recalls when a question shares their concepts "
                                    "(graph orbit_memory). Secrets are redacted before anything is saved.")
    msubs = p.add_subparsers(dest="memory_command", metavar="ACTION", required=True)
    m = msubs.add_parser("add", parents=[common, out, ws], help="save a memory (confirmed unless --unconfirmed)",
                         description="Save TEXT as a memory about the workspace (--workspace, else the one "
                                     "queries would read; --no-project: about no project). --file anchors it "
                                     "to a file of the workspace (--line: to the symbol on that line); it is "
                                     "marked possibly stale once that file changes in the graph.")
    m.add_argument("text", metavar="TEXT")
    m.add_argument("--file", metavar="FILE", help="anchor to this workspace file")
    m.add_argument("--line", type=positive_int, metavar="N", help="anchor to the symbol on line N of --file")
    m.add_argument("--unconfirmed", action="store_true", help="save unconfirmed (not recalled until confirmed)")
    m.add_argument("--no-project", action="store_true", help="about no workspace in particular")
    m = msubs.add_parser("list", parents=[common, out], help="every memory, with its uses and stale flag")
    m.add_argument("--unconfirmed", action="store_true", help="only unconfirmed memories")
    m = msubs.add_parser("confirm", parents=[common, out], help="confirm memory ID (it becomes recallable)")
    m.add_argument("id", type=positive_int, metavar="ID")
    m = msubs.add_parser("forget", parents=[common, out], help="delete memory ID (the audit log keeps a record)")
    m.add_argument("id", type=positive_int, metavar="ID")


def _memory_text(mem) -> str:
    state = "confirmed" if mem.confirmed else "unconfirmed"
    lines = [f"#{mem.id}  {state}  “{mem.text}”"]
    if mem.projects:
        lines.append("     about    " + ", ".join(p["root"] for p in mem.projects))
    if mem.anchor is not None:
        a = mem.anchor
        lines.append(f"     anchor   {a.root}/{a.path}" + (f" {a.symbol} (line {a.line})" if a.symbol else ""))
    if mem.stale:
        lines.append(f"     POSSIBLY STALE: {mem.stale_reason}")
    if mem.uses:
        turns = ", ".join(f"{u['turn']}" for u in mem.uses)
        lines.append(f"     used by  {len(mem.uses)} answer{'s' if len(mem.uses) != 1 else ''} (turns {turns})")
    if mem.redactions:
        lines.append(f"     {mem.redactions} secret{'s' if mem.redactions != 1 else ''} redacted before saving")
    return "\n".join(lines)


def cmd_memory(ctx: Ctx) -> int:
    from orbit_lsp.agent.history import History
    from orbit_lsp.memory.anchors import AnchorError, anchor_at
    from orbit_lsp.memory.store import InvalidMemory, MemoryStore, UnknownMemory

    a = ctx.args
    action = a.memory_command
    history = History.open(ctx.settings.data_dir)
    mem = MemoryStore(ctx.store, ctx.settings.memory_graph, history=history)
    try:
        if action == "add":
            if a.line is not None and not a.file:
                raise UsageError("--line needs --file")
            anchor, project = None, None
            if a.file:
                if a.no_project:
                    raise UsageError("--file anchors to a workspace: it cannot go with --no-project")
                project, _ = workspace_graph(ctx, a.file)
                anchor = anchor_at(ctx.store, project, rel_file(a.file, project), a.line)
            elif not a.no_project:
                project = resolve_workspace(ctx)
            result = mem.remember(a.text, confirmed=not a.unconfirmed, source="user", project=project,
                                  anchor=anchor)
            head = f"saved memory #{result.id}"
        elif action == "list":
            items = mem.list(confirmed=False if a.unconfirmed else None)
            if ctx.json:
                emit_json("memory list", [m.to_dict() for m in items], [], graph=mem.graph_name)
            elif not items:
                print("no memories" + (" awaiting confirmation" if a.unconfirmed else "") + ".")
            else:
                print("\n".join(_memory_text(m) for m in items))
            return 0
        elif action == "confirm":
            result = mem.confirm(a.id)
            head = f"confirmed memory #{result.id}"
        else:
            result = mem.forget(a.id)
            head = f"forgot memory #{result.id} (the audit log keeps a record)"
    except InvalidMemory as exc:
        raise UsageError(f"TEXT: {exc}") from None
    except UnknownMemory as exc:
        raise UsageError(f"ID: {exc}") from None
    except AnchorError as exc:
        raise CliError(str(exc)) from None
    finally:
        history.close()
    if ctx.json:
        emit_json(f"memory {action}", result.to_dict(), [], graph=mem.graph_name)
    else:
        print(head)
        print(_memory_text(result))
    return 0


COMMANDS = {"memory": cmd_memory}
