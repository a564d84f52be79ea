// The block GET against raw servers: every body framing (length, chunked, until close) arriving in odd
// pieces, a pool smaller than the body (the socket waits, the bytes stay right), and cut or malformed
// answers failing in words.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { createServer as createHttpServer } from "node:http";
import { createServer, type Socket } from "node:net";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { BlockPool } from "../block-spool.ts";
import { type BlockAnswer, getIntoBlocks } from "./block-get.ts";

/** A server that answers each connection with `write(socket)` once the request head has arrived. */
async function rawServer(write: (socket: Socket) => Promise<void>): Promise<{ url: URL; close: () => void }> {
  const server = createServer((socket) => {
    let head = "";
    socket.on("data", (data) => {
      head += data.toString("latin1");
      if (head.includes("\r\n\r\n")) {
        socket.removeAllListeners("data");
        void write(socket).catch(() => socket.destroy());
      }
    });
    socket.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return { url: new URL(`http://127.0.0.1:${port}/export?x=1`), close: () => server.close() };
}

/** Writes `data` in pieces of varying size, with pauses, so framing lands across reads. */
async function dribble(socket: Socket, data: Buffer): Promise<void> {
  let at = 0;
  let step = 1;
  while (at < data.length) {
    const size = Math.min(data.length - at, step);
    socket.write(data.subarray(at, at + size));
    at += size;
    step = step > 200_000 ? 1 : step * 7 + 3;
    await sleep(0);
  }
}

/** Reads the whole body, giving blocks back only after `holdMs` (a slow disk). */
async function readAll(answer: BlockAnswer, pool: BlockPool, holdMs = 0): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const batch of answer.batches()) {
    for (const block of batch) parts.push(Buffer.from(block.buffer.subarray(0, block.length)));
    if (holdMs > 0) await sleep(holdMs);
    for (const block of batch) pool.give(block);
  }
  return Buffer.concat(parts);
}

function chunked(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  for (let at = 0, size = 1; at < body.length; at += size, size = (size * 13 + 5) % 300_000 || 1) {
    const piece = body.subarray(at, at + size);
    parts.push(Buffer.from(`${piece.length.toString(16)};ext=1\r\n`), piece, Buffer.from("\r\n"));
  }
  parts.push(Buffer.from("0\r\nx-trailer: yes\r\n\r\n"));
  return Buffer.concat(parts);
}

const sha = (data: Buffer) => createHash("sha256").update(data).digest("hex");

test("block GET: every framing, in pieces, through a pool smaller than the body", async (t) => {
  const body = randomBytes(5 * 1024 * 1024 + 12345);
  const heads = {
    length: `HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\netag: "e1"\r\n\r\n`,
    chunked: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nETag: "e2"\r\n\r\n',
    close: 'HTTP/1.1 200 OK\r\nConnection: close\r\netag: "e3"\r\n\r\n',
  } as const;
  for (const [kind, head] of Object.entries(heads)) {
    await t.test(kind, async () => {
      const server = await rawServer(async (socket) => {
        await dribble(socket, Buffer.concat([Buffer.from(head), kind === "chunked" ? chunked(body) : body]));
        if (kind === "close") socket.end();
      });
      t.after(server.close);
      // Two blocks of 256 KiB for a 5 MiB body: the socket must wait for the consumer again and again.
      const pool = new BlockPool(2, 256 * 1024);
      const answer = await getIntoBlocks(server.url, pool);
      assert.equal(answer.status, 200);
      assert.equal(answer.header("ETag"), `"e${Object.keys(heads).indexOf(kind) + 1}"`);
      const got = await readAll(answer, pool, 2);
      assert.equal(got.length, body.length);
      assert.equal(sha(got), sha(body));
    });
  }
});

test("block GET: a block's `start` is its offset in the body, and `find` sees blocks until they are reused", async (t) => {
  const body = Buffer.alloc(3 * 1024 * 1024);
  for (let i = 0; i < body.length; i += 4) body.writeUInt32BE(i, i);
  const server = await rawServer(async (socket) => void socket.end(Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`), body])));
  t.after(server.close);
  const pool = new BlockPool(4, 1024 * 1024);
  const answer = await getIntoBlocks(server.url, pool);
  for await (const batch of answer.batches()) {
    for (const block of batch) {
      assert.equal(block.buffer.readUInt32BE(0), block.start);
      assert.equal(pool.find(block.start + 100), block);
      pool.give(block);
    }
  }
  assert.equal(pool.find(body.length), undefined);
});

test("block GET: refusals are read as text; cut and malformed answers fail in words", async (t) => {
  await t.test("a refusal's body as text", async () => {
    const refusal = "HANDLE_INVALID VM OpaqueRef:x";
    const server = await rawServer(async (socket) => void socket.end(`HTTP/1.1 404 Not Found\r\ncontent-length: ${refusal.length}\r\n\r\n${refusal}`));
    t.after(server.close);
    const pool = new BlockPool(2, 1024);
    const answer = await getIntoBlocks(server.url, pool);
    assert.equal(answer.status, 404);
    assert.equal(await answer.text(), refusal);
  });
  const cases: [string, string, RegExp][] = [
    ["a body cut short", "HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\nonly this", /closed before the end of the body/],
    ["a chunked body cut short", "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n", /closed before the end of the body/],
    ["a bad chunk size", "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", /malformed chunk size/],
    ["a chunk without its CRLF", "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabXY", /malformed chunked body/],
  ];
  for (const [name, reply, error] of cases) {
    await t.test(name, async () => {
      const server = await rawServer(async (socket) => void socket.end(reply));
      t.after(server.close);
      const pool = new BlockPool(2, 1024);
      const answer = await getIntoBlocks(server.url, pool);
      await assert.rejects(readAll(answer, pool), error);
    });
  }
  await t.test("not HTTP, and no answer at all", async () => {
    const garbage = await rawServer(async (socket) => void socket.end("SSH-2.0-OpenSSH\r\n\r\n"));
    t.after(garbage.close);
    await assert.rejects(getIntoBlocks(garbage.url, new BlockPool(1, 1024)), /not an HTTP response/);
    const silent = await rawServer(async (socket) => void socket.end());
    t.after(silent.close);
    await assert.rejects(getIntoBlocks(silent.url, new BlockPool(1, 1024)), /closed before an answer/);
    await assert.rejects(getIntoBlocks(new URL("http://127.0.0.1:1/"), new BlockPool(1, 1024)), /ECONNREFUSED/);
  });
});

test("block GET: Node's own HTTP server (chunked, keep-alive offered) is read to the byte", async (t) => {
  const body = randomBytes(3 * 1024 * 1024 + 7);
  const server = createHttpServer((_, response) => {
    response.writeHead(200, { etag: '"n"' });
    let at = 0;
    const next = () => {
      while (at < body.length) {
        const piece = body.subarray(at, at + 100_000);
        at += piece.length;
        if (!response.write(piece)) return void response.once("drain", next);
      }
      response.end();
    };
    next();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => server.close());
  const pool = new BlockPool(3, 1024 * 1024);
  const answer = await getIntoBlocks(new URL(`http://127.0.0.1:${(server.address() as { port: number }).port}/`), pool);
  assert.equal(sha(await readAll(answer, pool)), sha(body));
});
