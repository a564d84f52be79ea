// Server side of the fixed-newstyle handshake: option haggling up to NBD_OPT_GO / NBD_OPT_EXPORT_NAME.

import type { Socket } from "node:net";
import type { ExportBackend } from "./backend.ts";
import {
  BASE_ALLOCATION,
  decodeInfoRequest,
  decodeMetaContextRequest,
  encodeExportNameReply,
  encodeInfoBlockSize,
  encodeInfoExport,
  encodeInfoString,
  encodeMetaContextReply,
  encodeOptionReply,
  encodeServerReply,
  FLAG_C_FIXED_NEWSTYLE,
  FLAG_C_NO_ZEROES,
  FLAG_CAN_MULTI_CONN,
  FLAG_FIXED_NEWSTYLE,
  FLAG_HAS_FLAGS,
  FLAG_NO_ZEROES,
  FLAG_READ_ONLY,
  FLAG_SEND_DF,
  FLAG_SEND_FLUSH,
  FLAG_SEND_FUA,
  FLAG_SEND_TRIM,
  FLAG_SEND_WRITE_ZEROES,
  IHAVEOPT,
  INFO_DESCRIPTION,
  INFO_NAME,
  MAX_OPTION_SIZE,
  MAX_REQUEST_SIZE,
  NBD_MAGIC,
  OPT_ABORT,
  OPT_EXPORT_NAME,
  OPT_GO,
  OPT_INFO,
  OPT_LIST,
  OPT_LIST_META_CONTEXT,
  OPT_SET_META_CONTEXT,
  OPT_STRUCTURED_REPLY,
  REP_ACK,
  REP_ERR_INVALID,
  REP_ERR_SHUTDOWN,
  REP_ERR_TOO_BIG,
  REP_ERR_UNKNOWN,
  REP_ERR_UNSUP,
  REP_INFO,
  REP_META_CONTEXT,
  REP_SERVER,
} from "./protocol.ts";
import type { SocketReader } from "./socket-reader.ts";

export interface ExportEntry {
  readonly name: string;
  readonly description: string;
  readonly backend: ExportBackend;
}

export interface ExportCatalog {
  lookup(name: string): ExportEntry | undefined;
  entries(): Iterable<ExportEntry>;
  shuttingDown: boolean;
}

/** What the handshake settled: the export and how replies must be shaped. */
export interface Session {
  readonly entry: ExportEntry;
  readonly structuredReplies: boolean;
  /** Context id to answer NBD_CMD_BLOCK_STATUS with, or null when base:allocation was not selected. */
  readonly baseAllocationId: number | null;
  readonly transmissionFlags: number;
}

/** The id we hand out for base:allocation in NBD_OPT_SET_META_CONTEXT (LIST answers use 0, as proto.md asks). */
const BASE_ALLOCATION_ID = 1;
const BLOCK_SIZES = { minimum: 1, preferred: 4096, maximum: MAX_REQUEST_SIZE };

/** Flags advertised for an export; only what we really implement. */
function transmissionFlags(backend: ExportBackend, structuredReplies: boolean): number {
  let flags = FLAG_HAS_FLAGS | FLAG_SEND_FLUSH | FLAG_CAN_MULTI_CONN;
  flags |= backend.readOnly ? FLAG_READ_ONLY : FLAG_SEND_FUA | FLAG_SEND_TRIM | FLAG_SEND_WRITE_ZEROES;
  if (structuredReplies) flags |= FLAG_SEND_DF;
  return flags;
}

/**
 * Runs option haggling on a fresh connection. Resolves with the session once the client entered
 * transmission, or null when the client aborted or broke the protocol (the socket is then closed).
 */
export async function negotiate(socket: Socket, reader: SocketReader, catalog: ExportCatalog): Promise<Session | null> {
  const greeting = Buffer.allocUnsafe(18);
  greeting.writeBigUInt64BE(NBD_MAGIC, 0);
  greeting.writeBigUInt64BE(IHAVEOPT, 8);
  greeting.writeUInt16BE(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES, 16);
  socket.write(greeting);

  const clientFlags = (await reader.read(4)).readUInt32BE(0);
  if ((clientFlags & ~(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES)) !== 0) return hangUp(socket);
  const noZeroes = (clientFlags & FLAG_C_NO_ZEROES) !== 0;

  let structuredReplies = false;
  // base:allocation selection, valid only for the export it was negotiated for.
  let selected: { exportName: string; baseAllocation: boolean } | null = null;

  for (;;) {
    const header = await reader.read(16);
    if (header.readBigUInt64BE(0) !== IHAVEOPT) return hangUp(socket);
    const option = header.readUInt32BE(8);
    const length = header.readUInt32BE(12);
    const reply = (replyType: number, data?: Buffer): void => {
      socket.write(encodeOptionReply(option, replyType, data));
    };
    const refuse = (replyType: number, message: string): void => reply(replyType, Buffer.from(message, "utf8"));

    if (length > MAX_OPTION_SIZE) {
      if (option === OPT_EXPORT_NAME) return hangUp(socket);
      await new Promise<void>((resolve, reject) => {
        if (reader.skip(length, resolve, reject)) resolve();
      });
      refuse(REP_ERR_TOO_BIG, "option data too large");
      continue;
    }
    const data = await reader.read(length);

    if (option === OPT_ABORT) {
      reply(REP_ACK);
      socket.end();
      return null;
    }
    if (catalog.shuttingDown) {
      if (option === OPT_EXPORT_NAME) return hangUp(socket);
      refuse(REP_ERR_SHUTDOWN, "server is shutting down");
      continue;
    }

    switch (option) {
      case OPT_EXPORT_NAME: {
        const entry = catalog.lookup(data.toString("utf8"));
        // proto.md: this option cannot fail gracefully, the session must be terminated.
        if (entry === undefined) return hangUp(socket);
        const session = openSession(entry, structuredReplies, selected);
        socket.write(encodeExportNameReply(entry.backend.size, session.transmissionFlags, noZeroes));
        return session;
      }
      case OPT_INFO:
      case OPT_GO: {
        const request = decodeInfoRequest(data);
        if (request === null) {
          refuse(REP_ERR_INVALID, "malformed info request");
          break;
        }
        const entry = catalog.lookup(request.exportName);
        if (entry === undefined) {
          refuse(REP_ERR_UNKNOWN, `no export named "${request.exportName}"`);
          break;
        }
        const session = openSession(entry, structuredReplies, selected);
        reply(REP_INFO, encodeInfoExport(entry.backend.size, session.transmissionFlags));
        if (request.infos.includes(INFO_NAME)) reply(REP_INFO, encodeInfoString(INFO_NAME, entry.name));
        if (request.infos.includes(INFO_DESCRIPTION) && entry.description !== "") {
          reply(REP_INFO, encodeInfoString(INFO_DESCRIPTION, entry.description));
        }
        // Always sent: it tells clients our 32 MiB request limit.
        reply(REP_INFO, encodeInfoBlockSize(BLOCK_SIZES));
        reply(REP_ACK);
        if (option === OPT_GO) return session;
        break;
      }
      case OPT_LIST: {
        if (length !== 0) {
          refuse(REP_ERR_INVALID, "NBD_OPT_LIST takes no data");
          break;
        }
        for (const entry of catalog.entries()) reply(REP_SERVER, encodeServerReply(entry.name, entry.description));
        reply(REP_ACK);
        break;
      }
      case OPT_STRUCTURED_REPLY: {
        if (length !== 0) refuse(REP_ERR_INVALID, "NBD_OPT_STRUCTURED_REPLY takes no data");
        else if (structuredReplies) refuse(REP_ERR_INVALID, "structured replies already negotiated");
        else {
          structuredReplies = true;
          reply(REP_ACK);
        }
        break;
      }
      case OPT_LIST_META_CONTEXT:
      case OPT_SET_META_CONTEXT: {
        const request = decodeMetaContextRequest(data);
        if (!structuredReplies) {
          refuse(REP_ERR_INVALID, "negotiate structured replies first");
          break;
        }
        if (request === null) {
          refuse(REP_ERR_INVALID, "malformed meta context request");
          break;
        }
        if (catalog.lookup(request.exportName) === undefined) {
          refuse(REP_ERR_UNKNOWN, `no export named "${request.exportName}"`);
          break;
        }
        if (option === OPT_LIST_META_CONTEXT) {
          const matches = request.queries.length === 0 || request.queries.some((q) => q === "base:" || q === BASE_ALLOCATION);
          if (matches) reply(REP_META_CONTEXT, encodeMetaContextReply(0, BASE_ALLOCATION));
        } else {
          const baseAllocation = request.queries.includes(BASE_ALLOCATION);
          selected = { exportName: request.exportName, baseAllocation };
          if (baseAllocation) reply(REP_META_CONTEXT, encodeMetaContextReply(BASE_ALLOCATION_ID, BASE_ALLOCATION));
        }
        reply(REP_ACK);
        break;
      }
      default:
        // Includes NBD_OPT_STARTTLS: we run in NOTLS mode, which proto.md allows to answer with ERR_UNSUP.
        refuse(REP_ERR_UNSUP, `option ${option} not supported`);
    }
  }
}

function openSession(
  entry: ExportEntry,
  structuredReplies: boolean,
  selected: { exportName: string; baseAllocation: boolean } | null,
): Session {
  const baseAllocation = selected !== null && selected.exportName === entry.name && selected.baseAllocation;
  return {
    entry,
    structuredReplies,
    baseAllocationId: baseAllocation ? BASE_ALLOCATION_ID : null,
    transmissionFlags: transmissionFlags(entry.backend, structuredReplies),
  };
}

function hangUp(socket: Socket): null {
  socket.destroy();
  return null;
}
