// Client behaviours no installed server exhibits: an old fixed-newstyle server without NBD_OPT_GO or
// structured replies, and a server that breaks the protocol. The peer is a scripted NBD server speaking
// real bytes over a real unix socket.

import assert from "node:assert/strict";
import net from "node:net";
import { join } from "node:path";
import { test } from "node:test";
import { NbdClient, NbdError } from "./client.ts";
import {
  CMD_READ,
  decodeRequestHeader,
  encodeExportNameReply,
  encodeOptionReply,
  FLAG_FIXED_NEWSTYLE,
  FLAG_HAS_FLAGS,
  FLAG_NO_ZEROES,
  FLAG_SEND_FLUSH,
  IHAVEOPT,
  NBD_MAGIC,
  OPT_EXPORT_NAME,
  REP_ERR_UNSUP,
  SIMPLE_REPLY_HEADER_SIZE,
  writeSimpleReplyHeader,
} from "./protocol.ts";
import { SocketReader } from "./socket-reader.ts";
import { makeTempDir } from "./testing.ts";

const SIZE = 1024 * 1024;

/** Answers every option but EXPORT_NAME with ERR_UNSUP, then serves reads of a byte pattern (or garbage). */
async function startOldServer(socketPath: string, options: { garbageReplies: boolean }) {
  const exportNames: string[] = [];
  const server = net.createServer({ pauseOnConnect: true }, async (accepted) => {
    const { socket, reader } = SocketReader.adopt(accepted, { allowHalfOpen: false });
    socket.on("error", () => {});
    try {
      const greeting = Buffer.alloc(18);
      greeting.writeBigUInt64BE(NBD_MAGIC, 0);
      greeting.writeBigUInt64BE(IHAVEOPT, 8);
      greeting.writeUInt16BE(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES, 16);
      socket.write(greeting);
      await reader.read(4);
      for (;;) {
        const header = await reader.read(16);
        const option = header.readUInt32BE(8);
        const data = await reader.read(header.readUInt32BE(12));
        if (option === OPT_EXPORT_NAME) {
          exportNames.push(data.toString());
          socket.write(encodeExportNameReply(SIZE, FLAG_HAS_FLAGS | FLAG_SEND_FLUSH, true));
          break;
        }
        socket.write(encodeOptionReply(option, REP_ERR_UNSUP));
      }
      for (;;) {
        const request = decodeRequestHeader(await reader.read(28))!;
        if (options.garbageReplies) {
          socket.write(Buffer.alloc(16, 0x42));
          continue;
        }
        assert.equal(request.type, CMD_READ);
        const reply = Buffer.alloc(SIMPLE_REPLY_HEADER_SIZE + request.length);
        writeSimpleReplyHeader(reply, 0, 0, request.handleHigh, request.handleLow);
        for (let i = 0; i < request.length; i++) reply[SIMPLE_REPLY_HEADER_SIZE + i] = (request.offset + i) % 251;
        socket.write(reply);
      }
    } catch {
      socket.destroy();
    }
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return { server, exportNames };
}

test("falls back to NBD_OPT_EXPORT_NAME and simple replies on a server without NBD_OPT_GO", async (t) => {
  const dir = await makeTempDir((fn) => t.after(fn));
  const socketPath = join(dir, "old.sock");
  const { server, exportNames } = await startOldServer(socketPath, { garbageReplies: false });
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const client = await NbdClient.connect(`nbd+unix:///legacy?socket=${socketPath}`);
  try {
    assert.deepEqual(exportNames, ["legacy"]);
    assert.equal(client.size, SIZE);
    assert.equal(client.structuredReplies, false);
    assert.equal(client.hasBlockStatus, false);
    const [a, b] = await Promise.all([client.read(1000, 300), client.read(70_000, 100_000)]);
    assert.deepEqual([...a.subarray(0, 3)], [1000 % 251, 1001 % 251, 1002 % 251]);
    assert.equal(b[99_999], (70_000 + 99_999) % 251);
    await assert.rejects(client.trim(0, 10), (e: NbdError) => e.errno === "ENOTSUP");
  } finally {
    await client.close();
  }
});

test("a server that breaks the protocol fails outstanding requests instead of hanging", async (t) => {
  const dir = await makeTempDir((fn) => t.after(fn));
  const socketPath = join(dir, "bad.sock");
  const { server } = await startOldServer(socketPath, { garbageReplies: true });
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const client = await NbdClient.connect(`nbd+unix:///x?socket=${socketPath}`);
  const results = await Promise.allSettled([client.read(0, 10), client.read(10, 10)]);
  for (const result of results) {
    assert.equal(result.status, "rejected");
    assert.ok(result.reason instanceof NbdError);
    assert.match(result.reason.errno, /EPROTO|ECONNRESET/);
  }
  await assert.rejects(client.read(0, 1), NbdError);
  await client.close();
});
