// What the downloads router accepts and returns: an export started from the Export dialog, and its task's progress.
import { z } from "zod";

export const ZExportCompression = z.enum(["none", "gzip", "zstd"]);
export type TExportCompression = z.infer<typeof ZExportCompression>;

export const ZStartExportSchema = z.object({ vmRef: z.string().regex(/^OpaqueRef:[\w-]+$/, "Not a VM reference"), compression: ZExportCompression });
export const ZStartExportResponse = z.object({
  /** The task the export will run in (it shows on the Tasks page). */
  task: z.string(),
  /** The console route the browser downloads from. */
  url: z.string(),
  fileName: z.string(),
});
export type TStartExportResponse = z.infer<typeof ZStartExportResponse>;

export const ZExportProgressSchema = z.object({ task: z.string().regex(/^OpaqueRef:[\w-]+$/, "Not a task reference") });
export const ZExportProgressResponse = z.object({
  /** waiting: the browser has not fetched the export yet (the task is made, not running). */
  state: z.enum(["waiting", "running", "succeeded", "failed", "cancelled"]),
  /** 0..1 by position in the VM's disks. */
  progress: z.number(),
  /** Seconds since the export began (0 while waiting). */
  elapsedS: z.number(),
  /** Why it failed, in words ("" otherwise). */
  error: z.string(),
});
export type TExportProgressResponse = z.infer<typeof ZExportProgressResponse>;
