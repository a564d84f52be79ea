// The disk the suite moves: a sparse raw file on tmpfs whose data runs alternate with holes of the same
// length, the runs alternating compressible text (word salad and log-like lines) and random bytes. The raw
// file is the `cat` baseline's input and the source of the XVA the VM is imported from.
import { randomFillSync } from "node:crypto";
import { closeSync, ftruncateSync, openSync, writeSync } from "node:fs";
import { open } from "node:fs/promises";
import type { Readable } from "node:stream";
import { isZeroBlock, XVA_BLOCK_SIZE } from "../../server/xva/format.ts";
import { formatOvaXml } from "../../server/xva/ova-xml.ts";
import { type XvaBlock, writeXva } from "../../server/xva/writer.ts";
import { vmObjects } from "../../server/toolstack/transfer/testing.ts";
import { MiB } from "../measure.ts";
import { type DiskLayout, RUNS_PER_PERIOD } from "./sizes.ts";

const WORDS = (
  "the quick brown fox jumps over lazy dog virtual machine disk block export import storage volume snapshot " +
  "clone pool host network xapi kernel memory page cache scheduler interrupt driver firmware boot loader"
).split(" ");
const LEVELS = ["INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"];

/**
 * 16 MiB of text, made once: a text block is a 1 MiB slice of it at a block-dependent offset. The tile is
 * longer than the match window of gzip (32 KiB) and of zstd -3 (a few MiB), so its repeats are not found.
 */
function textTile(): Buffer {
  const tile = Buffer.allocUnsafe(16 * MiB + XVA_BLOCK_SIZE);
  let state = 0x9e3779b9;
  const next = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return state >>> 0;
  };
  let at = 0;
  let second = 0;
  while (at < tile.length) {
    let line: string;
    if (next() % 2 === 0) {
      // A log-like line: mostly the same shape, changing numbers.
      second += next() % 3;
      const stamp = `2026-11-25T${String(10 + ((second / 3600) | 0) % 14).padStart(2, "0")}:${String(((second / 60) | 0) % 60).padStart(2, "0")}:${String(second % 60).padStart(2, "0")}.${String(next() % 1000).padStart(3, "0")}Z`;
      line = `${stamp} host-${next() % 32} storage[${1000 + (next() % 9000)}]: ${LEVELS[next() % LEVELS.length]} volume ${(next() % 0xffffff).toString(16)} read ${4096 << next() % 6} bytes at ${next() % 1e9} in ${(next() % 1000) / 100} ms\n`;
    } else {
      const words: string[] = [];
      for (let n = 6 + (next() % 12); n > 0; n--) words.push(WORDS[next() % WORDS.length]!);
      line = `${words.join(" ")}.\n`;
    }
    at += tile.write(line, at, "latin1");
  }
  return tile;
}

/** What lies at run `run` of the disk: text, random or a hole. */
function runKind(run: number): "text" | "random" | "hole" {
  const phase = run % RUNS_PER_PERIOD;
  return phase === 0 ? "text" : phase === 2 ? "random" : "hole";
}

/** Writes the disk as a sparse raw file (holes never written); returns the bytes of data written. */
export function writeRawDisk(path: string, disk: DiskLayout): number {
  const tile = textTile();
  const fd = openSync(path, "w");
  const chunk = Buffer.allocUnsafe(8 * MiB);
  let written = 0;
  try {
    ftruncateSync(fd, disk.size);
    for (let run = 0; run * disk.run < disk.size; run++) {
      const kind = runKind(run);
      if (kind === "hole") continue;
      for (let offset = 0; offset < disk.run; offset += chunk.length) {
        const piece = chunk.subarray(0, Math.min(chunk.length, disk.run - offset));
        const position = run * disk.run + offset;
        if (kind === "random") randomFillSync(piece);
        else
          for (let at = 0; at < piece.length; at += MiB) {
            const start = ((position + at) / MiB) * 7919 * 1021 % (16 * MiB);
            tile.copy(piece, at, start, start + Math.min(MiB, piece.length - at));
          }
        writeSync(fd, piece, 0, piece.length, position);
        written += piece.length;
      }
    }
  } finally {
    closeSync(fd);
  }
  return written;
}

/** The raw file's blocks as an XVA's: zero blocks left out, except the first and the last. */
async function* rawBlocks(path: string, size: number): AsyncGenerator<XvaBlock> {
  const file = await open(path, "r");
  try {
    const count = Math.ceil(size / XVA_BLOCK_SIZE);
    for (let index = 0; index < count; index++) {
      // A fresh buffer per block: the writer holds it until the tar stream has taken it.
      const data = Buffer.allocUnsafe(Math.min(XVA_BLOCK_SIZE, size - index * XVA_BLOCK_SIZE));
      const { bytesRead } = await file.read(data, 0, data.length, index * XVA_BLOCK_SIZE);
      if (bytesRead !== data.length) throw new Error(`${path}: short read at block ${index}`);
      if (index === 0 || index === count - 1 || !isZeroBlock(data)) yield { index, data };
    }
  } finally {
    await file.close();
  }
}

/** An XVA of a one-disk VM whose disk is the raw file (as XenServer writes one: xxhash checksums). */
export function xvaFromRaw(path: string, disk: DiskLayout, name: string): Readable {
  const { objects, version } = vmObjects({ name, disks: [{ size: disk.size, blocks: new Map(), name: `${name} disk` }] });
  const vdi = objects.find((o) => o.class === "VDI" && o.snapshot.name_label === `${name} disk`)!;
  return writeXva({ ovaXml: formatOvaXml({ version, objects }), disks: [{ ref: vdi.id, blocks: rawBlocks(path, disk.size) }], checksum: "xxhash" });
}
