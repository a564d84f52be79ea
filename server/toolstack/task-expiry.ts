// When housekeeping may remove a task. Kept apart from tasks.ts: the object store computes it on every write of a
// task (its `expires` column), whichever code writes it, and the schema migration fills it for tasks made before.
import { parseXenDate, type XenRecord } from "../xenapi/values.ts";

export const FINISHED_TASK_TTL_MS = 24 * 60 * 60 * 1000;

/** FINISHED_TASK_TTL after it finished, or after it was made while pending; null (never) without a valid date. */
export function taskExpiry(record: XenRecord): number | null {
  const finished = record.status !== "pending" && record.status !== "cancelling";
  const stamp = parseXenDate(String(finished ? record.finished : record.created));
  return stamp === undefined ? null : stamp + FINISHED_TASK_TTL_MS;
}
