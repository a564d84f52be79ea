// GET /api/download/vm/<vm uuid>.xva?compression=none|gzip|zstd[&task=<ref>] (a VM as an XVA), …/vm/<uuid>.ova (as
// an OVA), and /api/download/vdi/<vdi uuid>.raw|vhd|qcow2|vmdk[?base=<vdi uuid>] (a disk, or its changes since
// a snapshot of it): exports downloaded through the console. A plain GET starts the export (in the dialog's task
// when `task` is given) and streams it as it is produced, through its spool; `Range: bytes=N-` (with `If-Range`
// when the client has it, as browsers do) is served from the spool of that export — the one the ETag names, else
// the one the URL's task made, else the latest of that subject and kind — once its length is known, so the 206
// carries a real Content-Range. A spool that is not complete (its producer broke, or the console restarted) is
// continued from the toolstack with `offset` + `etag`; a subject changed since gets the whole new export (200).
import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import { isSessionValid, sessionFromHeaders } from "../../auth/session.ts";
import { webHeaders } from "../../web-headers.ts";
import { anyEtagDate } from "../../xenapi/export-etag.ts";
import { alignedBuffers, DIRECT_ALIGN, SpoolReader } from "../block-spool.ts";
import { addReader, continueExport, DownloadError, type ExportJob, type LiveReader, OWN_BYTES, runningJob, type SpoolPiece, startExport } from "./producer.ts";
import { archivePath, type ExportKind, listSpools, sameKind, type SpoolEntry, type SpoolMeta, touchSpool, ZCompression } from "./spool.ts";

/** Bytes per read of the spool: large reads, few syscalls. */
const CHUNK = 1024 * 1024;
const ZUuid = z.string().regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
const ZQuery = z.object({
  compression: ZCompression.default("none"),
  task: z.string().regex(/^OpaqueRef:[\w-]+$/, "not a task reference").optional(),
  base: ZUuid.optional(),
});

/** What is downloaded from each route: its subject, and the file names it answers to. */
export type DownloadSubject = "vm" | "vdi";
const FILES: Record<DownloadSubject, { form: RegExp; address: string }> = {
  vm: { form: /^(.+)\.(xva|ova)$/i, address: "/api/download/vm/<VM UUID>.xva or .ova" },
  vdi: { form: /^(.+)\.(raw|vhd|qcow2|vmdk)$/i, address: "/api/download/vdi/<VDI UUID>.raw, .vhd, .qcow2 or .vmdk" },
};

/** What the route answers: a status, headers, and a body (text, or a stream of the spool). */
interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string | SpoolRange | null;
}

function textAnswer(status: number, message: string, headers: Record<string, string> = {}): Answer {
  const body = `${message}\n`;
  return { status, headers: { "content-type": "text/plain; charset=utf-8", "content-length": String(Buffer.byteLength(body)), "cache-control": "no-store", ...headers }, body };
}

/** `bytes=N-` or `bytes=N-M` (one range); undefined for none, null for a form this route does not serve. */
export function parseRange(header: string | null): { start: number; end: number | undefined } | undefined | null {
  if (header === null) return undefined;
  const match = /^bytes=(\d+)-(\d*)$/.exec(header.trim());
  if (match === null) return null;
  const start = Number(match[1]);
  const end = match[2] === "" ? undefined : Number(match[2]);
  if (!Number.isSafeInteger(start) || (end !== undefined && (!Number.isSafeInteger(end) || end < start))) return null;
  return { start, end };
}

function representationHeaders(meta: SpoolMeta, task: string | undefined): Record<string, string> {
  const date = anyEtagDate(meta.etag);
  return {
    "content-type": "application/octet-stream",
    "content-disposition": meta.disposition,
    "accept-ranges": "bytes",
    etag: meta.etag,
    ...(date === undefined ? {} : { "last-modified": date.toUTCString() }),
    // Private to the user; and no proxy may compress or otherwise change the bytes (ranges count them).
    "cache-control": "private, no-transform",
    ...(task === undefined ? {} : { "x-hangar-task": task }),
  };
}

/**
 * The spool's bytes from `start` (to `end` inclusive, or its end), following the export while `job` still
 * writes it: `read` fills the caller's buffer, so a download reuses a few buffers and makes no garbage.
 */
class SpoolRange {
  private position: number;
  private readonly job: ExportJob | undefined;
  private readonly end: number | undefined;
  private readonly release: () => void;
  /** Set while this download follows the running export (it is then waited for, briefly). */
  private readonly follower: LiveReader | undefined;
  private readonly handle: Promise<SpoolReader>;
  constructor(meta: SpoolMeta, job: ExportJob | undefined, start: number, end: number | undefined) {
    this.position = start;
    this.job = job;
    this.end = end;
    this.release = addReader(meta.id);
    this.follower = job?.follow(start);
    this.handle = SpoolReader.open(archivePath(meta.id));
    // Looked at by next() or close(); until then not an unhandled rejection.
    this.handle.catch(() => undefined);
  }

  private advance(count: number): void {
    this.position += count;
    if (this.follower !== undefined) {
      this.follower.position = this.position;
      this.job!.moved(this.follower);
    }
  }

  /**
   * The next bytes from the current position, null at the end: the export's own memory while this download
   * keeps up with it (to be released once sent), else read from the disk into `scratch` (aligned, CHUNK +
   * DIRECT_ALIGN bytes).
   */
  async next(scratch: Buffer): Promise<SpoolPiece | null> {
    const file = await this.handle;
    for (;;) {
      const want = this.end === undefined ? CHUNK : Math.min(CHUNK, this.end + 1 - this.position);
      if (want <= 0) return null;
      const recent = this.job?.recent(this.position, want, scratch);
      if (recent !== undefined) {
        this.advance(recent.bytes.length);
        return recent;
      }
      const bytes = await file.read(scratch, this.position, want);
      if (bytes.length > 0) {
        this.advance(bytes.length);
        return { bytes, release: OWN_BYTES };
      }
      const job = this.job;
      if (job === undefined || (job.status === "complete" && this.position >= job.written)) return null;
      if (job.status === "failed") throw job.error ?? new Error("the export failed");
      await job.waitBeyond(this.position);
    }
  }

  async close(): Promise<void> {
    if (this.follower !== undefined) this.job!.moved(this.follower, true);
    this.release();
    await (await this.handle.catch(() => undefined))?.close().catch(() => undefined);
  }
}

/** Writes in flight per download, each of at most CHUNK bytes: a few MiB, no more. */
const RING = 4;

/**
 * The range to the response, with up to RING writes in flight. Each write reads either a leased block of the
 * export (released when the write ends) or a scratch buffer of its own (reused once the socket has taken it).
 */
async function sendSpool(range: SpoolRange, response: ServerResponse): Promise<void> {
  const closed = new Promise<never>((_, reject) => response.once("close", () => reject(new Error("the client went away"))));
  closed.catch(() => undefined);
  const ring = alignedBuffers(RING, CHUNK + DIRECT_ALIGN).map((scratch) => ({ scratch, taken: Promise.resolve() }));
  try {
    for (let slot = 0; ; slot = (slot + 1) % RING) {
      const entry = ring[slot]!;
      await Promise.race([entry.taken, closed]);
      const piece = await range.next(entry.scratch);
      if (piece === null) break;
      entry.taken = new Promise<void>((resolve, reject) => response.write(piece.bytes, (error) => (error ? reject(error) : resolve()))).finally(piece.release);
      entry.taken.catch(() => undefined);
    }
    await Promise.race([Promise.all(ring.map((entry) => entry.taken)), closed]);
    response.end();
  } catch {
    // A client gone, or the spool failing mid-body: a cut connection, a download the client can resume.
    response.destroy();
  } finally {
    await range.close();
  }
}

/** The spool a Range request continues: the one its If-Range names, else its task's, else the latest of that subject and kind. */
async function findSpool(uuid: string, kind: ExportKind, ifRange: string | null, task: string | undefined): Promise<SpoolEntry | undefined> {
  const spools = (await listSpools()).filter((entry) => entry.meta.vmUuid.toLowerCase() === uuid.toLowerCase());
  if (ifRange !== null) {
    const validator = ifRange.trim();
    return spools.find((entry) => entry.meta.etag === validator || anyEtagDate(entry.meta.etag)?.toUTCString() === validator);
  }
  if (task !== undefined) {
    const mine = spools.find((entry) => entry.meta.task === task);
    if (mine !== undefined) return mine;
  }
  return spools.filter((entry) => sameKind(entry.meta, kind)).sort((a, b) => b.meta.created - a.meta.created)[0];
}

/** The whole export as it is produced (200, no length yet: chunked). */
function streaming(job: ExportJob): Answer {
  return { status: 200, headers: representationHeaders(job.meta, job.task), body: new SpoolRange(job.meta, job, 0, undefined) };
}

/** A complete spool: the whole (200) or a range (206), with lengths. */
function fromCompleteSpool(meta: SpoolMeta, size: number, range: { start: number; end: number | undefined } | undefined): Answer {
  const headers = representationHeaders(meta, meta.task);
  if (range === undefined) return { status: 200, headers: { ...headers, "content-length": String(size) }, body: new SpoolRange(meta, undefined, 0, size - 1) };
  if (range.start >= size) return textAnswer(416, `The export has ${size} bytes: there is nothing from byte ${range.start}.`, { "content-range": `bytes */${size}`, "accept-ranges": "bytes", etag: meta.etag });
  const end = Math.min(range.end ?? size - 1, size - 1);
  return {
    status: 206,
    headers: { ...headers, "content-range": `bytes ${range.start}-${end}/${size}`, "content-length": String(end - range.start + 1) },
    body: new SpoolRange(meta, undefined, range.start, end),
  };
}

/** The spool made complete: waits for its producer, or continues it from the toolstack; undefined when the VM changed (412). */
async function completed(session: string, entry: SpoolEntry): Promise<{ meta: SpoolMeta; size: number } | undefined> {
  if (entry.meta.size !== null) return { meta: entry.meta, size: entry.meta.size };
  let job = runningJob(entry.meta.id);
  if (job === undefined) {
    try {
      job = await continueExport(session, entry.meta, entry.bytes);
    } catch (error) {
      if (error instanceof DownloadError && error.status === 412) return undefined;
      throw error;
    }
  }
  await job.done;
  if (job.status === "failed") throw job.error ?? new DownloadError(502, "The export failed.");
  return { meta: job.meta, size: job.written };
}

/** The route's answer: see the comment at the top. `file` is the last path segment (`<uuid>.<format>`). */
async function answer(method: string, url: URL, headers: Headers, subject: DownloadSubject, file: string): Promise<Answer> {
  const session = sessionFromHeaders(headers);
  if (session === undefined) return textAnswer(401, "Log in to the console to download an export.");
  let name: string;
  try {
    name = decodeURIComponent(file);
  } catch {
    name = "";
  }
  const match = FILES[subject].form.exec(name);
  const uuid = ZUuid.safeParse(match?.[1] ?? "");
  if (match === null || !uuid.success) return textAnswer(404, `There is no export at ${file}: the address is ${FILES[subject].address}.`);
  const query = ZQuery.safeParse(Object.fromEntries(url.searchParams));
  if (!query.success) {
    const issue = query.error.issues[0]!;
    return textAnswer(400, `Bad ${issue.path.join(".")}: ${issue.path[0] === "compression" ? "use none, gzip or zstd" : issue.path[0] === "base" ? "the base is a VDI's UUID" : issue.message}.`);
  }
  const { task } = query.data;
  const format = match[2]!.toLowerCase() as ExportKind["format"];
  // Only an XVA is compressed; only a disk has a base.
  const kind: ExportKind = { format, compression: format === "xva" ? query.data.compression : "none", base: subject === "vdi" ? (query.data.base?.toLowerCase() ?? null) : null };
  const vmUuid = uuid.data.toLowerCase();
  if (method === "HEAD") return { status: 200, headers: { "content-type": "application/octet-stream", "accept-ranges": "bytes", "cache-control": "no-store" }, body: null };
  // A spool (complete, or being written by another download) is served without the toolstack: it is asked first
  // whether the session still holds, so that the cookie of a session logged out since opens no export. A
  // toolstack that does not answer leaves it to the export, as a page does (requireSession).
  if (!(await isSessionValid(session).catch(() => true))) return textAnswer(401, "Your console session has ended: log in again to download the export.");
  const range = parseRange(headers.get("range"));
  const ifRange = headers.get("if-range");
  try {
    if (range !== undefined && range !== null) {
      const entry = await findSpool(vmUuid, kind, ifRange, task);
      if (entry !== undefined) {
        const done = await completed(session.session, entry);
        if (done !== undefined) {
          await touchSpool(done.meta.id);
          return fromCompleteSpool(done.meta, done.size, range);
        }
      }
      // No spool of that export (or the VM changed since it): the whole current export, as for a plain GET.
    } else if (task !== undefined) {
      // The Export dialog's URL asked again (the browser retrying, a second click): the same export.
      const mine = (await listSpools()).find((entry) => entry.meta.task === task && entry.meta.vmUuid === vmUuid);
      if (mine !== undefined) {
        const job = runningJob(mine.meta.id);
        if (job !== undefined) return streaming(job);
        if (mine.meta.size !== null) {
          await touchSpool(mine.meta.id);
          return fromCompleteSpool(mine.meta, mine.meta.size, undefined);
        }
      }
    }
    let job: ExportJob;
    try {
      job = await startExport({ session: session.session, vmUuid, ...kind, task });
    } catch (error) {
      // The dialog's task already used (a retry after the spool went): run in a task of the toolstack's own.
      if (!(error instanceof DownloadError && task !== undefined && (error.code === "OPERATION_NOT_ALLOWED" || (error.code === "HANDLE_INVALID" && !/\b(VM|VDI)\b/.test(error.message))))) throw error;
      job = await startExport({ session: session.session, vmUuid, ...kind });
    }
    return streaming(job);
  } catch (error) {
    if (error instanceof DownloadError) return textAnswer(error.status, error.message);
    return textAnswer(500, `The download failed: ${(error as Error).message}`);
  }
}

/**
 * The route on Node's own request and response (a Pages API route): the headers go out as given — Content-Length
 * included, which App Router handlers drop — and the spool is piped with the socket's backpressure.
 */
export async function serveExportDownload(request: IncomingMessage, response: ServerResponse, subject: DownloadSubject, file: string): Promise<void> {
  const headers = webHeaders(request);
  const method = request.method ?? "GET";
  if (method !== "GET" && method !== "HEAD") {
    const refused = textAnswer(405, `${method} is not served here: use GET.`, { allow: "GET, HEAD" });
    response.writeHead(refused.status, refused.headers).end(refused.body);
    return;
  }
  const reply = await answer(method, new URL(request.url ?? "/", "http://console"), headers, subject, file);
  response.writeHead(reply.status, reply.headers);
  if (reply.body === null || typeof reply.body === "string") {
    response.end(reply.body ?? undefined);
    return;
  }
  await sendSpool(reply.body, response);
}
