"""Directories Python code adds to ``sys.path``, found statically: what ``python.extract`` records
of one file (``sys_path_dirs``) and what pytest's ``pythonpath`` option adds for every file
(``pytest_pythonpath``). ``py_modules.ModuleLookup`` looks imports up under them.

Followed in a file (the directory must be computable from the file's own location):

- ``sys.path.insert(i, d)``, ``sys.path.append(d)``, ``sys.path.extend([d, ...])``,
  ``sys.path[:0] = [d, ...]`` (any slice assignment), ``sys.path += [d, ...]``,
  ``sys.path = [d, ...] + sys.path``, ``site.addsitedir(d)``, ``<x>.syspath_prepend(d)``
  (pytest's ``monkeypatch``/``pytester``);
- ``d`` built from ``__file__`` with ``os.path.dirname/abspath/realpath/normpath/join``
  (and ``os.pardir``, ``os.curdir``, ``os.sep``),
  ``Path(...)``/``.parent``/``.parents[N]``/``/ "x"``/``.joinpath``/``.resolve()``/``.absolute()``,
  ``str()``/``os.fspath()``, ``+`` and f-strings with string literals, and names bound (anywhere
  in the file, every binding agreeing) to such expressions.

Not followed: a path that does not start from ``__file__`` (a relative literal such as
``"lib"`` or ``os.path.abspath("..")`` is relative to the process's working directory, which
the source does not tell: pytest, a script and Sphinx each run from elsewhere), environment
variables, ``os.getcwd()``, values computed by calls to other functions, and directories outside
the workspace.
"""

from __future__ import annotations

import ast
import configparser
import os
import posixpath
import shlex
import tomllib
from pathlib import Path

# a path value is a string; ``__file__`` is ``_ROOT + "/" + rel`` (absolute, as at run time)
_ROOT = "/\x00orbit-root"
_OS_PATH_RECEIVERS = frozenset({"path", "osp", "op", "ospath", "_osp", "_path"})
_OS_PATH_FUNCS = frozenset({"dirname", "abspath", "realpath", "normpath", "join"})
_PATH_CLASSES = frozenset({"Path", "PurePath", "PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath"})
_SAME_PATH_METHODS = frozenset({"resolve", "absolute", "expanduser"})
_OS_CONSTANTS = {"pardir": "..", "curdir": ".", "sep": "/"}  # ``os.pardir``…, POSIX spelling
SYS_PATH_METHODS = frozenset({"insert", "append", "extend"})  # on ``sys.path``
OTHER_PATH_CALLS = frozenset({"syspath_prepend", "addsitedir"})  # ``monkeypatch.…``, ``site.…``
_UNKNOWN = None


def is_sys_path(node: ast.AST) -> bool:
    """``sys.path`` spelled as such."""
    return (node.__class__ is ast.Attribute and node.attr == "path"
            and node.value.__class__ is ast.Name and node.value.id == "sys")


def added_by_call(func: ast.Attribute, node: ast.Call) -> list[ast.AST]:
    """The directory expressions a call adds to ``sys.path`` (``func``: its callee, an attribute
    whose name is in ``SYS_PATH_METHODS`` or ``OTHER_PATH_CALLS``); [] when it is not such a call."""
    attr, args = func.attr, node.args
    if attr in SYS_PATH_METHODS:
        if not is_sys_path(func.value):
            return []
        if attr == "insert":
            return [args[1]] if len(args) == 2 else []
        if attr == "append":
            return [args[0]] if len(args) == 1 else []
        return _elements(args[0]) if len(args) == 1 else []
    if attr == "addsitedir":
        ok = func.value.__class__ is ast.Name and func.value.id == "site"
        return [args[0]] if ok and args else []
    return [args[0]] if len(args) == 1 else []  # syspath_prepend


def added_by_assign(targets: list[ast.AST], value: ast.AST) -> list[ast.AST]:
    """Directory expressions of ``sys.path[a:b] = [...]`` and ``sys.path = [...] + sys.path``."""
    out: list[ast.AST] = []
    for t in targets:
        if t.__class__ is ast.Subscript and t.slice.__class__ is ast.Slice and is_sys_path(t.value):
            out.extend(_elements(value))
        elif is_sys_path(t) and value.__class__ is ast.BinOp and value.op.__class__ is ast.Add:
            for side in (value.left, value.right):
                if not is_sys_path(side):
                    out.extend(_elements(side))
    return out


def added_by_augassign(target: ast.AST, value: ast.AST) -> list[ast.AST]:
    """Directory expressions of ``sys.path += [...]``."""
    return _elements(value) if is_sys_path(target) else []


def _elements(node: ast.AST) -> list[ast.AST]:
    if node.__class__ in (ast.List, ast.Tuple):
        return [e for e in node.elts if e.__class__ is not ast.Starred]
    return []


def _bindings(tree: ast.AST) -> dict[str, list[ast.AST]]:
    """Every simple binding of a name in the file (``x = …``, ``x: T = …``, ``x := …``); a name
    also bound otherwise (loop target, parameter, unpacking, ``global`` games) gets None."""
    env: dict[str, list] = {}
    for node in ast.walk(tree):
        cls = node.__class__
        if cls is ast.Assign:
            for t in node.targets:
                if t.__class__ is ast.Name:
                    env.setdefault(t.id, []).append(node.value)
                else:
                    for n in ast.walk(t):
                        if n.__class__ is ast.Name:
                            env.setdefault(n.id, []).append(None)
        elif cls in (ast.AnnAssign, ast.NamedExpr) and node.target.__class__ is ast.Name:
            env.setdefault(node.target.id, []).append(node.value)
        elif cls is ast.AugAssign and node.target.__class__ is ast.Name:
            env.setdefault(node.target.id, []).append(None)
        elif cls in (ast.For, ast.AsyncFor, ast.comprehension):
            for n in ast.walk(node.target):
                if n.__class__ is ast.Name:
                    env.setdefault(n.id, []).append(None)
        elif cls is ast.arg:
            env.setdefault(node.arg, []).append(None)
    return env


class _Evaluator:
    """Evaluates path expressions of one file: ``("s", text)`` a string, ``("p", text)`` a
    ``pathlib`` path, or None (unknown)."""

    def __init__(self, rel: str, tree: ast.AST):
        self.file = f"{_ROOT}/{rel}"
        self.tree = tree
        self.env: dict[str, list] | None = None
        self.active: set[str] = set()

    def name(self, name: str):
        if name == "__file__":
            return ("s", self.file)
        if self.env is None:
            self.env = _bindings(self.tree)
        values = self.env.get(name)
        if not values or name in self.active or any(v is None for v in values):
            return _UNKNOWN
        self.active.add(name)
        try:
            got = {self.ev(v) for v in values}
        finally:
            self.active.discard(name)
        return got.pop() if len(got) == 1 else _UNKNOWN

    def ev(self, node: ast.AST):
        cls = node.__class__
        if cls is ast.Constant:
            return ("s", node.value) if isinstance(node.value, str) else _UNKNOWN
        if cls is ast.Name:
            return self.name(node.id)
        if cls is ast.Call:
            return self.call(node)
        if cls is ast.BinOp:
            left, right = self.ev(node.left), self.ev(node.right)
            if left is None or right is None:
                return _UNKNOWN
            if node.op.__class__ is ast.Div and left[0] == "p":
                return ("p", posixpath.join(left[1], right[1]))
            if node.op.__class__ is ast.Add and left[0] == right[0] == "s":
                return ("s", left[1] + right[1])
            return _UNKNOWN
        if cls is ast.JoinedStr:
            parts = []
            for v in node.values:
                if v.__class__ is ast.FormattedValue:
                    if v.format_spec is not None or v.conversion not in (-1, ord("s")):
                        return _UNKNOWN
                    got = self.ev(v.value)
                else:
                    got = self.ev(v)
                if got is None:
                    return _UNKNOWN
                parts.append(got[1])
            return ("s", "".join(parts))
        if cls is ast.Attribute and node.attr in _OS_CONSTANTS and _is_os(node.value):
            return ("s", _OS_CONSTANTS[node.attr])
        if cls is ast.Attribute and node.attr == "parent":
            got = self.ev(node.value)
            return ("p", posixpath.dirname(_strip(got[1]))) if got is not None and got[0] == "p" else _UNKNOWN
        if (cls is ast.Subscript and node.value.__class__ is ast.Attribute and node.value.attr == "parents"
                and node.slice.__class__ is ast.Constant and type(node.slice.value) is int and node.slice.value >= 0):
            got = self.ev(node.value.value)
            if got is None or got[0] != "p":
                return _UNKNOWN
            p = _strip(got[1])
            for _ in range(node.slice.value + 1):
                p = posixpath.dirname(p)
            return ("p", p)
        return _UNKNOWN

    def call(self, node: ast.Call):
        if node.keywords or any(a.__class__ is ast.Starred for a in node.args):
            return _UNKNOWN
        func, args = node.func, node.args
        if func.__class__ is ast.Name:
            fname, receiver = func.id, None
        elif func.__class__ is ast.Attribute:
            fname, receiver = func.attr, func.value
        else:
            return _UNKNOWN
        if fname in _OS_PATH_FUNCS and (receiver is None or _is_os_path(receiver)):
            vals = [self.ev(a) for a in args]
            if not vals or any(v is None for v in vals):
                return _UNKNOWN
            texts = [v[1] for v in vals]
            if fname == "join":
                return ("s", posixpath.join(*texts))
            if len(texts) != 1:
                return _UNKNOWN
            if fname == "dirname":
                return ("s", posixpath.dirname(texts[0]))
            if not posixpath.isabs(texts[0]):  # relative to the working directory
                return _UNKNOWN
            return ("s", posixpath.normpath(texts[0]))
        if fname in _PATH_CLASSES and (receiver is None or (receiver.__class__ is ast.Name
                                                             and receiver.id == "pathlib")):
            vals = [self.ev(a) for a in args]
            if not vals or any(v is None for v in vals):
                return _UNKNOWN
            return ("p", posixpath.join(*(v[1] for v in vals)))
        if fname in ("str", "fspath") and len(args) == 1 and (
                receiver is None if fname == "str" else (receiver.__class__ is ast.Name and receiver.id == "os")):
            got = self.ev(args[0])
            return ("s", _strip(got[1])) if got is not None else _UNKNOWN
        if receiver is not None and fname in _SAME_PATH_METHODS and not args:
            got = self.ev(receiver)
            if got is None or got[0] != "p" or not posixpath.isabs(got[1]):
                return _UNKNOWN  # a relative path resolves against the working directory
            return ("p", posixpath.normpath(got[1])) if fname == "resolve" else got
        if receiver is not None and fname == "joinpath":
            base = self.ev(receiver)
            vals = [self.ev(a) for a in args]
            if base is None or base[0] != "p" or any(v is None for v in vals):
                return _UNKNOWN
            return ("p", posixpath.join(base[1], *(v[1] for v in vals)))
        return _UNKNOWN


def _is_os(node: ast.AST) -> bool:
    """``os`` or ``os.path`` (both have ``pardir``, ``curdir``, ``sep``)."""
    return (node.__class__ is ast.Name and node.id == "os") or _is_os_path(node)


def _is_os_path(node: ast.AST) -> bool:
    if node.__class__ is ast.Name:
        return node.id in _OS_PATH_RECEIVERS
    return (node.__class__ is ast.Attribute and node.attr == "path" and node.value.__class__ is ast.Name
            and node.value.id == "os")


def _strip(text: str) -> str:
    """A path's text as ``PurePosixPath`` keeps it: no empty or ``.`` parts, ``..`` kept."""
    parts = [p for p in text.split("/") if p and p != "."]
    lead = "/" if text.startswith("/") else ""
    return (lead + "/".join(parts)) or "."


def sys_path_dirs(rel: str, tree: ast.AST, exprs: list[ast.AST]) -> tuple[str, ...]:
    """Workspace-relative directories (``""``: the root; in source order, each once) that
    ``exprs``, the directory expressions of ``rel``'s ``sys.path`` additions, evaluate to
    (see the module docstring). Expressions that cannot be evaluated, or that leave the
    workspace, add nothing."""
    ev = _Evaluator(rel, tree)
    out: list[str] = []
    for node in exprs:
        try:
            got = ev.ev(node)
        except RecursionError:
            got = None
        if got is None or not isinstance(got[1], str):
            continue
        path = posixpath.normpath(got[1])
        if path == _ROOT:
            d = ""
        elif path.startswith(_ROOT + "/"):
            d = path[len(_ROOT) + 1:]
        else:
            continue
        if d not in out:
            out.append(d)
    return tuple(out)


# -- pytest's ``pythonpath`` option ------------------------------------------------------------
PYTEST_CONFIGS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def _ini_option(path: str, section: str, always: bool):
    """``(found, value)``: whether the file is pytest's config file (it has ``section``, or
    ``always``) and its ``pythonpath`` (None when not set)."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return always, None
    if not parser.has_section(section):
        return always, None
    return True, parser.get(section, "pythonpath", fallback=None)


_PYTHONPATH_SEEN: dict[str, tuple] = {}  # root -> (stat of each candidate file, its answer)


def _stat(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def pytest_pythonpath(root: Path | str) -> tuple[str, ...]:
    """``read_pytest_pythonpath`` of ``root``, read again only when one of the candidate files
    changed (by ``stat``: an edit re-indexes without parsing ``pyproject.toml`` each time)."""
    root = os.fspath(root)
    stamps = tuple(_stat(os.path.join(root, n)) for n in PYTEST_CONFIGS)
    seen = _PYTHONPATH_SEEN.get(root)
    if seen is not None and seen[0] == stamps:
        return seen[1]
    got = read_pytest_pythonpath(root)
    if len(_PYTHONPATH_SEEN) > 64:
        _PYTHONPATH_SEEN.clear()
    _PYTHONPATH_SEEN[root] = (stamps, got)
    return got


def read_pytest_pythonpath(root: Path | str) -> tuple[str, ...]:
    """Workspace-relative directories of pytest's ``pythonpath`` option (pytest ≥ 7), from the
    configuration file pytest would use for a run at the workspace ``root``: the first of
    ``pytest.ini``, ``.pytest.ini`` (always theirs), ``pyproject.toml`` with
    ``[tool.pytest.ini_options]`` (or pytest 9's ``[tool.pytest]``), ``tox.ini`` with
    ``[pytest]``, ``setup.cfg`` with ``[tool:pytest]``, in the root directory. Entries are
    relative to that directory; those outside the workspace are left out. A file that does not
    parse counts as having no option (as it would make pytest fail, nothing is guessed)."""
    root = os.fspath(root)
    for name in PYTEST_CONFIGS:
        path = os.path.join(root, name)
        if not os.path.isfile(path):
            continue
        if name == "pyproject.toml":
            try:
                with open(path, "rb") as f:
                    doc = tomllib.load(f)
            except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
                continue
            tool = doc.get("tool", {}).get("pytest") if isinstance(doc.get("tool"), dict) else None
            if not isinstance(tool, dict):
                continue
            opts = tool.get("ini_options") if isinstance(tool.get("ini_options"), dict) else tool
            value = opts.get("pythonpath")
        else:
            section = {"tox.ini": "pytest", "setup.cfg": "tool:pytest"}.get(name, "pytest")
            found, value = _ini_option(path, section, always=name in ("pytest.ini", ".pytest.ini"))
            if not found:
                continue
        return _entries(value)
    return ()


def _entries(value) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            items = shlex.split(value)
        except ValueError:
            return ()
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = value
    else:
        return ()
    out: list[str] = []
    for item in items:
        if posixpath.isabs(item) or os.path.isabs(item):
            continue
        d = posixpath.normpath(item.replace(os.sep, "/"))
        if d == ".":
            d = ""
        if d == ".." or d.startswith("../") or d in out:
            continue
        out.append(d)
    return tuple(out)
