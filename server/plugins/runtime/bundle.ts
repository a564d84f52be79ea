// Bundles each of our plugins' dispatchers (esbuild, one ES module per plugin plus lazily loaded chunks), so a
// plugin call loads one pre-linked file instead of resolving and type-stripping dozens of modules. The entries
// stay exactly as a toolstack expects (../entry runs `<plugin dir>/.bundle/current/plugin.mjs` when it exists);
// a bundle whose sources changed since it was built falls back to the sources at run time, so a stale or
// missing bundle is only ever slower, never wrong. Built by `npm install`, `npm start`, `npm test` and the bench.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { BundleManifest } from "./bundle-freshness.ts";

const PLUGINS_DIR = resolve(import.meta.dirname, "..");
const SERVER_DIR = resolve(PLUGINS_DIR, "..");
const REPO_ROOT = resolve(SERVER_DIR, "..");
const ENTRY = "hangar-plugin-entry";
const DAEMON_ENTRY = "hangar-daemon-entry";
/** Builds older than this are removed; younger ones may still be loading chunks in a running call. */
const KEEP_OLD_BUILDS_MS = 10 * 60 * 1000;

/** The plugin directories of our root that have a dispatcher (`plugin.ts`). */
export function bundledPluginDirs(): string[] {
  return ["volume", "datapath"].flatMap((kind) =>
    readdirSync(join(PLUGINS_DIR, kind), { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && existsSync(join(PLUGINS_DIR, kind, entry.name, "plugin.ts")))
      .map((entry) => join(PLUGINS_DIR, kind, entry.name)),
  );
}

/** The generated entry: the bundled plugin when fresh, else the sources (with their own dispatcher). */
function entrySource(pluginDir: string): string {
  const pluginTs = join(pluginDir, "plugin.ts");
  const dispatcherTs = join(SERVER_DIR, "storage", "dispatcher.ts");
  const sources = { plugin: pathToFileURL(pluginTs).href, dispatcher: pathToFileURL(dispatcherTs).href };
  return `
import { bundleIsFresh } from ${JSON.stringify(join(import.meta.dirname, "bundle-freshness.ts"))};
import { plugin } from ${JSON.stringify(pluginTs)};
import { runScriptEntry } from ${JSON.stringify(dispatcherTs)};
const sources = ${JSON.stringify(sources)};
const method = process.argv[2] ?? "";
if (bundleIsFresh(new URL("./manifest.json", import.meta.url))) {
  await runScriptEntry(plugin, method);
} else {
  const [source, dispatcher] = await Promise.all([import(sources.plugin), import(sources.dispatcher)]);
  await dispatcher.runScriptEntry(source.plugin, method);
}
`;
}

/** The generated entry of a plugin's daemon (`daemon.ts` beside its dispatcher, exporting `daemonMain`), started by the plugin while its bundle is fresh. */
function daemonEntrySource(pluginDir: string): string {
  return `
import { daemonMain } from ${JSON.stringify(join(pluginDir, "daemon.ts"))};
await daemonMain(process.argv.slice(2));
`;
}

/** import.meta of each source as it would be unbundled: daemons are found next to their sources. */
function importMetaOf(path: string): Array<[RegExp, string]> {
  return [
    [/\bimport\.meta\.url\b/g, JSON.stringify(pathToFileURL(path).href)],
    [/\bimport\.meta\.dirname\b/g, JSON.stringify(dirname(path))],
    [/\bimport\.meta\.filename\b/g, JSON.stringify(path)],
    // Only the generated entry is a process's main module.
    [/\bimport\.meta\.main\b/g, "false"],
  ];
}

/**
 * The data properties of each of Node's built-in modules as a fresh process sees them. Asked of a child
 * process: in this one, esbuild and our own imports have already run some lazy getters (fs.ReadStream,
 * util.TextDecoder), which then look like plain values.
 */
function builtinDataProperties(): Map<string, string[]> {
  const script = `
    const { builtinModules } = require("node:module");
    const out = {};
    for (const name of builtinModules) {
      const id = name.startsWith("node:") ? name : "node:" + name;
      let m;
      try { m = process.getBuiltinModule(id); } catch { continue; }
      if (m === undefined || m === null) continue;
      out[id] = Object.keys(m).filter((k) => "value" in (Object.getOwnPropertyDescriptor(m, k) ?? {}));
    }
    process.stdout.write(JSON.stringify(out));`;
  const output = execFileSync(process.execPath, ["-e", script], { encoding: "utf8", maxBuffer: 16 * 1024 * 1024, stdio: ["ignore", "pipe", "ignore"] });
  return new Map(Object.entries(JSON.parse(output) as Record<string, string[]>));
}

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/**
 * A Node built-in as a plain module over process.getBuiltinModule. Node's own ES module facade of a built-in
 * reads every export when first imported, and for node:fs that runs the lazy getters of its streams: ~6 ms
 * per plugin call for nothing. Only data properties are exported; a bundled module that names an accessor
 * (fs.ReadStream, fs.promises) fails the build (see the warnings check) rather than getting undefined.
 */
function builtinFacade(specifier: string, dataProperties: Map<string, string[]>): string {
  const names = dataProperties.get(specifier);
  if (names === undefined) throw new Error(`${specifier} is not a Node built-in module`);
  const lines = [`const m = process.getBuiltinModule(${JSON.stringify(specifier)});`, "export default m;"];
  // Pure calls, so esbuild drops the exports nobody imports and only the imported properties are read.
  const read = (name: string) => `/* @__PURE__ */ (() => m.${name})()`;
  for (const name of names) if (IDENTIFIER.test(name) && name !== "default") lines.push(`export const ${name} = ${read(name)};`);
  return lines.join("\n");
}

/** Builds one plugin's bundle into `<dir>/.bundle/<build>/` and points `<dir>/.bundle/current` at it. */
export async function bundlePlugin(pluginDir: string, dataProperties = builtinDataProperties()): Promise<string> {
  const esbuild = await import("esbuild");
  const { readFile } = await import("node:fs/promises");
  const bundleDir = join(pluginDir, ".bundle");
  const build = `${Date.now().toString(36)}-${process.pid}`;
  const outdir = join(bundleDir, build);
  mkdirSync(outdir, { recursive: true });
  const result = await esbuild.build({
    entryPoints: { plugin: ENTRY, ...(existsSync(join(pluginDir, "daemon.ts")) ? { daemon: DAEMON_ENTRY } : {}) },
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node24",
    outdir,
    outExtension: { ".js": ".mjs" },
    metafile: true,
    logLevel: "silent",
    absWorkingDir: REPO_ROOT,
    plugins: [
      {
        name: "hangar-plugin",
        setup(build) {
          build.onResolve({ filter: new RegExp(`^(${ENTRY}|${DAEMON_ENTRY})$`) }, (args) => ({ path: args.path, namespace: "hangar-entry" }));
          build.onLoad({ filter: /.*/, namespace: "hangar-entry" }, (args) => ({
            contents: args.path === DAEMON_ENTRY ? daemonEntrySource(pluginDir) : entrySource(pluginDir),
            loader: "ts",
            resolveDir: pluginDir,
          }));
          build.onResolve({ filter: /^node:/ }, (args) => ({ path: args.path, namespace: "builtin" }));
          build.onLoad({ filter: /.*/, namespace: "builtin" }, (args) => ({ contents: builtinFacade(args.path, dataProperties), loader: "js" }));
          build.onLoad({ filter: /\.ts$/ }, async (args) => {
            if (!args.path.startsWith(SERVER_DIR)) return undefined;
            let contents = await readFile(args.path, "utf8");
            for (const [pattern, value] of importMetaOf(args.path)) contents = contents.replace(pattern, value);
            return { contents, loader: "ts" };
          });
        },
      },
    ],
  });
  if (result.warnings.length > 0) {
    rmSync(outdir, { recursive: true, force: true });
    const text = await esbuild.formatMessages(result.warnings, { kind: "warning" });
    throw new Error(`bundling ${pluginDir} gave warnings:\n${text.join("\n")}`);
  }
  const inputs = Object.keys(result.metafile.inputs)
    .filter((input) => !input.startsWith("hangar-entry:") && !input.startsWith("builtin:"))
    .map((input) => resolve(REPO_ROOT, input));
  // Any npm install (a changed dependency) shows here, so the bundled copies of libraries are never stale.
  const lock = join(REPO_ROOT, "node_modules", ".package-lock.json");
  const manifest: BundleManifest = {
    inputs: [...inputs.filter((input) => !input.includes("/node_modules/")), ...(existsSync(lock) ? [lock] : [])].map((path) => {
      const stat = statSync(path);
      return [path, stat.mtimeMs, stat.size];
    }),
  };
  writeFileSync(join(outdir, "manifest.json"), `${JSON.stringify(manifest)}\n`);
  // Switch atomically: a call starting now runs either the old build or the new one, whole.
  const link = join(bundleDir, `current.${process.pid}`);
  rmSync(link, { force: true });
  symlinkSync(build, link);
  renameSync(link, join(bundleDir, "current"));
  removeOldBuilds(bundleDir, build);
  return outdir;
}

function removeOldBuilds(bundleDir: string, keep: string): void {
  for (const entry of readdirSync(bundleDir, { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name === keep) continue;
    const path = join(bundleDir, entry.name);
    if (Date.now() - statSync(path).mtimeMs > KEEP_OLD_BUILDS_MS) rmSync(path, { recursive: true, force: true });
  }
}

export async function bundleAll(): Promise<string[]> {
  const dataProperties = builtinDataProperties();
  return Promise.all(bundledPluginDirs().map((dir) => bundlePlugin(dir, dataProperties)));
}

if (import.meta.main) {
  const started = performance.now();
  const built = await bundleAll();
  const where = built.map((dir) => relative(REPO_ROOT, dirname(dirname(dir)))).join(", ");
  console.log(`bundled ${built.length} plugins (${where}) in ${Math.round(performance.now() - started)} ms`);
}

