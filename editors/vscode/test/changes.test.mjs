// "Orbit: Impact of my changes": orbit/changes against the real orbit-lsp server on a git
// repository with a saved edit and an unsaved one (didOpen + didChange, as VS Code sends them),
// and the extension's tree of the result (render.changesTree).
//
// The server as in server.test.mjs: $ORBIT_LSP_PYTHON -m orbit_lsp, else the repository's
// .venv-ci or .venv python, else `orbit-lsp` on PATH.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const rpc = require("vscode-languageserver-protocol/node");
const render = require("../dist/render.js");

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../../..");

function serverCommand() {
  if (process.env.ORBIT_LSP_PYTHON) return [process.env.ORBIT_LSP_PYTHON, ["-m", "orbit_lsp"]];
  for (const venv of [".venv-ci", ".venv"]) {
    const py = join(repo, venv, "bin", "python");
    if (existsSync(py)) return [py, ["-m", "orbit_lsp"]];
  }
  return ["orbit-lsp", []];
}

const tmp = mkdtempSync(join(tmpdir(), "orbit-vsc-chg-"));
const dataDir = join(tmp, "d");
const root = join(tmp, "ws");
const uriOf = (rel) => pathToFileURL(join(root, rel)).href;
let proc, conn;

const FILES = {
  "app/__init__.py": "",
  "app/core.py": "def helper(x):\n    return x + 1\n\n\ndef compute(x):\n    return helper(x) * 2\n",
  "app/util.py": "from app.core import compute\n\n\ndef wrap(x):\n    return compute(x)\n",
  "tests/test_core.py": "from app.core import compute\nfrom app.util import wrap\n\n\n"
    + "def test_compute():\n    assert compute(1) == 4\n\n\ndef test_wrap():\n    assert wrap(1) == 4\n",
};

function git(...args) {
  const r = spawnSync("git", args, { cwd: root, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr}`);
}

before(async () => {
  for (const [rel, text] of Object.entries(FILES)) {
    mkdirSync(dirname(join(root, rel)), { recursive: true });
    writeFileSync(join(root, rel), text);
  }
  git("init", "-q");
  git("add", "-A");
  git("-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "base");
  writeFileSync(join(root, "app/util.py"), FILES["app/util.py"].replace("return compute(x)", "return compute(x) + 0")); // saved
  const [cmd, args] = serverCommand();
  // ORBIT_TESTS_LENS_WAIT_MS: a tests lens waits for its count (not "tests: counting…") on a loaded machine too
  proc = spawn(cmd, args, { env: { ...process.env, ORBIT_DATA_DIR: dataDir, ORBIT_FALKORDB_URL: "",
                                   ORBIT_TESTS_LENS_WAIT_MS: "60000" }, stdio: ["pipe", "pipe", "inherit"] });
  conn = rpc.createProtocolConnection(new rpc.StreamMessageReader(proc.stdout), new rpc.StreamMessageWriter(proc.stdin));
  conn.onRequest("workspace/configuration", (p) => p.items.map(() => ({})));
  conn.onRequest("client/registerCapability", () => null);
  conn.onRequest("window/workDoneProgress/create", () => null);
  conn.onRequest("workspace/codeLens/refresh", () => null);
  conn.onNotification(() => {});
  conn.listen();
  await conn.sendRequest("initialize", {
    processId: process.pid, rootUri: pathToFileURL(root).href,
    workspaceFolders: [{ uri: pathToFileURL(root).href, name: "ws" }],
    capabilities: { workspace: { configuration: true, workspaceFolders: true }, window: { workDoneProgress: true },
      general: { positionEncodings: ["utf-16"] } },
  });
  conn.sendNotification("initialized", {});
  for (let i = 0; i < 600; i++) {
    const st = await conn.sendRequest("orbit/status", {});
    if (st.workspaces.length && st.workspaces.every((w) => w.last_index)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("workspace not indexed in 60 s");
});

after(async () => {
  if (conn) {
    try { await conn.sendRequest("shutdown"); conn.sendNotification("exit"); } catch { /* already gone */ }
    conn.dispose();
  }
  if (proc && proc.exitCode === null) {
    await Promise.race([new Promise((r) => proc.once("exit", r)), new Promise((r) => setTimeout(r, 5000))]);
    if (proc.exitCode === null) proc.kill();
  }
  const [cmd] = serverCommand();
  if (cmd !== "orbit-lsp") spawnSync(cmd, ["-m", "orbit_lsp", "db", "stop"], { env: { ...process.env, ORBIT_DATA_DIR: dataDir }, stdio: "ignore" });
  rmSync(tmp, { recursive: true, force: true });
});

test("orbit/changes: saved and unsaved edits, tests to run, the view's tree", async () => {
  const uri = uriOf("app/core.py");
  const text = readFileSync(join(root, "app/core.py"), "utf8");
  conn.sendNotification("textDocument/didOpen", { textDocument: { uri, languageId: "python", version: 1, text } });
  conn.sendNotification("textDocument/didChange", { textDocument: { uri, version: 2 },
    contentChanges: [{ text: text.replace("return x + 1", "return x + 2") }] });
  const r = await conn.sendRequest("orbit/changes", { textDocument: { uri } });
  assert.deepEqual(r.unsaved, ["app/core.py"]);
  assert.deepEqual(r.symbols.map((s) => [s.qual, s.status]), [["app.core.helper", "modified"], ["app.util.wrap", "modified"]]);
  assert.deepEqual(r.tests.selected.map((t) => t.id), ["tests/test_core.py::test_compute", "tests/test_core.py::test_wrap"]);
  assert.equal(r.tests.commands.pytest, "pytest tests/test_core.py::test_compute tests/test_core.py::test_wrap");
  assert.ok(r.cypher.length > 0);
  // callers: compute of helper, test_wrap of wrap (changed itself), test_compute through compute
  assert.deepEqual(r.callers.map((c) => [c.qual, c.depth]),
    [["app.core.compute", 1], ["tests.test_core.test_wrap", 1], ["tests.test_core.test_compute", 2]]);
  const tree = render.changesTree(r);
  assert.deepEqual(tree.slice(0, 4).map((n) => n.label), ["Changed symbols (2)", "Tests to run (2)", "Callers (3)", "Dependent files (1)"]);
  assert.equal(tree[1].children[0].label, r.tests.commands.pytest);
  assert.equal(tree[1].children[1].uri, uriOf("tests/test_core.py"));
  assert.equal(render.changesLabel(r), "working tree vs HEAD, with 1 unsaved buffer(s): 2 changed symbols, 3 callers, 2 tests to run");
});

test("the 'N tests reach this' lens: resolved, rewritten to the references view, its command line", async () => {
  const uri = uriOf("app/core.py");
  const lenses = await conn.sendRequest("textDocument/codeLens", { textDocument: { uri } });
  const mine = lenses.filter((l) => l.data.target.type === "tests");
  assert.deepEqual(mine.map((l) => l.data.target.qual), ["app.core.helper", "app.core.compute"]);
  const resolved = await Promise.all(mine.map((l) => conn.sendRequest("codeLens/resolve", l)));
  // helper: test_compute (through compute) and test_wrap (through wrap -> compute)
  assert.deepEqual(resolved.map((l) => l.command.title), ["2 tests reach this", "2 tests reach this"]);
  const cmd = render.rewriteCommand(resolved[0].command);
  assert.equal(cmd.command, render.OPEN_TESTS);
  const r = await conn.sendRequest("workspace/executeCommand", { command: render.SERVER_SHOW_TESTS, arguments: cmd.arguments });
  assert.equal(r.target, "app.core.helper");
  assert.deepEqual(r.tests.map((t) => t.id), ["tests/test_core.py::test_compute", "tests/test_core.py::test_wrap"]);
  assert.deepEqual(r.locations.map((l) => [l.uri, l.range.start.line]), [[uriOf("tests/test_core.py"), 4], [uriOf("tests/test_core.py"), 8]]);
  assert.equal(render.testsCommandLine(r), "pytest tests/test_core.py::test_compute tests/test_core.py::test_wrap");
});
