// An HTTP/1.1 GET whose body arrives in the caller's reusable blocks. Node's HTTP client allocates a new
// 64 KiB buffer for every socket read; at export speeds that external memory made V8 run a full collection
// every ~23 MiB (89 per 2 GiB, measured with --trace-gc), more CPU than the bytes themselves. Here the socket
// reads (`onread`) straight into the blocks of a fixed pool where the body's bytes come unframed, else into
// one buffer of its own and are copied, and the socket waits while no block is free: backpressure, flat
// memory, no garbage per byte. The response framing (Content-Length, chunked, or until close, as xapi sends)
// is read here because no maintained client reads into caller-owned memory.
import { connect as netConnect, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import type { Block, BlockPool } from "../block-spool.ts";

export interface BlockAnswer {
  status: number;
  /** A header (lower-case name), the last one when repeated. */
  header(name: string): string | null;
  /** The body's blocks, in order, as they fill: the caller gives each back to the pool once done with it. */
  batches(): AsyncGenerator<Block[]>;
  /** The whole body as text (a refusal's few words; at most 64 KiB kept). */
  text(): Promise<string>;
  cancel(): void;
}

const READ_BUFFER = 256 * 1024;
/** A read between chunks of a chunked body: its framing and small chunks, and a little of the next data. */
const FRAMING_READ = 4096;
const MAX_HEAD = 64 * 1024;
const TEXT_LIMIT = 64 * 1024;

type Framing = { kind: "length"; left: number } | { kind: "chunked" } | { kind: "close" };

/** The response head: status and headers (names lower-case). */
function parseHead(text: string): { status: number; headers: Map<string, string> } {
  const [statusLine = "", ...lines] = text.split("\r\n");
  const match = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
  if (match === null) throw new Error(`not an HTTP response (${JSON.stringify(statusLine.slice(0, 60))})`);
  const headers = new Map<string, string>();
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return { status: Number(match[1]), headers };
}

function framingOf(status: number, headers: Map<string, string>): Framing {
  if (status === 204 || status === 304) return { kind: "length", left: 0 };
  if (/\bchunked\b/i.test(headers.get("transfer-encoding") ?? "")) return { kind: "chunked" };
  const length = headers.get("content-length");
  if (length !== undefined) {
    if (!/^\d+$/.test(length)) throw new Error(`a bad Content-Length (${length})`);
    return { kind: "length", left: Number(length) };
  }
  return { kind: "close" };
}

/**
 * GET `url` with `Connection: close`; resolves with the status and headers, the body still to be read into
 * `pool`'s blocks.
 */
export function getIntoBlocks(url: URL, pool: BlockPool): Promise<BlockAnswer> {
  return new Promise((resolveHead, rejectHead) => {
    const readBuffer = Buffer.allocUnsafeSlow(READ_BUFFER);
    /** The response head so far (one buffer), until it is complete. */
    let head: Buffer | undefined = Buffer.alloc(0);
    let framing: Framing | undefined;
    /** Chunked state: the size line being read, the data left in this chunk, the CRLF after it, the trailers. */
    let chunk: { phase: "size" | "data" | "crlf" | "trailer"; line: string; left: number } = { phase: "size", line: "", left: 0 };
    let bodyStart = 0;
    let current: Block | undefined;
    const full: Block[] = [];
    let ended = false;
    let failure: Error | undefined;
    let wake: (() => void) | undefined;

    const notify = () => {
      const resume = wake;
      wake = undefined;
      resume?.();
    };
    const fail = (error: Error) => {
      if (failure !== undefined || ended) return;
      failure = error;
      // Before the head was read (framing known), the caller is still waiting for the answer.
      if (framing === undefined) rejectHead(error);
      socket.destroy();
      notify();
    };
    const finish = () => {
      if (ended) return;
      if (current !== undefined && current.length > 0) full.push(current);
      else if (current !== undefined) pool.give(current);
      current = undefined;
      ended = true;
      socket.destroy();
      notify();
    };

    /** Copies body bytes into blocks; returns how many it took (fewer when no block is free). */
    const takeBody = (source: Buffer, offset: number, end: number): number => {
      let at = offset;
      while (at < end) {
        if (current === undefined) {
          current = pool.take();
          if (current === undefined) break;
          current.start = bodyStart;
        }
        const count = source.copy(current.buffer, current.length, at, Math.min(end, at + current.buffer.length - current.length));
        current.length += count;
        bodyStart += count;
        at += count;
        if (current.length === current.buffer.length) {
          full.push(current);
          current = undefined;
        }
      }
      if (at > offset) notify();
      return at - offset;
    };

    /** Reads `source[offset, end)` of the body's framing; returns where it stopped (end, or earlier when out of blocks). */
    const consumeBody = (source: Buffer, offset: number, end: number): number => {
      let at = offset;
      while (at < end && !ended && failure === undefined) {
        const frame = framing!;
        if (frame.kind === "close") {
          at += takeBody(source, at, end);
          if (at < end) return at;
        } else if (frame.kind === "length") {
          const took = takeBody(source, at, Math.min(end, at + frame.left));
          at += took;
          frame.left -= took;
          if (frame.left === 0) finish();
          else if (at < end) return at;
        } else if (chunk.phase === "data") {
          const took = takeBody(source, at, Math.min(end, at + chunk.left));
          at += took;
          chunk.left -= took;
          if (chunk.left === 0) chunk = { phase: "crlf", line: "", left: 2 };
          else if (at < end) return at;
        } else if (chunk.phase === "crlf") {
          if (source[at] !== (chunk.left === 2 ? 13 : 10)) {
            fail(new Error("a malformed chunked body"));
            return end;
          }
          chunk.left -= 1;
          at += 1;
          if (chunk.left === 0) chunk = { phase: "size", line: "", left: 0 };
        } else {
          // A size line, or a trailer line: read up to its LF.
          const lf = source.indexOf(10, at);
          const stop = lf === -1 || lf >= end ? end : lf;
          chunk.line += source.toString("latin1", at, stop);
          at = stop;
          if (chunk.line.length > 1024) {
            fail(new Error("a malformed chunked body"));
            return end;
          }
          if (stop === end) continue;
          at += 1;
          const line = chunk.line.replace(/\r$/, "");
          if (chunk.phase === "trailer") {
            if (line === "") finish();
            chunk.line = "";
            continue;
          }
          const digits = line.split(";")[0]!.trim();
          const size = Number.parseInt(digits, 16);
          if (!/^[0-9a-f]+$/i.test(digits) || !Number.isSafeInteger(size)) {
            fail(new Error(`a malformed chunk size (${JSON.stringify(line.slice(0, 40))})`));
            return end;
          }
          chunk = size === 0 ? { phase: "trailer", line: "", left: 0 } : { phase: "data", line: "", left: size };
        }
      }
      return end;
    };

    /** Waits for a block, then takes the rest of `source`; the socket stays paused until all of it is taken. */
    const waitForBlock = (source: Buffer, offset: number, end: number) => {
      pool.onGive(() => {
        if (failure !== undefined) return;
        const stopped = consumeBody(source, offset, end);
        if (stopped < end) waitForBlock(source, stopped, end);
        else if (!ended) socket.resume();
      });
    };

    /** Reads `source[offset, end)` of the body; false (pause the socket) when it could not all be taken yet. */
    const takeOrWait = (source: Buffer, offset: number, end: number): boolean => {
      const stopped = consumeBody(source, offset, end);
      if (stopped === end) return true;
      waitForBlock(source, stopped, end);
      return false;
    };

    /** The block memory the next socket read lands in (see `nextReadBuffer`), if it is one. */
    let direct: Buffer | undefined;
    /**
     * Where the next socket read lands: while the body's bytes come unframed (a Content-Length or closing body,
     * or inside a chunk), straight into the current block, limited to the bytes left in that frame, so the
     * copy from a read buffer into the block is not needed; else into `readBuffer`, copied from there.
     */
    const nextReadBuffer = (): Buffer => {
      direct = undefined;
      if (head !== undefined || framing === undefined || ended || failure !== undefined) return readBuffer;
      const left = framing.kind === "length" ? framing.left : framing.kind === "close" ? Number.POSITIVE_INFINITY : chunk.phase === "data" ? chunk.left : 0;
      if (left === 0) return readBuffer.subarray(0, FRAMING_READ);
      if (current === undefined) {
        current = pool.take();
        if (current === undefined) return readBuffer;
        current.start = bodyStart;
      }
      direct = current.buffer.subarray(current.length, current.length + Math.min(left, current.buffer.length - current.length));
      return direct;
    };

    /** `count` body bytes read straight into the current block. */
    const tookDirect = (count: number): void => {
      const block = current!;
      block.length += count;
      bodyStart += count;
      if (block.length === block.buffer.length) {
        full.push(block);
        current = undefined;
      }
      if (framing!.kind === "length") {
        framing!.left -= count;
        if (framing!.left === 0) finish();
      } else if (framing!.kind === "chunked") {
        chunk.left -= count;
        if (chunk.left === 0) chunk = { phase: "crlf", line: "", left: 2 };
      }
      notify();
    };

    /** A socket read: straight into a block, or into `readBuffer` (the head first, then the body). */
    const onRead = (count: number, source: Buffer): boolean => {
      if (direct !== undefined && source.buffer === direct.buffer && source.byteOffset === direct.byteOffset) {
        tookDirect(count);
        return true;
      }
      if (head === undefined) return takeOrWait(source, 0, count);
      const joined = Buffer.concat([head, source.subarray(0, count)]);
      const endOfHead = joined.indexOf("\r\n\r\n");
      if (endOfHead === -1) {
        if (joined.length > MAX_HEAD) fail(new Error("the response head is too large"));
        else head = joined;
        return true;
      }
      head = undefined;
      try {
        const parsed = parseHead(joined.toString("latin1", 0, endOfHead));
        framing = framingOf(parsed.status, parsed.headers);
        resolveHead(answer(parsed.status, parsed.headers));
      } catch (error) {
        fail(error as Error);
        return false;
      }
      if (framing.kind === "length" && framing.left === 0) finish();
      // The bytes after the head are in `joined` (a copy), not tied to the read buffer.
      return takeOrWait(joined, endOfHead + 4, joined.length);
    };

    async function* batches(): AsyncGenerator<Block[]> {
      for (;;) {
        if (full.length > 0) {
          yield full.splice(0);
          continue;
        }
        if (failure !== undefined) throw failure;
        if (ended) return;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    }

    const answer = (status: number, headers: Map<string, string>): BlockAnswer => ({
      status,
      header: (name) => headers.get(name.toLowerCase()) ?? null,
      batches,
      text: async () => {
        let text = "";
        for await (const batch of batches()) {
          for (const block of batch) {
            if (text.length < TEXT_LIMIT) text += block.buffer.toString("utf8", 0, Math.min(block.length, TEXT_LIMIT - text.length));
            pool.give(block);
          }
        }
        return text;
      },
      cancel: () => fail(new Error("cancelled")),
    });

    const options = {
      host: url.hostname.replace(/^\[|\]$/g, ""),
      port: Number(url.port || (url.protocol === "https:" ? 443 : 80)),
      onread: { buffer: nextReadBuffer, callback: onRead },
    };
    const socket: Socket = url.protocol === "https:" ? tlsConnect({ ...options, servername: /^[\d.]+$|:/.test(options.host) ? undefined : options.host }) : netConnect(options);
    socket.setNoDelay(true);
    socket.once(url.protocol === "https:" ? "secureConnect" : "connect", () => {
      socket.write(`GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nAccept: */*\r\nConnection: close\r\n\r\n`);
    });
    socket.on("error", (error) => fail(error));
    // A clean close ends a body framed by the connection (xapi's); any other body it cuts short.
    socket.on("close", (hadError) => {
      if (framing?.kind === "close" && !hadError) finish();
      else if (!ended) fail(new Error(framing === undefined ? "the connection closed before an answer" : "the connection closed before the end of the body"));
    });
  });
}
