// Pure helpers (no `vscode` import): shaping orbit-lsp results for display, and the command-id
// rewrite that sends the server's `orbit.showImpact` lens/code-action commands to this
// extension's impact view. Bundled on its own too (dist/render.js) so node tests can load it.

/** The server's command behind lenses and the "show impact" code action. */
export const SERVER_SHOW_IMPACT = "orbit.showImpact";
/** This extension's command that opens the impact view for the same arguments. */
export const OPEN_IMPACT = "orbitLsp.openImpact";
/** The server's command behind the "N tests reach this" lens. */
export const SERVER_SHOW_TESTS = "orbit.showTests";
/** This extension's command that runs it and shows the tests as a references list. */
export const OPEN_TESTS = "orbitLsp.openTests";

/** What `orbit.showTests` answers. */
export interface TestsResult {
  target: string;
  tests: { id: string; file: string; uri: string; line: number; reason: string; depth: number }[];
  locations: { uri: string; range: { start: { line: number; character: number }; end: { line: number; character: number } } }[];
  commands: { pytest: string | null; pytest_ids: string | null; pytest_k: string | null; pytest_files: string | null;
    files: string[]; js_files: string[] };
}

/** The command line that runs the tests of an `orbit.showTests` answer ("" when none). */
export function testsCommandLine(r: TestsResult): string {
  if (r.commands.pytest) return r.commands.pytest;
  return r.commands.js_files.length ? r.commands.js_files.join(" ") : "";
}

export interface Cypher { query: string; params?: Record<string, unknown> }
export interface ImpactTarget {
  type: "file" | "symbol" | "package";
  path?: string; uri?: string; qual?: string; name?: string; kind?: string; line?: number;
}
export interface ImpactResult {
  target: ImpactTarget;
  /** Nearest first, at most the server's orbit.maxDependents; `dependentsTotal` counts them all. */
  dependents: { path: string; uri: string; hops: number }[];
  dependentsTotal?: { all: number; byHops: number[] };
  /** At most the server's orbit.maxCallers; `callersTotal` counts them all. */
  callers: { qual: string; name: string; kind: string; path: string; uri: string; line: number; depth: number }[] | null;
  callersTotal?: { all: number; byDepth: number[] } | null;
  cypher: Cypher[];
  notes: string[];
}

/** `listed` alone, or "`listed` of `total`" when the server cut the list. */
function listedOf(listed: number, total: number | undefined): string {
  return total !== undefined && total > listed ? `${listed} of ${total}` : `${listed}`;
}

/** What a cut list leaves out and the setting that would list it, or null when nothing is left out. */
function moreLine(listed: number, total: number | undefined, setting: string): string | null {
  return total !== undefined && total > listed ? `… ${total - listed} more (raise ${setting} to list them)` : null;
}

export interface Command { title: string; command: string; arguments?: unknown[] }

/** A server command rewritten to this extension's own id (other commands unchanged). */
export function rewriteCommand<T extends Command | undefined>(cmd: T): T {
  if (cmd && cmd.command === SERVER_SHOW_IMPACT) {
    return { ...cmd, command: OPEN_IMPACT } as T;
  }
  if (cmd && cmd.command === SERVER_SHOW_TESTS) {
    return { ...cmd, command: OPEN_TESTS } as T;
  }
  return cmd;
}

/** `s` as one inline Markdown code span, whatever it contains (as orbit_lsp.markdown.code): names
 *  and paths are never bare Markdown (`__init__.py` would render as a bold "init.py"). */
export function code(s: unknown): string {
  let t = String(s).replace(/\r?\n|\r/g, " ");
  const longest = Math.max(0, ...(t.match(/`+/g) ?? []).map((r) => r.length));
  const fence = "`".repeat(longest + 1);
  if (t === "" || t.startsWith("`") || t.endsWith("`") || (t.startsWith(" ") && t.endsWith(" ") && t.trim() !== "")) t = ` ${t} `;
  return `${fence}${t}${fence}`;
}

export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/** One line describing what an impact result is about. */
export function targetLabel(t: ImpactTarget): string {
  if (t.type === "symbol") return `${t.kind ?? "symbol"} ${t.qual ?? t.name ?? "?"}`;
  if (t.type === "package") return `package ${t.name ?? "?"}`;
  return t.path ?? "?";
}

export interface TreeNode {
  label: string;
  description?: string;
  uri?: string;
  line?: number; // 1-based
  children?: TreeNode[];
}

/** The impact view's tree: target, callers (by depth), dependents (by hops), notes, Cypher. */
export function impactTree(r: ImpactResult): TreeNode[] {
  const out: TreeNode[] = [];
  const t = r.target;
  out.push({ label: targetLabel(t), description: t.type === "symbol" ? `${t.path}:${t.line}` : t.type, uri: t.uri, line: t.line });
  if (r.callers) {
    const total = r.callersTotal?.all;
    const direct = r.callersTotal?.byDepth?.[0] ?? r.callers.filter((c) => c.depth === 1).length;
    const more = moreLine(r.callers.length, total, "orbit.maxCallers");
    out.push({
      label: `Callers (${listedOf(r.callers.length, total)})`,
      description: r.callers.length ? `${direct} direct` : "none in the graph",
      children: [...[...r.callers]
        .sort((a, b) => a.depth - b.depth || a.path.localeCompare(b.path) || a.line - b.line)
        .map((c) => ({ label: c.qual, description: `${c.path}:${c.line} · depth ${c.depth}`, uri: c.uri, line: c.line })),
        ...(more ? [{ label: more }] : [])],
    });
  }
  const total = r.dependentsTotal?.all;
  const hops = r.dependentsTotal ? r.dependentsTotal.byHops.length : Math.max(0, ...r.dependents.map((d) => d.hops));
  const more = moreLine(r.dependents.length, total, "orbit.maxDependents");
  out.push({
    label: `Dependents (${listedOf(r.dependents.length, total)})`,
    description: hops ? `up to ${plural(hops, "hop")}` : "no file imports it",
    children: [...r.dependents.map((d) => ({ label: d.path, description: plural(d.hops, "hop"), uri: d.uri })),
      ...(more ? [{ label: more }] : [])],
  });
  if (r.notes?.length) {
    out.push({ label: `Notes (${r.notes.length})`, children: r.notes.map((n) => ({ label: n })) });
  }
  if (r.cypher?.length) {
    out.push({
      label: `Cypher (${r.cypher.length})`,
      children: r.cypher.map((c) => ({ label: c.query.replace(/\s+/g, " "), description: c.params ? JSON.stringify(c.params) : undefined })),
    });
  }
  return out;
}

/** The impact result as Markdown (also used by the Neovim plugin's shape). */
export function impactMarkdown(r: ImpactResult): string {
  const t = r.target;
  const what = t.type === "symbol" ? `${t.kind ?? "symbol"} ${code(t.qual ?? t.name ?? "?")}`
    : t.type === "package" ? `package ${code(t.name ?? "?")}` : code(t.path ?? "?");
  const lines = [`# Impact of ${what}`, ""];
  if (r.callers) {
    lines.push(`## Callers (${listedOf(r.callers.length, r.callersTotal?.all)})`, "");
    for (const c of r.callers) lines.push(`- ${code(c.qual)} — ${code(`${c.path}:${c.line}`)} (depth ${c.depth})`);
    if (!r.callers.length) lines.push("- none in the graph");
    const more = moreLine(r.callers.length, r.callersTotal?.all, "`orbit.maxCallers`");
    if (more) lines.push(`- ${more}`);
    lines.push("");
  }
  lines.push(`## Dependents (${listedOf(r.dependents.length, r.dependentsTotal?.all)})`, "");
  for (const d of r.dependents) lines.push(`- ${code(d.path)} (${plural(d.hops, "hop")})`);
  if (!r.dependents.length) lines.push("- no file imports it");
  const more = moreLine(r.dependents.length, r.dependentsTotal?.all, "`orbit.maxDependents`");
  if (more) lines.push(`- ${more}`);
  for (const n of r.notes ?? []) lines.push("", `> ${n}`);
  return lines.join("\n") + "\n";
}

/** Markdown of an `orbit/ask` result: `markdown`, else `answer`, else the raw result. */
export function askMarkdown(question: string, result: unknown): string {
  let body: string;
  if (typeof result === "string") body = result;
  else if (result && typeof (result as { markdown?: unknown }).markdown === "string") body = (result as { markdown: string }).markdown;
  else if (result && typeof (result as { answer?: unknown }).answer === "string") body = (result as { answer: string }).answer;
  else body = "```json\n" + JSON.stringify(result, null, 2) + "\n```";
  return `# ${question.replace(/\n/g, " ")}\n\n${body.trimEnd()}\n`;
}

interface Status {
  falkordb: { where: string; mode: string; online: boolean; error: string | null };
  agent?: { model: string | null; endpoint: string; apiKey: boolean };
  workspaces: { root: string; graph: string; files?: number; symbols?: number; calls?: number; imports?: number; last_index: number | null; skipped?: number }[];
}

/** A path or name in a Markdown table cell: a code span, its `|` escaped (GFM splits cells first). */
function cell(s: unknown): string {
  return code(s).replace(/\|/g, "\\|");
}

/** Markdown of an `orbit/status` result. */
export function statusMarkdown(s: Status): string {
  const f = s.falkordb;
  const lines = ["# Orbit status", "", `FalkorDB (${f.mode}): ${code(f.where)} — ${f.online ? "online" : `**offline**${f.error ? `: ${f.error}` : ""}`}`, ""];
  if (s.agent) {
    const model = s.agent.model ? code(s.agent.model) : "none (the built-in planner answers)";
    lines.push(`Model: ${model} — requests go to ${code(s.agent.endpoint)} (API key ${s.agent.apiKey ? "set: it is sent there" : "not set"})`, "");
  }
  lines.push("| workspace | graph | files | symbols | calls | imports | indexed |", "|---|---|---|---|---|---|---|");
  for (const w of s.workspaces) {
    const when = w.last_index ? new Date(w.last_index * 1000).toISOString().replace("T", " ").slice(0, 19) : "not yet";
    lines.push(`| ${cell(w.root)} | ${cell(w.graph)} | ${w.files ?? "?"} | ${w.symbols ?? "?"} | ${w.calls ?? "?"} | ${w.imports ?? "?"} | ${when} |`);
  }
  if (!s.workspaces.length) lines.push("| (no folder served) | | | | | | |");
  return lines.join("\n") + "\n";
}

/** One memory as `orbit/memories` / `orbit/confirm` return it. */
export interface Memory {
  id: number; text: string; confirmed: boolean; stale?: boolean; staleReason?: string | null;
  projects?: { id: string; root: string }[]; uses?: unknown[];
}

/** One line for a quick pick: `#3 (unconfirmed) we deploy with gunicorn`. */
export function memoryLabel(m: Memory): string {
  return `#${m.id} ${m.confirmed ? "" : "(unconfirmed) "}${m.text}`;
}

/** Markdown of an `orbit/memories` result (the *Orbit: List memories* preview). */
export function memoriesMarkdown(r: { memories: Memory[] }): string {
  const mems = r.memories ?? [];
  const lines = [`# Orbit memories (${mems.length})`, ""];
  for (const m of mems) {
    let line = `- memory #${m.id}, ${m.confirmed ? "confirmed" : "**unconfirmed** (not recalled until confirmed)"}: “${m.text}”`;
    const about = (m.projects ?? []).map((p) => code(p.root));
    if (about.length) line += ` — about ${about.join(", ")}`;
    if (m.stale) line += ` — *possibly stale*: ${m.staleReason ?? ""}`;
    if (m.uses?.length) line += ` — used by ${plural(m.uses.length, "answer")}`;
    lines.push(line);
  }
  if (!mems.length) lines.push("No memories yet: *Orbit: Remember* saves one.");
  lines.push("", "*Orbit: Confirm memory* makes one recallable, *Orbit: Forget memory* removes it.");
  return lines.join("\n") + "\n";
}

// -- orbit/changes ("Orbit: Impact of my changes", issue 16) ---------------------------------------
export interface ChangedSymbol {
  qual: string; kind: string; file: string; uri?: string; line: number | null; status: string;
  old_qual?: string; old_line?: number;
}
export interface ChangeCaller { qual: string; file: string; uri?: string; line: number; depth: number; reaches: string }
export interface SelectedTest { id: string; file: string; uri?: string; line: number; reason: string }
export interface ChangesResult {
  change: { description: string };
  symbols: ChangedSymbol[];
  callers: ChangeCaller[];
  dependents: { path: string; uri?: string; hops: number }[];
  may_be_affected: ChangeCaller[];
  tests: { selected: SelectedTest[]; may_be_affected: SelectedTest[]; removed: string[];
           commands: { pytest: string | null; js_files: string[] }; total: number | null };
  totals: { files: number; symbols: number; callers: number; tests: number };
  notes: string[];
  cypher: Cypher[];
  unsaved?: string[];
}

/** One line saying what an orbit/changes result covers. */
export function changesLabel(r: ChangesResult): string {
  return `${r.change.description}: ${plural(r.totals.symbols, "changed symbol")}, ${plural(r.totals.callers, "caller")}, `
    + `${plural(r.totals.tests, "test")} to run`;
}

/** The impact view's tree for orbit/changes: changed symbols, tests to run (with the command
 * line), callers by depth, dependents, what may be affected through unbound calls, notes, Cypher. */
export function changesTree(r: ChangesResult): TreeNode[] {
  const out: TreeNode[] = [];
  out.push({
    label: `Changed symbols (${r.symbols.length})`,
    description: r.change.description,
    children: r.symbols.map((s) => ({
      label: s.qual,
      description: `${s.status}${s.old_qual && s.old_qual !== s.qual ? ` (was ${s.old_qual})` : ""} · ${s.file}:${s.line ?? s.old_line}`,
      uri: s.status === "removed" ? undefined : s.uri, line: s.line ?? undefined,
    })),
  });
  const tests = r.tests;
  const run: TreeNode[] = tests.commands.pytest ? [{ label: tests.commands.pytest, description: "run these" }] : [];
  out.push({
    label: `Tests to run (${tests.selected.length})`,
    description: tests.total !== null ? `of ${tests.total}` : undefined,
    children: [...run, ...tests.selected.map((t) => ({ label: t.id, description: t.reason, uri: t.uri, line: t.line }))],
  });
  out.push({
    label: `Callers (${r.callers.length})`,
    children: r.callers.map((c) => ({ label: c.qual, description: `${c.file}:${c.line} · depth ${c.depth} → ${c.reaches}`,
      uri: c.uri, line: c.line })),
  });
  out.push({
    label: `Dependent files (${r.dependents.length})`,
    children: r.dependents.map((d) => ({ label: d.path, description: plural(d.hops, "hop"), uri: d.uri })),
  });
  if (r.may_be_affected.length || tests.may_be_affected.length) {
    out.push({
      label: `May be affected, unbound calls (${r.may_be_affected.length} symbols, ${tests.may_be_affected.length} tests)`,
      children: [
        ...tests.may_be_affected.map((t) => ({ label: t.id, description: "test", uri: t.uri, line: t.line })),
        ...r.may_be_affected.map((c) => ({ label: c.qual, description: `${c.file}:${c.line}`, uri: c.uri, line: c.line })),
      ],
    });
  }
  if (r.notes?.length) out.push({ label: `Notes (${r.notes.length})`, children: r.notes.map((n) => ({ label: n })) });
  if (r.cypher?.length) {
    out.push({ label: `Cypher (${r.cypher.length})`, children: r.cypher.map((c) => ({ label: c.query.replace(/\s+/g, " ") })) });
  }
  return out;
}
