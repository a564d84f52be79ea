// VM changes, each one toolstack task (Async.<call>): it shows on the task page and obeys the session's
// permissions; the console waits for it and answers the task, or its failure in words.
import "server-only";

import { runTask } from "../srs/run-task.ts";
import type { XenApiClient } from "../../xenapi/client.ts";

export async function renameVm(xapi: XenApiClient, ref: string, name: string): Promise<{ task: string }> {
  return { task: (await runTask(xapi, "VM.set_name_label", ref, name)).task };
}

export async function setVmDescription(xapi: XenApiClient, ref: string, description: string): Promise<{ task: string }> {
  return { task: (await runTask(xapi, "VM.set_name_description", ref, description)).task };
}

/** VM.hangar_destroy: the VM, its VBDs and VIFs; with keepDisks false also the disks no other VM uses (not CDs). */
export async function destroyVm(xapi: XenApiClient, ref: string, keepDisks: boolean): Promise<{ task: string }> {
  return { task: (await runTask(xapi, "VM.hangar_destroy", ref, keepDisks)).task };
}
