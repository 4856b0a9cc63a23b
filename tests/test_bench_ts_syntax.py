"""Smoke test of ``python -m bench.run ts-syntax`` (bench/ts_syntax.py) on a tiny corpus written
here (``--corpus``: no npm needed): files in error per grammar candidate, src/ and all."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench` is not an installed package

from bench import run as bench  # noqa: E402


def test_ts_syntax_counts_false_errors_per_candidate(tmp_path, settings, capsys):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.ts").write_text("export interface Box<out A> { a: A }\n")
    (tmp_path / "src" / "b.ts").write_text("export function b() { return 1; }\n")
    (tmp_path / "a.d.ts").write_text('export type * from "./src/a.js";\n')
    (tmp_path / "c.js").write_text("const _null = 1;\nexport { _null as null };\n")
    results = tmp_path / "RESULTS.md"
    assert bench.main(["ts-syntax", "--corpus", str(tmp_path), "--results", str(results)], settings=settings) == 0
    text = results.read_text()
    label = str(tmp_path)
    assert f"| {label} | pypi | 1 / 2 | 3 / 4 |" in text
    assert f"| {label} | orbit | 0 / 2 | 0 / 4 |" in text
    assert "pypi: src error src/a.ts:1: export interface Box<out A> { a: A }" in text
