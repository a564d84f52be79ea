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

const registries = new Map<string, { at: number; registry: Promise<PluginRegistry> }>();

/** The plugin root's registry, rescanned at most every REGISTRY_TTL_MS. */
export function pluginRegistry(root: string): Promise<PluginRegistry> {
  const cached = registries.get(root);
  if (cached !== undefined && Date.now() - cached.at < REGISTRY_TTL_MS) return cached.registry;
  const registry = scanPluginRoot(root);
  registries.set(root, { at: Date.now(), registry });
  registry.catch(() => registries.delete(root));
  return registry;
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

const ZSrRecord = z.looseObject({ uuid: z.string(), name_label: z.string(), type: z.string(), PBDs: z.array(z.string()) });
const ZPbdRecord = z.looseObject({ currently_attached: z.boolean(), other_config: z.record(z.string(), z.string()) });

export interface SrAccess {
  ref: string;
  uuid: string;
  name: string;
  type: string;
  /** The SR as its plugin names it (what SR.attach answered). */
  uri: string;
  plugin: RegisteredPlugin;
}

/** The volume plugin and SR URI of an attached SR; PRECONDITION_FAILED when the SR is detached. */
export async function accessSr(xapi: XenApiClient, pluginRoot: string, srRef: string): Promise<SrAccess> {
  const sr = await xapi.call(ZSrRecord, "SR.get_record", srRef);
  const pbds = await Promise.all(sr.PBDs.map((pbd) => xapi.call(ZPbdRecord, "PBD.get_record", pbd)));
  const uri = pbds.find((pbd) => pbd.currently_attached && pbd.other_config["hangar-sr-uri"])?.other_config["hangar-sr-uri"];
  if (uri === undefined) throw new TRPCError({ code: "PRECONDITION_FAILED", message: `The SR "${sr.name_label}" is detached: attach it to see its volumes.` });
  return { ref: srRef, uuid: sr.uuid, name: sr.name_label, type: sr.type, uri, plugin: await findPlugin(pluginRoot, sr.type, "volume") };
}
