import { z } from "zod";

export const ZListUploadsSchema = z.object({ ids: z.array(z.string().regex(/^[A-Za-z0-9_-]+$/).max(100)).max(100).optional() }).optional();

export const ZUploadSummary = z.object({
  id: z.string(),
  fileName: z.string(),
  sr: z.string(),
  srName: z.string(),
  length: z.number(),
  /** Bytes the console holds in its spool. */
  received: z.number(),
  status: z.enum(["uploading", "importing", "done", "failed", "cancelled"]),
  error: z.string().nullable(),
  attempts: z.number(),
  vms: z.array(z.string()),
  task: z
    .object({ ref: z.string(), status: z.string(), progress: z.number(), error: z.string().nullable() })
    .nullable(),
  created: z.number(),
  updated: z.number(),
  source: z.enum(["upload", "url"]),
  url: z.string().nullable(),
  vdis: z.array(z.string()),
  notes: z.array(z.string()),
  diskOnly: z.boolean(),
});
export type UploadSummary = z.infer<typeof ZUploadSummary>;

export const ZListUploadsResponse = z.object({ uploads: z.array(ZUploadSummary) });

export const ZImportFromUrlSchema = z.object({
  url: z.string().trim().min(1, "Enter the URL of a VM or disk image").max(4096).regex(/^https?:\/\//i, "Only http:// and https:// URLs"),
  sr: z.string().trim().min(1, "Choose an SR").max(200),
  /** A bare disk image becomes a disk alone, not a VM. */
  diskOnly: z.boolean().optional(),
  /** Import even when checksums do not match. */
  force: z.boolean().optional(),
});
export const ZImportFromUrlResponse = z.object({ id: z.string() });

export const ZCancelTransferSchema = z.object({ id: z.string().regex(/^[A-Za-z0-9_-]+$/).max(100) });
export const ZCancelTransferResponse = z.object({ id: z.string() });
