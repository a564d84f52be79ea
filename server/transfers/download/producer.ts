// One export being written into its spool: the toolstack's `GET /export` read into a fixed pool of blocks
// with backpressure from the disk, the bytes made readable to the spool's readers as soon as they are
// written. A download keeping up copies them from the blocks still in memory and is waited for, but never
// for long: a slow or vanished browser does not hold the export, and the console's memory stays flat. A broken
// export is continued from the spool's length with the toolstack's `offset` + `etag` (the same bytes).
// Jobs are kept on globalThis: Next may load this module more than once (route bundles, hot reload).
import { EventEmitter } from "node:events";
import { truncate } from "node:fs/promises";
import { toolstackUrl } from "../../config.ts";
import { describeXenApiError } from "../../xenapi/error-descriptions.ts";
import { followRedirects, resourceUrl } from "../../xenapi/resource.ts";
import { transferMinFreeBytes } from "../settings.ts";
import { BlockPool, SpoolWriter } from "../block-spool.ts";
import { type BlockAnswer, getIntoBlocks } from "./block-get.ts";
import { archivePath, type ExportKind, freeBytes, readMeta, removeSpool, type SpoolMeta, spoolId, sweepSpools, writeMeta } from "./spool.ts";

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

/** Bytes a download sends next, and what to call once the socket has taken them. */
export interface SpoolPiece {
  bytes: Buffer;
  release: () => void;
}

/** The release of bytes that are the download's own (a copy): nothing to hand back. */
export const OWN_BYTES = (): void => undefined;

/** A download following a running export: how far it has read. */
export interface LiveReader {
  position: number;
}

/** A download this close behind the export is followed: its bytes are still in memory. */
const FOLLOW_WITHIN = 8 * 1024 * 1024;
/** How long the export waits for a following download before leaving it to read the disk. */
const READER_WAIT_MS = 1000;

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
  /** The export's latest bytes, still in memory: a download keeping up is served from here, not from the disk. */
  private readonly pool: BlockPool;
  /** Spool offset of the toolstack body's first byte (non-zero for a continued export). */
  private readonly base: number;
  constructor(meta: SpoolMeta, from: number, task: string | undefined, pool: BlockPool) {
    super();
    this.meta = meta;
    this.task = task;
    this.pool = pool;
    this.base = from;
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
  /**
   * The spool bytes from `position` (at most `max`) while they are still in memory, only below `written`
   * (those are on the disk too); undefined when that part is no longer in memory. The bytes are the block's
   * own memory, leased until `release` (a socket write reads them with no copy); when the pool lets no more
   * be leased they are copied into `scratch`.
   */
  recent(position: number, max: number, scratch: Buffer): SpoolPiece | undefined {
    if (position >= this.written) return undefined;
    const block = this.pool.find(position - this.base);
    if (block === undefined) return undefined;
    const from = position - this.base - block.start;
    const count = Math.min(block.length - from, max, this.written - position);
    const release = this.pool.lease(block);
    if (release !== undefined) return { bytes: block.buffer.subarray(from, from + count), release };
    const copied = Math.min(count, scratch.length);
    block.buffer.copy(scratch, 0, from, from + copied);
    return { bytes: scratch.subarray(0, copied), release: OWN_BYTES };
  }
  /** Downloads streaming this export as it is produced, each at its position; see `readersPast`. */
  private readonly live = new Set<LiveReader>();
  /** A download from `position` follows the export in memory when it starts within the blocks kept. */
  follow(position: number): LiveReader | undefined {
    if (!this.inMemoryReach(position)) return undefined;
    const reader: LiveReader = { position };
    this.live.add(reader);
    return reader;
  }
  /** The reader moved on (or, with `leave`, went away); one left behind is followed again once it has caught up. */
  moved(reader: LiveReader, leave = false): void {
    if (leave) this.live.delete(reader);
    else if (!this.live.has(reader) && this.inMemoryReach(reader.position)) this.live.add(reader);
    this.emit("read");
  }
  /** A download at `position` is close enough behind a running export for its bytes to still be in memory. */
  private inMemoryReach(position: number): boolean {
    return this.status === "running" && this.written - position <= FOLLOW_WITHIN;
  }
  /**
   * Waits until every following download has read up to `position`, so the bytes before it may leave memory.
   * One that does not get there within READER_WAIT_MS stops being waited for (it reads the disk from then
   * on): a slow or vanished browser never holds the export for long.
   */
  async readersPast(position: number): Promise<void> {
    const behind = () => [...this.live].filter((reader) => reader.position < position);
    if (behind().length === 0) return;
    await new Promise<void>((resolve) => {
      const check = () => {
        if (behind().length > 0) return;
        done();
      };
      const timer = setTimeout(() => {
        for (const reader of behind()) this.live.delete(reader);
        done();
      }, READER_WAIT_MS);
      const done = () => {
        clearTimeout(timer);
        this.off("read", check);
        resolve();
      };
      this.on("read", check);
    });
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
  /** Exports whose producer is being set up (its meta written, its spool opened), by spool id. */
  starting: Map<string, Promise<ExportJob>>;
}
const registry: Registry = ((globalThis as { __hangarExportJobs?: Registry }).__hangarExportJobs ??= { jobs: new Map(), readers: new Map(), sweeper: undefined, starting: new Map() });
// (A registry a hot reload kept from before `starting` was.)
registry.starting ??= new Map();

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
async function refusal(response: BlockAnswer): Promise<DownloadError> {
  const text = (await response.text().catch(() => "")).trim();
  const [code = "", ...params] = text.split(/\s+/);
  const known = /^[A-Z][A-Z0-9_]+$/.test(code);
  let message = known ? describeXenApiError(code, params) : text || `the toolstack answered ${response.status}`;
  let status = response.status === 412 ? 412 : response.status === 401 || response.status === 403 || response.status === 404 || response.status === 400 ? response.status : 502;
  if (code === "UUID_INVALID" || code === "HANDLE_INVALID") {
    status = 404;
    if (params[0] === "VM" || params[0] === "VDI") message = `There is no ${params[0]} with the UUID ${params[1] ?? ""}: it may have been destroyed.`;
  }
  if (status === 401) message = "The toolstack session has ended: log in to the console again.";
  return new DownloadError(status, message, known ? code : undefined);
}

export interface ExportRequest extends ExportKind {
  /** The toolstack session (never sent to the browser). */
  session: string;
  /** The VM's uuid, or for a disk format the VDI's. */
  vmUuid: string;
  /** A task to run the export in (made beforehand, so its progress can be followed). */
  task?: string;
}

/** The toolstack resource of an export: /export of a VM (XVA, or Hangar's OVA), /export_raw_vdi of a VDI. */
function exportUrl(request: ExportRequest, extra: Record<string, string>): URL {
  const { session, vmUuid: uuid, format } = request;
  if (format === "xva") return resourceUrl(toolstackUrl(), session, "export", { uuid, use_compression: request.compression === "none" ? "false" : request.compression, ...extra });
  if (format === "ova") return resourceUrl(toolstackUrl(), session, "export", { uuid, format, ...extra });
  return resourceUrl(toolstackUrl(), session, "export_raw_vdi", { vdi: uuid, format, base: request.base ?? undefined, ...extra });
}

/** Blocks per running export (1 MiB each): what may wait for the disk, and the recent bytes downloads copy. */
const POOL_BLOCKS = 16;
const BLOCK_BYTES = 1024 * 1024;

/**
 * GET `url` into a new block pool, a pool member's redirect followed as the export contract asks. The body is
 * read by getIntoBlocks, not by Node's HTTP client (a new 64 KiB buffer per socket read: a full GC every
 * ~23 MiB): straight into the pool's blocks, sent on with no copy, the console's CPU per 2 GiB downloaded went
 * from 1.8-1.9 s to 1.4-1.55 s (commit 79695c5, transfers bench).
 */
async function askToolstack(url: URL): Promise<{ response: BlockAnswer; pool: BlockPool }> {
  // A connection of its own (no keep-alive): an export is long, and a pooled socket could be closed under it.
  const { answer } = await followRedirects(url, async (at) => {
    const pool = new BlockPool(POOL_BLOCKS, BLOCK_BYTES);
    const response = await getIntoBlocks(at, pool).catch((error: Error) => {
      throw new DownloadError(502, `The toolstack at ${at.origin === new URL(toolstackUrl()).origin ? toolstackUrl() : at.origin} cannot be reached (${error.message}). Is it running?`);
    });
    return { response, pool, status: response.status, location: response.header("location"), discard: () => response.cancel() };
  });
  return answer;
}

async function checkSpace(): Promise<void> {
  await sweepNow();
  const free = await freeBytes();
  if (free < transferMinFreeBytes()) throw new DownloadError(507, `The console's disk has only ${Math.floor(free / 1024 / 1024)} MiB free, too little to spool an export (HANGAR_TRANSFER_MIN_FREE_MB is ${Math.floor(transferMinFreeBytes() / 1024 / 1024)}).`);
}

/** Starts a new export into a new spool; resolves once the toolstack has answered (with its ETag). */
export async function startExport(request: ExportRequest): Promise<ExportJob> {
  await checkSpace();
  const { response, pool } = await askToolstack(exportUrl(request, request.task === undefined ? {} : { task_id: request.task }));
  if (!ok(response)) throw await refusal(response);
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
    format: request.format,
    base: request.base,
    disposition: response.header("content-disposition") ?? `attachment; filename="${request.vmUuid}.${request.format}"`,
    task: request.task,
    created: Date.now(),
    size: null,
  };
  // Exports of the VM started in the same second are the same bytes (the ETag, and the spool, name them): the
  // first one's producer writes the spool, the others follow it (two would write one file, and one meta).
  const same = runningJob(meta.id) ?? registry.starting.get(meta.id);
  if (same !== undefined) {
    response.cancel();
    return same;
  }
  const starting = (async () => {
    await writeMeta(meta);
    return run(meta, response, pool, 0, response.header("task-id") ?? undefined);
  })();
  registry.starting.set(meta.id, starting);
  try {
    return await starting;
  } finally {
    registry.starting.delete(meta.id);
  }
}

/**
 * Continues (or remakes) the export a spool holds, from the bytes already in it: `offset` + `etag` give the
 * same bytes, or 412 when the VM changed since (the spool is then removed).
 */
export async function continueExport(session: string, meta: SpoolMeta, from: number): Promise<ExportJob> {
  const running = runningJob(meta.id);
  if (running !== undefined) return running;
  await checkSpace();
  const { response, pool } = await askToolstack(exportUrl({ session, vmUuid: meta.vmUuid, compression: meta.compression, format: meta.format, base: meta.base }, { offset: String(from), etag: meta.etag }));
  if (!ok(response)) {
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
  return run(meta, response, pool, from, response.header("task-id") ?? undefined);
}

const ok = (response: BlockAnswer) => response.status >= 200 && response.status < 300;

async function run(meta: SpoolMeta, response: BlockAnswer, pool: BlockPool, from: number, task: string | undefined): Promise<ExportJob> {
  // The archive exists before the job is seen: a reader opening it at once must not find it missing.
  let spool: SpoolWriter;
  try {
    spool = await SpoolWriter.open(archivePath(meta.id), from, { fresh: from === 0 });
  } catch (error) {
    response.cancel();
    throw new DownloadError(500, `The export's spool cannot be written (${(error as Error).message}).`);
  }
  const job = new ExportJob(meta, from, task, pool);
  registry.jobs.set(meta.id, job);
  void (async () => {
    let diskFull = false;
    try {
      let nextCheck = from + SPACE_CHECK_BYTES;
      const write = async (chunks: Buffer[]) => {
        await spool.write(chunks);
        const position = spool.position;
        job.advance(position);
        if (position >= nextCheck) {
          nextCheck = position + SPACE_CHECK_BYTES;
          if ((await freeBytes()) < HARD_FLOOR_BYTES) {
            await sweepSpools(busySpools());
            if ((await freeBytes()) < HARD_FLOOR_BYTES) throw new DownloadError(507, "The console's disk is full: the export was stopped.");
          }
        }
      };
      // The blocks that filled while a write was in flight are written together (one pwritev).
      for await (const batch of response.batches()) {
        await write(batch.map((block) => block.buffer.subarray(0, block.length)));
        // Downloads keeping up send these blocks from memory: they are reused once those have them, while
        // the next ones are written.
        void job.readersPast(spool.position).then(() => {
          for (const block of batch) pool.give(block);
        });
      }
      await spool.settle();
      await writeMeta({ ...((await readMeta(meta.id)) ?? meta), size: spool.position });
      job.finish();
    } catch (error) {
      const failure =
        error instanceof DownloadError
          ? error
          : (error as NodeJS.ErrnoException).code === "ENOSPC"
            ? new DownloadError(507, "The console's disk is full: the export was stopped.")
            : new DownloadError(502, `The export stopped before its end (${(error as Error).message}); download it again to continue it.`);
      // The toolstack's answer is not read on: its connection goes, and the export's task with it (a paused
      // socket would hold the export, and its disks plugged, for good).
      response.cancel();
      diskFull = failure.status === 507;
      job.finish(failure);
    } finally {
      await spool.close();
      if (registry.jobs.get(meta.id) === job) registry.jobs.delete(meta.id);
      // Half an export kept on a full disk only keeps it full (a later download starts the export again).
      if (diskFull) await removeSpool(meta.id).catch(() => undefined);
    }
  })();
  return job;
}
