// Fuzz target (issue 23): the VHD reader on images Debian's qemu-img writes (dynamic, fixed), their metadata
// mutated (bytes of the footer copy, the header, the BAT and the footer at the end overwritten; the file cut).
// Each case reads whole or is refused as a DiskImageError, never a TypeError, a RangeError or a hang; every
// run lies inside the disk it states.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { after, before, test } from "node:test";
import fc from "fast-check";
import { fuzz, type FuzzBudget } from "../fuzz-testing.ts";
import { ByteReader } from "./byte-reader.ts";
import { readsOrRefuses } from "./testing.ts";
import { openVhd } from "./vhd.ts";

const BUDGET: FuzzBudget = { slice: 100, full: 5_000, fullSeconds: 30, caseMs: 10_000 };
const MiB = 1024 * 1024;
const HEAD_BYTES = 8 * 1024;

const dir = mkdtempSync(join(tmpdir(), "hangar-vhd-fuzz-"));
after(() => rmSync(dir, { recursive: true, force: true }));

let seeds: Buffer[];
before(() => {
  const raw = Buffer.alloc(6 * MiB);
  for (let i = 0; i < MiB; i++) raw[i] = i & 0xff;
  raw.fill(7, 5 * MiB, 5 * MiB + 4096);
  writeFileSync(join(dir, "disk.raw"), raw);
  seeds = ["subformat=dynamic", "subformat=fixed", "subformat=dynamic,force_size=on"].map((options, n) => {
    const image = join(dir, `${n}.vhd`);
    execFileSync("qemu-img", ["convert", "-f", "raw", "-O", "vpc", "-o", options, join(dir, "disk.raw"), image]);
    return readFileSync(image);
  });
});

/** Where the metadata lies: the first 4 KiB (footer copy, header, BAT) and the last sector (footer). */
const mutation = fc.record({
  seed: fc.nat(),
  writes: fc.array(fc.record({ tail: fc.boolean(), at: fc.nat({ max: 4095 }), bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }) }), { maxLength: 6 }),
  cut: fc.option(fc.nat(), { nil: undefined }),
  lengthKnown: fc.boolean(),
  piece: fc.constantFrom(1, 511, 4096, 64 * 1024),
});

test("VHD reader: mutated qemu-img images read whole or are refused cleanly, within the bound", async (t) => {
  await fuzz(t, "vhd reader", BUDGET, mutation, async ({ seed, writes, cut, lengthKnown, piece }) => {
    const image = Buffer.from(seeds[seed % seeds.length]!);
    for (const write of writes) {
      const at = write.tail ? image.length - 512 + (write.at % 512) : write.at;
      Buffer.from(write.bytes).copy(image, at);
    }
    const bytes = cut === undefined ? image : image.subarray(0, cut % image.length);
    // Tiny pieces where the metadata is (where a parser's state breaks), then the network's usual ones.
    const pieces: Buffer[] = [];
    for (let at = 0; at < bytes.length; ) {
      const size = at < HEAD_BYTES ? piece : 64 * 1024;
      pieces.push(bytes.subarray(at, at + size));
      at += size;
    }
    await readsOrRefuses(() => openVhd(new ByteReader(Readable.from(pieces)), lengthKnown ? bytes.length : undefined));
  });
});
