"""Values of the Python resolver (``index/resolve.py``) and the entities its evaluations consult.

A value is a tuple whose first item is its kind: ``("sym", file, qual, kind)`` a workspace
symbol, ``("inst", file, class qual)`` an instance, ``("mod", path)`` a module, ``("ext", name)``
something outside the workspace, ``("union", members, unknown)`` one of several, containers
(``seq``, ``dict``, ``bag``, ``tup``), ``("partial", value)`` (``functools.partial``),
``("wref", value)`` a weak reference (calling it gives ``value``), ``BOTTOM`` (no value yet) and ``TOO_MANY`` (a parameter
past ``MAX_PARAM_VALUES``). None is unknown. Entities are ``(file, unit)`` pairs and the
constants below; a memoised value is forgotten when an entity it consulted changes.
"""

from __future__ import annotations

_OBJECT_ATTRS = frozenset(dir(object))
_MAX_DEPTH = 400  # a safety net against runaway recursion, far above real alias chains

def _unit(qual: str) -> str:
    """The top-level name a qualified name belongs to (``Agent.run`` -> ``Agent``)."""
    return qual.partition(".")[0]


STARS = "*"  # entity of a file's star imports

HAS_FACTS = "<facts>"  # entity of whether a file has facts at all

STORES = "#stores"  # entity of every container store in a file (``c[k] = v``, ``c.append(v)``)

FIXTURES = "#fixtures"  # entity of the pytest fixtures a file defines (their names and functions)

ALL_CLASSES = ("*", "#classes")  # entity: the subclass relation of the whole workspace

PVAL = "~param"  # entities ``(PVAL, file, qual, parameter)``: the value of one parameter of a function


def entity_file(ent: tuple) -> str:
    """The file an entity belongs to (``(file, unit)``; a parameter's ``(PVAL, file, qual,
    name)``; ``ALL_CLASSES`` is its own ``"*"``)."""
    return ent[1] if ent[0] == PVAL else ent[0]


def note_consulter(index: dict[str, set[str]], rel: str, entities) -> None:
    """Add ``rel`` to ``index[entity_file(e)]`` for each entity ``e`` of ``entities`` (what it
    consulted): the file -> consulters indexes (``Incremental._consulters``,
    ``ClassModel._inherit_consulters_index``)."""
    for ent in entities:
        index.setdefault(entity_file(ent), set()).add(rel)


def consulters_of(index: dict[str, set[str]], entities) -> set[str]:
    """The files ``index`` (``note_consulter``'s) holds for the files of ``entities``: a superset
    of those that consulted one of them."""
    return set().union(*(index.get(entity_file(ent), ()) for ent in entities))


MAX_PARAM_VALUES = 16  # a parameter receiving more workspace values than this is taken as unknown

MAX_PARAM_CHANGES = 2 * MAX_PARAM_VALUES + 4  # changes of one function's parameter values per run
#   before it is widened (``Resolver._widen``)

MAX_PARAM_PASSES = 64  # passes of parameter values among themselves per round (``_propagate_params``)

MAX_FLOW_ROUNDS = 12  # a safety net for the value-flow fixpoint (real code converges in a few)

BOTTOM = ("bottom",)  # no value (yet): a binding that only holds itself; never "unknown"

TOO_MANY = ("too-many",)  # a parameter value past MAX_PARAM_VALUES: unknown for binding, and
#   what a parameter receives when it is passed one (the top of parameter values)

EXT_ANY = ("ext", "<external>")  # a value derived from an external one: all alike for binding

_MAX_NESTING = 4  # containers of containers (``bag``, ``tup``, ``partial``, ``wref``) deeper than this are unknown

def _ext(name: str, suffix: str) -> tuple:
    """The external value ``name`` + ``suffix`` (``json.loads`` + ``()``). An attribute of what
    a library name returns (``click.Context()`` + ``.ensure_object``: a method of a library
    instance) is still that library's; anything derived further (``str().decode().strip``, an
    item of a library container, what a library method returns) collapses into ``EXT_ANY``:
    its spelling never binds a call, ``x = x.decode()`` would otherwise make new names without
    end, and it may well be a workspace object (calls on it are counted as unbound)."""
    if name == EXT_ANY[1] or name.count(".") >= 4:
        return EXT_ANY
    if "(" in name or "[" in name:
        if suffix.startswith(".") and name.endswith("()") and name.count("(") == 1 and "[" not in name:
            return ("ext", name + suffix)
        return EXT_ANY
    return ("ext", name + suffix)

def _workspace_part(v):
    """The workspace values of a parameter's value in one form (members in one order; the
    unknown flag kept beside them), or None when it holds none."""
    v = _canonical(v)
    if v is None or v == EXT_ANY or v == BOTTOM:
        return None
    if v == TOO_MANY:
        return TOO_MANY
    if v[0] == "union":
        members = tuple(m for m in v[1] if m != EXT_ANY)
        if not members:
            return None  # nothing from the workspace
        if len(members) > MAX_PARAM_VALUES:
            return TOO_MANY  # too many values to be of use: unknown, for good

        return members[0] if len(members) == 1 and not v[2] else ("union", members, v[2])
    return v

def _canonical(v):
    """A parameter value in one form: values from outside the workspace (which bind nothing)
    as one ``EXT_ANY``, a union's members in one order (equal however its flows were
    evaluated)."""
    if v is None:
        return None
    if v[0] in ("ext", "builtin"):
        return EXT_ANY
    if v[0] == "union":
        if TOO_MANY in v[1]:
            return TOO_MANY  # a parameter that receives one holding too many values holds too many
        members = {EXT_ANY if m[0] in ("ext", "builtin") else m for m in v[1]}
        if len(members) == 1 and not v[2]:
            return next(iter(members))
        return ("union", tuple(sorted(members, key=repr)), v[2])
    return v

def _depth(v, limit: int) -> int:
    if limit < 0 or v is None or v[0] not in ("bag", "tup", "partial", "wref", "union"):
        return 0
    members = (v[1],) if v[0] in ("partial", "wref") else v[1]
    return 1 + max((_depth(m, limit - 1) for m in members), default=0)

def _nested(v):
    """A constructed container value, or None (unknown) past ``_MAX_NESTING`` levels
    (``x = enumerate(x)`` would nest without end)."""
    return None if _depth(v, _MAX_NESTING + 1) > _MAX_NESTING else v

class _NoC3(Exception):
    """The bases admit no C3 linearisation (or form a cycle)."""
