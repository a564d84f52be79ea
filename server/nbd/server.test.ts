import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { readFile, stat, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { STATE_HOLE, STATE_ZERO, type ExportBackend, type Extent } from "./backend.ts";
import { NbdClient, NbdError } from "./client.ts";
import {
  BASE_ALLOCATION,
  CMD_BLOCK_STATUS,
  CMD_FLAG_DF,
  CMD_FLAG_REQ_ONE,
  CMD_READ,
  CMD_TRIM,
  CMD_WRITE,
  CMD_WRITE_ZEROES,
  decodeOptionReplyHeader,
  encodeInfoRequest,
  encodeMetaContextRequest,
  encodeOption,
  encodeRequestHeader,
  ERRNO,
  FLAG_C_FIXED_NEWSTYLE,
  FLAG_C_NO_ZEROES,
  MAX_REQUEST_SIZE,
  OPT_GO,
  OPT_LIST,
  OPT_LIST_META_CONTEXT,
  OPT_SET_META_CONTEXT,
  OPT_STARTTLS,
  OPT_STRUCTURED_REPLY,
  readU64,
  REP_ACK,
  REP_ERR_INVALID,
  REP_ERR_UNKNOWN,
  REP_ERR_UNSUP,
  REP_META_CONTEXT,
  REPLY_FLAG_DONE,
  REPLY_TYPE_BLOCK_STATUS,
  REPLY_TYPE_ERROR,
  REPLY_TYPE_OFFSET_DATA,
  REPLY_TYPE_OFFSET_HOLE,
  SIMPLE_REPLY_MAGIC,
  STRUCTURED_REPLY_MAGIC,
} from "./protocol.ts";
import { openRawFileBackend } from "./raw-file-backend.ts";
import { NbdServer } from "./server.ts";
import { SocketReader } from "./socket-reader.ts";
import { AllocationTrackingBackend, fileExists, makeTempDir } from "./testing.ts";

const MiB = 1024 * 1024;
const BLOCK = 64 * 1024;
/** Larger than one 32 MiB request, so the client has to split. */
const DISK = 40 * MiB;

interface Reply {
  kind: "simple" | "chunk";
  handle: number;
  error: number;
  flags: number;
  type: number;
  payload: Buffer;
}

/** A hand-driven NBD connection, for requests our client would never send. */
async function rawConnect(socketPath: string, exportName: string, options: { structured: boolean; baseAllocation: boolean }) {
  const { socket, reader } = await SocketReader.connect({ path: socketPath });
  await reader.read(18);
  const flags = Buffer.alloc(4);
  flags.writeUInt32BE(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
  socket.write(flags);
  const option = async (code: number, data?: Buffer) => {
    socket.write(encodeOption(code, data));
    const replies: { type: number; data: Buffer }[] = [];
    for (;;) {
      const header = decodeOptionReplyHeader(await reader.read(20));
      const reply = { type: header.replyType, data: await reader.read(header.length) };
      replies.push(reply);
      if (reply.type === REP_ACK || reply.type >= 0x80000000) return replies;
    }
  };
  if (options.structured) await option(OPT_STRUCTURED_REPLY);
  if (options.baseAllocation) await option(OPT_SET_META_CONTEXT, encodeMetaContextRequest(exportName, [BASE_ALLOCATION]));
  const go = await option(OPT_GO, encodeInfoRequest(exportName, []));
  assert.equal(go.at(-1)!.type, REP_ACK);
  return {
    socket,
    send(type: number, flags: number, offset: number, length: number, handle: number, payload?: Buffer) {
      socket.write(encodeRequestHeader({ type, flags, offset, length, handleHigh: 0, handleLow: handle }));
      if (payload) socket.write(payload);
    },
    /** Next reply; `readLength` says how much data follows a successful simple reply (to which handle). */
    async reply(readLength: number | ((handle: number) => number) = 0): Promise<Reply> {
      const magic = (await reader.read(4)).readUInt32BE(0);
      if (magic === SIMPLE_REPLY_MAGIC) {
        const rest = await reader.read(12);
        const error = rest.readUInt32BE(0);
        const handle = rest.readUInt32BE(8);
        const length = typeof readLength === "number" ? readLength : readLength(handle);
        const payload = error === 0 && length > 0 ? await reader.read(length) : Buffer.alloc(0);
        return { kind: "simple", handle, error, flags: 0, type: 0, payload };
      }
      assert.equal(magic, STRUCTURED_REPLY_MAGIC);
      const rest = await reader.read(16);
      const payload = await reader.read(rest.readUInt32BE(12));
      const type = rest.readUInt16BE(2);
      const error = type === REPLY_TYPE_ERROR ? payload.readUInt32BE(0) : 0;
      return { kind: "chunk", handle: rest.readUInt32BE(8), error, flags: rest.readUInt16BE(0), type, payload };
    },
    option,
  };
}

describe("NbdServer with NbdClient", () => {
  let dir: string;
  let server: NbdServer;
  let socketPath: string;
  let diskPath: string;
  let sparse: AllocationTrackingBackend;
  const cleanups: (() => Promise<void> | void)[] = [];
  const uri = (name: string) => `nbd+unix:///${name}?socket=${socketPath}`;

  before(async () => {
    dir = await makeTempDir((fn) => cleanups.push(fn));
    diskPath = join(dir, "disk.raw");
    await writeFile(diskPath, randomBytes(DISK));
    const sparsePath = join(dir, "sparse.raw");
    await writeFile(sparsePath, "");
    await truncate(sparsePath, 4 * MiB);
    // Blocks 0 and 2 hold data, the rest is unallocated.
    const handle = await openRawFileBackend(sparsePath, { readOnly: false });
    await handle.write(0, Buffer.alloc(BLOCK, 0xaa));
    await handle.write(2 * BLOCK, Buffer.alloc(BLOCK, 0xbb));
    await handle.close();
    sparse = await AllocationTrackingBackend.open(sparsePath, { readOnly: false, blockSize: BLOCK, allocatedBlocks: [0, 2] });

    server = new NbdServer();
    server.addExport("disk", await openRawFileBackend(diskPath, { readOnly: false }), { description: "the disk" });
    server.addExport("ro", await openRawFileBackend(diskPath, { readOnly: true }), { description: "read-only view" });
    server.addExport("sparse", sparse);
    socketPath = join(dir, "nbd.sock");
    await server.listen({ socketPath });
  });

  after(async () => {
    await server.close();
    for (const fn of cleanups.reverse()) await fn();
  });

  test("handshake negotiates structured replies, base:allocation and block sizes", async () => {
    const client = await NbdClient.connect(uri("disk"));
    try {
      assert.equal(client.size, DISK);
      assert.equal(client.readOnly, false);
      assert.equal(client.structuredReplies, true);
      assert.equal(client.hasBlockStatus, true);
      assert.equal(client.canMultiConn, true);
      assert.equal(client.description, "the disk");
      assert.equal(client.blockSizes.maximum, MAX_REQUEST_SIZE);
    } finally {
      await client.close();
    }
  });

  test("LIST names every export with its description", async () => {
    const exports = await NbdClient.listExports(uri(""));
    assert.deepEqual(
      exports.sort((a, b) => a.name.localeCompare(b.name)),
      [
        { name: "disk", description: "the disk" },
        { name: "ro", description: "read-only view" },
        { name: "sparse", description: "" },
      ],
    );
  });

  test("INFO describes an export; unknown exports are refused with ENOENT", async () => {
    const info = await NbdClient.describeExport(uri("ro"));
    assert.equal(info.size, DISK);
    assert.equal(info.readOnly, true);
    assert.equal(info.description, "read-only view");
    assert.equal(info.blockSizes?.maximum, MAX_REQUEST_SIZE);
    await assert.rejects(NbdClient.describeExport(uri("nope")), (e: NbdError) => e.errno === "ENOENT");
    await assert.rejects(NbdClient.connect(uri("nope")), (e: NbdError) => e.errno === "ENOENT");
  });

  test("reads and writes (unaligned, FUA, larger than one request) reach the file; flush works", async () => {
    const client = await NbdClient.connect(uri("disk"));
    try {
      const small = randomBytes(1000);
      await client.write(12345, small);
      const big = randomBytes(34 * MiB + 3);
      await client.write(4 * MiB + 7, big, { fua: true });
      await client.flush();
      assert.deepEqual(await client.read(12345, 1000), small);
      const into = Buffer.alloc(1000);
      await client.readInto(12345, into);
      assert.deepEqual(into, small);
      assert.deepEqual(await client.read(4 * MiB + 7, big.length), big);
      const file = await readFile(diskPath);
      assert.deepEqual(file.subarray(12345, 13345), small);
      assert.deepEqual(file.subarray(4 * MiB + 7, 4 * MiB + 7 + big.length), big);
      // Requests above the 32 MiB limit were split by the client.
      const whole = await client.read(0, DISK);
      assert.deepEqual(whole, file);
    } finally {
      await client.close();
    }
  });

  test("trim and write-zeroes make ranges read as zeros; a tail trim punches a hole", async () => {
    const client = await NbdClient.connect(uri("disk"));
    try {
      await client.writeZeroes(MiB + 100, 5000, { noHole: true });
      assert.deepEqual(await client.read(MiB + 100, 5000), Buffer.alloc(5000));
      const before = (await stat(diskPath)).blocks;
      await client.trim(DISK - 4 * MiB, 4 * MiB);
      await client.flush();
      assert.deepEqual(await client.read(DISK - 4 * MiB, 4 * MiB), Buffer.alloc(4 * MiB));
      assert.ok((await stat(diskPath)).blocks < before, "tail trim should deallocate");
      assert.equal((await stat(diskPath)).size, DISK);
    } finally {
      await client.close();
    }
  });

  test("block status reports the backend's holes and follows writes and trims", async () => {
    const client = await NbdClient.connect(uri("sparse"));
    try {
      assert.deepEqual(await client.blockStatus(0, 4 * MiB), [
        { length: BLOCK, flags: 0 },
        { length: BLOCK, flags: STATE_HOLE | STATE_ZERO },
        { length: BLOCK, flags: 0 },
        { length: 4 * MiB - 3 * BLOCK, flags: STATE_HOLE | STATE_ZERO },
      ]);
      // Extents are clipped to the request.
      assert.deepEqual(await client.blockStatus(BLOCK / 2, BLOCK), [
        { length: BLOCK / 2, flags: 0 },
        { length: BLOCK / 2, flags: STATE_HOLE | STATE_ZERO },
      ]);
      await client.write(5 * BLOCK, Buffer.alloc(10, 1));
      await client.trim(0, BLOCK);
      assert.deepEqual(await client.blockStatus(0, 6 * BLOCK), [
        { length: 2 * BLOCK, flags: STATE_HOLE | STATE_ZERO },
        { length: BLOCK, flags: 0 },
        { length: 2 * BLOCK, flags: STATE_HOLE | STATE_ZERO },
        { length: BLOCK, flags: 0 },
      ]);
      // Reads over holes come back as zeros next to the data.
      const bytes = await client.read(0, 4 * BLOCK);
      assert.deepEqual(bytes.subarray(0, 2 * BLOCK), Buffer.alloc(2 * BLOCK));
      assert.deepEqual(bytes.subarray(2 * BLOCK, 3 * BLOCK), Buffer.alloc(BLOCK, 0xbb));
      await client.write(0, Buffer.alloc(BLOCK, 0xaa)); // restore for other tests
      await client.trim(5 * BLOCK, BLOCK);
    } finally {
      await client.close();
    }
  });

  test("structured reads send OFFSET_HOLE for zero ranges, one data chunk under DF; REQ_ONE gives one extent", async () => {
    const raw = await rawConnect(socketPath, "sparse", { structured: true, baseAllocation: true });
    try {
      raw.send(CMD_READ, 0, 0, 4 * BLOCK, 1);
      const chunks: Reply[] = [];
      do chunks.push(await raw.reply());
      while ((chunks.at(-1)!.flags & REPLY_FLAG_DONE) === 0);
      assert.deepEqual(
        chunks.map((c) => [c.type, readU64(c.payload, 0)]),
        [
          [REPLY_TYPE_OFFSET_DATA, 0],
          [REPLY_TYPE_OFFSET_HOLE, BLOCK],
          [REPLY_TYPE_OFFSET_DATA, 2 * BLOCK],
          [REPLY_TYPE_OFFSET_HOLE, 3 * BLOCK],
        ],
      );
      assert.equal(chunks[1]!.payload.readUInt32BE(8), BLOCK);
      assert.deepEqual(chunks[2]!.payload.subarray(8), Buffer.alloc(BLOCK, 0xbb));

      raw.send(CMD_READ, CMD_FLAG_DF, 0, 4 * BLOCK, 2);
      const whole = await raw.reply();
      assert.equal(whole.type, REPLY_TYPE_OFFSET_DATA);
      assert.equal(whole.flags & REPLY_FLAG_DONE, REPLY_FLAG_DONE);
      assert.equal(whole.payload.length, 8 + 4 * BLOCK);

      raw.send(CMD_BLOCK_STATUS, CMD_FLAG_REQ_ONE, 0, 4 * BLOCK, 3);
      const status = await raw.reply();
      assert.equal(status.type, REPLY_TYPE_BLOCK_STATUS);
      assert.equal(status.payload.length, 4 + 8);
      assert.equal(status.payload.readUInt32BE(4), BLOCK);
    } finally {
      raw.socket.destroy();
    }
  });

  test("a read-only export refuses writes, trims and zeroing with EPERM", async () => {
    const client = await NbdClient.connect(uri("ro"));
    try {
      assert.equal(client.readOnly, true);
      await assert.rejects(client.write(0, Buffer.alloc(10)), (e: NbdError) => e.errno === "EPERM");
      assert.equal((await client.read(0, 10)).length, 10);
    } finally {
      await client.close();
    }
    // Our client refuses locally; the server must refuse too when a client sends them anyway.
    const raw = await rawConnect(socketPath, "ro", { structured: false, baseAllocation: false });
    try {
      raw.send(CMD_WRITE, 0, 0, 4, 1, Buffer.alloc(4));
      raw.send(CMD_TRIM, 0, 0, 4096, 2);
      raw.send(CMD_WRITE_ZEROES, 0, 0, 4096, 3);
      const replies = [await raw.reply(), await raw.reply(), await raw.reply()];
      assert.deepEqual(replies.map((r) => r.error), [ERRNO.EPERM, ERRNO.EPERM, ERRNO.EPERM]);
      raw.send(CMD_READ, 0, 0, 8, 4);
      assert.equal((await raw.reply(8)).payload.length, 8);
    } finally {
      raw.socket.destroy();
    }
  });

  test("pipelined requests on one connection complete concurrently and correctly", async () => {
    const client = await NbdClient.connect(uri("disk"));
    try {
      const pieces = Array.from({ length: 200 }, (_, i) => ({ offset: i * 40_000 + (i % 7), data: randomBytes(1 + ((i * 7919) % 39_000)) }));
      await Promise.all(pieces.map((p, i) => client.write(p.offset, p.data, { fua: i % 10 === 0 })));
      const back = await Promise.all(pieces.map((p) => client.read(p.offset, p.data.length)));
      back.forEach((bytes, i) => assert.deepEqual(bytes, pieces[i]!.data));
      // Two connections see each other's writes (the backend is shared: multi-conn).
      const other = await NbdClient.connect(uri("disk"));
      await other.write(8 * MiB, Buffer.from("from the other connection"));
      await other.flush();
      await other.close();
      assert.equal((await client.read(8 * MiB, 25)).toString(), "from the other connection");
    } finally {
      await client.close();
    }
  });

  test("bad requests are answered with errors and the connection stays usable", async () => {
    const raw = await rawConnect(socketPath, "disk", { structured: false, baseAllocation: false });
    try {
      raw.send(CMD_READ, 0, DISK - 10, 20, 1); // past the end
      assert.equal((await raw.reply()).error, ERRNO.EINVAL);
      raw.send(CMD_WRITE, 0, DISK - 2, 4, 2, Buffer.from("abcd")); // write past the end, payload still consumed
      assert.equal((await raw.reply()).error, ERRNO.ENOSPC);
      raw.send(CMD_WRITE_ZEROES, 0, 2 ** 50, 4096, 3); // absurd offset
      assert.equal((await raw.reply()).error, ERRNO.ENOSPC);
      raw.send(99, 0, 0, 0, 4); // unknown command
      assert.equal((await raw.reply()).error, ERRNO.EINVAL);
      raw.send(CMD_WRITE, CMD_FLAG_REQ_ONE, 0, 4, 5, Buffer.alloc(4)); // flag not valid for the command
      assert.equal((await raw.reply()).error, ERRNO.EINVAL);
      raw.send(CMD_READ, 0, 0, 0, 6); // zero length
      assert.equal((await raw.reply()).error, ERRNO.EINVAL);
      raw.send(CMD_READ, CMD_FLAG_DF, 0, 10, 7); // DF without structured replies
      assert.equal((await raw.reply()).error, ERRNO.EINVAL);
      raw.send(CMD_BLOCK_STATUS, 0, 0, 4096, 8); // no metadata context negotiated
      assert.equal((await raw.reply()).error, ERRNO.EINVAL);
      raw.send(CMD_WRITE, 0, 0, MAX_REQUEST_SIZE + 1, 9, Buffer.alloc(MAX_REQUEST_SIZE + 1)); // too big, skipped
      assert.equal((await raw.reply()).error, ERRNO.EINVAL);
      raw.send(CMD_READ, 0, 0, 16, 10);
      const ok = await raw.reply(16);
      assert.equal(ok.error, 0);
      assert.equal(ok.handle, 10);
    } finally {
      raw.socket.destroy();
    }

    // Structured sessions get error chunks, reads included.
    const structured = await rawConnect(socketPath, "disk", { structured: true, baseAllocation: false });
    try {
      structured.send(CMD_READ, 0, DISK, 1, 11);
      const error = await structured.reply();
      assert.equal(error.type, REPLY_TYPE_ERROR);
      assert.equal(error.error, ERRNO.EINVAL);
      assert.match(error.payload.toString("utf8", 6), /beyond the export size/);
    } finally {
      structured.socket.destroy();
    }

    // A broken request header ends that connection only.
    const broken = await rawConnect(socketPath, "disk", { structured: false, baseAllocation: false });
    broken.socket.write(Buffer.alloc(28, 0xee));
    await once(broken.socket, "close");
    const client = await NbdClient.connect(uri("disk"));
    assert.equal((await client.read(0, 4)).length, 4);
    await client.close();
  });

  test("option haggling: unknown options, TLS, misuse and meta context listing", async () => {
    const { socket, reader } = await SocketReader.connect({ path: socketPath });
    await reader.read(18);
    socket.write(Buffer.from([0, 0, 0, FLAG_C_FIXED_NEWSTYLE]));
    const option = async (code: number, data?: Buffer) => {
      socket.write(encodeOption(code, data));
      const replies: { type: number; data: Buffer }[] = [];
      for (;;) {
        const header = decodeOptionReplyHeader(await reader.read(20));
        const reply = { type: header.replyType, data: await reader.read(header.length) };
        replies.push(reply);
        if (reply.type === REP_ACK || reply.type >= 0x80000000) return replies;
      }
    };
    try {
      assert.equal((await option(4242)).at(-1)!.type, REP_ERR_UNSUP);
      assert.equal((await option(OPT_STARTTLS)).at(-1)!.type, REP_ERR_UNSUP);
      assert.equal((await option(OPT_LIST, Buffer.from("x"))).at(-1)!.type, REP_ERR_INVALID);
      // Meta contexts need structured replies first.
      assert.equal((await option(OPT_LIST_META_CONTEXT, encodeMetaContextRequest("disk", []))).at(-1)!.type, REP_ERR_INVALID);
      assert.equal((await option(OPT_STRUCTURED_REPLY)).at(-1)!.type, REP_ACK);
      assert.equal((await option(OPT_STRUCTURED_REPLY)).at(-1)!.type, REP_ERR_INVALID);
      const listed = await option(OPT_LIST_META_CONTEXT, encodeMetaContextRequest("disk", ["base:"]));
      assert.deepEqual(
        listed.map((r) => [r.type, r.type === REP_META_CONTEXT ? r.data.toString("utf8", 4) : ""]),
        [
          [REP_META_CONTEXT, BASE_ALLOCATION],
          [REP_ACK, ""],
        ],
      );
      const none = await option(OPT_SET_META_CONTEXT, encodeMetaContextRequest("disk", ["qemu:dirty-bitmap:x"]));
      assert.deepEqual(none.map((r) => r.type), [REP_ACK]);
      assert.equal((await option(OPT_SET_META_CONTEXT, encodeMetaContextRequest("nope", [BASE_ALLOCATION]))).at(-1)!.type, REP_ERR_UNKNOWN);
      assert.equal((await option(OPT_GO, Buffer.from([0, 0]))).at(-1)!.type, REP_ERR_INVALID);
      // Still negotiable after all that.
      assert.equal((await option(OPT_GO, encodeInfoRequest("disk", []))).at(-1)!.type, REP_ACK);
    } finally {
      socket.destroy();
    }
  });

  test("requests beyond the in-flight bound make the server stop reading instead of buffering", async () => {
    const raw = await rawConnect(socketPath, "disk", { structured: false, baseAllocation: false });
    const count = 512;
    const length = MiB;
    try {
      raw.socket.pause(); // do not consume replies
      for (let i = 0; i < count; i++) raw.send(CMD_READ, 0, 0, length, i + 1);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      // Without backpressure the server would hold all 512 MiB of replies.
      const held = process.memoryUsage().arrayBuffers;
      assert.ok(held < 300 * MiB, `server buffered ${Math.round(held / MiB)} MiB`);
      raw.socket.resume();
      for (let i = 0; i < count; i++) assert.equal((await raw.reply(length)).error, 0);
    } finally {
      raw.socket.destroy();
    }
  });

  test("TCP listener, nbd:// URI with credentials, and the xapi unix URI form", async () => {
    const address = await server.listen({ host: "127.0.0.1", port: 0 });
    assert.ok("port" in address);
    const tcp = await NbdClient.connect(`nbd://user:secret@127.0.0.1:${address.port}/disk`);
    assert.equal(tcp.size, DISK);
    await tcp.close();
    const xapi = await NbdClient.connect(`nbd:unix:${socketPath}:exportname=disk`);
    assert.equal(xapi.exportName, "disk");
    await xapi.close();
  });

  test("removeExport closes its connections; the export disappears from LIST", async () => {
    const extraPath = join(dir, "extra.raw");
    await writeFile(extraPath, Buffer.alloc(MiB));
    const backend = await openRawFileBackend(extraPath, { readOnly: false });
    server.addExport("extra", backend);
    assert.throws(() => server.addExport("extra", backend), /already exists/);
    const client = await NbdClient.connect(uri("extra"));
    await client.write(0, Buffer.from("x"));
    await server.removeExport("extra");
    await assert.rejects(client.read(0, 1), NbdError);
    assert.ok(!(await NbdClient.listExports(uri(""))).some((e) => e.name === "extra"));
    await backend.close();
  });
});

test("close() ends connections, answers late requests, and removes the unix socket", async (t) => {
  const dir = await makeTempDir((fn) => t.after(fn));
  const path = join(dir, "d.raw");
  await writeFile(path, Buffer.alloc(MiB, 7));
  const backend = await openRawFileBackend(path, { readOnly: false });
  t.after(() => backend.close());
  const server = new NbdServer();
  server.addExport("d", backend);
  const socketPath = join(dir, "s.sock");
  await server.listen({ socketPath });
  const client = await NbdClient.connect(`nbd+unix:///d?socket=${socketPath}`);
  const reads = Promise.allSettled(Array.from({ length: 20 }, (_, i) => client.read(i * 4096, 4096)));
  await server.close();
  // Whatever the server answered before closing is correct data; the rest fails cleanly.
  for (const result of await reads) {
    if (result.status === "fulfilled") assert.deepEqual(result.value, Buffer.alloc(4096, 7));
  }
  await assert.rejects(client.read(0, 1));
  assert.equal(await fileExists(socketPath), false);
  assert.equal(server.connectionCount, 0);
  // A stale socket file (no listener) is replaced on listen.
  await writeFile(socketPath, "");
  const again = new NbdServer();
  await again.listen({ socketPath });
  await again.close();
});

/** Wraps a backend to see the reads the server makes, and to hold or fail them. */
class ProbeBackend implements ExportBackend {
  readonly reads: { offset: number; length: number }[] = [];
  /** Reads overlapping this range fail with EIO. */
  failing: { offset: number; length: number } | null = null;
  /** While set, reads wait for it. */
  held: Promise<void> | null = null;
  readonly #inner: ExportBackend;

  constructor(inner: ExportBackend) {
    this.#inner = inner;
  }

  get size(): number {
    return this.#inner.size;
  }

  get readOnly(): boolean {
    return this.#inner.readOnly;
  }

  async read(offset: number, target: Buffer): Promise<void> {
    this.reads.push({ offset, length: target.length });
    if (this.held !== null) await this.held;
    const bad = this.failing;
    if (bad !== null && offset < bad.offset + bad.length && bad.offset < offset + target.length) {
      throw Object.assign(new Error("bad sector"), { code: "EIO" });
    }
    await this.#inner.read(offset, target);
  }

  write(offset: number, data: Buffer, options?: { fua?: boolean }): Promise<void> {
    return this.#inner.write(offset, data, options);
  }

  flush(): Promise<void> {
    return this.#inner.flush();
  }

  trim(offset: number, length: number): Promise<void> {
    return this.#inner.trim(offset, length);
  }

  writeZeroes(offset: number, length: number, options?: { noHole?: boolean; fua?: boolean }): Promise<void> {
    return this.#inner.writeZeroes(offset, length, options);
  }

  blockStatus(offset: number, length: number): Promise<Extent[]> {
    return this.#inner.blockStatus(offset, length);
  }

  close(): Promise<void> {
    return this.#inner.close();
  }

  reset(): void {
    this.reads.length = 0;
    this.failing = null;
    this.held = null;
  }
}

type RawConnection = Awaited<ReturnType<typeof rawConnect>>;

interface ReadRequest {
  offset: number;
  length: number;
  flags?: number;
}

/** Sends READs with handles `first`, `first + 1`, ... in one write, so that the server parses them in one go. */
function sendReads(raw: RawConnection, requests: ReadRequest[], first = 1): void {
  raw.socket.cork();
  requests.forEach((request, i) => raw.send(CMD_READ, request.flags ?? 0, request.offset, request.length, first + i));
  raw.socket.uncork();
}

/** Replies to READs sent by sendReads (handle i + 1 is requests[i]), by handle, until each is complete. */
async function gatherReplies(raw: RawConnection, requests: ReadRequest[]): Promise<Map<number, Reply[]>> {
  const replies = new Map<number, Reply[]>();
  for (let complete = 0; complete < requests.length; ) {
    const reply = await raw.reply((handle) => requests[handle - 1]!.length);
    const chunks = replies.get(reply.handle) ?? [];
    assert.ok(chunks.every((chunk) => (chunk.flags & REPLY_FLAG_DONE) === 0), `handle ${reply.handle}: chunk after DONE`);
    chunks.push(reply);
    replies.set(reply.handle, chunks);
    if (reply.kind === "simple" || (reply.flags & REPLY_FLAG_DONE) !== 0) complete++;
  }
  return replies;
}

/** The bytes of a successful reply; checks that structured chunks cover the request exactly, DONE on the last. */
function replyBytes(request: ReadRequest, chunks: Reply[]): Buffer {
  assert.deepEqual(
    chunks.map((chunk) => chunk.error),
    chunks.map(() => 0),
  );
  if (chunks[0]!.kind === "simple") return chunks[0]!.payload;
  const bytes = Buffer.alloc(request.length);
  const covered = new Uint8Array(request.length);
  chunks.forEach((chunk, i) => {
    assert.equal(chunk.flags & REPLY_FLAG_DONE, i === chunks.length - 1 ? REPLY_FLAG_DONE : 0);
    const at = readU64(chunk.payload, 0) - request.offset;
    const length = chunk.type === REPLY_TYPE_OFFSET_DATA ? chunk.payload.length - 8 : chunk.payload.readUInt32BE(8);
    const inside = at >= 0 && at + length <= request.length;
    assert.ok(inside && covered.subarray(at, at + length).every((c) => c === 0), "chunks overlap or leave the request");
    covered.fill(1, at, at + length);
    if (chunk.type === REPLY_TYPE_OFFSET_DATA) chunk.payload.copy(bytes, at, 8);
    else assert.equal(chunk.type, REPLY_TYPE_OFFSET_HOLE); // zeros
  });
  assert.ok(covered.every((c) => c === 1), "chunks leave gaps");
  return bytes;
}

describe("contiguous pipelined READs", () => {
  const SPARSE_BLOCKS = 16;
  const ALLOCATED = [0, 2, 3, 7, 8];
  let socketPath: string;
  let server: NbdServer;
  let dataBytes: Buffer;
  let sparseBytes: Buffer;
  let data: ProbeBackend;
  let sparse: ProbeBackend;
  const cleanups: (() => Promise<void> | void)[] = [];

  before(async () => {
    const dir = await makeTempDir((fn) => cleanups.push(fn));
    dataBytes = randomBytes(8 * MiB);
    await writeFile(join(dir, "data.raw"), dataBytes);
    sparseBytes = Buffer.alloc(SPARSE_BLOCKS * BLOCK);
    for (const block of ALLOCATED) randomBytes(BLOCK).copy(sparseBytes, block * BLOCK);
    await writeFile(join(dir, "sparse.raw"), sparseBytes);
    data = new ProbeBackend(await openRawFileBackend(join(dir, "data.raw"), { readOnly: true }));
    const tracking = await AllocationTrackingBackend.open(join(dir, "sparse.raw"), {
      readOnly: true,
      blockSize: BLOCK,
      allocatedBlocks: ALLOCATED,
    });
    sparse = new ProbeBackend(tracking);
    cleanups.push(() => data.close(), () => sparse.close());
    server = new NbdServer();
    server.addExport("data", data);
    server.addExport("sparse", sparse);
    socketPath = join(dir, "nbd.sock");
    await server.listen({ socketPath });
    cleanups.push(() => server.close());
  });

  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  const connect = (name: string, structured: boolean) => rawConnect(socketPath, name, { structured, baseAllocation: false });

  for (const structured of [true, false]) {
    const replies = structured ? "structured" : "simple";

    test(`a sequential pipeline is read in few backend reads, each request answered with its bytes (${replies} replies)`, async () => {
      data.reset();
      const requests = Array.from({ length: 40 }, (_, i) => ({ offset: 100 + i * BLOCK, length: BLOCK }));
      const raw = await connect("data", structured);
      try {
        sendReads(raw, requests);
        const answers = await gatherReplies(raw, requests);
        requests.forEach((request, i) => {
          assert.deepEqual(replyBytes(request, answers.get(i + 1)!), dataBytes.subarray(request.offset, request.offset + request.length));
        });
      } finally {
        raw.socket.destroy();
      }
      assert.ok(data.reads.length <= requests.length / 4, `${data.reads.length} backend reads for ${requests.length} requests`);
      // The reads tile the range, none beyond the merge cap.
      let next = 100;
      for (const read of [...data.reads].sort((a, b) => a.offset - b.offset)) {
        assert.equal(read.offset, next);
        assert.ok(read.length <= 2 * MiB);
        next += read.length;
      }
      assert.equal(next, 100 + requests.length * BLOCK);
    });

    test(`only requests that follow each other merge, up to 2 MiB (${replies} replies)`, async () => {
      data.reset();
      const requests = [
        { offset: 0, length: 1000 },
        { offset: 1000, length: 5000 },
        { offset: 6000, length: 100 },
        { offset: MiB, length: 4096 },
        { offset: 512 * 1024, length: BLOCK },
        { offset: 512 * 1024 + BLOCK, length: BLOCK },
        { offset: 4 * MiB, length: 2 * MiB },
        { offset: 6 * MiB, length: 4096 },
        { offset: 3 * MiB, length: 10 },
        { offset: 3 * MiB, length: 10 },
        { offset: 7 * MiB, length: 4096 },
        { offset: 7 * MiB - 4096, length: 4096 },
      ];
      const raw = await connect("data", structured);
      try {
        sendReads(raw, requests);
        const answers = await gatherReplies(raw, requests);
        requests.forEach((request, i) => {
          assert.deepEqual(replyBytes(request, answers.get(i + 1)!), dataBytes.subarray(request.offset, request.offset + request.length));
        });
      } finally {
        raw.socket.destroy();
      }
      assert.deepEqual(data.reads, [
        { offset: 0, length: 6100 },
        { offset: MiB, length: 4096 },
        { offset: 512 * 1024, length: 2 * BLOCK },
        { offset: 4 * MiB, length: 2 * MiB },
        { offset: 6 * MiB, length: 4096 },
        { offset: 3 * MiB, length: 10 },
        { offset: 3 * MiB, length: 10 },
        { offset: 7 * MiB, length: 4096 },
        { offset: 7 * MiB - 4096, length: 4096 },
      ]);
    });

    test(`a failed backend read fails every request merged into it, and no other (${replies} replies)`, async () => {
      data.reset();
      data.failing = { offset: 2 * MiB, length: 1 };
      const requests = [
        { offset: 2 * MiB - 2 * BLOCK, length: BLOCK },
        { offset: 2 * MiB - BLOCK, length: BLOCK },
        { offset: 2 * MiB, length: BLOCK },
        { offset: 2 * MiB + BLOCK, length: BLOCK },
        { offset: 5 * MiB, length: BLOCK },
        { offset: 5 * MiB + BLOCK, length: BLOCK },
      ];
      const raw = await connect("data", structured);
      try {
        sendReads(raw, requests);
        const answers = await gatherReplies(raw, requests);
        for (const handle of [1, 2, 3, 4]) {
          const [reply, ...more] = answers.get(handle)!;
          assert.equal(more.length, 0);
          assert.equal(reply!.error, ERRNO.EIO);
          if (structured) assert.equal(reply!.type, REPLY_TYPE_ERROR);
        }
        for (const handle of [5, 6]) {
          const request = requests[handle - 1]!;
          assert.deepEqual(replyBytes(request, answers.get(handle)!), dataBytes.subarray(request.offset, request.offset + request.length));
        }
        // The connection goes on.
        sendReads(raw, [requests[0]!]);
        const again = await gatherReplies(raw, [requests[0]!]);
        assert.deepEqual(replyBytes(requests[0]!, again.get(1)!), dataBytes.subarray(2 * MiB - 2 * BLOCK, 2 * MiB - BLOCK));
      } finally {
        raw.socket.destroy();
      }
      assert.equal(data.reads.length, 3);
    });
  }

  test("merged structured reads over holes: per-request hole and data chunks, one data chunk under DF, holes not read", async () => {
    sparse.reset();
    const K = 1024;
    // Ten requests of 48 KiB from 16 KiB on; the sixth, over a hole, with DF.
    const requests = Array.from({ length: 10 }, (_, i) => ({
      offset: 16 * K + i * 48 * K,
      length: 48 * K,
      flags: i === 5 ? CMD_FLAG_DF : 0,
    }));
    const allocated = (at: number) => ALLOCATED.includes(Math.floor(at / BLOCK));
    const raw = await connect("sparse", true);
    try {
      sendReads(raw, requests);
      const answers = await gatherReplies(raw, requests);
      requests.forEach((request, i) => {
        const chunks = answers.get(i + 1)!;
        assert.deepEqual(replyBytes(request, chunks), sparseBytes.subarray(request.offset, request.offset + request.length));
        // Expected: one chunk per run of blocks of the same kind within the request (one data chunk under DF).
        const expected: [number, number][] = [];
        const end = request.offset + request.length;
        for (let at = request.offset; at < end; at = Math.min(end, (Math.floor(at / BLOCK) + 1) * BLOCK)) {
          const type = request.flags !== 0 || allocated(at) ? REPLY_TYPE_OFFSET_DATA : REPLY_TYPE_OFFSET_HOLE;
          if (expected.at(-1)?.[0] !== type) expected.push([type, at]);
        }
        assert.deepEqual(
          chunks.map((chunk) => [chunk.type, readU64(chunk.payload, 0)]),
          expected,
          `request ${i}`,
        );
      });
    } finally {
      raw.socket.destroy();
    }
    // Data runs are read across request boundaries; holes only where DF asked for data.
    assert.deepEqual(sparse.reads, [
      { offset: 16 * K, length: 48 * K },
      { offset: 128 * K, length: 176 * K },
      { offset: 448 * K, length: 48 * K },
    ]);
  });

  test("merged structured reads over holes fail together when one of their data runs fails", async () => {
    sparse.reset();
    sparse.failing = { offset: 3 * BLOCK, length: 1 };
    const requests = Array.from({ length: 4 }, (_, i) => ({ offset: i * BLOCK, length: BLOCK }));
    const raw = await connect("sparse", true);
    try {
      sendReads(raw, requests);
      const answers = await gatherReplies(raw, requests);
      for (let handle = 1; handle <= 4; handle++) {
        assert.deepEqual(
          answers.get(handle)!.map((reply) => [reply.type, reply.error]),
          [[REPLY_TYPE_ERROR, ERRNO.EIO]],
        );
      }
    } finally {
      raw.socket.destroy();
    }
    assert.deepEqual(sparse.reads, [
      { offset: 0, length: BLOCK },
      { offset: 2 * BLOCK, length: 2 * BLOCK },
    ]);
  });

  test("shutdown while merged reads are in flight: they are answered, later requests get ESHUTDOWN", async (t) => {
    const dir = await makeTempDir((fn) => t.after(fn));
    await writeFile(join(dir, "d.raw"), dataBytes.subarray(0, MiB));
    const probe = new ProbeBackend(await openRawFileBackend(join(dir, "d.raw"), { readOnly: true }));
    t.after(() => probe.close());
    const own = new NbdServer();
    own.addExport("d", probe);
    const ownSocket = join(dir, "s.sock");
    await own.listen({ socketPath: ownSocket });
    let release = () => {};
    probe.held = new Promise((resolve) => (release = resolve));
    const raw = await rawConnect(ownSocket, "d", { structured: true, baseAllocation: false });
    const closed = once(raw.socket, "close");
    const requests = Array.from({ length: 8 }, (_, i) => ({ offset: i * BLOCK, length: BLOCK }));
    sendReads(raw, requests);
    while (probe.reads.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const closing = own.close();
    raw.send(CMD_READ, 0, 0, 4096, 9);
    const late = await raw.reply();
    assert.deepEqual([late.handle, late.type, late.error], [9, REPLY_TYPE_ERROR, ERRNO.ESHUTDOWN]);
    release();
    const answers = await gatherReplies(raw, requests);
    requests.forEach((request, i) => {
      assert.deepEqual(replyBytes(request, answers.get(i + 1)!), dataBytes.subarray(request.offset, request.offset + request.length));
    });
    await closing;
    await closed;
    assert.deepEqual(probe.reads, [{ offset: 0, length: 8 * BLOCK }]);
  });
});
