// Changes go through the toolstack as tasks (Async.<call>), so they show on the task page and obey the
// session's permissions; the console waits for each one server-side and answers its outcome in words.
import "server-only";

import { z } from "zod";
import { type XenApiClient, taskResult } from "../../xenapi/client.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import type { XenValue } from "../../xenapi/values.ts";

export interface TaskOutcome {
  task: string;
  result: XenValue | undefined;
}

/** Runs `Async.<method>` and waits for it; a failed or cancelled task throws its XenAPI error. */
export async function runTask(xapi: XenApiClient, method: string, ...params: unknown[]): Promise<TaskOutcome> {
  const task = await xapi.call(z.string(), `Async.${method}`, ...params);
  const record = await xapi.waitTask(task);
  if (record.status === "success") return { task, result: taskResult(record) };
  if (record.status === "cancelled") throw new XenApiError("TASK_CANCELLED", [task]);
  const [code = "INTERNAL_ERROR", ...rest] = record.error_info;
  throw new XenApiError(code, rest);
}
