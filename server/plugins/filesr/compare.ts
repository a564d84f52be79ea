// Volume.compare: which blocks differ between two volumes, from the allocation maps alone.
import { CLUSTER_SIZE, clusterCount } from "./layout.ts";
import { ABSENT, findSource } from "./cluster-map.ts";
import { connectSr } from "./db.ts";
import { loadChainMaps } from "./layers.ts";
import { findVolume, requireVolume } from "./volume-records.ts";

/** The interface's blocklist: `ranges` are [start, length] pairs counted in blocks of `blocksize` bytes. */
export interface Blocklist {
  blocksize: number;
  ranges: Array<[number, number]>;
}

function toRanges(blocks: number, changed: (block: number) => boolean): Array<[number, number]> {
  const ranges: Array<[number, number]> = [];
  for (let block = 0; block < blocks; block++) {
    if (!changed(block)) continue;
    const last = ranges[ranges.length - 1];
    if (last && last[0] + last[1] === block) last[1]++;
    else ranges.push([block, 1]);
  }
  return ranges;
}

/**
 * Blocks of `key` that may differ from `key2`: for related volumes (sharing a layer) the clusters written in
 * either chain above their newest common layer; if unrelated or `key2` does not exist, the non-empty blocks
 * of `key`; if `key` has no data, every block.
 */
export async function compareVolumes(srPath: string, key: string, key2: string): Promise<Blocklist> {
  const conn = connectSr(srPath, { attached: true });
  const volume = requireVolume(conn, key);
  const other = findVolume(conn, key2);
  const blocks = clusterCount(volume.size);
  if (volume.top_layer === null) return { blocksize: CLUSTER_SIZE, ranges: blocks > 0 ? [[0, blocks]] : [] };
  const chain = loadChainMaps(conn, volume.top_layer);
  const otherChain = other?.top_layer ? loadChainMaps(conn, other.top_layer) : [];
  const otherIds = new Set(otherChain.map((layer) => layer.id));
  const common = chain.findIndex((layer) => otherIds.has(layer.id));
  const nonEmpty = (block: number) => findSource(chain, block) >= 0;
  if (common < 0 || !other) return { blocksize: CLUSTER_SIZE, ranges: toRanges(blocks, nonEmpty) };
  const commonId = chain[common]!.id;
  const written = [...chain.slice(0, common), ...otherChain.slice(0, otherChain.findIndex((layer) => layer.id === commonId))];
  const otherBlocks = clusterCount(other.size);
  const changed = (block: number) =>
    block >= otherBlocks ? nonEmpty(block) : written.some((layer) => block < layer.count && layer.map.get(block) !== ABSENT);
  return { blocksize: CLUSTER_SIZE, ranges: toRanges(blocks, changed) };
}
