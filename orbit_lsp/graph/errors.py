"""Errors raised by the graph layer."""


class GraphError(Exception):
    """Base class of graph-layer errors."""


class FalkorDBOffline(GraphError):
    """FalkorDB cannot be reached. The message always starts with "FalkorDB offline" and says
    where orbit tried (socket path or URL without password)."""

    def __init__(self, where: str, reason: str):
        self.where = where
        self.reason = reason
        super().__init__(f"FalkorDB offline: cannot reach {where} ({reason})")

    def __reduce__(self):  # pickled from the selection process (``server.worker``)
        return type(self), (self.where, self.reason)


class QueryTimeout(GraphError):
    """The server stopped a query at its timeout. Never retried automatically."""


class QueryRejected(GraphError):
    """A query was refused before or by the server (write in a read-only context, ``LOAD CSV``,
    syntax error). ``query`` holds the text that was refused."""

    def __init__(self, message: str, query: str = ""):
        self.query = query
        super().__init__(message)

    def __reduce__(self):
        return type(self), (str(self), self.query)


# what a write says when the FalkorDB server restarted during it (the graph may lack its first
# writes: ``GraphStore.server_id`` changed), raised as ``FalkorDBOffline``
RESTARTED_WHILE_WRITING = ("the server restarted while orbit was writing the graph; the next index brings it up "
                           "to date")


class CommandUnavailable(QueryRejected):
    """The server does not have a command (another server, an older FalkorDB) or does not let
    this user run it (an ACL): what can be done without it should be."""


class QueryInvalid(QueryRejected):
    """FalkorDB could not compile a query: a Cypher syntax error (``syntax`` True) or a semantic
    one such as an undefined variable. Not a refusal: the message says what FalkorDB reported."""

    def __init__(self, message: str, query: str = "", syntax: bool = False):
        self.syntax = syntax
        super().__init__(message, query)

    def __reduce__(self):
        return type(self), (str(self), self.query, self.syntax)

    @classmethod
    def from_server(cls, reason: str, query: str = "") -> "QueryInvalid":
        """From FalkorDB's error text (its parser words syntax errors "errMsg: Invalid input ...
        line: N, column: M ...")."""
        import re

        text = " ".join(reason.split())
        syntax = text.startswith("errMsg:") or "invalid input" in text.lower() or "syntax error" in text.lower()
        m = re.fullmatch(r"errMsg: (.*?),? line: (\d+), column: (\d+)(?:, offset: \d+)?"
                         r"(?: errCtx: (.*?))?(?: errCtxOffset: \d+)?", text)
        if m:
            where = f"line {m.group(2)}, column {m.group(3)}"
            text = f"{m.group(1)} ({where} of: {m.group(4)})" if m.group(4) else f"{m.group(1)} ({where})"
        elif text.startswith("errMsg:"):
            text = text[len("errMsg:"):].strip()
        if syntax:
            return cls(f"Cypher syntax error reported by FalkorDB: {text}", query, syntax=True)
        return cls(f"FalkorDB cannot run this query: {text}", query)
