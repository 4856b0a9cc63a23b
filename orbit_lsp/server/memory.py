"""Memory requests: ``orbit/remember``, ``orbit/memories``, ``orbit/confirm``, ``orbit/forget``.

Params are taken raw and validated here (a malformed request gets InvalidParams, never silence);
the work runs in the query pool through ``OrbitServer.query`` (FalkorDB offline → RequestFailed
"FalkorDB offline"). A memory is shaped as ``orbit_lsp.memory.store.Memory.to_dict()``:
``{"id", "text", "confirmed", "created", "source", "concepts", "projects": [{"id", "root"}],
"anchor": {"root", "path", "symbol", "line", "uri"} | null, "redactions", "stale",
"staleReason", "uses": [{"turn", "conversation", "question", "created"}]}``.

- ``orbit/remember`` ``{"text", "textDocument"?: {"uri"}, "position"?: {"line", "character"},
  "confirmed"?: bool (default true), "anchor"?: bool (default true)}``: saves a memory (secrets
  redacted first) about the workspace folder of ``textDocument`` (else the first folder). With
  ``textDocument`` (and ``anchor`` not false) it is anchored to that file, with ``position`` to
  the innermost symbol there. A document that cannot be anchored (outside every folder, not in
  the graph) does not lose the memory: it is saved unanchored and ``notes`` says why. Result:
  the memory plus ``"notes": [str]``.
- ``orbit/memories`` ``{"confirmed"?: bool}``: ``{"memories": [...]}``, newest first, each with
  the answers that recalled it (``uses``) and whether its anchor changed since (``stale``).
- ``orbit/confirm`` ``{"id"}``: the confirmed memory (recallable from now on).
- ``orbit/forget`` ``{"id"}``: ``{"forgotten": memory}``; the memory and its concept links are
  gone, the audit log keeps the record.
Unknown ids, empty texts and texts of stop words only are InvalidParams.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from orbit_lsp.agent.history import History
from orbit_lsp.memory.anchors import AnchorError, anchor_at
from orbit_lsp.memory.store import InvalidMemory, Memory, MemoryStore, UnknownMemory
from orbit_lsp.server.app import ID_MAX, OrbitServer, raw_params
from orbit_lsp.server.requests import _position, _text_document_uri


def _id(p: dict) -> int:
    mid = p.get("id")
    if not isinstance(mid, int) or isinstance(mid, bool) or not 1 <= mid <= ID_MAX:
        raise JsonRpcInvalidParams(f"params.id (an integer from 1 to {ID_MAX}) is required")
    return mid


def _flag(p: dict, name: str, default: bool | None) -> bool | None:
    v = p.get(name, default)
    if v is not None and not isinstance(v, bool):
        raise JsonRpcInvalidParams(f"params.{name} must be true or false")
    return v


class Feature:
    def __init__(self, server: OrbitServer):
        self.server = server
        self._memory: MemoryStore | None = None
        self._history: History | None = None
        self._history_dir: Path | None = None

    def register(self) -> None:
        self.server.on("orbit/remember", self.remember)
        self.server.on("orbit/memories", self.memories)
        self.server.on("orbit/confirm", self.confirm)
        self.server.on("orbit/forget", self.forget)

    def memory(self) -> MemoryStore:
        """The memory store for the current settings (a new one when the store or graph name
        changed)."""
        ls = self.server
        if self._history is None or self._history_dir != ls.settings.data_dir:
            if self._history is not None:
                self._history.close()
            self._history, self._history_dir = History.open(ls.settings.data_dir), ls.settings.data_dir
            self._memory = None
        m = self._memory
        if m is None or m.store is not ls.store or m.graph_name != ls.settings.memory_graph:
            m = self._memory = MemoryStore(ls.store, ls.settings.memory_graph, history=self._history)
        return m

    def _shape(self, mem: Memory) -> dict:
        out = mem.to_dict()
        if mem.anchor is not None:
            out["anchor"]["uri"] = self.server.uri_of(Path(mem.anchor.root) / mem.anchor.path)
        return out

    async def remember(self, params: Any) -> dict:
        p = raw_params(params)
        text = p.get("text")
        if not isinstance(text, str) or not text.strip():
            raise JsonRpcInvalidParams("params.text (a non-empty string) is required")
        confirmed = _flag(p, "confirmed", True)
        anchored = _flag(p, "anchor", True)
        ls = self.server
        project, anchor_args, notes = None, None, []
        owner = None
        if p.get("textDocument") is not None:
            uri = _text_document_uri(p)
            pos = _position(p)
            owner = ls.locate(uri)
            if owner is None:
                if anchored:
                    notes.append(f"not anchored: {uri} is not in a workspace folder")
            else:
                ix, rel = owner
                project = ix.root
                if anchored:
                    line1 = ls.to_graph_position(ix.root / rel, types.Position(*pos))[0] if pos is not None else None
                    anchor_args = (ix.root, rel, line1)
        elif p.get("position") is not None:
            raise JsonRpcInvalidParams("params.position needs params.textDocument")
        if owner is None:
            folders = ls.workspaces.all()
            project = folders[0].root if folders else None
        mem = self.memory()

        def work() -> Memory:
            anchor = None
            if anchor_args:
                try:
                    anchor = anchor_at(ls.store, *anchor_args)
                except AnchorError as exc:
                    notes.append(f"not anchored: {exc}")
            return mem.remember(text, confirmed=confirmed, source="user", project=project, anchor=anchor)

        try:
            out = self._shape(await ls.query(work))
        except InvalidMemory as exc:
            raise JsonRpcInvalidParams(f"params.text: {exc}") from None
        out["notes"] = notes
        return out

    async def memories(self, params: Any = None) -> dict:
        p = raw_params(params)
        confirmed = _flag(p, "confirmed", None)
        mems = await self.server.query(self.memory().list, confirmed=confirmed)
        return {"memories": [self._shape(m) for m in mems]}

    async def confirm(self, params: Any) -> dict:
        mid = _id(raw_params(params))
        try:
            return self._shape(await self.server.query(self.memory().confirm, mid))
        except UnknownMemory as exc:
            raise JsonRpcInvalidParams(f"params.id: {exc}") from None

    async def forget(self, params: Any) -> dict:
        mid = _id(raw_params(params))
        try:
            return {"forgotten": self._shape(await self.server.query(self.memory().forget, mid))}
        except UnknownMemory as exc:
            raise JsonRpcInvalidParams(f"params.id: {exc}") from None
