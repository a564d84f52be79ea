// NBD wire protocol: constants and (de)serialisation shared by the server and the client.
// Reference: https://github.com/NetworkBlockDevice/nbd/blob/master/doc/proto.md
// All integers are big-endian. 64-bit offsets/sizes are carried as JS numbers (exact up to 2^53),
// handles ("cookies") are opaque and carried as two 32-bit halves.

// --- Handshake -------------------------------------------------------------------------------
export const NBD_MAGIC = 0x4e42444d41474943n; // "NBDMAGIC"
export const IHAVEOPT = 0x49484156454f5054n; // "IHAVEOPT"
export const OLDSTYLE_MAGIC = 0x00420281861253n;
export const OPTION_REPLY_MAGIC = 0x3e889045565a9n;

export const FLAG_FIXED_NEWSTYLE = 1 << 0;
export const FLAG_NO_ZEROES = 1 << 1;
export const FLAG_C_FIXED_NEWSTYLE = 1 << 0;
export const FLAG_C_NO_ZEROES = 1 << 1;

export const OPT_EXPORT_NAME = 1;
export const OPT_ABORT = 2;
export const OPT_LIST = 3;
export const OPT_STARTTLS = 5;
export const OPT_INFO = 6;
export const OPT_GO = 7;
export const OPT_STRUCTURED_REPLY = 8;
export const OPT_LIST_META_CONTEXT = 9;
export const OPT_SET_META_CONTEXT = 10;

export const REP_ACK = 1;
export const REP_SERVER = 2;
export const REP_INFO = 3;
export const REP_META_CONTEXT = 4;
const REP_ERR = 0x80000000;
export const REP_ERR_UNSUP = REP_ERR + 1;
export const REP_ERR_POLICY = REP_ERR + 2;
export const REP_ERR_INVALID = REP_ERR + 3;
export const REP_ERR_PLATFORM = REP_ERR + 4;
export const REP_ERR_TLS_REQD = REP_ERR + 5;
export const REP_ERR_UNKNOWN = REP_ERR + 6;
export const REP_ERR_SHUTDOWN = REP_ERR + 7;
export const REP_ERR_BLOCK_SIZE_REQD = REP_ERR + 8;
export const REP_ERR_TOO_BIG = REP_ERR + 9;

export function isOptionError(replyType: number): boolean {
  return replyType >= REP_ERR;
}

export const INFO_EXPORT = 0;
export const INFO_NAME = 1;
export const INFO_DESCRIPTION = 2;
export const INFO_BLOCK_SIZE = 3;

export const BASE_ALLOCATION = "base:allocation";

// --- Transmission ----------------------------------------------------------------------------
export const FLAG_HAS_FLAGS = 1 << 0;
export const FLAG_READ_ONLY = 1 << 1;
export const FLAG_SEND_FLUSH = 1 << 2;
export const FLAG_SEND_FUA = 1 << 3;
export const FLAG_ROTATIONAL = 1 << 4;
export const FLAG_SEND_TRIM = 1 << 5;
export const FLAG_SEND_WRITE_ZEROES = 1 << 6;
export const FLAG_SEND_DF = 1 << 7;
export const FLAG_CAN_MULTI_CONN = 1 << 8;
export const FLAG_SEND_RESIZE = 1 << 9;
export const FLAG_SEND_CACHE = 1 << 10;
export const FLAG_SEND_FAST_ZERO = 1 << 11;

export const REQUEST_MAGIC = 0x25609513;
export const SIMPLE_REPLY_MAGIC = 0x67446698;
export const STRUCTURED_REPLY_MAGIC = 0x668e33ef;

export const REQUEST_HEADER_SIZE = 28;
export const SIMPLE_REPLY_HEADER_SIZE = 16;
export const CHUNK_HEADER_SIZE = 20;

export const CMD_READ = 0;
export const CMD_WRITE = 1;
export const CMD_DISC = 2;
export const CMD_FLUSH = 3;
export const CMD_TRIM = 4;
export const CMD_CACHE = 5;
export const CMD_WRITE_ZEROES = 6;
export const CMD_BLOCK_STATUS = 7;

export const CMD_FLAG_FUA = 1 << 0;
export const CMD_FLAG_NO_HOLE = 1 << 1;
export const CMD_FLAG_DF = 1 << 2;
export const CMD_FLAG_REQ_ONE = 1 << 3;
export const CMD_FLAG_FAST_ZERO = 1 << 4;

export const REPLY_FLAG_DONE = 1 << 0;

export const REPLY_TYPE_NONE = 0;
export const REPLY_TYPE_OFFSET_DATA = 1;
export const REPLY_TYPE_OFFSET_HOLE = 2;
export const REPLY_TYPE_BLOCK_STATUS = 5;
export const REPLY_TYPE_ERROR = (1 << 15) + 1;
export const REPLY_TYPE_ERROR_OFFSET = (1 << 15) + 2;

export function isErrorChunk(type: number): boolean {
  return (type & (1 << 15)) !== 0;
}

/** Largest READ/WRITE payload we send or accept (what qemu and nbdkit use too). */
export const MAX_REQUEST_SIZE = 32 * 1024 * 1024;
/** Option payloads are names and queries; anything larger is abuse. */
export const MAX_OPTION_SIZE = 64 * 1024;
/** Strings in the protocol (names, messages) MUST be no longer than this. */
export const MAX_STRING_SIZE = 4096;

// --- Errors ----------------------------------------------------------------------------------
export const ERRNO = {
  EPERM: 1,
  EIO: 5,
  ENOMEM: 12,
  EINVAL: 22,
  ENOSPC: 28,
  EOVERFLOW: 75,
  ENOTSUP: 95,
  ESHUTDOWN: 108,
} as const;
export type ErrnoName = keyof typeof ERRNO;

export function errnoName(code: number): ErrnoName | `E${number}` {
  for (const [name, value] of Object.entries(ERRNO)) if (value === code) return name as ErrnoName;
  return `E${code}`;
}

/** An NBD-level failure; `errno` is the protocol's error name (EIO, EINVAL, ...). */
export class NbdError extends Error {
  readonly errno: string;
  constructor(errno: string, message: string) {
    super(`${errno}: ${message}`);
    this.name = "NbdError";
    this.errno = errno;
  }
}

/** Maps a backend failure to the errno sent on the wire (proto.md: EDQUOT/EFBIG become ENOSPC). */
export function errnoOf(error: unknown): number {
  const code = error instanceof NbdError ? error.errno : (error as { code?: unknown } | null)?.code;
  switch (code) {
    case "EPERM":
    case "EACCES":
    case "EROFS":
      return ERRNO.EPERM;
    case "ENOSPC":
    case "EDQUOT":
    case "EFBIG":
      return ERRNO.ENOSPC;
    case "EINVAL":
      return ERRNO.EINVAL;
    case "ENOMEM":
      return ERRNO.ENOMEM;
    case "EOVERFLOW":
      return ERRNO.EOVERFLOW;
    case "ENOTSUP":
    case "EOPNOTSUPP":
      return ERRNO.ENOTSUP;
    case "ESHUTDOWN":
      return ERRNO.ESHUTDOWN;
    default:
      return ERRNO.EIO;
  }
}

// --- Integer helpers -------------------------------------------------------------------------
/** Writes a non-negative safe integer as u64 without going through BigInt. */
export function writeU64(target: Buffer, value: number, at: number): void {
  target.writeUInt32BE(Math.floor(value / 0x1_0000_0000), at);
  target.writeUInt32BE(value >>> 0, at + 4);
}

/** Reads a u64; values beyond 2^53 come back as an imprecise huge number, which range checks reject. */
export function readU64(source: Buffer, at: number): number {
  return source.readUInt32BE(at) * 0x1_0000_0000 + source.readUInt32BE(at + 4);
}

// --- Option haggling -------------------------------------------------------------------------
export function encodeOption(option: number, data: Buffer = Buffer.alloc(0)): Buffer {
  const out = Buffer.allocUnsafe(16 + data.length);
  out.writeBigUInt64BE(IHAVEOPT, 0);
  out.writeUInt32BE(option, 8);
  out.writeUInt32BE(data.length, 12);
  data.copy(out, 16);
  return out;
}

export function encodeOptionReply(option: number, replyType: number, data: Buffer = Buffer.alloc(0)): Buffer {
  const out = Buffer.allocUnsafe(20 + data.length);
  out.writeBigUInt64BE(OPTION_REPLY_MAGIC, 0);
  out.writeUInt32BE(option, 8);
  out.writeUInt32BE(replyType, 12);
  out.writeUInt32BE(data.length, 16);
  data.copy(out, 20);
  return out;
}

export interface OptionReplyHeader {
  option: number;
  replyType: number;
  length: number;
}

export function decodeOptionReplyHeader(header: Buffer): OptionReplyHeader {
  if (header.readBigUInt64BE(0) !== OPTION_REPLY_MAGIC) throw new NbdError("EIO", "bad option reply magic");
  return { option: header.readUInt32BE(8), replyType: header.readUInt32BE(12), length: header.readUInt32BE(16) };
}

/** Data of NBD_OPT_INFO / NBD_OPT_GO: export name and the NBD_INFO_* items asked for. */
export function encodeInfoRequest(exportName: string, infos: readonly number[]): Buffer {
  const name = Buffer.from(exportName, "utf8");
  const out = Buffer.allocUnsafe(4 + name.length + 2 + 2 * infos.length);
  out.writeUInt32BE(name.length, 0);
  name.copy(out, 4);
  out.writeUInt16BE(infos.length, 4 + name.length);
  infos.forEach((info, i) => out.writeUInt16BE(info, 6 + name.length + 2 * i));
  return out;
}

export function decodeInfoRequest(data: Buffer): { exportName: string; infos: number[] } | null {
  if (data.length < 6) return null;
  const nameLength = data.readUInt32BE(0);
  if (nameLength > MAX_STRING_SIZE || data.length < 4 + nameLength + 2) return null;
  const count = data.readUInt16BE(4 + nameLength);
  if (data.length !== 4 + nameLength + 2 + 2 * count) return null;
  const infos: number[] = [];
  for (let i = 0; i < count; i++) infos.push(data.readUInt16BE(6 + nameLength + 2 * i));
  return { exportName: data.toString("utf8", 4, 4 + nameLength), infos };
}

/** Data of NBD_OPT_LIST_META_CONTEXT / NBD_OPT_SET_META_CONTEXT. */
export function encodeMetaContextRequest(exportName: string, queries: readonly string[]): Buffer {
  const parts = [exportName, ...queries].map((s) => Buffer.from(s, "utf8"));
  const out = Buffer.allocUnsafe(4 + parts.reduce((sum, p) => sum + 4 + p.length, 0));
  let at = 0;
  parts.forEach((part, i) => {
    out.writeUInt32BE(part.length, at);
    part.copy(out, at + 4);
    at += 4 + part.length;
    if (i === 0) {
      out.writeUInt32BE(queries.length, at);
      at += 4;
    }
  });
  return out;
}

export function decodeMetaContextRequest(data: Buffer): { exportName: string; queries: string[] } | null {
  let at = 0;
  const readString = (): string | null => {
    if (at + 4 > data.length) return null;
    const length = data.readUInt32BE(at);
    if (length > MAX_STRING_SIZE || at + 4 + length > data.length) return null;
    const value = data.toString("utf8", at + 4, at + 4 + length);
    at += 4 + length;
    return value;
  };
  const exportName = readString();
  if (exportName === null || at + 4 > data.length) return null;
  const count = data.readUInt32BE(at);
  at += 4;
  const queries: string[] = [];
  for (let i = 0; i < count; i++) {
    const query = readString();
    if (query === null) return null;
    queries.push(query);
  }
  return at === data.length ? { exportName, queries } : null;
}

export function encodeMetaContextReply(contextId: number, name: string): Buffer {
  const nameBytes = Buffer.from(name, "utf8");
  const out = Buffer.allocUnsafe(4 + nameBytes.length);
  out.writeUInt32BE(contextId, 0);
  nameBytes.copy(out, 4);
  return out;
}

/** NBD_REP_SERVER payload: name length, name, then a human-readable description. */
export function encodeServerReply(name: string, description: string): Buffer {
  const nameBytes = Buffer.from(name, "utf8");
  const out = Buffer.allocUnsafe(4 + nameBytes.length + Buffer.byteLength(description, "utf8"));
  out.writeUInt32BE(nameBytes.length, 0);
  nameBytes.copy(out, 4);
  out.write(description, 4 + nameBytes.length, "utf8");
  return out;
}

export function decodeServerReply(data: Buffer): { name: string; description: string } {
  const nameLength = data.readUInt32BE(0);
  if (4 + nameLength > data.length) throw new NbdError("EIO", "malformed NBD_REP_SERVER");
  return { name: data.toString("utf8", 4, 4 + nameLength), description: data.toString("utf8", 4 + nameLength) };
}

export function encodeInfoExport(size: number, transmissionFlags: number): Buffer {
  const out = Buffer.allocUnsafe(12);
  out.writeUInt16BE(INFO_EXPORT, 0);
  writeU64(out, size, 2);
  out.writeUInt16BE(transmissionFlags, 10);
  return out;
}

export function encodeInfoString(info: typeof INFO_NAME | typeof INFO_DESCRIPTION, value: string): Buffer {
  const bytes = Buffer.from(value, "utf8");
  const out = Buffer.allocUnsafe(2 + bytes.length);
  out.writeUInt16BE(info, 0);
  bytes.copy(out, 2);
  return out;
}

export interface BlockSizes {
  minimum: number;
  preferred: number;
  maximum: number;
}

export function encodeInfoBlockSize(sizes: BlockSizes): Buffer {
  const out = Buffer.allocUnsafe(14);
  out.writeUInt16BE(INFO_BLOCK_SIZE, 0);
  out.writeUInt32BE(sizes.minimum, 2);
  out.writeUInt32BE(sizes.preferred, 6);
  out.writeUInt32BE(sizes.maximum, 10);
  return out;
}

/** NBD_OPT_EXPORT_NAME's answer (no option-reply framing). */
export function encodeExportNameReply(size: number, transmissionFlags: number, noZeroes: boolean): Buffer {
  const out = Buffer.alloc(noZeroes ? 10 : 134);
  writeU64(out, size, 0);
  out.writeUInt16BE(transmissionFlags, 8);
  return out;
}

// --- Requests and replies --------------------------------------------------------------------
export interface RequestHeader {
  flags: number;
  type: number;
  handleHigh: number;
  handleLow: number;
  offset: number;
  length: number;
}

export function encodeRequestHeader(request: RequestHeader): Buffer {
  const out = Buffer.allocUnsafe(REQUEST_HEADER_SIZE);
  out.writeUInt32BE(REQUEST_MAGIC, 0);
  out.writeUInt16BE(request.flags, 4);
  out.writeUInt16BE(request.type, 6);
  out.writeUInt32BE(request.handleHigh, 8);
  out.writeUInt32BE(request.handleLow, 12);
  writeU64(out, request.offset, 16);
  out.writeUInt32BE(request.length, 24);
  return out;
}

/** Returns null when the magic is wrong: the stream cannot be resynchronised after that. */
export function decodeRequestHeader(header: Buffer): RequestHeader | null {
  if (header.readUInt32BE(0) !== REQUEST_MAGIC) return null;
  return {
    flags: header.readUInt16BE(4),
    type: header.readUInt16BE(6),
    handleHigh: header.readUInt32BE(8),
    handleLow: header.readUInt32BE(12),
    offset: readU64(header, 16),
    length: header.readUInt32BE(24),
  };
}

/** Writes a simple reply header at `at` of `target` (so payload can follow in the same buffer). */
export function writeSimpleReplyHeader(target: Buffer, at: number, error: number, handleHigh: number, handleLow: number): void {
  target.writeUInt32BE(SIMPLE_REPLY_MAGIC, at);
  target.writeUInt32BE(error, at + 4);
  target.writeUInt32BE(handleHigh, at + 8);
  target.writeUInt32BE(handleLow, at + 12);
}

export function writeChunkHeader(
  target: Buffer,
  at: number,
  flags: number,
  type: number,
  handleHigh: number,
  handleLow: number,
  length: number,
): void {
  target.writeUInt32BE(STRUCTURED_REPLY_MAGIC, at);
  target.writeUInt16BE(flags, at + 4);
  target.writeUInt16BE(type, at + 6);
  target.writeUInt32BE(handleHigh, at + 8);
  target.writeUInt32BE(handleLow, at + 12);
  target.writeUInt32BE(length, at + 16);
}

/** A complete NBD_REPLY_TYPE_ERROR chunk (flagged DONE). */
export function encodeErrorChunk(handleHigh: number, handleLow: number, error: number, message: string): Buffer {
  const text = Buffer.from(message, "utf8").subarray(0, MAX_STRING_SIZE);
  const out = Buffer.allocUnsafe(CHUNK_HEADER_SIZE + 6 + text.length);
  writeChunkHeader(out, 0, REPLY_FLAG_DONE, REPLY_TYPE_ERROR, handleHigh, handleLow, 6 + text.length);
  out.writeUInt32BE(error, CHUNK_HEADER_SIZE);
  out.writeUInt16BE(text.length, CHUNK_HEADER_SIZE + 4);
  text.copy(out, CHUNK_HEADER_SIZE + 6);
  return out;
}

/** A complete NBD_REPLY_TYPE_BLOCK_STATUS chunk (flagged DONE) for one context. */
export function encodeBlockStatusChunk(
  handleHigh: number,
  handleLow: number,
  contextId: number,
  extents: readonly { length: number; flags: number }[],
): Buffer {
  const length = 4 + 8 * extents.length;
  const out = Buffer.allocUnsafe(CHUNK_HEADER_SIZE + length);
  writeChunkHeader(out, 0, REPLY_FLAG_DONE, REPLY_TYPE_BLOCK_STATUS, handleHigh, handleLow, length);
  out.writeUInt32BE(contextId, CHUNK_HEADER_SIZE);
  extents.forEach((extent, i) => {
    out.writeUInt32BE(extent.length, CHUNK_HEADER_SIZE + 4 + 8 * i);
    out.writeUInt32BE(extent.flags, CHUNK_HEADER_SIZE + 8 + 8 * i);
  });
  return out;
}
