// Drives the real orbit-lsp server through vscode-languageserver-protocol (the JSON-RPC layer
// VS Code's language client uses) over stdio: initialize, code lenses (+ resolve), orbit/impact,
// and a graph-derived removal offered as a code action whose workspace/applyEdit is approved
// once and rejected once (the file on disk and the server's answer are checked after each).
//
// The server: $ORBIT_LSP_PYTHON -m orbit_lsp, else the repository's .venv-ci or .venv python,
// else `orbit-lsp` on PATH. Its data dir (embedded FalkorDB) is a temp dir, stopped at the end.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const rpc = require("vscode-languageserver-protocol/node");
const render = require("../dist/render.js");

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../../..");
const fixture = join(repo, "tests", "editor_workspace");

function serverCommand() {
  if (process.env.ORBIT_LSP_PYTHON) return [process.env.ORBIT_LSP_PYTHON, ["-m", "orbit_lsp"]];
  for (const venv of [".venv-ci", ".venv"]) {
    const py = join(repo, venv, "bin", "python");
    if (existsSync(py)) return [py, ["-m", "orbit_lsp"]];
  }
  return ["orbit-lsp", []];
}

const tmp = mkdtempSync(join(tmpdir(), "orbit-vsc-"));
const dataDir = join(tmp, "d");
const root = join(tmp, "ws");
const uriOf = (rel) => pathToFileURL(join(root, rel)).href;
let proc, conn;
const applyAnswers = []; // what the "user" answers to the next workspace/applyEdit
const applyRequests = [];
const refreshes = []; // times the server asked for workspace/codeLens/refresh
const progressEnds = []; // times and messages of the server's $/progress "end"
const shownMessages = []; // window/showMessage texts
const buffers = new Map(); // uri -> { text, version }

function applyEdits(text, edits) {
  const lines = text.split("\n");
  const offs = [0];
  for (const l of lines) offs.push(offs[offs.length - 1] + l.length + 1);
  const off = (p) => Math.min(p.line < lines.length ? offs[p.line] + p.character : text.length, text.length);
  for (const e of [...edits].sort((a, b) => off(b.range.start) - off(a.range.start))) {
    text = text.slice(0, off(e.range.start)) + e.newText + text.slice(off(e.range.end));
  }
  return text;
}

async function waitIndexed() {
  for (let i = 0; i < 600; i++) {
    const st = await conn.sendRequest("orbit/status", {});
    if (st.workspaces.length && st.workspaces.every((w) => w.last_index)) return st;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("workspace not indexed in 60 s");
}

function openDoc(rel) {
  const uri = uriOf(rel);
  const text = readFileSync(join(root, rel), "utf8");
  buffers.set(uri, { text, version: 1 });
  conn.sendNotification("textDocument/didOpen", { textDocument: { uri, languageId: "python", version: 1, text } });
  return uri;
}

before(async () => {
  cpSync(fixture, root, { recursive: true });
  const [cmd, args] = serverCommand();
  proc = spawn(cmd, args, { env: { ...process.env, ORBIT_DATA_DIR: dataDir, ORBIT_FALKORDB_URL: "",
    OPENAI_API_KEY: "", OPENAI_BASE_URL: "", ORBIT_MODEL: "" }, stdio: ["pipe", "pipe", "inherit"] });
  conn = rpc.createProtocolConnection(new rpc.StreamMessageReader(proc.stdout), new rpc.StreamMessageWriter(proc.stdin));
  conn.onRequest("workspace/configuration", (p) => p.items.map(() => ({})));
  conn.onRequest("client/registerCapability", () => null);
  conn.onRequest("window/workDoneProgress/create", () => null);
  conn.onRequest("workspace/codeLens/refresh", () => { refreshes.push(Date.now()); return null; });
  conn.onNotification("$/progress", (p) => { if (p.value?.kind === "end") progressEnds.push({ at: Date.now(), message: p.value.message }); });
  conn.onNotification("window/showMessage", (p) => { shownMessages.push(p.message); });
  conn.onNotification(() => {});
  conn.onRequest("workspace/applyEdit", (params) => {
    applyRequests.push(params);
    const answer = applyAnswers.shift() ?? "reject";
    if (answer !== "approve") return { applied: false, failureReason: "rejected by the user" };
    for (const change of params.edit.documentChanges) {
      const buf = buffers.get(change.textDocument.uri);
      if (change.textDocument.version !== buf.version) return { applied: false, failureReason: "version mismatch" };
      buf.text = applyEdits(buf.text, change.edits);
      buf.version += 1;
      writeFileSync(fileURLToPath(change.textDocument.uri), buf.text); // the editor saves
      conn.sendNotification("textDocument/didChange", { textDocument: { uri: change.textDocument.uri, version: buf.version },
        contentChanges: [{ text: buf.text }] });
    }
    return { applied: true };
  });
  conn.listen();
  const init = await conn.sendRequest("initialize", {
    processId: process.pid,
    rootUri: pathToFileURL(root).href,
    workspaceFolders: [{ uri: pathToFileURL(root).href, name: "ws" }],
    capabilities: {
      workspace: { applyEdit: true, configuration: true, workspaceFolders: true,
        workspaceEdit: { documentChanges: true, changeAnnotationSupport: { groupsOnLabel: true } },
        codeLens: { refreshSupport: true }, executeCommand: { dynamicRegistration: false } },
      textDocument: { codeLens: { dynamicRegistration: false, resolveSupport: { properties: ["command"] } },
        codeAction: { disabledSupport: true, codeActionLiteralSupport: { codeActionKind: { valueSet: ["", "quickfix", "refactor", "refactor.rewrite", "source"] } } },
        synchronization: { didSave: true } },
      window: { workDoneProgress: true },
      general: { positionEncodings: ["utf-16"] },
    },
  });
  assert.equal(init.serverInfo.name, "orbit-lsp");
  assert.ok(init.capabilities.codeLensProvider && init.capabilities.codeActionProvider);
  assert.ok(init.capabilities.executeCommandProvider.commands.includes("orbit.removeSymbol"));
  conn.sendNotification("initialized", {});
  // as VS Code does: the file is open from the start, its lenses asked for while the server is
  // still indexing (an empty answer), and asked again when the server says to refresh them
  const uri = openDoc("util.py");
  earlyLenses = await conn.sendRequest("textDocument/codeLens", { textDocument: { uri } });
  await waitIndexed();
});
let earlyLenses;

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

test("code lenses: file dependents and callers, resolved to the impact command", async () => {
  const uri = openDoc("util.py");
  const lenses = await conn.sendRequest("textDocument/codeLens", { textDocument: { uri } });
  const resolved = await Promise.all(lenses.map((l) => conn.sendRequest("codeLens/resolve", l)));
  const titles = Object.fromEntries(resolved.map((l) => [l.range.start.line, l.command.title]));
  assert.equal(titles[0], "2 dependents, 2 hops");
  const text = buffers.get(uri).text.split("\n");
  assert.equal(titles[text.indexOf("def used(x):")], "1 caller");
  assert.equal(titles[text.indexOf("def unused_helper(x):")], "0 callers");
  for (const l of resolved) assert.equal(l.command.command, render.SERVER_SHOW_IMPACT);
  // the extension's middleware sends those clicks to its own view
  assert.equal(render.rewriteCommand(resolved[0].command).command, render.OPEN_IMPACT);
});

test("orbit/impact: a file and a symbol", async () => {
  const fileRes = await conn.sendRequest("orbit/impact", { textDocument: { uri: uriOf("util.py") } });
  assert.deepEqual(fileRes.dependents.map((d) => [d.path, d.hops]), [["main.py", 1], ["cli.py", 2]]);
  const text = readFileSync(join(root, "util.py"), "utf8").split("\n");
  const sym = await conn.sendRequest("orbit/impact", { textDocument: { uri: uriOf("util.py") },
    position: { line: text.indexOf("def used(x):"), character: 5 } });
  assert.equal(sym.target.qual, "util.used");
  assert.deepEqual(sym.callers.map((c) => [c.qual, c.depth]), [["main.run", 1], ["cli.entry", 2]]);
  const tree = render.impactTree(sym);
  assert.equal(tree[0].label, "function util.used");
  assert.equal(tree[1].label, "Callers (2)");
  assert.equal(tree[2].label, "Dependents (2)");
});

async function removeAction(uri, defLine, strict = true) {
  const text = buffers.get(uri).text.split("\n");
  const line = text.indexOf(defLine);
  assert.ok(line >= 0, defLine);
  const actions = await conn.sendRequest("textDocument/codeAction", { textDocument: { uri },
    range: { start: { line, character: 5 }, end: { line, character: 5 } }, context: { diagnostics: [] } });
  // while a saved file is re-indexed the position may not be in the graph yet: callers that
  // wait for the graph pass strict = false and ask again
  if (strict) assert.ok(actions.some((a) => a.title === "Orbit: show impact"));
  return actions.find((a) => a.title.startsWith("Remove"));
}

test("an approved workspace/applyEdit removes the unused function", async () => {
  const uri = uriOf("util.py");
  const before = buffers.get(uri).text;
  const action = await removeAction(uri, "def unused_helper(x):");
  assert.equal(action.title, "Remove `unused_helper` (no callers, no importers in the workspace)");
  applyAnswers.push("approve");
  const res = await conn.sendRequest("workspace/executeCommand", action.command);
  assert.equal(res.status, "applied");
  const sent = applyRequests.at(-1).edit;
  const edit = sent.documentChanges[0].edits[0];
  assert.equal(sent.changeAnnotations[edit.annotationId].needsConfirmation, true);
  assert.equal(readFileSync(join(root, "util.py"), "utf8"), before.replace("def unused_helper(x):\n    return x * 2\n\n\n", ""));
  // no removal is offered where the graph cannot prove it
  assert.equal(await removeAction(uri, "def used(x):"), undefined);
});

test("a rejected workspace/applyEdit leaves the file as it was", async () => {
  const uri = uriOf("util.py");
  const before = readFileSync(join(root, "util.py"), "utf8");
  conn.sendNotification("textDocument/didSave", { textDocument: { uri } }); // re-index the saved file
  let action;
  for (let i = 0; i < 300 && !action; i++) { // until the graph has the saved text again (30 s at most)
    action = await removeAction(uri, "    def spare(self):", false);
    if (!action) await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(action, "removal of Box.spare offered");
  applyAnswers.push("reject");
  const res = await conn.sendRequest("workspace/executeCommand", action.command);
  assert.equal(res.status, "rejected");
  assert.equal(res.reason, "rejected by the user");
  assert.equal(readFileSync(join(root, "util.py"), "utf8"), before);
});

test("lenses after a cold index: the server asks the editor to refresh them once it has indexed", async () => {
  for (let i = 0; i < 100 && !refreshes.length; i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(progressEnds.some((e) => e.message.endsWith("(full)")), JSON.stringify(progressEnds));
  const indexed = progressEnds.find((e) => e.message.endsWith("(full)")).at;
  assert.ok(refreshes.some((t) => t >= indexed), "a workspace/codeLens/refresh after the index ended");
  assert.ok(Array.isArray(earlyLenses)); // asked while indexing: answered (possibly empty)
  // what vscode-languageclient does on that refresh: ask again, and resolve what is on screen
  const lenses = await conn.sendRequest("textDocument/codeLens", { textDocument: { uri: uriOf("util.py") } });
  const resolved = await Promise.all(lenses.map((l) => conn.sendRequest("codeLens/resolve", l)));
  assert.equal(resolved.find((l) => l.range.start.line === 0).command.title, "2 dependents, 2 hops");
});

test("names and paths in Markdown are code spans (no __init__ read as bold)", () => {
  assert.equal(render.code("src/flask/__init__.py"), "`src/flask/__init__.py`");
  assert.equal(render.code("a`b"), "``a`b``");
  const md = render.impactMarkdown({ target: { type: "file", path: "pkg/core.py" }, callers: null, notes: [], cypher: [],
    dependents: [{ path: "pkg/__init__.py", uri: "file:///x", hops: 1 }] });
  assert.ok(md.startsWith("# Impact of `pkg/core.py`\n") && md.includes("- `pkg/__init__.py` (1 hop)"), md);
});

test("a cut list says how many there are and which setting lists the rest", () => {
  const cut = { target: { type: "symbol", kind: "function", qual: "pkg.core.f", path: "pkg/core.py", line: 1 },
    callers: [{ qual: "pkg.a.g", name: "g", kind: "function", path: "pkg/a.py", uri: "file:///a", line: 3, depth: 1 }],
    callersTotal: { all: 7, byDepth: [4, 3] },
    dependents: [{ path: "pkg/a.py", uri: "file:///a", hops: 1 }, { path: "pkg/b.py", uri: "file:///b", hops: 1 }],
    dependentsTotal: { all: 2722, byHops: [2, 40, 2680] }, notes: [], cypher: [] };
  const tree = render.impactTree(cut);
  assert.equal(tree[1].label, "Callers (1 of 7)");
  assert.equal(tree[1].description, "4 direct");
  assert.equal(tree[1].children.at(-1).label, "… 6 more (raise orbit.maxCallers to list them)");
  assert.equal(tree[2].label, "Dependents (2 of 2722)");
  assert.equal(tree[2].description, "up to 3 hops");
  assert.deepEqual(tree[2].children.map((c) => c.label), ["pkg/a.py", "pkg/b.py", "… 2720 more (raise orbit.maxDependents to list them)"]);
  const md = render.impactMarkdown(cut);
  assert.ok(md.includes("## Callers (1 of 7)") && md.includes("## Dependents (2 of 2722)"), md);
  assert.ok(md.includes("- … 2720 more (raise `orbit.maxDependents` to list them)"), md);
  // a whole list reads as before
  const whole = render.impactTree({ ...cut, callersTotal: { all: 1, byDepth: [1] }, dependentsTotal: { all: 2, byHops: [2] } });
  assert.equal(whole[1].label, "Callers (1)");
  assert.deepEqual(whole[2].children.map((c) => c.label), ["pkg/a.py", "pkg/b.py"]);
});

test("status names the model endpoint that would receive the API key", async () => {
  const st = await conn.sendRequest("orbit/status", {});
  assert.deepEqual(st.agent, { model: null, endpoint: "https://api.openai.com/v1", apiKey: false });
  assert.ok(render.statusMarkdown(st).includes(
    "Model: none (the built-in planner answers) — requests go to `https://api.openai.com/v1` (API key not set)"));
});

test("without a model, 'propose a change' is offered disabled with its reason", async () => {
  const uri = uriOf("util.py");
  const line = buffers.get(uri).text.split("\n").indexOf("def used(x):");
  const actions = await conn.sendRequest("textDocument/codeAction", { textDocument: { uri },
    range: { start: { line: line + 1, character: 4 }, end: { line: line + 1, character: 4 } }, context: { diagnostics: [] } });
  const propose = actions.find((a) => a.title === "Orbit: propose a change…");
  assert.ok(propose && propose.disabled && propose.disabled.reason.includes("needs a model"), JSON.stringify(actions));
});

test("ask about this symbol, shown by the extension: no message repeats it", async () => {
  const uri = uriOf("util.py");
  const line = buffers.get(uri).text.split("\n").indexOf("def used(x):");
  const actions = await conn.sendRequest("textDocument/codeAction", { textDocument: { uri },
    range: { start: { line, character: 5 }, end: { line, character: 5 } }, context: { diagnostics: [] } });
  const ask = actions.find((a) => a.title === "Orbit: ask about this symbol");
  const before = shownMessages.length;
  // what the extension's executeCommand middleware sends
  const res = await conn.sendRequest("workspace/executeCommand", { command: ask.command.command,
    arguments: [{ ...ask.command.arguments[0], clientShowsAnswer: true }] });
  assert.equal(res.question, "What depends on `util.used` and who calls it?");
  assert.ok(render.askMarkdown(res.question, res).includes("**`util.used` (`util.py:8`)** has 1 direct caller"));
  await new Promise((r) => setTimeout(r, 200));
  assert.deepEqual(shownMessages.slice(before), []);
});

test("memories: list, confirm, forget (the requests behind the Orbit memory commands)", async () => {
  const saved = await conn.sendRequest("orbit/remember", { text: "we deploy with gunicorn", confirmed: false });
  let { memories } = await conn.sendRequest("orbit/memories", {});
  assert.deepEqual(memories.map(render.memoryLabel), [`#${saved.id} (unconfirmed) we deploy with gunicorn`]);
  assert.ok(render.memoriesMarkdown({ memories }).includes(
    `- memory #${saved.id}, **unconfirmed** (not recalled until confirmed): “we deploy with gunicorn”`));
  const confirmed = await conn.sendRequest("orbit/confirm", { id: saved.id });
  assert.equal(confirmed.confirmed, true);
  const gone = await conn.sendRequest("orbit/forget", { id: saved.id });
  assert.equal(gone.forgotten.id, saved.id);
  ({ memories } = await conn.sendRequest("orbit/memories", {}));
  assert.deepEqual(memories, []);
});
