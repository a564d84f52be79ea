// How an import attempt ended, for the pipeline to act on: done (the VMs it made), refused (the archive's
// fault: the upload fails with the reason), or broken (the stream's or the toolstack's: import again).
import { type TaskRecord, taskResult } from "../../xenapi/client.ts";
import { describeTaskError } from "../../xenapi/error-descriptions.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import { NULL_REF } from "../../xenapi/values.ts";

export type Outcome = { kind: "done"; vms: string[]; vdis?: string[]; notes?: string[] } | { kind: "refused"; error: string } | { kind: "broken"; reason: string };

/** The toolstack session the import runs in has ended (logged out, expired): only a new one can go on. */
export const SESSION_ENDED = "the console session that started it has ended (logged out or expired): log in again and the upload resumes";

/** What a finished task means; `broken` (the stream's error, if any) wins over a failure it caused. */
export function taskOutcome(record: TaskRecord, broken: string | undefined): Outcome {
  if (record.status === "success") {
    const result = taskResult(record);
    // An XVA import's result is its VMs; a package import's (server/ova/in-task.ts) {VM, VDIs, notes}.
    if (result !== null && typeof result === "object" && !Array.isArray(result) && "VM" in result) {
      const list = (value: unknown) => (Array.isArray(value) ? value.map(String) : []);
      return { kind: "done", vms: result.VM === NULL_REF ? [] : [String(result.VM)], vdis: list(result.VDIs), notes: list(result.notes) };
    }
    const vms = Array.isArray(result) ? result.map(String) : typeof result === "string" ? [result] : [];
    return { kind: "done", vms };
  }
  if (broken !== undefined) return { kind: "broken", reason: broken };
  if (record.status === "cancelled") return { kind: "refused", error: "The import was cancelled." };
  return { kind: "refused", error: describeTaskError(record.error_info) || "The toolstack could not import the file." };
}

/** What an import request's refusal (HTTP status ≥ 300) means for the upload. */
export function refusalOutcome(status: number, text: string): Outcome {
  // 5xx (a host offline, a toolstack in trouble) is not the archive's fault: import again.
  if (status >= 500) return { kind: "broken", reason: `HTTP ${status}: ${text}` };
  if (status === 401 || text.startsWith("SESSION_INVALID")) return { kind: "broken", reason: SESSION_ENDED };
  // The probe said where; a redirect now means the SR moved meanwhile: ask again.
  if (status >= 300 && status < 400) return { kind: "broken", reason: `the SR moved to another host (HTTP ${status})` };
  return { kind: "refused", error: text === "" ? `The toolstack refused the import (HTTP ${status}).` : text };
}

/** Why an attempt broke, in words; an ended session is told apart (only the user logging in again helps). */
export function brokenReason(error: unknown): string {
  return error instanceof XenApiError && error.code === "SESSION_INVALID" ? SESSION_ENDED : (error as Error).message;
}
