// One export being written into its spool: the toolstack's `GET /export` read with backpressure from the
// disk (never from the browser: a slow or vanished browser does not hold the export, and the console's
// memory stays flat), the bytes made readable to the spool's readers as soon as they are written. A broken
// export is continued from the spool's length with the toolstack's `offset` + `etag` (the same bytes).
// Jobs are kept on globalThis: Next may load this module more than once (route bundles, hot reload).
import { EventEmitter } from "node:events";
import { type FileHandle, open, truncate } from "node:fs/promises";
import { type IncomingMessage, get as httpGet } from "node:http";
import { get as httpsGet } from "node:https";
import { Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { toolstackUrl } from "../../config.ts";
import { describeXenApiError } from "../../api/xenapi-error.ts";
import { transferMinFreeBytes } from "../settings.ts";
import { archivePath, type Compression, freeBytes, readMeta, removeSpool, type SpoolMeta, spoolId, sweepSpools, writeMeta } from "./spool.ts";

/** A refusal or failure to answer with: its HTTP status and a sentence; `code` is the toolstack's XenAPI code. */
export class DownloadError extends Error {
  readonly status: number;
  readonly code: string | undefined;
  constructor(status: number, message: string, code?: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** A disk-space check every this many bytes written. */
const SPACE_CHECK_BYTES = 256 * 1024 * 1024;
/** Below this much free space an export stops rather than fill the disk. */
const HARD_FLOOR_BYTES = 64 * 1024 * 1024;

export class ExportJob extends EventEmitter {
  /** Bytes in the spool now (readable). */
  written: number;
  status: "running" | "complete" | "failed" = "running";
  error: DownloadError | undefined;
  readonly done: Promise<void>;
  private settle!: () => void;
  readonly meta: SpoolMeta;
  /** The toolstack task the export runs in. */
  readonly task: string | undefined;
  constructor(meta: SpoolMeta, from: number, task: string | undefined) {
    super();
    this.meta = meta;
    this.task = task;
    this.setMaxListeners(0);
    this.written = from;
    this.done = new Promise((resolve) => (this.settle = resolve));
  }
  advance(bytes: number): void {
    this.written = bytes;
    this.emit("change");
  }
  finish(error?: DownloadError): void {
    this.status = error === undefined ? "complete" : "failed";
    this.error = error;
    this.emit("change");
    this.settle();
  }
  /** Resolves once more than `position` bytes are readable, or the job has ended. */
  waitBeyond(position: number): Promise<void> {
    if (this.written > position || this.status !== "running") return Promise.resolve();
    return new Promise((resolve) => {
      const check = () => {
        if (this.written > position || this.status !== "running") {
          this.off("change", check);
          resolve();
        }
      };
      this.on("change", check);
    });
  }
}

interface Registry {
  jobs: Map<string, ExportJob>;
  /** Spools being read right now (id → readers), kept by the sweep. */
  readers: Map<string, number>;
  sweeper: NodeJS.Timeout | undefined;
}
const registry: Registry = ((globalThis as { __hangarExportJobs?: Registry }).__hangarExportJobs ??= { jobs: new Map(), readers: new Map(), sweeper: undefined });

export function runningJob(id: string): ExportJob | undefined {
  const job = registry.jobs.get(id);
  return job?.status === "running" ? job : undefined;
}

/** Spools in use: being written or read. */
export function busySpools(): Set<string> {
  return new Set([...registry.jobs.keys(), ...[...registry.readers].filter(([, n]) => n > 0).map(([id]) => id)]);
}

export function addReader(id: string): () => void {
  registry.readers.set(id, (registry.readers.get(id) ?? 0) + 1);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const left = (registry.readers.get(id) ?? 1) - 1;
    if (left <= 0) registry.readers.delete(id);
    else registry.readers.set(id, left);
  };
}

const SWEEP_EVERY_MS = 10 * 60_000;

/** Sweeps now and every 10 minutes from now on (once per process). */
export async function sweepNow(): Promise<void> {
  if (registry.sweeper === undefined) {
    registry.sweeper = setInterval(() => void sweepSpools(busySpools()).catch(() => undefined), SWEEP_EVERY_MS);
    registry.sweeper.unref();
  }
  await sweepSpools(busySpools());
}

/** The toolstack's refusal body ("CODE param …") in words. */
async function refusal(response: ToolstackAnswer): Promise<DownloadError> {
  const text = (await response.text().catch(() => "")).trim();
  const [code = "", ...params] = text.split(/\s+/);
  const known = /^[A-Z][A-Z0-9_]+$/.test(code);
  let message = known ? describeXenApiError(code, params) : text || `the toolstack answered ${response.status}`;
  let status = response.status === 412 ? 412 : response.status === 401 || response.status === 403 || response.status === 404 || response.status === 400 ? response.status : 502;
  if (code === "UUID_INVALID" || code === "HANDLE_INVALID") {
    status = 404;
    if (params[0] === "VM") message = `There is no VM with the UUID ${params[1] ?? ""}: it may have been destroyed.`;
  }
  if (status === 401) message = "The toolstack session has ended: log in to the console again.";
  return new DownloadError(status, message, known ? code : undefined);
}

export interface ExportRequest {
  /** The toolstack session (never sent to the browser). */
  session: string;
  vmUuid: string;
  compression: Compression;
  /** A task to run the export in (made beforehand, so its progress can be followed). */
  task?: string;
}

function exportUrl(request: ExportRequest, extra: Record<string, string>): URL {
  const url = new URL("/export", toolstackUrl());
  url.searchParams.set("session_id", request.session);
  url.searchParams.set("uuid", request.vmUuid);
  url.searchParams.set("use_compression", request.compression === "none" ? "false" : request.compression);
  for (const [key, value] of Object.entries(extra)) url.searchParams.set(key, value);
  return url;
}

/** The toolstack's answer to GET /export: its status and headers, the body as a Node stream (no web-stream hop). */
interface ToolstackAnswer {
  status: number;
  ok: boolean;
  header(name: string): string | null;
  body: IncomingMessage;
  text(): Promise<string>;
  cancel(): void;
}

const REDIRECTS = 3;

/** GET `url` (a pool member's 302 followed, as the export contract asks). */
async function askToolstack(url: URL, redirects = REDIRECTS): Promise<ToolstackAnswer> {
  const response = await new Promise<IncomingMessage>((resolve, reject) => {
    const get = url.protocol === "https:" ? httpsGet : httpGet;
    // A connection of its own (no keep-alive pool): an export is long, and a pooled socket the toolstack has
    // just closed would fail the request.
    get(url, { agent: false }, resolve).on("error", (error) => reject(new DownloadError(502, `The toolstack at ${toolstackUrl()} cannot be reached (${error.message}). Is it running?`)));
  });
  const status = response.statusCode ?? 0;
  const location = response.headers.location;
  if (status >= 300 && status < 400 && location !== undefined && redirects > 0) {
    response.resume();
    return askToolstack(new URL(location, url), redirects - 1);
  }
  return {
    status,
    ok: status >= 200 && status < 300,
    header: (name) => {
      const value = response.headers[name.toLowerCase()];
      return value === undefined ? null : String(value);
    },
    body: response,
    text: async () => Buffer.concat(await response.toArray()).toString("utf8"),
    cancel: () => response.destroy(),
  };
}

async function checkSpace(): Promise<void> {
  await sweepNow();
  const free = await freeBytes();
  if (free < transferMinFreeBytes()) throw new DownloadError(507, `The console's disk has only ${Math.floor(free / 1024 / 1024)} MiB free, too little to spool an export (HANGAR_TRANSFER_MIN_FREE_MB is ${Math.floor(transferMinFreeBytes() / 1024 / 1024)}).`);
}

/** Starts a new export into a new spool; resolves once the toolstack has answered (with its ETag). */
export async function startExport(request: ExportRequest): Promise<ExportJob> {
  await checkSpace();
  const response = await askToolstack(exportUrl(request, request.task === undefined ? {} : { task_id: request.task }));
  if (!response.ok) throw await refusal(response);
  const etag = response.header("etag");
  if (etag === null) {
    response.cancel();
    throw new DownloadError(502, "The toolstack's export has no ETag: it cannot be resumed or spooled.");
  }
  const meta: SpoolMeta = {
    id: spoolId(request.vmUuid, etag),
    etag,
    vmUuid: request.vmUuid,
    compression: request.compression,
    disposition: response.header("content-disposition") ?? `attachment; filename="${request.vmUuid}.xva"`,
    task: request.task,
    created: Date.now(),
    size: null,
  };
  await writeMeta(meta);
  return run(meta, response, 0, response.header("task-id") ?? undefined);
}

/**
 * Continues (or remakes) the export a spool holds, from the bytes already in it: `offset` + `etag` give the
 * same bytes, or 412 when the VM changed since (the spool is then removed).
 */
export async function continueExport(session: string, meta: SpoolMeta, from: number): Promise<ExportJob> {
  const running = runningJob(meta.id);
  if (running !== undefined) return running;
  await checkSpace();
  const response = await askToolstack(exportUrl({ session, vmUuid: meta.vmUuid, compression: meta.compression }, { offset: String(from), etag: meta.etag }));
  if (!response.ok) {
    const error = await refusal(response);
    if (error.status === 412) await removeSpool(meta.id);
    throw error;
  }
  // Another request may have continued it meanwhile.
  const raced = runningJob(meta.id);
  if (raced !== undefined) {
    response.cancel();
    return raced;
  }
  await truncate(archivePath(meta.id), from).catch(async () => {
    if (from > 0) throw new DownloadError(500, "The export's spool is gone.");
  });
  return run(meta, response, from, response.header("task-id") ?? undefined);
}

async function run(meta: SpoolMeta, response: ToolstackAnswer, from: number, task: string | undefined): Promise<ExportJob> {
  // The archive exists before the job is seen: a reader opening it at once must not find it missing.
  let file: FileHandle;
  try {
    file = await open(archivePath(meta.id), from === 0 ? "w" : "r+");
  } catch (error) {
    response.cancel();
    throw new DownloadError(500, `The export's spool cannot be written (${(error as Error).message}).`);
  }
  const job = new ExportJob(meta, from, task);
  registry.jobs.set(meta.id, job);
  void (async () => {
    try {
      let position = from;
      let nextCheck = from + SPACE_CHECK_BYTES;
      const write = async (chunks: Buffer[]) => {
        // One pwritev for all of them, no copy into one buffer; the rest of a short write goes again.
        let pending = chunks;
        let left = chunks.reduce((sum, chunk) => sum + chunk.length, 0);
        while (left > 0) {
          const { bytesWritten } = await file.writev(pending, position);
          position += bytesWritten;
          left -= bytesWritten;
          if (left > 0) pending = [Buffer.concat(pending).subarray(bytesWritten)];
        }
        job.advance(position);
        if (position >= nextCheck) {
          nextCheck = position + SPACE_CHECK_BYTES;
          if ((await freeBytes()) < HARD_FLOOR_BYTES) {
            await sweepSpools(busySpools());
            if ((await freeBytes()) < HARD_FLOOR_BYTES) throw new DownloadError(507, "The console's disk is full: the export was stopped.");
          }
        }
      };
      // Chunks that arrive while a write is in flight are written together (writev): fewer, larger writes.
      const sink = new Writable({
        highWaterMark: 4 * 1024 * 1024,
        write(chunk: Buffer, _encoding, callback) {
          write([chunk]).then(() => callback(), callback);
        },
        writev(chunks, callback) {
          write(chunks.map((entry) => entry.chunk as Buffer)).then(() => callback(), callback);
        },
      });
      await pipeline(response.body, sink);
      await writeMeta({ ...((await readMeta(meta.id)) ?? meta), size: position });
      job.finish();
    } catch (error) {
      const failure =
        error instanceof DownloadError
          ? error
          : (error as NodeJS.ErrnoException).code === "ENOSPC"
            ? new DownloadError(507, "The console's disk is full: the export was stopped.")
            : new DownloadError(502, `The export stopped before its end (${(error as Error).message}); download it again to continue it.`);
      job.finish(failure);
    } finally {
      await file.close().catch(() => undefined);
      if (registry.jobs.get(meta.id) === job) registry.jobs.delete(meta.id);
    }
  })();
  return job;
}
