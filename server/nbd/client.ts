// NbdClient: fixed-newstyle NBD client with structured replies, base:allocation and pipelining.
// Requests may be issued concurrently; replies are matched by handle. Reads land directly in the
// caller's result buffer (one copy from the socket), writes go out as header + payload without copying.
// Connecting, the handshake and waiting for replies each have a time limit: a server that accepts a
// connection and then says nothing fails with an error naming it, the stage and the time waited.

import net from "node:net";
import { performance } from "node:perf_hooks";
import type { Extent } from "./backend.ts";
import {
  BASE_ALLOCATION,
  CMD_BLOCK_STATUS,
  CMD_CACHE,
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

/** Time limits in milliseconds (Infinity: none). */
export interface ConnectOptions {
  /** Until the server accepts the connection. */
  connectTimeoutMs?: number;
  /** From the connection to the end of option haggling. */
  handshakeTimeoutMs?: number;
  /** Without any reply while requests are outstanding; the connection fails then. */
  requestTimeoutMs?: number;
}

/**
 * Connect + handshake stay well under the 30 s a plugin waits for its daemon (so Data.copy fails with this
 * error, not an abort); a request gets long enough for a remote flushing a large write-back cache.
 */
const DEFAULT_TIMEOUTS: Required<ConnectOptions> = { connectTimeoutMs: 10_000, handshakeTimeoutMs: 10_000, requestTimeoutMs: 120_000 };

function withDefaults(options: ConnectOptions): Required<ConnectOptions> {
  return {
    connectTimeoutMs: options.connectTimeoutMs ?? DEFAULT_TIMEOUTS.connectTimeoutMs,
    handshakeTimeoutMs: options.handshakeTimeoutMs ?? DEFAULT_TIMEOUTS.handshakeTimeoutMs,
    requestTimeoutMs: options.requestTimeoutMs ?? DEFAULT_TIMEOUTS.requestTimeoutMs,
  };
}

interface Pending extends AwaitedReply {
  readonly handle: number;
  resolve: (extents: Extent[] | null) => void;
  reject: (error: Error) => void;
}

const DEFAULT_BLOCK_SIZES: BlockSizes = { minimum: 1, preferred: 4096, maximum: MAX_REQUEST_SIZE };
const CLOSE_TIMEOUT_MS = 5000;
const COMMAND_NAMES: Record<number, string> = {
  [CMD_READ]: "READ",
  [CMD_WRITE]: "WRITE",
  [CMD_DISC]: "DISC",
  [CMD_FLUSH]: "FLUSH",
  [CMD_TRIM]: "TRIM",
  [CMD_CACHE]: "CACHE",
  [CMD_WRITE_ZEROES]: "WRITE_ZEROES",
  [CMD_BLOCK_STATUS]: "BLOCK_STATUS",
};
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
  /** The server's URI without its password, for messages. */
  readonly #remote: string;
  readonly #baseAllocationId: number | null;
  /** Outstanding requests, oldest first (Map keeps insertion order). */
  readonly #pending = new Map<number, Pending>();
  readonly #requestTimeoutMs: number;
  /** Since when requests have been outstanding without a reply (performance.now()). */
  #quietSince = 0;
  #watchdog: NodeJS.Timeout | null = null;
  #nextHandle = 1;
  #failure: NbdError | null = null;
  #closing: Promise<void> | null = null;
  #onIdle: (() => void) | null = null;

  private constructor(socket: net.Socket, reader: SocketReader, exportName: string, negotiated: Negotiated, remote: string, requestTimeoutMs: number) {
    this.#socket = socket;
    this.#remote = remote;
    this.#requestTimeoutMs = requestTimeoutMs;
    this.exportName = exportName;
    this.size = negotiated.size;
    this.flags = negotiated.flags;
    this.structuredReplies = negotiated.structuredReplies;
    this.#baseAllocationId = negotiated.baseAllocationId;
    this.description = negotiated.description;
    this.blockSizes = negotiated.blockSizes ?? DEFAULT_BLOCK_SIZES;
    socket.on("close", () => this.#fail(new NbdError("ECONNRESET", `connection to ${remote} closed`)));
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
  static async connect(uri: string, options: ConnectOptions = {}): Promise<NbdClient> {
    const target = parseNbdUri(uri);
    const remote = redactRemote(uri);
    const limits = withDefaults(options);
    const { socket, reader } = await openSocket(target, remote, limits.connectTimeoutMs);
    const negotiated = await handshake(socket, remote, limits.handshakeTimeoutMs, (progress) => negotiateExport(socket, reader, target.exportName, progress));
    return new NbdClient(socket, reader, target.exportName, negotiated, remote, limits.requestTimeoutMs);
  }

  /** NBD_OPT_LIST: the exports a server offers. */
  static async listExports(uri: string, timeouts: ConnectOptions = {}): Promise<ExportListing[]> {
    return withOptions(uri, timeouts, async (options) => {
      const replies = await options.expect(OPT_LIST);
      return replies.filter((r) => r.type === REP_SERVER).map((r) => decodeServerReply(r.data));
    });
  }

  /** NBD_OPT_INFO: size, flags and description of one export, without entering transmission. */
  static async describeExport(uri: string, timeouts: ConnectOptions = {}): Promise<ExportDetails> {
    const target = parseNbdUri(uri);
    return withOptions(uri, timeouts, async (options) => {
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

  /** Whether the server takes FLUSH (one without it writes through). */
  get canFlush(): boolean {
    return (this.flags & FLAG_SEND_FLUSH) !== 0;
  }

  /** Whether blockStatus reports real allocation (base:allocation negotiated). */
  get canWriteZeroes(): boolean {
    return (this.flags & FLAG_SEND_WRITE_ZEROES) !== 0;
  }

  get hasBlockStatus(): boolean {
    return this.#baseAllocationId !== null;
  }

  /** Why the connection ended under its requests (the server went away, a time-out, a protocol error); null while it serves. */
  get failure(): NbdError | null {
    return this.#failure;
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
      this.#watchReplies();
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

  /** Starts the reply clock with the first outstanding request; one timer serves all requests. */
  #watchReplies(): void {
    if (this.#pending.size === 1) this.#quietSince = performance.now();
    if (this.#watchdog === null) this.#watchdog = armTimer(this.#requestTimeoutMs, () => this.#checkReplies());
  }

  /** Fails the connection when no reply came for the request timeout while requests were outstanding. */
  #checkReplies(): void {
    this.#watchdog = null;
    const oldest = this.#pending.values().next().value;
    if (oldest === undefined) return;
    const quiet = performance.now() - this.#quietSince;
    if (quiet < this.#requestTimeoutMs) {
      this.#watchdog = armTimer(this.#requestTimeoutMs - quiet, () => this.#checkReplies());
      return;
    }
    const what = `a ${COMMAND_NAMES[oldest.type] ?? `command ${oldest.type}`} of ${oldest.length} bytes at offset ${oldest.offset}`;
    const unanswered = this.#pending.size === 1 ? what : `${this.#pending.size} outstanding requests, the oldest ${what}`;
    this.#fail(stageError("ETIMEDOUT", "request", this.#remote, `timed out after ${seconds(quiet)} (no reply to ${unanswered})`));
    this.#socket.destroy();
  }

  #settle(pending: Pending): void {
    this.#quietSince = performance.now();
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

/** The URI without its password, for records and messages. */
export function redactRemote(remote: string): string {
  try {
    const url = new URL(remote);
    if (url.password === "") return remote;
    url.password = "xxxxx";
    return url.href;
  } catch {
    return remote;
  }
}

type Stage = "connect" | "handshake" | "request";

/** An NbdError whose message is one sentence naming the remote and the stage; `outcome` says how long it took. */
function stageError(errno: string, stage: Stage, remote: string, outcome: string): NbdError {
  const error = new NbdError(errno, "");
  // The errno is in `errno`: the message reads as a sentence (and the stack is taken again to show it).
  error.message = `NBD ${stage} ${stage === "handshake" ? "with" : "to"} ${remote} ${outcome}`;
  Error.captureStackTrace(error, stageError);
  return error;
}

/** A wait in seconds as people read it: "0.3 s", "10 s". */
function seconds(ms: number): string {
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}

/** An unref'd timer, or none for an infinite limit (setTimeout would fire at once past 2^31 ms). */
function armTimer(ms: number, fire: () => void): NodeJS.Timeout | null {
  return Number.isFinite(ms) ? setTimeout(fire, ms).unref() : null;
}

async function openSocket(target: NbdTarget, remote: string, timeoutMs: number): Promise<{ socket: net.Socket; reader: SocketReader }> {
  const started = performance.now();
  const abort = new AbortController();
  const timer = armTimer(timeoutMs, () => abort.abort());
  const address = target.kind === "unix" ? { path: target.socketPath } : { host: target.host, port: target.port, noDelay: true };
  try {
    return await SocketReader.connect({ ...address, signal: abort.signal });
  } catch (error) {
    if (abort.signal.aborted) throw stageError("ETIMEDOUT", "connect", remote, `timed out after ${seconds(timeoutMs)} (no answer from the server)`);
    throw stageError(asNbdError(error).errno, "connect", remote, `failed after ${seconds(performance.now() - started)}: ${(error as Error).message}`);
  } finally {
    if (timer !== null) clearTimeout(timer);
  }
}

/** How far a handshake got, for the message when it stalls. */
interface HandshakeProgress {
  greeted: boolean;
}

/** Runs the handshake on a new connection under a time limit; any failure names the remote and closes the socket. */
async function handshake<T>(socket: net.Socket, remote: string, timeoutMs: number, body: (progress: HandshakeProgress) => Promise<T>): Promise<T> {
  const started = performance.now();
  const progress: HandshakeProgress = { greeted: false };
  let timedOut = false;
  const timer = armTimer(timeoutMs, () => {
    timedOut = true;
    socket.destroy();
  });
  try {
    return await body(progress);
  } catch (error) {
    socket.destroy();
    if (timedOut) {
      const stalled = progress.greeted ? "server greeted, then stopped answering options" : "server accepted the connection but sent no greeting";
      throw stageError("ETIMEDOUT", "handshake", remote, `timed out after ${seconds(timeoutMs)} (${stalled})`);
    }
    throw stageError(asNbdError(error).errno, "handshake", remote, `failed after ${seconds(performance.now() - started)}: ${(error as Error).message}`);
  } finally {
    if (timer !== null) clearTimeout(timer);
  }
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
async function greet(socket: net.Socket, reader: SocketReader, progress: HandshakeProgress): Promise<{ style: "oldstyle"; negotiated: Negotiated } | { style: "newstyle"; fixed: boolean; noZeroes: boolean }> {
  const hello = await reader.read(16);
  progress.greeted = true;
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

async function negotiateExport(socket: net.Socket, reader: SocketReader, exportName: string, progress: HandshakeProgress): Promise<Negotiated> {
  const greeting = await greet(socket, reader, progress);
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
async function withOptions<T>(uri: string, timeouts: ConnectOptions, run: (options: OptionChannel) => Promise<T>): Promise<T> {
  const remote = redactRemote(uri);
  const limits = withDefaults(timeouts);
  const { socket, reader } = await openSocket(parseNbdUri(uri), remote, limits.connectTimeoutMs);
  try {
    return await handshake(socket, remote, limits.handshakeTimeoutMs, async (progress) => {
      const greeting = await greet(socket, reader, progress);
      if (greeting.style === "oldstyle" || !greeting.fixed) throw new NbdError("ENOTSUP", "server does not support option haggling");
      const options = new OptionChannel(socket, reader);
      const result = await run(options);
      options.abort();
      return result;
    });
  } finally {
    socket.destroySoon();
  }
}
