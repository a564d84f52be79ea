// What the downloads router accepts and returns: a VM's export started from the Export dialog, a disk's from a
// volume's menu, and an export task's progress.
import { z } from "zod";

export const ZExportCompression = z.enum(["none", "gzip", "zstd"]);
export type TExportCompression = z.infer<typeof ZExportCompression>;

/** A VM goes out as an XVA (compressed as asked) or an OVA (OVF 1.0, streamOptimized VMDKs, a SHA-256 manifest). */
export const ZExportVmFormat = z.enum(["xva", "ova"]);
export type TExportVmFormat = z.infer<typeof ZExportVmFormat>;

export const ZStartExportSchema = z.object({ vmRef: z.string().regex(/^OpaqueRef:[\w-]+$/, "Not a VM reference"), compression: ZExportCompression, format: ZExportVmFormat.default("xva") });

export const ZDiskExportFormat = z.enum(["raw", "vhd", "qcow2", "vmdk"]);
export type TDiskExportFormat = z.infer<typeof ZDiskExportFormat>;

const ZVdiUuid = z.string().regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, "Not a VDI's UUID");

/** A disk as a file, or with `baseUuid` (a snapshot of it) only what changed since. */
export const ZStartDiskExportSchema = z.object({ vdiUuid: ZVdiUuid, format: ZDiskExportFormat, baseUuid: ZVdiUuid.optional() });
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
