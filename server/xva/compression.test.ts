// Parallel compression against the real decoders (pigz, gzip, zstd), the real encoders' output through
// decompressing(), detection of tiny and plain inputs, clear errors for truncated streams, and backpressure.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { compressOnPool } from "./compression-pool.ts";
import { createParallelCompressor, decompressing, sniffCompression, type Compression } from "./compression.ts";

const MiB = 1024 * 1024;
const WORDS = "the quick brown fox jumps over lazy dog virtual machine disk block export import storage volume snapshot clone pool host network xapi".split(" ");

/** Word salad from a small PRNG: compresses about 3:1, like logs or text files on a disk. */
function text(size: number, seed: number): Buffer {
  const out = Buffer.allocUnsafe(size);
  let state = seed >>> 0 || 1;
  let at = 0;
  while (at < size) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    const word = WORDS[(state >>> 0) % WORDS.length]!;
    at += out.write(word, at, "latin1");
    if (at < size) out[at++] = (state & 0xf0) === 0 ? 0x0a : 0x20;
  }
  return out;
}

/** Half text, half random, in alternating 1 MiB blocks. */
function mixed(size: number): Buffer {
  const parts: Buffer[] = [];
  for (let at = 0, i = 0; at < size; at += MiB, i++) {
    const n = Math.min(MiB, size - at);
    parts.push(i % 2 === 0 ? text(n, i + 1) : randomBytes(n));
  }
  return Buffer.concat(parts);
}

const sha = (data: Uint8Array) => createHash("sha256").update(data).digest("hex");

/** A source that hands out `data` in pieces of an odd size, so chunk boundaries fall mid-piece. */
function piecewise(data: Buffer, piece = 100_003): Readable {
  let at = 0;
  return new Readable({
    read() {
      if (at >= data.byteLength) return void this.push(null);
      this.push(data.subarray(at, at + piece));
      at += piece;
    },
  });
}

async function collect(stream: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

async function compress(kind: Compression, data: Buffer, options?: Parameters<typeof createParallelCompressor>[1]): Promise<Buffer> {
  const compressor = createParallelCompressor(kind, options);
  const [out] = await Promise.all([collect(compressor), pipeline(piecewise(data), compressor)]);
  return out;
}

/** Streams `input` through a real command's stdin and hashes its stdout as it comes. */
async function runTool(command: string, args: string[], input: Buffer | Readable): Promise<{ hash: string; size: number; code: number | null; stderr: string }> {
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
  const hash = createHash("sha256");
  let size = 0;
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  child.stdout.on("data", (chunk: Buffer) => {
    hash.update(chunk);
    size += chunk.byteLength;
  });
  const exited = once(child, "close") as Promise<[number | null]>;
  await pipeline(Buffer.isBuffer(input) ? piecewise(input, 256 * 1024) : input, child.stdin).catch(() => {}); // a decoder that fails early closes its stdin: its exit code tells
  const [code] = await exited;
  return { hash: hash.digest("hex"), size, code, stderr };
}

async function decodeOurs(compressed: Buffer): Promise<{ compression: Compression | null; data: Buffer }> {
  const { compression, stream } = await decompressing(piecewise(compressed, 77_777));
  return { compression, data: await collect(stream) };
}

describe("parallel compression, decoded by the real tools", () => {
  const data = mixed(48 * MiB);
  const expected = sha(data);

  for (const [kind, tools] of [
    ["gzip", [["pigz", ["-dc"]], ["gzip", ["-dc"]]]],
    ["zstd", [["zstd", ["-dcq"]]]],
  ] as const) {
    test(`${kind}: 48 MiB of mixed data streamed into ${tools.map(([t]) => t).join(", ")} and decompressing() comes back identical`, async () => {
      // Straight from the compressor into the tool's stdin, keeping a copy for the other decoders.
      const compressor = createParallelCompressor(kind);
      const copy: Buffer[] = [];
      compressor.on("data", (chunk: Buffer) => copy.push(chunk));
      const [first, ...others] = tools;
      const [streamed] = await Promise.all([runTool(first[0], [...first[1]], compressor), pipeline(piecewise(data), compressor)]);
      assert.equal(streamed.code, 0, streamed.stderr);
      assert.equal(streamed.size, data.byteLength);
      assert.equal(streamed.hash, expected);

      const compressed = Buffer.concat(copy);
      assert.equal(sniffCompression(compressed), kind);
      // A real saving on the text half.
      assert.ok(compressed.byteLength < data.byteLength * 0.75, `${compressed.byteLength} bytes`);
      for (const [tool, args] of others) {
        const result = await runTool(tool, [...args], compressed);
        assert.equal(result.code, 0, result.stderr);
        assert.equal(result.hash, expected, tool);
      }
      const ours = await decodeOurs(compressed);
      assert.equal(ours.compression, kind);
      assert.equal(ours.data.byteLength, data.byteLength);
      assert.equal(sha(ours.data), expected);
    });
  }

  test("many small chunks on more threads than cores still come out in input order", async () => {
    const part = data.subarray(0, 12 * MiB);
    for (const kind of ["gzip", "zstd"] as const) {
      const compressed = await compress(kind, part, { chunkSize: 64 * 1024, threads: 4, level: kind === "gzip" ? 6 : 1 });
      const result = await runTool(kind === "gzip" ? "gzip" : "zstd", ["-dcq"], compressed);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.hash, sha(part), kind);
    }
  });

  test("the data is really cut into independent members, one per chunk", async () => {
    // Each gzip member begins with 1F 8B 08 00 (deflate, no flags); 9 MiB at 1 MiB chunks gives 9 of them.
    const compressed = await compress("gzip", data.subarray(0, 9 * MiB), { chunkSize: MiB });
    let members = 0;
    for (let at = compressed.indexOf("1f8b0800", 0, "hex"); at >= 0; at = compressed.indexOf("1f8b0800", at + 1, "hex")) members++;
    assert.ok(members >= 9, `${members} member headers`);
  });

  test("zstd: one frame per chunk from contexts reused across chunks, each whole and checksummed", async () => {
    // 9 MiB at 1 MiB chunks on 2 threads: 9 frames from at most 4 contexts, so each context ends several frames.
    const input = data.subarray(0, 9 * MiB);
    const compressed = await compress("zstd", input, { chunkSize: MiB, threads: 2 });
    let frames = 0;
    for (let at = compressed.indexOf("28b52ffd", 0, "hex"); at >= 0; at = compressed.indexOf("28b52ffd", at + 1, "hex")) frames++;
    assert.ok(frames >= 9, `${frames} frame headers`);
    // The zstd CLI checks every frame's content checksum.
    const decoded = await runTool("zstd", ["-d", "-c", "-q"], compressed);
    assert.equal(decoded.code, 0, decoded.stderr);
    assert.equal(decoded.hash, createHash("sha256").update(input).digest("hex"));
  });
});

describe("decompressing()", () => {
  const data = mixed(6 * MiB);

  for (const [tool, args, kind] of [
    ["pigz", ["-1", "-c"], "gzip"],
    ["gzip", ["-1", "-c"], "gzip"],
    ["zstd", ["-3", "-c", "-q"], "zstd"],
    ["zstd", ["-T0", "-3", "-c", "-q"], "zstd"],
  ] as const) {
    test(`reads ${tool} ${args.join(" ")} output`, async () => {
      const child = spawn(tool, [...args], { stdio: ["pipe", "pipe", "inherit"] });
      const [compressed] = await Promise.all([collect(child.stdout), pipeline(piecewise(data), child.stdin)]);
      const ours = await decodeOurs(compressed);
      assert.equal(ours.compression, kind);
      assert.equal(sha(ours.data), sha(data));
    });
  }

  test("reads several streams glued together, as the compressor writes them", async () => {
    const a = text(300_000, 7);
    const b = randomBytes(200_000);
    for (const kind of ["gzip", "zstd"] as const) {
      const glued = Buffer.concat([await compress(kind, a), await compress(kind, b)]);
      const ours = await decodeOurs(glued);
      assert.equal(ours.compression, kind);
      assert.ok(ours.data.equals(Buffer.concat([a, b])), kind);
    }
  });

  test("zstd: frames of any size, several in one read, with or without checksums, skippable frames between", async () => {
    // Node's zstd decoder alone loses what follows a frame in the same write unless the frame's output
    // ended on a 16 KiB boundary: chunks of 100 000 bytes never do.
    const part = data.subarray(0, 3 * MiB);
    const ours = await compress("zstd", part, { chunkSize: 100_000 });
    const whole = await decompressing(Readable.from([ours]));
    assert.ok((await collect(whole.stream)).equals(part), "100 000-byte frames in a single read");

    const zstdOf = async (input: Buffer, ...args: string[]) => {
      const child = spawn("zstd", ["-c", "-q", ...args], { stdio: ["pipe", "pipe", "inherit"] });
      const [out] = await Promise.all([collect(child.stdout), pipeline(Readable.from([input]), child.stdin)]);
      return out;
    };
    const a = text(123_457, 5);
    const b = randomBytes(70_001);
    const skippable = Buffer.concat([Buffer.from([0x5e, 0x2a, 0x4d, 0x18]), Buffer.from([5, 0, 0, 0]), Buffer.from("hello"), Buffer.from([0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0])]);
    const glued = Buffer.concat([await zstdOf(a, "--no-check", "-19"), skippable, await zstdOf(Buffer.alloc(0)), await zstdOf(b, "--no-content-size"), await zstdOf(a, "-1")]);
    for (const piece of [glued.byteLength, 4096, 3]) {
      const { compression, stream } = await decompressing(piecewise(glued, piece));
      assert.equal(compression, "zstd");
      assert.ok((await collect(stream)).equals(Buffer.concat([a, b, a])), `pieces of ${piece}`);
    }
    const trailing = await decompressing(Readable.from([Buffer.concat([glued, Buffer.from("garbage!")])]));
    await assert.rejects(collect(trailing.stream), /not a valid zstd stream: unknown frame magic 67617262 at byte/);
  });

  test("plain data passes unchanged, compression null", async () => {
    // A plain XVA begins with the tar header of ova.xml.
    const plain = Buffer.concat([Buffer.from("ova.xml\0"), data]);
    const ours = await decodeOurs(plain);
    assert.equal(ours.compression, null);
    assert.ok(ours.data.equals(plain));
  });

  test("tiny inputs: 0, 1, 2 and 3 bytes", async () => {
    for (const bytes of [[], [0x1f], [0x41], [0x28, 0xb5, 0x2f], [0x61, 0x62, 0x63]]) {
      const ours = await decodeOurs(Buffer.from(bytes));
      assert.equal(ours.compression, null, `${bytes}`);
      assert.deepEqual([...ours.data], bytes);
    }
    // Two bytes that say gzip and nothing after them: gzip, and a clear error.
    const { compression, stream } = await decompressing(Readable.from([Buffer.from([0x1f, 0x8b])]));
    assert.equal(compression, "gzip");
    await assert.rejects(collect(stream), /not a valid gzip stream: unexpected end of file/);
  });

  test("a source handing out one byte at a time is peeked without losing any", async () => {
    const compressed = await compress("zstd", data.subarray(0, 100_000));
    const ours = await decodeOurs(Buffer.from(compressed));
    assert.equal(ours.compression, "zstd");
    const { compression, stream } = await decompressing(piecewise(compressed, 1));
    assert.equal(compression, "zstd");
    assert.ok((await collect(stream)).equals(data.subarray(0, 100_000)));
  });

  for (const kind of ["gzip", "zstd"] as const) {
    test(`a truncated ${kind} stream fails with a clear error`, async () => {
      const compressed = await compress(kind, data.subarray(0, 2 * MiB), { chunkSize: MiB });
      for (const cut of [compressed.byteLength - 1, Math.floor(compressed.byteLength / 2), 10]) {
        const { compression, stream } = await decompressing(piecewise(compressed.subarray(0, cut)));
        assert.equal(compression, kind);
        await assert.rejects(collect(stream), new RegExp(`^Error: not a valid ${kind} stream: `), `cut at ${cut}`);
      }
    });

    test(`${kind}: a failing source fails the decompressed stream, and abandoning it stops the source`, async () => {
      const compressed = await compress(kind, data.subarray(0, MiB));
      let sent = false;
      const failing = new Readable({
        read() {
          if (sent) return void this.destroy(new Error("disk on fire"));
          sent = true;
          this.push(compressed.subarray(0, 1000));
        },
      });
      const { stream } = await decompressing(failing);
      await assert.rejects(collect(stream), /^Error: disk on fire$/);

      const source = piecewise(compressed, 1000);
      const abandoned = await decompressing(source);
      for await (const _chunk of abandoned.stream) break;
      await sleep(10);
      assert.ok(source.destroyed, "the source is destroyed with the stream that reads it");
    });
  }

  test("a source that fails before its first bytes rejects", async () => {
    const failing = new Readable({ read: () => void failing.destroy(new Error("no such file")) });
    await assert.rejects(decompressing(failing), /no such file/);
  });
});

describe("createParallelCompressor()", () => {
  for (const kind of ["gzip", "zstd"] as const) {
    test(`${kind}: empty input gives a valid empty stream, one byte round-trips`, async () => {
      for (const input of [Buffer.alloc(0), Buffer.from("x")]) {
        const compressed = await compress(kind, input);
        assert.equal(sniffCompression(compressed), kind);
        const result = await runTool(kind, ["-dcq"], compressed);
        assert.equal(result.code, 0, result.stderr);
        assert.equal(result.hash, sha(input));
        assert.ok((await decodeOurs(compressed)).data.equals(input));
      }
    });
  }

  for (const kind of ["gzip", "zstd"] as const) {
    test(`${kind}: each written buffer is reported consumed once, and may be reused at once without changing the output`, async () => {
      const input = randomBytes(5 * MiB + 17);
      const pieces = Array.from({ length: Math.ceil(input.length / 300_000) }, (_, n) => Buffer.from(input.subarray(n * 300_000, (n + 1) * 300_000)));
      const seen = new Set<Buffer>();
      // A pool would hand the buffer to the next read: scribbling on it stands for that.
      const consumed = (chunk: Buffer) => {
        assert.ok(!seen.has(chunk), "reported twice");
        seen.add(chunk);
        chunk.fill(0xa5);
      };
      const compressor = createParallelCompressor(kind, { chunkSize: MiB, consumed });
      const [out] = await Promise.all([collect(compressor), pipeline(Readable.from(pieces), compressor)]);
      assert.equal(seen.size, pieces.length);
      assert.ok((await decodeOurs(out)).data.equals(input));
    });
  }

  test("options are checked", () => {
    assert.throws(() => createParallelCompressor("gzip", { level: 12 }), /level/);
    assert.throws(() => createParallelCompressor("zstd", { threads: 0 }));
    assert.throws(() => createParallelCompressor("zstd", { chunkSize: 1.5 }));
    assert.throws(() => createParallelCompressor("lz4" as Compression));
  });

  test("backpressure: a consumer that does not read stops the source after a bounded amount", async () => {
    // The source could give 1 GiB; 4 MiB chunks, 2 threads: about 4 chunks in flight, a few more buffered.
    const block = text(MiB, 3);
    let given = 0;
    const source = new Readable({
      read() {
        if (given >= 1024 * MiB) return void this.push(null);
        given += block.byteLength;
        this.push(block);
      },
    });
    const compressor = createParallelCompressor("zstd", { threads: 2 });
    source.pipe(compressor);
    // Wait until the source has stood still for a while.
    let last = -1;
    for (let stillFor = 0; stillFor < 600; stillFor = given === last ? stillFor + 100 : 0) {
      last = given;
      await sleep(100);
    }
    assert.ok(given > 8 * MiB, `the source gave ${given / MiB} MiB: the compressor did work ahead`);
    assert.ok(given < 64 * MiB, `the source gave ${given / MiB} MiB to a consumer that reads nothing`);

    // Reading some output lets more input in, and the pipe stays bounded.
    const before = given;
    let read = 0;
    for await (const chunk of compressor) {
      read += (chunk as Buffer).byteLength;
      if (given > before + 32 * MiB) break;
    }
    assert.ok(read > 0 && given > before);
    source.destroy();
  });

  test("compressing never keeps the process alive once the work is done", async () => {
    // The threads hold nothing once the last chunk is out: a script that compresses exits at once, not when
    // they stop for want of work (30 s later).
    const script = `
      import { createParallelCompressor } from ${JSON.stringify(new URL("./compression.ts", import.meta.url).href)};
      const compressor = createParallelCompressor("zstd", { threads: 2, chunkSize: 1 << 20 });
      let n = 0;
      compressor.on("data", (chunk) => (n += chunk.length)).on("end", () => console.log(n));
      compressor.end(Buffer.alloc(8 << 20, 1));
    `;
    const started = Date.now();
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const [code] = (await once(child, "close")) as [number | null];
    assert.equal(code, 0);
    assert.ok(Number(output) > 0, `printed ${JSON.stringify(output)}: the output was all there`);
    assert.ok(Date.now() - started < 20_000, `exited after ${Date.now() - started} ms`);
  });

  test("a compressor destroyed mid-stream errors, and later compressors work", async () => {
    const compressor = createParallelCompressor("gzip", { chunkSize: MiB });
    const failed = once(compressor, "error");
    compressor.write(randomBytes(3 * MiB));
    compressor.destroy(new Error("client went away"));
    const [error] = (await failed) as [Error];
    assert.match(error.message, /client went away/);
    const again = await compress("gzip", Buffer.from("still works"));
    assert.equal((await decodeOurs(again)).data.toString(), "still works");
  });
});

describe("compressOnPool()", () => {
  test("a chunk comes back whole in pieces of at most 128 KiB, its buffer with it; a context that cannot be made fails the chunk, not the thread", async () => {
    const input = randomBytes(3 * MiB + 5);
    const data = Buffer.from(input);
    const { pieces, data: back } = await compressOnPool("zstd", 3, data);
    assert.equal(data.byteLength, 0, "the buffer was transferred, not copied");
    assert.ok(back.equals(input), "the same bytes come back for reuse");
    assert.ok(pieces.length > 1 && pieces.every((piece) => piece.byteLength <= 128 * 1024 && piece.buffer.byteLength === 128 * 1024));
    assert.ok((await decodeOurs(Buffer.concat(pieces))).data.equals(input));

    await assert.rejects(compressOnPool("gzip", 12, Buffer.from("x")), /level/);
    const again = await compressOnPool("gzip", 1, Buffer.from("still works"));
    assert.equal((await decodeOurs(Buffer.concat(again.pieces))).data.toString(), "still works");
  });
});

describe("sniffCompression()", () => {
  test("magic numbers, and too few bytes to say", () => {
    assert.equal(sniffCompression(Uint8Array.of(0x1f, 0x8b, 0x08)), "gzip");
    assert.equal(sniffCompression(Uint8Array.of(0x1f, 0x8b)), "gzip");
    assert.equal(sniffCompression(Uint8Array.of(0x28, 0xb5, 0x2f, 0xfd, 0x00)), "zstd");
    assert.equal(sniffCompression(Uint8Array.of(0x28, 0xb5, 0x2f)), null);
    assert.equal(sniffCompression(Uint8Array.of(0x1f)), null);
    assert.equal(sniffCompression(new Uint8Array(0)), null);
    assert.equal(sniffCompression(Buffer.from("ova.xml")), null);
    assert.equal(sniffCompression(Uint8Array.of(0x8b, 0x1f)), null);
  });
});
