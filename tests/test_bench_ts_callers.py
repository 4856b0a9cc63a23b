"""Smoke test of ``python -m bench.run ts-callers`` (bench/ts_callers.py + ts_callers.mjs) on a
tiny corpus written here: every call site of the most-called declarations compared with the
TypeScript language service's call hierarchy. Skipped when node or npm are missing, or when the
``typescript`` package cannot be installed (no registry)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench` is not an installed package

from bench import run as bench  # noqa: E402
from bench import ts_resolution  # noqa: E402

LIB = """export interface Shape { area(): number }
export class Square implements Shape { area() { return 1; } }
export function make(): Shape { return new Square(); }
"""
USE = """import { make, Square } from "./lib";
export function a() {
  make().area();
  new Square().area();
  const s: Square = new Square();
  s.area();
}
export function b(x: any) {
  x.area();
  make();
}
"""


@pytest.fixture(scope="module")
def typescript():
    if ts_resolution.missing_tools():
        pytest.skip(f"needs {' and '.join(ts_resolution.missing_tools())}")
    try:  # installed once into the benchmark cache (outside the repository) and reused
        return ts_resolution.ensure_typescript(ts_resolution.DEFAULT_TYPESCRIPT, bench.DEFAULT_CACHE)
    except SystemExit as e:
        pytest.skip(f"typescript not installable here: {e}")


def test_ts_callers_on_tiny_corpus(typescript, tmp_path, settings, store):
    ws = tmp_path / "tiny"
    (ws / "src").mkdir(parents=True)
    (ws / "src/lib.ts").write_text(LIB)
    (ws / "src/use.ts").write_text(USE)
    results = tmp_path / "RESULTS.md"
    argv = ["ts-callers", "--corpus", str(ws), "--top", "3", "--cache-dir", str(bench.DEFAULT_CACHE),
            "--results", str(results)]
    try:
        assert bench.main(argv, settings=settings) == 0
    finally:
        store.graph(bench.code_graph_name(ws.resolve())).delete()
    text = results.read_text()
    assert "· ts-callers · tiny" in text and f"`python -m bench.run ts-callers --corpus {ws} " in text
    # targets: Shape.area and Square.area (one override family: the 3 area() calls each, as
    # TypeScript counts them), make (2 calls); x.area() on an `any` is neither side's
    row = next(line for line in text.splitlines() if line.startswith("| tiny |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # declaration only: make().area() binds Shape.area, the two others Square.area -> 5 of 8
    assert cells[1:8] == ["3", "8", "8", "8", "100.0", "100.0", "100.0 / 62.5"]
    # 8 bound sites (make x2, area x3, new Square x3) and x.area(), the only unbound one
    assert cells[8].startswith("11.1 (1 of 9)")
    assert "| src/lib.ts#make | make | 1 | 2 | 2 | 2 | 2 |" in text
