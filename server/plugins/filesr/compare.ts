// Volume.compare: which blocks differ between two volumes, from the allocation maps alone.
import { CLUSTER_SIZE, clusterCount } from "./layout.ts";
import { ABSENT, type ChainLayer, type ClusterState, DATA, findSource, ZERO } from "./cluster-map.ts";
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
 * What the layers above a common layer (top first) make of `cluster`: DATA or ZERO from the first layer that
 * decides, ABSENT when they all pass it down. Past a layer's end the chain reads zeros.
 */
function stateAbove(layers: readonly ChainLayer[], cluster: number): ClusterState {
  for (const layer of layers) {
    if (cluster >= layer.count) return ZERO;
    const state = layer.map.get(cluster);
    if (state !== ABSENT) return state;
  }
  return ABSENT;
}

/**
 * Blocks of `key` that may read differently from `key2`. For related volumes (sharing a layer): the clusters
 * either chain holds as data above their newest common layer, and those one chain zeroes there while the
 * other reads data (from the common layer down) — zeros over zeros is no change, whatever CBT says of the
 * write. If unrelated or `key2` does not exist, the non-empty blocks of `key`; if `key` has no data, every
 * block. Contents are never compared: data over anything counts as changed.
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
  const mine = chain.slice(0, common);
  const theirs = otherChain.slice(0, otherChain.findIndex((layer) => layer.id === commonId));
  const shared = chain.slice(common);
  const otherBlocks = clusterCount(other.size);
  const changed = (block: number) => {
    if (block >= otherBlocks) return nonEmpty(block);
    const state = stateAbove(mine, block);
    const otherState = stateAbove(theirs, block);
    if (state === DATA || otherState === DATA) return true;
    // Both read the common layer, or both zeros; else one reads zeros and the other the common layer.
    if (state === otherState) return false;
    return findSource(shared, block) >= 0;
  };
  return { blocksize: CLUSTER_SIZE, ranges: toRanges(blocks, changed) };
}
