"""Output shared by the commands: JSON documents, the list of Cypher statements, table cells."""

from __future__ import annotations

import json
import sys
from typing import Any


def dumps(obj: Any, **kw) -> str:
    return json.dumps(obj, default=str, ensure_ascii=False, **kw)


def emit_json(command: str, result: Any, cypher: list[dict], stream=None, **extra) -> None:
    doc = {"command": command, **extra, "result": result, "cypher": cypher}
    print(dumps(doc, indent=2), file=stream or sys.stdout)


def print_cypher(cypher: list[dict], stream=None) -> None:
    stream = stream or sys.stdout
    if not cypher:
        return
    n = len(cypher)
    print(f"\nCypher ({n} statement{'s' if n != 1 else ''}):", file=stream)
    width = len(str(n))
    for i, c in enumerate(cypher, 1):
        print(f"  {i:>{width}}. {c['query']}", file=stream)
        if c.get("params"):
            print(f"  {'':>{width}}  params: {dumps(c['params'])}", file=stream)


def cell(value: Any) -> str:
    text = value if isinstance(value, str) else dumps(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= 80 else text[:79] + "…"
