// Fuzz target (issue 23): the qcow2 reader on images Debian's qemu-img writes (v2, v3, compressed), their
// metadata mutated (header, L1 and L2 tables overwritten; the file cut). Each case reads whole or is refused as a
// DiskImageError, never a TypeError, a RangeError or a hang; every run lies inside the disk it states, and no
// spill file is left.
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
import { openQcow2 } from "./qcow2.ts";

const BUDGET: FuzzBudget = { slice: 100, full: 5_000, fullSeconds: 30, caseMs: 10_000 };
const MiB = 1024 * 1024;
const HEAD_BYTES = 1024;

const dir = mkdtempSync(join(tmpdir(), "hangar-qcow2-fuzz-"));
const spillDir = mkdtempSync(join(tmpdir(), "hangar-qcow2-fuzz-spill-"));
after(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(spillDir, { recursive: true, force: true });
});

/** Each seed and where its tables lie (the L1 table, the first L2 table), where mutations land. */
let seeds: Array<{ bytes: Buffer; tables: number[] }>;
before(() => {
  const raw = Buffer.alloc(3 * MiB);
  for (let i = 0; i < MiB; i++) raw[i] = i & 0xff;
  Buffer.from("qcow2 ".repeat(50_000)).copy(raw, 2 * MiB);
  writeFileSync(join(dir, "disk.raw"), raw);
  seeds = [["-o", "compat=0.10"], ["-o", "compat=1.1"], ["-c"], ["-o", "cluster_size=4096"]].map((options, n) => {
    const image = join(dir, `${n}.qcow2`);
    execFileSync("qemu-img", ["convert", "-f", "raw", "-O", "qcow2", ...options, join(dir, "disk.raw"), image]);
    const bytes = readFileSync(image);
    const l1 = Number(bytes.readBigUInt64BE(40));
    const l2 = Number(bytes.readBigUInt64BE(l1) & 0x00fffffffffffe00n);
    return { bytes, tables: [0, l1, l2] };
  });
});

const mutation = fc.record({
  seed: fc.nat(),
  writes: fc.array(fc.record({ table: fc.nat({ max: 2 }), at: fc.nat({ max: 511 }), bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }) }), { maxLength: 6 }),
  cut: fc.option(fc.nat(), { nil: undefined }),
  lengthKnown: fc.boolean(),
  piece: fc.constantFrom(509, 4096, 64 * 1024),
});

test("qcow2 reader: mutated qemu-img images read whole or are refused cleanly, within the bound", async (t) => {
  await fuzz(t, "qcow2 reader", BUDGET, mutation, async ({ seed, writes, cut, lengthKnown, piece }) => {
    const { bytes: original, tables } = seeds[seed % seeds.length]!;
    const image = Buffer.from(original);
    for (const write of writes) Buffer.from(write.bytes).copy(image, Math.min(image.length - 1, tables[write.table]! + write.at));
    const bytes = cut === undefined ? image : image.subarray(0, cut % image.length);
    // Tiny pieces where the header is (where a parser's state breaks), then the given size.
    const pieces: Buffer[] = [];
    for (let at = 0; at < bytes.length; ) {
      const size = at < HEAD_BYTES ? 1 : piece;
      pieces.push(bytes.subarray(at, at + size));
      at += size;
    }
    await readsOrRefuses(() => openQcow2(new ByteReader(Readable.from(pieces)), { length: lengthKnown ? bytes.length : undefined, spillDir }));
    assert.deepEqual(readdirSync(spillDir), [], "a spill file was left");
  });
});
