"""``orbit-lsp ask QUESTION``: the agent (or the built-in planner) answers from the graph."""

from __future__ import annotations

import sys

from orbit_lsp.cli.context import Ctx
from orbit_lsp.cli.errors import PROG, CliError, UsageError
from orbit_lsp.cli.output import emit_json
from orbit_lsp.cli.parser import Parents, positive_int
from orbit_lsp.cli.workspace import workspace_graph


def add_parsers(subs, parents: Parents) -> None:
    common, out, ws = parents.common, parents.json, parents.workspace
    p = subs.add_parser("ask", parents=[common, out, ws], help="answer a question about the workspace",
                        description="Answer a free question with graph tools, step by step, with the "
                                    "configured model (OPENAI_BASE_URL, OPENAI_API_KEY, ORBIT_MODEL, "
                                    "ORBIT_FALLBACK_MODELS), or with the built-in planner when no model "
                                    "is configured. Prints the answer and every step with its Cypher.")
    p.add_argument("question", metavar="QUESTION")
    p.add_argument("--read", choices=("ask", "allow", "deny"), default="ask",
                   help="file reads by the agent: ask on the terminal (default; denied when stdin "
                        "is not a terminal), allow, or deny")
    p.add_argument("--conversation", type=positive_int, default=None, metavar="ID",
                   help="continue conversation ID (printed with --json)")


def _terminal_consent(mode: str):
    """Consent callback for ``ask``: fixed answers for ``allow``/``deny``, else a prompt on the
    terminal (stderr), "deny" when stdin is not a terminal."""
    def consent(path: str) -> str:
        if mode == "allow":
            return "once"
        if mode == "deny" or not sys.stdin.isatty():
            print(f"{PROG}: the agent wanted to read {path}; denied (use --read allow)", file=sys.stderr)
            return "deny"
        print(f"{PROG}: the agent wants to read {path} (secrets are redacted). "
              f"[o]nce / [a]lways for this workspace / [d]eny? ", end="", file=sys.stderr, flush=True)
        reply = sys.stdin.readline().strip().lower()
        return {"o": "once", "once": "once", "a": "always", "always": "always"}.get(reply, "deny")
    return consent


def cmd_ask(ctx: Ctx) -> int:
    from orbit_lsp.agent.planner import NOT_UNDERSTOOD
    from orbit_lsp.agent.service import Asker, InvalidQuestion, UnknownConversation

    question = ctx.args.question.strip()
    if not question:
        raise UsageError("QUESTION must not be empty")
    root, graph = workspace_graph(ctx)
    asker = Asker(ctx.settings)
    try:
        progress = (lambda m: ctx.note(m)) if ctx.args.verbose else None
        res = asker.ask(question, graph, root, conversation_id=ctx.args.conversation,
                        consent=_terminal_consent(ctx.args.read), progress=progress)
    except UnknownConversation as exc:
        raise UsageError(f"--conversation: {exc}") from None
    except InvalidQuestion as exc:
        raise UsageError(f"QUESTION: {exc}") from None
    finally:
        asker.close()
    failure = None
    if res.error:
        failure = CliError(res.error)
    elif res.planner and (res.answer or "").startswith(NOT_UNDERSTOOD):
        failure = CliError("the built-in planner did not understand the question (no model is configured; "
                           "see the answer for what it understands)", kind="not_understood")
    if ctx.json:
        cypher = [c for s in res.steps for c in s.cypher]
        extra = {} if failure is None else {"error": str(failure), "kind": failure.kind, "exit_status": 1}
        emit_json("ask", res.to_dict(), cypher, workspace=str(root), graph=graph.name, **extra)
        return 0 if failure is None else 1  # one JSON object: the answer and the error
    print(res.markdown, end="")
    if failure is not None:
        raise failure
    return 0


COMMANDS = {"ask": cmd_ask}
