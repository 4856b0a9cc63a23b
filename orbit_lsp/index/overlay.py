"""Team server mode: shared graphs publish their per-file state, and workspaces start from them.

A graph named by an explicit key (``graph.keys.shared_graph_name``: ``orbit-lsp index
--graph-key main`` in CI) is *shared*. After every index of it, ``after_index`` publishes what
the indexer knows of each file (its ``FileState``: content hash, facts, resolved edges, the same
rows as the local cache ``<data dir>/cache/<graph>.sqlite``) next to the graph, in the redis hash
``orbit:state:<graph>`` of the same FalkorDB: field ``\\0meta`` (JSON: cache version, the graph's
generation marker the state matches, root package, indexing host and folder, time, file count)
and one field per file (its pickled state, zlib-compressed, in base64: the client decodes replies
as text). It is replaced in one ``RENAME``.

``seed(ix)``, called by ``WorkspaceIndexer.index_all`` inside the graph's write lock, before it
reads the graph:

- the workspace's own graph does not exist yet (a branch opened for the first time): it starts
  as a copy of the first usable of, in order, the shared graph of ``Settings.base_graph_key`` or
  of the key named like the checked-out branch; this folder's graph of the branch it was on
  last (the registry; its local cache); the shared graph of the remote's default branch. A
  shared graph is usable when its published state matches its marker, a local one when its
  cache does. It is copied (``GRAPH.COPY``) into a scratch graph, kept only if the base's
  marker did not move during the copy (optimistic: no lock of the base is taken, so its writers
  never wait for editors, and no two processes can wait for each other's locks), and renamed
  over the workspace's graph together with a new marker; the base's state (one ``HGETALL``
  snapshot, or one SQLite read transaction) becomes the local cache. ``index_all`` then finds graph and
  cache in agreement and re-indexes only the files whose content differs (copy-on-write: the
  base graph is never written).
- the graph exists but the local cache does not match it (a CI runner with no cache, another
  machine wrote it last): a published state that matches the graph's marker becomes the cache.

A published state of another cache version, or whose marker is not the graph's (a writer changed
the graph after publishing, or crashed), is not used: the workspace is then built from scratch.
States are decoded by an unpickler that accepts only orbit's own data classes and a few builtin
containers (``SafeUnpickler``), so a shared server cannot make an editor run code; anything else
is refused and costs a full build.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import logging
import os
import pickle
import socket
import time
import zlib
from typing import TYPE_CHECKING

from orbit_lsp.graph import keys, writelock
from orbit_lsp.graph.errors import QueryRejected
from orbit_lsp.index.parsing import facts_pickles

if TYPE_CHECKING:
    from orbit_lsp.graph.connection import GraphStore
    from orbit_lsp.index.workspaces import WorkspaceRecord
    from orbit_lsp.index.indexer import IndexReport, WorkspaceIndexer
    from orbit_lsp.index.state import FileState

log = logging.getLogger("orbit_lsp.index")

META_FIELD = "\0meta"
CHUNK = 500  # files per HSET while publishing


def state_key(graph_name: str) -> str:
    """The redis hash holding the published per-file state of ``graph_name``."""
    return f"orbit:state:{graph_name}"


# -- decoding shared states safely ------------------------------------------------------------

_BUILTINS = frozenset({"frozenset", "set", "dict", "list", "tuple", "bytes", "bytearray", "str", "int",
                       "float", "bool", "complex", "slice", "range"})


class SafeUnpickler(pickle.Unpickler):
    """Unpickles only data: classes of ``orbit_lsp.index`` modules that are data classes (or
    tuples: named tuples) and builtin containers. Anything else raises ``UnpicklingError``."""

    _allowed: dict[tuple[str, str], type] = {}  # classes found allowed already (any instance)

    def find_class(self, module: str, name: str):
        found = self._allowed.get((module, name))
        if found is not None:
            return found
        if module == "builtins" and name in _BUILTINS:
            obj = super().find_class(module, name)
        elif module.startswith("orbit_lsp.index.") and "." not in name:
            obj = super().find_class(module, name)
            if not (isinstance(obj, type) and (dataclasses.is_dataclass(obj) or issubclass(obj, tuple))):
                obj = None
        else:
            obj = None
        if obj is None:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a shared graph's state")
        self._allowed[(module, name)] = obj
        return obj


def safe_loads(blob: bytes):
    return SafeUnpickler(io.BytesIO(blob)).load()


def check_state_blob(blob: bytes) -> "FileState":
    """Decode one pickled ``FileState`` and the facts pickled inside it with ``SafeUnpickler``
    (the facts are decoded later with plain ``pickle``: they must be checked now); returns the
    state. Raises ``pickle.UnpicklingError`` (or another decoding error) for anything but
    orbit's data."""
    from orbit_lsp.index.state import FileState

    st = safe_loads(blob)
    if not isinstance(st, FileState):
        raise pickle.UnpicklingError("a shared state row is not a FileState")
    if st.facts_blob is not None:
        for part in facts_pickles(st.facts_blob):
            safe_loads(part)
    return st


# -- reading and writing published states -----------------------------------------------------

def published_meta(store: "GraphStore", graph_name: str) -> dict | None:
    """The meta of ``graph_name``'s published state (see the module docstring), None when there
    is none. Raises ``FalkorDBOffline``."""
    raw = store.execute("HGET", state_key(graph_name), META_FIELD)
    if raw is None:
        return None
    try:
        meta = json.loads(raw)
    except ValueError:
        return None
    return meta if isinstance(meta, dict) else None


MAX_STATE_ROW = 64 << 20  # bytes one published state row may inflate to (a FileState pickle)
MAX_STATE_RATIO = 16  # a published state inflates to at most this many times the bytes it came in
#   (plus one row): real states inflate ~1.5x (their facts are compressed already), at most ~5x a row


def inflate_within(data: bytes, limit: int) -> bytes:
    """zlib ``data`` inflated, at most ``limit`` bytes. Raises ``zlib.error`` for data that is
    not zlib, is truncated, or would inflate past ``limit`` (a bomb from a shared server)."""
    inflate = zlib.decompressobj()
    out = inflate.decompress(data, limit)
    if inflate.unconsumed_tail or not inflate.eof:
        raise zlib.error("truncated, or inflates past its limit")
    return out


def _inflate_row(data: bytes, limit: int = MAX_STATE_ROW) -> bytes:
    """One published row inflated; ``zlib.error`` (as for data that is not zlib) when it would
    inflate past ``limit`` bytes (at most ``MAX_STATE_ROW``): a shared server others write to
    may hold a bomb."""
    return inflate_within(data, min(limit, MAX_STATE_ROW))


def _published(store: "GraphStore", graph_name: str) -> tuple[dict | None, list[tuple[str, bytes]]]:
    """``(meta, [(rel, pickled state)])`` of ``graph_name``'s published state, read in one
    ``HGETALL`` (one snapshot: a publish replaces the hash in one ``RENAME``). ``(None, [])``
    (not usable) when its meta is not JSON, or a row is not base64 of zlib data or would take
    the whole past ``MAX_STATE_RATIO`` times the bytes received: memory stays proportional to
    what the server sent, whoever wrote it."""
    reply = store.execute("HGETALL", state_key(graph_name))
    items = list(reply.items()) if isinstance(reply, dict) else list(zip(reply[0::2], reply[1::2]))
    budget = MAX_STATE_ROW + MAX_STATE_RATIO * sum(len(v) for f, v in items if f != META_FIELD)
    meta, rows = None, []
    try:
        for field, value in items:
            if field == META_FIELD:
                meta = json.loads(value)
            else:
                row = _inflate_row(base64.b64decode(value, validate=True), budget)
                budget -= len(row)
                rows.append((field, row))
    except (ValueError, zlib.error) as exc:  # binascii.Error is a ValueError
        log.warning("the published state of %s was refused: %s", graph_name, exc)
        return None, []
    return (meta if isinstance(meta, dict) else None), rows


def publish(ix: "WorkspaceIndexer") -> bool:
    """Publish ``ix``'s cache (saved, matching the graph's marker) as its graph's shared state,
    replacing the previous one. False (nothing published) when the cache does not match the
    graph. Call inside the graph's write lock. Raises ``FalkorDBOffline``."""
    store, name = ix.store, ix.graph.name
    token = writelock.read_marker(store, name)
    if token is None or token.startswith(writelock.DIRTY):
        return False
    old = published_meta(store, name)
    if old is not None and old.get("graph_token") == token and old.get("version") == ix._cache.version:
        return True  # already published for this marker
    import sqlite3

    try:
        db = sqlite3.connect(ix.cache_path, timeout=30)
        try:
            meta = dict(db.execute("SELECT key, value FROM meta"))
            if meta.get("graph_token") != token or meta.get("version") != ix._cache.version:
                return False
            rows = list(db.execute("SELECT rel, state FROM files"))
        finally:
            db.close()
    except sqlite3.Error as exc:
        log.warning("could not read the cache of %s to publish it: %s", name, exc)
        return False
    try:
        for rel, _ in rows:
            rel.encode("utf-8")
    except UnicodeEncodeError:  # the client speaks UTF-8 text: such a path cannot be a field
        log.warning("not publishing the state of %s: a file path is not valid UTF-8", name)
        return False
    head = keys.git_head(ix.root)
    doc = {"version": meta.get("version"), "graph_token": token, "root_package": meta.get("root_package", ""),
           "root": str(ix.root), "host": socket.gethostname(), "indexed": time.time(), "files": len(rows),
           "key": ix.settings.graph_key, "branch": head.label if head else None,
           "commit": _head_commit(head) if head else None}
    tmp = f"{state_key(name)}:tmp:{writelock.new_token()}"
    try:
        for i in range(0, len(rows), CHUNK):
            args = []
            for rel, blob in rows[i:i + CHUNK]:
                args += [rel, base64.b64encode(zlib.compress(blob, 1)).decode("ascii")]
            store.execute("HSET", tmp, *args)
        store.execute("HSET", tmp, META_FIELD, json.dumps(doc))
        store.execute("RENAME", tmp, state_key(name))
    except BaseException:
        try:
            store.execute("DEL", tmp)
        except Exception:  # noqa: BLE001 - offline: the leftover key is harmless
            pass
        raise
    log.info("published the state of %s (%d files)", name, len(rows))
    return True


def _head_commit(head: keys.GitHead) -> str | None:
    """The commit HEAD points at (loose ref, packed ref, or detached), None when unknown."""
    if head.commit:
        return head.commit
    ref = "refs/heads/" + head.branch
    for d in (head.git_dir, head.common_dir):
        try:
            return (d / ref).read_text(encoding="utf-8").strip()
        except OSError:
            pass
    try:
        with open(head.common_dir / "packed-refs", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0]
    except OSError:
        pass
    return None


def forget(store: "GraphStore", graph_name: str) -> None:
    """Delete the published state of ``graph_name`` (its graph is dropped)."""
    store.execute("DEL", state_key(graph_name))


# -- starting from a shared graph -------------------------------------------------------------

def base_keys(ix: "WorkspaceIndexer") -> list[str]:
    """The keys whose shared graphs ``ix``'s graph may start from, in order (see the module
    docstring); none for a graph that is itself shared."""
    if ix.settings.graph_key:
        return []
    if ix.settings.base_graph_key:
        return [ix.settings.base_graph_key]
    head = keys.git_head(ix.root)
    if head is None:
        return []
    out = [head.branch] if head.branch else []
    default = keys.default_branch(head)
    if default and default not in out:
        out.append(default)
    return out


def _usable(meta: dict | None, marker: str | None, version: str) -> str | None:
    """Why a published state cannot be used with a graph whose marker is ``marker`` (None: it
    can)."""
    if meta is None:
        return "no state was published with it"
    if meta.get("version") != version:
        return f"its state is of another cache version ({meta.get('version')}, this orbit reads {version})"
    if marker is None or marker.startswith(writelock.DIRTY) or meta.get("graph_token") != marker:
        return "it changed after its state was published"
    return None


def _decode(rows: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """Check every published row (``check_state_blob``; raises as it does) and return the rows
    as this machine's cache keeps them: without the publisher's stat signatures
    (``FileState.seen_stat``, of the files on its disk: here they must be read once)."""
    out = []
    for rel, blob in rows:
        st = check_state_blob(blob)
        if st.seen_stat is not None:
            st.seen_stat = None
            blob = pickle.dumps(st, protocol=pickle.HIGHEST_PROTOCOL)
        out.append((rel, blob))
    return out


def seed(ix: "WorkspaceIndexer") -> str | None:
    """Give ``ix`` a graph and cache to start from when it has none that agree (see the module
    docstring). Returns a note saying what was done, or None. Call inside ``ix``'s write lock.
    Raises ``FalkorDBOffline``; anything else that goes wrong (a damaged published state, a cache
    that cannot be written) is logged and leaves the workspace to be built as without a base."""
    from orbit_lsp.graph.errors import FalkorDBOffline

    try:
        return _seed(ix)
    except FalkorDBOffline:
        raise
    except Exception as exc:  # noqa: BLE001 - starting from a base is an optimisation only
        log.warning("could not start graph %s from a base graph: %s: %s", ix.graph.name, type(exc).__name__, exc)
        return None


def _seed(ix: "WorkspaceIndexer") -> str | None:
    store, name = ix.store, ix.graph.name
    graphs = set(store.list_graphs())
    version = ix._cache.version
    if name in graphs:
        cache = ix._cache.usable()
        marker = writelock.read_marker(store, name)
        if cache is not None and (marker is None or cache.get("graph_token") == marker):
            return None  # the local cache matches (or the graph predates markers)
        if _usable(published_meta(store, name), marker, version) is not None:
            return None
        meta, rows = _published(store, name)
        if _usable(meta, marker, version) is not None:
            return None
        try:
            rows = _decode(rows)
        except Exception as exc:  # noqa: BLE001 - any decoding failure: not usable
            log.warning("the published state of %s was refused: %s", name, exc)
            return None
        ix._cache.save({}, {"root_package": meta.get("root_package", ""), "graph_token": marker}, None, rows)
        what = (f" for graph key '{meta['key']}'" if meta.get("key") else
                f" for branch '{meta['branch']}'" if meta.get("branch") else "")
        return (f"re-opened from the state published{what} (graph {name}) by {meta.get('host')} "
                f"({len(rows)} files); only files that differ are re-indexed")
    # first a shared graph of this very branch (or the configured base), then this folder's graph
    # of the branch it was on last, then the shared graph of the remote's default branch
    shared: list[tuple[str | None, str]] = [(key, keys.shared_graph_name(key)) for key in base_keys(ix)]
    head = keys.git_head(ix.root)
    bases = []
    if shared and (ix.settings.base_graph_key or (head is not None and shared[0][0] == head.branch)):
        bases.append(shared.pop(0))
    sibling = _sibling(ix, graphs)
    if sibling is not None:
        bases.append((None, sibling.graph))
    bases += shared
    for key, base in bases:
        if base == name or base not in graphs:
            continue
        note = (_copy_from(ix, key, base, version) if key is not None else
                _copy_sibling(ix, base, version, sibling.branch if sibling is not None else None))
        if note:
            return note
    return None


def _sibling(ix: "WorkspaceIndexer", graphs: set[str]) -> "WorkspaceRecord | None":
    """The registry's record (``index.workspaces``) of the graph of another branch of the same
    folder that this machine used last, when that graph still exists: a new branch starts from
    it."""
    from orbit_lsp.index.workspaces import WorkspaceRegistry

    if ix.settings.graph_key:
        return None
    for rec in WorkspaceRegistry(ix.settings.data_dir).by_root().get(str(ix.root), []):
        if rec.graph != ix.graph.name and rec.graph in graphs and not rec.graph.startswith(keys.SHARED_GRAPH_PREFIX):
            return rec
    return None


def _copy_sibling(ix: "WorkspaceIndexer", base: str, version: str, branch: str | None = None) -> str | None:
    """Start ``ix``'s graph as a copy of ``base``, the graph of another branch (``branch``, when
    known) of the same folder, with that graph's local cache (when it matches the graph)."""
    import sqlite3

    from orbit_lsp.index.indexer import build_graph_name
    from orbit_lsp.index.state import StateCache

    store, name = ix.store, ix.graph.name
    other = StateCache(ix.cache_path.with_name(f"{base}.sqlite"), ix.root)
    other.version = version  # the same flavour as this indexer's (``WorkspaceIndexer.value_flow``)
    marker = writelock.read_marker(store, base)
    if marker is None or marker.startswith(writelock.DIRTY) or not other.path.exists():
        return None
    try:
        db = sqlite3.connect(other.path, timeout=30)
        try:
            with db:  # one read transaction: meta and rows of the same save
                db.execute("BEGIN")
                meta = dict(db.execute("SELECT key, value FROM meta"))
                rows = list(db.execute("SELECT rel, state FROM files"))
        finally:
            db.close()
    except sqlite3.Error:
        return None
    if meta.get("version") != version or meta.get("root") != str(ix.root) or meta.get("graph_token") != marker:
        return None
    scratch = _copy_graph(ix, base, marker)
    if scratch is None:
        return None
    token = writelock.new_token()
    ix._cache.save({}, {"root_package": meta.get("root_package", ""), "graph_token": token}, None, rows)
    store.atomically(("RENAME", scratch, name), ("SET", writelock.marker_key(name), token))
    which = f"of branch '{branch}'" if branch else "of another branch"
    return (f"started from this folder's graph {which} ({base}, {len(rows)} files); only files "
            f"that differ are re-indexed")


def _copy_from(ix: "WorkspaceIndexer", key: str, base: str, version: str) -> str | None:
    from orbit_lsp.index.indexer import build_graph_name

    store, name = ix.store, ix.graph.name
    marker = writelock.read_marker(store, base)
    why = _usable(published_meta(store, base), marker, version)
    if why is None:
        meta, rows = _published(store, base)
        why = _usable(meta, marker, version)
    if why is not None:
        log.info("not starting %s from shared graph %s: %s", ix.root, key, why)
        return None
    scratch = _copy_graph(ix, base, marker)
    if scratch is None:
        return None
    try:
        rows = _decode(rows)
    except Exception as exc:  # noqa: BLE001 - any decoding failure: not usable
        log.warning("the published state of shared graph %s was refused: %s", key, exc)
        store.graph(scratch).delete()
        return None
    token = writelock.new_token()
    # the cache first: a crash between the two leaves a cache whose token no graph has
    ix._cache.save({}, {"root_package": meta.get("root_package", ""), "graph_token": token}, None, rows)
    store.atomically(("RENAME", scratch, name), ("SET", writelock.marker_key(name), token))
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(meta.get("indexed") or 0))
    return (f"started from shared graph '{key}' ({len(rows)} files, indexed on {meta.get('host')} "
            f"{when}); only files that differ are re-indexed")


def _copy_graph(ix: "WorkspaceIndexer", base: str, marker: str) -> str | None:
    """``GRAPH.COPY`` of ``base`` into ``ix``'s scratch graph, kept only when ``base``'s marker is
    still ``marker`` afterwards (no writer wrote it meanwhile: every write changes the marker
    first). No lock of ``base`` is taken: its writers never wait for a reader, and a process
    holding it never waits for ``ix``'s. Returns the scratch graph's name, or None."""
    from orbit_lsp.index.indexer import build_graph_name

    store = ix.store
    scratch = build_graph_name(ix.graph.name)
    store.graph(scratch).delete()  # a copy or build that stopped half-way (we hold ix's lock)
    try:
        store.execute("GRAPH.COPY", base, scratch)
    except QueryRejected as exc:  # a FalkorDB without GRAPH.COPY (before 4.0)
        log.warning("could not copy graph %s: %s", base, exc)
        return None
    if writelock.read_marker(store, base) != marker:
        log.info("graph %s was written while it was copied; not starting from it", base)
        store.graph(scratch).delete()
        return None
    return scratch


def after_index(ix: "WorkspaceIndexer", rep: "IndexReport") -> None:
    """After ``ix.index_all``: publish the state of a shared graph (see ``publish``). Call
    inside the graph's write lock."""
    if rep.mode == "cancelled" or not ix.graph.name.startswith(keys.SHARED_GRAPH_PREFIX):
        return
    from orbit_lsp.graph.errors import FalkorDBOffline

    try:
        done = publish(ix)
    except FalkorDBOffline:
        raise
    except Exception as exc:  # noqa: BLE001 - the index itself succeeded
        log.warning("could not publish the state of %s: %s: %s", ix.graph.name, type(exc).__name__, exc)
        rep.notes.append(f"the per-file state of shared graph '{ix.settings.graph_key}' could not be published "
                         f"({type(exc).__name__}: {exc}); workspaces starting from it are built from scratch")
        return
    if done:
        rep.notes.append(f"published the per-file state of shared graph '{ix.settings.graph_key}' "
                         f"for workspaces that start from it")
