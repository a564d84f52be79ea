// A client's own import run in a task it made (task.create), as xapi lets a client do with its own work: the
// progress set as bytes pass, the result or the error set at the end, and a cancel of the task (from the task
// page, another client) stopping the work. The result is a struct {VM, VDIs, notes}: what was made, and in
// words what the package asked that was not done.
import { setTimeout as delay } from "node:timers/promises";
import { z } from "zod";
import type { XenApiClient } from "../xenapi/client.ts";
import { XenApiError } from "../xenapi/errors.ts";
import { encodeXmlRpcValue } from "../xenapi/xml-rpc.ts";
import type { ImportResult } from "./import.ts";

/** How often the task's cancel is looked for, and its progress set at most. */
const POLL_MS = 1000;

export class ImportCancelled extends Error {}

export interface TaskWork {
  signal: AbortSignal;
  /** Bytes done so far of `total`. */
  progress(done: number): void;
}

/**
 * Runs `work` in `task` and ends the task with its outcome; rethrows the work's failure. `total` is the bytes the
 * progress counts to (unknown: the progress stays 0). A task cancelled meanwhile aborts `work`'s signal.
 */
export async function runInTask(xapi: XenApiClient, task: string, total: number | undefined, signal: AbortSignal, work: (control: TaskWork) => Promise<ImportResult>): Promise<ImportResult> {
  const stop = new AbortController();
  const cancelled = new AbortController();
  let done = 0;
  let reported = -1;
  const poll = async () => {
    while (!stop.signal.aborted) {
      const status = await xapi.call(z.string(), "task.get_status", task).catch(() => undefined);
      if (status === "cancelling" || status === "cancelled") {
        cancelled.abort(new ImportCancelled("the import was cancelled"));
        return;
      }
      if (total !== undefined && total > 0 && done !== reported) {
        reported = done;
        await xapi.call(z.unknown(), "task.set_progress", task, Math.min(0.99, done / total)).catch(() => undefined);
      }
      await delay(POLL_MS, undefined, { signal: stop.signal }).catch(() => undefined);
    }
  };
  const polling = poll();
  const workSignal = AbortSignal.any([signal, cancelled.signal]);
  try {
    const result = await work({ signal: workSignal, progress: (bytes) => (done = bytes) });
    stop.abort();
    await polling;
    await xapi.call(z.unknown(), "task.set_result", task, encodeXmlRpcValue({ VM: result.vm ?? "OpaqueRef:NULL", VDIs: result.vdis, notes: result.notes }));
    await xapi.call(z.unknown(), "task.set_progress", task, 1);
    await xapi.call(z.unknown(), "task.set_status", task, "success");
    return result;
  } catch (error) {
    stop.abort();
    await polling;
    const wasCancelled = cancelled.signal.aborted || signal.aborted;
    const info = wasCancelled ? ["TASK_CANCELLED", task] : error instanceof XenApiError ? [error.code, ...error.params] : ["IMPORT_ERROR", (error as Error).message];
    // A task already cancelled by the toolstack (no work of its own ran in it) stays as it is.
    const status = await xapi.call(z.string(), "task.get_status", task).catch(() => undefined);
    if (status === "pending" || status === "cancelling") {
      await xapi.call(z.unknown(), "task.set_error_info", task, info).catch(() => undefined);
      await xapi.call(z.unknown(), "task.set_status", task, wasCancelled ? "cancelled" : "failure").catch(() => undefined);
    }
    throw wasCancelled && !(error instanceof ImportCancelled) && cancelled.signal.aborted ? cancelled.signal.reason : error;
  }
}
