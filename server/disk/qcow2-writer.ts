// A disk written out as qcow2 version 3 (QEMU's docs/interop/qcow2.rst; big-endian), 64 KiB clusters and 16-bit
// refcounts, laid out whole from the source's block map before the first byte: the header cluster, the refcount
// table, the refcount blocks, the L1 table, the L2 tables, then a data cluster for every cluster of each carried
// source block, in disk order. Every cluster is used once, so every refcount is 1 and the length is known up front;
// the same inputs give the same bytes (an export resumes by byte offset).
// A delta names its backing file (and its format) in the header cluster: the clusters it leaves unallocated read
// as the backing file's, those it carries (zeros or not) hide them.
import { setImmediate } from "node:timers/promises";
import { MAGIC } from "./qcow2.ts";
import { CarriedBlocks, carriedMap, type DiskSource, ofLength, SOURCE_BLOCK, sourceBlockLength } from "./source.ts";

const VERSION = 3;
const CLUSTER_BITS = 16;
const CLUSTER = 2 ** CLUSTER_BITS;
const CLUSTERS_PER_BLOCK = SOURCE_BLOCK / CLUSTER;
const L2_ENTRIES = CLUSTER / 8;
/** Source blocks one L2 table maps (512 MiB of disk). */
const BLOCKS_PER_L2 = (L2_ENTRIES * CLUSTER) / SOURCE_BLOCK;
/** 16-bit refcounts (refcount_order 4): a refcount block counts 32768 clusters (2 GiB of file). */
const REFCOUNT_ORDER = 4;
const REFCOUNTS_PER_BLOCK = CLUSTER / 2;
const REFCOUNT_ONE = Buffer.from([0, 1]);
const HEADER_LENGTH = 112;
const EXTENSION = { end: 0, backingFormat: 0xe2792aca } as const;
/** An L1 or L2 entry's "copied" bit (its refcount is exactly 1), in the entry's high word. */
const COPIED_HIGH = 0x8000_0000;
/** qemu's limit on a backing file's name. */
const MAX_BACKING_NAME = 1023;
/** The largest disk written: 16 TiB, an L1 table of 32768 entries and a block map of 16 Mi bytes. */
export const MAX_QCOW2_WRITE_SIZE = 16 * 1024 ** 4;

export interface Qcow2WriteOptions {
  /** For a delta: the backing file's name, as qemu opens it (relative to this file's directory). */
  backingFile?: string;
  /** The backing file's format, named in a header extension so that qemu need not probe it (default qcow2). */
  backingFormat?: string;
}

/** The qcow2 image of `source`: its exact length, and its bytes as the consumer pulls them. */
export function writeQcow2(source: DiskSource, options: Qcow2WriteOptions = {}): { length: number; bytes: AsyncGenerator<Buffer> } {
  const { virtualSize } = source;
  if (!Number.isSafeInteger(virtualSize) || virtualSize <= 0 || virtualSize % 512 !== 0) throw new Error(`a qcow2 image's virtual size must be a positive number of 512-byte sectors, not ${virtualSize}`);
  if (virtualSize > MAX_QCOW2_WRITE_SIZE) throw new Error(`a virtual size of ${virtualSize} bytes is over the ${MAX_QCOW2_WRITE_SIZE} bytes (16 TiB) a qcow2 export is written for`);
  const header = headerCluster(virtualSize, options);

  // Synchronous, to say the length: one call per source block (2 Mi of them at 2 TiB).
  const map = carriedMap(source);
  const l1Entries = Math.ceil(map.length / BLOCKS_PER_L2);
  const hasL2 = new Uint8Array(l1Entries);
  let l2Tables = 0;
  let dataClusters = 0;
  for (let index = 0; index < map.length; index++) {
    if (map[index] !== 1) continue;
    dataClusters += Math.ceil(sourceBlockLength(index, virtualSize) / CLUSTER);
    const l1Index = Math.floor(index / BLOCKS_PER_L2);
    if (hasL2[l1Index] === 0) l2Tables++;
    hasL2[l1Index] = 1;
  }
  const l1Clusters = Math.ceil((l1Entries * 8) / CLUSTER);
  // The refcount blocks count themselves and the table that names them: grown until they cover every cluster.
  const others = 1 + l1Clusters + l2Tables + dataClusters;
  let refcountBlocks = 1;
  let tableClusters = 1;
  for (;;) {
    const blocks = Math.ceil((others + tableClusters + refcountBlocks) / REFCOUNTS_PER_BLOCK);
    const table = Math.ceil((blocks * 8) / CLUSTER);
    if (blocks === refcountBlocks && table === tableClusters) break;
    refcountBlocks = blocks;
    tableClusters = table;
  }
  const clusters = others + tableClusters + refcountBlocks;
  const tableAt = CLUSTER;
  const refcountsAt = tableAt + tableClusters * CLUSTER;
  const l1At = refcountsAt + refcountBlocks * CLUSTER;
  const l2At = l1At + l1Clusters * CLUSTER;
  const dataAt = l2At + l2Tables * CLUSTER;
  header.writeUInt32BE(l1Entries, 36);
  header.writeBigUInt64BE(BigInt(l1At), 40);
  header.writeBigUInt64BE(BigInt(tableAt), 48);
  header.writeUInt32BE(tableClusters, 56);
  const length = clusters * CLUSTER;

  async function* bytes(): AsyncGenerator<Buffer> {
    yield header;
    const table = Buffer.alloc(tableClusters * CLUSTER);
    for (let block = 0; block < refcountBlocks; block++) table.writeBigUInt64BE(BigInt(refcountsAt + block * CLUSTER), block * 8);
    yield table;
    for (let block = 0; block < refcountBlocks; block++) {
      const used = Math.min(REFCOUNTS_PER_BLOCK, clusters - block * REFCOUNTS_PER_BLOCK);
      const refcounts = Buffer.alloc(CLUSTER);
      refcounts.fill(REFCOUNT_ONE, 0, used * 2);
      yield refcounts;
      // Over a thousand blocks for a full 2 TiB disk: the event loop gets its turn between slices of them.
      if (block % 32 === 31) await setImmediate();
    }
    const l1 = Buffer.alloc(l1Clusters * CLUSTER);
    for (let l1Index = 0, l2 = 0; l1Index < l1Entries; l1Index++) if (hasL2[l1Index] === 1) writeEntry(l1, l1Index, l2At + l2++ * CLUSTER);
    yield l1;
    let next = dataAt;
    let written = 0;
    for (let l1Index = 0; l1Index < l1Entries; l1Index++) {
      if (hasL2[l1Index] !== 1) continue;
      const l2 = Buffer.alloc(CLUSTER);
      const first = l1Index * BLOCKS_PER_L2;
      for (let index = first; index < Math.min(first + BLOCKS_PER_L2, map.length); index++) {
        if (map[index] !== 1) continue;
        const inBlock = Math.ceil(sourceBlockLength(index, virtualSize) / CLUSTER);
        for (let cluster = 0; cluster < inBlock; cluster++, next += CLUSTER) writeEntry(l2, (index - first) * CLUSTERS_PER_BLOCK + cluster, next);
      }
      yield l2;
      // 8 tables are 64 Ki entries.
      if (++written % 8 === 0) await setImmediate();
    }
    const carried = new CarriedBlocks(source, map);
    try {
      for (let index = 0; index < map.length; index++) {
        if (map[index] !== 1) continue;
        const data = await carried.take(index);
        // The last block's last cluster is whole in the file, zeros after the disk's end.
        const padded = Math.ceil(data.length / CLUSTER) * CLUSTER;
        yield padded === data.length ? data : Buffer.concat([data, Buffer.alloc(padded - data.length)]);
      }
      await carried.end();
    } finally {
      await carried.close();
    }
  }

  return { length, bytes: ofLength(bytes(), length, "qcow2") };
}

/** Entry `index` of an L1 or L2 table: a cluster at `offset`, used once (the "copied" bit set). */
function writeEntry(table: Buffer, index: number, offset: number): void {
  // Two 32-bit halves: a BigInt per entry would cost millions of allocations for a full 2 TiB disk.
  table.writeUInt32BE((COPIED_HIGH | Math.floor(offset / 2 ** 32)) >>> 0, index * 8);
  table.writeUInt32BE(offset >>> 0, index * 8 + 4);
}

/**
 * Cluster 0: the version 3 header (the table offsets filled in by the caller), then its extensions (the backing
 * file's format, if any, and the end mark), then the backing file's name.
 */
function headerCluster(virtualSize: number, options: Qcow2WriteOptions): Buffer {
  const cluster = Buffer.alloc(CLUSTER);
  cluster.writeUInt32BE(MAGIC, 0);
  cluster.writeUInt32BE(VERSION, 4);
  cluster.writeUInt32BE(CLUSTER_BITS, 20);
  cluster.writeBigUInt64BE(BigInt(virtualSize), 24);
  // No encryption, snapshots, feature bits; compression type 0 (deflate, unused) at 104.
  cluster.writeUInt32BE(REFCOUNT_ORDER, 96);
  cluster.writeUInt32BE(HEADER_LENGTH, 100);
  let at = HEADER_LENGTH;
  const { backingFile } = options;
  if (backingFile !== undefined) {
    const name = Buffer.from(backingFile, "utf8");
    if (name.length === 0 || name.length > MAX_BACKING_NAME || name.includes(0)) throw new Error(`backing file name ${JSON.stringify(backingFile)} is not 1 to ${MAX_BACKING_NAME} bytes without a NUL`);
    const format = Buffer.from(options.backingFormat ?? "qcow2", "utf8");
    if (format.length === 0 || format.length > 16 || !/^[a-z0-9_-]+$/.test(format.toString())) throw new Error(`backing format ${JSON.stringify(options.backingFormat)} is not a format name`);
    cluster.writeUInt32BE(EXTENSION.backingFormat, at);
    cluster.writeUInt32BE(format.length, at + 4);
    format.copy(cluster, at + 8);
    // Extension data is padded to a multiple of 8 bytes.
    at += 8 + Math.ceil(format.length / 8) * 8;
    // The end mark: type 0, length 0 (already zeros).
    at += 8;
    name.copy(cluster, at);
    cluster.writeBigUInt64BE(BigInt(at), 8);
    cluster.writeUInt32BE(name.length, 16);
  } else if (options.backingFormat !== undefined) {
    throw new Error("a backing format without a backing file");
  }
  return cluster;
}
