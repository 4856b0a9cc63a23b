// The TypeScript compiler's own module resolution for a list of (file, specifier) pairs.
//
// Used by bench/ts_resolution.py. Input (JSON on stdin):
//   {"root": ABS_DIR, "typescript": PATH_OF_THE_TYPESCRIPT_PACKAGE,
//    "queries": [[ABS_FILE, SPECIFIER, KIND], ...],      KIND as orbit records it (import, require, ...)
//    "files": [ABS_FILE, ...]}
// Output (JSON on stdout): {"version": TS_VERSION, "configs": {ABS_CONFIG: moduleResolution},
//   "results": [{"resolved": ABS_PATH | null, "external": bool, "config": ABS_CONFIG | null}, ...],
//   "files": {ABS_FILE: [{"spec", "resolved", "external"}, ...]}}
// "files" lists each file's imports as the compiler's own parser finds them (ts.createSourceFile:
// import/export ... from, import x = require(), import() with a literal, import("x") types, and
// require() with a literal -- in every file, as orbit does; the compiler itself only follows
// require() in JS files), each resolved in the file's implied module format.
//
// Each file uses the nearest tsconfig.json (else jsconfig.json) in its directory or above, up to
// the root, parsed by TypeScript itself (extends, JSONC); without one, TypeScript's defaults.
// Resolution is ts.resolveModuleName with the mode TypeScript would use: CommonJS for require()
// and `import x = require()`, ESM for import(), the file's implied format otherwise.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const input = JSON.parse(fs.readFileSync(0, "utf8"));
const require = createRequire(import.meta.url);
const ts = require(input.typescript);
const root = path.resolve(input.root);

const nearest = new Map(); // dir -> config path | null
function configFor(file) {
  const chain = [];
  let dir = path.dirname(file);
  let found = null;
  for (;;) {
    if (nearest.has(dir)) { found = nearest.get(dir); break; }
    chain.push(dir);
    const hit = ["tsconfig.json", "jsconfig.json"].map((n) => path.join(dir, n)).find((p) => fs.existsSync(p));
    if (hit) { found = hit; break; }
    if (dir === root || path.dirname(dir) === dir) break;
    dir = path.dirname(dir);
  }
  for (const d of chain) nearest.set(d, found);
  return found;
}

const parsed = new Map(); // config path -> {options, cache}
const host = { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} };
function optionsFor(config) {
  const key = config || "";
  if (!parsed.has(key)) {
    let options = {};
    if (config) {
      const cl = ts.getParsedCommandLineOfConfigFile(config, {}, host);
      options = cl ? cl.options : {};
      if (config.endsWith("jsconfig.json") && options.allowJs === undefined) options.allowJs = true;
    }
    const cache = ts.createModuleResolutionCache(root, (x) => x, options);
    parsed.set(key, { options, cache });
  }
  return parsed.get(key);
}

function importsOf(file) {
  const ext = path.extname(file).toLowerCase();
  const kind = { ".tsx": ts.ScriptKind.TSX, ".jsx": ts.ScriptKind.JSX, ".js": ts.ScriptKind.JS, ".mjs": ts.ScriptKind.JS,
                 ".cjs": ts.ScriptKind.JS }[ext] ?? ts.ScriptKind.TS;
  const sf = ts.createSourceFile(file, fs.readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true, kind);
  const out = new Set();
  const literal = (n) => (n && ts.isStringLiteralLike(n) ? n.text : null);
  const visit = (n) => {
    let spec = null;
    if ((ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) && n.moduleSpecifier) spec = literal(n.moduleSpecifier);
    else if (ts.isImportEqualsDeclaration(n) && ts.isExternalModuleReference(n.moduleReference)) {
      spec = literal(n.moduleReference.expression);
    } else if (ts.isCallExpression(n) && n.arguments.length > 0 && (n.expression.kind === ts.SyntaxKind.ImportKeyword
               || (ts.isIdentifier(n.expression) && n.expression.text === "require" && n.arguments.length === 1))) {
      spec = literal(n.arguments[0]);
    } else if (ts.isImportTypeNode(n) && ts.isLiteralTypeNode(n.argument)) spec = literal(n.argument.literal);
    if (spec) out.add(spec);
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return [...out];
}

const results = [];
const configs = {};
for (const [file, spec, kind] of input.queries) {
  const config = configFor(file);
  const { options, cache } = optionsFor(config);
  if (config) configs[config] = ts.ModuleResolutionKind[ts.getEmitModuleResolutionKind(options)];
  let mode;
  if (kind === "dynamic") mode = ts.ModuleKind.ESNext;
  else if (kind === "require" || kind === "import-equals") mode = ts.ModuleKind.CommonJS;
  else mode = ts.getImpliedNodeFormatForFile(file, cache.getPackageJsonInfoCache(), ts.sys, options);
  const r = ts.resolveModuleName(spec, file, options, ts.sys, cache, undefined, mode).resolvedModule;
  results.push({
    resolved: r ? path.resolve(r.resolvedFileName) : null,
    external: r ? Boolean(r.isExternalLibraryImport) : false,
    config,
  });
}
const files = {};
for (const file of input.files || []) {
  const config = configFor(file);
  const { options, cache } = optionsFor(config);
  if (config) configs[config] = ts.ModuleResolutionKind[ts.getEmitModuleResolutionKind(options)];
  const mode = ts.getImpliedNodeFormatForFile(file, cache.getPackageJsonInfoCache(), ts.sys, options);
  files[file] = [];
  for (const spec of importsOf(file)) {
    const r = ts.resolveModuleName(spec, file, options, ts.sys, cache, undefined, mode).resolvedModule;
    files[file].push({ spec, resolved: r ? path.resolve(r.resolvedFileName) : null,
                       external: r ? Boolean(r.isExternalLibraryImport) : false });
  }
}
process.stdout.write(JSON.stringify({ version: ts.version, configs, results, files }));
