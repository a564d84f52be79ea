// The plugins of a plugin root laid out as a real host lays it out: <root>/volume/<dir>, <root>/datapath/<scheme>.
// A plugin is registered when Plugin.Query succeeds with a supported required_api_version; its features are
// then what the toolstack takes them to be, not only what it declares (compat-notes §1).
import { existsSync } from "node:fs";
import { readFile, readdir, stat } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { type PluginClient, createPluginClient } from "./client.ts";
import { CALLER_CODES, StorageError } from "./errors.ts";
import { type ExecTransportOptions, createExecTransport, findScript } from "./exec-transport.ts";
import type { MethodName } from "./interface.ts";
import { createJsonRpcTransport } from "./jsonrpc-transport.ts";
import type { QueryResult } from "./types.ts";

export type PluginKind = "volume" | "datapath";
export const PLUGIN_KINDS: readonly PluginKind[] = ["volume", "datapath"];
export const SUPPORTED_API_VERSIONS = ["5.0", "3.0"];
/** A plugin directory holding this file is a daemon: the file names its JSON-RPC endpoint. */
export const ENDPOINT_FILE = "jsonrpc-endpoint";

/** A feature the toolstack gives a volume plugin beyond those it declares. */
export interface DerivedFeature {
  feature: string;
  /** The method script whose presence gives it; absent for those the toolstack adds to every volume plugin. */
  script?: MethodName;
}

export interface RegisteredPlugin {
  kind: PluginKind;
  dir: string;
  path: string;
  /** SR type (volume plugins: last "."-part of dir, lower-cased) or URI scheme (datapath plugins: dir). */
  type: string;
  /** What Plugin.Query answered, untouched. */
  query: QueryResult;
  /** query.features as the toolstack reads them: VDI_DESTROY (the xapi-storage spelling) is VDI_DELETE. */
  declaredFeatures: string[];
  /** Volume plugins: one per method script present, plus the fixed set; never one already declared. */
  derivedFeatures: DerivedFeature[];
  /** The effective features, declared then derived: what callers must go by. */
  features: string[];
  client: PluginClient;
  warnings: string[];
}

export interface SkippedPlugin {
  kind: PluginKind;
  dir: string;
  path: string;
  reason: string;
}

export interface PluginRegistry {
  root: string;
  plugins: RegisteredPlugin[];
  skipped: SkippedPlugin[];
  /** By directory name, SR type or URI scheme; `kind` narrows the search. */
  find(name: string, kind?: PluginKind): RegisteredPlugin | undefined;
}

export type ScanOptions = ExecTransportOptions;

export function defaultPluginRoot(): string {
  const fromEnv = process.env.HANGAR_PLUGIN_ROOT;
  if (fromEnv !== undefined && fromEnv !== "") return resolve(fromEnv);
  return resolve(dirname(fileURLToPath(import.meta.url)), "..", "plugins");
}

export function srTypeOf(volumeDir: string): string {
  return (volumeDir.split(".").pop() ?? volumeDir).toLowerCase();
}

/** Queries every plugin of the root in parallel. A missing root is an empty one, not an error. */
export async function scanPluginRoot(root: string, options: ScanOptions = {}): Promise<PluginRegistry> {
  const absoluteRoot = resolve(root);
  const candidates = (await Promise.all(PLUGIN_KINDS.map((kind) => listPluginDirs(absoluteRoot, kind)))).flat();
  const outcomes = await Promise.all(candidates.map((candidate) => register(candidate, options)));
  const plugins = outcomes.filter((o): o is RegisteredPlugin => "client" in o);
  const skipped = outcomes.filter((o): o is SkippedPlugin => "reason" in o);
  const order = (p: { kind: PluginKind; dir: string }) => `${PLUGIN_KINDS.indexOf(p.kind)}:${p.dir}`;
  plugins.sort((a, b) => order(a).localeCompare(order(b)));
  skipped.sort((a, b) => order(a).localeCompare(order(b)));
  return registryOf(absoluteRoot, plugins, skipped);
}

/** A registry of plugins already registered (scanned here, or listed by another host of the pool). */
export function registryOf(root: string, plugins: RegisteredPlugin[], skipped: SkippedPlugin[]): PluginRegistry {
  return {
    root,
    plugins,
    skipped,
    find(name, kind) {
      const pool = kind === undefined ? plugins : plugins.filter((p) => p.kind === kind);
      const lower = name.toLowerCase();
      return pool.find((p) => p.dir === name) ?? pool.find((p) => p.type === lower) ?? pool.find((p) => p.dir.toLowerCase() === lower);
    },
  };
}

interface Candidate {
  kind: PluginKind;
  dir: string;
  path: string;
}

async function listPluginDirs(root: string, kind: PluginKind): Promise<Candidate[]> {
  const base = join(root, kind);
  if (!existsSync(base)) return [];
  const dirs: Candidate[] = [];
  for (const dir of (await readdir(base)).sort()) {
    const path = join(base, dir);
    // A dangling symlink (a removed plugin package) must not break the scan of the others.
    const isDirectory = await stat(path).then((s) => s.isDirectory(), () => false);
    if (!dir.startsWith(".") && isDirectory) dirs.push({ kind, dir, path });
  }
  return dirs;
}

async function register(candidate: Candidate, options: ScanOptions): Promise<RegisteredPlugin | SkippedPlugin> {
  const skip = (reason: string): SkippedPlugin => ({ ...candidate, reason });
  const endpointFile = join(candidate.path, ENDPOINT_FILE);
  const daemon = existsSync(endpointFile);
  let client: PluginClient;
  try {
    const transport = daemon
      ? createJsonRpcTransport(candidate.dir, { url: (await readFile(endpointFile, "utf8")).trim(), timeoutMs: options.timeoutMs })
      : createExecTransport(candidate.path, candidate.dir, options);
    client = createPluginClient(candidate.dir, transport);
  } catch (error) {
    return skip((error as Error).message);
  }
  let query: QueryResult;
  try {
    query = await client.call("Plugin.query", { dbg: "hangar: plugin scan" });
  } catch (error) {
    const message = (error as Error).message;
    const code = error instanceof StorageError && !message.startsWith(error.code) ? `${error.code}: ` : "";
    return skip(`Plugin.Query failed: ${code}${message}`);
  }
  if (!SUPPORTED_API_VERSIONS.includes(query.required_api_version)) {
    return skip(`requires API version ${query.required_api_version}; supported: ${SUPPORTED_API_VERSIONS.join(", ")}`);
  }
  const type = candidate.kind === "volume" ? srTypeOf(candidate.dir) : candidate.dir.toLowerCase();
  const warnings: string[] = [];
  if (candidate.kind === "volume" && query.plugin.toLowerCase() !== type) {
    warnings.push(`Plugin.Query names the plugin "${query.plugin}" but its directory gives SR type "${type}"`);
  }
  const declaredFeatures = [...new Set(query.features.map(renameDeclared))];
  // A daemon has no scripts to derive from; datapath plugins' features are taken as declared.
  const derivedFeatures = candidate.kind === "volume" ? await deriveFeatures(declaredFeatures, daemon ? undefined : candidate) : [];
  const features = [...declaredFeatures, ...derivedFeatures.map((d) => d.feature)];
  return { ...candidate, type, query, declaredFeatures, derivedFeatures, features, client, warnings };
}

/** The volume plugin serving SRs of `type` (its SR type, in any case). */
export function volumePluginOfType(registry: PluginRegistry, type: string): RegisteredPlugin | undefined {
  return registry.plugins.find((p) => p.kind === "volume" && p.type === type.toLowerCase());
}

/** A feature without its optional `/N` version suffix (`VDI_RESET_ON_BOOT/2` → `VDI_RESET_ON_BOOT`). */
export function featureName(feature: string): string {
  return feature.replace(/\/\d+$/, "");
}

function renameDeclared(feature: string): string {
  return featureName(feature) === "VDI_DESTROY" ? `VDI_DELETE${feature.slice("VDI_DESTROY".length)}` : feature;
}

/** The scripts xapi-storage-script looks for in a volume plugin, and the feature each one gives. */
const SCRIPT_FEATURES: readonly (readonly [MethodName, string])[] = [
  ["SR.attach", "SR_ATTACH"],
  ["SR.create", "SR_CREATE"],
  ["SR.destroy", "SR_DELETE"],
  ["SR.detach", "SR_DETACH"],
  ["SR.ls", "SR_SCAN"],
  ["SR.stat", "SR_UPDATE"],
  ["SR.probe", "SR_PROBE"],
  ["Volume.create", "VDI_CREATE"],
  ["Volume.clone", "VDI_CLONE"],
  ["Volume.snapshot", "VDI_SNAPSHOT"],
  ["Volume.resize", "VDI_RESIZE"],
  ["Volume.destroy", "VDI_DELETE"],
  ["Volume.stat", "VDI_UPDATE"],
];

/** What xapi-storage-script adds to every volume plugin, whatever it ships. */
const ALWAYS_FEATURES = ["VDI_ATTACH", "VDI_DETACH", "VDI_ACTIVATE", "VDI_DEACTIVATE", "VDI_INTRODUCE"];

/**
 * What xapi-storage-script adds to a volume plugin's declared features: one per executable method script
 * (looked up as calls look it up), the fixed set, and clone-on-boot when the plugin can clone. A feature
 * declared in any version is not added again, so a declared `/N` suffix stands.
 */
async function deriveFeatures(declared: readonly string[], scripts: Candidate | undefined): Promise<DerivedFeature[]> {
  const present = new Set(declared.map(featureName));
  const derived: DerivedFeature[] = [];
  const add = (feature: string, script?: MethodName) => {
    if (present.has(featureName(feature))) return;
    present.add(featureName(feature));
    derived.push(script === undefined ? { feature } : { feature, script });
  };
  if (scripts !== undefined) {
    const found = await Promise.all(SCRIPT_FEATURES.map(([script]) => findScript(scripts.path, script, scripts.dir).then(() => true, () => false)));
    SCRIPT_FEATURES.forEach(([script, feature], i) => {
      if (found[i] === true) add(feature, script);
    });
  }
  for (const feature of ALWAYS_FEATURES) add(feature);
  if (present.has("VDI_CLONE")) add("VDI_RESET_ON_BOOT/2");
  return derived;
}

/** The scheme of a URI as a datapath directory name would spell it. */
export function uriScheme(uri: string): string | undefined {
  const match = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(uri);
  return match?.[1]?.toLowerCase();
}

/** The first URI, in the volume's order of desirability, whose scheme has a datapath plugin. */
export function chooseDatapath(registry: PluginRegistry, uris: readonly string[]): { plugin: RegisteredPlugin; uri: string } {
  for (const uri of uris) {
    const scheme = uriScheme(uri);
    const plugin = scheme === undefined ? undefined : registry.plugins.find((p) => p.kind === "datapath" && p.type === scheme);
    if (plugin !== undefined) return { plugin, uri };
  }
  throw new StorageError(CALLER_CODES.missingUri, [...uris], `no datapath plugin for any of: ${uris.join(", ") || "(no URIs)"}`);
}
