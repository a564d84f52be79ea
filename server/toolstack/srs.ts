// The SRs of this host as the toolstack reaches them. An SR is two stored objects, as in XenAPI: the SR
// record, and this host's PBD holding the plugin configuration (device_config), whether the SR is attached,
// and the `sr` URI SR.attach answered (other_config[SR_URI_KEY]). Space and health come from SR.stat, cached
// briefly so a listing of many SRs is one parallel round of calls, never a stored copy.
import { fetchPoolRegistry } from "../storage/pool-registry.ts";
import { featureName, type PluginRegistry, type RegisteredPlugin, volumePluginOfType } from "../storage/registry.ts";
import type { SrStat } from "../storage/types.ts";
import { hostErrors } from "./hosts.ts";
import type { StoredObject } from "./objects.ts";
import { poolEndpoint } from "./plugin-service.ts";
import type { Toolstack } from "./toolstack.ts";
import { XenApiError, xenErrors } from "../xenapi/errors.ts";
import type { XenRecord } from "../xenapi/values.ts";

/** The `dbg` of every plugin call the toolstack makes. */
export const DBG = "hangar toolstack";
/** PBD other_config key of the attached SR's URI (what SR.attach answered). */
const SR_URI_KEY = "hangar-sr-uri";
const STAT_CACHE_MS = 2000;
/** How long a record waits for SR.stat before showing the last known values: a hung plugin must not hold listings. */
const STAT_WAIT_MS = 5000;
/** Another host's plugin registry is listed again after this long (as the console's own is rescanned). */
const POOL_REGISTRY_TTL_MS = 10_000;

export interface AttachedSr {
  ref: string;
  uuid: string;
  type: string;
  /** The SR as its plugin names it (SR.attach's answer). */
  uri: string;
  /** The host whose PBD attaches it: its plugin runs there. */
  host: string;
  /** Whether that host is this one (datapaths, which plug volumes here, need it to be). */
  local: boolean;
  plugin: RegisteredPlugin;
}

export type StringMap = Record<string, string>;

export function hasFeature(plugin: RegisteredPlugin, feature: string): boolean {
  return plugin.features.some((f) => featureName(f) === feature);
}

const poolRegistries = new WeakMap<Toolstack, Map<string, { at: number; registry: Promise<PluginRegistry> }>>();

/** Another host's plugin registry, reached through its toolstack; HOST_OFFLINE when it is dead. */
async function poolRegistry(ts: Toolstack, hostRef: string): Promise<PluginRegistry> {
  const host = await ts.objects.get("host", hostRef);
  if (!(await ts.pool.isLive(hostRef))) throw hostErrors.hostOffline(host);
  let cache = poolRegistries.get(ts);
  if (cache === undefined) poolRegistries.set(ts, (cache = new Map()));
  const hit = cache.get(hostRef);
  if (hit !== undefined && Date.now() - hit.at < POOL_REGISTRY_TTL_MS) return hit.registry;
  const registry = poolEndpoint(ts, host).then(fetchPoolRegistry);
  cache.set(hostRef, { at: Date.now(), registry });
  registry.catch(() => cache.delete(hostRef));
  return registry;
}

/** The volume plugin for SRs of `type` on a host of the pool: this host's own, or another's through its toolstack. */
export async function volumePluginOn(ts: Toolstack, hostRef: string, type: string): Promise<RegisteredPlugin> {
  if (hostRef === ts.host.ref) return ts.storage.volumePlugin(type);
  const plugin = volumePluginOfType(await poolRegistry(ts, hostRef), type);
  if (plugin === undefined) throw xenErrors.srUnknownDriver(type);
  return plugin;
}

/**
 * The SR where it is attached (this host preferred): HANDLE_INVALID for no such SR, SR_NOT_ATTACHED (without
 * asking a plugin) when no host attaches it, HOST_OFFLINE when the host that does is dead.
 */
export async function attachedSr(ts: Toolstack, srRef: string): Promise<AttachedSr> {
  const sr = await ts.objects.get("SR", srRef);
  const uriOf = (pbd: StoredObject) => (pbd.record.currently_attached === true ? (pbd.record.other_config as StringMap | undefined)?.[SR_URI_KEY] : undefined);
  const pbds = (await ts.objects.all("PBD")).filter((pbd) => pbd.record.SR === srRef && uriOf(pbd) !== undefined);
  const pbd = pbds.find((p) => p.record.host === ts.host.ref) ?? pbds[0];
  if (pbd === undefined) throw xenErrors.srNotAttached(srRef);
  const type = String(sr.record.type);
  const host = String(pbd.record.host);
  return { ref: srRef, uuid: String(sr.record.uuid), type, uri: uriOf(pbd)!, host, local: host === ts.host.ref, plugin: await volumePluginOn(ts, host, type) };
}

/**
 * The SR, which must be attached on this host: datapaths plug its volumes here, as NBD exports on this host.
 * Another host's SR is OPERATION_NOT_ALLOWED naming the host to send the call to.
 */
export async function requireLocal(ts: Toolstack, sr: AttachedSr): Promise<AttachedSr> {
  if (sr.local) return sr;
  const host = await ts.objects.get("host", sr.host);
  throw xenErrors.operationNotAllowed(
    `the SR ${sr.uuid} is attached on the host ${String(host.record.name_label)} (${String(host.record.address)}): its disks are reached there only, so send this call to that host`,
  );
}

/** Every SR attached on a host of the pool (those of dead hosts left out). */
export async function attachedSrs(ts: Toolstack): Promise<AttachedSr[]> {
  const srs = new Set((await ts.objects.all("PBD")).filter((pbd) => pbd.record.currently_attached === true).map((pbd) => String(pbd.record.SR)));
  const attached = await Promise.all([...srs].map((sr) => attachedSr(ts, sr).catch(() => undefined)));
  return attached.filter((sr): sr is AttachedSr => sr !== undefined);
}

/** PBD.plug: SR.attach with the PBD's device_config (idempotent in the plugins); the answer is kept on the PBD. */
export async function plugPbd(ts: Toolstack, pbdRef: string): Promise<void> {
  const pbd = await ts.objects.get("PBD", pbdRef);
  const sr = await ts.objects.get("SR", String(pbd.record.SR));
  const plugin = await volumePluginOn(ts, String(pbd.record.host), String(sr.record.type));
  const uri = await plugin.client.call("SR.attach", { dbg: DBG, configuration: pbd.record.device_config as StringMap });
  await ts.objects.update("PBD", pbdRef, (record) => ({
    ...record,
    currently_attached: true,
    other_config: { ...(record.other_config as StringMap), [SR_URI_KEY]: uri },
  }));
  forgetStat(ts, String(pbd.record.SR));
}

/** PBD.unplug: SR.detach of an attached SR; the PBD is marked detached whatever the plugin says after that. */
export async function unplugPbd(ts: Toolstack, pbdRef: string): Promise<void> {
  const pbd = await ts.objects.get("PBD", pbdRef);
  const srRef = String(pbd.record.SR);
  const uri = (pbd.record.other_config as StringMap)[SR_URI_KEY];
  if (pbd.record.currently_attached === true && uri !== undefined) {
    const sr = await ts.objects.get("SR", srRef);
    const plugin = await volumePluginOn(ts, String(pbd.record.host), String(sr.record.type));
    await plugin.client.call("SR.detach", { dbg: DBG, sr: uri });
  }
  await ts.objects.update("PBD", pbdRef, (record) => {
    const { [SR_URI_KEY]: _uri, ...other_config } = record.other_config as StringMap;
    return { ...record, currently_attached: false, other_config };
  });
  forgetStat(ts, srRef);
}

interface StatEntry {
  promise: Promise<SrStat>;
  startedAt: number;
  settledAt?: number;
}

const statCaches = new WeakMap<Toolstack, Map<string, StatEntry>>();
/** Each SR's last stat, or why the last asking failed when it did. */
const lastStats = new WeakMap<Toolstack, Map<string, SrStat>>();
const lastFailures = new WeakMap<Toolstack, Map<string, string>>();

function statCache(ts: Toolstack): Map<string, StatEntry> {
  let cache = statCaches.get(ts);
  if (cache === undefined) statCaches.set(ts, (cache = new Map()));
  return cache;
}

/** SR.stat, shared by concurrent callers and reused for STAT_CACHE_MS; `fresh` asks the plugin again. */
export function statSr(ts: Toolstack, sr: AttachedSr, options: { fresh?: boolean } = {}): Promise<SrStat> {
  const cache = statCache(ts);
  const hit = cache.get(sr.ref);
  if (!options.fresh && hit !== undefined && (hit.settledAt === undefined || Date.now() - hit.settledAt < STAT_CACHE_MS)) return hit.promise;
  const entry: StatEntry = { promise: sr.plugin.client.call("SR.stat", { dbg: DBG, sr: sr.uri }), startedAt: Date.now() };
  cache.set(sr.ref, entry);
  entry.promise.then(
    (stat) => {
      entry.settledAt = Date.now();
      let last = lastStats.get(ts);
      if (last === undefined) lastStats.set(ts, (last = new Map()));
      last.set(sr.ref, stat);
      lastFailures.get(ts)?.delete(sr.ref);
    },
    (error: unknown) => {
      entry.settledAt = Date.now();
      let failures = lastFailures.get(ts);
      if (failures === undefined) lastFailures.set(ts, (failures = new Map()));
      failures.set(sr.ref, error instanceof Error ? error.message : String(error));
    },
  );
  return entry.promise;
}

/** Drops a cached stat after a change of the SR's space or name: the next read waits for a new one. */
export function forgetStat(ts: Toolstack, srRef: string): void {
  statCache(ts).delete(srRef);
  lastStats.get(ts)?.delete(srRef);
  lastFailures.get(ts)?.delete(srRef);
}

/** The fields of an SR record that come from SR.stat; the health of a failing or slow plugin tells why. */
export async function liveSrFields(ts: Toolstack, stored: StoredObject): Promise<XenRecord> {
  let sr: AttachedSr;
  try {
    sr = await attachedSr(ts, stored.ref);
  } catch (error) {
    const detached = error instanceof XenApiError && error.code === "SR_NOT_ATTACHED";
    return { health: ["Unreachable", detached ? "not attached on any host (PBD.plug attaches it)" : (error as Error).message] };
  }
  const refresh = statSr(ts, sr);
  // A stat already known answers at once while a newer one is asked for: a read never waits on the plugin (a
  // busy host's SR.stat takes seconds), as xapi's reads never wait on SR.update. Only a refresh that has gone
  // unanswered for STAT_WAIT_MS marks the SR Unreachable.
  const last = lastStats.get(ts)?.get(stored.ref);
  const pending = statCache(ts).get(stored.ref);
  if (last !== undefined && pending !== undefined && pending.settledAt === undefined) {
    refresh.catch(() => undefined);
    const failure = Date.now() - pending.startedAt >= STAT_WAIT_MS ? `SR.stat did not answer within ${STAT_WAIT_MS / 1000} s` : lastFailures.get(ts)?.get(stored.ref);
    return { ...spaceFields(last), health: failure === undefined ? [last.health[0], last.health[1]] : ["Unreachable", failure] };
  }
  let timer: NodeJS.Timeout | undefined;
  const waited = await Promise.race([
    refresh.then(
      (stat) => ({ stat }),
      (error: unknown) => ({ error: error instanceof Error ? error.message : String(error) }),
    ),
    new Promise<{ error: string }>((resolve) => {
      timer = setTimeout(() => resolve({ error: `SR.stat did not answer within ${STAT_WAIT_MS / 1000} s` }), STAT_WAIT_MS);
    }),
  ]);
  clearTimeout(timer);
  if ("error" in waited) {
    const last = lastStats.get(ts)?.get(stored.ref);
    return { ...(last === undefined ? {} : spaceFields(last)), health: ["Unreachable", waited.error] };
  }
  return { ...spaceFields(waited.stat), health: [waited.stat.health[0], waited.stat.health[1]] };
}

function spaceFields(stat: SrStat): XenRecord {
  return { physical_size: stat.total_space, physical_utilisation: stat.total_space - stat.free_space, clustered: stat.clustered };
}
