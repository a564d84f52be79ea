// Reads of one or two volumes straight from the SR's plugin: Volume.stat, Volume.compare.
import "server-only";

import { accessSr, CONSOLE_DBG, callPlugin } from "../storage-access.ts";
import type { XenApiClient } from "../../xenapi/client.ts";
import { volumeRows } from "./list-volumes.ts";
import type { TCompareVolumesResponse, TVolumeRow } from "./schema.ts";

export async function statVolume(xapi: XenApiClient, pluginRoot: string, input: { srRef: string; key: string }): Promise<TVolumeRow> {
  const sr = await accessSr(xapi, pluginRoot, input.srRef);
  const volume = await callPlugin(sr.plugin, "Volume.stat", { dbg: CONSOLE_DBG, sr: sr.uri, key: input.key });
  // A lone volume: its original's name is not known here (the table has it).
  return volumeRows(sr.uuid, [volume])[0]!;
}

/**
 * Volume.compare of `a` with `b`: the blocks of `a` that differ, as the plugin's [start, length] runs plus
 * the counts a picture and a screen reader need. Runs the plugin sent unordered or overlapping are merged.
 */
export async function compareVolumes(xapi: XenApiClient, pluginRoot: string, input: { srRef: string; a: string; b: string }): Promise<TCompareVolumesResponse> {
  const sr = await accessSr(xapi, pluginRoot, input.srRef);
  const [blocklist, volume] = await Promise.all([
    callPlugin(sr.plugin, "Volume.compare", { dbg: CONSOLE_DBG, sr: sr.uri, key: input.a, key2: input.b }),
    callPlugin(sr.plugin, "Volume.stat", { dbg: CONSOLE_DBG, sr: sr.uri, key: input.a }),
  ]);
  const blocksize = blocklist.blocksize > 0 ? blocklist.blocksize : 1;
  const ranges = mergeRanges(blocklist.ranges);
  const totalBlocks = Math.max(Math.ceil(volume.virtual_size / blocksize), ranges.length > 0 ? ranges.at(-1)![0] + ranges.at(-1)![1] : 0);
  return { blocksize, totalBlocks, changedBlocks: ranges.reduce((sum, [, length]) => sum + length, 0), ranges };
}

export function mergeRanges(ranges: ReadonlyArray<readonly [number, number]>): Array<[number, number]> {
  const sorted = ranges.filter(([, length]) => length > 0).toSorted((x, y) => x[0] - y[0]);
  const out: Array<[number, number]> = [];
  for (const [start, length] of sorted) {
    const last = out.at(-1);
    if (last !== undefined && start <= last[0] + last[1]) last[1] = Math.max(last[1], start + length - last[0]);
    else out.push([start, length]);
  }
  return out;
}
