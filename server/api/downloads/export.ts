// The Export dialog's side of a download: a task made beforehand (so the dialog and the Tasks page follow the
// export from its first byte), the console route's URL naming it, and that task's progress.
import "server-only";

import { z } from "zod";
import { type XenApiClient, zTaskRecord } from "../../xenapi/client.ts";
import { parseXenDate } from "../../xenapi/values.ts";
import { describeTaskError } from "../../xenapi/error-descriptions.ts";
import type { TExportCompression, TExportProgressResponse, TStartExportResponse } from "./schema.ts";

const ZVmBrief = z.looseObject({ uuid: z.string(), name_label: z.string() });

export async function startExport(xapi: XenApiClient, vmRef: string, compression: TExportCompression): Promise<TStartExportResponse> {
  const vm = await xapi.call(ZVmBrief, "VM.get_record", vmRef);
  const task = await xapi.call(z.string(), "task.create", `Export of VM: ${vm.name_label}`, `Downloaded through the console (${compression === "none" ? "uncompressed" : compression})`);
  const query = new URLSearchParams({ compression, task });
  return { task, url: `/api/download/vm/${vm.uuid}.xva?${query}`, fileName: `${vm.name_label.replace(/[\\/:*?"<>|\x00-\x1f\x7f]+/g, "_").trim() || "export"}.xva` };
}

export async function exportProgress(xapi: XenApiClient, task: string, now = Date.now()): Promise<TExportProgressResponse> {
  const record = await xapi.call(zTaskRecord.extend({ current_operations: z.unknown().optional() }), "task.get_record", task);
  const created = parseXenDate(record.created) ?? now;
  const finished = parseXenDate(record.finished);
  const elapsedS = Math.max(0, ((finished ?? now) - created) / 1000);
  switch (record.status) {
    case "success":
      return { state: "succeeded", progress: 1, elapsedS, error: "" };
    case "failure":
      return { state: "failed", progress: record.progress, elapsedS, error: describeTaskError(record.error_info) || "The export failed." };
    case "cancelled":
      return { state: "cancelled", progress: record.progress, elapsedS, error: "The export was cancelled." };
    default:
      // A made task that no export runs in yet stays at 0 with no progress: the browser has not asked yet.
      return { state: record.progress > 0 ? "running" : "waiting", progress: record.progress, elapsedS, error: "" };
  }
}
