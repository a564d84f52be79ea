// NbdClient: fixed-newstyle NBD client with structured replies, base:allocation and pipelining.
// Requests may be issued concurrently; replies are matched by handle. Reads land directly in the
// caller's result buffer (one copy from the socket), writes go out as header + payload without copying.

import net from "node:net";
import type { Extent } from "./backend.ts";
import {
  BASE_ALLOCATION,
  CMD_BLOCK_STATUS,
  CMD_DISC,
  CMD_FLAG_FUA,
  CMD_FLAG_NO_HOLE,
  CMD_FLUSH,
  CMD_READ,
  CMD_TRIM,
  CMD_WRITE,
  CMD_WRITE_ZEROES,
  decodeOptionReplyHeader,
  decodeServerReply,
  encodeInfoRequest,
  encodeMetaContextRequest,
  encodeOption,
  encodeRequestHeader,
  FLAG_C_FIXED_NEWSTYLE,
  FLAG_C_NO_ZEROES,
  FLAG_CAN_MULTI_CONN,
  FLAG_FIXED_NEWSTYLE,
  FLAG_NO_ZEROES,
  FLAG_READ_ONLY,
  FLAG_SEND_FLUSH,
  FLAG_SEND_FUA,
  FLAG_SEND_TRIM,
  FLAG_SEND_WRITE_ZEROES,
  IHAVEOPT,
  INFO_BLOCK_SIZE,
  INFO_DESCRIPTION,
  INFO_EXPORT,
  isOptionError,
  MAX_REQUEST_SIZE,
  NBD_MAGIC,
  NbdError,
  OLDSTYLE_MAGIC,
  OPT_ABORT,
  OPT_EXPORT_NAME,
  OPT_GO,
  OPT_INFO,
  OPT_LIST,
  OPT_SET_META_CONTEXT,
  OPT_STRUCTURED_REPLY,
  readU64,
  REP_ACK,
  REP_ERR_INVALID,
  REP_ERR_POLICY,
  REP_ERR_SHUTDOWN,
  REP_ERR_TLS_REQD,
  REP_ERR_UNKNOWN,
  REP_ERR_UNSUP,
  REP_INFO,
  REP_META_CONTEXT,
  REP_SERVER,
  type BlockSizes,
} from "./protocol.ts";
import { ReplyParser, type AwaitedReply } from "./reply-parser.ts";
import { SocketReader } from "./socket-reader.ts";
import { parseNbdUri, type NbdTarget } from "./uri.ts";

export { NbdError } from "./protocol.ts";

export interface ExportListing {
  name: string;
  description: string;
}

export interface ExportDetails {
  name: string;
  size: number;
  /** Raw NBD transmission flags. */
  flags: number;
  readOnly: boolean;
  description: string;
  blockSizes: BlockSizes | null;
}

interface Negotiated {
  size: number;
  flags: number;
  structuredReplies: boolean;
  baseAllocationId: number | null;
  description: string;
  blockSizes: BlockSizes | null;
}

interface Pending extends AwaitedReply {
  readonly handle: number;
  resolve: (extents: Extent[] | null) => void;
  reject: (error: Error) => void;
}

const DEFAULT_BLOCK_SIZES: BlockSizes = { minimum: 1, preferred: 4096, maximum: MAX_REQUEST_SIZE };
const CLOSE_TIMEOUT_MS = 5000;
const OPTION_ERROR_ERRNO: Record<number, string> = {
  [REP_ERR_UNSUP]: "ENOTSUP",
  [REP_ERR_POLICY]: "EPERM",
  [REP_ERR_INVALID]: "EINVAL",
  [REP_ERR_TLS_REQD]: "EACCES",
  [REP_ERR_UNKNOWN]: "ENOENT",
  [REP_ERR_SHUTDOWN]: "ESHUTDOWN",
};

export class NbdClient {
  readonly exportName: string;
  readonly size: number;
  /** Raw NBD transmission flags. */
  readonly flags: number;
  readonly structuredReplies: boolean;
  readonly description: string;
  readonly blockSizes: BlockSizes;
  readonly #socket: net.Socket;
  readonly #baseAllocationId: number | null;
  readonly #pending = new Map<number, Pending>();
  #nextHandle = 1;
  #failure: NbdError | null = null;
  #closing: Promise<void> | null = null;
  #onIdle: (() => void) | null = null;

  private constructor(socket: net.Socket, reader: SocketReader, exportName: string, negotiated: Negotiated) {
    this.#socket = socket;
    this.exportName = exportName;
    this.size = negotiated.size;
    this.flags = negotiated.flags;
    this.structuredReplies = negotiated.structuredReplies;
    this.#baseAllocationId = negotiated.baseAllocationId;
    this.description = negotiated.description;
    this.blockSizes = negotiated.blockSizes ?? DEFAULT_BLOCK_SIZES;
    socket.on("close", () => this.#fail(new NbdError("ECONNRESET", "connection to NBD server closed")));
    new ReplyParser(reader, negotiated.baseAllocationId, {
      lookup: (handleHigh, handleLow) => {
        const pending = this.#pending.get(handleLow);
        if (handleHigh !== 0 || pending === undefined) throw new NbdError("EPROTO", "reply for unknown handle");
        return pending;
      },
      complete: (reply) => this.#settle(reply as Pending),
      failed: (error) => {
        this.#fail(error);
        socket.destroy();
      },
    }).pump();
  }

  /** Connects and negotiates; see parseNbdUri for accepted forms. No TLS: credentials in the URI are not sent. */
  static async connect(uri: string): Promise<NbdClient> {
    const target = parseNbdUri(uri);
    const { socket, reader } = await openSocket(target);
    try {
      const negotiated = await negotiateExport(socket, reader, target.exportName);
      return new NbdClient(socket, reader, target.exportName, negotiated);
    } catch (error) {
      socket.destroy();
      throw asNbdError(error);
    }
  }

  /** NBD_OPT_LIST: the exports a server offers. */
  static async listExports(uri: string): Promise<ExportListing[]> {
    return withOptions(uri, async (options) => {
      const replies = await options.expect(OPT_LIST);
      return replies.filter((r) => r.type === REP_SERVER).map((r) => decodeServerReply(r.data));
    });
  }

  /** NBD_OPT_INFO: size, flags and description of one export, without entering transmission. */
  static async describeExport(uri: string): Promise<ExportDetails> {
    const target = parseNbdUri(uri);
    return withOptions(uri, async (options) => {
      const replies = await options.expect(OPT_INFO, encodeInfoRequest(target.exportName, [INFO_DESCRIPTION, INFO_BLOCK_SIZE]));
      const info = decodeInfoReplies(replies);
      return { name: target.exportName, ...info, readOnly: (info.flags & FLAG_READ_ONLY) !== 0 };
    });
  }

  get readOnly(): boolean {
    return (this.flags & FLAG_READ_ONLY) !== 0;
  }

  get canMultiConn(): boolean {
    return (this.flags & FLAG_CAN_MULTI_CONN) !== 0;
  }

  /** Whether blockStatus reports real allocation (base:allocation negotiated). */
  get hasBlockStatus(): boolean {
    return this.#baseAllocationId !== null;
  }

  async read(offset: number, length: number): Promise<Buffer> {
    const target = Buffer.allocUnsafe(length);
    await this.readInto(offset, target);
    return target;
  }

  /** Reads target.length bytes at `offset` into `target` (lets copy loops reuse their buffers). */
  async readInto(offset: number, target: Buffer): Promise<void> {
    await Promise.all(
      this.#pieces(target.length).map(([at, size]) => this.#request(CMD_READ, 0, offset + at, size, null, target.subarray(at, at + size))),
    );
  }

  async write(offset: number, data: Buffer, options: { fua?: boolean } = {}): Promise<void> {
    this.#require(true, 0);
    const flags = options.fua ? this.#fuaFlag() : 0;
    await Promise.all(
      this.#pieces(data.length).map(([at, size]) => this.#request(CMD_WRITE, flags, offset + at, size, data.subarray(at, at + size))),
    );
  }

  async flush(): Promise<void> {
    this.#require(false, FLAG_SEND_FLUSH);
    await this.#request(CMD_FLUSH, 0, 0, 0);
  }

  async trim(offset: number, length: number, options: { fua?: boolean } = {}): Promise<void> {
    this.#require(true, FLAG_SEND_TRIM);
    await this.#request(CMD_TRIM, options.fua ? this.#fuaFlag() : 0, offset, length);
  }

  async writeZeroes(offset: number, length: number, options: { noHole?: boolean; fua?: boolean } = {}): Promise<void> {
    this.#require(true, FLAG_SEND_WRITE_ZEROES);
    const flags = (options.noHole ? CMD_FLAG_NO_HOLE : 0) | (options.fua ? this.#fuaFlag() : 0);
    await this.#request(CMD_WRITE_ZEROES, flags, offset, length);
  }

  /**
   * Allocation of a prefix of [offset, offset+length) (at least one byte), as base:allocation extents.
   * Servers without base:allocation get the safe answer: everything is data.
   */
  async blockStatus(offset: number, length: number): Promise<Extent[]> {
    if (this.#baseAllocationId === null) return [{ length, flags: 0 }];
    const extents = await this.#request(CMD_BLOCK_STATUS, 0, offset, Math.min(length, 0xffffffff));
    return extents ?? [{ length, flags: 0 }];
  }

  /** Waits for outstanding requests, sends NBD_CMD_DISC and closes the socket. */
  close(): Promise<void> {
    this.#closing ??= this.#disconnect();
    return this.#closing;
  }

  async #disconnect(): Promise<void> {
    if (this.#pending.size > 0) await new Promise<void>((resolve) => (this.#onIdle = resolve));
    if (this.#socket.destroyed) return;
    const closed = new Promise<void>((resolve) => this.#socket.once("close", () => resolve()));
    this.#socket.end(encodeRequestHeader({ flags: 0, type: CMD_DISC, handleHigh: 0, handleLow: 0, offset: 0, length: 0 }));
    const timer = setTimeout(() => this.#socket.destroy(), CLOSE_TIMEOUT_MS);
    await closed;
    clearTimeout(timer);
  }

  /** Splits `length` bytes into [start, size] requests the server accepts (none for an empty range). */
  #pieces(length: number): [number, number][] {
    const max = Math.min(this.blockSizes.maximum, MAX_REQUEST_SIZE);
    const pieces: [number, number][] = [];
    for (let at = 0; at < length; at += max) pieces.push([at, Math.min(max, length - at)]);
    return pieces;
  }

  #fuaFlag(): number {
    if ((this.flags & FLAG_SEND_FUA) === 0) throw new NbdError("ENOTSUP", "server does not support FUA");
    return CMD_FLAG_FUA;
  }

  /** Refuses locally what proto.md forbids a client to send. */
  #require(writes: boolean, flag: number): void {
    if (writes && this.readOnly) throw new NbdError("EPERM", "export is read-only");
    if (flag !== 0 && (this.flags & flag) === 0) throw new NbdError("ENOTSUP", "server does not support this command");
  }

  #request(type: number, flags: number, offset: number, length: number, payload: Buffer | null = null, target: Buffer | null = null): Promise<Extent[] | null> {
    if (this.#failure !== null) return Promise.reject(this.#failure);
    if (this.#closing !== null) return Promise.reject(new NbdError("ESHUTDOWN", "client is closing"));
    const handle = this.#allocateHandle();
    const header = encodeRequestHeader({ flags, type, handleHigh: 0, handleLow: handle, offset, length });
    return new Promise((resolve, reject) => {
      this.#pending.set(handle, { handle, type, offset, length, target, covered: 0, extents: null, error: null, resolve, reject });
      if (payload === null) {
        this.#socket.write(header);
      } else {
        this.#socket.cork();
        this.#socket.write(header);
        this.#socket.write(payload);
        this.#socket.uncork();
      }
    });
  }

  #allocateHandle(): number {
    while (this.#pending.has(this.#nextHandle)) this.#nextHandle = (this.#nextHandle % 0xffffffff) + 1;
    const handle = this.#nextHandle;
    this.#nextHandle = (this.#nextHandle % 0xffffffff) + 1;
    return handle;
  }

  #settle(pending: Pending): void {
    this.#pending.delete(pending.handle);
    if (pending.error === null) pending.resolve(pending.extents);
    else pending.reject(pending.error);
    if (this.#pending.size === 0) this.#wakeIdle();
    // proto.md: on ESHUTDOWN the client must disconnect.
    if (pending.error?.errno === "ESHUTDOWN") void this.close();
  }

  #fail(error: NbdError): void {
    this.#failure ??= error;
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of pending) p.reject(this.#failure);
    this.#wakeIdle();
  }

  #wakeIdle(): void {
    const wake = this.#onIdle;
    this.#onIdle = null;
    wake?.();
  }
}

function asNbdError(error: unknown): NbdError {
  if (error instanceof NbdError) return error;
  return new NbdError((error as NodeJS.ErrnoException).code ?? "EIO", (error as Error).message);
}

function openSocket(target: NbdTarget): Promise<{ socket: net.Socket; reader: SocketReader }> {
  return SocketReader.connect(target.kind === "unix" ? { path: target.socketPath } : { host: target.host, port: target.port, noDelay: true });
}

// --- Handshake -------------------------------------------------------------------------------

interface OptionReply {
  type: number;
  data: Buffer;
}

/** Option haggling on a fixed-newstyle connection. */
class OptionChannel {
  readonly #socket: net.Socket;
  readonly #reader: SocketReader;

  constructor(socket: net.Socket, reader: SocketReader) {
    this.#socket = socket;
    this.#reader = reader;
  }

  /** Sends an option and collects its replies up to the final one (ACK or an error). */
  async request(option: number, data?: Buffer): Promise<{ replies: OptionReply[]; final: OptionReply }> {
    this.#socket.write(encodeOption(option, data));
    const replies: OptionReply[] = [];
    for (;;) {
      const header = decodeOptionReplyHeader(await this.#reader.read(20));
      if (header.option !== option) throw new NbdError("EPROTO", "option reply for another option");
      const reply = { type: header.replyType, data: await this.#reader.read(header.length) };
      if (reply.type === REP_ACK || isOptionError(reply.type)) return { replies, final: reply };
      replies.push(reply);
    }
  }

  /** Like request(), but an error reply becomes an NbdError. */
  async expect(option: number, data?: Buffer): Promise<OptionReply[]> {
    const { replies, final } = await this.request(option, data);
    if (isOptionError(final.type)) throw optionError(final);
    return replies;
  }

  abort(): void {
    this.#socket.end(encodeOption(OPT_ABORT));
  }
}

function optionError(reply: OptionReply): NbdError {
  const errno = OPTION_ERROR_ERRNO[reply.type] ?? "EIO";
  const message = reply.data.length > 0 ? reply.data.toString("utf8") : `option refused (0x${reply.type.toString(16)})`;
  return new NbdError(errno, message);
}

/** Reads the greeting and answers with client flags; returns how to continue. */
async function greet(socket: net.Socket, reader: SocketReader): Promise<{ style: "oldstyle"; negotiated: Negotiated } | { style: "newstyle"; fixed: boolean; noZeroes: boolean }> {
  const hello = await reader.read(16);
  if (hello.readBigUInt64BE(0) !== NBD_MAGIC) throw new NbdError("EPROTO", "not an NBD server");
  const magic = hello.readBigUInt64BE(8);
  if (magic === OLDSTYLE_MAGIC) {
    // Oldstyle servers have a single export and start transmission right away.
    const info = await reader.read(8 + 4 + 124);
    const negotiated = { size: readU64(info, 0), flags: info.readUInt32BE(8) & 0xffff, structuredReplies: false, baseAllocationId: null, description: "", blockSizes: null };
    return { style: "oldstyle", negotiated };
  }
  if (magic !== IHAVEOPT) throw new NbdError("EPROTO", "unknown NBD handshake");
  const serverFlags = (await reader.read(2)).readUInt16BE(0);
  const fixed = (serverFlags & FLAG_FIXED_NEWSTYLE) !== 0;
  const noZeroes = (serverFlags & FLAG_NO_ZEROES) !== 0;
  const clientFlags = Buffer.allocUnsafe(4);
  clientFlags.writeUInt32BE((fixed ? FLAG_C_FIXED_NEWSTYLE : 0) | (noZeroes ? FLAG_C_NO_ZEROES : 0));
  socket.write(clientFlags);
  return { style: "newstyle", fixed, noZeroes };
}

async function negotiateExport(socket: net.Socket, reader: SocketReader, exportName: string): Promise<Negotiated> {
  const greeting = await greet(socket, reader);
  if (greeting.style === "oldstyle") return greeting.negotiated;
  if (!greeting.fixed) return exportNameOption(socket, reader, exportName, greeting.noZeroes, false, null);

  const options = new OptionChannel(socket, reader);
  const structuredReplies = (await options.request(OPT_STRUCTURED_REPLY)).final.type === REP_ACK;
  let baseAllocationId: number | null = null;
  if (structuredReplies) {
    const { replies } = await options.request(OPT_SET_META_CONTEXT, encodeMetaContextRequest(exportName, [BASE_ALLOCATION]));
    for (const reply of replies) {
      if (reply.type === REP_META_CONTEXT && reply.data.length >= 4 && reply.data.toString("utf8", 4) === BASE_ALLOCATION) {
        baseAllocationId = reply.data.readUInt32BE(0);
      }
    }
  }
  const { replies, final } = await options.request(OPT_GO, encodeInfoRequest(exportName, [INFO_DESCRIPTION, INFO_BLOCK_SIZE]));
  if (final.type === REP_ERR_UNSUP) {
    // A fixed-newstyle server that predates NBD_OPT_GO.
    return exportNameOption(socket, reader, exportName, greeting.noZeroes, structuredReplies, baseAllocationId);
  }
  if (isOptionError(final.type)) {
    options.abort();
    throw optionError(final);
  }
  return { ...decodeInfoReplies(replies), structuredReplies, baseAllocationId };
}

async function exportNameOption(
  socket: net.Socket,
  reader: SocketReader,
  exportName: string,
  noZeroes: boolean,
  structuredReplies: boolean,
  baseAllocationId: number | null,
): Promise<Negotiated> {
  socket.write(encodeOption(OPT_EXPORT_NAME, Buffer.from(exportName, "utf8")));
  let info: Buffer;
  try {
    info = await reader.read(noZeroes ? 10 : 134);
  } catch {
    throw new NbdError("ENOENT", `server refused export "${exportName}"`);
  }
  return { size: readU64(info, 0), flags: info.readUInt16BE(8), structuredReplies, baseAllocationId, description: "", blockSizes: null };
}

function decodeInfoReplies(replies: OptionReply[]): { size: number; flags: number; description: string; blockSizes: BlockSizes | null } {
  let exportInfo: { size: number; flags: number } | null = null;
  let description = "";
  let blockSizes: BlockSizes | null = null;
  for (const { type, data } of replies) {
    if (type !== REP_INFO || data.length < 2) continue;
    const info = data.readUInt16BE(0);
    if (info === INFO_EXPORT && data.length === 12) exportInfo = { size: readU64(data, 2), flags: data.readUInt16BE(10) };
    else if (info === INFO_DESCRIPTION) description = data.toString("utf8", 2);
    else if (info === INFO_BLOCK_SIZE && data.length === 14) {
      blockSizes = { minimum: data.readUInt32BE(2), preferred: data.readUInt32BE(6), maximum: data.readUInt32BE(10) };
    }
  }
  if (exportInfo === null) throw new NbdError("EPROTO", "server sent no NBD_INFO_EXPORT");
  return { ...exportInfo, description, blockSizes };
}

/** Connects, runs one or more options on a fixed-newstyle server, then aborts politely. */
async function withOptions<T>(uri: string, run: (options: OptionChannel) => Promise<T>): Promise<T> {
  const { socket, reader } = await openSocket(parseNbdUri(uri));
  try {
    const greeting = await greet(socket, reader);
    if (greeting.style === "oldstyle" || !greeting.fixed) throw new NbdError("ENOTSUP", "server does not support option haggling");
    const options = new OptionChannel(socket, reader);
    const result = await run(options);
    options.abort();
    return result;
  } catch (error) {
    throw asNbdError(error);
  } finally {
    socket.destroySoon();
  }
}
