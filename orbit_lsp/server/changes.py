"""``orbit/changes``: the impact of the change as the editor shows it (issue 16).

Params (all optional; taken raw and validated here): ``{"textDocument"?: {"uri"}, "workspace"?:
folder URI, "base"?: git ref (compare with the merge base of it and HEAD), "staged"?: bool
(the index vs HEAD; unsaved buffers are then left out), "depth"?: 1..10, "testDepth"?: 1..20,
"tests"?: bool, "unsaved"?: bool (default true: open documents whose text differs from the
disk are the new version of their files), "coverage"?: path of a coverage.py data file of the
base version recorded with a context per test, relative to the workspace root or absolute: the
tests are narrowed by it (``orbit_lsp.changes.coverage_map``; the result's ``tests.coverage``
says how; a missing, unreadable or context-less file is InvalidParams)}. The workspace is the folder of ``textDocument``,
else ``workspace``, else the only folder served.

Result: what ``orbit-lsp changes --format json`` gives as its result (see
``orbit_lsp.changes.impact.analyse``), every row with a file also carrying its ``uri``, plus
``workspace`` (the folder's URI) and ``unsaved`` (the workspace-relative paths read from open
buffers). ``cypher`` lists every statement run. Errors: InvalidParams for bad params,
RequestFailed for git failures (not a repository, unknown ref) and "FalkorDB offline".
"""

from __future__ import annotations

import asyncio
from typing import Any

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from orbit_lsp.changes import diff, impact
from orbit_lsp.server.app import REQUEST_FAILED, OrbitServer, raw_params

MAX_DEPTH = 10
MAX_TEST_DEPTH = 20


def _int(p: dict, key: str, default: int, hi: int) -> int:
    v = p.get(key, default)
    if v is None:
        return default
    if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= hi:
        raise JsonRpcInvalidParams(f"params.{key} must be an integer from 1 to {hi}")
    return v


def _bool(p: dict, key: str, default: bool) -> bool:
    v = p.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise JsonRpcInvalidParams(f"params.{key} must be true or false")
    return v


class Feature:
    def __init__(self, server: OrbitServer):
        self.server = server

    def register(self) -> None:
        self.server.on("orbit/changes", self.changes)

    def _workspace(self, p: dict):
        ls = self.server
        td = p.get("textDocument")
        if td is not None:
            uri = td.get("uri") if isinstance(td, dict) else None
            if not isinstance(uri, str) or not uri:
                raise JsonRpcInvalidParams("params.textDocument.uri must be a string")
            owner = ls.locate(uri)
            if owner is None:
                raise JsonRpcException(f"{uri} is not in an indexed workspace folder", code=REQUEST_FAILED)
            return owner[0]
        folders = ls.workspaces.all()
        ws = p.get("workspace")
        if ws is not None:
            path = ls.path_of(ws) if isinstance(ws, str) else None
            if path is None:
                raise JsonRpcInvalidParams("params.workspace must be a file: URI of a workspace folder")
            for ix in folders:
                if ix.root == path or str(ix.root) == str(path.resolve()):
                    return ix
            raise JsonRpcException(f"{ws} is not a workspace folder of this server", code=REQUEST_FAILED)
        if len(folders) != 1:
            raise JsonRpcInvalidParams(f"{len(folders)} workspace folders are served: "
                                       "give params.textDocument or params.workspace")
        return folders[0]

    def _buffers(self, ix) -> dict[str, bytes]:
        """Open documents of ``ix``'s folder whose text differs from the disk."""
        ls = self.server
        out = {}
        for uri, doc in list(ls.workspace.text_documents.items()):
            path = ls.path_of(uri)
            owner = ls.workspaces.owner(path) if path is not None else None
            if owner is None or owner[0] is not ix:
                continue
            data = doc.source.encode("utf-8")
            try:
                disk = (ix.root / owner[1]).read_bytes()
            except OSError:
                disk = None
            if disk != data:
                out[owner[1]] = data
        return out

    async def changes(self, params: Any = None) -> dict:
        p = raw_params(params)
        base = p.get("base")
        if base is not None and (not isinstance(base, str) or not base.strip() or base.startswith("-")):
            raise JsonRpcInvalidParams("params.base must be a git ref (a non-empty string not starting with '-')")
        staged = _bool(p, "staged", False)
        if staged and base is not None:
            raise JsonRpcInvalidParams("params.base and params.staged exclude each other")
        opts = impact.Options(depth=_int(p, "depth", impact.DEFAULT_DEPTH, MAX_DEPTH),
                              test_depth=_int(p, "testDepth", impact.DEFAULT_TEST_DEPTH, MAX_TEST_DEPTH),
                              tests=_bool(p, "tests", True))
        cov = p.get("coverage")
        if cov is not None and (not isinstance(cov, str) or not cov.strip() or "\0" in cov):
            raise JsonRpcInvalidParams("params.coverage must be the path of a coverage data file")
        unsaved = _bool(p, "unsaved", True) and not staged
        ix = self._workspace(p)
        loop = asyncio.get_running_loop()
        if cov is not None:
            opts.coverage = await loop.run_in_executor(self.server.query_pool, self._coverage_map, ix.root, cov)
        buffers = self._buffers(ix) if unsaved else {}
        mode = "staged" if staged else "base" if base is not None else "worktree"
        try:
            change = await loop.run_in_executor(self.server.query_pool, diff.from_git, ix.root, mode, base)
        except diff.ChangeError as exc:
            raise JsonRpcException(str(exc), code=REQUEST_FAILED) from None
        change = diff.with_buffers(change, buffers)
        result = await self.server.query(impact.analyse, ix.graph, change, ix.root_package, opts)
        return self._with_uris(ix, result, sorted(buffers))

    @staticmethod
    def _coverage_map(root, path: str):
        """``coverage_map.open_map``; InvalidParams when the map cannot be used."""
        from orbit_lsp.changes.coverage_map import CoverageMapError, open_map

        try:
            return open_map(path, root)
        except CoverageMapError as exc:
            raise JsonRpcInvalidParams(f"params.coverage: {exc}") from None

    def _with_uris(self, ix, result: dict, unsaved: list[str]) -> dict:
        uri = self.server.rel_uri
        root = ix.root
        for key in ("files", "symbols", "callers", "may_be_affected"):
            for row in result[key]:
                f = row.get("file") or row.get("path")
                if f:
                    row["uri"] = uri(root, f)
        for row in result["dependents"]:
            row["uri"] = uri(root, row["path"])
        for key in ("selected", "may_be_affected"):
            for row in result["tests"][key]:
                row["uri"] = uri(root, row["file"])
        result["workspace"] = self.server.uri_of(root)
        result["unsaved"] = unsaved
        return result
