"""Modules for the Python resolver: which workspace file an import names (source roots,
packages, symlinked directories, ``src/`` layouts, ``sys.path`` additions), what a module binds
at its top level (star imports included), and the IMPORTS and USES_PACKAGE edges of a file.

Roots an absolute import is looked up under, in order (``roots_for``): the workspace root, a
``src/`` directory that is not a package, the importer's package root (the first directory up
from it that is not a package: where ``python script.py`` and pytest put it), and pytest's
``pythonpath`` directories. An import none of them resolves (not even its top-level name) is
then looked up under the directories code adds to ``sys.path`` (``_extra_roots``, from
``py_syspath``), which apply:

- to the file that adds them (a script's ``sys.path.insert(0, …)`` before its imports);
- when added by a ``conftest.py`` or a package's ``__init__.py``, to every file in its directory
  and below: pytest imports a directory's conftest (and its fixtures run) before the tests under
  it, a package's ``__init__`` runs before its modules;
- pytest's ``prepend`` import mode also puts each ``conftest.py``'s base directory (its first
  ancestor that is not a package) on ``sys.path``: it applies to the files under the conftest.

``sys.path`` is process-global, so this is an approximation that is right in the common cases
(flask's ``monkeypatch.syspath_prepend`` in a conftest fixture, scripts and conftests that put a
sibling directory on the path). It is wrong where a module adds a directory that modules it
does not contain then import (they run in the same process after it), where a fixture that
adds a directory is used only by some of the tests below its conftest (all of them are bound),
and where a directory put *first* on ``sys.path`` shadows a module the normal roots find (the
normal roots win here). Under these directories only a real module (``name.py`` or a package
with ``__init__.py``) is taken for an import's top-level name: a bare directory of that name
would be a namespace portion that any other ``name`` on ``sys.path`` (the standard library's
``typing`` for a ``tests/typing/`` folder) takes precedence over."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orbit_lsp.index.py_facts import STAR_NAMES_UNREAD
from orbit_lsp.index.py_values import BOTTOM, STARS

if TYPE_CHECKING:
    from orbit_lsp.index.py_facts import PyFacts
    from orbit_lsp.index.py_edges import FileEdges


def canonical_path(path: str, aliases: dict[str, str]) -> str:
    """``path`` with in-workspace symlinked directories (``aliases``: link -> target, both
    workspace-relative) replaced by their targets, links to links followed (8 at most)."""
    for _ in range(8):
        for link, target in aliases.items():
            if path == link or path.startswith(link + "/"):
                path = (target + path[len(link):]).lstrip("/")
                break
        else:
            return path
    return path


_NOT_BOUND = ("<not bound>",)  # no star import binds the name (``ModuleLookup._star_walk``)
FOUND_MAX = 200_000  # answers ``find_module`` and ``roots_for`` keep at most (then forget them all)


class ModuleLookup:
    """Mixed into ``resolve.Resolver`` (whose state and evaluation, ``ev``, it uses)."""

    def _canon(self, path: str) -> str:
        return canonical_path(path, self.aliases)

    def _module_at(self, path: str):
        """('mod', key) for a module at ``path`` (no extension), or None."""
        path = self._canon(path)
        if path + ".py" in self.files:
            return ("mod", path + ".py")
        init = (path + "/__init__.py") if path else "__init__.py"
        if init in self.files:
            return ("mod", init)
        if path in self.dirs:
            return ("mod", path + "/" if path else "")
        return None

    def _package_root(self, rel: str) -> str:
        parts = rel.split("/")[:-1]
        while parts and "/".join(parts) + "/__init__.py" in self.files:
            parts.pop()
        return "/".join(parts)

    def roots_for(self, rel: str) -> tuple[str, ...]:
        """The roots an absolute import in ``rel`` is looked up under, in order (see the module
        docstring); kept per file (``_roots_of``: the module table does not change for a
        resolver's life)."""
        roots = self._roots_of.get(rel)
        if roots is None:
            if len(self._roots_of) >= FOUND_MAX:
                self._roots_of.clear()
            roots = self._roots_of[rel] = tuple(self._roots(rel))
        return roots

    def _roots(self, rel: str) -> list[str]:
        roots = [""]
        if self.src_root:
            roots.append(self.src_root)
        pr = self._package_root(rel)
        if pr not in roots:
            roots.append(pr)
        for d in self.pythonpath:
            if d not in roots:
                roots.append(d)
        return roots

    def scoped_paths(self) -> dict[str, list[str]]:
        """Directory -> the directories the ``sys.path`` additions of its ``conftest.py`` and
        ``__init__.py`` put on the path (and each ``conftest.py``'s base directory: pytest's
        ``prepend`` import mode, see the module docstring), made once per module table (a pass over every file:
        ~10 ms on 22,000 files, which the first edit paid unless ``WorkspaceResolver.prepare``
        made it first)."""
        if self._scoped_paths is None:
            scoped: dict[str, list[str]] = {}
            for f, dirs in sorted(self.sys_paths.items()):
                name = f.rsplit("/", 1)[-1]
                if name in ("conftest.py", "__init__.py"):
                    scoped.setdefault(f.rsplit("/", 1)[0] if "/" in f else "", []).extend(dirs)
            for f in self.files:
                if f == "conftest.py" or f.endswith("/conftest.py"):
                    scoped.setdefault(f.rsplit("/", 1)[0] if "/" in f else "", []).append(self._package_root(f))
            self._scoped_paths = scoped
        return self._scoped_paths

    def _extra_roots(self, rel: str) -> tuple[str, ...]:
        """Directories ``sys.path`` additions put on the path of file ``rel`` (see the module
        docstring), nearest first: its own additions, then those of the ``conftest.py`` and
        ``__init__.py`` files of its directory and of each directory up to the root."""
        got = self._extra_roots_of.get(rel)
        if got is not None:
            return got
        scoped = self.scoped_paths()
        out = list(self.sys_paths.get(rel, ()))
        d = rel.rsplit("/", 1)[0] if "/" in rel else ""
        while True:
            out.extend(scoped.get(d, ()))
            if not d:
                break
            d = d.rsplit("/", 1)[0] if "/" in d else ""
        got = self._extra_roots_of[rel] = tuple(dict.fromkeys(out))
        return got

    def find_module(self, spec: tuple, importer: str):
        """Resolve a module spec (``(base directory or None, dotted name)``, as ``PyFacts``
        records imports) from file ``importer``: ('mod', key) | ('ext', dotted) |
        ('missing', text). Answers are kept (``_found``, at most ``FOUND_MAX``): they depend
        only on the module table, which does not change for a resolver's life (the indexer
        builds a new resolver when a file is added or removed or a ``sys.path`` addition
        changes), and a star-import lookup asks the same ones again for every name."""
        key = (spec, None if spec[0] is not None else importer)  # a relative spec names its base
        got = self._found.get(key)
        if got is None:
            if len(self._found) >= FOUND_MAX:
                self._found.clear()
            got = self._found[key] = self._find_module(spec, importer)
        return got

    def _find_module(self, spec: tuple, importer: str):
        base, dotted = spec
        sub = dotted.replace(".", "/")
        if base == "<outside>":
            return ("missing", "." + dotted)
        if base is not None:
            path = f"{base}/{sub}" if base and sub else (base or sub)
            m = self._module_at(path)
            return m if m else ("missing", dotted or ".")
        if not dotted:
            return ("missing", "")
        top = sub.split("/")[0]
        if self.root_package and top == self.root_package:
            # the workspace root is this package: ``rootpkg.a.b`` is ``a/b`` under the root
            inner = sub[len(top) + 1:]
            m = self._module_at(inner)
            return m if m else ("missing", dotted)
        top_seen = False
        roots = self.roots_for(importer)
        for root in roots:
            path = f"{root}/{sub}" if root else sub
            m = self._module_at(path)
            if m:
                return m
            top_path = f"{root}/{top}" if root else top
            if self._module_at(top_path):
                top_seen = True
        if not top_seen:
            # only on the path ``sys.path`` additions make (see the module docstring)
            for root in self._extra_roots(importer):
                if root in roots:
                    continue
                # a directory without ``__init__.py`` there is at most a namespace portion: a
                # module or package of that name anywhere later on ``sys.path`` (``typing`` for a
                # ``tests/typing/`` folder) wins over it, so only a real module counts
                top_mod = self._module_at(f"{root}/{top}" if root else top)
                if top_mod is None or self.module_file(top_mod) is None:
                    continue
                m = self._module_at(f"{root}/{sub}" if root else sub)
                if m:
                    return m
                top_seen = True
        if top_seen:
            return ("missing", dotted)
        return ("ext", dotted)


    @staticmethod
    def module_file(mod) -> str | None:
        key = mod[1]
        return key if key.endswith(".py") else None

    def submodule(self, mod, name: str):
        key = mod[1]
        if key.endswith("/__init__.py") or key == "__init__.py":
            base = key[: -len("__init__.py")].rstrip("/")
        elif key.endswith("/") or key == "":
            base = key.rstrip("/")
        else:
            return None
        return self._module_at(f"{base}/{name}" if base else name)

    def _star_lookup(self, rel: str, facts: PyFacts, name: str):
        """What ``name`` is bound to through the star imports of file ``rel`` (whose facts are
        ``facts``), as Python runs them: each ``from m import *`` binds the names ``m`` exports
        (its ``__all__``, else its names without a leading underscore: ``_star_exports``) over
        what the earlier ones bound, so the *last* star-imported module that binds the name
        wins, whatever it binds it to. None when none does, or when that module binds it to
        something unknown, or an external module imported after the last one that binds it
        may (unknown). Memoised per (file, name) like an evaluation (``_scc``): a name of a
        package re-exported through a hundred star imports (``networkx``, ``sympy``) is
        searched for once, not once per file that uses it, and star imports that import each
        other are solved as a cycle (its least fixpoint).

        Not modelled: a star import's order against the file's own bindings (a name the file
        binds itself wins, wherever the star import stands), and the submodules a package
        without ``__all__`` exports because it imported them."""
        self._deps.add((rel, STARS))
        if not facts.stars:
            return None
        v = self._scc(("star", rel, name), self._star_walk, rel, facts, name)
        return None if v == _NOT_BOUND else v

    def _star_walk(self, rel: str, facts: PyFacts, name: str):
        """``_star_lookup``'s search, memoised per (file, name): a value, None (bound to
        something unknown) or ``_NOT_BOUND`` (no star import binds the name)."""
        self._deps.add((rel, STARS))  # (the memo entry's own: its value follows the star imports)
        for spec in reversed(facts.stars):  # the last star import that binds the name wins
            m = self.find_module(spec, rel)
            if m[0] == "ext":
                return None  # could come from the external module: unknown
            if m[0] != "mod":
                continue  # (a missing module: the import fails, it binds nothing)
            key = self.module_file(m)
            if key is None:
                continue  # a namespace package: no ``__init__`` to bind anything
            found = self._facts(key)
            if found is None:
                return None  # a file without facts to tell: it may bind the name
            exported = self._star_exports(key, found, name)
            if exported is False:
                continue
            v = self._bound_in(key, found, name)
            if v == _NOT_BOUND or v == BOTTOM:  # (BOTTOM: not bound yet, in a cycle)
                if exported is True:  # a submodule listed in a package's ``__all__``: imported
                    sub = self.submodule(m, name)
                    if sub is not None:
                        return sub
                continue
            return v
        return _NOT_BOUND

    def _bound_in(self, key: str, facts: PyFacts, name: str):
        """What file ``key`` (whose facts are ``facts``) binds ``name`` to at its top level (its
        own bindings first, then its star imports): a value, None (bound to something unknown)
        or ``_NOT_BOUND``."""
        top = facts.scopes[0]
        self._deps.add((key, name))
        if name in top.names:
            return self.combine([self.ev(key, 0, r) for r in top.names[name]])
        self._deps.add((key, STARS))
        if not facts.stars:
            return _NOT_BOUND
        return self._scc(("star", key, name), self._star_walk, key, facts, name)

    def _star_exports(self, key: str, facts: PyFacts, name: str) -> bool | None:
        """Whether ``from <file key> import *`` binds ``name`` (``facts``: the file's): True
        when its ``__all__`` lists it, False when it cannot export it (not in its literal
        ``__all__``; without one, a name with a leading underscore), None when it may (a
        public name of a module without ``__all__``, or whose ``__all__`` is not read)."""
        self._deps.add((key, STARS))  # (its ``star_names`` are part of that entity)
        names = facts.star_names
        if names is None:
            return False if name.startswith("_") else None
        if names == STAR_NAMES_UNREAD:
            return None
        return name in names

    def module_binding(self, mod, name: str):
        """What module ``mod`` binds ``name`` to at its top level (``_bound_in``), None when
        it binds nothing or something unknown, or has no facts to tell."""
        key = self.module_file(mod)
        facts = self._facts(key) if key is not None else None
        if facts is None:
            return None
        v = self._bound_in(key, facts, name)
        return None if v == _NOT_BOUND else v

    def _may_bind(self, mod, name: str) -> bool:
        """Whether module ``mod`` binds ``name`` at its top level, or may: a definition,
        assignment or import of it there, a star import (what it brings is not looked at
        here), a module ``__getattr__``, ``*`` itself, or no facts to tell (a file that never
        parsed). False only when ``from mod import name`` certainly finds nothing in ``mod``'s
        own file."""
        key = self.module_file(mod)
        facts = self._facts(key) if key is not None else None
        if facts is None or name == "*":
            return True
        for unit in (name, "__getattr__", STARS):
            self._deps.add((key, unit))
        top = facts.scopes[0].names
        return name in top or "__getattr__" in top or bool(facts.stars)

    def module_attr(self, mod, name: str):
        v = self.module_binding(mod, name)
        if v is not None and v != BOTTOM:
            return v
        # ``from . import utils`` in a package's __init__ binds its own submodule
        return self.submodule(mod, name) or v

    def _import_edges(self, rel: str, imp, out: FileEdges) -> None:
        spec, names, line = imp.spec, imp.names, imp.line
        if spec[0] is None and spec[1].split(".")[0] == "__future__":
            return
        m = self.find_module(spec, rel)
        if m[0] == "ext":
            top = spec[1].split(".")[0]
            out.packages.setdefault(top, line)
            return
        if m[0] == "missing":
            dots = "" if spec[0] is None else "."
            out.unresolved_imports.append(f"{line}:{dots}{spec[1]}")
            return
        targets = []
        if not names:
            targets.append(self.module_file(m))
        else:
            for n in names:
                sub = self.submodule(m, n) if n != "*" else None
                if sub is not None and self.module_file(sub):
                    targets.append(self.module_file(sub))
                elif self.module_file(m) and self._may_bind(m, n):
                    targets.append(self.module_file(m))
                else:
                    out.unresolved_imports.append(f"{line}:{spec[1]}.{n}")
        for t in targets:
            if t and t != rel:
                out.imports.setdefault(t, line)
