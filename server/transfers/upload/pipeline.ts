// The import that runs while a VM archive is being uploaded: the spool file is followed as tus appends to it
// and streamed into the toolstack's `PUT /import` with backpressure, under a toolstack task made first, so the
// upload and the import are one transfer on the task page. A stream that breaks (toolstack restart, network)
// starts a fresh import from byte 0 of the spool; an archive the toolstack refuses ends the upload with its
// reason, and the spool is removed (the toolstack removes what the failed import made). In a pool the SR may
// be attached on another host than the toolstack's: an empty PUT without a task (Xen Orchestra's probe) is
// answered with a redirect to that host, and the archive goes there.
import { rm } from "node:fs/promises";
import { request as httpRequest, type ClientRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { z } from "zod";
import { describeTaskError } from "../../xenapi/error-descriptions.ts";
import { toolstackUrl } from "../../config.ts";
import { taskResult, XenApiClient, zTaskRecord, type TaskRecord } from "../../xenapi/client.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import { alignedBuffers, DIRECT_ALIGN, SpoolReader } from "../block-spool.ts";
import { isEnded, readState, spoolFile, type UploadState, writeState } from "./state.ts";

const READ_CHUNK = 1024 * 1024;
/** Buffers of the spool in flight to the import at once. */
const SEND_RING = 4;
/** How often the follower looks at the spool's size when no PATCH has told it (a fallback; PATCHes notify). */
const FOLLOW_POLL_MS = 250;
const TASK_POLL_MS = 500;
/** How long a cancelled earlier import may take to undo itself before the next one starts regardless. */
const EARLIER_IMPORT_UNDO_MS = 60_000;
/** Waits between fresh imports after a broken stream; the last repeats until MAX_BROKEN_MS has passed. */
const RETRY_DELAYS_MS = [500, 1000, 2000, 5000, 10_000];
const MAX_BROKEN_MS = 10 * 60_000;
/** Redirects followed from the toolstack to the host that imports into the SR. */
const MAX_REDIRECTS = 5;
const PROBE_TIMEOUT_MS = 30_000;

class Cancelled extends Error {}

/** The toolstack session the import runs in has ended (logged out, expired): only a new one can go on. */
const SESSION_ENDED = "the console session that started it has ended (logged out or expired): log in again and the upload resumes";

/** Process-wide, and kept across hot reloads in development (one pipeline per upload, whatever reloads). */
const registry = ((globalThis as { __hangarUploadPipelines?: Map<string, ImportPipeline> }).__hangarUploadPipelines ??= new Map());

export function runningPipeline(id: string): ImportPipeline | undefined {
  return registry.get(id);
}

export function runningPipelines(): ImportPipeline[] {
  return [...registry.values()];
}

/** Starts the import of an upload unless it already runs (or has ended): one import per upload, whatever asks. */
export function ensurePipeline(state: UploadState, hooks: PipelineHooks): ImportPipeline | undefined {
  const running = registry.get(state.id);
  if (running !== undefined) return running;
  if (isEnded(state.status)) return undefined;
  const pipeline = new ImportPipeline(state, hooks);
  registry.set(state.id, pipeline);
  // It leaves the registry once its end is recorded too: a request meanwhile must not start another from the
  // state file, which still says "importing" until then.
  void pipeline
    .run()
    .then(() => pipeline.ended)
    .finally(() => {
      if (registry.get(state.id) === pipeline) registry.delete(state.id);
    });
  return pipeline;
}

/** Wakes the follower of an upload (bytes arrived). */
export function notifyUpload(id: string): void {
  registry.get(id)?.notify();
}

/** Fails an upload whose bytes the console could not keep: its import (running or not) ends with `error`. */
export async function failUpload(id: string, error: string): Promise<void> {
  const pipeline = registry.get(id);
  if (pipeline !== undefined) await pipeline.fail(error);
  else {
    const state = await readState(id);
    if (state !== undefined && !isEnded(state.status)) await writeState({ ...state, status: "failed", error });
  }
}

export async function cancelPipeline(id: string): Promise<void> {
  const pipeline = registry.get(id);
  if (pipeline !== undefined) await pipeline.cancel();
  else {
    const state = await readState(id);
    if (state !== undefined && state.status !== "done" && state.status !== "failed") await writeState({ ...state, status: "cancelled", error: null });
  }
}

export interface PipelineHooks {
  /** Removes the upload's spool (and tus's record of it): an archive refused, or an import done. */
  removeSpool(id: string): Promise<void>;
}

type Outcome = { kind: "done"; vms: string[] } | { kind: "refused"; error: string } | { kind: "broken"; reason: string };

export class ImportPipeline {
  state: UploadState;
  private readonly hooks: PipelineHooks;
  private readonly abort = new AbortController();
  private wake: (() => void) | undefined;
  private request: ClientRequest | undefined;
  /** The last attempt found the session ended: waiting for the user to log in again. */
  private sessionEnded = false;
  private retryNow: (() => void) | undefined;

  constructor(state: UploadState, hooks: PipelineHooks) {
    this.state = state;
    this.hooks = hooks;
  }

  notify(): void {
    this.wake?.();
  }

  get waitsForSession(): boolean {
    return this.sessionEnded;
  }

  /** A session of the same user (the browser's next request, or its page polling) replaces one that has ended. */
  async adoptSession(session: string): Promise<void> {
    if (!this.sessionEnded || session === this.state.session) return;
    this.sessionEnded = false;
    await this.save({ session });
    this.retryNow?.();
  }

  private async save(change: Partial<UploadState>): Promise<void> {
    // An ended upload stays ended: an attempt still under way when it was cancelled or failed must not undo that.
    if (isEnded(this.state.status)) return;
    this.state = { ...this.state, ...change, updated: Date.now() };
    await writeState(this.state);
  }

  private xapi(): XenApiClient {
    return new XenApiClient(toolstackUrl(), this.state.session);
  }

  /** Stops where it is and leaves the registry, its task left to the next pipeline of the upload (tests: a console gone). */
  abandon(): void {
    this.abort.abort(new Cancelled("abandoned"));
    this.request?.destroy(new Cancelled("abandoned"));
    if (registry.get(this.state.id) === this) registry.delete(this.state.id);
  }

  async cancel(): Promise<void> {
    await this.end("cancelled", null);
  }

  /** The upload cannot go on (the console could not keep its bytes): its import stops, and it fails with `error`. */
  async fail(error: string): Promise<void> {
    await this.end("failed", error);
  }

  /** Cancelled or failed from outside: recorded once this settles. */
  ended: Promise<void> | undefined;

  private async end(status: "cancelled" | "failed", error: string | null): Promise<void> {
    this.abort.abort(new Cancelled(status));
    this.request?.destroy(new Cancelled(status));
    this.ended ??= (async () => {
      const task = this.state.task;
      if (task !== null) await this.xapi().call(z.unknown(), "task.cancel", task).catch(() => undefined);
      await this.save({ status, error });
    })();
    await this.ended;
  }

  async run(): Promise<void> {
    let brokenSince: number | undefined;
    let retry = 0;
    while (!this.abort.signal.aborted) {
      let outcome: Outcome;
      try {
        outcome = (await this.earlierImport()) ?? (await this.attempt());
      } catch (error) {
        if (this.abort.signal.aborted) return;
        outcome = { kind: "broken", reason: brokenReason(error) };
      }
      if (this.abort.signal.aborted) return;
      if (outcome.kind === "done") {
        await this.save({ status: "done", error: null, vms: outcome.vms });
        // The last PATCH may still be answering: remove the spool a little later.
        setTimeout(() => void this.hooks.removeSpool(this.state.id).catch(() => undefined), 30_000).unref();
        return;
      }
      if (outcome.kind === "refused") {
        await this.save({ status: "failed", error: outcome.error });
        await this.hooks.removeSpool(this.state.id).catch(() => rm(spoolFile(this.state.id), { force: true }));
        return;
      }
      brokenSince ??= Date.now();
      if (Date.now() - brokenSince > MAX_BROKEN_MS) {
        const error = outcome.reason === SESSION_ENDED ? "The import stopped: the console session that started it ended, and no one logged in again to resume it within 10 minutes. Upload the file again." : `The import stream to the toolstack kept breaking (${outcome.reason}); upload the file again.`;
        await this.save({ status: "failed", error });
        await this.hooks.removeSpool(this.state.id).catch(() => undefined);
        return;
      }
      console.warn(`upload ${this.state.id}: the import stream broke (${outcome.reason}); importing again from the spool`);
      this.sessionEnded = outcome.reason === SESSION_ENDED;
      // Shown to the user while it waits (the status stays "importing").
      if (this.sessionEnded) await this.save({ error: `Waiting: ${SESSION_ENDED}.` });
      else if (outcome.reason.includes("HOST_OFFLINE")) await this.save({ error: `Waiting: the SR's host is offline; the import goes on when it is back (${outcome.reason}).` });
      const wait = new AbortController();
      this.retryNow = () => wait.abort();
      await delay(RETRY_DELAYS_MS[Math.min(retry++, RETRY_DELAYS_MS.length - 1)]!, AbortSignal.any([this.abort.signal, wait.signal])).catch(() => undefined);
      this.retryNow = undefined;
    }
  }

  /**
   * The import an earlier attempt started (before a console restart, or a session that ended): done if its
   * task succeeded meanwhile (its stream needed no session to finish), so the file is not imported twice;
   * one still pending may wait for bytes that will never come and is cancelled. The toolstack undoes it before
   * its task ends, so the next import waits for that: two copies of the VM and its disks never exist at once,
   * and an import that succeeded as it was cancelled is kept rather than made again.
   */
  private async earlierImport(): Promise<Outcome | undefined> {
    const task = this.state.task;
    if (task === null) return undefined;
    const xapi = this.xapi();
    let record = await xapi.call(zTaskRecord, "task.get_record", task).catch((error: unknown) => {
      if (error instanceof XenApiError && error.code === "SESSION_INVALID") throw error;
      return undefined;
    });
    if (record?.status === "pending") await xapi.call(z.unknown(), "task.cancel", task).catch(() => undefined);
    if (record?.status === "pending" || record?.status === "cancelling") {
      record = await this.watchTask(xapi, task, AbortSignal.any([this.abort.signal, AbortSignal.timeout(EARLIER_IMPORT_UNDO_MS)]));
    }
    if (record?.status === "success") return this.outcomeOf(record, undefined);
    return undefined;
  }

  /** One import: the host that takes it found, a fresh task, the spool streamed from byte 0 as it grows, and how it ended. */
  private async attempt(): Promise<Outcome> {
    const xapi = this.xapi();
    const start = new URL("import", toolstackUrl().endsWith("/") ? toolstackUrl() : `${toolstackUrl()}/`);
    start.searchParams.set("session_id", this.state.session);
    start.searchParams.set("sr_id", this.state.sr);
    const target = await findImportHost(start, this.abort.signal);
    if (!(target instanceof URL)) return answerOutcome(target.status, target.text);
    const task = await xapi.call(z.string(), "task.create", `VM import: ${this.state.fileName}`, `Uploaded in the console and imported into ${this.state.srName} as it arrives${this.state.attempts > 0 ? ` (import restarted from the console's copy, attempt ${this.state.attempts + 1})` : ""}`);
    // Cancelled or failed while the task was being made: this attempt's task is the last thing it did.
    if (this.abort.signal.aborted) {
      await xapi.call(z.unknown(), "task.cancel", task).catch(() => undefined);
      throw this.abort.signal.reason;
    }
    await this.save({ task, attempts: this.state.attempts + 1, status: "importing", error: null });
    const url = new URL(target);
    url.searchParams.set("task_id", task);
    const send = url.protocol === "https:" ? httpsRequest : httpRequest;
    const attemptAbort = new AbortController();
    const onCancel = () => attemptAbort.abort(this.abort.signal.reason);
    this.abort.signal.addEventListener("abort", onCancel, { once: true });
    // Ended while this attempt was being set up: a signal aborted already never fires its listeners.
    if (this.abort.signal.aborted) onCancel();
    try {
      const outcome = await new Promise<Outcome>((resolve) => {
        let settled = false;
        let broken: string | undefined;
        const settle = (o: Outcome) => {
          if (settled) return;
          settled = true;
          resolve(o);
        };
        const request = send(url, { method: "PUT", headers: { "content-type": "application/octet-stream", "content-length": String(this.state.length) } });
        this.request = request;
        request.on("error", (error) => {
          broken = error.message;
          settle({ kind: "broken", reason: error.message });
        });
        void this.send(request, attemptAbort.signal).catch((error: Error) => {
          if (!(error instanceof Cancelled || attemptAbort.signal.aborted)) broken = error.message;
          request.destroy(error);
        });
        request.on("response", (response: IncomingMessage) => {
          const chunks: Buffer[] = [];
          response.on("data", (chunk: Buffer) => chunks.push(chunk));
          response.on("error", (error) => {
            broken = error.message;
            settle({ kind: "broken", reason: error.message });
          });
          response.on("end", () => {
            if ((response.statusCode ?? 0) >= 300) {
              settle(answerOutcome(response.statusCode ?? 0, Buffer.concat(chunks).toString("utf8").trim()));
              return;
            }
            // The body ended: the task holds the outcome.
            void this.finalTask(xapi, task).then((record) => settle(this.outcomeOf(record, broken)), (error: unknown) => settle({ kind: "broken", reason: brokenReason(error) }));
          });
        });
        // The task may fail while the upload still sends (the toolstack would drain the rest for a while first).
        void this.watchTask(xapi, task, attemptAbort.signal).then((record) => {
          if (record === undefined || settled) return;
          // A failure seen just before the stream's own error is the stream's: give it a moment to show.
          setTimeout(() => {
            settle(this.outcomeOf(record, broken));
            if (!request.destroyed) request.destroy();
          }, record.status === "success" ? 0 : 300);
        });
      });
      if (outcome.kind !== "done" && !attemptAbort.signal.aborted) {
        // A task still pending (stream broke before the toolstack noticed) is cancelled; the toolstack undoes it.
        await xapi.call(z.unknown(), "task.cancel", task).catch(() => undefined);
      }
      return outcome;
    } finally {
      attemptAbort.abort(new Cancelled("attempt over"));
      this.abort.signal.removeEventListener("abort", onCancel);
      this.request = undefined;
    }
  }

  private outcomeOf(record: TaskRecord, broken: string | undefined): Outcome {
    if (record.status === "success") {
      const result = taskResult(record);
      const vms = Array.isArray(result) ? result.map(String) : typeof result === "string" ? [result] : [];
      return { kind: "done", vms };
    }
    if (broken !== undefined) return { kind: "broken", reason: broken };
    if (record.status === "cancelled") return { kind: "refused", error: "The import was cancelled." };
    return { kind: "refused", error: describeTaskError(record.error_info) || "The toolstack could not import the file." };
  }

  private async finalTask(xapi: XenApiClient, task: string): Promise<TaskRecord> {
    for (let i = 0; ; i++) {
      const record = await xapi.call(zTaskRecord, "task.get_record", task);
      if (record.status !== "pending" && record.status !== "cancelling") return record;
      if (i > 120) throw new Error("the import's task did not finish after its stream ended");
      await delay(TASK_POLL_MS);
    }
  }

  /** The task's record once it has finished; undefined when this attempt ends first. Errors (a toolstack away) are waited out. */
  private async watchTask(xapi: XenApiClient, task: string, signal: AbortSignal): Promise<TaskRecord | undefined> {
    while (!signal.aborted) {
      await delay(TASK_POLL_MS, signal).catch(() => undefined);
      if (signal.aborted) return undefined;
      const record = await xapi.call(zTaskRecord, "task.get_record", task).catch(() => undefined);
      if (record !== undefined && record.status !== "pending" && record.status !== "cancelling") return record;
    }
    return undefined;
  }

  /**
   * The spool to the import request, read into a ring of buffers each reused once the request has written it:
   * a new buffer per read made V8 run a full collection every few MiB (external memory), most of the console's
   * CPU during an upload.
   */
  private async send(request: ClientRequest, signal: AbortSignal): Promise<void> {
    const ring = alignedBuffers(SEND_RING, READ_CHUNK + DIRECT_ALIGN).map((buffer) => ({ buffer, written: Promise.resolve() }));
    let slot = 0;
    const take = async () => {
      const entry = ring[slot]!;
      await entry.written;
      return entry.buffer;
    };
    for await (const chunk of this.follow(signal, take)) {
      const entry = ring[slot]!;
      slot = (slot + 1) % SEND_RING;
      entry.written = new Promise((resolve, reject) => request.write(chunk, (error) => (error ? reject(error) : resolve())));
      entry.written.catch(() => undefined);
    }
    request.end();
  }

  /** The spool's bytes from 0 to the upload's length (read into `take()`'s buffers), waiting for each PATCH to append more. */
  private async *follow(signal: AbortSignal, take: () => Promise<Buffer>): AsyncGenerator<Buffer> {
    const file = spoolFile(this.state.id);
    let handle: SpoolReader | undefined;
    let position = 0;
    /** The spool's length when last looked at: looked at again only once the bytes before it are sent. */
    let size = 0;
    try {
      while (position < this.state.length) {
        signal.throwIfAborted();
        if (handle === undefined) {
          handle = await SpoolReader.open(file).catch((error: NodeJS.ErrnoException) => {
            if (error.code === "ENOENT") return undefined;
            throw error;
          });
        }
        if (handle !== undefined && size <= position) size = await handle.size();
        if (handle !== undefined && size > position) {
          const bytes = await handle.read(await take(), position, Math.min(READ_CHUNK, size - position, this.state.length - position));
          position += bytes.length;
          yield bytes;
          continue;
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, FOLLOW_POLL_MS);
          function done() {
            clearTimeout(timer);
            signal.removeEventListener("abort", done);
            resolve();
          }
          this.wake = done;
          signal.addEventListener("abort", done, { once: true });
        });
      }
    } finally {
      await handle?.close();
    }
  }
}

/**
 * The URL that takes the import: `start` (the toolstack's /import, without a task) probed with an empty PUT,
 * following the toolstack's redirects to the host the SR is attached on; or the answer that refused it.
 */
export async function findImportHost(start: URL, signal?: AbortSignal): Promise<URL | { status: number; text: string }> {
  let url = start;
  for (let redirects = 0; ; redirects++) {
    const response = await fetch(url, {
      method: "PUT",
      body: "",
      headers: { "content-type": "application/octet-stream" },
      redirect: "manual",
      signal: signal === undefined ? AbortSignal.timeout(PROBE_TIMEOUT_MS) : AbortSignal.any([signal, AbortSignal.timeout(PROBE_TIMEOUT_MS)]),
    }).catch((error: Error) => {
      throw new Error(`the toolstack at ${url.origin} cannot be reached (${(error.cause as Error | undefined)?.message ?? error.message})`);
    });
    const text = (await response.text()).trim();
    const location = response.headers.get("location");
    if (response.status < 300 || response.status >= 400 || location === null) return response.status < 300 ? url : { status: response.status, text };
    if (redirects >= MAX_REDIRECTS) return { status: 508, text: `The toolstack redirected the import more than ${MAX_REDIRECTS} times (last to ${new URL(location, url).origin}).` };
    url = new URL(location, url);
  }
}

/** What an import request's refusal (HTTP status ≥ 300) means for the upload. */
function answerOutcome(status: number, text: string): Outcome {
  // 5xx (a host offline, a toolstack in trouble) is not the archive's fault: import again.
  if (status >= 500) return { kind: "broken", reason: `HTTP ${status}: ${text}` };
  if (status === 401 || text.startsWith("SESSION_INVALID")) return { kind: "broken", reason: SESSION_ENDED };
  // The probe said where; a redirect now means the SR moved meanwhile: ask again.
  if (status >= 300 && status < 400) return { kind: "broken", reason: `the SR moved to another host (HTTP ${status})` };
  return { kind: "refused", error: text === "" ? `The toolstack refused the import (HTTP ${status}).` : text };
}

/** Why an attempt broke, in words; an ended session is told apart (only the user logging in again helps). */
function brokenReason(error: unknown): string {
  return error instanceof XenApiError && error.code === "SESSION_INVALID" ? SESSION_ENDED : (error as Error).message;
}

function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    }, { once: true });
  });
}
