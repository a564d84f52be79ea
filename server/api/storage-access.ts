// How the console reaches the plugin behind an SR the toolstack knows: the SR's type and its attached PBD's
// SR URI come from the toolstack (the user's session, so its permissions apply), the plugin from the plugin
// root. Reads of storage state go straight to the plugin this way; changes go through the toolstack.
import { TRPCError } from "@trpc/server";
import { z } from "zod";
import type { MethodName, Params, Result } from "../storage/interface.ts";
import { type PluginKind, type PluginRegistry, type RegisteredPlugin, scanPluginRoot } from "../storage/registry.ts";
import type { XenApiClient } from "../toolstack/xenapi/client.ts";
import { toTRPCError } from "./storage-error.ts";

/** The `dbg` of the console's plugin calls. */
export const CONSOLE_DBG = "hangar console";
/** A plugin call the console waits for: a hung plugin gets an answer in words, and the page goes on. */
const PLUGIN_CALL_TIMEOUT_MS = 15_000;
/** A scan spawns one process per plugin: pages that poll reuse one for this long. */
const REGISTRY_TTL_MS = 10_000;

/**
 * Values that change rarely but cost a process or a toolstack round trip to read (the plugin registry, an
 * SR's type): the first caller waits for them; later ones get the last value at once, refreshed in the
 * background once it is older than `ttlMs`, so pages that poll never pay for the refresh.
 */
class StaleWhileRevalidate<T> {
  readonly #entries = new Map<string, { at: number; value: Promise<T>; refreshing: boolean }>();
  readonly #ttlMs: number;

  constructor(ttlMs: number) {
    this.#ttlMs = ttlMs;
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
  let registry: PluginRegistry;
  try {
    registry = await pluginRegistry(root);
  } catch (error) {
    throw toTRPCError(error, `Scanning the plugin root ${root}`);
  }
  const plugin = registry.find(name, kind);
  if (plugin === undefined) throw new TRPCError({ code: "NOT_FOUND", message: `No ${kind} plugin for "${name}" is installed in ${root}.` });
  return plugin;
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
const ZPbdRecords = z.record(z.string(), z.looseObject({ SR: z.string(), currently_attached: z.boolean(), other_config: z.record(z.string(), z.string()) }));

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
}

/**
 * The volume plugin and SR URI of an attached SR; PRECONDITION_FAILED when the SR is detached. Whether it is
 * attached is asked every time (its PBD, with the user's session); its facts and the registry come from
 * the caches above, and all three look-ups run at once.
 */
export async function accessSr(xapi: XenApiClient, pluginRoot: string, srRef: string): Promise<SrAccess> {
  const [sr, pbds] = await Promise.all([
    srFacts.get(`${xapi.url} ${srRef}`, async () => ZSrFacts.parse(await xapi.call(z.looseObject({}), "SR.get_record", srRef))),
    xapi.call(ZPbdRecords, "PBD.get_all_records"),
    pluginRegistry(pluginRoot).catch(() => undefined),
  ]);
  const uri = Object.values(pbds).find((pbd) => pbd.SR === srRef && pbd.currently_attached && pbd.other_config["hangar-sr-uri"])?.other_config["hangar-sr-uri"];
  if (uri === undefined) {
    // No attached PBD: an SR removed meanwhile says so (HANDLE_INVALID), not "detached" from the cached facts.
    await xapi.call(z.looseObject({}), "SR.get_record", srRef);
    throw new TRPCError({ code: "PRECONDITION_FAILED", message: `The SR "${sr.name_label}" is detached: attach it to see its volumes.` });
  }
  return { ref: srRef, uuid: sr.uuid, name: sr.name_label, type: sr.type, uri, plugin: await findPlugin(pluginRoot, sr.type, "volume") };
}
