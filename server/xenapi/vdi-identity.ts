// How a volume carries what XenAPI knows of its VDI, shared by the toolstack and the console (which reads
// plugins directly): the XenAPI fields a plugin has no place for are volume keys, as xapi-storage-script keeps
// them (compat-notes §1), and a VDI's ref and uuid are derived from (SR uuid, volume key), so they survive
// restarts without being stored.
import { createHash } from "node:crypto";

interface VolumeIdentity {
  key: string;
  uuid?: string;
}

export const KEYS = {
  type: "vdi-type",
  isASnapshot: "is_a_snapshot",
  snapshotOf: "snapshot_of",
  snapshotTime: "snapshot_time",
  cloneOnBoot: "clone-on-boot",
} as const;
export const OTHER_CONFIG_PREFIX = "_other_config_";
export const SM_CONFIG_PREFIX = "_sm_config_";

// One fixed namespace for every name-based id Hangar derives (RFC 4122 §4.3).
const NAMESPACE = Buffer.from("3f6c2b9e8d1a4c57a0e2b5d94c7f1e68", "hex");
const derived = new Map<string, string>();

/** A name-based UUID (v5, SHA-1) in Hangar's namespace; remembered, as listings derive thousands. */
function nameUuid(name: string): string {
  let uuid = derived.get(name);
  if (uuid !== undefined) return uuid;
  const hash = createHash("sha1").update(NAMESPACE).update(name).digest();
  hash[6] = (hash[6]! & 0x0f) | 0x50;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const hex = hash.toString("hex", 0, 16);
  uuid = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  if (derived.size > 200_000) derived.clear();
  derived.set(name, uuid);
  return uuid;
}

export function vdiRef(srUuid: string, key: string): string {
  return `OpaqueRef:${nameUuid(`VDI ref\0${srUuid}\0${key}`)}`;
}

export function vdiUuid(srUuid: string, volume: VolumeIdentity): string {
  return volume.uuid !== undefined && volume.uuid !== "" ? volume.uuid : nameUuid(`VDI uuid\0${srUuid}\0${volume.key}`);
}

