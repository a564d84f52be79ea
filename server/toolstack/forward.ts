// A call that must run on another host of the pool (it plugs disks into that host's toolstack): sent there as
// its `Async.` form with the caller's session, as xapi forwards calls to the host that has the storage. The
// caller of the plain form gets the outcome once the task, shared through the database, has ended.
import { setTimeout as sleep } from "node:timers/promises";
import { hostErrors } from "./hosts.ts";
import { hostUrl } from "../xenapi/hosts.ts";
import type { Toolstack } from "./toolstack.ts";
import { jsonRpcCall } from "../xenapi/client.ts";
import { XenApiError, xenErrors } from "../xenapi/errors.ts";
import type { XenValue } from "../xenapi/values.ts";
import { parseXmlRpcValue } from "../xenapi/xml-rpc.ts";

const TASK_POLL_MS = 200;

export async function forwardCall(ts: Toolstack, hostRef: string, name: string, params: readonly unknown[], asyncCall: boolean): Promise<XenValue> {
  const host = await ts.objects.get("host", hostRef);
  if (!(await ts.pool.isLive(hostRef))) throw hostErrors.hostOffline(host);
  const task = String(await jsonRpcCall(`${hostUrl(host.record)}/`, `Async.${name}`, params));
  if (asyncCall) return task;
  for (;;) {
    const { record } = await ts.objects.get("task", task);
    if (record.status === "success") return record.result === "" ? "" : parseXmlRpcValue(String(record.result));
    if (record.status === "failure") {
      const [code = "INTERNAL_ERROR", ...params] = record.error_info as string[];
      throw new XenApiError(code, params);
    }
    if (record.status === "cancelled") throw xenErrors.taskCancelled(task);
    await sleep(TASK_POLL_MS);
  }
}
