// The plugins of a plugin root laid out as a real host lays it out: <root>/volume/<dir>, <root>/datapath/<scheme>.
// A plugin is registered when Plugin.Query succeeds with a supported required_api_version.
import { existsSync } from "node:fs";
import { readFile, readdir, stat } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { type PluginClient, createPluginClient } from "./client.ts";
import { CALLER_CODES, StorageError } from "./errors.ts";
import { type ExecTransportOptions, createExecTransport } from "./exec-transport.ts";
import { createJsonRpcTransport } from "./jsonrpc-transport.ts";
import type { Transport } from "./transport.ts";
import type { QueryResult } from "./types.ts";

export type PluginKind = "volume" | "datapath";
export const PLUGIN_KINDS: readonly PluginKind[] = ["volume", "datapath"];
export const SUPPORTED_API_VERSIONS = ["5.0", "3.0"];
/** A plugin directory holding this file is a daemon: the file names its JSON-RPC endpoint. */
export const ENDPOINT_FILE = "jsonrpc-endpoint";

export interface RegisteredPlugin {
  kind: PluginKind;
  dir: string;
  path: string;
  /** SR type (volume plugins: last "."-part of dir, lower-cased) or URI scheme (datapath plugins: dir). */
  type: string;
  query: QueryResult;
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
  return {
    root: absoluteRoot,
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
  let client: PluginClient;
  try {
    client = createPluginClient(candidate.dir, await transportFor(candidate, options));
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
  return { ...candidate, type, query, client, warnings };
}

async function transportFor(candidate: Candidate, options: ScanOptions): Promise<Transport> {
  const endpointFile = join(candidate.path, ENDPOINT_FILE);
  if (!existsSync(endpointFile)) return createExecTransport(candidate.path, candidate.dir, options);
  const url = (await readFile(endpointFile, "utf8")).trim();
  return createJsonRpcTransport(candidate.dir, { url, timeoutMs: options.timeoutMs });
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
