"""Smoke test of ``python -m bench.run ts-resolution`` (bench/ts_resolution.py + ts_resolve.mjs) on
a tiny corpus: shared case 012 (``paths`` from an ``extends``-ed JSONC config). Skipped when node
or npm are missing, or when the ``typescript`` package cannot be installed (no registry)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench` is not an installed package

from bench import run as bench  # noqa: E402
from bench import ts_resolution  # noqa: E402


@pytest.fixture(scope="module")
def typescript():
    if ts_resolution.missing_tools():
        pytest.skip(f"needs {' and '.join(ts_resolution.missing_tools())}")
    try:  # installed once into the benchmark cache (outside the repository) and reused
        return ts_resolution.ensure_typescript(ts_resolution.DEFAULT_TYPESCRIPT, bench.DEFAULT_CACHE)
    except SystemExit as e:
        pytest.skip(f"typescript not installable here: {e}")


def test_ts_resolution_on_tiny_corpus(typescript, case_workspace, tmp_path, settings, store):
    ws = case_workspace("012")
    results = tmp_path / "RESULTS.md"
    argv = ["ts-resolution", "--corpus", str(ws), "--cache-dir", str(bench.DEFAULT_CACHE), "--results", str(results)]
    try:
        assert bench.main(argv, settings=settings) == 0
    finally:
        store.graph(bench.code_graph_name(ws.resolve())).delete()
    text = results.read_text()
    assert "· ts-resolution · ws012" in text and f"`python -m bench.run ts-resolution --corpus {ws} " in text
    # ~/types/Pick2, @core/log, @acme/schema, ~/app/user
    assert "| import specifiers extracted by orbit, each resolved by both | 4 |" in text
    assert "| agreement (%) | 100.0 |" in text and "| disagreements (listed below) | 0 |" in text
    assert "| specifiers the compiler's parser finds that orbit did not extract | 0 |" in text
    assert "| files whose IMPORTS edges equal the files TypeScript resolves its own import list to | 2 / 2 |" in text
    assert "moduleResolution of the configs used | tsconfig.json: Bundler" in text


def test_disagreements_are_listed(typescript, tmp_path, settings, store):
    # orbit resolves "./b" to b.ts; a jsconfig that TypeScript reads with its classic rules (no
    # index.* lookup) makes the compiler disagree on the directory import: it must be listed
    ws = tmp_path / "ws"
    (ws / "lib").mkdir(parents=True)
    (ws / "tsconfig.json").write_text('{"compilerOptions": {"module": "esnext"}}')  # -> Classic resolution
    (ws / "lib/index.ts").write_text("export const x = 1;\n")
    (ws / "a.ts").write_text('import { x } from "./lib";\nimport { y } from "./b";\n')
    (ws / "b.ts").write_text("export const y = 2;\n")
    try:
        rep = ts_resolution.run_ts_resolution(ws, "ws", settings, "test", typescript)
    finally:
        store.graph(bench.code_graph_name(ws.resolve())).delete()
        shutil.rmtree(ws)
    assert rep.data["total"] == 2 and rep.data["agree"] == 1
    assert rep.data["disagreements"] == [["a.ts", "./lib", "import", "lib/index.ts", "unresolved"]]
    assert rep.data["files"] == 1 and rep.data["files_agree"] == 0
    assert rep.data["only_ts"] == rep.data["only_orbit"] == 0
    [files_table] = [t for t in rep.tables if t.caption == "Files whose IMPORTS edges differ"]
    assert files_table.rows == [["a.ts", "–", "lib/index.ts"]]


def test_workspace_packages_agree_with_the_compiler(typescript, tmp_path, settings, store):
    """An npm-workspaces monorepo (``node_modules/@acme/core`` a symlink to ``packages/core``, as
    ``npm install`` leaves it): orbit's name-based lookup of workspace packages through their
    ``exports`` gives what the compiler finds through the symlink."""
    ws = tmp_path / "mono"
    files = {
        "package.json": '{"name": "root", "private": true, "workspaces": ["packages/*"]}',
        "tsconfig.json": '{"compilerOptions": {"module": "esnext", "moduleResolution": "bundler", "strict": true}}',
        "packages/core/package.json": '{"name": "@acme/core", "exports": {".": {"types": "./src/index.ts", '
                                      '"default": "./dist/index.js"}, "./utils/*": {"import": "./src/utils/*.ts"}}}',
        "packages/core/src/index.ts": "export const a = 1;\n",
        "packages/core/src/utils/str.ts": "export const s = 1;\n",
        "packages/legacy/package.json": '{"name": "legacy", "main": "lib/index.js"}',
        "packages/legacy/lib/index.js": "module.exports = { l: 1 };\n",
        "packages/app/src/main.ts": 'import { a } from "@acme/core";\nimport { s } from "@acme/core/utils/str";\n'
                                    'import x from "@acme/core/nope";\nimport l = require("legacy");\n'
                                    'import r from "react";\nimport * as fs from "node:fs";\n',
    }
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    (ws / "node_modules/@acme").mkdir(parents=True)
    (ws / "node_modules/@acme/core").symlink_to("../../packages/core")
    (ws / "node_modules/legacy").symlink_to("../packages/legacy")
    try:
        rep = ts_resolution.run_ts_resolution(ws, "mono", settings, "test", typescript)
    finally:
        store.graph(bench.code_graph_name(ws.resolve())).delete()
    assert rep.data["disagreements"] == []
    assert rep.data["total"] == 6 and rep.data["agree"] == 6 and rep.data["files_agree"] == rep.data["files"] == 1
