// VDIs are never stored: a VDI record is built from its SR's SR.ls each time, so it cannot drift from the
// volume. What the toolstack keeps is a locator (vdi_locations: ref → SR, volume key) so that a ref finds its
// SR without listing every SR. Refs and uuids are derived from (SR uuid, volume key), so they survive
// restarts without being stored: uuid = the volume's own when the plugin gives one, else a name-based
// UUID v5; ref = OpaqueRef:<UUID v5>.
//
// XenAPI fields a plugin has no place for are kept on the volume with Volume.set, as xapi-storage-script
// keeps them (compat-notes §1): vdi-type, is_a_snapshot, snapshot_of (the original's key), snapshot_time,
// and `_other_config_<k>` / `_sm_config_<k>` for the maps, byte-exact.
import type { Volume } from "../storage/types.ts";
import { type AttachedSr, attachedSr, attachedSrs, DBG, hasFeature, type StringMap } from "./srs.ts";
import type { Toolstack } from "./toolstack.ts";
import { xenErrors } from "../xenapi/errors.ts";
import { NULL_REF, xenDate, type XenRecord } from "../xenapi/values.ts";
import { KEYS, OTHER_CONFIG_PREFIX, SM_CONFIG_PREFIX, vdiRef, vdiUuid } from "../xenapi/vdi-identity.ts";

export const VDI_TYPES = [
  "system",
  "user",
  "ephemeral",
  "suspend",
  "crashdump",
  "ha_statefile",
  "metadata",
  "redo_log",
  "rrd",
  "pvs_cache",
  "cbt_metadata",
] as const;

/** Operations a VDI allows, each with the plugin feature it needs. */
const VDI_OPERATIONS: ReadonlyArray<readonly [string, string | null]> = [
  ["clone", "VDI_CLONE"],
  ["copy", null],
  ["destroy", "VDI_DELETE"],
  ["resize", "VDI_RESIZE"],
  ["snapshot", "VDI_SNAPSHOT"],
  ["update", null],
  ["mirror", null],
  ["enable_cbt", "VDI_CONFIG_CBT"],
  ["disable_cbt", "VDI_CONFIG_CBT"],
  ["data_destroy", "VDI_CONFIG_CBT"],
  ["list_changed_blocks", "VDI_CONFIG_CBT"],
];

/** A volume's prefixed keys as a map (other_config, sm_config). */
function prefixed(keys: StringMap, prefix: string): StringMap {
  const out: StringMap = {};
  for (const key in keys) if (key.startsWith(prefix)) out[key.slice(prefix.length)] = keys[key]!;
  return out;
}

function vdiType(volume: Volume): string {
  if (volume.volume_type === "CBT_Metadata") return "cbt_metadata";
  const type = volume.keys[KEYS.type];
  return type !== undefined && (VDI_TYPES as readonly string[]).includes(type) ? type : "user";
}

/** The XenAPI fields a volume keeps in its keys: type and the maps. */
export function volumeFields(volume: Volume): { type: string; other_config: StringMap; sm_config: StringMap } {
  return { type: vdiType(volume), other_config: prefixed(volume.keys, OTHER_CONFIG_PREFIX), sm_config: prefixed(volume.keys, SM_CONFIG_PREFIX) };
}

/** The keys that keep those fields on a volume (a new one: plugins copy no keys to snapshots, clones, copies). */
export function fieldKeys(fields: XenRecord): Array<[string, string]> {
  return [
    [KEYS.type, String(fields.type)],
    ...Object.entries(fields.other_config as StringMap).map(([k, v]): [string, string] => [`${OTHER_CONFIG_PREFIX}${k}`, v]),
    ...Object.entries(fields.sm_config as StringMap).map(([k, v]): [string, string] => [`${SM_CONFIG_PREFIX}${k}`, v]),
  ];
}

/** Sets keys on a volume; with `undo`, a failure destroys the volume (a volume just made stays whole or goes). */
export async function setVolumeKeys(sr: AttachedSr, key: string, keys: ReadonlyArray<readonly [string, string]>, options: { undo: boolean }): Promise<void> {
  try {
    for (const [k, v] of keys) await sr.plugin.client.call("Volume.set", { dbg: DBG, sr: sr.uri, key, k, v });
  } catch (error) {
    if (options.undo) await sr.plugin.client.call("Volume.destroy", { dbg: DBG, sr: sr.uri, key }).catch(() => undefined);
    throw error;
  }
}

/** snapshot_time as xapi writes dates; the key may hold xapi's form or RFC 3339. */
function snapshotTime(value: string | undefined): string {
  if (value === undefined) return xenDate(new Date(0));
  if (/^\d{8}T\d{2}:\d{2}:\d{2}Z$/.test(value)) return value;
  const parsed = Date.parse(value);
  return Number.isNaN(parsed) ? xenDate(new Date(0)) : xenDate(new Date(parsed));
}

/** What a task is doing to a VDI (current_operations), per toolstack. */
const runningOperations = new WeakMap<Toolstack, Map<string, Record<string, string>>>();

function operationsOf(ts: Toolstack): Map<string, Record<string, string>> {
  let map = runningOperations.get(ts);
  if (map === undefined) runningOperations.set(ts, (map = new Map()));
  return map;
}

export function currentOperations(ts: Toolstack, ref: string): Record<string, string> {
  return operationsOf(ts).get(ref) ?? {};
}

/** Marks VDIs busy with an operation of a task until the returned function is called. */
export function markOperation(ts: Toolstack, refs: readonly string[], task: string, operation: string): () => void {
  const map = operationsOf(ts);
  for (const ref of refs) map.set(ref, { ...map.get(ref), [task]: operation });
  return () => {
    for (const ref of refs) {
      const { [task]: _done, ...rest } = map.get(ref) ?? {};
      if (Object.keys(rest).length === 0) map.delete(ref);
      else map.set(ref, rest);
    }
  };
}

/** VBD refs by VDI ref, from the stored VBDs. */
export async function vbdsByVdi(ts: Toolstack): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for (const vbd of await ts.objects.all("VBD")) {
    const vdi = String(vbd.record.VDI);
    if (vdi === NULL_REF) continue;
    const list = out.get(vdi);
    if (list === undefined) out.set(vdi, [vbd.ref]);
    else list.push(vbd.ref);
  }
  return out;
}

export interface SrListing {
  sr: AttachedSr;
  /** Records by ref, in SR.ls order. */
  records: Map<string, XenRecord>;
  /** Keys by ref. */
  keys: Map<string, string>;
}

/** The VDI records of one SR listing. Volumes xapi hides are hidden too: clone-on-boot transients. */
function buildRecords(ts: Toolstack, sr: AttachedSr, volumes: Volume[], vbds: Map<string, string[]>): SrListing {
  const transients = new Set<string>();
  for (const volume of volumes) {
    const transient = volume.keys[KEYS.cloneOnBoot];
    if (transient !== undefined) transients.add(transient);
  }
  const refByKey = new Map<string, string>();
  for (const volume of volumes) refByKey.set(volume.key, vdiRef(sr.uuid, volume.key));
  const snapshots = new Map<string, string[]>();
  for (const volume of volumes) {
    const of = volume.keys[KEYS.snapshotOf];
    if (of === undefined || volume.keys[KEYS.isASnapshot] !== "true") continue;
    const list = snapshots.get(of);
    if (list === undefined) snapshots.set(of, [refByKey.get(volume.key)!]);
    else list.push(refByKey.get(volume.key)!);
  }
  const allowed = VDI_OPERATIONS.filter(([, feature]) => feature === null || hasFeature(sr.plugin, feature)).map(([op]) => op);
  const records = new Map<string, XenRecord>();
  const keys = new Map<string, string>();
  for (const volume of volumes) {
    if (transients.has(volume.key)) continue;
    const ref = refByKey.get(volume.key)!;
    const isSnapshot = volume.keys[KEYS.isASnapshot] === "true";
    const snapshotOf = volume.keys[KEYS.snapshotOf];
    const vbdRefs = vbds.get(ref) ?? [];
    const current = currentOperations(ts, ref);
    const busy = vbdRefs.length > 0 || Object.keys(current).length > 0;
    keys.set(ref, volume.key);
    records.set(ref, {
      uuid: vdiUuid(sr.uuid, volume),
      name_label: volume.name,
      name_description: volume.description,
      allowed_operations: busy ? allowed.filter((op) => op !== "destroy" && op !== "data_destroy") : allowed,
      current_operations: current,
      SR: sr.ref,
      VBDs: vbdRefs,
      crash_dumps: [],
      virtual_size: volume.virtual_size,
      physical_utilisation: volume.physical_utilisation,
      ...volumeFields(volume),
      sharable: volume.sharable,
      read_only: !volume.read_write,
      storage_lock: false,
      location: volume.key,
      managed: true,
      missing: false,
      parent: NULL_REF,
      xenstore_data: {},
      is_a_snapshot: isSnapshot,
      snapshot_of: (snapshotOf !== undefined && refByKey.get(snapshotOf)) || NULL_REF,
      snapshots: snapshots.get(volume.key) ?? [],
      snapshot_time: snapshotTime(volume.keys[KEYS.snapshotTime]),
      tags: [],
      allow_caching: false,
      on_boot: "persist",
      metadata_of_pool: NULL_REF,
      metadata_latest: false,
      is_tools_iso: false,
      cbt_enabled: volume.cbt_enabled ?? false,
    });
  }
  return { sr, records, keys };
}

/**
 * Lists an SR's VDIs (one SR.ls) and brings its locators up to date: VDIs seen for the first time get
 * their locator and an "add" event, vanished ones lose theirs with a "del" event (`removed` holds the
 * last records of VDIs a call just destroyed, for their events). `vbds`: vbdsByVdi's answer, when several
 * SRs are listed at once.
 */
export async function listSr(ts: Toolstack, sr: AttachedSr, removed: ReadonlyMap<string, XenRecord> = new Map(), vbds?: Promise<Map<string, string[]>>): Promise<SrListing> {
  const [volumes, vbdsOfVdis] = await Promise.all([sr.plugin.client.call("SR.ls", { dbg: DBG, sr: sr.uri }), vbds ?? vbdsByVdi(ts)]);
  const listing = buildRecords(ts, sr, volumes, vbdsOfVdis);
  const known = async () => new Set((await ts.db.all<{ ref: string }>("SELECT ref FROM vdi_locations WHERE sr_ref = ?", [sr.ref])).map((r) => r.ref));
  const before = await known();
  const changed = before.size !== listing.records.size || [...listing.records.keys()].some((ref) => !before.has(ref));
  if (changed) {
    await ts.db.transaction(async (tx) => {
      // Looked at again inside the transaction: a concurrent listing may have recorded the same changes.
      const current = new Set((await tx.all<{ ref: string }>("SELECT ref FROM vdi_locations WHERE sr_ref = ?", [sr.ref])).map((r) => r.ref));
      for (const [ref, record] of listing.records) {
        if (current.has(ref)) continue;
        const added = await tx.run("INSERT INTO vdi_locations (ref, uuid, sr_ref, volume_key) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING", [
          ref,
          String(record.uuid),
          sr.ref,
          listing.keys.get(ref)!,
        ]);
        if (added > 0) await ts.events.append(tx, "VDI", ref, "add", record);
      }
      for (const ref of current) {
        if (listing.records.has(ref)) continue;
        await tx.run("DELETE FROM vdi_locations WHERE ref = ?", [ref]);
        await ts.events.append(tx, "VDI", ref, "del", removed.get(ref) ?? null);
      }
    });
  }
  // The SR's virtual_allocation follows its listings (stored: event.from readers see it change).
  let allocation = 0;
  for (const record of listing.records.values()) allocation += Number(record.virtual_size);
  const stored = await ts.objects.find("SR", sr.ref);
  if (stored !== undefined && stored.record.virtual_allocation !== allocation) await ts.objects.set("SR", sr.ref, { virtual_allocation: allocation });
  return listing;
}

/** An SR's listing, or undefined (logged) when its plugin fails. */
function listSrOrLog(ts: Toolstack, sr: AttachedSr, vbds: Promise<Map<string, string[]>>): Promise<SrListing | undefined> {
  return listSr(ts, sr, new Map(), vbds).catch((error: unknown) => {
    console.error(`VDI listing: SR ${sr.ref} (${sr.type}): ${error instanceof Error ? error.message : String(error)}`);
    return undefined;
  });
}

/** Every VDI of the attached SRs, one SR.ls per SR in parallel. An SR whose plugin fails is left out (logged). */
export async function listAllVdis(ts: Toolstack): Promise<SrListing[]> {
  return listEach(ts, await attachedSrs(ts));
}

/** The listings of these SRs in parallel, sharing one reading of the VBDs; those whose plugin fails left out (logged). */
async function listEach(ts: Toolstack, srs: readonly AttachedSr[]): Promise<SrListing[]> {
  if (srs.length === 0) return [];
  const vbds = vbdsByVdi(ts);
  const listings = await Promise.all(srs.map((sr) => listSrOrLog(ts, sr, vbds)));
  return listings.filter((listing): listing is SrListing => listing !== undefined);
}

/** Locators read per statement. */
const LOCATOR_BATCH = 500;

/**
 * The records of the VDIs named, as VDI.get_record builds them, from one SR.ls per SR they live on (in parallel),
 * not one per VDI nor one of every SR. Refs that name no VDI, a transient, or one of an SR that is detached or
 * fails to answer (logged) are left out.
 */
export async function vdiRecords(ts: Toolstack, refs: readonly string[]): Promise<Map<string, XenRecord>> {
  const wanted = [...new Set(refs)];
  const bySr = new Map<string, string[]>();
  for (let i = 0; i < wanted.length; i += LOCATOR_BATCH) {
    const batch = wanted.slice(i, i + LOCATOR_BATCH);
    const rows = await ts.db.all<{ ref: string; sr_ref: string }>(`SELECT ref, sr_ref FROM vdi_locations WHERE ref IN (${batch.map(() => "?").join(", ")})`, batch);
    for (const row of rows) bySr.set(row.sr_ref, [...(bySr.get(row.sr_ref) ?? []), row.ref]);
  }
  const srs = await Promise.all([...bySr.keys()].map((sr) => attachedSr(ts, sr).catch(() => undefined)));
  const found = new Map<string, XenRecord>();
  for (const listing of await listEach(ts, srs.filter((sr) => sr !== undefined))) {
    for (const ref of bySr.get(listing.sr.ref)!) {
      const record = listing.records.get(ref);
      if (record !== undefined) found.set(ref, record);
    }
  }
  return found;
}

export interface LocatedVdi {
  ref: string;
  sr: AttachedSr;
  key: string;
}

/** A VDI's locator row, if a listing or call has seen it. */
export function findVdiLocation(ts: Toolstack, ref: string): Promise<{ sr_ref: string; volume_key: string } | undefined> {
  return ts.db.get<{ sr_ref: string; volume_key: string }>("SELECT sr_ref, volume_key FROM vdi_locations WHERE ref = ?", [ref]);
}

/** Where a VDI lives, from its locator: HANDLE_INVALID for a ref never listed, SR_NOT_ATTACHED for a detached SR. */
export async function locateVdi(ts: Toolstack, ref: string): Promise<LocatedVdi> {
  const row = await findVdiLocation(ts, ref);
  if (row === undefined) throw xenErrors.handleInvalid("VDI", ref);
  return { ref, sr: await attachedSr(ts, row.sr_ref), key: row.volume_key };
}

/** A VDI's record, built from its SR's listing; HANDLE_INVALID when its volume is gone. */
export async function vdiRecord(ts: Toolstack, vdi: LocatedVdi): Promise<XenRecord> {
  const record = (await listSr(ts, vdi.sr)).records.get(vdi.ref);
  if (record === undefined) throw xenErrors.handleInvalid("VDI", vdi.ref);
  return record;
}

/** The refs of an SR's VDIs as last listed (SR.VDIs, without asking the plugin). */
export async function vdiRefsOfSr(ts: Toolstack, srRef: string): Promise<string[]> {
  return (await ts.db.all<{ ref: string }>("SELECT ref FROM vdi_locations WHERE sr_ref = ? ORDER BY ref", [srRef])).map((r) => r.ref);
}

/** Forgets the locators of an SR's VDIs (SR.forget, SR.destroy), each with a "del" event. */
export async function forgetSrVdis(ts: Toolstack, srRef: string): Promise<void> {
  await ts.db.transaction(async (tx) => {
    for (const { ref } of await tx.all<{ ref: string }>("SELECT ref FROM vdi_locations WHERE sr_ref = ?", [srRef])) {
      await tx.run("DELETE FROM vdi_locations WHERE ref = ?", [ref]);
      await ts.events.append(tx, "VDI", ref, "del", null);
    }
  });
}

/**
 * After a change made through the API: the SR listed again (adds and removals announced by listSr) and a
 * "mod" event for each of `modified`. Best effort: the change is done whatever the listing does.
 */
export async function announceChanges(
  ts: Toolstack,
  srRef: string,
  changes: { modified?: readonly string[]; removed?: ReadonlyMap<string, XenRecord> } = {},
): Promise<void> {
  try {
    const listing = await listSr(ts, await attachedSr(ts, srRef), changes.removed);
    for (const ref of changes.modified ?? []) {
      const record = listing.records.get(ref);
      if (record !== undefined) await ts.events.record("VDI", ref, "mod", record);
    }
  } catch (error) {
    console.error(`VDI events of SR ${srRef}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/**
 * A volume this toolstack has just made and set its keys on (`volume` holds them), announced from the plugin's
 * answer rather than a new SR.ls (a plugin process each, the most of a VDI.create's cost on a busy host): its
 * locator, its `add` event and the SR's virtual_allocation. A volume with relations to others (a snapshot, a
 * transient) is left to a listing. Answers the VDI's ref.
 */
export async function announceNewVolume(ts: Toolstack, sr: AttachedSr, volume: Volume): Promise<string> {
  const ref = vdiRef(sr.uuid, volume.key);
  const record = buildRecords(ts, sr, [volume], new Map()).records.get(ref);
  if (record === undefined || volume.keys[KEYS.snapshotOf] !== undefined || volume.keys[KEYS.cloneOnBoot] !== undefined) {
    await announceChanges(ts, sr.ref);
    return rememberVdi(ts, sr, volume);
  }
  await ts.db.transaction(async (tx) => {
    const added = await tx.run("INSERT INTO vdi_locations (ref, uuid, sr_ref, volume_key) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING", [ref, String(record.uuid), sr.ref, volume.key]);
    if (added === 0) return;
    await ts.events.append(tx, "VDI", ref, "add", record);
    await ts.objects.update("SR", sr.ref, (stored) => ({ ...stored, virtual_allocation: Number(stored.virtual_allocation ?? 0) + volume.virtual_size }), tx);
  });
  return ref;
}

/**
 * A volume this toolstack has just destroyed, announced without a new SR.ls: its locator goes with a `del` event
 * carrying `record` (its last), and the SR's virtual_allocation shrinks. A snapshot's original changes too (its
 * `snapshots`): that is left to a listing.
 */
export async function announceRemovedVolume(ts: Toolstack, sr: AttachedSr, ref: string, record: XenRecord): Promise<void> {
  const original = String(record.snapshot_of);
  if (original !== NULL_REF) return announceChanges(ts, sr.ref, { modified: [original], removed: new Map([[ref, record]]) });
  await ts.db.transaction(async (tx) => {
    if ((await tx.run("DELETE FROM vdi_locations WHERE ref = ?", [ref])) === 0) return;
    await ts.events.append(tx, "VDI", ref, "del", record);
    await ts.objects.update("SR", sr.ref, (stored) => ({ ...stored, virtual_allocation: Math.max(0, Number(stored.virtual_allocation ?? 0) - Number(record.virtual_size)) }), tx);
  });
}

/** Makes sure a ref the API just answered resolves, whether or not its announcement's listing worked. */
export async function rememberVdi(ts: Toolstack, sr: AttachedSr, volume: Pick<Volume, "key" | "uuid">): Promise<string> {
  const ref = vdiRef(sr.uuid, volume.key);
  await ts.db.run("INSERT INTO vdi_locations (ref, uuid, sr_ref, volume_key) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING", [
    ref,
    vdiUuid(sr.uuid, volume),
    sr.ref,
    volume.key,
  ]);
  return ref;
}
