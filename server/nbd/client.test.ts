// Client behaviours no installed server exhibits: an old fixed-newstyle server without NBD_OPT_GO or
// structured replies, a server that breaks the protocol, servers that go silent at each stage. The peer is
// a scripted NBD server speaking real bytes over a real socket.

import assert from "node:assert/strict";
import net from "node:net";
import { join } from "node:path";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
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
import { makeTempDir, startMuteListener } from "./testing.ts";

const SIZE = 1024 * 1024;

/**
 * Answers every option but EXPORT_NAME with ERR_UNSUP, then serves reads of a byte pattern, one at a time
 * (`delayMs` after each request), or garbage, or never answers; `silentAfterGreeting` stops after the greeting.
 */
async function startOldServer(socketPath: string, options: { replies: "pattern" | "garbage" | "none"; delayMs?: number; silentAfterGreeting?: boolean }) {
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
      if (options.silentAfterGreeting) return;
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
        if (options.replies === "none") continue;
        if (options.replies === "garbage") {
          socket.write(Buffer.alloc(16, 0x42));
          continue;
        }
        if (options.delayMs !== undefined) await sleep(options.delayMs);
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
  const { server, exportNames } = await startOldServer(socketPath, { replies: "pattern" });
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
  const { server } = await startOldServer(socketPath, { replies: "garbage" });
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

/** Rejects with an NbdError of `errno` whose message is exactly `message` (a string) or matches it. */
function failsWith(errno: string, message: string | RegExp) {
  return (error: unknown) => {
    assert.ok(error instanceof NbdError, `expected an NbdError, got ${String(error)}`);
    assert.equal(error.errno, errno, error.message);
    if (typeof message === "string") assert.equal(error.message, message);
    else assert.match(error.message, message);
    return true;
  };
}

test("a server that accepts and never greets: the handshake times out, naming the remote without its password", async (t) => {
  const port = await startMuteListener(t);
  const uri = `nbd://admin:secret@127.0.0.1:${port}/disk`;
  const expected = `NBD handshake with nbd://admin:xxxxx@127.0.0.1:${port}/disk timed out after 0.3 s (server accepted the connection but sent no greeting)`;
  const started = Date.now();
  await assert.rejects(NbdClient.connect(uri, { handshakeTimeoutMs: 300 }), failsWith("ETIMEDOUT", expected));
  assert.ok(Date.now() - started < 2000, "gave up in time");
  await assert.rejects(NbdClient.listExports(uri, { handshakeTimeoutMs: 300 }), failsWith("ETIMEDOUT", expected));
});

test("a server that greets and then stops answering options times out in the handshake too", async (t) => {
  const dir = await makeTempDir((fn) => t.after(fn));
  const socketPath = join(dir, "mute.sock");
  const { server } = await startOldServer(socketPath, { replies: "pattern", silentAfterGreeting: true });
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  await assert.rejects(
    NbdClient.connect(`nbd+unix:///x?socket=${socketPath}`, { handshakeTimeoutMs: 200 }),
    failsWith("ETIMEDOUT", `NBD handshake with nbd+unix:///x?socket=${socketPath} timed out after 0.2 s (server greeted, then stopped answering options)`),
  );
});

test("a refused connection fails in the connect stage", async () => {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const port = (probe.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  await assert.rejects(
    NbdClient.connect(`nbd://127.0.0.1:${port}/x`),
    failsWith("ECONNREFUSED", new RegExp(`^NBD connect to nbd://127\\.0\\.0\\.1:${port}/x failed after \\d+\\.\\d s: connect ECONNREFUSED 127\\.0\\.0\\.1:${port}$`)),
  );
  await assert.rejects(
    NbdClient.connect("nbd:unix:/nonexistent/nbd.sock:exportname=x"),
    failsWith("ENOENT", /^NBD connect to nbd:unix:\/nonexistent\/nbd\.sock:exportname=x failed after \d+\.\d s: connect ENOENT \/nonexistent\/nbd\.sock$/),
  );
});

test("requests without any reply fail the connection in the request stage; slow replies do not", async (t) => {
  const dir = await makeTempDir((fn) => t.after(fn));
  const muteSocket = join(dir, "no-replies.sock");
  const { server: mute } = await startOldServer(muteSocket, { replies: "none" });
  t.after(() => new Promise<void>((resolve) => mute.close(() => resolve())));
  const client = await NbdClient.connect(`nbd+unix:///x?socket=${muteSocket}`, { requestTimeoutMs: 300 });
  const results = await Promise.allSettled([client.read(0, 10), client.read(10, 20)]);
  const expected = `NBD request to nbd+unix:///x?socket=${muteSocket} timed out after 0.3 s (no reply to 2 outstanding requests, the oldest a READ of 10 bytes at offset 0)`;
  for (const result of results) {
    assert.equal(result.status, "rejected");
    failsWith("ETIMEDOUT", expected)(result.reason);
  }
  await assert.rejects(client.read(0, 1), failsWith("ETIMEDOUT", expected));
  await client.close();

  // One reply every 200 ms: the last of four waits 800 ms, but the server never goes quiet for 300 ms.
  const slowSocket = join(dir, "slow.sock");
  const { server: slow } = await startOldServer(slowSocket, { replies: "pattern", delayMs: 200 });
  t.after(() => new Promise<void>((resolve) => slow.close(() => resolve())));
  const patient = await NbdClient.connect(`nbd+unix:///x?socket=${slowSocket}`, { requestTimeoutMs: 300 });
  const reads = await Promise.all([0, 1, 2, 3].map((i) => patient.read(i * 100, 100)));
  assert.deepEqual(
    reads.map((r) => r[0]),
    [0, 100, 200, 300].map((offset) => offset % 251),
  );
  await patient.close();
});
