// Fuzz target (issue 23): the VMDK reader on images Debian's qemu-img writes (monolithicSparse with 4 KiB and
// 64 KiB grains, streamOptimized), their metadata mutated (header, descriptor, grain directory and table, the
// first grain or marker overwritten; the file cut). Each case reads whole or is refused as a DiskImageError, never
// a TypeError, a RangeError or a hang; every run lies inside the disk it states, and no spill file is left.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { after, before, test } from "node:test";
import fc from "fast-check";
import { fuzz, type FuzzBudget } from "../fuzz-testing.ts";
import { ByteReader } from "./byte-reader.ts";
import { readsOrRefuses } from "./testing.ts";
import { openVmdk } from "./vmdk.ts";

const BUDGET: FuzzBudget = { slice: 100, full: 5_000, fullSeconds: 30, caseMs: 10_000 };
const MiB = 1024 * 1024;
const SECTOR = 512;

const dir = mkdtempSync(join(tmpdir(), "hangar-vmdk-fuzz-"));
const spillDir = mkdtempSync(join(tmpdir(), "hangar-vmdk-fuzz-spill-"));
after(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(spillDir, { recursive: true, force: true });
});

/** Each seed and where mutations land: the header, the descriptor, the directory, its first table, the first grain. */
let seeds: Array<{ bytes: Buffer; places: number[] }>;
before(() => {
  const raw = Buffer.alloc(3 * MiB + 3 * SECTOR);
  for (let i = 0; i < MiB; i++) raw[i] = i & 0xff;
  Buffer.from("vmdk ".repeat(50_000)).copy(raw, 2 * MiB);
  writeFileSync(join(dir, "disk.raw"), raw);
  const options = [["-o", "subformat=monolithicSparse"], ["-o", "subformat=streamOptimized"]];
  seeds = options.map((option, n) => {
    const image = join(dir, `${n}.vmdk`);
    execFileSync("qemu-img", ["convert", "-f", "raw", "-O", "vmdk", ...option, join(dir, "disk.raw"), image]);
    const bytes = readFileSync(image);
    const gd = Number(bytes.readBigUInt64LE(56)) * SECTOR;
    const gt = bytes.readUInt32LE(gd) * SECTOR;
    return { bytes, places: [0, SECTOR, gd, gt, Number(bytes.readBigUInt64LE(64)) * SECTOR] };
  });
});

const mutation = fc.record({
  seed: fc.nat(),
  writes: fc.array(fc.record({ place: fc.nat({ max: 4 }), at: fc.nat({ max: 511 }), bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }) }), { maxLength: 6 }),
  cut: fc.option(fc.nat(), { nil: undefined }),
  lengthKnown: fc.boolean(),
  piece: fc.constantFrom(509, 4096, 64 * 1024),
});

test("VMDK reader: mutated qemu-img images read whole or are refused cleanly, within the bound", async (t) => {
  await fuzz(t, "vmdk reader", BUDGET, mutation, async ({ seed, writes, cut, lengthKnown, piece }) => {
    const { bytes: original, places } = seeds[seed % seeds.length]!;
    const image = Buffer.from(original);
    for (const write of writes) Buffer.from(write.bytes).copy(image, Math.min(image.length - 1, places[write.place]! + write.at));
    const bytes = cut === undefined ? image : image.subarray(0, cut % image.length);
    const pieces = Array.from({ length: Math.ceil(bytes.length / piece) }, (_, i) => bytes.subarray(i * piece, (i + 1) * piece));
    await readsOrRefuses(() => openVmdk(new ByteReader(Readable.from(pieces)), { length: lengthKnown ? bytes.length : undefined, spillDir }));
    assert.deepEqual(readdirSync(spillDir), [], "a spill file was left");
  });
});
