// The plugins of another host of a pool, reached through that host's toolstack: it lists its registry at
// GET <host>/plugins and relays each call to <host>/plugins/<kind>/<dir> as JSON-RPC, the same interface the
// plugins speak. Credentials (the pool's secret, or a user's session) go as headers with every request.
import { z } from "zod";
import { createPluginClient } from "./client.ts";
import { CALLER_CODES, StorageError } from "./errors.ts";
import { DEFAULT_TIMEOUT_MS } from "./exec-transport.ts";
import { createJsonRpcTransport } from "./jsonrpc-transport.ts";
import { PLUGIN_KINDS, type PluginRegistry, registryOf, type RegisteredPlugin } from "./registry.ts";
import { ZQueryResult } from "./types.ts";

/** What a host lists of its registry: everything a caller needs but the client, which it makes itself. */
export const ZPoolPluginListing = z.object({
  root: z.string(),
  plugins: z.array(
    z.object({
      kind: z.enum(PLUGIN_KINDS as ["volume", "datapath"]),
      dir: z.string().min(1).regex(/^[^/]+$/, "a directory name"),
      type: z.string(),
      query: z.unknown(),
      declaredFeatures: z.array(z.string()),
      derivedFeatures: z.array(z.object({ feature: z.string(), script: z.string().optional() })),
      features: z.array(z.string()),
      warnings: z.array(z.string()),
    }),
  ),
  skipped: z.array(z.object({ kind: z.enum(PLUGIN_KINDS as ["volume", "datapath"]), dir: z.string(), path: z.string(), reason: z.string() })),
});
export type TPoolPluginListing = z.infer<typeof ZPoolPluginListing>;

/** A registry as another host lists it (the plugin clients left out). */
export function listingOf(registry: PluginRegistry): TPoolPluginListing {
  return {
    root: registry.root,
    plugins: registry.plugins.map(({ client: _client, path: _path, ...plugin }) => plugin),
    skipped: registry.skipped,
  };
}

export interface PoolHostEndpoint {
  /** The host's service, `http://address:port`. */
  baseUrl: string;
  headers: Record<string, string>;
  timeoutMs?: number;
}

/** The registry of the host at `endpoint`: its plugins, each called through that host. */
export async function fetchPoolRegistry(endpoint: PoolHostEndpoint): Promise<PluginRegistry> {
  const url = `${endpoint.baseUrl}/plugins`;
  const failed = (why: string) => new StorageError(CALLER_CODES.transportFailed, ["(pool host)", "Plugin.list", why], `listing the plugins of ${endpoint.baseUrl}: ${why}`);
  let response: Response;
  try {
    response = await fetch(url, { headers: endpoint.headers, signal: AbortSignal.timeout(endpoint.timeoutMs ?? DEFAULT_TIMEOUT_MS) });
  } catch (error) {
    throw failed((error as { cause?: Error }).cause?.message ?? (error as Error).message);
  }
  const text = await response.text();
  if (!response.ok) throw failed(`HTTP ${response.status}: ${text.trim().slice(0, 200)}`);
  const parsed = ZPoolPluginListing.safeParse(JSON.parse(text));
  if (!parsed.success) throw failed(`not a plugin listing: ${parsed.error.issues[0]?.message ?? ""}`);
  const plugins = parsed.data.plugins.map((plugin): RegisteredPlugin => {
    const path = `${url}/${plugin.kind}/${encodeURIComponent(plugin.dir)}`;
    const transport = createJsonRpcTransport(plugin.dir, { url: path, headers: endpoint.headers, timeoutMs: endpoint.timeoutMs });
    return { ...plugin, query: ZQueryResult.parse(plugin.query), derivedFeatures: plugin.derivedFeatures as RegisteredPlugin["derivedFeatures"], path, client: createPluginClient(plugin.dir, transport) };
  });
  return registryOf(parsed.data.root, plugins, parsed.data.skipped);
}
