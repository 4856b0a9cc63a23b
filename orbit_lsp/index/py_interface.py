"""A Python file's interface as other files' resolution sees it, grouped by *unit* (one
top-level name and everything defined under it), and what changed in it between two versions
(``changed_entities``): the entities whose memoised values and dependent files an edit
invalidates."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orbit_lsp.index.py_values import FIXTURES, HAS_FACTS, STARS, STORES, _unit

if TYPE_CHECKING:
    from orbit_lsp.index.py_facts import PyFacts


def interface_units(facts: PyFacts | None) -> dict[str, tuple[list, tuple]]:
    """What other files' resolution can consult in one file, grouped by *unit*: a top-level name
    (what scope 0 binds it to, and the scopes, classes and symbols defined under it), plus
    ``STARS`` (the star imports, and the names a star import of this file binds) and
    ``HAS_FACTS``. Returns unit -> (content, scope indices); a unit absent from the dict is one
    that nothing defines (a lookup that found nothing).

    Scope indices in the content are relative to the unit's first scope, so a unit that only
    moved (a definition inserted above it) keeps its content; its indices tell that it moved."""
    if facts is None:
        return {}
    scopes = facts.scopes
    unit_of = [None] + [_unit(sc.qual) for sc in scopes[1:]]
    where: dict[str, list[int]] = {}
    for si in range(1, len(scopes)):
        where.setdefault(unit_of[si], []).append(si)

    def norm(i: int):  # a scope index as (unit, offset in the unit); the module scope is 0
        return i if i <= 0 else (unit_of[i], i - where[unit_of[i]][0])

    out: dict[str, list] = {HAS_FACTS: [True], STARS: [tuple(facts.stars), facts.star_names],
                            STORES: [tuple((norm(si), tuple(sc.stores)) for si, sc in enumerate(scopes) if sc.stores)],
                            FIXTURES: [tuple((sc.fixture, sc.qual) for sc in scopes if sc.fixture)]}
    top = scopes[0]
    for name, refs in top.names.items():
        out.setdefault(name, []).append(("bind", name in top.globals, tuple(refs)))
    for name in top.globals:
        if name not in top.names:
            out.setdefault(name, []).append(("global",))
    for si in range(1, len(scopes)):
        sc = scopes[si]
        out.setdefault(unit_of[si], []).append(
            ("scope", norm(si), sc.qual, sc.kind, norm(sc.parent), sc.self_name, sc.self_kind, sc.class_qual,
             tuple(sorted((k, tuple(v)) for k, v in sc.names.items())), tuple(sorted(sc.globals)),
             tuple(sc.returns), sc.params, tuple(sc.yields), sc.decos, sc.fixture))
    for q, c in facts.classes.items():
        attrs = tuple(sorted((k, tuple((norm(msi), r) for msi, r in v)) for k, v in c.attrs.items()))
        out.setdefault(_unit(q), []).append(("class", q, tuple(c.bases), norm(c.outer), norm(c.body), attrs))
    seen: set[str] = set()
    for sym in facts.symbols:
        if sym.qual not in seen:
            seen.add(sym.qual)
            out.setdefault(_unit(sym.qual), []).append(("kind", sym.qual, sym.kind))
    for q, i in facts.scope_of.items():
        out.setdefault(_unit(q), []).append(("body", q, norm(i)))
    return {u: (content, tuple(where.get(u, ()))) for u, content in out.items()}


def changed_entities(rel: str, old: PyFacts | None, new: PyFacts | None) -> tuple[set[tuple], set[tuple]]:
    """Entities ``(rel, unit)`` of a file that changed between two versions: ``(changed, moved)``,
    ``changed`` those whose content differs (other files' resolution may differ), ``moved``
    those whose scopes only moved (memoised values, keyed by scope index, are stale; other
    files' edges are not)."""
    a, b = interface_units(old), interface_units(new)
    changed, moved = set(), set()
    for u in a.keys() | b.keys():
        x, y = a.get(u), b.get(u)
        if x is None or y is None or x[0] != y[0]:
            changed.add((rel, u))
        elif x[1] != y[1]:
            moved.add((rel, u))
    return changed, moved
