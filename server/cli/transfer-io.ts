// What the transfer commands share: the toolstack's HTTP resources, progress on stderr, Ctrl-C, and the
// sources an import reads (a file, a legacy package directory, a URL, stdin), their first bytes sniffed.
import { createReadStream } from "node:fs";
import { open, stat } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { join } from "node:path";
import { Readable, Transform } from "node:stream";
import { formatDuration, formatSize, TransferMeter, transferBar, transferLine } from "./progress.ts";
import { packLegacyDirectory } from "../xva/legacy.ts";
import { PACKAGE_SNIFF_BYTES, sniffFormat } from "../../lib/file-kind.ts";
import type { TaskRecord, XenApiClient } from "../xenapi/client.ts";
import { get, reasonOf, ResourceRefused, type ResourceTask, resourceUrl, type ResourceQuery } from "../xenapi/resource.ts";

// ---- HTTP: the toolstack's resources through server/xenapi/resource.ts.

export function endpoint(client: XenApiClient, path: string, query: ResourceQuery): URL {
  return resourceUrl(client.url, client.session, path, query);
}

/** A refusal before any data moved: the status and the toolstack's reason. */
export async function refused(what: string, response: IncomingMessage): Promise<Error> {
  return new ResourceRefused(what, response.statusCode ?? 0, await reasonOf(response));
}

// ---- Progress on stderr: a bar redrawn on a terminal, else a line per 10% or 10 s.

export class TransferProgress {
  bytes = 0;
  task: number | null = null;
  readonly #verb: string;
  readonly #total: number | null;
  readonly #terminal = process.stderr.isTTY === true;
  readonly #meter = new TransferMeter();
  readonly #started = Date.now();
  readonly #startBytes: number;
  #timer: NodeJS.Timeout | undefined;
  #lastLine = Date.now();
  #lastStep = 0;
  #drawn = false;

  constructor(verb: string, total: number | null, startBytes = 0) {
    this.#verb = verb;
    this.#total = total;
    this.bytes = startBytes;
    this.#startBytes = startBytes;
    this.#timer = setInterval(() => this.#tick(), this.#terminal ? 500 : 1000);
  }

  #tick(): void {
    const estimate = this.#meter.sample(this.bytes, this.#total, this.task);
    if (this.#terminal) {
      // Cut to the terminal's width: a wrapped line could not be redrawn in place.
      process.stderr.write(`\r${transferBar(estimate).slice(0, Math.max(20, (process.stderr.columns || 80) - 1))}\u001b[K`);
      this.#drawn = true;
      return;
    }
    const step = estimate.fraction === null ? 0 : Math.floor(estimate.fraction * 10);
    if (step > this.#lastStep || Date.now() - this.#lastLine >= 10_000) {
      process.stderr.write(`${transferLine(this.#verb, estimate)}\n`);
      this.#lastStep = step;
      this.#lastLine = Date.now();
    }
  }

  /** Stops, and says how much moved how fast (the bar goes, this line stays). */
  stop(moved: number | null = this.bytes - this.#startBytes): void {
    clearInterval(this.#timer);
    if (this.#drawn) process.stderr.write("\r\u001b[K");
    if (moved === null) return;
    const seconds = (Date.now() - this.#started) / 1000;
    const rate = seconds > 0 ? `, ${formatSize(moved / seconds)}/s` : "";
    process.stderr.write(`${this.#verb} ${formatSize(moved)} in ${formatDuration(seconds)}${rate}\n`);
  }
}

/** A pass-through that counts the bytes going by. */
export function counter(count: (bytes: number) => void): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      count(chunk.length);
      done(null, chunk);
    },
  });
}

/** Runs `work` with a signal that Ctrl-C (or SIGTERM) aborts; a second Ctrl-C quits at once. */
export async function interruptible<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const onSignal = () => controller.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    return await work(controller.signal);
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

/** The task's status once finished, asked for a few seconds (no event.from wait: the command is ending). */
export async function settledStatus(task: ResourceTask, withinMs = 10_000): Promise<string | undefined> {
  return (await task.finished(AbortSignal.timeout(withinMs), { everyMs: 200 }))?.status;
}

export const failure = (task: TaskRecord) => `${task.status === "cancelled" ? "cancelled" : "failed"}: ${task.error_info.join(" ")}`;

// ---- Import

export interface Source {
  stream: Readable;
  /** Bytes in all, when known: sent as Content-Length. */
  size: number | null;
}

/** FILE, DIR (a legacy package), http(s) URL, or "-" for stdin. */
export async function openSource(given: string): Promise<Source> {
  if (given === "-") return { stream: process.stdin, size: null };
  if (/^https?:\/\//i.test(given)) {
    // identity: a Content-Encoding would make Content-Length lie about the bytes we forward.
    const { response } = await get(new URL(given), { headers: { "accept-encoding": "identity" } });
    if (response.statusCode !== 200) {
      response.resume();
      throw new Error(`${given}: HTTP ${response.statusCode} ${response.statusMessage ?? ""}`.trimEnd());
    }
    const length = response.headers["content-length"];
    return { stream: response, size: length !== undefined && /^\d+$/.test(length) ? Number(length) : null };
  }
  const info = await stat(given);
  if (info.isDirectory()) {
    await stat(join(given, "ova.xml")).catch(() => {
      throw new Error(`${given} is a directory without ova.xml: not a legacy package`);
    });
    return { stream: packLegacyDirectory(given), size: null };
  }
  return { stream: createReadStream(given, { highWaterMark: 1024 * 1024 }), size: info.size };
}

/** A disk image's format from its first bytes (and, for a fixed VHD, its last sector); raw when nothing names one. */
export function formatOf(head: Buffer, tail: Buffer | undefined, what: string): string {
  const sniffed = sniffFormat(head);
  if (sniffed === "gzip" || sniffed === "zstd") throw new Error(`${what} is ${sniffed}-compressed: decompress it first (disk images are sent as they are)`);
  if (sniffed !== undefined) return sniffed;
  return tail?.toString("latin1", 0, 8) === "conectix" ? "vhd" : "raw";
}

/**
 * The first bytes of FILE, URL or stdin (and a file's last sector, where a fixed VHD says what it is). A file is
 * read in place; a stream is opened here and answered with its first bytes put back.
 */
export async function peekSource(given: string): Promise<{ head: Buffer; tail?: Buffer; source?: Source }> {
  if (given !== "-" && !/^https?:\/\//i.test(given)) {
    const handle = await open(given, "r");
    try {
      const { size } = await handle.stat();
      const head = Buffer.alloc(Math.min(PACKAGE_SNIFF_BYTES, size));
      await handle.read(head, 0, head.length, 0);
      const tail = Buffer.alloc(size >= 1024 ? 512 : 0);
      await handle.read(tail, 0, tail.length, size - tail.length);
      return { head, tail };
    } finally {
      await handle.close();
    }
  }
  const source = await openSource(given);
  const chunks = source.stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const head: Buffer[] = [];
  let length = 0;
  while (length < PACKAGE_SNIFF_BYTES) {
    const step = await chunks.next();
    if (step.done) break;
    head.push(step.value);
    length += step.value.length;
  }
  const rest = async function* () {
    yield* head;
    for (let step = await chunks.next(); !step.done; step = await chunks.next()) yield step.value;
  };
  return { head: Buffer.concat(head), source: { stream: Readable.from(rest(), { objectMode: false }), size: source.size } };
}

/** The disk format of FILE, URL or stdin, read from its first bytes (see peekSource). */
export async function sniffSource(given: string): Promise<{ format: string; source?: Source }> {
  const { head, tail, source } = await peekSource(given);
  return { format: formatOf(head, tail, given === "-" ? "stdin" : given), source };
}
