"""Workspace walk: which files of a workspace are indexed, and why the others are not.

``walk_workspace(root)`` lists the source files (by extension, see ``LANGS``) under ``root``
in sorted, deterministic order. It honours built-in excludes (VCS dirs, ``node_modules``,
caches, virtualenvs: any directory holding ``pyvenv.cfg``, ``site-packages``), every
``.gitignore`` from the root down (gitwildmatch semantics, deeper files override) and extra
gitwildmatch patterns relative to the root. ``.env`` / ``.env.*`` files, and symlinks whose
target is one, are never opened. Binary, minified and over-size files are reported in
``WalkResult.skipped`` with a reason and logged on ``orbit_lsp.index``.

Symlinks: real directories are walked first, so every real file is listed under its real
path. Symlinked directories are then considered in sorted order: one whose real target
was already walked becomes an entry of ``WalkResult.aliases`` (link dir -> target dir);
one pointing to an in-root directory not walked yet (and not a built-in exclude) is
walked under the link path. Links leaving the root, dangling links and loops are ignored.
Symlinked files are listed only when their in-root target was not processed already.

``WorkspaceFilter`` applies the same rules to a single path (file watcher, re-index).

Reading a file a client names (a hover or lens on its URI) goes through
``read_workspace_file``: it refuses ``.env`` files, links to them and links leaving the root
without opening anything, and opens only regular files, without blocking (a FIFO, device or
socket named ``x.py`` is refused, not waited on).
"""

from __future__ import annotations

import codecs
import errno
import heapq
import logging
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

log = logging.getLogger("orbit_lsp.index")

LANGS: dict[str, str] = {
    ".py": "python",
    ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".ts": "typescript", ".tsx": "typescript", ".mts": "typescript", ".cts": "typescript",
}
EXCLUDED_DIRS = frozenset({
    ".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".tox", ".nox",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", "site-packages",
})
_BINARY_MAGIC = (b"\x89PNG", b"GIF87a", b"GIF89a", b"\xff\xd8\xff", b"PK\x03\x04", b"%PDF-",
                 b"\x7fELF", b"\xca\xfe\xba\xbe", b"\x1f\x8b", b"\x00asm")
_CONTROL = bytes(b for b in range(32) if b not in b"\t\n\r\f\b\x1b")
_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


@dataclass(frozen=True)
class SourceFile:
    """A listed source file: ``rel`` workspace-relative with "/" separators (the path under
    which it was first reached), ``abs`` that path made absolute, ``lang`` from ``LANGS``,
    ``size`` in bytes (from stat)."""
    rel: str
    abs: Path
    lang: str
    size: int


@dataclass
class WalkResult:
    """``root`` the resolved workspace root; ``files`` sorted by ``rel``; ``skipped`` as
    ``(rel, reason)`` pairs; ``aliases`` maps the rel path of an in-workspace symlinked
    directory to the rel path of the walked directory it points to ("" is the root)."""
    root: Path
    files: list[SourceFile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)


def is_dotenv(path: str | Path) -> bool:
    """True if the basename is ``.env`` or starts with ``.env.`` (``.env.local``, ...)."""
    name = os.path.basename(os.fspath(path))
    return name == ".env" or name.startswith(".env.")


class RefusedFile(OSError):
    """A file that is never opened for a client: a ``.env*`` file or a link to one, a path
    leaving the workspace, or not a regular file (FIFO, device, socket, directory)."""


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


def read_regular_file(path: str | Path, limit: int | None = None) -> bytes:
    """The bytes of ``path`` (at most ``limit``: a longer file raises ``RefusedFile``) if it is a
    regular file. Never blocks on a FIFO or device: the type is checked before opening, the file
    is opened non-blocking and checked again on the open descriptor (it may have been swapped
    meanwhile). Raises ``RefusedFile`` (not a regular file, too large) or ``OSError``."""
    p = os.fspath(path)
    st = os.stat(p)
    if not stat.S_ISREG(st.st_mode):
        raise RefusedFile(errno.EINVAL, "not a regular file", p)
    fd = os.open(p, _OPEN_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RefusedFile(errno.EINVAL, "not a regular file", p)
        if limit is not None and st.st_size > limit:
            raise RefusedFile(errno.EFBIG, f"larger than {limit} bytes", p)
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            data = f.read() if limit is None else f.read(limit + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if limit is not None and len(data) > limit:
        raise RefusedFile(errno.EFBIG, f"larger than {limit} bytes", p)
    return data


def workspace_file_refusal(root: str | Path, path: str | Path) -> str | None:
    """Why ``path`` must not be opened for a client of workspace ``root``, or None: a ``.env*``
    name (of the file or a directory on its way), a real location outside ``root`` or named
    ``.env*``. The real location is the one the system opens: links are followed before a
    ``..`` after them is applied (``link/../x`` is ``x`` beside the link's target, not beside
    the link). Performs only ``realpath`` (lstat/readlink) calls."""
    return _refusal(os.path.realpath(os.fspath(root)), os.fspath(path), os.path.realpath(os.fspath(path)))


def _refusal(top: str, path: str, real: str) -> str | None:
    """``workspace_file_refusal`` of ``path`` whose real location is ``real``, in a workspace
    whose real location is ``top``."""
    if any(is_dotenv(part) for part in Path(os.path.abspath(path)).parts):
        return "a .env file"
    if is_dotenv(real) or any(is_dotenv(part) for part in Path(real).parts):
        return "a link to a .env file"
    if not _inside(real, top):
        return "outside the workspace"
    return None


def read_workspace_file(root: str | Path, path: str | Path, limit: int | None = None) -> bytes:
    """The bytes of ``path`` for a client of workspace ``root``: ``workspace_file_refusal``
    checked before anything is opened, then ``read_regular_file(real path, limit)`` of the real
    path that was checked. Raises ``RefusedFile`` or ``OSError``. Blocking file I/O: call it off
    the event loop."""
    real = os.path.realpath(os.fspath(path))
    why = _refusal(os.path.realpath(os.fspath(root)), os.fspath(path), real)
    if why is not None:
        raise RefusedFile(errno.EACCES, why, os.fspath(path))
    return read_regular_file(real, limit)


def read_text(data: bytes) -> str:
    """Decode source bytes: UTF-8 (a UTF-8/UTF-16 BOM is honoured and removed), else the
    PEP 263 coding cookie of the first two lines, else UTF-8 with U+FFFD replacements.
    Never raises."""
    if data.startswith(codecs.BOM_UTF8):
        return data[3:].decode("utf-8", errors="replace")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    for line in data.split(b"\n", 2)[:2]:
        m = _CODING.match(line)
        if m:
            try:
                return data.decode(m.group(1).decode("ascii"), errors="replace")
            except LookupError:
                break
    return data.decode("utf-8", errors="replace")


def _code_like(line: bytes) -> bool:
    """A long line that reads as code (minified code is dense with punctuation), not as one
    long string, data or comment."""
    return sum(line.count(c) for c in (b";", b"{", b"}", b"(", b")", b",")) * 100 >= len(line)


def classify_file(path: Path, data: bytes, max_file_bytes: int) -> str | None:
    """None if ``data`` (the content of ``path``) is indexable, else the skip reason:
    ``"larger than N bytes"``, ``"binary"`` (NUL bytes, a known magic number, or > 10 %
    control bytes), ``"minified"`` (``*.min.*`` name, average line > 1000 chars, or at
    least half the bytes on lines longer than 5000 chars that read as code: at least one
    ``;{}(),`` per 100 bytes — a long string or data literal is not minified code, e.g. zod's
    ``string.test.ts`` with one 32,333-character line of emoji) or, for JS/TS, ``"generated
    bundle (...)"`` (see ``generated_js``)."""
    if len(data) > max_file_bytes:
        return f"larger than {max_file_bytes} bytes"
    if b"\x00" in data or data.startswith(_BINARY_MAGIC):
        return "binary"
    head = data[:8192]
    if head and len(head) - len(head.translate(None, _CONTROL)) > len(head) // 10:
        return "binary"
    if ".min." in os.path.basename(os.fspath(path)):
        return "minified"
    lines = data.count(b"\n") + 1
    if len(data) / lines > 1000:
        return "minified"
    if len(data) > 5000 and sum(len(x) for x in data.split(b"\n")
                                if len(x) > 5000 and _code_like(x)) * 2 >= len(data):
        return "minified"
    if LANGS.get(os.path.splitext(os.fspath(path))[1].lower()) in ("javascript", "typescript"):
        return generated_js(data)
    return None


_BUNDLE_MARKERS = ((b"__webpack_require__", "webpack"), (b"__webpack_modules__", "webpack"),
                   (b"/******/", "webpack"), (b"System.register(", "SystemJS"), (b"parcelRequire", "parcel"))


def generated_js(data: bytes) -> str | None:
    """A skip reason for generated JavaScript, else None: an ``@generated`` marker in the first
    kilobyte, a bundler's runtime (webpack, SystemJS, parcel) in the first 4 KB, or compiler
    output that ends with a ``//# sourceMappingURL=`` line. Plain byte searches, no parsing."""
    if b"@generated" in data[:1024]:
        return "generated (@generated marker)"
    head = data[:4096]
    for marker, bundler in _BUNDLE_MARKERS:
        if marker in head:
            return f"generated bundle ({bundler})"
    tail = data.rstrip()[-1024:]
    last = tail.rsplit(b"\n", 1)[-1].strip()
    if last.startswith((b"//# sourceMappingURL=", b"//@ sourceMappingURL=")):
        return "generated (compiled output with a source map)"
    return None


BUILD_OUTPUT_DIRS = ("dist", "build", "out")  # default ``Settings.build_output_dirs``
_BUILD_EXTS = (".d.ts", ".d.mts", ".d.cts", ".js", ".mjs", ".cjs", ".jsx")  # longest first per stem
_TS_SOURCES = (".ts", ".tsx", ".mts", ".cts")
_SOURCES = _TS_SOURCES + (".js", ".jsx", ".mjs", ".cjs")


class BuildOutput:
    """Tells build output from sources, by paths only (``stat`` calls, cached per directory):

    - a declaration file beside its source (``a.d.ts`` beside ``a.ts``/``a.tsx``/``a.js``,
      ``.d.mts`` beside ``.mts``/``.mjs``, ``.d.cts`` beside ``.cts``/``.cjs``), and compiled
      JavaScript beside its TypeScript
      source (``a.js`` beside ``a.ts``, ``.mjs`` beside ``.mts``, ``.cjs`` beside ``.cts``);
    - under a directory named in ``dirs`` (``dist``, ``build``, ``out``) beside a ``src/``, a
      file whose module (path without its build extension, below the build directory or one
      level further: ``dist/esm/…``) is a module of that ``src/``;
    - in a package (a directory with ``package.json`` and a ``src/`` of TypeScript), a
      ``.js``/``.cjs``/``.mjs``/``.d.ts``… file outside ``src/`` whose module is a TypeScript
      module of ``src/`` (zod ships ``v3/types.js`` and ``v3/types.d.cts`` built from
      ``src/v3/types.ts``).

    ``source(rel)`` is the source file a build output was made from, else None. The walk also
    skips the other files of a build directory found mirroring a ``src/`` (``mirrors``: bundler
    chunks, helpers)."""

    def __init__(self, root: str, dirs=BUILD_OUTPUT_DIRS):
        self.root = root
        self.dirs = frozenset(dirs)
        self._isdir: dict[str, bool] = {}
        self._isfile: dict[str, bool] = {}
        self.mirrors: dict[str, str] = {}  # build directories found mirroring a src/ -> that src/
        self._scanned: set[str] = set()  # build directories ``in_mirror`` listed

    def _dir(self, rel: str) -> bool:
        hit = self._isdir.get(rel)
        if hit is None:
            hit = self._isdir[rel] = os.path.isdir(os.path.join(self.root, *rel.split("/")))
        return hit

    def _file(self, rel: str) -> bool:
        hit = self._isfile.get(rel)
        if hit is None:
            hit = self._isfile[rel] = os.path.isfile(os.path.join(self.root, *rel.split("/")))
        return hit

    def _module(self, stem: str, exts) -> str | None:
        return next((stem + e for e in exts if self._file(stem + e)), None)

    def source(self, rel: str) -> str | None:
        low = rel.lower()
        ext = next((e for e in _BUILD_EXTS if low.endswith(e)), None)
        if ext is None:
            return None
        stem = rel[:-len(ext)]
        beside = {".d.ts": (".ts", ".tsx", ".js", ".jsx"), ".d.mts": (".mts", ".mjs"), ".d.cts": (".cts", ".cjs"),
                  ".js": (".ts", ".tsx"),
                  ".jsx": (".tsx",), ".mjs": (".mts",), ".cjs": (".cts",)}[ext]
        hit = self._module(stem, beside)
        if hit:  # ``a.d.ts`` beside ``a.js``, itself built from ``src/a.ts``: that one
            return (self.source(hit) if hit.endswith(_BUILD_EXTS) else None) or hit
        parts = stem.split("/")
        for i in range(len(parts) - 1, -1, -1):  # ancestors, nearest first ("" is the root)
            base = "/".join(parts[:i])
            src = f"{base}/src" if base else "src"
            if parts[i] == "src" or not self._dir(src):
                continue
            rest = parts[i:]
            if rest[0] in self.dirs:
                for k in (1, 2):
                    if len(rest) > k:
                        hit = self._module(src + "/" + "/".join(rest[k:]), _SOURCES)
                        if hit:
                            self.mirrors[f"{base}/{rest[0]}" if base else rest[0]] = src
                            return hit
            elif self._file(f"{base}/package.json" if base else "package.json"):
                hit = self._module(src + "/" + "/".join(rest), _TS_SOURCES)
                if hit:
                    return hit
        return None

    def in_mirror(self, rel: str) -> str | None:
        """The build directory ``rel`` lies in when that directory mirrors a ``src/`` (one of its
        first 2,000 files is the build output of a ``src/`` module: found by listing it once per
        instance), else None. For single paths (the file watcher); the walk finds the same."""
        parts = rel.split("/")
        for i in range(len(parts) - 2, -1, -1):
            if parts[i] not in self.dirs:
                continue
            base = "/".join(parts[:i])
            top = f"{base}/{parts[i]}" if base else parts[i]
            if top in self.mirrors:
                return top
            if top in self._scanned or not self._dir(f"{base}/src" if base else "src"):
                continue
            self._scanned.add(top)
            seen = 0
            for d, _, names in os.walk(os.path.join(self.root, *top.split("/"))):
                for n in names:
                    seen += 1
                    r = os.path.relpath(os.path.join(d, n), self.root).replace(os.sep, "/")
                    if self.source(r) is not None and top in self.mirrors:
                        return top
                if seen >= 2000:
                    break
        return None

    def reason(self, rel: str) -> str | None:
        """The skip reason of a build output (``"declarations of src/a.ts"``, ``"build output of
        src/a.ts"``), else None."""
        src = self.source(rel)
        if src is None:
            return None
        return ("declarations of " if ".d." in rel.rsplit("/", 1)[-1].lower() else "build output of ") + src


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class _Rules:
    """Exclusion rules shared by the walk and ``WorkspaceFilter``."""

    def __init__(self, root: Path, exclude, revalidate: bool, build_output=BUILD_OUTPUT_DIRS):
        self.root = str(Path(root).resolve())
        # build output is skipped (``BuildOutput``) unless ``build_output`` is None
        self.build = BuildOutput(self.root, build_output) if build_output is not None else None
        self.extra = pathspec.GitIgnoreSpec.from_lines(list(exclude)) if exclude else None
        self.revalidate = revalidate  # re-stat .gitignore files (watcher) or cache (walk)
        self._specs: dict[str, tuple[tuple, object]] = {}

    def spec(self, base: str):
        """The parsed ``.gitignore`` of directory ``base`` (rel), or None."""
        cached = self._specs.get(base)
        if cached is not None and not self.revalidate:
            return cached[1]
        p = os.path.join(self.root, base, ".gitignore")
        try:
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                real = os.path.realpath(p)
                if is_dotenv(real) or not _inside(real, self.root):
                    raise OSError("unsafe .gitignore link")
                st = os.stat(real)
        except OSError:
            self._specs[base] = ((), None)
            return None
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if cached is not None and cached[0] == key:
            return cached[1]
        spec = None
        if stat.S_ISREG(st.st_mode):
            try:
                with open(p, "rb") as f:
                    spec = pathspec.GitIgnoreSpec.from_lines(read_text(f.read()).splitlines())
            except (OSError, ValueError) as e:
                log.warning("cannot read %s: %s", p, e)
        self._specs[base] = (key, spec)
        return spec

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """True if ``rel`` is ignored by the .gitignore files of its ancestors or by the extra
        patterns (the last decisive match wins). Ancestors themselves are not checked."""
        parts = rel.split("/")
        slash = "/" if is_dir else ""
        decision = None
        for i in range(len(parts)):
            spec = self.spec("/".join(parts[:i]))
            if spec is not None:
                res = spec.check_file("/".join(parts[i:]) + slash)
                if res.include is not None:
                    decision = res.include
        if self.extra is not None:
            res = self.extra.check_file(rel + slash)
            if res.include is not None:
                decision = res.include
        return bool(decision)

    def builtin_excluded(self, rel: str) -> bool:
        """True if a directory of ``rel`` is a built-in exclude, a ``.env*`` or holds
        ``pyvenv.cfg``."""
        dirs = rel.split("/")[:-1]
        return any(d in EXCLUDED_DIRS or is_dotenv(d) or os.path.exists(
            os.path.join(self.root, *dirs[:i + 1], "pyvenv.cfg")) for i, d in enumerate(dirs))


def walk_workspace(root: Path, max_file_bytes: int = 2_000_000, exclude: list[str] = (),
                   classify: bool = True, build_output=BUILD_OUTPUT_DIRS) -> WalkResult:
    """Walk ``root`` (see the module docstring for the rules) and return a ``WalkResult``.
    ``build_output``: the build directory names of ``BuildOutput`` (build output is skipped
    with its reason), or None to index build output too.
    With ``classify=False`` files are not opened: only the size limit is applied here and the
    caller, which reads each file anyway, runs ``classify_file`` on the bytes it reads.
    Unreadable files are skipped with an ``"unreadable: ..."`` reason; unreadable
    directories are logged and left out. Raises ``NotADirectoryError`` if ``root`` is not
    a directory."""
    rules = _Rules(root, exclude, revalidate=False, build_output=build_output)
    top = rules.root
    if not os.path.isdir(top):
        raise NotADirectoryError(top)
    res = WalkResult(root=Path(top))
    visited: dict[str, str] = {top: ""}          # real dir -> rel under which it was walked
    seen_files: set[str] = set()                 # real paths of files listed or skipped
    stack: list[tuple[str, str, str]] = [(top, "", top)]  # (abs as reached, rel, real)
    links: list[tuple[str, str, str, bool]] = []  # (rel, abs, real target, is_dir)

    def add_file(rel: str, abs_: str, real: str, size: int) -> None:
        seen_files.add(real)
        built = rules.build.reason(rel) if rules.build is not None else None
        if built is not None:
            reason = built
        elif size > max_file_bytes:
            reason = f"larger than {max_file_bytes} bytes"
        elif not classify:
            reason = None
        else:
            try:
                data = read_regular_file(abs_)
                reason = classify_file(Path(abs_), data, max_file_bytes)
            except OSError as e:
                reason = f"unreadable: {e.strerror or e}"
        if reason is None:
            res.files.append(SourceFile(rel, Path(abs_), LANGS[os.path.splitext(rel)[1]], size))
        else:
            res.skipped.append((rel, reason))
            if built is None:  # build output is listed, not logged one by one
                (log.warning if reason.startswith("larger") else log.info)("skipped %s: %s", rel, reason)

    while stack or links:
        if not stack:  # all reachable real dirs walked: consider symlinks in sorted order
            rel, abs_, real, is_dir = heapq.heappop(links)
            target = os.path.relpath(real, top).replace(os.sep, "/") + ("/x" if is_dir else "")
            if is_dir and real in visited:
                res.aliases[rel] = visited[real]
            elif is_dir and not rules.builtin_excluded(target):
                visited[real] = rel
                stack.append((abs_, rel, real))
            elif not is_dir and real not in seen_files and not rules.builtin_excluded(target):
                try:
                    add_file(rel, abs_, real, os.stat(real).st_size)
                except OSError:
                    pass
            continue
        d_abs, d_rel, d_real = stack.pop()
        try:
            with os.scandir(d_abs) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            log.warning("cannot list %s: %s", d_rel or ".", e)
            continue
        if d_rel and any(e.name == "pyvenv.cfg" for e in entries):
            continue  # a virtualenv
        subdirs = []
        for e in entries:
            name = e.name
            if is_dotenv(name):
                continue  # never touched
            rel = f"{d_rel}/{name}" if d_rel else name
            try:
                if e.is_symlink():
                    real = os.path.realpath(e.path)
                    if is_dotenv(real) or not _inside(real, top):
                        continue
                    st = os.stat(real)  # raises for dangling links and loops
                    is_dir = stat.S_ISDIR(st.st_mode)
                    if not (is_dir or (stat.S_ISREG(st.st_mode) and os.path.splitext(name)[1] in LANGS)):
                        continue
                    if not (is_dir and name in EXCLUDED_DIRS) and not rules.ignored(rel, is_dir):
                        heapq.heappush(links, (rel, e.path, real, is_dir))
                elif e.is_dir(follow_symlinks=False):
                    real = os.path.join(d_real, name)
                    if name not in EXCLUDED_DIRS and real not in visited and not rules.ignored(rel, True):
                        visited[real] = rel
                        subdirs.append((e.path, rel, real))
                elif e.is_file(follow_symlinks=False) and os.path.splitext(name)[1] in LANGS:
                    real = os.path.join(d_real, name)
                    if real not in seen_files and not rules.ignored(rel, False):
                        add_file(rel, e.path, real, e.stat(follow_symlinks=False).st_size)
            except OSError as err:
                log.debug("ignoring %s: %s", rel, err)
        stack.extend(reversed(subdirs))
    if rules.build is not None and rules.build.mirrors:
        mirrors = rules.build.mirrors
        kept = []
        for f in res.files:
            top = next((d for d in mirrors if f.rel.startswith(d + "/")), None)
            if top is None:
                kept.append(f)
            else:
                res.skipped.append((f.rel, f"build output ({top}/ mirrors {mirrors[top]}/)"))
        res.files = kept
    res.files.sort(key=lambda f: f.rel)
    res.skipped.sort()
    return res


class WorkspaceFilter:
    """Decides for one path (watcher event, single-file re-index) whether the walk would list
    it, without reading it: a source extension, inside ``root``, not a ``.env*`` (nor a link
    to one), not excluded by built-in rules, ``.gitignore`` files (re-read when changed) or
    ``exclude``. A path through a symlink is accepted only if its real in-root target would
    not be walked under its own path (so a file is not indexed under two names)."""

    def __init__(self, root: Path, exclude: list[str] = (), build_output=BUILD_OUTPUT_DIRS):
        self._rules = _Rules(root, exclude, revalidate=True, build_output=build_output)
        self.root = Path(self._rules.root)
        self._given = os.path.abspath(root)

    def _rel(self, p: str) -> str | None:
        for base in (self._rules.root, self._given):
            if _inside(p, base) and p != base:
                return os.path.relpath(p, base).replace(os.sep, "/")
        return None

    def _lexically_ok(self, rel: str) -> bool:
        if os.path.splitext(rel)[1] not in LANGS or self._rules.builtin_excluded(rel):
            return False
        build = self._rules.build
        if build is not None and rel.endswith(_BUILD_EXTS):
            build._isfile.clear()  # files come and go between events
            build._isdir.clear()
            if build.source(rel) is not None or build.in_mirror(rel) is not None:
                return False
        parts = rel.split("/")
        return not any(self._rules.ignored("/".join(parts[:i]), True) for i in range(1, len(parts))) \
            and not self._rules.ignored(rel, False)

    def accepts(self, path: Path) -> bool:
        """True if ``path`` (absolute, or relative to the root) is a file the walk would list
        (content checks aside). Performs only stat/readlink calls and reads .gitignore files."""
        p = os.path.abspath(os.path.join(self._given, os.fspath(path)))
        rel = self._rel(p)
        if rel is None or is_dotenv(rel) or not self._lexically_ok(rel):
            return False
        if os.path.islink(p) and not os.path.exists(p):
            return False  # dangling link or loop (a deleted path is not a link: accepted)
        real = os.path.realpath(p)
        if is_dotenv(real) or not _inside(real, self._rules.root) or os.path.isdir(real):
            return False
        lexical = os.path.join(self._rules.root, *rel.split("/"))
        if real == lexical:
            return True
        # reached through a symlink: accepted only if the real file is not walked itself
        real_rel = os.path.relpath(real, self._rules.root).replace(os.sep, "/")
        if self._rules.builtin_excluded(real_rel):
            return False
        return not self._lexically_ok(real_rel)
