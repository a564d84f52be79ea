// One import of an upload, start to end: the host that takes it found (the empty-PUT probe), a fresh toolstack
// task, the spool streamed from byte 0 as it grows, and how it ended. And the import an earlier attempt left
// behind (a console restart, a session that ended), settled before a new one starts.
import { z } from "zod";
import type { XenApiClient } from "../../xenapi/client.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import { probePut, putResource, ResourceRefused, ResourceTask, resourceUrl } from "../../xenapi/resource.ts";
import { brokenReason, type Outcome, refusalOutcome, taskOutcome } from "./outcome.ts";
import type { SpoolFollower } from "./spool-follower.ts";
import type { UploadState } from "./state.ts";

/** How long a cancelled earlier import may take to undo itself before the next one starts regardless. */
const EARLIER_IMPORT_UNDO_MS = 60_000;
/** How long the task may take to finish once the import's stream has ended. */
const FINAL_TASK_MS = 60_000;
/** A failure the task shows just before the stream's own error is the stream's: this long to show. */
const STREAM_ERROR_GRACE_MS = 300;

export class Cancelled extends Error {}

export interface Attempt {
  toolstack: string;
  xapi: XenApiClient;
  state: UploadState;
  follower: SpoolFollower;
  /** The pipeline's: the upload cancelled, failed or abandoned. */
  signal: AbortSignal;
  /** The attempt's task is made: record it (the upload's state names the task to follow after a restart). */
  started(task: string): Promise<void>;
}

/**
 * The import an earlier attempt started: done if its task succeeded meanwhile (its stream needed no session
 * to finish), so the file is not imported twice; one still pending may wait for bytes that will never come
 * and is cancelled. The toolstack undoes it before its task ends, so the next import waits for that: two
 * copies of the VM and its disks never exist at once, and an import that succeeded as it was cancelled is
 * kept rather than made again.
 */
export async function earlierImport(xapi: XenApiClient, ref: string, signal: AbortSignal): Promise<Outcome | undefined> {
  const task = new ResourceTask(xapi, ref);
  let record = await task.record().catch((error: unknown) => {
    if (error instanceof XenApiError && error.code === "SESSION_INVALID") throw error;
    return undefined;
  });
  if (record?.status === "pending") await task.cancel();
  if (record?.status === "pending" || record?.status === "cancelling") {
    record = await task.finished(AbortSignal.any([signal, AbortSignal.timeout(EARLIER_IMPORT_UNDO_MS)]));
  }
  return record?.status === "success" ? taskOutcome(record, undefined) : undefined;
}

/** One import: see the file's header. */
export async function importAttempt(attempt: Attempt): Promise<Outcome> {
  const { xapi, state, signal } = attempt;
  let target: URL;
  try {
    target = await probePut(resourceUrl(attempt.toolstack, state.session, "import", { sr_id: state.sr, force: state.force ? "true" : undefined }), { signal });
  } catch (error) {
    if (error instanceof ResourceRefused) return refusalOutcome(error.status, error.reason);
    throw error;
  }
  const task = new ResourceTask(xapi, await createTask(xapi, state));
  // Cancelled or failed while the task was being made: this attempt's task is the last thing it did.
  if (signal.aborted) {
    await task.cancel();
    throw signal.reason;
  }
  await attempt.started(task.ref);
  target.searchParams.set("task_id", task.ref);
  // The upload's end (even one that came while this attempt was being set up) or this attempt's.
  const over = new AbortController();
  const attemptSignal = AbortSignal.any([signal, over.signal]);
  try {
    const outcome = await streamImport(target, task, attempt.follower, state.length, attemptSignal);
    // A task still pending (the stream broke before the toolstack noticed) is cancelled; the toolstack undoes it.
    if (outcome.kind !== "done" && !attemptSignal.aborted) await task.cancel();
    return outcome;
  } finally {
    over.abort(new Cancelled("attempt over"));
  }
}

function createTask(xapi: XenApiClient, state: UploadState): Promise<string> {
  const restarted = state.attempts > 0 ? ` (import restarted from the console's copy, attempt ${state.attempts + 1})` : "";
  return xapi.call(z.string(), "task.create", `VM import: ${state.fileName}`, `Uploaded in the console and imported into ${state.srName} as it arrives${restarted}`);
}

/**
 * The spool PUT to `target` as it grows, the task watched meanwhile (it may fail while the upload still sends:
 * the toolstack would drain the rest for a while first). Settles with the first of: the answer (a refusal, or
 * the end of the import, whose outcome is the task's), the stream breaking, the task finishing.
 */
function streamImport(target: URL, task: ResourceTask, follower: SpoolFollower, length: number, signal: AbortSignal): Promise<Outcome> {
  return new Promise<Outcome>((resolve) => {
    let settled = false;
    let broken: string | undefined;
    const settle = (outcome: Outcome) => {
      if (settled) return;
      settled = true;
      resolve(outcome);
    };
    const breaks = (error: Error) => {
      broken = error.message;
      settle({ kind: "broken", reason: error.message });
    };
    const put = putResource(target, (request) => follower.sendTo(request, signal), { length, signal });
    put.request.on("error", breaks);
    void put.sent.then((error) => {
      if (error !== undefined && !(error instanceof Cancelled || signal.aborted)) broken = error.message;
    });
    put.response.then((response) => {
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.on("error", breaks);
      response.on("end", () => {
        const status = response.statusCode ?? 0;
        if (status >= 300) return settle(refusalOutcome(status, Buffer.concat(chunks).toString("utf8").trim()));
        // The body ended: the task holds the outcome.
        task.finished(AbortSignal.timeout(FINAL_TASK_MS), { failOnError: true }).then(
          (record) => settle(record === undefined ? { kind: "broken", reason: "the import's task did not finish after its stream ended" } : taskOutcome(record, broken)),
          (error: unknown) => settle({ kind: "broken", reason: brokenReason(error) }),
        );
      });
    }, breaks);
    void task.finished(signal).then((record) => {
      if (record === undefined || settled) return;
      setTimeout(() => {
        settle(taskOutcome(record, broken));
        if (!put.request.destroyed) put.request.destroy();
      }, record.status === "success" ? 0 : STREAM_ERROR_GRACE_MS);
    });
  });
}
