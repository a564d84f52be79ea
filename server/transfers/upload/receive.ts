// A tus PATCH (the upload's bytes), received off @tus/server's stream path. @tus/server turns the request body
// into a web stream and back and writes it in the socket's 64 KiB pieces through four Node streams: 6 CPU-s
// per GiB of the console's, with the page cache's copy on top, where the whole upload's budget on a 2-core
// host is about 3. Here the body is copied into whole blocks of one fixed pool and written with O_DIRECT
// (block-spool.ts), under the same lock, checks and answers as @tus/server's own PATCH; every other tus request
// still goes to @tus/server, and the spool stays the file its FileStore reads the offset from.
import type { IncomingMessage, ServerResponse } from "node:http";
import { ERRORS, type Locker, TUS_RESUMABLE } from "@tus/server";
import type { FileStore } from "@tus/file-store";
import { type Block, BlockPool, SpoolWriter } from "../block-spool.ts";
import { spoolFile } from "./state.ts";

/** Blocks shared by every upload's PATCH: 16 MiB in all, whatever the number of uploads (they wait for a free one). */
const BLOCK_SIZE = 1024 * 1024;
const BLOCKS = 16;
const holder = globalThis as { __hangarUploadBlocks?: BlockPool };

function blocks(): BlockPool {
  holder.__hangarUploadBlocks ??= new BlockPool(BLOCKS, BLOCK_SIZE);
  return holder.__hangarUploadBlocks;
}

/** A refusal in @tus/server's own form, answered as it would. */
interface TusRefusal {
  status_code: number;
  body: string;
}

export interface PatchContext {
  id: string;
  store: FileStore;
  locker: Locker;
  /** The checks of every tus request (session, owner, the upload's state); throws a refusal. */
  admit(headers: Headers): Promise<void>;
  /** Bytes reached the spool (the import following it wakes up). */
  received(): void;
}

/** Answers a PATCH: the body appended to the upload's spool at `Upload-Offset`, 204 with the new offset. */
export async function receivePatch(req: IncomingMessage, res: ServerResponse, context: PatchContext): Promise<void> {
  try {
    const answer = await receive(req, context);
    if (answer !== undefined) send(res, 204, answer, "");
  } catch (error) {
    const refusal = error as Partial<TusRefusal>;
    if (typeof refusal.status_code !== "number") {
      send(res, 500, {}, `The upload failed in the console: ${(error as Error).message}\n`);
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
  const headers = new Headers();
  for (const name of ["cookie", "tus-resumable", "upload-offset", "content-type", "upload-length"]) {
    const value = req.headers[name];
    if (typeof value === "string") headers.set(name, value);
  }
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
  try {
    const upload = await context.store.getUpload(context.id);
    const expiry = context.store.getExpiration();
    const created = upload.creation_date === undefined ? Date.now() : new Date(upload.creation_date).getTime();
    if (expiry > 0 && Date.now() > created + expiry) throw ERRORS.FILE_NO_LONGER_EXISTS;
    if (upload.offset !== Number(offsetHeader)) throw ERRORS.INVALID_OFFSET;
    const room = (upload.size ?? 0) - upload.offset;
    const declared = req.headers["content-length"] === undefined ? undefined : Number(req.headers["content-length"]);
    if (declared !== undefined && !(declared <= room)) throw ERRORS.ERR_MAX_SIZE_EXCEEDED;
    const writer = await SpoolWriter.open(spoolFile(context.id), upload.offset, { fresh: false });
    let complete: boolean;
    try {
      complete = await appendBody(req, writer, room, abort.signal, context.received);
    } finally {
      await writer.close();
    }
    upload.offset = writer.position;
    context.received();
    if (!complete) return undefined;
    const answer: Record<string, string> = { "upload-offset": String(upload.offset) };
    if (expiry > 0 && upload.creation_date !== undefined && upload.offset < (upload.size ?? 0)) answer["upload-expires"] = new Date(created + expiry).toUTCString();
    return answer;
  } finally {
    await lock.unlock();
  }
}

/**
 * The body into the spool: copied into blocks whose ends fall on multiples of the block size in the file
 * (so all but a first and a last are written directly), full ones written a batch at a time while the next
 * fill, the request paused while no block is free. What arrived before a broken body is written too, as tus
 * wants. Whether the body arrived whole.
 */
async function appendBody(req: IncomingMessage, writer: SpoolWriter, room: number, stop: AbortSignal, progress: () => void): Promise<boolean> {
  const pool = blocks();
  const full: Block[] = [];
  let writing: Promise<void> | undefined;
  let failure: Error | undefined;
  const drain = (): Promise<void> => {
    if (writing !== undefined || full.length === 0 || failure !== undefined) return writing ?? Promise.resolve();
    const batch = full.splice(0);
    writing = writer
      .write(batch.map((block) => block.buffer.subarray(0, block.length)))
      .then(progress, (error: Error) => void (failure = error))
      .finally(() => {
        for (const block of batch) pool.give(block);
        writing = undefined;
      })
      .then(drain);
    return writing;
  };
  let current: Block | undefined;
  let end = writer.position;
  let received = 0;
  let complete = false;
  const onStop = () => req.destroy();
  stop.addEventListener("abort", onStop, { once: true });
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      received += chunk.length;
      if (received > room) throw ERRORS.ERR_MAX_SIZE_EXCEEDED;
      for (let at = 0; at < chunk.length; ) {
        if (failure !== undefined) throw failure;
        if (current === undefined) {
          current = await pool.takeWhenFree();
          current.start = end;
        }
        const capacity = pool.blockSize - (current.start % pool.blockSize);
        const copied = chunk.copy(current.buffer, current.length, at, at + Math.min(capacity - current.length, chunk.length - at));
        current.length += copied;
        at += copied;
        end += copied;
        if (current.length === capacity) {
          full.push(current);
          current = undefined;
          void drain();
        }
      }
    }
    complete = true;
  } catch (error) {
    // A client gone (or replaced by its own retry) leaves its bytes; anything else is answered.
    if ((error as Partial<TusRefusal>).status_code !== undefined || failure !== undefined) throw error;
  } finally {
    stop.removeEventListener("abort", onStop);
    if (current !== undefined) full.push(current);
    while (writing !== undefined || (full.length > 0 && failure === undefined)) await drain();
    for (const block of full.splice(0)) pool.give(block);
  }
  if (failure !== undefined) throw failure;
  return complete;
}
