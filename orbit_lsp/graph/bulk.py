"""The binary edge sections of FalkorDB's ``GRAPH.BULK`` command, for the edges of a full build.

``GRAPH.BULK <graph> <nodes> <edges> <node sections> <edge sections> <section>…`` adds nodes and
edges to a graph without Cypher: no query text to build, send and parse, and no node lookups —
an edge names its endpoints by node id. On the scale corpus's 714,882 CALLS edges (an embedded
FalkorDB 4.16, 2026-12-04) it took 0.7-1.2 s of the server's CPU against 5.3 s for the
``UNWIND … MATCH … WHERE id(a) = … CREATE`` queries, plus ~1 s here to pack the rows
(``site_edge_section``; ``edge_section``, for any row, 4.4 s).

An edge section (FalkorDB's ``src/bulk_insert/bulk_insert.c``), all integers little-endian:

- the relationship type, NUL-terminated; the property count (4 bytes, unsigned); each property
  name, NUL-terminated;
- then each edge: source node id and destination node id (8 bytes each, unsigned), then one
  value a property, in the header's order: a type byte and its payload — 0 null (no payload:
  the property is left out), 1 bool (1 byte), 2 double (8 bytes), 3 string (UTF-8,
  NUL-terminated), 4 integer (8 bytes, signed), 5 array (an 8-byte length, then that many values).

The server trusts the section (a node id that does not exist, or a truncated section, is not
checked), so only this module's functions build them, from node ids that the same build's queries
returned, and refuses values it cannot encode exactly (a string with a NUL character, an
integer past 64 bits).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

_INT64 = (-(1 << 63), (1 << 63) - 1)


def edge_header(rel_type: str, props: Sequence[str]) -> bytes:
    """The header of an edge section: the type and property names, each NUL-terminated.
    Raises ``ValueError`` for a name with a NUL character."""
    names = [rel_type, *props]
    if any("\0" in n for n in names):
        raise ValueError("GRAPH.BULK: a NUL character in a type or property name")
    return (rel_type.encode() + b"\0" + struct.pack("<I", len(props))
            + b"".join(p.encode() + b"\0" for p in props))


def _put(v, fmt: list[str], args: list) -> None:
    """Append the encoding of value ``v`` (struct format pieces and their arguments)."""
    if v is None:
        fmt.append("B")
        args.append(0)
    elif v is True or v is False:
        fmt.append("BB")
        args += (1, 1 if v else 0)
    elif v.__class__ is int:
        if not _INT64[0] <= v <= _INT64[1]:
            raise ValueError(f"GRAPH.BULK: integer {v} is outside 64 bits")
        fmt.append("Bq")
        args += (4, v)
    elif v.__class__ is float:
        fmt.append("Bd")
        args += (2, v)
    elif v.__class__ is str:
        data = v.encode()
        if b"\0" in data:
            raise ValueError("GRAPH.BULK: a NUL character in a string property")
        fmt.append(f"B{len(data) + 1}s")  # ``s`` pads with the terminating NUL
        args += (3, data)
    elif v.__class__ is list or v.__class__ is tuple:
        fmt.append("Bq")
        args += (5, len(v))
        for x in v:
            _put(x, fmt, args)
    else:
        raise TypeError(f"GRAPH.BULK: cannot encode a {type(v).__name__} property")


def _struct_for(structs: dict, key: str) -> struct.Struct:
    st = structs.get(key)
    if st is None:
        st = structs[key] = struct.Struct(key)
    return st


def _edge_bytes(row: Sequence, structs: dict[str, struct.Struct]) -> bytes:
    """One edge of a section by the general rules (``edge_section``): ids, then each value."""
    a, b = row[0], row[1]
    if a.__class__ is not int or b.__class__ is not int or a < 0 or b < 0:
        raise ValueError(f"GRAPH.BULK: node ids must be non-negative integers, got {a!r}, {b!r}")
    fmt = ["<QQ"]
    args = [a, b]
    for v in row[2:]:
        _put(v, fmt, args)
    return _struct_for(structs, "".join(fmt)).pack(*args)


def edge_section(rel_type: str, props: Sequence[str], rows: Sequence[Sequence]) -> bytes:
    """One edge section of ``rows``: ``[source id, destination id, *values of props]``, ids as
    returned by the node-creating queries of the same graph. Values: None (the property is
    left out), bool, int (64 bits), float, str (without NUL), and lists of those. Raises
    ``ValueError`` (an id that is not a non-negative int, an integer past 64 bits, a NUL in a
    string, a row of the wrong width) or ``TypeError`` (any other value) before anything is
    sent."""
    width = 2 + len(props)
    structs: dict[str, struct.Struct] = {}
    out = [edge_header(rel_type, props)]
    for row in rows:
        if len(row) != width:
            raise ValueError(f"GRAPH.BULK: a row of {len(row)} values, expected {width}")
        out.append(_edge_bytes(row, structs))
    return b"".join(out)


def site_edge_section(rel_type: str, props: Sequence[str], rows: Sequence[Sequence]) -> bytes:
    """``edge_section`` of rows shaped as CALLS rows (``writer.CALL_PROPS``): ``[source id,
    destination id, line, lines, cols, end_cols, resolved]``, three integer sequences of one
    length and a string; four times faster (one precompiled ``struct`` a length and resolution
    kind: 1.4 µs a row against 6.1 on the scale corpus's calls). A row of any other shape is
    encoded by ``edge_section``'s rules. Raises ``ValueError`` for a row neither can encode."""
    if len(props) != 5:
        raise ValueError(f"GRAPH.BULK: call rows have 5 properties, got {len(props)}")
    structs: dict = {}  # (sites, resolved) -> (struct, resolved as bytes)
    general: dict[str, struct.Struct] = {}
    out = [edge_header(rel_type, props)]
    append = out.append
    try:
        for row in rows:
            a, b, line, lines, cols, ends, res = row
            n = len(lines)
            if res.__class__ is not str or len(cols) != n or len(ends) != n:  # another shape: the general rules
                append(_edge_bytes(row, general))
                continue
            got = structs.get((n, res))
            if got is None:
                data = res.encode()
                if b"\0" in data:
                    raise ValueError("GRAPH.BULK: a NUL character in a string property")
                sites = "Bq" * n
                got = structs[(n, res)] = (struct.Struct(f"<QQBqBq{sites}Bq{sites}Bq{sites}B{len(data) + 1}s"), data)
            st, data = got
            if a.__class__ is not int or b.__class__ is not int or line.__class__ is not int:
                raise ValueError(f"GRAPH.BULK: node ids and lines must be integers, got {a!r}, {b!r}, {line!r}")
            if n == 1:
                append(st.pack(a, b, 4, line, 5, 1, 4, lines[0], 5, 1, 4, cols[0], 5, 1, 4, ends[0], 3, data))
            else:
                args = [a, b, 4, line, 5, n]
                for seq in (lines, cols, ends):
                    for x in seq:
                        args += (4, x)
                    args += (5, n)
                args[-2:] = (3, data)
                append(st.pack(*args))
    except (struct.error, TypeError, ValueError) as exc:  # a negative id (``Q``), past 64 bits, a non-integer…
        msg = str(exc)
        raise ValueError(msg if msg.startswith("GRAPH.BULK") else f"GRAPH.BULK: a row it cannot encode ({msg})") \
            from None
    return b"".join(out)
