"""Module resolution for JavaScript/TypeScript, as the TypeScript compiler does it.

``JsModules(root, files).resolve(spec, importer)`` names what an import specifier of a
workspace file refers to, without reading any source file:

- relative specifiers (``./x``, ``../x``): the file itself, with extension probing (``.ts
  .tsx .d.ts .js .jsx``), a ``.js``/``.jsx``/``.mjs``/``.cjs`` specifier naming its
  ``.ts``/``.tsx``/``.mts``/``.cts`` source, then the directory (its ``package.json``
  ``types``/``main``, then ``index.*``); a trailing ``/`` forces the directory;
- a declaration file or build output found on the way (``a.d.ts`` beside ``a.ts``,
  ``dist/a.d.ts`` or ``dist/a.js`` of ``src/a.ts``, see ``walk.BuildOutput``) stands for its
  source when that is indexed, as TypeScript's project references map outputs to sources;
- non-relative specifiers: the ``paths`` of the nearest ``tsconfig.json``/``jsconfig.json``
  (longest matching prefix, substitutions in order; relative to ``baseUrl``, or to the config
  that defines ``paths`` when there is none), then ``baseUrl``, then Node built-ins
  (``fs``, ``node:fs``), then workspace packages (any ``package.json`` with a ``name`` inside
  the workspace: npm/yarn/pnpm workspaces) through their ``exports`` (conditions ``types``,
  ``import``, ``require``, ``node``, ``default``, subpath patterns) or ``types``/``main``; what
  is left is an external package, named by its first segment (``@scope/name`` whole);
- ``#name`` subpath imports through the nearest ``package.json`` ``imports``.

Configs are JSONC (comments and trailing commas, parsed with ``json5``); ``extends`` (a
path, a package's config, or a list) is followed, ``baseUrl``/``paths`` staying relative to
the config that sets them. The nearest config up from the importing file applies, so nested
sub-projects use their own. Unreadable or invalid configs are logged and ignored (listed in
``problems``), never fatal.

Results are tuples: ``("file", rel)`` an indexed workspace file; ``("other", rel)`` an existing
workspace file that is not source (``.json``); ``("builtin", "node:fs")``; ``("package",
name)``; ``("missing", spec)`` a relative or mapped specifier that names no file.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
from pathlib import Path

from orbit_lsp.index.py_modules import canonical_path
from orbit_lsp.index.walk import BuildOutput

_BUILD_EXTS = (".d.ts", ".d.mts", ".d.cts", ".js", ".mjs", ".cjs", ".jsx")

log = logging.getLogger("orbit_lsp.index")

NODE_BUILTINS = frozenset({
    "_http_agent", "_http_client", "_http_common", "_http_incoming", "_http_outgoing", "_http_server",
    "_stream_duplex", "_stream_passthrough", "_stream_readable", "_stream_transform", "_stream_wrap",
    "_stream_writable", "_tls_common", "_tls_wrap", "assert", "async_hooks", "buffer", "child_process",
    "cluster", "console", "constants", "crypto", "dgram", "diagnostics_channel", "dns", "domain", "events",
    "fs", "http", "http2", "https", "inspector", "module", "net", "os", "path", "perf_hooks", "process",
    "punycode", "querystring", "readline", "repl", "stream", "string_decoder", "sys", "timers",
    "trace_events", "tty", "url", "util", "v8", "vm", "wasi", "worker_threads", "zlib",
    # only with the ``node:`` prefix
    "test", "sqlite", "sea",
})  # Node 20's ``require("module").builtinModules`` (subpaths such as ``fs/promises`` by their top)

TS_EXTENSIONS = (".ts", ".tsx", ".d.ts", ".js", ".jsx")
_JS_TO_TS = {".js": (".ts", ".tsx", ".d.ts", ".js", ".jsx"), ".jsx": (".tsx", ".d.ts", ".jsx"),
             ".mjs": (".mts", ".d.mts", ".mjs"), ".cjs": (".cts", ".d.cts", ".cjs")}
_TS_EXTS = (".ts", ".tsx", ".mts", ".cts")
CONDITIONS = frozenset({"types", "import", "require", "node", "default"})
CONFIG_NAMES = ("tsconfig.json", "jsconfig.json")


def is_js_config(name: str) -> bool:
    """True for a file name whose content can change how JS/TS imports resolve:
    ``package.json``, ``tsconfig*.json``, ``jsconfig*.json``."""
    return name == "package.json" or (name.endswith(".json") and name.startswith(("tsconfig", "jsconfig")))


def package_name(spec: str) -> str:
    """The package a bare specifier names: ``lodash/chunk`` -> ``lodash``, ``@scope/a/b`` ->
    ``@scope/a``."""
    parts = spec.split("/")
    if spec.startswith("@") and len(parts) > 1:
        return "/".join(parts[:2])
    return parts[0]


def builtin_name(spec: str) -> str | None:
    """``node:fs`` for ``fs``, ``fs/promises``, ``node:fs``; None when not a Node built-in."""
    if spec.startswith("node:"):
        return "node:" + spec[5:].split("/")[0]
    top = spec.split("/")[0]
    if top in NODE_BUILTINS and top not in ("test", "sqlite", "sea"):
        return "node:" + top
    return None


def load_jsonc(path: str) -> dict:
    """A JSON-with-comments file (tsconfig, jsconfig, package.json) as a dict. Raises
    ``OSError`` or ``ValueError`` (invalid content)."""
    with open(path, "rb") as f:
        return parse_jsonc(f.read())


def parse_jsonc(data: bytes) -> dict:
    """JSON with comments and trailing commas (``json5``) as a dict; raises ``ValueError``."""
    text = data.decode("utf-8-sig", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        import json5

        data = json5.loads(text)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def stamp(abs_path: str, data: bytes | None = None) -> str:
    """What a config file is now (or, given ``data``, what those bytes are): a digest of its
    bytes, or ``"missing"``."""
    import hashlib

    if data is None:
        try:
            with open(abs_path, "rb") as f:
                data = f.read()
        except OSError:
            return "missing"
    return hashlib.blake2b(data, digest_size=12).hexdigest()


class TsConfig:
    """The options of one config that resolution uses, ``extends`` merged in: ``base_url`` and
    ``paths_base`` as absolute directories, ``paths`` pattern -> substitutions."""

    __slots__ = ("path", "base_url", "paths", "paths_base", "sources")

    def __init__(self, path: str, base_url: str | None, paths: dict | None, paths_base: str | None,
                 sources: tuple[str, ...] = ()):
        self.path, self.base_url, self.paths, self.paths_base = path, base_url, paths, paths_base
        self.sources = sources or (path,)  # the config and every config it extends


class JsModules:
    """Resolves specifiers of the files of one workspace (see the module docstring).

    ``root`` the workspace root; ``files`` every indexed workspace-relative path; ``aliases``
    in-workspace symlinked directory -> its walked target (as ``WalkResult.aliases``)."""

    def __init__(self, root: Path | str, files: set[str], aliases: dict[str, str] | None = None):
        self.root = os.path.realpath(os.fspath(root))
        self.files = files
        self.aliases = dict(aliases or {})
        self.dirs: set[str] = {""}
        for f in files:
            parts = f.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                self.dirs.add("/".join(parts[:i]))
        self.problems: dict[str, str] = {}  # config path -> why it was ignored
        self.stamps: dict[str, str] = {}  # every config / package.json read (absolute) -> ``stamp``
        self._consulted: list[str] | None = None  # set by ``resolve_with_sources``
        self._configs: dict[str, TsConfig | None] = {}  # absolute config path -> parsed
        self._nearest: dict[str, tuple] = {}  # rel dir -> (config that applies, config paths probed on the way)
        self._pkg_json: dict[str, dict | None] = {}  # rel dir -> its package.json
        self._packages: dict[str, str] | None = None  # workspace package name -> rel dir
        self.build = BuildOutput(self.root)  # declaration files and build output -> their sources

    # -- paths ----------------------------------------------------------------------------------
    def _rel(self, abs_path: str) -> str | None:
        p = os.path.normpath(abs_path)
        if p == self.root:
            return ""
        if not p.startswith(self.root + os.sep):
            return None
        return os.path.relpath(p, self.root).replace(os.sep, "/")

    def _abs(self, rel: str) -> str:
        return os.path.join(self.root, *rel.split("/")) if rel else self.root

    def _canon(self, path: str) -> str:
        return canonical_path(path, self.aliases)

    def _is_file(self, rel: str) -> str | None:
        """The indexed file ``rel`` names: itself, or, for a declaration file or build output
        (``walk.BuildOutput``: ``a.d.ts`` beside ``a.ts``, ``dist/a.js`` mirroring ``src/a.ts``),
        its indexed source, whether or not the output exists (as TypeScript's project
        references do); else None."""
        rel = self._canon(rel)
        if rel.endswith(_BUILD_EXTS):
            src = self.build.source(rel)
            if src is not None and src in self.files:
                return src
        return rel if rel in self.files else None

    # -- configs ----------------------------------------------------------------------------------
    def _read_json(self, abs_path: str) -> dict | None:
        try:
            with open(abs_path, "rb") as f:
                data = f.read()
        except OSError:
            self.stamps[abs_path] = "missing"
            return None
        self.stamps[abs_path] = stamp(abs_path, data)
        try:
            return parse_jsonc(data)
        except ValueError as e:
            self.problems[abs_path] = f"{type(e).__name__}: {e}"
            log.warning("ignoring %s: %s", abs_path, e)
            return None

    def _extends_path(self, ext: str, config_dir: str) -> str | None:
        if ext.startswith((".", "/")) or os.path.isabs(ext):
            p = os.path.normpath(os.path.join(config_dir, ext))
            if not p.endswith(".json") and not os.path.isfile(p):
                p += ".json"
            return p
        d = config_dir  # a package's config: node_modules/<ext>[.json] or its tsconfig.json
        while True:
            base = os.path.join(d, "node_modules", ext)
            for cand in (base, base + ".json", os.path.join(base, "tsconfig.json")):
                if os.path.isfile(cand):
                    return cand
            parent = os.path.dirname(d)
            if parent == d:
                return None
            d = parent

    def load_config(self, abs_path: str, seen: frozenset = frozenset()) -> TsConfig | None:
        """The config at ``abs_path`` with its ``extends`` chain merged (None if unreadable)."""
        if abs_path in self._configs and not seen:
            return self._configs[abs_path]
        if abs_path in seen:
            self.problems[abs_path] = "extends cycle"
            return None
        data = self._read_json(abs_path)
        if data is None:
            cfg = None
        else:
            here = os.path.dirname(abs_path)
            base_url = paths = paths_base = None
            sources = [abs_path]
            ext = data.get("extends")
            for e in ([ext] if isinstance(ext, str) else ext if isinstance(ext, list) else []):
                if not isinstance(e, str):
                    continue
                p = self._extends_path(e, here)
                parent = self.load_config(p, seen | {abs_path}) if p else None
                if p:
                    sources.append(p)
                if parent is None:
                    continue
                sources.extend(parent.sources)
                if parent.base_url is not None:
                    base_url = parent.base_url
                if parent.paths is not None:
                    paths, paths_base = parent.paths, parent.paths_base
            opts = data.get("compilerOptions")
            if isinstance(opts, dict):
                if isinstance(opts.get("baseUrl"), str):
                    base_url = os.path.normpath(os.path.join(here, opts["baseUrl"]))
                if isinstance(opts.get("paths"), dict):
                    paths, paths_base = opts["paths"], here
            cfg = TsConfig(abs_path, base_url, paths, paths_base, tuple(dict.fromkeys(sources)))
        if not seen:
            self._configs[abs_path] = cfg
        return cfg

    def config_for(self, importer: str) -> TsConfig | None:
        """The config that applies to workspace file ``importer``: the nearest
        ``tsconfig.json`` (else ``jsconfig.json``) in its directory or above, up to the root."""
        d = posixpath.dirname(importer)
        chain: list[tuple[str, list[str]]] = []  # (dir, config paths looked for there and not found)
        found, above = None, ()
        while True:
            if d in self._nearest:
                found, above = self._nearest[d]
                break
            probed: list[str] = []
            chain.append((d, probed))
            hit = None
            for name in CONFIG_NAMES:
                p = os.path.join(self._abs(d), name)
                if os.path.isfile(p):
                    # an unreadable config still owns its directory: no options, not the parent's
                    hit = self.load_config(p) or TsConfig(p, None, None, None)
                    break
                probed.append(p)
            if hit is not None:
                found = hit
                break
            if not d:
                break
            d = posixpath.dirname(d)
        # every dir on the way remembers its config and the paths where a nearer one would be
        acc = tuple(above)
        for d, probed in reversed(chain):
            acc = tuple(probed) + acc
            self._nearest[d] = (found, acc)
        if self._consulted is not None:
            self._consulted.extend(self._nearest[posixpath.dirname(importer)][1])
            if found is not None:
                self._consulted.extend(found.sources)
        return found

    def package_json(self, rel_dir: str) -> dict | None:
        if self._consulted is not None:
            self._consulted.append(os.path.join(self._abs(rel_dir), "package.json"))
        if rel_dir not in self._pkg_json:
            self._pkg_json[rel_dir] = self._read_json(os.path.join(self._abs(rel_dir), "package.json"))
        return self._pkg_json[rel_dir]

    def workspace_packages(self) -> dict[str, str]:
        """Package name -> workspace-relative directory of every named ``package.json`` in a
        directory holding indexed files (or the root)."""
        if self._packages is None:
            self._packages = {}
            for d in sorted(self.dirs, key=lambda x: (x.count("/"), x)):
                if not os.path.isfile(os.path.join(self._abs(d), "package.json")):
                    continue
                pj = self.package_json(d)
                name = pj.get("name") if pj else None
                if isinstance(name, str) and name and name not in self._packages:
                    self._packages[name] = d
        return self._packages

    # -- probing ----------------------------------------------------------------------------------
    def _file(self, p: str) -> str | None:
        """The file a path names with TypeScript's extension rules (no directory lookup)."""
        base, ext = posixpath.splitext(p)
        if p.endswith(".d.ts"):
            return self._is_file(p)
        if ext in _JS_TO_TS:
            for e in _JS_TO_TS[ext]:
                hit = self._is_file(base + e)
                if hit:
                    return hit
        elif ext in _TS_EXTS:
            hit = self._is_file(p)
            if hit:
                return hit
        for e in TS_EXTENSIONS:
            hit = self._is_file(p + e)
            if hit:
                return hit
        return None

    def _directory(self, p: str, depth: int = 0) -> str | None:
        pj = self.package_json(p) if self._canon(p) in self.dirs else None
        if pj and depth < 4:
            for key in ("types", "typings", "main"):
                v = pj.get(key)
                if isinstance(v, str) and v:
                    q = posixpath.normpath(posixpath.join(p, v)) if p else posixpath.normpath(v)
                    hit = self._file(q) or self._is_file(q) or self._directory(q, depth + 1)
                    if hit:
                        return hit
        for e in TS_EXTENSIONS:
            hit = self._is_file(f"{p}/index{e}" if p else f"index{e}")
            if hit:
                return hit
        return None

    def _probe(self, p: str, dir_only: bool = False) -> tuple | None:
        """``("file", rel)`` / ``("other", rel)`` for workspace path ``p``, or None."""
        if p.startswith("../") or p == "..":
            return None
        if p == ".":
            p = ""
        if not dir_only:
            hit = self._file(p) if p else None
            if hit:
                return ("file", hit)
            ext = posixpath.splitext(p)[1]
            if ext and ext not in _JS_TO_TS and ext not in _TS_EXTS and os.path.isfile(self._abs(p)):
                return ("other", p)
        hit = self._directory(p)
        if hit:
            return ("file", hit)
        return None

    def _probe_abs(self, abs_path: str, dir_only: bool = False) -> tuple | None:
        rel = self._rel(abs_path)
        return None if rel is None else self._probe(rel, dir_only)

    # -- resolution ---------------------------------------------------------------------------------
    def resolve_with_sources(self, spec: str, importer: str) -> tuple[tuple, tuple[str, ...]]:
        """``resolve`` and the configs / ``package.json`` files (absolute paths) the answer
        depended on (an edit of one of them can change it)."""
        self._consulted = []
        try:
            res = self.resolve(spec, importer)
            return res, tuple(dict.fromkeys(self._consulted))
        finally:
            self._consulted = None

    def resolve(self, spec: str, importer: str) -> tuple:
        """What ``spec`` imported from workspace file ``importer`` names (see module docstring)."""
        if not spec:
            return ("missing", spec)
        if spec.startswith((".", "/")):
            if spec.startswith("/"):
                hit = self._probe_abs(spec, spec.endswith("/"))
                return hit or ("missing", spec)
            d = posixpath.dirname(importer)
            dir_only = spec.endswith("/") or spec in (".", "..") or spec.endswith(("/.", "/.."))
            p = posixpath.normpath(posixpath.join(d, spec)) if d else posixpath.normpath(spec)
            return self._probe(p, dir_only) or ("missing", spec)
        if spec.startswith("#"):
            return self._subpath_import(spec, importer) or ("missing", spec)
        if spec.startswith("node:"):
            return ("builtin", builtin_name(spec))
        cfg = self.config_for(importer)
        if cfg is not None:
            hit = self._paths(spec, cfg)
            if hit:
                return hit
            if cfg.base_url is not None:
                hit = self._probe_abs(os.path.join(cfg.base_url, spec), spec.endswith("/"))
                if hit:
                    return hit
        b = builtin_name(spec)
        if b:
            return ("builtin", b)
        name = package_name(spec)
        d = self.workspace_packages().get(name)
        if d is not None:
            hit = self._package_entry(d, "." + spec[len(name):])
            if hit:
                return hit
        return ("package", name)

    def _paths(self, spec: str, cfg: TsConfig) -> tuple | None:
        if not cfg.paths:
            return None
        best = None  # (prefix length, substitutions, matched star)
        for pattern, subs in cfg.paths.items():
            if not isinstance(pattern, str) or not isinstance(subs, list):
                continue
            if "*" not in pattern:
                if pattern == spec and (best is None or len(pattern) > best[0]):
                    best = (len(pattern) + 1, subs, "")
                continue
            pre, _, post = pattern.partition("*")
            if spec.startswith(pre) and spec.endswith(post) and len(spec) >= len(pre) + len(post):
                if best is None or len(pre) > best[0]:
                    best = (len(pre), subs, spec[len(pre):len(spec) - len(post)])
        if best is None:
            return None
        base = cfg.base_url if cfg.base_url is not None else cfg.paths_base
        for sub in best[1]:
            if not isinstance(sub, str):
                continue
            target = os.path.normpath(os.path.join(base, sub.replace("*", best[2])))
            hit = self._probe_abs(target, sub.endswith("/"))
            if hit:
                return hit
        return None

    @staticmethod
    def _condition(v):
        if isinstance(v, str):
            return v
        if isinstance(v, list):
            for x in v:
                r = JsModules._condition(x)
                if r:
                    return r
            return None
        if isinstance(v, dict):
            for k, x in v.items():
                if k in CONDITIONS:
                    r = JsModules._condition(x)
                    if r:
                        return r
        return None

    def _map_target(self, mapping, subpath: str) -> str | None:
        """The target of ``subpath`` (``.``, ``./x`` or ``#x``) in an ``exports``/``imports`` map."""
        if not isinstance(mapping, dict) or not any(isinstance(k, str) and k[:1] in ".#" for k in mapping):
            return self._condition(mapping) if subpath == "." else None
        if subpath in mapping:
            return self._condition(mapping[subpath])
        best = None
        for k, v in mapping.items():
            if "*" not in k:
                continue
            pre, _, post = k.partition("*")
            if subpath.startswith(pre) and subpath.endswith(post) and len(subpath) >= len(pre) + len(post):
                if best is None or len(pre) > len(best[0]):
                    best = (pre, v, subpath[len(pre):len(subpath) - len(post)])
        if best is None:
            return None
        t = self._condition(best[1])
        return t.replace("*", best[2]) if t else None

    def _package_entry(self, d: str, subpath: str) -> tuple | None:
        pj = self.package_json(d) or {}
        if "exports" in pj:
            t = self._map_target(pj["exports"], subpath)
            if t is None:
                return None
            p = posixpath.normpath(posixpath.join(d, t)) if d else posixpath.normpath(t)
            return self._probe(p)
        if subpath == ".":
            hit = self._directory(d)
            return ("file", hit) if hit else None
        p = posixpath.normpath(posixpath.join(d, subpath)) if d else posixpath.normpath(subpath)
        return self._probe(p, subpath.endswith("/"))

    def _subpath_import(self, spec: str, importer: str) -> tuple | None:
        d = posixpath.dirname(importer)
        while True:
            if self._canon(d) in self.dirs and os.path.isfile(os.path.join(self._abs(d), "package.json")):
                pj = self.package_json(d) or {}
                t = self._map_target(pj.get("imports"), spec) if isinstance(pj.get("imports"), dict) else None
                if t is None:
                    return None
                if t.startswith("."):
                    return self._probe(posixpath.normpath(posixpath.join(d, t)) if d else posixpath.normpath(t))
                return self.resolve(t, importer)
            if not d:
                return None
            d = posixpath.dirname(d)
