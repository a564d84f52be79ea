// SR.*: storage repositories through their volume plugins. Records are the stored SR object with its live
// part laid over: space and health from SR.stat (srs.ts), VDIs from the VDI locators. Fields beyond
// XenAPI's: `health`, SR.stat's health variant as [tag, message], e.g. ["Healthy", ""]; a detached SR, or a
// plugin that fails or does not answer in time, shows ["Unreachable", why] with its last known space.
import { join } from "node:path";
import { z } from "zod";
import { StorageError } from "../../storage/errors.ts";
import type { ProbeResult } from "../../storage/types.ts";
import { computedGetters, mapFieldCalls, type RecordSource } from "../accessors.ts";
import { objectErrors } from "../object-errors.ts";
import type { StoredObject } from "../objects.ts";
import {
  attachedSr,
  DBG,
  forgetStat,
  hasFeature,
  liveSrFields,
  volumePluginOn,
  plugPbd,
  statSr,
  type StringMap,
} from "../srs.ts";
import type { Toolstack } from "../toolstack.ts";
import { forgetSrVdis, listSr, vdiRefsOfSr } from "../vdi-records.ts";
import { xenErrors } from "../../xenapi/errors.ts";
import { method } from "../methods.ts";
import { zBool, zInt, zRef, zString, zStringMap } from "../../xenapi/params.ts";
import { NULL_REF, type XenRecord } from "../../xenapi/values.ts";
import { createPbd } from "./pbd.ts";

/** SR operations and the plugin feature each needs (null: the toolstack's own). */
/** host other_config key of the local SR its first start made. */
const LOCAL_SR_KEY = "hangar-local-sr";

const SR_OPERATIONS: ReadonlyArray<readonly [string, string | null]> = [
  ["scan", "SR_SCAN"],
  ["destroy", "SR_DELETE"],
  ["forget", null],
  ["plug", null],
  ["unplug", null],
  ["update", null],
  ["pbd_create", null],
  ["pbd_destroy", null],
  ["vdi_create", "VDI_CREATE"],
  ["vdi_destroy", "VDI_DELETE"],
  ["vdi_resize", "VDI_RESIZE"],
  ["vdi_clone", "VDI_CLONE"],
  ["vdi_snapshot", "VDI_SNAPSHOT"],
  ["vdi_introduce", null],
  ["vdi_enable_cbt", "VDI_CONFIG_CBT"],
  ["vdi_disable_cbt", "VDI_CONFIG_CBT"],
  ["vdi_data_destroy", "VDI_CONFIG_CBT"],
  ["vdi_list_changed_blocks", "VDI_CONFIG_CBT"],
];

const SR_FIELDS = [
  "uuid",
  "name_label",
  "name_description",
  "allowed_operations",
  "current_operations",
  "VDIs",
  "PBDs",
  "virtual_allocation",
  "physical_utilisation",
  "physical_size",
  "type",
  "content_type",
  "shared",
  "other_config",
  "tags",
  "sm_config",
  "blobs",
  "local_cache_enabled",
  "introduced_by",
  "clustered",
  "is_tools_sr",
  "health",
];

function storedSrRecord(fields: { uuid: string; name_label: string; name_description: string; type: string; content_type: string; shared: boolean; sm_config: StringMap }): XenRecord {
  return {
    ...fields,
    allowed_operations: [],
    current_operations: {},
    VDIs: [],
    PBDs: [],
    virtual_allocation: 0,
    physical_utilisation: 0,
    physical_size: 0,
    other_config: {},
    tags: [],
    blobs: {},
    local_cache_enabled: false,
    introduced_by: NULL_REF,
    clustered: false,
    is_tools_sr: false,
  };
}

/** An SR's record as the API shows it. */
async function presentSr(ts: Toolstack, stored: StoredObject): Promise<XenRecord> {
  const [live, vdis, plugin] = await Promise.all([
    liveSrFields(ts, stored),
    vdiRefsOfSr(ts, stored.ref),
    attachedSr(ts, stored.ref).then(
      (sr) => sr.plugin,
      () => ts.storage.volumePlugin(String(stored.record.type)).catch(() => undefined),
    ),
  ]);
  const allowed = plugin === undefined ? ["forget"] : SR_OPERATIONS.filter(([, feature]) => feature === null || hasFeature(plugin, feature)).map(([op]) => op);
  return { ...stored.record, ...live, VDIs: vdis, allowed_operations: allowed };
}

const srSource: RecordSource = {
  async all(ts) {
    const stored = await ts.objects.all("SR");
    const records = await Promise.all(stored.map((sr) => presentSr(ts, sr)));
    return new Map(stored.map((sr, i) => [sr.ref, records[i]!]));
  },
  async get(ts, ref) {
    return presentSr(ts, await ts.objects.get("SR", ref));
  },
  async byUuid(ts, uuid) {
    return (await ts.objects.getByUuid("SR", uuid)).ref;
  },
};

/** SR.create: the plugin makes the SR and attaches it; the records follow. Also the default SR of a first start. */
export async function createSr(
  ts: Toolstack,
  fields: { host: string; device_config: StringMap; name_label: string; name_description: string; type: string; content_type: string; shared: boolean; sm_config: StringMap },
): Promise<string> {
  const plugin = await volumePluginOn(ts, fields.host, fields.type);
  const uuid = crypto.randomUUID();
  const configuration = await plugin.client.call("SR.create", {
    dbg: DBG,
    uuid,
    configuration: fields.device_config,
    name: fields.name_label,
    description: fields.name_description,
  });
  const { device_config: _given, host, ...srFields } = fields;
  const sr = await ts.objects.create("SR", storedSrRecord({ ...srFields, uuid, type: plugin.type }));
  const pbd = await createPbd(ts, { host, SR: sr.ref, device_config: configuration, other_config: {} });
  // As in xapi: an SR made but not attached keeps its records; PBD.plug attaches it later.
  await plugPbd(ts, pbd).catch((error: unknown) => console.error(`SR ${sr.ref} made but not attached: ${error instanceof Error ? error.message : String(error)}`));
  return sr.ref;
}

/** Removes an SR's records: its PBDs, VDI locators, and the pool's default_SR if it was this one. */
async function forgetSrRecords(ts: Toolstack, ref: string): Promise<void> {
  await forgetSrVdis(ts, ref);
  await ts.db.transaction(async (tx) => {
    for (const pbd of (await ts.objects.all("PBD", tx)).filter((p) => p.record.SR === ref)) {
      await ts.objects.destroy("PBD", pbd.ref, tx);
      const host = await ts.objects.find("host", String(pbd.record.host), tx);
      if (host !== undefined) await ts.objects.update("host", host.ref, (r) => ({ ...r, PBDs: (r.PBDs as string[]).filter((p) => p !== pbd.ref) }), tx);
    }
    await ts.objects.destroy("SR", ref, tx);
    const pool = await ts.objects.get("pool", ts.poolRef, tx);
    if (pool.record.default_SR === ref) await ts.objects.set("pool", ts.poolRef, { default_SR: NULL_REF }, tx);
  });
  forgetStat(ts, ref);
}

/** A plugin call that some plugins do not ship: missing is fine (the record changes alone). */
async function optionalCall(call: () => Promise<unknown>): Promise<void> {
  try {
    await call();
  } catch (error) {
    if (!(error instanceof StorageError && (error.code === "SCRIPT_MISSING" || error.errorConstructor === "Unimplemented"))) throw error;
  }
}

/** SR.probe's answer in xapi's SMAPIv1 form: an <SRlist> of the SRs found. */
function probeXml(results: ProbeResult[]): string {
  const text = (value: string | number) => String(value).replace(/[&<>]/g, (c) => (c === "&" ? "&amp;" : c === "<" ? "&lt;" : "&gt;"));
  const srs = results.flatMap(({ sr }) =>
    sr === undefined
      ? []
      : [
          `<SR><UUID>${text(sr.uuid ?? "")}</UUID><NameLabel>${text(sr.name)}</NameLabel><NameDescription>${text(sr.description)}</NameDescription>` +
            `<TotalSpace>${sr.total_space}</TotalSpace><FreeSpace>${sr.free_space}</FreeSpace></SR>`,
        ],
  );
  return `<?xml version="1.0" ?><SRlist>${srs.join("")}</SRlist>`;
}

/** SR.probe_ext's answer: xapi's probe_result records (`sr` present only when an SR was found). */
function probeRecords(results: ProbeResult[]): XenRecord[] {
  return results.map(({ configuration, complete, sr, extra_info }) => ({
    configuration,
    complete,
    extra_info,
    ...(sr === undefined
      ? {}
      : {
          sr: {
            uuid: sr.uuid ?? "",
            name_label: sr.name,
            name_description: sr.description,
            total_space: sr.total_space,
            free_space: sr.free_space,
            clustered: sr.clustered,
            health: sr.health[0],
          },
        }),
  }));
}

const probeParams = [["host", zRef], ["device_config", zStringMap], ["type", zString], ["sm_config", zStringMap]] as const;

async function probe(ts: Toolstack, host: string, deviceConfig: StringMap, type: string): Promise<ProbeResult[]> {
  await ts.objects.get("host", host);
  const plugin = await volumePluginOn(ts, host, type);
  if (!hasFeature(plugin, "SR_PROBE")) throw objectErrors.srOperationNotSupported(NULL_REF);
  return plugin.client.call("SR.probe", { dbg: DBG, configuration: deviceConfig });
}

export const srCalls = [
  ...computedGetters("SR", srSource, SR_FIELDS),
  method(
    "SR.create",
    [
      ["host", zRef],
      ["device_config", zStringMap],
      ["physical_size", zInt],
      ["name_label", zString],
      ["name_description", zString],
      ["type", zString],
      ["content_type", zString],
      ["shared", zBool],
      ["sm_config", zStringMap],
    ],
    async ({ ts }, host, device_config, _size, name_label, name_description, type, content_type, shared, sm_config) => {
      await ts.objects.get("host", host);
      return createSr(ts, { host, device_config, name_label, name_description, type, content_type, shared, sm_config });
    },
  ),
  method(
    "SR.introduce",
    [["uuid", zString], ["name_label", zString], ["name_description", zString], ["type", zString], ["content_type", zString], ["shared", zBool], ["sm_config", zStringMap]],
    async ({ ts }, uuid, name_label, name_description, type, content_type, shared, sm_config) => {
      const plugin = await ts.storage.volumePlugin(type);
      if (uuid !== "" && !z.uuid().safeParse(uuid).success) throw xenErrors.invalidValue("uuid", uuid);
      const record = storedSrRecord({ uuid: uuid || crypto.randomUUID(), name_label, name_description, type: plugin.type, content_type, shared, sm_config });
      return (await ts.objects.create("SR", record)).ref;
    },
  ),
  method("SR.forget", [["sr", zRef]], async ({ ts }, ref) => {
    await ts.objects.get("SR", ref);
    if ((await ts.objects.all("PBD")).some((pbd) => pbd.record.SR === ref && pbd.record.currently_attached === true)) throw objectErrors.srHasPbd(ref);
    await forgetSrRecords(ts, ref);
  }),
  method("SR.destroy", [["sr", zRef]], async ({ ts }, ref) => {
    const sr = await attachedSr(ts, ref);
    if (!hasFeature(sr.plugin, "SR_DELETE")) throw objectErrors.srOperationNotSupported(ref);
    const listing = await listSr(ts, sr);
    for (const [vdi, record] of listing.records) if ((record.VBDs as string[]).length > 0) throw xenErrors.vdiInUse(vdi, "destroy");
    await sr.plugin.client.call("SR.destroy", { dbg: DBG, sr: sr.uri });
    await forgetSrRecords(ts, ref);
  }),
  method("SR.scan", [["sr", zRef]], async ({ ts }, ref) => {
    const sr = await attachedSr(ts, ref);
    // Both run at once, but a failure is reported in a fixed order (SR.stat's first), not by which ended first.
    const [statOutcome, listOutcome] = await Promise.allSettled([statSr(ts, sr, { fresh: true }), listSr(ts, sr)]);
    if (statOutcome.status === "rejected") throw statOutcome.reason;
    if (listOutcome.status === "rejected") throw listOutcome.reason;
    const stat = statOutcome.value;
    await ts.objects.set("SR", ref, { physical_size: stat.total_space, physical_utilisation: stat.total_space - stat.free_space });
  }),
  method("SR.update", [["sr", zRef]], async ({ ts }, ref) => {
    const stat = await statSr(ts, await attachedSr(ts, ref), { fresh: true });
    await ts.objects.set("SR", ref, { physical_size: stat.total_space, physical_utilisation: stat.total_space - stat.free_space });
  }),
  method("SR.probe", probeParams, async ({ ts }, host, deviceConfig, type) => probeXml(await probe(ts, host, deviceConfig, type))),
  method("SR.probe_ext", probeParams, async ({ ts }, host, deviceConfig, type) => probeRecords(await probe(ts, host, deviceConfig, type))),
  method("SR.get_supported_types", [], async ({ ts }) => (await ts.storage.registry()).plugins.filter((p) => p.kind === "volume").map((p) => p.type), { async: false }),
  method("SR.set_name_label", [["sr", zRef], ["value", zString]], async ({ ts }, ref, value) => {
    await ts.objects.get("SR", ref);
    const sr = await attachedSr(ts, ref).catch(() => undefined);
    if (sr !== undefined) {
      await optionalCall(() => sr.plugin.client.call("SR.set_name", { dbg: DBG, sr: sr.uri, new_name: value }));
    }
    await ts.objects.set("SR", ref, { name_label: value });
  }),
  method("SR.set_name_description", [["sr", zRef], ["value", zString]], async ({ ts }, ref, value) => {
    await ts.objects.get("SR", ref);
    const sr = await attachedSr(ts, ref).catch(() => undefined);
    if (sr !== undefined) {
      await optionalCall(() => sr.plugin.client.call("SR.set_description", { dbg: DBG, sr: sr.uri, new_description: value }));
    }
    await ts.objects.set("SR", ref, { name_description: value });
  }),
  ...mapFieldCalls("SR", "other_config"),
];

/** Lists SR records for event.from. */
export const listSrRecords = async (ts: Toolstack) => [...(await srSource.all(ts))].map(([ref, record]) => ({ ref, record }));
/** One SR's record as listSrRecords gives it; undefined for no such SR. */
export async function findSrRecord(ts: Toolstack, ref: string): Promise<XenRecord | undefined> {
  const stored = await ts.objects.find("SR", ref);
  return stored === undefined ? undefined : presentSr(ts, stored);
}

/**
 * Start-up: SRs attached before are attached again (after a reboot the plugins may need it; SR.attach is
 * idempotent); the first start makes the default `file` SR under the data dir and makes it the pool's.
 */
export async function startSrs(ts: Toolstack): Promise<void> {
  const pbds = (await ts.objects.all("PBD")).filter((pbd) => pbd.record.host === ts.host.ref && pbd.record.currently_attached === true);
  await Promise.all(
    pbds.map((pbd) =>
      plugPbd(ts, pbd.ref).catch(async (error: unknown) => {
        console.error(`SR ${String(pbd.record.SR)} could not be attached again: ${error instanceof Error ? error.message : String(error)}`);
        await ts.objects.set("PBD", pbd.ref, { currently_attached: false });
      }),
    ),
  );
  // Each host's first start makes its own local SR (recorded on the host, so it is made once).
  const host = await ts.objects.get("host", ts.host.ref);
  const hostConfig = host.record.other_config as StringMap;
  if (hostConfig[LOCAL_SR_KEY] !== undefined || (host.record.PBDs as string[]).length > 0) return;
  try {
    const ref = await createSr(ts, {
      host: ts.host.ref,
      device_config: { path: join(ts.dataDir, "srs", "default") },
      name_label: "Local storage",
      name_description: `Hangar's default SR in ${ts.dataDir} on ${ts.host.address}`,
      type: "file",
      content_type: "user",
      shared: false,
      sm_config: {},
    });
    await ts.db.transaction(async (tx) => {
      await ts.objects.update("host", ts.host.ref, (r) => ({ ...r, other_config: { ...(r.other_config as StringMap), [LOCAL_SR_KEY]: ref } }), tx);
      // The pool's first SR is its default (the master's, or the first host's to start).
      const pool = await ts.objects.get("pool", ts.poolRef, tx);
      if (pool.record.default_SR === NULL_REF) await ts.objects.set("pool", ts.poolRef, { default_SR: ref }, tx);
    });
  } catch (error) {
    console.error(`the default SR could not be made: ${error instanceof Error ? error.message : String(error)}`);
  }
}
