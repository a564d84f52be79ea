// Client side of transmission: parses simple replies and structured reply chunks off the socket.
// Driven synchronously from socket reads (SocketReader.fill), like the server's request parser, so that
// when a chunk header announces read data, the next kernel read lands directly in the caller's buffer.

import type { Extent } from "./backend.ts";
import {
  CMD_BLOCK_STATUS,
  CMD_READ,
  errnoName,
  isErrorChunk,
  NbdError,
  readU64,
  REPLY_FLAG_DONE,
  REPLY_TYPE_BLOCK_STATUS,
  REPLY_TYPE_NONE,
  REPLY_TYPE_OFFSET_DATA,
  REPLY_TYPE_OFFSET_HOLE,
  SIMPLE_REPLY_MAGIC,
  STRUCTURED_REPLY_MAGIC,
} from "./protocol.ts";
import type { SocketReader } from "./socket-reader.ts";

/** What the parser needs to know about, and fills in for, one outstanding request. */
export interface AwaitedReply {
  readonly type: number;
  readonly offset: number;
  readonly length: number;
  /** Where READ data goes (length bytes). */
  readonly target: Buffer | null;
  covered: number;
  extents: Extent[] | null;
  error: NbdError | null;
}

export interface ReplyHooks {
  /** The outstanding request with this handle; throws when there is none. */
  lookup(handleHigh: number, handleLow: number): AwaitedReply;
  /** The request's reply is complete (check `error`). */
  complete(reply: AwaitedReply): void;
  /** The connection is unusable: protocol violation or socket gone. */
  failed(error: NbdError): void;
}

type Phase = "header" | "header-read" | "simple-data" | "chunk-read" | "data-offset" | "hole" | "chunk-payload" | "chunk-done" | "waiting" | "failed";

const SIMPLE_HEADER = 16;
const CHUNK_HEADER = 20;

export class ReplyParser {
  readonly #reader: SocketReader;
  readonly #baseAllocationId: number | null;
  readonly #hooks: ReplyHooks;
  readonly #header = Buffer.allocUnsafe(CHUNK_HEADER);
  readonly #meta = Buffer.allocUnsafe(12);
  #phase: Phase = "header";
  #next: Phase = "header";
  // The chunk being parsed.
  #reply: AwaitedReply | null = null;
  #flags = 0;
  #type = 0;
  #length = 0;
  #payload: Buffer | null = null;

  constructor(reader: SocketReader, baseAllocationId: number | null, hooks: ReplyHooks) {
    this.#reader = reader;
    this.#baseAllocationId = baseAllocationId;
    this.#hooks = hooks;
  }

  /** Parses everything available; called once to start, then re-entered from socket reads. */
  pump(): void {
    try {
      while (this.#step());
    } catch (error) {
      this.#fail(error instanceof NbdError ? error : new NbdError("EPROTO", (error as Error).message));
    }
  }

  readonly #resume = (): void => {
    this.#phase = this.#next;
    this.pump();
  };

  readonly #onFailed = (error: Error): void => this.#fail(new NbdError("ECONNRESET", error.message));

  /** Waits for `target` to be filled, then continues with `next`; false means "wait for a read". */
  #await(target: Buffer, next: Phase): boolean {
    this.#next = next;
    this.#phase = "waiting";
    if (!this.#reader.fill(target, this.#resume, this.#onFailed)) return false;
    this.#phase = next;
    return true;
  }

  /** One parsing step; returns whether parsing can continue synchronously. */
  #step(): boolean {
    switch (this.#phase) {
      case "header":
        return this.#await(this.#header.subarray(0, SIMPLE_HEADER), "header-read");
      case "header-read": {
        const magic = this.#header.readUInt32BE(0);
        if (magic === STRUCTURED_REPLY_MAGIC) return this.#await(this.#header.subarray(SIMPLE_HEADER, CHUNK_HEADER), "chunk-read");
        if (magic !== SIMPLE_REPLY_MAGIC) throw new NbdError("EPROTO", `bad reply magic 0x${magic.toString(16)}`);
        const reply = this.#hooks.lookup(this.#header.readUInt32BE(8), this.#header.readUInt32BE(12));
        const error = this.#header.readUInt32BE(4);
        this.#reply = reply;
        if (error !== 0) reply.error = replyError(error, "");
        else if (reply.type === CMD_READ) return this.#await(reply.target!, "simple-data");
        return this.#finishReply();
      }
      case "simple-data":
        this.#reply!.covered = this.#reply!.length;
        return this.#finishReply();
      case "chunk-read":
        return this.#readChunkHeader();
      case "data-offset": {
        const size = this.#length - 8;
        const at = this.#placeContent(readU64(this.#meta, 0), size);
        return this.#await(this.#reply!.target!.subarray(at, at + size), "chunk-done");
      }
      case "hole": {
        const size = this.#meta.readUInt32BE(8);
        const at = this.#placeContent(readU64(this.#meta, 0), size);
        this.#reply!.target!.fill(0, at, at + size);
        this.#phase = "chunk-done";
        return true;
      }
      case "chunk-payload":
        this.#readChunkPayload(this.#payload!);
        this.#payload = null;
        this.#phase = "chunk-done";
        return true;
      case "chunk-done":
        if ((this.#flags & REPLY_FLAG_DONE) === 0) {
          this.#reply = null;
          this.#phase = "header";
          return true;
        }
        return this.#finishReply();
      case "waiting":
      case "failed":
        return false;
    }
  }

  #readChunkHeader(): boolean {
    const header = this.#header;
    this.#flags = header.readUInt16BE(4);
    this.#type = header.readUInt16BE(6);
    this.#length = header.readUInt32BE(16);
    const reply = (this.#reply = this.#hooks.lookup(header.readUInt32BE(8), header.readUInt32BE(12)));
    switch (this.#type) {
      case REPLY_TYPE_OFFSET_DATA:
        if (reply.type !== CMD_READ || this.#length < 9) throw new NbdError("EPROTO", "unexpected data chunk");
        return this.#await(this.#meta.subarray(0, 8), "data-offset");
      case REPLY_TYPE_OFFSET_HOLE:
        if (reply.type !== CMD_READ || this.#length !== 12) throw new NbdError("EPROTO", "unexpected hole chunk");
        return this.#await(this.#meta, "hole");
      case REPLY_TYPE_NONE:
        if (this.#length !== 0) throw new NbdError("EPROTO", "NONE chunk with payload");
        this.#phase = "chunk-done";
        return true;
      default:
        if (this.#type !== REPLY_TYPE_BLOCK_STATUS && !isErrorChunk(this.#type)) {
          throw new NbdError("EPROTO", `unexpected chunk type ${this.#type}`);
        }
        this.#payload = Buffer.allocUnsafe(this.#length);
        return this.#await(this.#payload, "chunk-payload");
    }
  }

  /** Checks a content chunk lies inside its request; returns its position in the target. */
  #placeContent(offset: number, size: number): number {
    const reply = this.#reply!;
    const at = offset - reply.offset;
    if (at < 0 || size === 0 || at + size > reply.length) throw new NbdError("EPROTO", "read chunk outside the request");
    reply.covered += size;
    return at;
  }

  #readChunkPayload(data: Buffer): void {
    const reply = this.#reply!;
    if (this.#type === REPLY_TYPE_BLOCK_STATUS) {
      if (reply.type !== CMD_BLOCK_STATUS || data.length < 12 || (data.length - 4) % 8 !== 0) {
        throw new NbdError("EPROTO", "unexpected block status chunk");
      }
      if (data.readUInt32BE(0) !== this.#baseAllocationId) return;
      const extents: Extent[] = [];
      for (let at = 4; at < data.length; at += 8) extents.push({ length: data.readUInt32BE(at), flags: data.readUInt32BE(at + 4) });
      reply.extents = extents;
      return;
    }
    // An error chunk: error, message length, message (ERROR_OFFSET adds an offset we do not need).
    if (data.length < 6) throw new NbdError("EPROTO", "short error chunk");
    const messageLength = Math.min(data.readUInt16BE(4), data.length - 6);
    reply.error ??= replyError(data.readUInt32BE(0), data.toString("utf8", 6, 6 + messageLength));
  }

  #finishReply(): boolean {
    const reply = this.#reply!;
    this.#reply = null;
    this.#phase = "header";
    if (reply.error === null && reply.type === CMD_READ && reply.covered !== reply.length) {
      reply.error = new NbdError("EIO", "server did not send the whole read");
    }
    if (reply.error === null && reply.type === CMD_BLOCK_STATUS && reply.extents === null) {
      reply.error = new NbdError("EIO", "server sent no base:allocation extents");
    }
    this.#hooks.complete(reply);
    return true;
  }

  #fail(error: NbdError): void {
    if (this.#phase === "failed") return;
    this.#phase = "failed";
    this.#hooks.failed(error);
  }
}

function replyError(errno: number, message: string): NbdError {
  return new NbdError(errnoName(errno), message === "" ? "request failed" : message);
}
