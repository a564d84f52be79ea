// What the conformance router accepts and returns. A run takes tens of seconds (about 45 s for the bundled
// file plugin with its datapath), so it is a job: started, then polled by id until it ends.
import { z } from "zod";

export const ZCheckStatus = z.enum(["passed", "failed", "skipped", "note"]);

export const ZCheckResult = z.object({
  name: z.string(),
  status: ZCheckStatus,
  /** Why it failed, was skipped or made a note. */
  reason: z.string().nullable(),
  durationMs: z.number(),
});
export type TCheckResult = z.infer<typeof ZCheckResult>;

export const ZStartConformanceSchema = z.object({
  /** The volume plugin: its SR type or directory name. */
  plugin: z.string().min(1).max(200),
  /** URI scheme of a datapath plugin to read and write volumes through; null: volume checks only. */
  datapath: z.string().min(1).max(200).nullable().default(null),
  /** SR configuration; default: a scratch directory under the data dir for a plugin whose keys name a place. */
  configuration: z.record(z.string().min(1), z.string()).optional(),
});
export type TStartConformanceInput = z.input<typeof ZStartConformanceSchema>;

export const ZConformanceRun = z.object({
  id: z.string(),
  plugin: z.string(),
  datapath: z.string().nullable(),
  state: z.enum(["running", "finished", "cancelled", "error"]),
  /** Why the run could not be made (the plugin's configuration needs keys, the plugin is gone); null otherwise. */
  error: z.string().nullable(),
  /** How many checks the run has in all (results arrive one by one). */
  total: z.number(),
  results: z.array(ZCheckResult),
  counts: z.object({ passed: z.number(), failed: z.number(), skipped: z.number(), notes: z.number() }),
  /** ISO 8601. */
  startedAt: z.string(),
  finishedAt: z.string().nullable(),
});
export type TConformanceRun = z.infer<typeof ZConformanceRun>;

export const ZConformanceRunIdSchema = z.object({ id: z.string().uuid() });

export const ZConformanceRunsSchema = z.object({ plugin: z.string().min(1).optional() });
export const ZConformanceRunsResponse = z.object({ runs: z.array(ZConformanceRun) });
