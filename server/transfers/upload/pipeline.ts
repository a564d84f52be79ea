// The import that runs while a VM archive is being uploaded, one per upload whatever asks (the registry), kept
// going until it ends: each attempt (import-attempt.ts) streams the spool into the toolstack's `PUT /import` as
// tus appends to it, under a toolstack task, so the upload and the import are one transfer on the task page. A
// stream that breaks (toolstack restart, network, a session that ended) is attempted again from byte 0 of the
// spool after a pause; an archive the toolstack refuses ends the upload with its reason and the spool is removed
// (the toolstack removes what the failed import made); a cancel or failure from outside ends it for good.
import { rm } from "node:fs/promises";
import { setTimeout as delay } from "node:timers/promises";
import { toolstackUrl } from "../../config.ts";
import { XenApiClient } from "../../xenapi/client.ts";
import { ResourceTask } from "../../xenapi/resource.ts";
import type { PackageKind } from "../../../lib/file-kind.ts";
import { Cancelled, earlierImport, importAttempt } from "./import-attempt.ts";
import { packageAttempt, uploadKind } from "./package-attempt.ts";
import { brokenReason, type Outcome, SESSION_ENDED } from "./outcome.ts";
import { SpoolFollower } from "./spool-follower.ts";
import { isEnded, readState, spoolFile, type UploadState, writeState } from "./state.ts";

/** Waits between fresh imports after a broken stream; the last repeats until MAX_BROKEN_MS has passed. */
const RETRY_DELAYS_MS = [500, 1000, 2000, 5000, 10_000];
const MAX_BROKEN_MS = 10 * 60_000;
/**
 * An import that ends, whatever its error, after the browser had sent nothing for this long ended for the
 * pause (the toolstack times out a body that stops arriving: HANGAR_BODY_IDLE_TIMEOUT), not for the archive:
 * a browser that uploads sends its next PATCH at once. A refusal that did come during a pause comes again,
 * while bytes flow, on the attempt after it.
 */
const PAUSED_MS = 1000;
/** How long a cancelled or failed upload waits for its import to be undone before recording its end regardless. */
const UNDO_MS = 60_000;

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
    // Its outcome could not be recorded (the disk failing): said, not left as an unhandled rejection.
    .catch((error: unknown) => console.error(`upload ${state.id}: recording its outcome: ${error instanceof Error ? error.message : String(error)}`))
    .finally(() => {
      if (registry.get(state.id) === pipeline) registry.delete(state.id);
    });
  return pipeline;
}

/** Wakes the follower of an upload (bytes arrived). */
export function notifyUpload(id: string): void {
  registry.get(id)?.notify();
}

/**
 * Fails an upload whose bytes the console could not keep: its import (running or not) ends with `error`.
 * `beforeRecording` runs once the import has stopped and before the failure is written (the spool removed, to
 * make room on a full disk): the import, stopped first, cannot fail for its spool gone.
 */
export async function failUpload(id: string, error: string, beforeRecording: () => Promise<void> = async () => {}): Promise<void> {
  const pipeline = registry.get(id);
  if (pipeline !== undefined) await pipeline.fail(error, beforeRecording);
  else {
    await beforeRecording();
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

export class ImportPipeline {
  state: UploadState;
  private readonly hooks: PipelineHooks;
  private readonly abort = new AbortController();
  /** The spool as it grows: each attempt streams it from byte 0. */
  private readonly follower: SpoolFollower;
  /** The last attempt found the session ended: waiting for the user to log in again. */
  private sessionEnded = false;
  private retryNow: (() => void) | undefined;
  /** What the upload is once its first bytes are read: an OVA or a disk image (imported here), or undefined for /import. */
  private kind: PackageKind | undefined | null = null;

  constructor(state: UploadState, hooks: PipelineHooks) {
    this.state = state;
    this.hooks = hooks;
    this.follower = new SpoolFollower(spoolFile(state.id), state.length);
  }

  notify(): void {
    this.follower.notify();
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
    if (registry.get(this.state.id) === this) registry.delete(this.state.id);
  }

  async cancel(): Promise<void> {
    await this.end("cancelled", null);
  }

  /** The upload cannot go on (the console could not keep its bytes): its import stops, and it fails with `error`. */
  async fail(error: string, beforeRecording?: () => Promise<void>): Promise<void> {
    await this.end("failed", error, beforeRecording);
  }

  /** Cancelled or failed from outside: recorded once this settles. */
  ended: Promise<void> | undefined;

  private async end(status: "cancelled" | "failed", error: string | null, beforeRecording?: () => Promise<void>): Promise<void> {
    this.abort.abort(new Cancelled(status));
    this.ended ??= (async () => {
      // The end is recorded once what the import made is gone, so an upload that reads "failed" or "cancelled"
      // has left nothing: the toolstack undoes an import before its task ends, and a package import made here
      // undoes itself before its attempt (and so this pipeline's run) returns.
      const deadline = Date.now() + UNDO_MS;
      const task = this.state.task;
      if (task !== null) {
        const resource = new ResourceTask(this.xapi(), task);
        await resource.cancel();
        // A toolstack that does not answer (a session ended, a restart) is not waited for.
        await resource.finished(AbortSignal.timeout(UNDO_MS), { everyMs: 200, failOnError: true }).catch(() => undefined);
      }
      if (this.#running !== undefined) await Promise.race([this.#running.catch(() => undefined), delay(Math.max(0, deadline - Date.now()), undefined, { ref: false })]);
      await beforeRecording?.();
      await this.save({ status, error });
    })();
    await this.ended;
  }

  /** Runs the import until it ends (once, whatever calls it). */
  run(): Promise<void> {
    this.#running ??= this.#loop();
    return this.#running;
  }

  #running: Promise<void> | undefined;

  async #loop(): Promise<void> {
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
        await this.save({ status: "done", error: null, vms: outcome.vms, vdis: outcome.vdis ?? [], notes: outcome.notes ?? [] });
        // The last PATCH may still be answering: remove the spool a little later.
        setTimeout(() => void this.hooks.removeSpool(this.state.id).catch(() => undefined), 30_000).unref();
        return;
      }
      if (this.follower.waitingMs >= PAUSED_MS) {
        // Paused (the user, a laptop asleep): the import starts again from the spool once bytes come again.
        console.warn(`upload ${this.state.id}: the import ended while the upload was paused (${outcome.kind === "refused" ? outcome.error : outcome.reason}); importing again when it resumes`);
        await this.follower.arrival(this.abort.signal);
        brokenSince = undefined;
        retry = 0;
        continue;
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
      await delay(RETRY_DELAYS_MS[Math.min(retry++, RETRY_DELAYS_MS.length - 1)]!, undefined, { signal: AbortSignal.any([this.abort.signal, wait.signal]) }).catch(() => undefined);
      this.retryNow = undefined;
    }
  }

  /** The import an earlier attempt left (see import-attempt.ts), settled first. */
  private async earlierImport(): Promise<Outcome | undefined> {
    return this.state.task === null ? undefined : earlierImport(this.xapi(), this.state.task, this.abort.signal);
  }

  private async attempt(): Promise<Outcome> {
    const attempt = {
      toolstack: toolstackUrl(),
      xapi: this.xapi(),
      state: this.state,
      follower: this.follower,
      signal: this.abort.signal,
      started: (task: string) => this.save({ task, attempts: this.state.attempts + 1, status: "importing", error: null }),
    };
    // What the file is, from its first bytes (its name only admitted it): an XVA goes to /import, the rest is read here.
    if (this.kind === null) this.kind = await uploadKind(this.state, this.follower, this.abort.signal);
    return this.kind === undefined ? importAttempt(attempt) : packageAttempt(attempt, this.kind);
  }
}
