// The TypeScript language service's own callers (call hierarchy) of a list of declarations.
//
// Used by bench/ts_callers.py. Input (JSON on stdin):
//   {"root": ABS_DIR, "typescript": PATH_OF_THE_TYPESCRIPT_PACKAGE,
//    "files": [ABS_FILE, ...],                  the program's root files (what orbit indexed)
//    "targets": [[ABS_FILE, LINE0, CHAR0], ...],  the name of each declaration (0-based line,
//                                                 UTF-16 character, as TypeScript counts)
//    "sites": [[ABS_FILE, LINE0, CHAR0, NAME], ...]} call sites: start of the callee expression
//                                                 and the called name (what orbit records)
// Output (JSON on stdout): {"version": TS_VERSION, "options": {...}, "results": [
//   {"prepared": NAME | null, "kind": KIND | null, "calls": [
//      {"file": ABS_FILE, "line": L0, "character": C0,      start of the callee expression
//       "nameLine": L0, "nameCharacter": C0,                the reference TypeScript reports
//       "isCall": bool, "caller": NAME}, ...]}, ...],
//   "sites": [{"found": bool, "defs": [{"file", "line", "name", "container", "kind"}, ...]}, ...]}
// "calls" are provideCallHierarchyIncomingCalls(file, position) flattened to one entry per
// fromSpan. The callee expression is the reference itself, or the property access / element
// access whose name it is (so `a.b.c()` starts at `a`, as orbit's call sites do). "isCall" is
// false for references TypeScript's call hierarchy counts that are no call (`x.method` passed
// as a value). "sites" answers getDefinitionAtPosition at the called name of each site (where
// TypeScript says a call orbit bound goes; empty: TypeScript does not know either).
//
// Compiler options: the tsconfig.json at the root when there is one (parsed by TypeScript),
// else defaults; allowJs on, noEmit.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const input = JSON.parse(fs.readFileSync(0, "utf8"));
const require = createRequire(import.meta.url);
const ts = require(input.typescript);
const root = path.resolve(input.root);

let options = { target: ts.ScriptTarget.ESNext, module: ts.ModuleKind.ESNext,
                moduleResolution: ts.ModuleResolutionKind.Bundler, strict: true };
const config = path.join(root, "tsconfig.json");
if (fs.existsSync(config)) {
  const cl = ts.getParsedCommandLineOfConfigFile(config, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
  if (cl) options = cl.options;
}
options = { ...options, allowJs: true, noEmit: true, skipLibCheck: true, jsx: options.jsx ?? ts.JsxEmit.Preserve };

const files = input.files.map((f) => path.resolve(f));
const texts = new Map();
const read = (f) => {
  if (!texts.has(f)) texts.set(f, fs.existsSync(f) ? fs.readFileSync(f, "utf8") : undefined);
  return texts.get(f);
};
const host = {
  getScriptFileNames: () => files,
  getScriptVersion: () => "1",
  getScriptSnapshot: (f) => { const t = read(f); return t === undefined ? undefined : ts.ScriptSnapshot.fromString(t); },
  getCurrentDirectory: () => root,
  getCompilationSettings: () => options,
  getDefaultLibFileName: (o) => ts.getDefaultLibFilePath(o),
  fileExists: ts.sys.fileExists,
  readFile: ts.sys.readFile,
  readDirectory: ts.sys.readDirectory,
  directoryExists: ts.sys.directoryExists,
  getDirectories: ts.sys.getDirectories,
};
const service = ts.createLanguageService(host, ts.createDocumentRegistry());
const program = service.getProgram();

function nodeAt(sf, start, end) {
  // the deepest node spanning exactly [start, end), else the deepest one containing start
  let found = sf;
  const visit = (n) => {
    if (n.getStart(sf) <= start && end <= n.getEnd()) {
      found = n;
      ts.forEachChild(n, visit);
    }
  };
  ts.forEachChild(sf, visit);
  return found;
}

function callee(n) {
  const p = n.parent;
  if (p && ts.isPropertyAccessExpression(p) && p.name === n) return p;
  if (p && ts.isElementAccessExpression(p) && p.argumentExpression === n) return p;
  return n;
}

function isCallee(c) {
  let e = c;
  while (e.parent && (ts.isParenthesizedExpression(e.parent) || ts.isNonNullExpression(e.parent))) e = e.parent;
  const p = e.parent;
  if (!p) return false;
  if ((ts.isCallExpression(p) || ts.isNewExpression(p)) && p.expression === e) return true;
  if (ts.isTaggedTemplateExpression(p) && p.tag === e) return true;
  if (ts.isDecorator(p)) return true;
  if ((ts.isJsxOpeningElement(p) || ts.isJsxSelfClosingElement(p)) && p.tagName === e) return true;
  return false;
}

const results = [];
for (const [file, line, character] of input.targets) {
  const sf = program.getSourceFile(path.resolve(file));
  if (!sf) { results.push({ prepared: null, kind: null, calls: [], error: "not in the program" }); continue; }
  const pos = sf.getPositionOfLineAndCharacter(line, character);
  let prepared = null, kind = null;
  const calls = [];
  try {
    const items = service.prepareCallHierarchy(sf.fileName, pos);
    const item = Array.isArray(items) ? items[0] : items;
    if (item) {
      prepared = item.name;
      kind = item.kind;
      for (const inc of service.provideCallHierarchyIncomingCalls(sf.fileName, pos)) {
        const fsf = program.getSourceFile(inc.from.file);
        for (const span of inc.fromSpans) {
          const ref = nodeAt(fsf, span.start, span.start + span.length);
          const c = callee(ref);
          const at = fsf.getLineAndCharacterOfPosition(c.getStart(fsf));
          const nameAt = fsf.getLineAndCharacterOfPosition(span.start);
          calls.push({ file: path.resolve(inc.from.file), line: at.line, character: at.character,
                       nameLine: nameAt.line, nameCharacter: nameAt.character, isCall: isCallee(c),
                       caller: inc.from.name });
        }
      }
    }
  } catch (e) {
    results.push({ prepared, kind, calls, error: String(e && e.message || e) });
    continue;
  }
  results.push({ prepared, kind, calls });
}

function calledNames(sf, start, name) {
  // the callee nodes starting at `start` whose called name is `name` (a.b.name, name)
  const out = [];
  let n = nodeAt(sf, start, start);
  for (; n && n !== sf && n.getStart(sf) === start; n = n.parent) {
    if (ts.isPropertyAccessExpression(n) && n.name.text === name) out.push(n.name);
    else if (ts.isIdentifier(n) && n.text === name) out.push(n);
    else if (ts.isElementAccessExpression(n) && ts.isStringLiteralLike(n.argumentExpression)
             && n.argumentExpression.text === name) out.push(n.argumentExpression);
  }
  return out;
}

const sites = [];
for (const [file, line, character, name] of input.sites || []) {
  const sf = program.getSourceFile(path.resolve(file));
  if (!sf) { sites.push({ found: false, defs: [] }); continue; }
  const start = sf.getPositionOfLineAndCharacter(line, character);
  const names = calledNames(sf, start, name);
  const defs = [];
  for (const n of names) {
    for (const d of service.getDefinitionAtPosition(sf.fileName, n.getStart(sf)) || []) {
      const dsf = program.getSourceFile(d.fileName);
      const at = dsf ? dsf.getLineAndCharacterOfPosition(d.textSpan.start) : { line: -1 };
      defs.push({ file: path.resolve(d.fileName), line: at.line, name: d.name, container: d.containerName, kind: d.kind });
    }
  }
  sites.push({ found: names.length > 0, defs });
}
process.stdout.write(JSON.stringify({ version: ts.version, results, sites,
  options: { moduleResolution: ts.ModuleResolutionKind[options.moduleResolution] } }));
