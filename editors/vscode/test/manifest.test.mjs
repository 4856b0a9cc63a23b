// The extension's manifest and its code agree: every contributed command is registered by
// activate() and every registered command is contributed (or is the lens/code-action target);
// no command id collides with the server's own (`orbit.showImpact`, `orbit.removeSymbol`, `orbit.proposeChange`, `orbit.askAboutSymbol`, which
// vscode-languageclient registers for workspace/executeCommand); settings the code reads exist.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = JSON.parse(readFileSync(join(here, "..", "package.json"), "utf8"));
const src = readFileSync(join(here, "..", "src", "extension.ts"), "utf8");
const render = readFileSync(join(here, "..", "src", "render.ts"), "utf8");

test("contributed commands are registered, and none is a server command", () => {
  const contributed = pkg.contributes.commands.map((c) => c.command).sort();
  const openImpact = /OPEN_IMPACT = "([^"]+)"/.exec(render)[1];
  const registered = [...src.matchAll(/registerCommand\("([^"]+)"/g)].map((m) => m[1]);
  if (src.includes("registerCommand(OPEN_IMPACT")) registered.push(openImpact);
  assert.deepEqual(registered.filter((c) => c !== openImpact).sort(), contributed);
  for (const id of [...registered]) assert.ok(!["orbit.showImpact", "orbit.removeSymbol", "orbit.proposeChange", "orbit.askAboutSymbol"].includes(id), id);
  for (const lang of ["python", "javascript", "typescript"]) assert.ok(pkg.activationEvents.includes(`onLanguage:${lang}`));
});

test("settings read by the extension are declared, and no API key setting exists", () => {
  const props = Object.keys(pkg.contributes.configuration.properties);
  const read = [...src.matchAll(/\.get(?:<[^>]*>)?\("([^"]+)"/g)].map((m) => `orbit.${m[1]}`);
  for (const key of read) assert.ok(props.includes(key), `${key} is not declared in package.json`);
  // graphKey / baseGraphKey name a graph (a branch or a team key), they are not secrets
  const secretLike = (p) => /key|secret|token|password/i.test(p) && !/(^|\.)(graphKey|baseGraphKey)$/.test(p);
  assert.ok(!props.some(secretLike), `a secret must never be a setting: ${props.filter(secretLike)}`);
  assert.ok(pkg.dependencies["vscode-languageclient"].startsWith("^11"));
});

test("settings that choose the server, the database or the model endpoint are not workspace settings", () => {
  // a repository's .vscode/settings.json must not send the user's API key elsewhere, nor point
  // orbit at another database or program (issue 20 item 14)
  const props = pkg.contributes.configuration.properties;
  for (const key of ["orbit.agent.baseUrl", "orbit.falkordbUrl", "orbit.server.command", "orbit.server.args"]) {
    assert.ok(["machine", "application"].includes(props[key].scope), `${key}: scope ${props[key].scope}`);
  }
});

test("every Orbit command an answer tells the user to run exists", () => {
  const answer = readFileSync(join(here, "..", "..", "..", "orbit_lsp", "agent", "answer.py"), "utf8");
  const named = [...answer.matchAll(/\*Orbit: ([A-Z][^*]+)\*/g)].map((m) => m[1]);
  assert.ok(named.includes("Confirm memory"), named.join(", "));
  const titles = pkg.contributes.commands.filter((c) => c.category === "Orbit").map((c) => c.title);
  for (const t of named) assert.ok(titles.includes(t), `"Orbit: ${t}" is not a command`);
  for (const t of ["List memories", "Confirm memory", "Forget memory"]) assert.ok(titles.includes(t), t);
});

test("the bundled language client declares codeLens refresh support and re-asks lenses on refresh", () => {
  // the server sends workspace/codeLens/refresh after each index (tested in server.test.mjs):
  // lenses then appear by themselves after a cold index only if the client handles it
  const src = readFileSync(join(here, "..", "node_modules", "vscode-languageclient", "lib", "common", "codeLens.js"), "utf8");
  assert.match(src, /'codeLens'\)\.refreshSupport = true/);
  assert.match(src, /CodeLensRefreshRequest\.type[\s\S]{0,200}onDidChangeCodeLensEmitter\.fire\(\)/);
});
