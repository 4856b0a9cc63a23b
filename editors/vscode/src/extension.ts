// Orbit for VS Code: starts `orbit-lsp` over stdio (vscode-languageclient), and adds the Orbit
// commands (Ask, Show impact, Remember, Show status) on top of the standard LSP features
// (code lenses, hover, call hierarchy, diagnostics, code actions, progress).
import * as vscode from "vscode";
import {
  ErrorCodes,
  LanguageClient,
  LanguageClientOptions,
  ResponseError,
  ServerOptions,
  TransportKind,
} from "vscode-languageclient/node";
import {
  ChangesResult,
  ImpactResult,
  Memory,
  OPEN_IMPACT,
  OPEN_TESTS,
  SERVER_SHOW_TESTS,
  TestsResult,
  TreeNode,
  askMarkdown,
  changesLabel,
  changesTree,
  impactTree,
  memoriesMarkdown,
  memoryLabel,
  rewriteCommand,
  statusMarkdown,
  targetLabel,
  testsCommandLine,
} from "./render";

const SECRET_KEY = "orbit.apiKey";
const ANSWER_SCHEME = "orbit-answer";
const LANGUAGES = ["python", "javascript", "javascriptreact", "typescript", "typescriptreact"];

let client: LanguageClient | undefined;
let output: vscode.LogOutputChannel;
let answers: Answers | undefined;

// -- answers shown as Markdown (virtual documents + the built-in Markdown preview) ------------
class Answers implements vscode.TextDocumentContentProvider {
  private docs = new Map<string, string>();
  private changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private n = 0;

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.docs.get(uri.path) ?? "";
  }

  async show(title: string, markdown: string): Promise<void> {
    const slug = title.replace(/[^\w-]+/g, "-").slice(0, 40) || "answer";
    const uri = vscode.Uri.from({ scheme: ANSWER_SCHEME, path: `/${++this.n}-${slug}.md` });
    this.docs.set(uri.path, markdown);
    await vscode.commands.executeCommand("markdown.showPreviewToSide", uri);
  }
}

// -- the impact view ----------------------------------------------------------------------------
class ImpactView implements vscode.TreeDataProvider<TreeNode> {
  private nodes: TreeNode[] = [{ label: "Run “Orbit: Show impact” or click a code lens" }];
  private changed = new vscode.EventEmitter<TreeNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  view?: vscode.TreeView<TreeNode>;

  set(result: ImpactResult): void {
    this.setTree(impactTree(result), targetLabel(result.target));
  }

  setTree(nodes: TreeNode[], description: string): void {
    this.nodes = nodes;
    this.changed.fire(undefined);
    if (this.view) this.view.description = description;
  }

  getChildren(node?: TreeNode): TreeNode[] {
    return node ? node.children ?? [] : this.nodes;
  }

  getTreeItem(node: TreeNode): vscode.TreeItem {
    const item = new vscode.TreeItem(node.label, node.children?.length
      ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None);
    item.description = node.description;
    item.tooltip = node.description ? `${node.label}\n${node.description}` : node.label;
    if (node.uri) {
      const uri = vscode.Uri.parse(node.uri);
      item.resourceUri = uri;
      const line = Math.max(0, (node.line ?? 1) - 1);
      item.command = { title: "Open", command: "vscode.open",
        arguments: [uri, { selection: new vscode.Range(line, 0, line, 0) } as vscode.TextDocumentShowOptions] };
    }
    return item;
  }
}

// -- settings and the server ------------------------------------------------------------------------
function serverSettings(): Record<string, unknown> {
  const c = vscode.workspace.getConfiguration("orbit");
  const out: Record<string, unknown> = {
    maxHops: c.get("maxHops"),
    maxCallers: c.get("maxCallers"),
    maxDependents: c.get("maxDependents"),
    exclude: c.get("exclude"),
    skipBuildOutput: c.get("skipBuildOutput") ?? true,
    buildOutputDirs: c.get("buildOutputDirs") ?? ["dist", "build", "out"],
    indexHomeOrRoot: c.get("indexHomeOrRoot") ?? false,
    agent: { baseUrl: c.get("agent.baseUrl") || null, model: c.get("agent.model") || null,
             fallbackModels: c.get("agent.fallbackModels") ?? [] },
  };
  const url = c.get<string | null>("falkordbUrl");
  if (url) out.falkordbUrl = url;
  return out;
}

async function startClient(context: vscode.ExtensionContext): Promise<void> {
  const c = vscode.workspace.getConfiguration("orbit");
  const command = c.get<string>("server.command") || "orbit-lsp";
  const args = c.get<string[]>("server.args") ?? [];
  const env: NodeJS.ProcessEnv = { ...process.env };
  // the API key goes to the server's environment only: never a setting, never an LSP message
  const secret = await context.secrets.get(SECRET_KEY);
  if (secret) env.OPENAI_API_KEY = secret;
  const url = c.get<string | null>("falkordbUrl");
  if (url) env.ORBIT_FALKORDB_URL = url;

  const serverOptions: ServerOptions = { command, args, transport: TransportKind.stdio, options: { env } };
  const clientOptions: LanguageClientOptions = {
    documentSelector: LANGUAGES.map((language) => ({ scheme: "file", language })),
    initializationOptions: serverSettings(),
    outputChannel: output,
    middleware: {
      // the server's lens / code-action command is `orbit.showImpact`: open this extension's view instead
      provideCodeLenses: async (doc, token, next) => {
        const lenses = await next(doc, token);
        return lenses?.map((l) => { if (l.command) l.command = rewriteCommand(l.command); return l; });
      },
      resolveCodeLens: async (lens, token, next) => {
        const r = await next(lens, token);
        if (r?.command) r.command = rewriteCommand(r.command);
        return r;
      },
      provideCodeActions: async (doc, range, ctx, token, next) => {
        const actions = await next(doc, range, ctx, token);
        return actions?.map((a) => {
          if (a instanceof vscode.CodeAction) {
            if (a.command) a.command = rewriteCommand(a.command);
            return a;
          }
          return rewriteCommand(a);
        });
      },
      // "Orbit: propose a change…" carries [{uri, range, version}]: the user says what to change
      executeCommand: async (command, args, next) => {
        // "Orbit: ask about this symbol": the whole answer in a Markdown preview (the server then
        // sends no message with its first lines)
        if (command === "orbit.askAboutSymbol" && args.length === 1 && args[0] && typeof args[0] === "object") {
          const result = await next(command, [{ ...args[0], clientShowsAnswer: true }]);
          const question = (result as { question?: string })?.question ?? "Orbit: ask about this symbol";
          await answers?.show(question, askMarkdown(question, result));
          return result;
        }
        if (command === "orbit.proposeChange" && args.length === 1) {
          const instruction = await vscode.window.showInputBox({
            title: "Orbit: propose a change", prompt: "What should change in the selection?", ignoreFocusOut: true,
            placeHolder: "Add type hints and a docstring" });
          if (!instruction?.trim()) return undefined;
          args = [args[0], instruction];
        }
        return next(command, args);
      },
      workspace: {
        configuration: async (params, token, next) => {
          const res = await next(params, token);
          // the server asks for the "orbit" section: hand it the same shape as initializationOptions
          return Array.isArray(res) ? params.items.map((it, i) => (it.section === "orbit" ? serverSettings() : res[i])) : res;
        },
      },
    },
  };
  client = new LanguageClient("orbit", "Orbit", serverOptions, clientOptions);
  await client.start();
}

async function stopClient(): Promise<void> {
  const c = client;
  client = undefined;
  if (c) await c.stop();
}

function requireClient(): LanguageClient {
  if (!client || !client.isRunning()) {
    throw new Error("the Orbit language server is not running (see the Orbit output channel)");
  }
  return client;
}

function describe(err: unknown, method: string): string {
  if (err instanceof ResponseError && err.code === ErrorCodes.MethodNotFound) {
    return `this orbit-lsp does not support ${method} yet (update orbit-lsp)`;
  }
  return err instanceof Error ? err.message : String(err);
}

async function request<T>(method: string, params: unknown, title: string): Promise<T> {
  const c = requireClient();
  return vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable: true },
    (_p, token) => c.sendRequest<T>(method, params, token));
}

function cursorParams(): { textDocument?: { uri: string }; position?: { line: number; character: number } } {
  const ed = vscode.window.activeTextEditor;
  if (!ed) return {};
  const c = requireClient();
  return { textDocument: { uri: c.code2ProtocolConverter.asUri(ed.document.uri) },
           position: { line: ed.selection.active.line, character: ed.selection.active.character } };
}

/** The id of the memory the user picks among those `keep` accepts (undefined: none, or cancelled). */
async function pickMemory(title: string, keep: (m: Memory) => boolean): Promise<number | undefined> {
  const { memories } = await request<{ memories: Memory[] }>("orbit/memories", {}, "Orbit: memories");
  const items = memories.filter(keep).map((m) => ({ label: memoryLabel(m), id: m.id }));
  if (!items.length) {
    void vscode.window.showInformationMessage("Orbit: no memory to choose from.");
    return undefined;
  }
  return (await vscode.window.showQuickPick(items, { title: `Orbit: ${title}`, matchOnDescription: true }))?.id;
}

// -- activation -------------------------------------------------------------------------------------
export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("Orbit", { log: true });
  answers = new Answers();
  const shown = answers;
  const impact = new ImpactView();
  impact.view = vscode.window.createTreeView("orbitLsp.impact", { treeDataProvider: impact, showCollapseAll: true });
  context.subscriptions.push(output, impact.view,
    vscode.workspace.registerTextDocumentContentProvider(ANSWER_SCHEME, shown));

  const showImpact = async (uri?: string, position?: { line: number; character: number }) => {
    const params: Record<string, unknown> = uri ? { textDocument: { uri } } : cursorParams();
    if (uri && position) params.position = position;
    if (!params.textDocument) {
      void vscode.window.showWarningMessage("Orbit: open a file to show its impact");
      return;
    }
    const result = await request<ImpactResult>("orbit/impact", params, "Orbit: impact");
    impact.set(result);
    await vscode.commands.executeCommand("orbitLsp.impact.focus");
  };

  const guard = (method: string, fn: (...a: any[]) => Promise<void>) => async (...a: any[]) => {
    try {
      await fn(...a);
    } catch (err) {
      void vscode.window.showErrorMessage(`Orbit: ${describe(err, method)}`);
    }
  };

  context.subscriptions.push(
    vscode.commands.registerCommand("orbitLsp.showImpact", guard("orbit/impact", () => showImpact())),
    vscode.commands.registerCommand(OPEN_IMPACT, guard("orbit/impact", (uri?: string, pos?: { line: number; character: number }) => showImpact(uri, pos))),
    // the "N tests reach this" lens: the server's answer as a references list, and a way to run them
    vscode.commands.registerCommand(OPEN_TESTS, guard(SERVER_SHOW_TESTS, async (uri: string, pos: { line: number; character: number }, qual: string) => {
      const r = await request<TestsResult>("workspace/executeCommand",
        { command: SERVER_SHOW_TESTS, arguments: [uri, pos, qual] }, "Orbit: tests reaching " + qual);
      const c = requireClient();
      const locations = r.locations.map((l) => new vscode.Location(c.protocol2CodeConverter.asUri(l.uri),
        new vscode.Range(l.range.start.line, l.range.start.character, l.range.end.line, l.range.end.character)));
      await vscode.commands.executeCommand("editor.action.showReferences", c.protocol2CodeConverter.asUri(uri),
        new vscode.Position(pos.line, pos.character), locations);
      const line = testsCommandLine(r);
      if (line && (await vscode.window.showInformationMessage(`Orbit: ${line}`, "Run in terminal")) === "Run in terminal") {
        const term = vscode.window.createTerminal("Orbit tests");
        term.show();
        term.sendText(line);
      }
    })),
    vscode.commands.registerCommand("orbitLsp.showChanges", guard("orbit/changes", async () => {
      // the change as the editor shows it: unsaved buffers count (the server reads them)
      const doc = cursorParams().textDocument;
      const result = await request<ChangesResult>("orbit/changes", doc ? { textDocument: doc } : {}, "Orbit: impact of my changes");
      impact.setTree(changesTree(result), changesLabel(result));
      await vscode.commands.executeCommand("orbitLsp.impact.focus");
    })),
    vscode.commands.registerCommand("orbitLsp.ask", guard("orbit/ask", async () => {
      const question = await vscode.window.showInputBox({ title: "Orbit: Ask", prompt: "A question about this workspace's code",
        placeHolder: "What breaks if I change parse_config?" });
      if (!question) return;
      const result = await request<unknown>("orbit/ask", { question, ...cursorParams() }, "Orbit: thinking…");
      await shown.show(question, askMarkdown(question, result));
    })),
    vscode.commands.registerCommand("orbitLsp.remember", guard("orbit/remember", async () => {
      const sel = vscode.window.activeTextEditor?.document.getText(vscode.window.activeTextEditor.selection);
      const text = await vscode.window.showInputBox({ title: "Orbit: Remember", prompt: "Something orbit should remember", value: sel || "" });
      if (!text) return;
      const result = await request<unknown>("orbit/remember", { text, ...cursorParams() }, "Orbit: remembering…");
      const id = (result as { id?: unknown })?.id;
      void vscode.window.showInformationMessage(`Orbit: remembered${id !== undefined ? ` (memory ${id})` : ""}.`);
    })),
    vscode.commands.registerCommand("orbitLsp.memories", guard("orbit/memories", async () => {
      const result = await request<{ memories: Memory[] }>("orbit/memories", {}, "Orbit: memories");
      await shown.show("memories", memoriesMarkdown(result));
    })),
    vscode.commands.registerCommand("orbitLsp.confirmMemory", guard("orbit/confirm", async (id?: number) => {
      const mid = typeof id === "number" ? id : await pickMemory("Confirm which memory? (it is recalled from then on)", (m) => !m.confirmed);
      if (mid === undefined) return;
      const m = await request<Memory>("orbit/confirm", { id: mid }, "Orbit: confirming…");
      void vscode.window.showInformationMessage(`Orbit: memory #${m.id} confirmed: it is recalled from now on.`);
    })),
    vscode.commands.registerCommand("orbitLsp.forgetMemory", guard("orbit/forget", async (id?: number) => {
      const mid = typeof id === "number" ? id : await pickMemory("Forget which memory?", () => true);
      if (mid === undefined) return;
      const sure = await vscode.window.showWarningMessage(`Forget memory #${mid}?`, { modal: true,
        detail: "It is removed from the memory graph; the audit log keeps a record." }, "Forget");
      if (sure !== "Forget") return;
      await request<unknown>("orbit/forget", { id: mid }, "Orbit: forgetting…");
      void vscode.window.showInformationMessage(`Orbit: memory #${mid} forgotten.`);
    })),
    vscode.commands.registerCommand("orbitLsp.showStatus", guard("orbit/status", async () => {
      const result = await request<Parameters<typeof statusMarkdown>[0]>("orbit/status", {}, "Orbit: status");
      await shown.show("status", statusMarkdown(result));
    })),
    vscode.commands.registerCommand("orbitLsp.setApiKey", guard("", async () => {
      const key = await vscode.window.showInputBox({ title: "Orbit: model API key", password: true, ignoreFocusOut: true,
        prompt: "Stored in VS Code's secret storage and passed to orbit-lsp as OPENAI_API_KEY (never in settings.json)" });
      if (!key) return;
      await context.secrets.store(SECRET_KEY, key);
      await stopClient();
      await startClient(context);
    })),
    vscode.commands.registerCommand("orbitLsp.clearApiKey", guard("", async () => {
      await context.secrets.delete(SECRET_KEY);
      await stopClient();
      await startClient(context);
    })),
    vscode.commands.registerCommand("orbitLsp.restart", guard("", async () => {
      await stopClient();
      await startClient(context);
    })),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (e.affectsConfiguration("orbit.server") || e.affectsConfiguration("orbit.falkordbUrl")) {
        await stopClient();
        await startClient(context);
      }
    }),
  );

  try {
    await startClient(context);
  } catch (err) {
    const cmd = vscode.workspace.getConfiguration("orbit").get<string>("server.command");
    void vscode.window.showErrorMessage(`Orbit: could not start "${cmd}": ${describe(err, "")}. Set orbit.server.command to your orbit-lsp executable.`);
  }
}

export async function deactivate(): Promise<void> {
  await stopClient();
}
