// One NBD connection on the server: handshake, then pipelined request processing.
// Requests are started as soon as they are parsed and replies are written as they complete. Read data
// goes from the backend straight into a pooled buffer, and a reply's header(s) and data leave in one
// writev. READs parsed in one go that follow each other on disk (a sequential reader's pipeline) share
// one backend read: a backend read is a thread-pool round trip, which costs per call, not per byte.
// In-flight work is bounded by count and bytes; while the bound is reached we stop parsing, the reader
// stops consuming the socket and TCP/unix flow control pushes back on the client.

import type { Socket } from "node:net";
import { STATE_ZERO, type ExportBackend, type Extent } from "./backend.ts";
import type { BufferPool } from "../buffer-pool.ts";
import { negotiate, type ExportCatalog, type Session } from "./negotiation.ts";
import {
  CHUNK_HEADER_SIZE,
  CMD_BLOCK_STATUS,
  CMD_DISC,
  CMD_FLAG_DF,
  CMD_FLAG_FUA,
  CMD_FLAG_NO_HOLE,
  CMD_FLAG_REQ_ONE,
  CMD_FLUSH,
  CMD_READ,
  CMD_TRIM,
  CMD_WRITE,
  CMD_WRITE_ZEROES,
  decodeRequestHeader,
  encodeBlockStatusChunk,
  encodeErrorChunk,
  ERRNO,
  errnoOf,
  MAX_REQUEST_SIZE,
  REPLY_FLAG_DONE,
  REPLY_TYPE_OFFSET_DATA,
  REPLY_TYPE_OFFSET_HOLE,
  REQUEST_HEADER_SIZE,
  SIMPLE_REPLY_HEADER_SIZE,
  writeChunkHeader,
  writeSimpleReplyHeader,
  writeU64,
  type RequestHeader,
} from "./protocol.ts";
import type { SocketReader } from "./socket-reader.ts";

/**
 * Few requests in flight (qemu-nbd allows 16 too): the backend cannot run more than the thread pool's
 * four reads at a time anyway, and a small working set of I/O buffers stays in cache between the read
 * that fills a buffer and the write that sends it (64 in flight cost ~20% more CPU per byte on tmpfs).
 */
const MAX_IN_FLIGHT_REQUESTS = 16;
const MAX_IN_FLIGHT_BYTES = 64 * 1024 * 1024;
/** Largest backend read made for contiguous READs merged together. */
const MAX_MERGED_READ = 2 * 1024 * 1024;
/** Cap on descriptors in one block-status reply (the client asks again for the rest). */
const MAX_EXTENTS = 65536;
/** How long a connection may take to hang up after we half-closed it on shutdown. */
const SHUTDOWN_GRACE_MS = 2000;

/** Command flags each command may carry (FUA is accepted everywhere, as proto.md requires). */
const ALLOWED_FLAGS: Record<number, number> = {
  [CMD_READ]: CMD_FLAG_FUA | CMD_FLAG_DF,
  [CMD_WRITE]: CMD_FLAG_FUA,
  [CMD_FLUSH]: CMD_FLAG_FUA,
  [CMD_TRIM]: CMD_FLAG_FUA,
  [CMD_WRITE_ZEROES]: CMD_FLAG_FUA | CMD_FLAG_NO_HOLE,
  [CMD_BLOCK_STATUS]: CMD_FLAG_FUA | CMD_FLAG_REQ_ONE,
};

class RequestError extends Error {
  readonly errno: number;
  constructor(errno: number, message: string) {
    super(message);
    this.errno = errno;
  }
}

export class NbdConnection {
  readonly #socket: Socket;
  readonly #reader: SocketReader;
  readonly #catalog: ExportCatalog;
  readonly #pool: BufferPool;
  #session: Session | null = null;
  #inFlight = 0;
  #inFlightBytes = 0;
  #onRelease: (() => void) | null = null;
  #resumeParser: (() => void) | null = null;
  /** READs parsed in the current turn, issued together from a microtask. */
  #reads: RequestHeader[] = [];
  #stopping = false;
  readonly #closed: Promise<void>;

  /** `socket` must have been adopted with allowHalfOpen: we end our side once in-flight replies are out. */
  constructor(socket: Socket, reader: SocketReader, catalog: ExportCatalog, pool: BufferPool) {
    this.#socket = socket;
    this.#reader = reader;
    this.#catalog = catalog;
    this.#pool = pool;
    socket.setNoDelay(true);
    this.#closed = new Promise((resolve) => socket.once("close", () => resolve()));
  }

  /** The export this connection is attached to, once the handshake is over. */
  get exportName(): string | null {
    return this.#session?.entry.name ?? null;
  }

  /** Serves the connection until it closes; never rejects. */
  async serve(): Promise<void> {
    try {
      this.#session = await negotiate(this.#socket, this.#reader, this.#catalog);
      if (this.#session !== null) await this.#transmit(this.#session);
    } catch {
      // Peer went away or broke the protocol: nothing to answer to.
    }
    await this.#finish();
  }

  /**
   * Graceful stop: requests already received are completed and answered, later ones get ESHUTDOWN,
   * then the connection is closed.
   */
  async shutdown(): Promise<void> {
    this.#stopping = true;
    if (this.#session === null) this.#socket.destroy();
    else this.#endWhenIdle();
    await this.#closed;
  }

  /**
   * Runs the request parser until DISC, a broken stream or the socket closing. The parser is driven
   * synchronously from socket reads (SocketReader.fill) rather than by awaiting: that way a WRITE's
   * payload buffer is registered before the next read is issued, and the kernel reads straight into it.
   */
  #transmit(session: Session): Promise<void> {
    return new Promise((resolve) => {
      const parser = new RequestParser(this.#reader, this.#pool, {
        admit: () => this.#inFlight < MAX_IN_FLIGHT_REQUESTS && this.#inFlightBytes < MAX_IN_FLIGHT_BYTES,
        check: (request) => this.#check(session, request),
        start: (request, payload, problem) => this.#start(session, request, payload, problem),
        end: (broken) => {
          if (broken) this.#socket.destroy(); // bad magic: the stream cannot be resynchronised
          resolve();
        },
      });
      this.#resumeParser = () => parser.pump();
      parser.pump();
    });
  }

  #start(session: Session, request: RequestHeader, payload: Buffer | null, problem: RequestError | null): void {
    const cost = request.type === CMD_READ || request.type === CMD_WRITE ? request.length : 0;
    this.#inFlight++;
    this.#inFlightBytes += cost;
    if (problem === null && this.#stopping) problem = new RequestError(ERRNO.ESHUTDOWN, "server is shutting down");
    if (problem === null && request.type === CMD_READ) {
      if (this.#reads.push(request) === 1) queueMicrotask(() => this.#issueReads(session));
      return;
    }
    void this.#answer(session, request, payload, problem, cost);
  }

  async #answer(session: Session, request: RequestHeader, payload: Buffer | null, problem: RequestError | null, cost: number): Promise<void> {
    let reply: Buffer;
    try {
      if (problem !== null) throw problem;
      reply = await this.#execute(session, request, payload);
    } catch (error) {
      reply = this.#errorReply(session, request, error);
    }
    // The backend is done with the payload once its promise settled (ExportBackend contract).
    if (payload !== null) this.#pool.give(payload);
    this.#send([reply], 1, cost, null);
  }

  /** Issues the READs parsed in this turn: each run of contiguous requests gets one backend read. */
  #issueReads(session: Session): void {
    const reads = this.#reads;
    this.#reads = [];
    let first = 0;
    for (let i = 1; i <= reads.length; i++) {
      const previous = reads[i - 1]!;
      const next = reads[i];
      const follows = next !== undefined && next.offset === previous.offset + previous.length;
      if (follows && next.offset + next.length - reads[first]!.offset <= MAX_MERGED_READ) continue;
      void this.#answerReads(session, reads.slice(first, i));
      first = i;
    }
  }

  /** Reads a run of contiguous READs into one pooled buffer and answers each; a failure fails them all. */
  async #answerReads(session: Session, group: RequestHeader[]): Promise<void> {
    const last = group[group.length - 1]!;
    const length = last.offset + last.length - group[0]!.offset;
    let data: Buffer | null = this.#pool.take(length);
    let parts: Buffer[];
    try {
      parts = session.structuredReplies ? await this.#readChunks(session, group, data) : await this.#readSimple(session, group, data);
    } catch (error) {
      this.#pool.give(data);
      data = null;
      parts = group.map((request) => this.#errorReply(session, request, error));
    }
    this.#send(parts, group.length, length, data);
  }

  /**
   * Writes the replies of `count` requests (all their buffers leave in one writev), then frees their
   * slots and gives `data`, which the replies point into, back to the pool.
   */
  #send(parts: Buffer[], count: number, cost: number, data: Buffer | null): void {
    if (!this.#socket.writable) return this.#release(count, cost, data);
    this.#socket.cork();
    for (let i = 0; i < parts.length - 1; i++) this.#socket.write(parts[i]!);
    this.#socket.write(parts[parts.length - 1]!, () => this.#release(count, cost, data));
    this.#socket.uncork();
  }

  /** Replies are out (or dropped): their data buffer can be reused and their slots freed. */
  #release(count: number, cost: number, data: Buffer | null): void {
    if (data !== null) this.#pool.give(data);
    this.#inFlight -= count;
    this.#inFlightBytes -= cost;
    const wake = this.#onRelease;
    this.#onRelease = null;
    wake?.();
    this.#resumeParser?.();
    if (this.#stopping) this.#endWhenIdle();
  }

  /** Validates a request against proto.md's rules; returns the error to answer with, if any. */
  #check(session: Session, request: RequestHeader): RequestError | null {
    const { type, flags, offset, length } = request;
    const allowed = ALLOWED_FLAGS[type];
    if (allowed === undefined) return new RequestError(ERRNO.EINVAL, `unknown command ${type}`);
    if ((flags & ~allowed) !== 0) return new RequestError(ERRNO.EINVAL, `flags 0x${flags.toString(16)} not valid here`);
    if ((flags & CMD_FLAG_DF) !== 0 && !session.structuredReplies) {
      return new RequestError(ERRNO.EINVAL, "DF needs structured replies");
    }
    const backend = session.entry.backend;
    const writes = type === CMD_WRITE || type === CMD_TRIM || type === CMD_WRITE_ZEROES;
    if (writes && backend.readOnly) return new RequestError(ERRNO.EPERM, "export is read-only");
    if (type === CMD_FLUSH) return null;
    if (type === CMD_BLOCK_STATUS && session.baseAllocationId === null) {
      return new RequestError(ERRNO.EINVAL, "no metadata context negotiated");
    }
    if ((type === CMD_READ || type === CMD_WRITE) && length > MAX_REQUEST_SIZE) {
      return new RequestError(ERRNO.EINVAL, `request of ${length} bytes exceeds ${MAX_REQUEST_SIZE}`);
    }
    if (length === 0) return new RequestError(ERRNO.EINVAL, "zero-length request");
    if (offset > backend.size || length > backend.size - offset) {
      // proto.md: ENOSPC for writes past the end, EINVAL for everything else.
      const errno = type === CMD_WRITE || type === CMD_WRITE_ZEROES ? ERRNO.ENOSPC : ERRNO.EINVAL;
      return new RequestError(errno, `range ${offset}+${length} is beyond the export size ${backend.size}`);
    }
    return null;
  }

  /** Everything but READ (see #answerReads); resolves to the reply. */
  async #execute(session: Session, request: RequestHeader, payload: Buffer | null): Promise<Buffer> {
    const backend = session.entry.backend;
    const { offset, length, flags } = request;
    const fua = (flags & CMD_FLAG_FUA) !== 0;
    switch (request.type) {
      case CMD_WRITE:
        await backend.write(offset, payload!, { fua });
        break;
      case CMD_FLUSH:
        await backend.flush();
        break;
      case CMD_TRIM:
        await backend.trim(offset, length);
        if (fua) await backend.flush();
        break;
      case CMD_WRITE_ZEROES:
        await backend.writeZeroes(offset, length, { noHole: (flags & CMD_FLAG_NO_HOLE) !== 0, fua });
        break;
      case CMD_BLOCK_STATUS: {
        let extents = clampExtents(await backend.blockStatus(offset, length), length);
        if ((flags & CMD_FLAG_REQ_ONE) !== 0) extents = extents.slice(0, 1);
        if (extents.length === 0) extents = [{ length, flags: 0 }];
        return encodeBlockStatusChunk(request.handleHigh, request.handleLow, session.baseAllocationId!, extents);
      }
    }
    return simpleReply(request, 0);
  }

  /** Simple replies for a group: one read of the whole range, then header and slice per request. */
  async #readSimple(session: Session, group: RequestHeader[], data: Buffer): Promise<Buffer[]> {
    await session.entry.backend.read(group[0]!.offset, data);
    const parts: Buffer[] = [];
    let at = 0;
    for (const request of group) parts.push(simpleReply(request, 0), data.subarray(at, (at += request.length)));
    return parts;
  }

  /**
   * Structured replies for a group: per request, OFFSET_HOLE chunks where the backend says the range
   * reads as zeros (unless DF), OFFSET_DATA elsewhere. Data runs, across request boundaries, are read into
   * `data` with one backend read each; data chunks point into it.
   */
  async #readChunks(session: Session, group: RequestHeader[], data: Buffer): Promise<Buffer[]> {
    const backend = session.entry.backend;
    const offset = group[0]!.offset;
    const dataOnly = group.every((request) => (request.flags & CMD_FLAG_DF) !== 0);
    const segments = dataOnly ? [{ length: data.length, zero: false }] : await readSegments(backend, offset, data.length);
    const parts: Buffer[] = [];
    const runs: { start: number; end: number }[] = []; // ranges of `data` to read
    let segment = 0;
    let segmentEnd = segments[0]!.length;
    let at = 0;
    for (const request of group) {
      const { handleHigh, handleLow } = request;
      const end = at + request.length;
      const df = (request.flags & CMD_FLAG_DF) !== 0;
      while (at < end) {
        while (segmentEnd <= at) segmentEnd += segments[++segment]!.length;
        const pieceEnd = df ? end : Math.min(end, segmentEnd);
        const flags = pieceEnd === end ? REPLY_FLAG_DONE : 0;
        if (!df && segments[segment]!.zero) {
          const chunk = Buffer.allocUnsafe(CHUNK_HEADER_SIZE + 12);
          writeChunkHeader(chunk, 0, flags, REPLY_TYPE_OFFSET_HOLE, handleHigh, handleLow, 12);
          writeU64(chunk, offset + at, CHUNK_HEADER_SIZE);
          chunk.writeUInt32BE(pieceEnd - at, CHUNK_HEADER_SIZE + 8);
          parts.push(chunk);
        } else {
          const header = Buffer.allocUnsafe(CHUNK_HEADER_SIZE + 8);
          writeChunkHeader(header, 0, flags, REPLY_TYPE_OFFSET_DATA, handleHigh, handleLow, 8 + pieceEnd - at);
          writeU64(header, offset + at, CHUNK_HEADER_SIZE);
          parts.push(header, data.subarray(at, pieceEnd));
          const run = runs[runs.length - 1];
          if (run !== undefined && run.end === at) run.end = pieceEnd;
          else runs.push({ start: at, end: pieceEnd });
        }
        at = pieceEnd;
      }
    }
    if (runs.length === 1) {
      // The usual case, all data: one read, nothing to collect.
      await backend.read(offset + runs[0]!.start, data.subarray(runs[0]!.start, runs[0]!.end));
      return parts;
    }
    const reads = runs.map((run) => backend.read(offset + run.start, data.subarray(run.start, run.end)));
    // Wait for every read before deciding: a failed one must not free the buffer under the others.
    const failure = (await Promise.allSettled(reads)).find((result) => result.status === "rejected");
    if (failure !== undefined) throw failure.reason;
    return parts;
  }

  #errorReply(session: Session, request: RequestHeader, error: unknown): Buffer {
    const errno = error instanceof RequestError ? error.errno : errnoOf(error);
    if (!session.structuredReplies) return simpleReply(request, errno);
    const message = error instanceof Error ? error.message : String(error);
    return encodeErrorChunk(request.handleHigh, request.handleLow, errno, message);
  }

  #endWhenIdle(): void {
    if (this.#inFlight > 0 || this.#socket.writableEnded) return;
    this.#socket.end();
    setTimeout(() => this.#socket.destroy(), SHUTDOWN_GRACE_MS).unref();
  }

  /** After DISC, EOF or an error: let in-flight requests finish (proto.md), then close. */
  async #finish(): Promise<void> {
    this.#resumeParser = null;
    while (this.#inFlight > 0) await new Promise<void>((resolve) => (this.#onRelease = resolve));
    this.#socket.destroySoon(); // flushes queued replies, then closes
    await this.#closed;
  }
}

function simpleReply(request: RequestHeader, errno: number): Buffer {
  const out = Buffer.allocUnsafe(SIMPLE_REPLY_HEADER_SIZE);
  writeSimpleReplyHeader(out, 0, errno, request.handleHigh, request.handleLow);
  return out;
}

/** Backend extents cut to the request: no empty extents, equal neighbours merged, total ≤ length. */
function clampExtents(extents: readonly Extent[], length: number): Extent[] {
  const out: Extent[] = [];
  let covered = 0;
  for (const extent of extents) {
    if (covered >= length || out.length >= MAX_EXTENTS) break;
    if (!(extent.length > 0)) continue;
    const size = Math.min(Math.floor(extent.length), length - covered);
    const flags = extent.flags & 3; // base:allocation defines two bits; the rest SHOULD be zero
    const last = out[out.length - 1];
    if (last !== undefined && last.flags === flags) last.length += size;
    else out.push({ length: size, flags });
    covered += size;
  }
  return out;
}

/** Splits a range into runs that read as zeros and runs that need data; backend errors mean "all data". */
async function readSegments(backend: ExportBackend, offset: number, length: number): Promise<{ length: number; zero: boolean }[]> {
  let extents: Extent[];
  try {
    extents = clampExtents(await backend.blockStatus(offset, length), length);
  } catch {
    extents = [];
  }
  const segments: { length: number; zero: boolean }[] = [];
  let covered = 0;
  for (const extent of extents) {
    const zero = (extent.flags & STATE_ZERO) !== 0;
    const last = segments[segments.length - 1];
    if (last !== undefined && last.zero === zero) last.length += extent.length;
    else segments.push({ length: extent.length, zero });
    covered += extent.length;
  }
  // Whatever the backend did not describe is read as data.
  if (covered < length) {
    const last = segments[segments.length - 1];
    if (last !== undefined && !last.zero) last.length += length - covered;
    else segments.push({ length: length - covered, zero: false });
  }
  return segments;
}

interface ParserHooks {
  /** Whether another request may start (in-flight bound). */
  admit(): boolean;
  check(request: RequestHeader): RequestError | null;
  start(request: RequestHeader, payload: Buffer | null, problem: RequestError | null): void;
  /** Transmission is over: DISC, the socket closed, or (`broken`) a request header was garbage. */
  end(broken: boolean): void;
}

/** Request framing as a state machine: header, then (for WRITE) payload, then start the request. */
class RequestParser {
  readonly #reader: SocketReader;
  readonly #pool: BufferPool;
  readonly #hooks: ParserHooks;
  readonly #header = Buffer.allocUnsafe(REQUEST_HEADER_SIZE);
  #state: "idle" | "header" | "payload" | "done" = "idle";
  #request: RequestHeader | null = null;
  #payload: Buffer | null = null;
  #problem: RequestError | null = null;

  constructor(reader: SocketReader, pool: BufferPool, hooks: ParserHooks) {
    this.#reader = reader;
    this.#pool = pool;
    this.#hooks = hooks;
  }

  /** Parses and starts as many requests as are available and admitted; safe to call any time. */
  pump(): void {
    while (this.#state === "idle" && this.#hooks.admit()) {
      this.#state = "header";
      if (!this.#reader.fill(this.#header, this.#onHeader, this.#onFailed)) return;
      if (!this.#parseHeader()) return;
    }
  }

  readonly #onHeader = (): void => {
    if (this.#parseHeader()) this.pump();
  };

  readonly #onPayload = (): void => {
    this.#dispatch();
    this.pump();
  };

  readonly #onFailed = (): void => this.#finish(false);

  /** Returns true when the request was started and parsing can go on synchronously. */
  #parseHeader(): boolean {
    const request = decodeRequestHeader(this.#header);
    if (request === null || request.type === CMD_DISC) {
      this.#finish(request === null);
      return false;
    }
    this.#request = request;
    this.#problem = this.#hooks.check(request);
    if (request.type === CMD_WRITE) {
      this.#state = "payload";
      if (this.#problem === null) {
        this.#payload = this.#pool.take(request.length);
        if (!this.#reader.fill(this.#payload, this.#onPayload, this.#onFailed)) return false;
      } else if (!this.#reader.skip(request.length, this.#onPayload, this.#onFailed)) {
        return false;
      }
    }
    this.#dispatch();
    return true;
  }

  #dispatch(): void {
    const request = this.#request!;
    const payload = this.#payload;
    const problem = this.#problem;
    this.#request = this.#payload = this.#problem = null;
    this.#state = "idle";
    this.#hooks.start(request, payload, problem);
  }

  #finish(broken: boolean): void {
    if (this.#state === "done") return;
    this.#state = "done";
    this.#hooks.end(broken);
  }
}
