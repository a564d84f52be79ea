// How the volumes router changes things: always through the toolstack's XenAPI, on the user's session, as
// tasks (so they show on the task page and obey the same permissions). Volumes are named by uuid in the
// console; the toolstack's VDI ref is looked up at each change, so a volume destroyed in another window is
// refused in words (UUID_INVALID / HANDLE_INVALID), never acted on by a stale ref.
import "server-only";

import { z } from "zod";
import { type TaskRecord, taskResult, type XenApiClient, zInt64 } from "../../xenapi/client.ts";
import { XenApiError } from "../../xenapi/errors.ts";

/** The VDI ref of a volume uuid (UUID_INVALID when the volume is gone). */
export function vdiRefOf(xapi: XenApiClient, uuid: string): Promise<string> {
  return xapi.call(z.string(), "VDI.get_by_uuid", uuid);
}

/** Starts `Async.<method>` and answers its task ref at once (for long work the UI follows on the task page). */
export function startTask(xapi: XenApiClient, method: string, ...params: unknown[]): Promise<string> {
  return xapi.call(z.string(), `Async.${method}`, ...params);
}

/** Runs `Async.<method>` and waits for it: its task and result, or its failure as the XenApiError it carries. */
export async function runTask(xapi: XenApiClient, method: string, ...params: unknown[]): Promise<{ task: string; result: unknown }> {
  const task = await startTask(xapi, method, ...params);
  return { task, result: taskOutcome(task, await xapi.waitTask(task)) };
}

function taskOutcome(ref: string, task: TaskRecord): unknown {
  if (task.status === "success") return taskResult(task);
  if (task.status === "cancelled") throw new XenApiError("TASK_CANCELLED", [ref]);
  const [code = "INTERNAL_ERROR", ...params] = task.error_info;
  throw new XenApiError(code, params);
}

/** The uuid of the VDI a task answered (snapshot, clone, create). */
export async function uuidOfResult(xapi: XenApiClient, result: unknown): Promise<string> {
  return xapi.call(z.string(), "VDI.get_uuid", z.string().startsWith("OpaqueRef:").parse(result));
}

const ZSrSpace = z.looseObject({ physical_size: zInt64, physical_utilisation: zInt64, name_label: z.string() });

/** The SR's free bytes as the toolstack last learned them from SR.stat; null when it does not know. */
export async function srFreeSpace(xapi: XenApiClient, srRef: string): Promise<number | null> {
  const sr = await xapi.call(ZSrSpace, "SR.get_record", srRef);
  return sr.physical_size > 0 ? Math.max(0, sr.physical_size - sr.physical_utilisation) : null;
}
