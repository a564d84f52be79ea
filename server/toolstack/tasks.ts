// Tasks as xapi keeps them: pending → success | failure, or cancelling → cancelled; progress 0–1; the result
// XML-RPC encoded; error_info = [code, params...]. Work runs in this process with an AbortSignal that
// task.cancel fires. Finished tasks are kept FINISHED_TASK_TTL, then collected. Pending tasks that a previous
// run of the service left behind are handed to the recovery hook of their kind, or failed with a reason.
import { setImmediate as yieldToEvents, setTimeout as sleep } from "node:timers/promises";
import type { Queryable } from "./db/database.ts";
import { hostErrors } from "./hosts.ts";
import { objectErrors } from "./object-errors.ts";
import type { Expired, ObjectStore, StoredObject } from "./objects.ts";
import { XenApiError, xenErrors } from "../xenapi/errors.ts";
import { toXenApiError } from "./xenapi-errors.ts";
import { encodeXmlRpcValue } from "../xenapi/xml-rpc.ts";
import { NULL_REF, xenDate, type XenRecord, type XenValue } from "../xenapi/values.ts";

export { FINISHED_TASK_TTL_MS } from "./task-expiry.ts";
/** Expired tasks removed per transaction: each batch holds the event loop a few ms, then lets it run. */
const COLLECT_BATCH = 100;
/** Progress is written at most this often (a copy reports many times a second). */
const PROGRESS_INTERVAL_MS = 250;
/** other_config key naming what a task does, for recovery after a restart. */
export const TASK_KIND_KEY = "hangar:kind";
/** other_config key saying, in words, what a long task is doing now (a VHDX import: kept aside, then converted). */
export const TASK_STEP_KEY = "hangar:step";
/** other_config key of a task failed because its host died: that host cleans up after it when it is back. */
const HOST_DIED_KEY = "hangar:host-died";
/** Whether the pool failed the task because its host died (and that host has not yet cleaned up after it). */
function failedWithItsHost(record: XenRecord): boolean {
  return (record.other_config as Record<string, string> | undefined)?.[HOST_DIED_KEY] === "true";
}

/** A task's other_config once its host has cleaned up after it. */
function cleanedUp(record: XenRecord): Record<string, string> {
  const { [HOST_DIED_KEY]: _died, ...other_config } = record.other_config as Record<string, string>;
  return other_config;
}

/** Why work running here stops when the pool took this host for dead (a stall) and failed its task. */
class FailedByPool extends Error {}

/** Why work bound to this process (an HTTP transfer, whose connection ends with it) stops when the service does. */
class ServiceStopping extends Error {}

/**
 * What work that goes on elsewhere (an operation in a plugin's daemon) throws when it stops following it because the
 * service stops (TaskControl.stopping): its task is left pending, as it is, for the next start to take over.
 */
export class LeftToNextStart extends Error {
  constructor() {
    super("the service stopped: the task is left to its next start");
  }
}

/** How often work running here looks for a cancel asked on another host of the pool. */
const REMOTE_CANCEL_POLL_MS = 500;

export type TaskStatus = "pending" | "success" | "failure" | "cancelling" | "cancelled";

export interface TaskControl {
  readonly ref: string;
  readonly signal: AbortSignal;
  /** 0–1; written at most every PROGRESS_INTERVAL_MS. */
  progress(fraction: number): void;
  /** Records state a later run of the service needs to take the task over (other_config). */
  remember(key: string, value: string, tx?: Queryable): Promise<void>;
  /**
   * Fires when the service stops. Work not bound to the process runs on unless it heeds this; work that only
   * follows something running elsewhere (a mirror runs until cancelled) throws LeftToNextStart, undoing nothing.
   */
  readonly stopping: AbortSignal;
}

export type TaskWork = (control: TaskControl) => Promise<XenValue | undefined>;
/** Takes over a pending task left by a previous run: resumes it, or answers why it failed. */
export type TaskRecovery = (ref: string, record: XenRecord) => Promise<void>;

export class Tasks {
  readonly #objects: ObjectStore;
  readonly #hostRef: string;
  readonly #running = new Map<string, AbortController>();
  /** Running work that cannot outlive the process, with its settled outcome. */
  readonly #boundToProcess = new Map<string, Promise<void>>();
  readonly #recoveries = new Map<string, TaskRecovery>();
  readonly #lastProgress = new Map<string, number>();
  readonly #hostIsLive: (hostRef: string) => Promise<boolean>;
  readonly #stopping = new AbortController();
  #cancelPoll: NodeJS.Timeout | undefined;

  /** `hostIsLive` tells whether another host of the pool runs (its tasks are cancelled through the database). */
  constructor(objects: ObjectStore, hostRef: string, hostIsLive: (hostRef: string) => Promise<boolean> = async () => false) {
    this.#objects = objects;
    this.#hostRef = hostRef;
    this.#hostIsLive = hostIsLive;
  }

  /** `owner`: who made it (ownerOf a session), who may then cancel and change it without a pool operator's role. */
  async create(options: { name_label: string; name_description?: string; other_config?: Record<string, string>; owner?: string }): Promise<string> {
    const record: XenRecord = {
      uuid: crypto.randomUUID(),
      name_label: options.name_label,
      name_description: options.name_description ?? "",
      allowed_operations: ["cancel"],
      current_operations: {},
      created: xenDate(),
      finished: xenDate(new Date(0)),
      status: "pending",
      resident_on: this.#hostRef,
      progress: 0,
      type: "<none/>",
      result: "",
      error_info: [],
      other_config: options.other_config ?? {},
      subtask_of: NULL_REF,
      subtasks: [],
      backtrace: "()",
      hangar_owner: options.owner ?? "",
    };
    return (await this.#objects.create("task", record)).ref;
  }

  /**
   * Runs `work` for a pending task in the background; its outcome becomes the task's (settled: once recorded).
   * Work `boundToProcess` (its bytes come through a connection of this process) is stopped by stop(); other
   * work is left for the next start to take over.
   */
  run(ref: string, work: TaskWork, options: { boundToProcess?: boolean } = {}): Promise<void> {
    const controller = new AbortController();
    this.#running.set(ref, controller);
    this.#cancelPoll ??= setInterval(() => void this.#pollCancels(), REMOTE_CANCEL_POLL_MS).unref();
    const control: TaskControl = {
      ref,
      signal: controller.signal,
      progress: (fraction) => this.#progress(ref, fraction),
      remember: async (key, value, tx) => {
        await this.#objects.update("task", ref, (r) => ({ ...r, other_config: { ...(r.other_config as Record<string, string>), [key]: value } }), tx);
      },
      stopping: this.#stopping.signal,
    };
    const settled = (async () => {
      try {
        const result = await work(control);
        if (controller.signal.aborted) throw xenErrors.taskCancelled(ref);
        await this.succeed(ref, result);
      } catch (error) {
        // Nothing recorded: the task stays pending for the next start.
        if (error instanceof LeftToNextStart) return;
        const reason: unknown = controller.signal.reason;
        if (reason instanceof FailedByPool) await this.#keepPoolFailure(ref);
        else if (reason instanceof ServiceStopping) await this.fail(ref, objectErrors.taskInterrupted(ref, "the toolstack stopped while the task ran; what it had made was removed"));
        else await (controller.signal.aborted ? this.#finish(ref, "cancelled", "", xenErrors.taskCancelled(ref).description) : this.fail(ref, error));
      } finally {
        this.#running.delete(ref);
        this.#boundToProcess.delete(ref);
        this.#lastProgress.delete(ref);
        if (this.#running.size === 0) {
          clearInterval(this.#cancelPoll);
          this.#cancelPoll = undefined;
        }
      }
    })().catch((error: unknown) => {
      // The outcome could not be recorded (the service is closing): the next start recovers the task.
      console.error(`task ${ref}: outcome not recorded:`, error instanceof Error ? error.message : error);
    });
    if (options.boundToProcess === true) this.#boundToProcess.set(ref, settled);
    return settled;
  }

  /**
   * The service stops: work bound to this process is stopped and undoes what it made (its task fails with
   * TASK_INTERRUPTED), waited for up to `limitMs`; what is still running then is left to the next start. Other
   * work is told (TaskControl.stopping): following a mirror, which runs until cancelled, kept the process alive.
   */
  async stop(limitMs: number): Promise<void> {
    this.#stopping.abort();
    for (const ref of this.#boundToProcess.keys()) this.#running.get(ref)?.abort(new ServiceStopping());
    await Promise.race([Promise.all(this.#boundToProcess.values()), sleep(limitMs, undefined, { ref: false })]);
  }

  /** Creates a task and runs `work` in it; answers the task's ref at once. */
  async start(name_label: string, work: TaskWork, options: { other_config?: Record<string, string>; owner?: string } = {}): Promise<string> {
    const ref = await this.create({ name_label, ...options });
    void this.run(ref, work);
    return ref;
  }

  isRunning(ref: string): boolean {
    return this.#running.has(ref);
  }

  #progress(ref: string, fraction: number): void {
    const now = Date.now();
    if (now - (this.#lastProgress.get(ref) ?? 0) < PROGRESS_INTERVAL_MS && fraction < 1) return;
    this.#lastProgress.set(ref, now);
    const progress = Math.min(1, Math.max(0, fraction));
    void this.#objects.update("task", ref, (r) => (r.status === "pending" ? { ...r, progress } : r)).catch(() => undefined);
  }

  succeed(ref: string, result: XenValue | undefined): Promise<void> {
    return this.#finish(ref, "success", result === undefined ? "" : encodeXmlRpcValue(result), []);
  }

  fail(ref: string, error: unknown): Promise<void> {
    return this.#finish(ref, "failure", "", toXenApiError(error).description);
  }

  async #finish(ref: string, status: TaskStatus, result: string, errorInfo: string[]): Promise<void> {
    await this.#objects
      .update("task", ref, (r) =>
        r.status === "pending" || r.status === "cancelling"
          ? {
              ...r,
              status,
              result,
              error_info: errorInfo,
              progress: status === "success" ? 1 : (r.progress ?? 0),
              finished: xenDate(),
              allowed_operations: [],
            }
          : r,
      )
      .catch((error: unknown) => {
        // The task was destroyed while it ran: nobody is left to tell.
        if (!(error instanceof XenApiError && error.code === "HANDLE_INVALID")) throw error;
      });
  }

  /**
   * task.cancel: stops work running here; work running on another live host of the pool is asked to stop
   * through the task's status (`cancelling`), which that host watches; a pending task nothing runs is
   * cancelled at once.
   */
  async cancel(ref: string): Promise<void> {
    const { record } = await this.#objects.get("task", ref);
    if (record.status !== "pending") throw xenErrors.operationNotAllowed(`task ${ref} is ${String(record.status)}`);
    const controller = this.#running.get(ref);
    const host = String(record.resident_on);
    if (controller === undefined && (host === this.#hostRef || !(await this.#hostIsLive(host)))) {
      await this.#finish(ref, "cancelled", "", xenErrors.taskCancelled(ref).description);
      return;
    }
    await this.#objects.set("task", ref, { status: "cancelling", allowed_operations: [] });
    controller?.abort(xenErrors.taskCancelled(ref));
  }

  /**
   * Aborts work running here whose task another host marked `cancelling`, or failed because it took this
   * host for dead (it stalled past the heartbeat's limit).
   */
  async #pollCancels(): Promise<void> {
    for (const [ref, controller] of this.#running) {
      if (controller.signal.aborted) continue;
      const task = await this.#objects.find("task", ref).catch(() => undefined);
      if (task?.record.status === "cancelling") controller.abort(xenErrors.taskCancelled(ref));
      else if (task !== undefined && failedWithItsHost(task.record)) controller.abort(new FailedByPool());
    }
  }

  /** The work stopped and cleaned up after itself: its failure (the pool's) stands, with nothing left to recover. */
  async #keepPoolFailure(ref: string): Promise<void> {
    await this.#objects.update("task", ref, (r) => ({ ...r, other_config: cleanedUp(r) })).catch(() => undefined);
  }

  /** A host of the pool died: its running tasks fail with the reason (in the transaction that marks it dead). */
  async failResidentOn(host: StoredObject, tx: Queryable): Promise<void> {
    const reason = hostErrors.hostOffline(host);
    for (const { ref, record } of await this.#objects.all("task", tx)) {
      if (record.resident_on !== host.ref || (record.status !== "pending" && record.status !== "cancelling")) continue;
      await this.#objects.set(
        "task",
        ref,
        {
          status: "failure",
          error_info: reason.description,
          finished: xenDate(),
          allowed_operations: [],
          other_config: { ...(record.other_config as Record<string, string>), [HOST_DIED_KEY]: "true" },
        },
        tx,
      );
    }
  }

  registerRecovery(kind: string, recovery: TaskRecovery): void {
    this.#recoveries.set(kind, recovery);
  }

  /**
   * After a restart: every pending task of this host that nothing runs is recovered or failed. Tasks the pool
   * failed while this host was dead are cleaned up the same way (as cancelled ones), keeping their failure.
   */
  async recover(): Promise<void> {
    for (const { ref, record } of await this.#objects.all("task")) {
      if (record.resident_on !== this.#hostRef || this.#running.has(ref)) continue;
      if (failedWithItsHost(record)) {
        await this.#cleanUpAfterDeath(ref, record);
        continue;
      }
      if (record.status !== "pending" && record.status !== "cancelling") continue;
      const kind = (record.other_config as Record<string, string> | undefined)?.[TASK_KIND_KEY];
      const recovery = kind === undefined ? undefined : this.#recoveries.get(kind);
      try {
        if (recovery === undefined) throw new XenApiError("TASK_INTERRUPTED", [ref, "the toolstack restarted while the task ran"]);
        await recovery(ref, record);
      } catch (error) {
        await this.fail(ref, error);
      }
    }
  }

  async #cleanUpAfterDeath(ref: string, record: XenRecord): Promise<void> {
    const other_config = cleanedUp(record);
    const kind = other_config[TASK_KIND_KEY];
    const recovery = kind === undefined ? undefined : this.#recoveries.get(kind);
    if (recovery !== undefined) {
      await this.#objects.set("task", ref, { status: "cancelling" });
      await recovery(ref, { ...record, status: "cancelling" }).catch(() => undefined);
      while (this.#running.has(ref)) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    // The failure the pool gave it stands, whatever the clean-up ended in.
    await this.#objects.set("task", ref, { status: "failure", error_info: record.error_info ?? [], finished: record.finished ?? xenDate(), allowed_operations: [], other_config });
  }

  /**
   * Removes tasks finished longer than FINISHED_TASK_TTL ago, and pending ones nobody touched for as long
   * (task-expiry.ts), found by their expiry: only those are read.
   */
  async collect(now = Date.now(), batch = COLLECT_BATCH): Promise<number> {
    let removed = 0;
    let after: Expired | undefined;
    for (;;) {
      const due = await this.#objects.expired("task", now, batch, after);
      const idle = due.filter(({ ref }) => !this.#running.has(ref)).map(({ ref }) => ref);
      if (idle.length > 0) removed += await this.#objects.destroyExpired("task", idle, now);
      if (due.length < batch) return removed;
      // Running ones stay: the next page starts after them.
      after = due.at(-1);
      await yieldToEvents();
    }
  }
}
