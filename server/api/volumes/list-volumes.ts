// An SR's volumes for the table: one SR.ls through the SR's plugin (never a call per volume), shaped the
// way the toolstack reads them: snapshots and their originals from the keys it keeps on each volume,
// clone-on-boot transients hidden, the uuid the toolstack gives a volume without one.
import "server-only";

import type { Volume } from "../../storage/types.ts";
import { KEYS, OTHER_CONFIG_PREFIX, vdiUuid } from "../../xenapi/vdi-identity.ts";
import type { XenApiClient } from "../../xenapi/client.ts";
import { rememberVolumeCount } from "../srs/volume-counts.ts";
import { CONSOLE_DBG, accessSr, callPlugin } from "../storage-access.ts";
import type { TListVolumesResponse, TVolumeRow } from "./schema.ts";

export async function listVolumes(xapi: XenApiClient, pluginRoot: string, srRef: string): Promise<TListVolumesResponse> {
  const sr = await accessSr(xapi, pluginRoot, srRef);
  const volumes = await callPlugin(sr.plugin, "SR.ls", { dbg: CONSOLE_DBG, sr: sr.uri });
  rememberVolumeCount(sr.place, sr.type, sr.uri, volumes.length);
  return {
    sr: { ref: sr.ref, uuid: sr.uuid, name: sr.name, type: sr.type },
    features: sr.plugin.features,
    volumes: volumeRows(sr.uuid, volumes),
  };
}

/** The rows of a listing, in SR.ls order. Linear in the number of volumes (two passes, maps by key). */
export function volumeRows(srUuid: string, volumes: readonly Volume[]): TVolumeRow[] {
  const transients = new Set<string>();
  const byKey = new Map<string, Volume>();
  for (const volume of volumes) {
    byKey.set(volume.key, volume);
    const transient = volume.keys[KEYS.cloneOnBoot];
    if (transient !== undefined) transients.add(transient);
  }
  const rows: TVolumeRow[] = [];
  for (const volume of volumes) {
    if (transients.has(volume.key)) continue;
    const isSnapshot = volume.keys[KEYS.isASnapshot] === "true";
    const originalKey = isSnapshot ? volume.keys[KEYS.snapshotOf] : undefined;
    const original = originalKey === undefined ? undefined : byKey.get(originalKey);
    rows.push({
      key: volume.key,
      uuid: vdiUuid(srUuid, volume),
      name: volume.name,
      description: volume.description,
      virtualSize: volume.virtual_size,
      physicalUtilisation: volume.physical_utilisation,
      readWrite: volume.read_write,
      sharable: volume.sharable,
      keys: volume.keys,
      otherConfig: otherConfig(volume.keys),
      cbtEnabled: volume.cbt_enabled ?? false,
      volumeType: volume.volume_type ?? null,
      isSnapshot,
      snapshotOf: original === undefined ? null : { key: original.key, uuid: vdiUuid(srUuid, original), name: original.name },
      snapshotTime: isSnapshot ? (volume.keys[KEYS.snapshotTime] ?? null) : null,
    });
  }
  return rows;
}

function otherConfig(keys: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key in keys) if (key.startsWith(OTHER_CONFIG_PREFIX)) out[key.slice(OTHER_CONFIG_PREFIX.length)] = keys[key]!;
  return out;
}
