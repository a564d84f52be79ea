// The VHD reader against images Debian's qemu-img writes (dynamic and fixed), applied over a target that holds
// garbage (no pre-zeroed target needed), and against the malformations a stream can bring.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createReadStream, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { after, describe, test } from "node:test";
import { ByteReader } from "./byte-reader.ts";
import { DiskImageError } from "./image.ts";
import { openVhd } from "./vhd.ts";
import { applyRuns, sampleDisk } from "./testing.ts";

const MiB = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), "hangar-vhd-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function qemuImage(raw: Buffer, name: string, options: string): string {
  const source = join(dir, `${name}.raw`);
  writeFileSync(source, raw);
  const image = join(dir, `${name}.vhd`);
  execFileSync("qemu-img", ["convert", "-f", "raw", "-O", "vpc", "-o", options, source, image]);
  return image;
}

const open = (bytes: Buffer | string, length?: number) =>
  openVhd(new ByteReader(typeof bytes === "string" ? createReadStream(bytes) : Readable.from([bytes])), length ?? (typeof bytes === "string" ? statSync(bytes).size : bytes.length));

describe("VHD images read as a stream", () => {
  const raw = sampleDisk();
  const dynamic = qemuImage(raw, "dynamic", "subformat=dynamic,force_size=on");
  const fixed = qemuImage(raw, "fixed", "subformat=fixed,force_size=on");

  test("a dynamic VHD from qemu-img: the same bytes, blocks it leaves out zeroed over a target that held data", async () => {
    const image = await open(dynamic);
    assert.equal(image.virtualSize, raw.length);
    assert.equal(image.differencing, false);
    assert.ok((await applyRuns(image)).equals(raw));
  });

  test("a dynamic VHD whose length the request does not say", async () => {
    const image = await openVhd(new ByteReader(createReadStream(dynamic)), undefined);
    assert.ok((await applyRuns(image)).equals(raw));
  });

  test("a fixed VHD from qemu-img: the same bytes, its footer checked at the end", async () => {
    const image = await open(fixed);
    assert.equal(image.virtualSize, raw.length);
    assert.ok((await applyRuns(image)).equals(raw));
  });

  const refusal = async (bytes: Buffer, pattern: RegExp, length = bytes.length) => {
    const error = await (async () => {
      const image = await open(bytes, length);
      for await (const run of image.runs) void run;
    })().then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(error instanceof DiskImageError, `refused as a malformed image: ${String(error)}`);
    assert.match(error.message, pattern);
  };

  test("a bad footer checksum, a BAT entry past the file, overlapping blocks, truncation: refused, naming the byte", async () => {
    const good = readFileSync(dynamic);
    const badSum = Buffer.from(good);
    badSum[64] = badSum[64]! ^ 0xff;
    await refusal(badSum, /bad footer checksum.*\(at byte 64\)/);
    const header = Number(good.readBigUInt64BE(16));
    const table = Number(good.readBigUInt64BE(header + 16));
    const past = Buffer.from(good);
    past.writeUInt32BE(0x7fffffff, table);
    await refusal(past, new RegExp(`BAT entry 0 points at a block ending at byte \\d+, past the file's data .*\\(at byte ${table}\\)`));
    const overlap = Buffer.from(good);
    overlap.writeUInt32BE(good.readUInt32BE(table) + 1, table + 4);
    await refusal(overlap, /overlapping blocks/);
    const cut = good.subarray(0, good.length - 3 * MiB);
    await refusal(cut, /the file ends inside the data of block \d+ .*\(at byte \d+\)|past the file's data/, cut.length);
    await refusal(cut, /the file ends inside the data of block \d+ \(\d+ of its \d+ bytes\) \(at byte \d+\)/, good.length);
  });

  test("no VHD at all: a file whose size is no fixed VHD's, or whose last sector is no footer", async () => {
    await refusal(Buffer.alloc(1000, 1), /no fixed VHD's/);
    await refusal(Buffer.alloc(4096, 1), /no VHD footer at the end of the file.*\(at byte 3584\)/);
  });
});
