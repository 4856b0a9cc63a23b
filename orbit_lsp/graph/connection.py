"""Connection to FalkorDB: the embedded server by default, or ``Settings.falkordb_url``.

``GraphStore`` owns one client; ``GraphStore.graph(name)`` hands out ``Graph`` objects that run
queries with an explicit timeout and turn transport failures into ``FalkorDBOffline`` and server
timeouts into ``QueryTimeout``. Nothing here retries a query.
"""

from __future__ import annotations

import gc
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import redis
from falkordb import FalkorDB
from falkordb.helpers import stringify_param_value
from falkordb.query_result import QueryResult as _FalkorResult
from redis.backoff import NoBackoff
from redis.retry import Retry

from orbit_lsp.config import Settings
from orbit_lsp.graph import embedded
from orbit_lsp.graph.errors import (RESTARTED_WHILE_WRITING, CommandUnavailable, FalkorDBOffline, QueryRejected,
                                     QueryTimeout)

CODE_GRAPH_PREFIX = "orbit_code_"  # also graph.keys.CODE_GRAPH_PREFIX
WRITE_TIMEOUT_MS = 120_000  # server-side timeout of bulk index writes (GraphWriter)
MEMORY_GRAPH = "orbit_memory"

_TRANSPORT_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                     ConnectionError, FileNotFoundError, OSError)


def marker_key(graph_name: str) -> str:
    """The redis key holding a graph's generation marker (see ``graph.writelock``)."""
    return f"orbit:generation:{graph_name}"


def code_graph_name(workspace: Path | str) -> str:
    """``orbit_code_<id>`` for a workspace; ``id`` is derived from its real (symlink-resolved)
    absolute path and, in a git work tree, the branch its HEAD names (``graph.keys``): two
    workspaces never share a graph, and one workspace on one branch always gets the same.
    (An explicit graph key, ``Settings.graph_key``, is applied by ``keys.graph_name``.)"""
    from orbit_lsp.graph.keys import graph_name

    return graph_name(workspace)


_JSON_KEY = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)":')


def params_header(params: dict) -> str | None:
    """The ``CYPHER name=value …`` prefix that carries a query's parameters, in the syntax
    falkordb-py writes (double-quoted strings, map keys in backticks) but serialised by the
    ``json`` module in C: falkordb-py's recursive serialiser took seconds on the writer's batches
    of a stdlib-size workspace.

    Returns None when the JSON spelling could mean something else to the server (a string that
    needs any escape: a quote, a backslash, a newline…; a key that is not an identifier; a value
    JSON cannot encode); the caller then lets falkordb-py serialise the parameters."""
    parts = ["CYPHER"]
    for key, value in params.items():
        if not isinstance(key, str) or not key.isidentifier():
            return None
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError):
            return None
        if "\\" in text:
            return None
        if '":' in text:
            # without escapes every '"' delimits a string, so '"name":' can only be a map key
            text = _JSON_KEY.sub(r"`\1`:", text)
            if '":' in text:
                return None
        parts.append(f"`{key}`={text}")
    return " ".join(parts) + " "


def _falkordb_params_header(params: dict) -> str:
    """falkordb-py's own spelling of the parameters (for what ``params_header`` declines)."""
    out = "CYPHER "
    for key, value in params.items():
        key = key.decode() if isinstance(key, bytes) else str(key)
        if not key or "`" in key:
            raise ValueError(f"Cypher parameter name {key!r} is empty or contains a backtick")
        out += f"`{key}`={stringify_param_value(value)} "
    return out


class _NotScalar(Exception):
    """A reply cell that only falkordb-py can decode (node, edge, path, map, temporal…)."""


def _cell(c):
    t, v = c
    if t == 2 or t == 3:  # string (decoded by the client), integer
        return v
    if t == 1:
        return None
    if t == 6:
        return [_cell(x) for x in v]
    if t == 4:
        return v == "true"
    if t == 5:
        return float(v)
    raise _NotScalar


def _rows(raw: list) -> list[list]:
    """Rows of a ``--compact`` reply whose cells are scalars or arrays of them, decoded as
    falkordb-py decodes them but in one tight loop (falkordb-py's per-cell dispatch was most of
    the time of a 10,000-row answer). Raises ``_NotScalar`` for anything else."""
    out = []
    append = out.append
    for row in raw:
        r = []
        for t, v in row:
            if t == 2 or t == 3:
                r.append(v)
            elif t == 1:
                r.append(None)
            else:
                r.append(_cell((t, v)))
        append(r)
    return out


def _redact_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(":" + parts.password + "@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


@dataclass
class QueryResult:
    """Rows of a query (list of lists, values as decoded by falkordb-py) with the Cypher text and
    parameters that produced them."""

    rows: list[list]
    cypher: str
    params: dict = field(default_factory=dict)
    header: list[str] = field(default_factory=list)


class GraphStore:
    """A FalkorDB client for the configured location.

    ``where`` is the socket path (embedded) or the URL with its password masked.
    Connecting is lazy; ``connect()`` raises ``FalkorDBOffline`` when nothing answers.
    """

    def __init__(self, settings: Settings | None = None):
        self.settings = settings or Settings.from_env()
        self.embedded = not self.settings.falkordb_url
        if self.embedded:
            self.where = str(embedded.EmbeddedPaths.for_data_dir(self.settings.data_dir).socket)
        else:
            self.where = _redact_url(self.settings.falkordb_url)
        self._db: FalkorDB | None = None
        self._lock = threading.Lock()
        self.server_id: str | None = None  # run_id of the server last connected to
        self.restarts = 0  # times a reconnect found another server process (a restart)
        # generation marker of each graph as this process last wrote or read it (indexers keep
        # it): after a restart, a graph whose marker differs came back from an older snapshot
        self.expected_markers: dict[str, str] = {}

    # -- connection -----------------------------------------------------------------------
    @property
    def socket_timeout(self) -> float:
        """Client-side wait for a reply, in seconds: longer than any server-side query timeout
        (reads use ``query_timeout_ms``, bulk writes up to ``WRITE_TIMEOUT_MS``), so a slow query
        is reported as a timeout by the server, and only a server that stopped answering
        altogether as "FalkorDB offline". (redis-py's own default would cut at 5 s.)"""
        return max(self.settings.query_timeout_ms, WRITE_TIMEOUT_MS) / 1000 + 10

    def connect(self) -> FalkorDB:
        """Return a live client, starting the embedded server when needed.

        Raises ``FalkorDBOffline``.
        """
        with self._lock:
            if self._db is not None:
                return self._db
            try:
                if self.embedded:
                    sock = embedded.ensure_running(self.settings.data_dir)
                    db = FalkorDB(unix_socket_path=str(sock), retry=Retry(NoBackoff(), 0),
                                  socket_connect_timeout=5, socket_timeout=self.socket_timeout)
                else:
                    db = FalkorDB.from_url(self.settings.falkordb_url, retry=Retry(NoBackoff(), 0),
                                           socket_connect_timeout=5, socket_timeout=self.socket_timeout)
                db.connection.ping()
                run_id = db.connection.info("server").get("run_id")
            except FalkorDBOffline:
                raise
            except _TRANSPORT_ERRORS + (redis.exceptions.RedisError,) as exc:
                raise FalkorDBOffline(self.where, str(exc) or type(exc).__name__) from exc
            restarted = self.server_id is not None and run_id != self.server_id
            self.server_id = run_id
            self._db = db
            if restarted:
                self.restarts += 1
                self._check_after_restart(db)
            return db

    def _check_after_restart(self, db: FalkorDB) -> None:
        """The server was restarted since this process last used it: if a graph it wrote came
        back older (a snapshot from before its last write), say so once as ``FalkorDBOffline``
        (front ends then re-index: the indexer rebuilds what it finds older). A clean restart
        (``db stop``: data saved) passes silently."""
        try:
            expected = dict(self.expected_markers)
            found = {g: db.connection.get(marker_key(g)) for g in expected}
        except _TRANSPORT_ERRORS + (redis.exceptions.RedisError,):
            return  # the next query reports it
        older = sorted(g for g, token in expected.items() if found[g] != token)
        for g in older:
            self.expected_markers.pop(g, None)
        if older:
            raise FalkorDBOffline(self.where, f"the server restarted from an older snapshot; graph(s) "
                                  f"{', '.join(older)} lost their latest changes and are re-indexed")

    def execute(self, *args):
        """Run one plain redis command (``GET``, ``SET``, ``RENAME``, ``EVAL``…) on the server and
        return its reply as redis-py decodes it. Raises ``FalkorDBOffline`` (transport) or
        ``QueryRejected`` (the server refused it)."""
        db = self.connect()
        try:
            return db.connection.execute_command(*args)
        except _TRANSPORT_ERRORS as exc:
            self.reset()
            raise FalkorDBOffline(self.where, str(exc) or type(exc).__name__) from exc
        except redis.exceptions.ResponseError as exc:
            raise QueryRejected(str(exc), " ".join(str(a) for a in args[:2])) from exc

    def reset(self) -> None:
        """Drop the client so the next call reconnects (used after a transport failure)."""
        with self._lock:
            db, self._db = self._db, None
        if db is not None:
            try:
                db.close()
            except Exception:  # noqa: BLE001 - closing a dead connection may fail in any way
                pass

    def atomically(self, *commands: tuple) -> list:
        """Run plain redis commands in one ``MULTI``/``EXEC`` transaction (all or none are
        applied, nothing runs between them). Returns their replies. Raises ``FalkorDBOffline``
        or ``QueryRejected`` (a command the server refused; the others still ran, as redis
        transactions do not roll back)."""
        db = self.connect()
        try:
            pipe = db.connection.pipeline(transaction=True)
            for cmd in commands:
                pipe.execute_command(*cmd)
            return pipe.execute()
        except _TRANSPORT_ERRORS as exc:
            self.reset()
            raise FalkorDBOffline(self.where, str(exc) or type(exc).__name__) from exc
        except redis.exceptions.ResponseError as exc:
            raise QueryRejected(str(exc), " ".join(str(c[0]) for c in commands)) from exc

    def healthy(self) -> bool:
        """True when the server answers PING now (does not start the embedded server)."""
        try:
            if self.embedded:
                return embedded.ping(Path(self.where))
            return bool(self.connect().connection.ping())
        except (FalkorDBOffline, *_TRANSPORT_ERRORS, redis.exceptions.RedisError):
            self.reset()
            return False

    def graph(self, name: str) -> "Graph":
        """A handle on graph ``name`` (created on first write)."""
        return Graph(self, name)

    def list_graphs(self) -> list[str]:
        """Names of all graphs on the server. Raises ``FalkorDBOffline``."""
        db = self.connect()
        try:
            return list(db.list_graphs())
        except _TRANSPORT_ERRORS as exc:
            self.reset()
            raise FalkorDBOffline(self.where, str(exc)) from exc

    def close(self) -> None:
        self.reset()


class Graph:
    """One named graph. ``query``/``ro_query`` return ``QueryResult`` and raise
    ``FalkorDBOffline``, ``QueryTimeout`` or ``QueryRejected`` (server-side errors)."""

    def __init__(self, store: GraphStore, name: str):
        self.store = store
        self.name = name
        self._fg: tuple | None = None  # (client, falkordb graph handle) last used

    def _handle(self, db: FalkorDB):
        fg = self._fg
        if fg is None or fg[0] is not db:
            fg = self._fg = (db, db.select_graph(self.name))
        return fg[1]

    @staticmethod
    def _text(cypher: str, params: dict | None) -> str:
        """The query text sent: the parameters header, then ``cypher``."""
        header = params_header(params) if params else None
        if header is None and params:
            header = _falkordb_params_header(params)
        return (header or "") + cypher

    def _run(self, cypher: str, params: dict | None, timeout_ms: int | None, read_only: bool,
             _again: bool = True) -> QueryResult:
        db = self.store.connect()
        timeout = int(timeout_ms or self.store.settings.query_timeout_ms)
        g = self._handle(db)
        text = self._text(cypher, params)
        # the reply is a large acyclic tree: cyclic GC passes over it while it is being built
        # would only add time (half of it for a 10,000-row answer)
        gc_was = gc.isenabled()
        gc.disable()
        try:
            reply = g.execute_command("GRAPH.RO_QUERY" if read_only else "GRAPH.QUERY", self.name, text,
                                      "--compact", "timeout", timeout)
            if isinstance(reply[0], redis.exceptions.ResponseError):
                raise reply[0]
            if isinstance(reply[-1], redis.exceptions.ResponseError):
                raise reply[-1]
            if len(reply) == 1:  # statistics only
                return QueryResult(rows=[], cypher=cypher, params=params or {}, header=[])
            try:
                rows = _rows(reply[1])
            except _NotScalar:
                rows = _FalkorResult(g, reply).result_set or []
        except _TRANSPORT_ERRORS as exc:
            self.store.reset()
            if _again and self.store.embedded and "connecting" in str(exc):
                # the embedded server went away and the query was never sent: start it again
                return self._run(cypher, params, timeout_ms, read_only, _again=False)
            raise FalkorDBOffline(self.store.where, str(exc) or type(exc).__name__) from exc
        except redis.exceptions.ResponseError as exc:
            msg = str(exc)
            if "timed out" in msg.lower():
                raise QueryTimeout(f"query stopped at its {timeout} ms timeout") from exc
            raise QueryRejected(msg, cypher) from exc
        finally:
            if gc_was:
                gc.enable()
        header = [h[1] if isinstance(h, (list, tuple)) else h for h in (reply[0] or [])]
        return QueryResult(rows=rows, cypher=cypher, params=params or {}, header=header)

    def query(self, cypher: str, params: dict | None = None, timeout_ms: int | None = None) -> QueryResult:
        """Run a (possibly writing) product query with ``GRAPH.QUERY``."""
        return self._run(cypher, params, timeout_ms, read_only=False)

    def query_all(self, queries: list[tuple[str, dict | None]], timeout_ms: int | None = None) -> None:
        """Run writing queries ``[(cypher, params)]`` in order in one ``MULTI``/``EXEC``: other
        clients see the graph before all of them or after all of them. Their results are not
        returned. Raises ``FalkorDBOffline``, or ``QueryRejected`` for the first refused query
        (the queries before it stay applied: redis transactions do not roll back)."""
        timeout = int(timeout_ms or self.store.settings.query_timeout_ms)
        if queries:
            self.store.atomically(*[("GRAPH.QUERY", self.name, self._text(c, p), "--compact", "timeout", timeout)
                                    for c, p in queries])

    def bulk_edges(self, section: bytes, edges: int, server: str | None = None) -> None:
        """Add ``edges`` edges from one ``GRAPH.BULK`` edge section (``graph.bulk.edge_section``)
        to this existing graph. The server trusts the node ids in it, so with ``server`` (the
        ``GraphStore.server_id`` that created those nodes) nothing is sent to a server that has
        restarted since: its graph may lack them. The server runs it without a timeout (keep
        sections to tens of thousands of edges). Raises ``FalkorDBOffline`` (also for such a
        restart) or ``QueryRejected`` (the server refused it: a graph that does not exist), of
        which ``CommandUnavailable`` for a server without the command or a user not allowed to
        run it."""
        db = self.store.connect()
        if server is not None and self.store.server_id != server:
            raise FalkorDBOffline(self.store.where, RESTARTED_WHILE_WRITING)
        try:
            db.connection.execute_command("GRAPH.BULK", self.name, 0, edges, 0, 1, section)
        except _TRANSPORT_ERRORS as exc:
            self.store.reset()
            raise FalkorDBOffline(self.store.where, str(exc) or type(exc).__name__) from exc
        except redis.exceptions.ResponseError as exc:
            unavailable = isinstance(exc, redis.exceptions.NoPermissionError) or "unknown command" in str(exc).lower()
            raise (CommandUnavailable if unavailable else QueryRejected)(str(exc), "GRAPH.BULK") from exc

    def ro_query(self, cypher: str, params: dict | None = None, timeout_ms: int | None = None) -> QueryResult:
        """Run a query with ``GRAPH.RO_QUERY`` (the server refuses writes)."""
        return self._run(cypher, params, timeout_ms, read_only=True)

    def exists(self) -> bool:
        """True when the graph key exists on the server."""
        return self.name in self.store.list_graphs()

    def delete(self) -> None:
        """Delete the whole graph (no error when it does not exist)."""
        db = self.store.connect()
        try:
            db.select_graph(self.name).delete()
        except redis.exceptions.ResponseError:
            pass
        except _TRANSPORT_ERRORS as exc:
            self.store.reset()
            raise FalkorDBOffline(self.store.where, str(exc)) from exc
