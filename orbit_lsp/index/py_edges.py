"""What Python (and JS/TS) resolution produces for one file (``FileEdges``: imports, packages,
CALLS and INHERITS edges, unbound calls, the entities consulted, value flows) and the names the
graph gives modules and symbols (``module_name``, ``full_qual``) and packages (``package_info``)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import lru_cache

from orbit_lsp.index.py_facts import compact_pickle

_JS_EXTS = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")
STDLIB = frozenset(sys.stdlib_module_names)


@lru_cache(maxsize=1)
def _distributions() -> dict[str, list[str]]:
    try:
        from importlib.metadata import packages_distributions

        return packages_distributions()
    except Exception:  # noqa: BLE001 - broken metadata in the environment must not stop indexing
        return {}


def package_info(top: str) -> tuple[str, bool, str]:
    """``(name, stdlib, dist)`` of a top-level import name; ``dist`` is the distribution name
    when the running environment knows it, else ``""``. A Node built-in (``node:fs``, from
    JS/TS files) is ``stdlib``; an npm package comes as ``npm:<name>`` (kept apart from Python
    names such as ``queue`` or ``test``): its name is ``<name>``, so is its ``dist``."""
    if top.startswith("node:"):
        return top, True, ""
    if top.startswith("npm:"):
        return top[4:], False, top[4:]
    dists = _distributions().get(top) or []
    return top, top in STDLIB, dists[0] if dists else ""


@lru_cache(maxsize=1 << 16)
def module_name(rel: str, root_package: str = "") -> str:
    """Dotted module name of a workspace path: ``app/jenkins/build_tree.py`` ->
    ``app.jenkins.build_tree``; ``pkg/__init__.py`` -> ``pkg``; a leading ``src/`` is dropped
    (``src`` layouts). When the workspace root is itself a package (``root_package``, its
    directory name), names are prefixed with it, as Python would import them. Memoised: a full
    build asks it once a symbol (~490,000 times for ~22,000 files on the scale corpus)."""
    path = rel[:-3] if rel.endswith(".py") else rel
    if path.endswith("/__init__") or path == "__init__":
        path = path[: -len("__init__")].rstrip("/")
    if path.startswith("src/"):
        path = path[4:]
    dotted = path.replace("/", ".")
    if root_package:
        return f"{root_package}.{dotted}" if dotted else root_package
    return dotted


def full_qual(rel: str, qual: str, root_package: str = "") -> str:
    """Workspace-wide qualified name of a symbol (``module.Class.method``; JS/TS:
    ``path#Class.method``, the file's own module symbol ``path``)."""
    if rel.lower().endswith(_JS_EXTS):
        return f"{rel}#{qual}" if qual else rel
    mod = module_name(rel, root_package)
    if not qual:
        return mod or rel
    return f"{mod}.{qual}" if mod else qual


def receiver_kind(value) -> str:
    """``CALLS.resolved`` of a call through an attribute, by what its receiver evaluates to:
    module | class | instance, else attribute (both languages' resolvers). A union whose
    members are all of one of those kinds (instances of several classes) is of that kind."""
    if value is not None and value[0] == "union" and value[1] and not value[2]:
        kinds = {receiver_kind(m) for m in value[1]}
        return kinds.pop() if len(kinds) == 1 else "attribute"
    if value is not None:
        if value[0] == "mod":
            return "module"
        if value[0] == "sym" and value[3] == "class":
            return "class"
        if value[0] == "inst":
            return "instance"
    return "attribute"



@compact_pickle
@dataclass(slots=True)
class CallEdge:
    src_qual: str
    dst_file: str
    dst_qual: str
    resolved: str
    # the sites, in source order: lists while the file is resolved, tuples once it is
    # (``FileEdges.sort_sites``): 48 bytes a tuple of one site against 88 a list (most edges
    # have one site; ~90 MB on 700,000 edges)
    lines: list[int] | tuple[int, ...] = field(default_factory=list)
    cols: list[int] | tuple[int, ...] = field(default_factory=list)
    end_cols: list[int] | tuple[int, ...] = field(default_factory=list)


@compact_pickle
@dataclass(slots=True)
class FileEdges:
    """Resolution result of one file (in-file quals; the writer adds module names)."""

    imports: dict[str, int] = field(default_factory=dict)  # dst path -> first line
    packages: dict[str, int] = field(default_factory=dict)  # top-level name -> first line
    calls: dict[tuple, CallEdge] = field(default_factory=dict)  # (src, dst_file, dst) -> edge
    inherits: list[tuple[str, str, str]] = field(default_factory=list)  # (src, dst_file, dst)
    unresolved: dict[str, list[str]] = field(default_factory=dict)  # caller qual -> called names
    unresolved_imports: list[str] = field(default_factory=list)  # "line:module"
    deps: frozenset[tuple] = frozenset()  # (file, unit) of other files consulted (``interface_units``)
    unresolved_lines: dict[str, list[int]] = field(default_factory=dict)  # caller qual -> line of
    #   each unbound call site, in the order of ``unresolved``
    flows: dict[tuple, tuple] = field(default_factory=dict)  # (dst file, dst qual) -> flows into its
    #   parameters from this file's call sites (see the module doc)
    type_only: set[str] = field(default_factory=set)  # dst paths of ``imports`` imported for types
    #   only (TypeScript ``import type`` …: no run-time dependency; IMPORTS.type_only)
    inherit_deps: frozenset | None = None  # entities the evaluation of its classes' bases consulted
    #   (``ClassModel.seed_inherits``; None: not recorded, in edges cached by an older version)

    def add_call(self, caller: str, dst_file: str, dst_qual: str, resolved: str, site) -> None:
        """Record one bound call site (``site``: ``line``, ``col``, ``end_col``) on the edge from
        ``caller`` to ``dst_file``'s ``dst_qual`` (one edge per pair, its sites in lists)."""
        k = (caller, dst_file, dst_qual)
        e = self.calls.get(k)
        if e is None:
            e = self.calls[k] = CallEdge(caller, dst_file, dst_qual, resolved)
        e.lines.append(site.line)
        e.cols.append(site.col)
        e.end_cols.append(site.end_col)

    def sort_sites(self) -> None:
        """Put every edge's call sites in source order (by line, then column): extraction that
        visits nested functions after their parent's other calls appends them out of order.
        The sites become tuples: the file's resolution is complete (no ``add_call`` after)."""
        for e in self.calls.values():
            lines, cols, ends = e.lines, e.cols, e.end_cols
            if any(lines[i] > lines[i + 1] for i in range(len(lines) - 1)):
                order = sorted(range(len(lines)), key=lambda i: (lines[i], cols[i]))
                lines, cols, ends = [lines[i] for i in order], [cols[i] for i in order], [ends[i] for i in order]
            e.lines, e.cols, e.end_cols = tuple(lines), tuple(cols), tuple(ends)

    def key(self) -> tuple:
        """Comparable form (everything but ``deps``)."""
        return (tuple(sorted(self.imports.items())), tuple(sorted(self.packages.items())),
                tuple(sorted((k, tuple(e.lines), tuple(e.cols), tuple(e.end_cols), e.resolved)
                             for k, e in self.calls.items())),
                tuple(sorted(self.inherits)),
                tuple(sorted((k, tuple(v)) for k, v in self.unresolved.items())),
                tuple(self.unresolved_imports),
                tuple(sorted((k, tuple(v)) for k, v in self.unresolved_lines.items())),
                tuple(sorted(self.type_only)))
