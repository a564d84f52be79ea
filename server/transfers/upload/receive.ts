// A tus PATCH (the upload's bytes), received off @tus/server's stream path. @tus/server turns the request body
// into a web stream and back and writes it in the socket's 64 KiB pieces through four Node streams: 6 CPU-s
// per GiB of the console's, with the page cache's copy on top, where the whole upload's budget on a 2-core
// host is about 3. Here the body is copied into whole blocks of one fixed pool and written with O_DIRECT
// (block-spool.ts), under the same lock, checks and answers as @tus/server's own PATCH; every other tus request
// still goes to @tus/server, whose store reads an upload's offset from the spool (or, while the spool is open
// here, from what it has taken: see OpenSpool).
import type { IncomingMessage, ServerResponse } from "node:http";
import { ERRORS, type Locker, TUS_RESUMABLE } from "@tus/server";
import type { FileStore } from "@tus/file-store";
import { type Block, BlockPool, SpoolWriter } from "../block-spool.ts";
import { webHeaders } from "../../web-headers.ts";
import { spoolFile } from "./state.ts";

/** Blocks shared by every upload's PATCH: 16 MiB in all, whatever the number of uploads (they wait for a free one). */
const BLOCK_SIZE = 1024 * 1024;
const BLOCKS = 16;
/** How long an upload's spool stays open after its last PATCH. */
const KEEP_OPEN_MS = 60_000;
const holder = globalThis as { __hangarUploadBlocks?: BlockPool; __hangarOpenSpools?: Map<string, OpenSpool> };

function blocks(): BlockPool {
  holder.__hangarUploadBlocks ??= new BlockPool(BLOCKS, BLOCK_SIZE);
  return holder.__hangarUploadBlocks;
}

/**
 * An upload's spool, kept open between its PATCHes (the browser sends them one after another), with its own
 * queue of writes. A PATCH is answered once its bytes are accepted — in blocks, queued in order — not once the
 * disk has them: waiting for the last O_DIRECT writes held every 8 MiB PATCH 9–17 ms on a busy host, while the
 * browser sent nothing. The offset tus reports (HEAD) is the accepted one too (UploadStore); what the disk has
 * lags by the queue, and a console gone meanwhile reports, after its restart, the offset its disk has: the
 * browser resends from there. Opening, checking and closing the spool for each PATCH cost a dozen thread-pool
 * round trips, 13 ms before a PATCH's first byte was taken.
 */
interface OpenSpool {
  writer: SpoolWriter;
  size: number;
  created: number;
  /** Bytes taken: on the disk, or in blocks queued to be written in order. */
  accepted: number;
  queue: Block[];
  /** The queue being written, if it is. */
  flushing: Promise<void> | undefined;
  /** A write that failed: nothing more is written; the upload fails. */
  failure: Error | undefined;
  idle: NodeJS.Timeout | undefined;
}

function openSpools(): Map<string, OpenSpool> {
  holder.__hangarOpenSpools ??= new Map();
  return holder.__hangarOpenSpools;
}

/** The offset an upload has taken, for tus's answers, while its spool is open. */
export function acceptedOffset(id: string): number | undefined {
  const spool = openSpools().get(id);
  return spool?.failure === undefined ? spool?.accepted : undefined;
}

/** The upload's open spool (opened at the offset tus finds on disk if it is not), taken off its idle timer. */
async function spoolOf(id: string, store: FileStore): Promise<OpenSpool> {
  const kept = openSpools().get(id);
  if (kept !== undefined) {
    clearTimeout(kept.idle);
    kept.idle = undefined;
    return kept;
  }
  const upload = await store.getUpload(id);
  const spool: OpenSpool = {
    writer: await SpoolWriter.open(spoolFile(id), upload.offset, { fresh: false }),
    size: upload.size ?? 0,
    created: upload.creation_date === undefined ? Date.now() : new Date(upload.creation_date).getTime(),
    accepted: upload.offset,
    queue: [],
    flushing: undefined,
    failure: undefined,
    idle: undefined,
  };
  openSpools().set(id, spool);
  return spool;
}

/** Queues a filled block to be written after those before it; `written` is told of every write done. */
function enqueue(spool: OpenSpool, block: Block, events: SpoolEvents): void {
  spool.queue.push(block);
  spool.accepted += block.length;
  flush(spool, events);
}

/** Writes the queue, unless that is under way; once it is written, blocks queued meanwhile are. */
function flush(spool: OpenSpool, events: SpoolEvents): void {
  if (spool.flushing !== undefined || spool.queue.length === 0) return;
  const flushing = (async () => {
    // The blocks that filled while a write was in flight go together (one pwritev).
    while (spool.queue.length > 0) {
      const batch = spool.queue.splice(0);
      try {
        if (spool.failure === undefined) {
          await spool.writer.write(batch.map((queued) => queued.buffer.subarray(0, queued.length)));
          events.written();
        }
      } catch (error) {
        spool.failure = error as Error;
        events.failed(spool.failure);
      } finally {
        for (const queued of batch) blocks().give(queued);
      }
    }
  })();
  spool.flushing = flushing;
  void flushing.then(() => {
    spool.flushing = undefined;
    flush(spool, events);
  });
}

/** Closes the upload's spool if it is open, once its queued bytes are written: all in, removed, or idle a while. */
export async function closeSpool(id: string): Promise<void> {
  const spool = openSpools().get(id);
  if (spool === undefined) return;
  openSpools().delete(id);
  clearTimeout(spool.idle);
  while (spool.flushing !== undefined) await spool.flushing;
  // A PATCH still running (its upload removed under it) writes nothing more, and is answered with an error.
  spool.failure ??= new Error("the upload's spool was closed");
  await spool.writer.close();
}

/** A refusal in @tus/server's own form, answered as it would. */
interface TusRefusal {
  status_code: number;
  body: string;
}

/** What the upload's owner hears of its spool's writes. */
export interface SpoolEvents {
  /** Bytes reached the disk (the import following the spool wakes up). */
  written(): void;
  /** A write failed (the disk full or failing): the bytes taken cannot all be kept, the upload fails. */
  failed(error: Error): void;
}

export interface PatchContext extends SpoolEvents {
  id: string;
  store: FileStore;
  locker: Locker;
  /** The checks of every tus request (session, owner, the upload's state); throws a refusal. */
  admit(headers: Headers): Promise<void>;
}

/** Answers a PATCH: the body appended to the upload's spool at `Upload-Offset`, 204 with the new offset. */
export async function receivePatch(req: IncomingMessage, res: ServerResponse, context: PatchContext): Promise<void> {
  try {
    const answer = await receive(req, context);
    if (answer !== undefined) send(res, 204, answer, "");
  } catch (error) {
    const refusal = error as Partial<TusRefusal>;
    if (typeof refusal.status_code !== "number") {
      // The body was left where it broke off: this connection cannot carry another request.
      send(res, 500, req.complete ? {} : { connection: "close" }, `The upload failed in the console: ${(error as Error).message}\n`);
      return;
    }
    // A body the refusal leaves unread is drained (small) or the connection closed: the client sees the answer.
    send(res, refusal.status_code, {}, refusal.body ?? "");
    if (!req.complete) req.resume();
  }
}

function send(res: ServerResponse, status: number, headers: Record<string, string>, body: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { "tus-resumable": TUS_RESUMABLE, "cache-control": "no-store", ...(body === "" ? {} : { "content-type": "text/plain; charset=utf-8" }), ...headers });
  res.end(body);
}

/** The answer's headers, or undefined when the client went away (nothing to answer; what arrived is kept). */
async function receive(req: IncomingMessage, context: PatchContext): Promise<Record<string, string> | undefined> {
  const headers = webHeaders(req);
  if (headers.get("tus-resumable") !== TUS_RESUMABLE) throw { status_code: 412, body: "Tus-Resumable: 1.0.0 is required\n" } satisfies TusRefusal;
  const offsetHeader = headers.get("upload-offset");
  if (offsetHeader === null || !/^\d+$/.test(offsetHeader)) throw ERRORS.MISSING_OFFSET;
  if (headers.get("content-type") !== "application/offset+octet-stream") throw ERRORS.INVALID_CONTENT_TYPE;
  // Every upload here declares its length when it is made (the SR's free space is checked against it).
  if (headers.get("upload-length") !== null) throw ERRORS.INVALID_LENGTH;
  await context.admit(headers);

  const abort = new AbortController();
  const lock = context.locker.newLock(context.id);
  // Another request for this upload (the browser's retry after a drop this side has not seen) takes over.
  await lock.lock(abort.signal, () => abort.abort());
  let spool: OpenSpool | undefined;
  try {
    spool = await spoolOf(context.id, context.store);
    if (spool.failure !== undefined) throw spool.failure;
    const { size, created } = spool;
    const expiry = context.store.getExpiration();
    if (expiry > 0 && Date.now() > created + expiry) throw ERRORS.FILE_NO_LONGER_EXISTS;
    if (spool.accepted !== Number(offsetHeader)) throw ERRORS.INVALID_OFFSET;
    const room = size - spool.accepted;
    const declared = req.headers["content-length"] === undefined ? undefined : Number(req.headers["content-length"]);
    if (declared !== undefined && !(declared <= room)) throw ERRORS.ERR_MAX_SIZE_EXCEEDED;
    const complete = await appendBody(req, spool, room, abort.signal, context);
    if (spool.failure !== undefined) throw spool.failure;
    if (!complete) return undefined;
    const answer: Record<string, string> = { "upload-offset": String(spool.accepted) };
    if (expiry > 0 && spool.accepted < size) answer["upload-expires"] = new Date(created + expiry).toUTCString();
    return answer;
  } finally {
    if (spool !== undefined && openSpools().get(context.id) === spool) {
      // All in (its last writes finish meanwhile), or failed: closed; else kept for the next PATCH.
      if (spool.accepted >= spool.size || spool.failure !== undefined) void closeSpool(context.id).catch(() => undefined);
      else spool.idle = setTimeout(() => void closeSpool(context.id).catch(() => undefined), KEEP_OPEN_MS).unref();
    }
    await lock.unlock();
  }
}

/**
 * The body into the spool's queue: copied into blocks whose ends fall on multiples of the block size in the
 * file (so all but a first and a last are written directly), each queued once full, the request paused
 * while no block is free. What arrived before a broken body is queued too, as tus wants. Whether the body
 * arrived whole.
 */
async function appendBody(req: IncomingMessage, spool: OpenSpool, room: number, stop: AbortSignal, events: SpoolEvents): Promise<boolean> {
  const pool = blocks();
  let current: Block | undefined;
  let received = 0;
  const onStop = () => req.destroy();
  stop.addEventListener("abort", onStop, { once: true });
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      received += chunk.length;
      if (received > room) throw ERRORS.ERR_MAX_SIZE_EXCEEDED;
      for (let at = 0; at < chunk.length; ) {
        if (spool.failure !== undefined) throw spool.failure;
        if (current === undefined) {
          current = await pool.takeWhenFree();
          // Every byte before this block's is in the queue already.
          current.start = spool.accepted;
        }
        const capacity = pool.blockSize - (current.start % pool.blockSize);
        const copied = chunk.copy(current.buffer, current.length, at, at + Math.min(capacity - current.length, chunk.length - at));
        current.length += copied;
        at += copied;
        if (current.length === capacity) {
          enqueue(spool, current, events);
          current = undefined;
        }
      }
    }
    return true;
  } catch (error) {
    // A client gone (or replaced by its own retry) leaves its bytes; anything else is answered.
    if ((error as Partial<TusRefusal>).status_code !== undefined || spool.failure !== undefined) throw error;
    return false;
  } finally {
    stop.removeEventListener("abort", onStop);
    if (current !== undefined) {
      if (current.length > 0) enqueue(spool, current, events);
      else pool.give(current);
    }
  }
}
