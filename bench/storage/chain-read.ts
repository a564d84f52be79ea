// Row group 4: sequential read through a 3-layer chain against a flat volume holding the same bytes, both
// served by our NBD server and read by nbdcopy. The chain: a full base layer, then two snapshots whose top
// layers each overwrite every third stripe. With 64 KiB stripes (one cluster: the hard case, as left by
// scattered small writes) consecutive clusters come from three different layers; with 1 MiB stripes most
// read requests are served by one layer. The second layout tells the cost of looking through layers
// apart from the cost of splitting requests into more reads.
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { openVolumeData, snapshotVolume } from "../../server/plugins/filesr/index.ts";
import { disconnectSr } from "../../server/plugins/filesr/db.ts";
import { formatSize } from "../measure.ts";
import type { Row } from "../table.ts";
import type { Scratch } from "../workspace.ts";
import { contentAt, writeVolume, type Extent } from "./content.ts";
import { measureTransfers, serveOurs, transferNote, type NbdExport } from "./nbd-export.ts";
import type { StorageSizes } from "./sizes.ts";
import { createBenchSr, createBenchVolume } from "./sr.ts";

const TARGET = 0.8;
const CLUSTER = 64 * 1024;
const LAYERS = 3;
const STRIPES = [CLUSTER, 16 * CLUSTER];
type Contender = "chain" | "flat";
/** Bytes compared between the two volumes before measuring (at the start and at the end). */
const CHECK_BYTES = 4 * 1024 * 1024;

/** Which layer's bytes stripe `index` shows: 0 is the base, 1 and 2 the later layers. */
const layerOf = (index: number) => index % LAYERS;

/** Every stripe whose final bytes come from `layer`. */
function stripesOf(layer: number, size: number, stripe: number): Extent[] {
  const extents: Extent[] = [];
  for (let index = layer; index * stripe < size; index += LAYERS) {
    extents.push({ offset: index * stripe, length: Math.min(stripe, size - index * stripe) });
  }
  return extents;
}

/** The bytes the chain shows at [offset, offset+length), assembled stripe by stripe. */
function finalContent(stripe: number) {
  return (offset: number, length: number): Buffer => {
    const out = Buffer.allocUnsafe(length);
    for (let at = 0; at < length; ) {
      const index = Math.floor((offset + at) / stripe);
      const count = Math.min(length - at, (index + 1) * stripe - (offset + at));
      contentAt(offset + at, count, layerOf(index)).copy(out, at);
      at += count;
    }
    return out;
  };
}

export async function benchChainRead(scratch: Scratch, sizes: StorageSizes): Promise<Row[]> {
  const rows: Row[] = [];
  // One layout at a time, its files gone before the next: the two would take 5 GiB of memory at full scale.
  for (const stripe of STRIPES) {
    const dir = mkdtempSync(join(scratch.fast, `stripe-${stripe}-`));
    const sr = await createBenchSr(scratch, dir, "sr");
    try {
      rows.push(await benchLayout(dir, sr, stripe, sizes));
    } finally {
      disconnectSr(sr);
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return rows;
}

async function benchLayout(dir: string, sr: string, stripe: number, sizes: StorageSizes): Promise<Row> {
  const size = sizes.chainBytes;
  const chain = await createBenchVolume(sr, "chain", size);
  const flat = await createBenchVolume(sr, "flat", size);
  const host = process.env.HANGAR_HOST_UUID;
  await writeVolume(sr, chain, [{ offset: 0, length: size }], (offset, length) => contentAt(offset, length, 0));
  for (let layer = 1; layer < LAYERS; layer++) {
    await snapshotVolume(sr, chain, { host });
    await writeVolume(sr, chain, stripesOf(layer, size, stripe), (offset, length) => contentAt(offset, length, layer));
  }
  await writeVolume(sr, flat, [{ offset: 0, length: size }], finalContent(stripe));
  await expectSameBytes(sr, chain, flat, size);

  const exports: Record<Contender, NbdExport> = {
    chain: await serveOurs(dir, "chain", { sr, key: chain }, { readOnly: true }),
    flat: await serveOurs(dir, "flat", { sr, key: flat }, { readOnly: true }),
  };
  try {
    const measured = await measureTransfers(exports, (contender) => ["--connections=1", exports[contender].uri, "null:"], size, sizes.runs);
    const ratio = measured.chain.speed.median / measured.flat.speed.median;
    return {
      measure: `seq read ${formatSize(size)}, ${LAYERS}-layer chain, layers alternate every ${formatSize(stripe)}, our NBD server`,
      ours: `${measured.chain.speed.median.toFixed(0)} MB/s`,
      baseline: `${measured.flat.speed.median.toFixed(0)} MB/s flat volume, same bytes`,
      ratio,
      target: `≥ ${TARGET}×`,
      met: ratio >= TARGET,
      note: transferNote(measured.chain, measured.flat),
    };
  } finally {
    await Promise.all(Object.values(exports).map((e) => e.stop()));
  }
}

/** The comparison is only fair if both volumes hold the same bytes: check the start and the end. */
async function expectSameBytes(sr: string, a: string, b: string, size: number): Promise<void> {
  const [left, right] = await Promise.all([openVolumeData(sr, a, { readOnly: true }), openVolumeData(sr, b, { readOnly: true })]);
  try {
    const length = Math.min(CHECK_BYTES, size);
    for (const offset of [0, size - length]) {
      const x = Buffer.alloc(length);
      const y = Buffer.alloc(length);
      await Promise.all([left.read(offset, x), right.read(offset, y)]);
      if (!x.equals(y)) throw new Error(`chain and flat volumes differ in bytes ${offset}..${offset + length}: the bench set-up is wrong`);
    }
  } finally {
    await Promise.all([left.close(), right.close()]);
  }
}
