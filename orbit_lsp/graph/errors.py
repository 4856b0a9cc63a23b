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


class QueryTimeout(GraphError):
    """The server stopped a query at its timeout. Never retried automatically."""


class QueryRejected(GraphError):
    """A query was refused before or by the server (write in a read-only context, ``LOAD CSV``,
    syntax error). ``query`` holds the text that was refused."""

    def __init__(self, message: str, query: str = ""):
        self.query = query
        super().__init__(message)
