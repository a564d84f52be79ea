// How the console reaches the plugin behind an SR the toolstack knows: the SR's type and its attached PBD's
// SR URI come from the toolstack (the user's session, so its permissions apply), the plugin from the host the
// PBD is on: the console's own plugin root for the host of its toolstack, another host's plugins through that
// host's toolstack (its /plugins, with the user's session). Reads of storage state go straight to the plugin
// this way; changes go through the toolstack.
import "server-only";

import { TRPCError } from "@trpc/server";
import { z } from "zod";
import type { MethodName, Params, Result } from "../storage/interface.ts";
import { fetchPoolRegistry } from "../storage/pool-registry.ts";
import { type PluginKind, type PluginRegistry, type RegisteredPlugin, scanPluginRoot } from "../storage/registry.ts";
import { toolstackUrl } from "../config.ts";
import { hostLabel, type HostRecord, hostUrl, ZHostRecord } from "../xenapi/hosts.ts";
import type { XenApiClient } from "../xenapi/client.ts";
import { toTRPCError } from "./storage-error.ts";

/** The `dbg` of the console's plugin calls. */
export const CONSOLE_DBG = "hangar console";
/** A plugin call the console waits for: a hung plugin gets an answer in words, and the page goes on. */
const PLUGIN_CALL_TIMEOUT_MS = 15_000;
/** A scan spawns one process per plugin: pages that poll reuse one for this long. */
const REGISTRY_TTL_MS = 10_000;
/** Another host's registry is kept per session (its clients carry it): at most this many at once. */
const REMOTE_REGISTRIES_KEPT = 64;

/**
 * Values that change rarely but cost a process or a toolstack round trip to read (the plugin registry, an
 * SR's type): the first caller waits for them; later ones get the last value at once, refreshed in the
 * background once it is older than `ttlMs`, so pages that poll never pay for the refresh.
 */
class StaleWhileRevalidate<T> {
  readonly #entries = new Map<string, { at: number; value: Promise<T>; refreshing: boolean }>();
  readonly #ttlMs: number;
  readonly #maxEntries: number;

  /** `maxEntries`: the oldest key is forgotten when a new one would make more. */
  constructor(ttlMs: number, maxEntries = Infinity) {
    this.#ttlMs = ttlMs;
    this.#maxEntries = maxEntries;
  }

  get(key: string, load: () => Promise<T>): Promise<T> {
    const entry = this.#entries.get(key);
    if (entry === undefined) return this.#load(key, load);
    if (Date.now() - entry.at >= this.#ttlMs && !entry.refreshing) {
      entry.refreshing = true;
      // The fresh value replaces the old only once it has succeeded; a failed refresh keeps the old one.
      load().then(
        (value) => this.#entries.set(key, { at: Date.now(), value: Promise.resolve(value), refreshing: false }),
        () => (entry.refreshing = false),
      );
    }
    return entry.value;
  }

  #load(key: string, load: () => Promise<T>): Promise<T> {
    if (this.#entries.size >= this.#maxEntries) this.#entries.delete(this.#entries.keys().next().value!);
    const value = load();
    this.#entries.set(key, { at: Date.now(), value, refreshing: false });
    value.catch(() => this.#entries.delete(key));
    return value;
  }
}

const registries = new StaleWhileRevalidate<PluginRegistry>(REGISTRY_TTL_MS);

/** The plugin root's registry, rescanned in the background at most every REGISTRY_TTL_MS. */
export function pluginRegistry(root: string): Promise<PluginRegistry> {
  return registries.get(root, () => scanPluginRoot(root));
}

export async function findPlugin(root: string, name: string, kind: PluginKind): Promise<RegisteredPlugin> {
  return findIn(localPlugins(root), name, kind);
}

async function findIn(place: PluginPlace, name: string, kind: PluginKind): Promise<RegisteredPlugin> {
  const registry = await place.registry();
  const plugin = registry.find(name, kind);
  if (plugin === undefined) throw new TRPCError({ code: "NOT_FOUND", message: `No ${kind} plugin for "${name}" is installed ${place.where}.` });
  return plugin;
}

export interface PoolHost {
  ref: string;
  name: string;
  address: string;
  live: boolean;
  /** Its toolstack's base URL, `http://address:port`. */
  url: string;
}

export function poolHost(ref: string, record: HostRecord): PoolHost {
  return { ref, name: record.name_label, address: record.address, live: record.live, url: hostUrl(record) };
}

const LOOPBACK = new Set(["localhost", "127.0.0.1", "::1"]);

/** Whether `address` is the host the console's toolstack URL names: its plugins are the console's plugin root. */
export function isToolstackHost(address: string): boolean {
  const named = new URL(toolstackUrl()).hostname.replace(/^\[|\]$/g, "");
  return address === named || (LOOPBACK.has(address) && LOOPBACK.has(named));
}

export function hostOfflineError(host: Pick<PoolHost, "name" | "address">, what: string): TRPCError {
  return new TRPCError({
    code: "PRECONDITION_FAILED",
    message: `The host ${hostLabel(host)} is offline: its heartbeat stopped, so ${what} cannot be reached until it is back.`,
  });
}

/** Where plugins are: `scope` names them (for caches), `where` for messages; `registry()` lists them. */
export interface PluginPlace {
  scope: string;
  where: string;
  /** undefined: the console's own plugin root (its toolstack's host). */
  host: PoolHost | undefined;
  registry(): Promise<PluginRegistry>;
}

function localPlugins(root: string): PluginPlace {
  return {
    scope: root,
    where: `in ${root}`,
    host: undefined,
    registry: () => pluginRegistry(root).catch((error: unknown) => Promise.reject(toTRPCError(error, `Scanning the plugin root ${root}`))),
  };
}

const remoteRegistries = new StaleWhileRevalidate<PluginRegistry>(REGISTRY_TTL_MS, REMOTE_REGISTRIES_KEPT);

/**
 * The plugins serving SRs attached on `host`: the console's plugin root when it is its toolstack's host (or
 * unknown: a toolstack without hosts), else that host's plugins through its toolstack, in the user's session.
 * An offline host is refused in words (`what` says what could not be reached).
 */
export function hostPlugins(xapi: XenApiClient, pluginRoot: string, host: PoolHost | undefined, what = "its SRs"): PluginPlace {
  if (host === undefined || isToolstackHost(host.address)) return localPlugins(pluginRoot);
  return {
    scope: host.url,
    where: `on the host ${hostLabel(host)}`,
    host,
    registry: async () => {
      if (!host.live) throw hostOfflineError(host, what);
      try {
        return await remoteRegistries.get(`${host.url}\n${xapi.session}`, () =>
          fetchPoolRegistry({ baseUrl: host.url, headers: { cookie: `session_id=${xapi.session}` }, timeoutMs: PLUGIN_CALL_TIMEOUT_MS }),
        );
      } catch (error) {
        throw toTRPCError(error, `Listing the plugins of the host ${hostLabel(host)}`);
      }
    },
  };
}

/** The pool's hosts by ref, as the console reaches them. */
export async function poolHosts(xapi: XenApiClient): Promise<Map<string, PoolHost>> {
  const records = await xapi.records("host", ZHostRecord);
  return new Map(Object.entries(records).map(([ref, record]) => [ref, poolHost(ref, record)]));
}

/** One plugin call with a deadline; failures become TRPCErrors that say what was attempted. */
export async function callPlugin<M extends MethodName>(plugin: RegisteredPlugin, method: M, params: Params<M>): Promise<Result<M>> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new TRPCError({ code: "TIMEOUT", message: `${method} on the "${plugin.type}" plugin did not answer in ${PLUGIN_CALL_TIMEOUT_MS / 1000} s.` })),
      PLUGIN_CALL_TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([plugin.client.call(method, params), deadline]);
  } catch (error) {
    throw toTRPCError(error, `${method} on the "${plugin.type}" plugin`);
  } finally {
    clearTimeout(timer);
  }
}

const ZSrFacts = z.object({ uuid: z.string(), name_label: z.string(), type: z.string() });
const ZPbdRecords = z.record(
  z.string(),
  z.looseObject({ SR: z.string(), host: z.string().default(""), currently_attached: z.boolean(), other_config: z.record(z.string(), z.string()) }),
);

/** An SR's uuid, name and type: any SR getter makes the toolstack wait for SR.stat, which a listing does not need. */
const srFacts = new StaleWhileRevalidate<z.infer<typeof ZSrFacts>>(REGISTRY_TTL_MS);

export interface SrAccess {
  ref: string;
  uuid: string;
  name: string;
  type: string;
  /** The SR as its plugin names it (what SR.attach answered). */
  uri: string;
  plugin: RegisteredPlugin;
  /** Where the plugin is: the host the SR is attached on. */
  place: PluginPlace;
}

/**
 * The volume plugin and SR URI of an attached SR, on the host it is attached on; PRECONDITION_FAILED when
 * the SR is detached or its host offline. Whether it is attached, and where, is asked every time (PBDs and
 * hosts, with the user's session); its facts and the registries come from the caches above, and the
 * look-ups run at once.
 */
export async function accessSr(xapi: XenApiClient, pluginRoot: string, srRef: string): Promise<SrAccess> {
  const [sr, pbds, hosts] = await Promise.all([
    srFacts.get(`${xapi.url} ${srRef}`, async () => ZSrFacts.parse(await xapi.call(z.looseObject({}), "SR.get_record", srRef))),
    xapi.call(ZPbdRecords, "PBD.get_all_records"),
    poolHosts(xapi),
    pluginRegistry(pluginRoot).catch(() => undefined),
  ]);
  const pbd = Object.values(pbds).find((pbd) => pbd.SR === srRef && pbd.currently_attached && pbd.other_config["hangar-sr-uri"]);
  const uri = pbd?.other_config["hangar-sr-uri"];
  if (pbd === undefined || uri === undefined) {
    // No attached PBD: an SR removed meanwhile says so (HANDLE_INVALID), not "detached" from the cached facts.
    await xapi.call(z.looseObject({}), "SR.get_record", srRef);
    throw new TRPCError({ code: "PRECONDITION_FAILED", message: `The SR "${sr.name_label}" is detached: attach it to see its volumes.` });
  }
  const place = hostPlugins(xapi, pluginRoot, hosts.get(pbd.host), `the SR "${sr.name_label}" on it`);
  return { ref: srRef, uuid: sr.uuid, name: sr.name_label, type: sr.type, uri, plugin: await findIn(place, sr.type, "volume"), place };
}
