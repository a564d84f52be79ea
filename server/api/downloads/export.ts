// The Export dialog's side of a download: a task made beforehand (so the dialog and the Tasks page follow the
// export from its first byte), the console route's URL naming it, and that task's progress.
import "server-only";

import { z } from "zod";
import { type XenApiClient, zTaskRecord } from "../../xenapi/client.ts";
import { parseXenDate } from "../../xenapi/values.ts";
import { describeTaskError } from "../../xenapi/error-descriptions.ts";
import type { TDiskExportFormat, TExportCompression, TExportProgressResponse, TExportVmFormat, TStartExportResponse } from "./schema.ts";

const ZVmBrief = z.looseObject({ uuid: z.string(), name_label: z.string() });

/** A file name of `name`, safe on every desktop. */
function safeName(name: string): string {
  return name.replace(/[\\/:*?"<>|\x00-\x1f\x7f]+/g, "_").trim() || "export";
}

export async function startExport(xapi: XenApiClient, vmRef: string, compression: TExportCompression, format: TExportVmFormat = "xva"): Promise<TStartExportResponse> {
  const vm = await xapi.call(ZVmBrief, "VM.get_record", vmRef);
  const how = format === "ova" ? "as an OVA" : compression === "none" ? "uncompressed" : compression;
  const task = await xapi.call(z.string(), "task.create", `Export of VM${format === "ova" ? " as OVA" : ""}: ${vm.name_label}`, `Downloaded through the console (${how})`);
  const query = format === "ova" ? new URLSearchParams({ task }) : new URLSearchParams({ compression, task });
  return { task, url: `/api/download/vm/${vm.uuid}.${format}?${query}`, fileName: `${safeName(vm.name_label)}.${format}` };
}

const ZVdiBrief = z.looseObject({ uuid: z.string(), name_label: z.string() });

const vdiByUuid = async (xapi: XenApiClient, uuid: string) => xapi.call(ZVdiBrief, "VDI.get_record", await xapi.call(z.string(), "VDI.get_by_uuid", uuid));

/** A disk's download (its delta since `baseUuid`, a snapshot of it, when given): a task and the route's URL. */
export async function startDiskExport(xapi: XenApiClient, input: { vdiUuid: string; format: TDiskExportFormat; baseUuid?: string }): Promise<TStartExportResponse> {
  const vdi = await vdiByUuid(xapi, input.vdiUuid);
  const base = input.baseUuid === undefined ? undefined : await vdiByUuid(xapi, input.baseUuid);
  const since = base === undefined ? "" : ` since ${base.name_label || base.uuid}`;
  const task = await xapi.call(z.string(), "task.create", `Export of VDI${since === "" ? "" : " changes"}: ${vdi.name_label}`, `Downloaded through the console as ${input.format}${since}`);
  const query = new URLSearchParams({ task, ...(base === undefined ? {} : { base: base.uuid }) });
  // Named by uuid, as xapi names it: a delta names its base's file `<base uuid>.<format>`, the base's own download.
  return { task, url: `/api/download/vdi/${vdi.uuid}.${input.format}?${query}`, fileName: `${vdi.uuid}.${input.format}` };
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
