// Allocation map of one layer: two bits per cluster (ABSENT: look in the parent layer; DATA: this layer's
// data file holds the cluster; ZERO: the cluster reads as zeros whatever the parents hold), four clusters
// per byte, least significant bits first, after the header of packed-file.ts (magic "HGRMAP01").
import fs from "node:fs";
import { replaceFileSync } from "./durable.ts";
import { createPackedFileSync, decodePackedFile, DirtyPages, encodePackedFile } from "./packed-file.ts";

export const ABSENT = 0;
export const DATA = 1;
export const ZERO = 2;
export type ClusterState = typeof ABSENT | typeof DATA | typeof ZERO;

const MAGIC = "HGRMAP01";

/** Number of DATA states in each possible byte, to count allocation without a per-cluster loop. */
const DATA_IN_BYTE = Uint8Array.from({ length: 256 }, (_, byte) => {
  let n = 0;
  for (let shift = 0; shift < 8; shift += 2) if (((byte >> shift) & 3) === DATA) n++;
  return n;
});

const payloadLength = (count: number) => Math.ceil(count / 4);

export class ClusterMap {
  readonly count: number;
  readonly states: Uint8Array;
  /** Clusters in state DATA. */
  allocated: number;
  readonly dirty = new DirtyPages();

  constructor(count: number, states?: Uint8Array) {
    this.count = count;
    this.states = states ?? new Uint8Array(payloadLength(count));
    let allocated = 0;
    for (const byte of this.states) allocated += DATA_IN_BYTE[byte]!;
    this.allocated = allocated;
  }

  get(cluster: number): ClusterState {
    return ((this.states[cluster >> 2]! >> ((cluster & 3) << 1)) & 3) as ClusterState;
  }

  set(cluster: number, state: ClusterState): void {
    const index = cluster >> 2;
    const shift = (cluster & 3) << 1;
    const byte = this.states[index]!;
    const old = (byte >> shift) & 3;
    if (old === state) return;
    this.states[index] = (byte & ~(3 << shift)) | (state << shift);
    if (old === DATA) this.allocated--;
    if (state === DATA) this.allocated++;
    this.dirty.mark(index);
  }

  /** A copy covering `count` clusters (at least this map's), new clusters in state `fill`. */
  grown(count: number, fill: ClusterState): ClusterMap {
    const bigger = new ClusterMap(Math.max(count, this.count));
    bigger.states.set(this.states);
    bigger.allocated = this.allocated;
    for (let cluster = this.count; cluster < bigger.count; cluster++) bigger.set(cluster, fill);
    bigger.dirty.clear();
    return bigger;
  }

  toBuffer(): Buffer {
    return encodePackedFile(MAGIC, this.count, this.states);
  }

  static fromBuffer(buffer: Buffer, file: string): ClusterMap {
    const { count, payload } = decodePackedFile(buffer, MAGIC, payloadLength, file);
    return new ClusterMap(count, payload);
  }
}

export function readMapSync(file: string): ClusterMap {
  return ClusterMap.fromBuffer(fs.readFileSync(file), file);
}

/** A new map of `count` clusters, all ABSENT (the file is created sparse). */
export function createMapSync(file: string, count: number): void {
  createPackedFileSync(file, MAGIC, count, payloadLength(count));
}

export function writeMapSync(file: string, map: ClusterMap): void {
  replaceFileSync(file, map.toBuffer());
}

/** A layer as chain walks see it: its map, and how many clusters it covers (past them it reads zeros). */
export interface ChainLayer {
  count: number;
  map: ClusterMap;
}

/** Index in `chain` (top first) of the layer holding `cluster`, or -1 when the cluster reads as zeros. */
export function findSource(chain: readonly ChainLayer[], cluster: number): number {
  for (let index = 0; index < chain.length; index++) {
    const layer = chain[index]!;
    if (cluster >= layer.count) return -1;
    const state = layer.map.get(cluster);
    if (state === DATA) return index;
    if (state === ZERO) return -1;
  }
  return -1;
}
