// VDI.*: volumes of attached SRs, every call through the SR's plugin, every record built from SR.ls
// (vdi-records.ts). Changes made here are announced as VDI events. Hangar's own calls:
// VDI.hangar_data_copy / VDI.hangar_data_mirror (vdi, remote NBD URI), tasks following Data.copy / Data.mirror;
// VDI.hangar_data_mirror_to_vdi (vdi, dest VDI), Data.mirror into an existing volume plugged as an NBD export;
// VDI.hangar_revert (snapshot), Volume.revert of the snapshot's original; VDI.hangar_get_records (refs), the
// records of those VDIs with one SR.ls per SR they live on.
import { z } from "zod";
import { parseNbdUri } from "../../nbd/uri.ts";
import { computedGetters, parseCreateRecord, type FieldSpec, type RecordSource, zRecordArg } from "../accessors.ts";
import { copyVdi, dataToRemote, inTask, mirrorToVdi } from "../data-tasks.ts";
import { objectErrors } from "../object-errors.ts";
import { type AttachedSr, attachedSr, DBG, hasFeature, type StringMap } from "../srs.ts";
import type { Toolstack } from "../toolstack.ts";
import {
  announceChanges,
  announceNewVolume,
  announceRemovedVolume,
  currentOperations,
  fieldKeys,
  listAllVdis,
  listSr,
  type LocatedVdi,
  locateVdi,
  rememberVdi,
  setVolumeKeys,
  VDI_TYPES,
  vdiRecord,
  vdiRecords,
} from "../vdi-records.ts";
import { XenApiError, xenErrors } from "../../xenapi/errors.ts";
import { KEYS, OTHER_CONFIG_PREFIX } from "../../xenapi/vdi-identity.ts";
import { method, type MethodOptions } from "../methods.ts";
import { zBool, zInt, zRef, zString, zStringMap } from "../../xenapi/params.ts";
import { NULL_REF, xenDate, type XenRecord } from "../../xenapi/values.ts";
import { defaultSr } from "./pool.ts";
import { handOverVolume, makeVolume } from "../volume-intents.ts";
import type { Queryable } from "../db/database.ts";
import type { Volume } from "../../storage/types.ts";

const VDI_FIELDS = [
  "uuid",
  "name_label",
  "name_description",
  "allowed_operations",
  "current_operations",
  "SR",
  "VBDs",
  "crash_dumps",
  "virtual_size",
  "physical_utilisation",
  "type",
  "sharable",
  "read_only",
  "other_config",
  "storage_lock",
  "location",
  "managed",
  "missing",
  "parent",
  "xenstore_data",
  "sm_config",
  "is_a_snapshot",
  "snapshot_of",
  "snapshots",
  "snapshot_time",
  "tags",
  "allow_caching",
  "on_boot",
  "metadata_of_pool",
  "metadata_latest",
  "is_tools_iso",
  "cbt_enabled",
];

const vdiSource: RecordSource = {
  async all(ts) {
    const records = new Map<string, XenRecord>();
    for (const listing of await listAllVdis(ts)) for (const [ref, record] of listing.records) records.set(ref, record);
    return records;
  },
  async get(ts, ref) {
    return vdiRecord(ts, await locateVdi(ts, ref));
  },
  async byUuid(ts, uuid) {
    const find = () => ts.db.get<{ ref: string }>("SELECT ref FROM vdi_locations WHERE uuid = ?", [uuid]);
    let row = await find();
    if (row === undefined) {
      // A volume made outside the API has no locator until a listing finds it.
      await listAllVdis(ts);
      row = await find();
    }
    if (row === undefined) throw xenErrors.uuidInvalid("VDI", uuid);
    return row.ref;
  },
};

/** Lists VDI records for event.from. */
export const listVdiRecords = async (ts: Toolstack) => [...(await vdiSource.all(ts))].map(([ref, record]) => ({ ref, record }));
/**
 * One VDI's record as listVdiRecords gives it (one SR listed, not all); undefined where the listing would not
 * have it: no such VDI, its SR detached, or (logged, as there) its SR failing to answer.
 */
export async function findVdiRecord(ts: Toolstack, ref: string): Promise<XenRecord | undefined> {
  try {
    return await vdiSource.get(ts, ref);
  } catch (error) {
    if (!(error instanceof XenApiError && ["HANDLE_INVALID", "SR_NOT_ATTACHED"].includes(error.code))) {
      console.error(`VDI ${ref}: ${error instanceof Error ? error.message : String(error)}`);
    }
    return undefined;
  }
}

function requireFeature(sr: AttachedSr, feature: string): void {
  if (!hasFeature(sr.plugin, feature)) throw objectErrors.srOperationNotSupported(sr.ref);
}

/** A VDI that no other task is working on. */
export function requireIdle(ts: Toolstack, vdi: LocatedVdi): void {
  const [operation] = Object.values(currentOperations(ts, vdi.ref));
  if (operation !== undefined) throw objectErrors.otherOperationInProgress("VDI", vdi.ref, operation);
}

/** Runs a volume call on a located VDI, then announces the VDI changed. */
async function changeVolume(ts: Toolstack, ref: string, change: (vdi: LocatedVdi) => Promise<unknown>): Promise<void> {
  const vdi = await locateVdi(ts, ref);
  await change(vdi);
  await announceChanges(ts, vdi.sr.ref, { modified: [ref] });
}

/** Sets and unsets volume keys so that the prefixed ones are exactly `wanted`. */
async function setPrefixedKeys(vdi: LocatedVdi, prefix: string, current: StringMap, wanted: StringMap): Promise<void> {
  const { sr, key } = vdi;
  for (const k of Object.keys(current)) {
    if (!Object.hasOwn(wanted, k)) await sr.plugin.client.call("Volume.unset", { dbg: DBG, sr: sr.uri, key, k: `${prefix}${k}` });
  }
  for (const [k, v] of Object.entries(wanted)) {
    if (current[k] !== v) await sr.plugin.client.call("Volume.set", { dbg: DBG, sr: sr.uri, key, k: `${prefix}${k}`, v });
  }
}

/** VDI.destroy: VDI_IN_USE while a VBD links it or a task works on it. */
export async function destroyVdi(ts: Toolstack, ref: string): Promise<void> {
  const vdi = await locateVdi(ts, ref);
  requireFeature(vdi.sr, "VDI_DELETE");
  const record = await vdiRecord(ts, vdi);
  if ((record.VBDs as string[]).length > 0 || Object.keys(record.current_operations as StringMap).length > 0) throw xenErrors.vdiInUse(ref, "destroy");
  await vdi.sr.plugin.client.call("Volume.destroy", { dbg: DBG, sr: vdi.sr.uri, key: vdi.key });
  await announceRemovedVolume(ts, vdi.sr, ref, record);
}

const VDI_CREATE: FieldSpec = {
  SR: [zRef],
  virtual_size: [zInt],
  name_label: [zString, ""],
  name_description: [zString, ""],
  type: [zString, "user"],
  sharable: [zBool, false],
  read_only: [zBool, false],
  other_config: [zStringMap, {}],
  sm_config: [zStringMap, {}],
};

/**
 * VDI.create: a new volume with the record's fields kept on it; answers the VDI's ref, where it lives and the
 * volume's URIs (for its datapath). `own`
 * hands the new key to a caller that undoes it itself (an import's state), in the plugin's answer's transaction.
 */
export async function createVdi(
  ts: Toolstack,
  args: Record<string, unknown>,
  options: { own?: (key: string, tx: Queryable) => Promise<void> } = {},
): Promise<{ ref: string; sr: AttachedSr; key: string; uris: string[] }> {
  const fields = parseCreateRecord(VDI_CREATE, args);
  const type = String(fields.type);
  if (!(VDI_TYPES as readonly string[]).includes(type)) throw objectErrors.valueNotSupported("type", type, `one of ${VDI_TYPES.join(", ")}`);
  if (Number(fields.virtual_size) < 0) throw xenErrors.invalidValue("virtual_size", String(fields.virtual_size));
  const sr = await attachedSr(ts, fields.SR === NULL_REF ? await defaultSr(ts) : String(fields.SR));
  requireFeature(sr, "VDI_CREATE");
  const create = () =>
    sr.plugin.client.call("Volume.create", {
      dbg: DBG,
      sr: sr.uri,
      name: String(fields.name_label),
      description: String(fields.name_description),
      size: Number(fields.virtual_size),
      sharable: fields.sharable === true,
    });
  const finish = async (volume: Volume) => {
    const keys = fieldKeys(fields);
    await setVolumeKeys(sr, volume.key, keys, { undo: true });
    return { ref: await announceNewVolume(ts, sr, { ...volume, keys: { ...volume.keys, ...Object.fromEntries(keys) } }), sr, key: volume.key, uris: volume.uri };
  };
  const { own } = options;
  if (own === undefined) return makeVolume(ts, sr, create, finish);
  return finish(await handOverVolume(ts, sr, create, (volume, tx) => own(volume.key, tx)));
}

/** A snapshot or clone: the new volume with the original's type and maps (and a snapshot's own keys). */
async function derive(ts: Toolstack, ref: string, how: "snapshot" | "clone"): Promise<string> {
  const vdi = await locateVdi(ts, ref);
  requireFeature(vdi.sr, how === "snapshot" ? "VDI_SNAPSHOT" : "VDI_CLONE");
  const record = await vdiRecord(ts, vdi);
  const make = () => vdi.sr.plugin.client.call(how === "snapshot" ? "Volume.snapshot" : "Volume.clone", { dbg: DBG, sr: vdi.sr.uri, key: vdi.key });
  return makeVolume(ts, vdi.sr, make, async (made) => {
    const keys = fieldKeys(record);
    if (how === "snapshot") keys.push([KEYS.isASnapshot, "true"], [KEYS.snapshotOf, vdi.key], [KEYS.snapshotTime, xenDate()]);
    await setVolumeKeys(vdi.sr, made.key, keys, { undo: true });
    await announceChanges(ts, vdi.sr.ref, { modified: [ref] });
    return rememberVdi(ts, vdi.sr, made);
  });
}

/**
 * VDI.hangar_revert: the original of `snapshot` (its snapshot_of) gets the snapshot's contents and size
 * through Volume.revert, keeping its ref, uuid, name and maps. Refused when `snapshot` is no snapshot, its
 * original is gone, or a task works on either.
 */
export async function revertToSnapshot(ts: Toolstack, snapshotRef: string): Promise<void> {
  const snapshot = await locateVdi(ts, snapshotRef);
  requireFeature(snapshot.sr, "VDI_REVERT");
  const record = await vdiRecord(ts, snapshot);
  if (record.is_a_snapshot !== true) throw xenErrors.operationNotAllowed(`VDI ${snapshotRef} is not a snapshot: only a snapshot can be reverted to`);
  const originalRef = String(record.snapshot_of);
  if (originalRef === NULL_REF) throw xenErrors.operationNotAllowed(`the volume snapshot ${snapshotRef} was taken of no longer exists`);
  const original = await locateVdi(ts, originalRef);
  requireIdle(ts, snapshot);
  requireIdle(ts, original);
  await snapshot.sr.plugin.client.call("Volume.revert", { dbg: DBG, sr: snapshot.sr.uri, snapshot: snapshot.key, key: original.key });
  await announceChanges(ts, snapshot.sr.ref, { modified: [originalRef] });
}

function checkRemote(remote: string): void {
  try {
    parseNbdUri(remote);
  } catch (error) {
    throw xenErrors.invalidValue("remote", `${remote}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/**
 * Calls that plug the VDI into the toolstack, or must see whether a task works on it (known to the host that
 * runs the task), run on the host whose SR holds it: forwarded there from any other.
 */
const ON_VDI_HOST: MethodOptions = { runsOn: async (ts, [vdi]) => (await locateVdi(ts, String(vdi))).sr.host };

export const vdiCalls = [
  ...computedGetters("VDI", vdiSource, VDI_FIELDS),
  method("VDI.create", [["args", zRecordArg]], async ({ ts }, args) => (await createVdi(ts, args)).ref),
  method("VDI.destroy", [["self", zRef]], async ({ ts }, ref) => destroyVdi(ts, ref), ON_VDI_HOST),
  method("VDI.snapshot", [["vdi", zRef], ["driver_params", zStringMap]], ({ ts }, ref) => derive(ts, ref, "snapshot"), { optional: 1 }),
  method("VDI.clone", [["vdi", zRef], ["driver_params", zStringMap]], ({ ts }, ref) => derive(ts, ref, "clone"), { optional: 1 }),
  ...["VDI.resize", "VDI.resize_online"].map((name) =>
    method(name, [["vdi", zRef], ["size", zInt]], async ({ ts }, ref, size) => {
      await changeVolume(ts, ref, async (vdi) => {
        requireFeature(vdi.sr, "VDI_RESIZE");
        requireIdle(ts, vdi);
        await vdi.sr.plugin.client.call("Volume.resize", { dbg: DBG, sr: vdi.sr.uri, key: vdi.key, new_size: size });
      });
    }, ON_VDI_HOST),
  ),
  method("VDI.copy", [["vdi", zRef], ["sr", zRef]], async ({ ts, task }, ref, srRef) => {
    const [vdi, dest] = await Promise.all([locateVdi(ts, ref), attachedSr(ts, srRef)]);
    requireFeature(dest, "VDI_CREATE");
    return inTask(ts, task, "VDI.copy", (control) => copyVdi(ts, control, vdi, dest));
  }, ON_VDI_HOST),
  method("VDI.set_name_label", [["self", zRef], ["value", zString]], async ({ ts }, ref, value) => {
    await changeVolume(ts, ref, (vdi) => vdi.sr.plugin.client.call("Volume.set_name", { dbg: DBG, sr: vdi.sr.uri, key: vdi.key, new_name: value }));
  }),
  method("VDI.set_name_description", [["self", zRef], ["value", zString]], async ({ ts }, ref, value) => {
    await changeVolume(ts, ref, (vdi) =>
      vdi.sr.plugin.client.call("Volume.set_description", { dbg: DBG, sr: vdi.sr.uri, key: vdi.key, new_description: value }),
    );
  }),
  method("VDI.set_other_config", [["self", zRef], ["value", zStringMap]], async ({ ts }, ref, value) => {
    await changeVolume(ts, ref, async (vdi) => setPrefixedKeys(vdi, OTHER_CONFIG_PREFIX, (await vdiRecord(ts, vdi)).other_config as StringMap, value));
  }),
  method("VDI.add_to_other_config", [["self", zRef], ["key", zString], ["value", zString]], async ({ ts }, ref, key, value) => {
    await changeVolume(ts, ref, async (vdi) => {
      if (Object.hasOwn((await vdiRecord(ts, vdi)).other_config as StringMap, key)) throw objectErrors.mapDuplicateKey("VDI", "other_config", ref, key);
      await vdi.sr.plugin.client.call("Volume.set", { dbg: DBG, sr: vdi.sr.uri, key: vdi.key, k: `${OTHER_CONFIG_PREFIX}${key}`, v: value });
    });
  }),
  method("VDI.remove_from_other_config", [["self", zRef], ["key", zString]], async ({ ts }, ref, key) => {
    await changeVolume(ts, ref, (vdi) => vdi.sr.plugin.client.call("Volume.unset", { dbg: DBG, sr: vdi.sr.uri, key: vdi.key, k: `${OTHER_CONFIG_PREFIX}${key}` }));
  }),
  ...(["enable_cbt", "disable_cbt", "data_destroy"] as const).map((call) =>
    method(`VDI.${call}`, [["self", zRef]], async ({ ts }, ref) => {
      await changeVolume(ts, ref, async (vdi) => {
        requireFeature(vdi.sr, "VDI_CONFIG_CBT");
        requireIdle(ts, vdi);
        await vdi.sr.plugin.client.call(`Volume.${call}`, { dbg: DBG, sr: vdi.sr.uri, key: vdi.key });
      });
    }, ON_VDI_HOST),
  ),
  method("VDI.list_changed_blocks", [["vdi_from", zRef], ["vdi_to", zRef]], async ({ ts }, from, to) => {
    const [a, b] = await Promise.all([locateVdi(ts, from), locateVdi(ts, to)]);
    if (a.sr.ref !== b.sr.ref) throw xenErrors.invalidValue("vdi_to", `${to} is not in the SR of ${from}`);
    requireFeature(a.sr, "VDI_CONFIG_CBT");
    const changed = await a.sr.plugin.client.call("Volume.list_changed_blocks", { dbg: DBG, sr: a.sr.uri, key: a.key, key2: b.key, offset: 0, length: -1 });
    return changed.bitmap;
  }),
  // As xapi-storage-script does: the record is the volume's; the fields given are checked, not applied.
  method(
    "VDI.introduce",
    [
      ["uuid", zString],
      ["name_label", zString],
      ["name_description", zString],
      ["SR", zRef],
      ["type", zString],
      ["sharable", zBool],
      ["read_only", zBool],
      ["other_config", zStringMap],
      ["location", zString],
      ["xenstore_data", zStringMap],
      ["sm_config", zStringMap],
      ["managed", zBool],
      ["virtual_size", zInt],
      ["physical_utilisation", zInt],
      ["metadata_of_pool", zRef],
      ["is_a_snapshot", zBool],
      ["snapshot_time", zString],
      ["snapshot_of", zRef],
    ],
    async ({ ts }, _uuid, _name, _description, srRef, _type, _sharable, _readOnly, _otherConfig, location) => {
      const sr = await attachedSr(ts, srRef);
      // Only a key the plugin lists is a VDI: nothing a client gives reaches outside its SR.
      const listing = await listSr(ts, sr);
      const ref = [...listing.keys].find(([, key]) => key === location)?.[0];
      if (ref === undefined) throw objectErrors.vdiLocationMissing(srRef, location);
      return ref;
    },
    { optional: 7 },
  ),
  // A read, as VDI.get_record: the VMs page's disks without listing every SR (VDI.get_all_records).
  method("VDI.hangar_get_records", [["refs", z.array(zRef)]], async ({ ts }, refs) => Object.fromEntries(await vdiRecords(ts, refs)), { role: "read-only", async: false }),
  // Roles by analogy (docs/research/rbac-audit.md §2.2): a revert as VM.revert, a full copy out as VDI.copy, a
  // mirror as storage motion (VDI.pool_migrate).
  method("VDI.hangar_revert", [["snapshot", zRef]], async ({ ts }, ref) => revertToSnapshot(ts, ref), { ...ON_VDI_HOST, role: "vm-power-admin" }),
  method("VDI.hangar_data_copy", [["vdi", zRef], ["remote", zString]], async ({ ts, task }, ref, remote) => {
    checkRemote(remote);
    const vdi = await locateVdi(ts, ref);
    await inTask(ts, task, "VDI.hangar_data_copy", (control) => dataToRemote(ts, control, vdi, remote, "data-copy").then(() => ""));
  }, { ...ON_VDI_HOST, role: "vm-admin" }),
  method("VDI.hangar_data_mirror", [["vdi", zRef], ["remote", zString]], async ({ ts, task }, ref, remote) => {
    checkRemote(remote);
    const vdi = await locateVdi(ts, ref);
    await inTask(ts, task, "VDI.hangar_data_mirror", (control) => dataToRemote(ts, control, vdi, remote, "data-mirror").then(() => ""));
  }, { ...ON_VDI_HOST, role: "vm-power-admin" }),
  method("VDI.hangar_data_mirror_to_vdi", [["vdi", zRef], ["dest", zRef]], async ({ ts, task }, ref, destRef) => {
    if (destRef === ref) throw xenErrors.invalidValue("dest", `${destRef} (a volume cannot mirror into itself)`);
    const [vdi, dest] = await Promise.all([locateVdi(ts, ref), locateVdi(ts, destRef)]);
    // Written over by the mirror: nobody else may use it meanwhile.
    const record = await vdiRecord(ts, dest);
    if ((record.VBDs as string[]).length > 0 || Object.keys(record.current_operations as StringMap).length > 0) throw xenErrors.vdiInUse(destRef, "mirror");
    await inTask(ts, task, "VDI.hangar_data_mirror_to_vdi", (control) => mirrorToVdi(ts, control, vdi, dest).then(() => ""));
  }, { ...ON_VDI_HOST, role: "vm-power-admin" }),
];

/** The VDI of a uuid (UUID_INVALID when there is none). */
export const vdiByUuid = (ts: Toolstack, uuid: string): Promise<string> => vdiSource.byUuid(ts, uuid);
