// task.*: the stored task records with their getters, create (a client's own task, e.g. for /import),
// its status, progress, result and error as the client sets them (a client's own work: an OVA import), its
// other_config, cancel and destroy; Hangar's task.hangar_get_page, the running tasks and one page of the others.
import { z } from "zod";
import { mapFieldCalls } from "../accessors.ts";
import { method, type MethodDef } from "../methods.ts";
import type { ObjectStore, StoredObject } from "../objects.ts";
import { ownerOf, permits } from "../rbac/authorize.ts";
import { rbacErrors } from "../rbac/roles.ts";
import { zFloat, zInt, zRef, zString, zStringList } from "../../xenapi/params.ts";
import { xenErrors } from "../../xenapi/errors.ts";
import { present, xenDate, type XenValue } from "../../xenapi/values.ts";
import { objectGetters } from "./getters.ts";

/** The most tasks one page holds (and the most running tasks answered). */
export const TASK_PAGE_MAX = 500;
const RUNNING = ["pending", "cancelling"] as const;
const FINISHED = ["success", "failure", "cancelled"] as const;

const zTaskPageQuery = z.object({
  /** Finished tasks of this status only. */
  status: zString.optional(),
  /** Finished tasks whose name_label or name_description contains it, case aside. */
  text: zString.optional(),
  offset: zInt.optional(),
  limit: zInt.optional(),
});

const entry = ({ ref, record }: StoredObject): XenValue => ({ ref, record: present("task", record) });

/**
 * task.hangar_get_page: the running tasks (pending, cancelling; newest first, at most TASK_PAGE_MAX) and one page
 * of the finished ones, last finished first, with their totals. Only the page's records are read.
 */
export async function taskPage(objects: ObjectStore, query: z.output<typeof zTaskPageQuery>): Promise<XenValue> {
  const { status, text = "", offset = 0, limit = 100 } = query;
  if (status !== undefined && !(FINISHED as readonly string[]).includes(status)) throw xenErrors.invalidValue("status", status);
  if (offset < 0) throw xenErrors.invalidValue("offset", String(offset));
  if (limit < 0 || limit > TASK_PAGE_MAX) throw xenErrors.invalidValue("limit", String(limit));
  const [running, finished] = await Promise.all([
    objects.pageByStatus("task", { statuses: RUNNING, offset: 0, limit: TASK_PAGE_MAX }),
    objects.pageByStatus("task", { statuses: status === undefined ? FINISHED : [status], text, offset, limit }),
  ]);
  const [runningRecords, finishedRecords] = await Promise.all([objects.many("task", running.refs), objects.many("task", finished.refs)]);
  return {
    running: runningRecords.map(entry),
    finished: finishedRecords.map(entry),
    total_running: running.total,
    total_finished: finished.total,
  };
}

export const taskCalls = [
  ...objectGetters("task", ["status", "progress", "result", "error_info", "name_label", "name_description", "created", "finished", "allowed_operations", "other_config", "resident_on", "uuid"]),
  method("task.create", [["label", zString], ["description", zString]], ({ ts, session }, label, description) =>
    ts.tasks.create({ name_label: label, name_description: description, owner: ownerOf(session!) }),
  { async: false }),
  // Whoever may read every task (task.get_all_records) may read a page of them.
  method("task.hangar_get_page", [["query", zTaskPageQuery]], ({ ts }, query) => taskPage(ts.objects, query), { role: "read-only", async: false }),
  ...[
  method("task.cancel", [["task", zRef]], async ({ ts }, ref) => {
    await ts.tasks.cancel(ref);
  }, { async: false }),
  method("task.destroy", [["self", zRef]], async ({ ts }, ref) => {
    if (ts.tasks.isRunning(ref)) throw xenErrors.operationNotAllowed(`task ${ref} is still running: cancel it first`);
    await ts.objects.destroy("task", ref);
  }, { async: false }),
  method("task.set_status", [["self", zRef], ["value", zString]], async ({ ts }, ref, status) => {
    if (!["pending", "success", "failure", "cancelling", "cancelled"].includes(status)) throw xenErrors.invalidValue("status", status);
    // A client ending its own task stamps it finished: it is then kept 24 h from now, not from 1970.
    const ended = status !== "pending" && status !== "cancelling";
    await ts.objects.set("task", ref, ended ? { status, finished: xenDate(), allowed_operations: [] } : { status });
  }, { async: false }),
  method("task.set_progress", [["self", zRef], ["value", zFloat]], async ({ ts }, ref, progress) => {
    if (!(progress >= 0 && progress <= 1)) throw xenErrors.invalidValue("value", String(progress));
    await ts.objects.set("task", ref, { progress });
  }, { async: false }),
  method("task.set_result", [["self", zRef], ["value", zString]], async ({ ts }, ref, result) => {
    await ts.objects.set("task", ref, { result });
  }, { async: false }),
  method("task.set_error_info", [["self", zRef], ["value", zStringList]], async ({ ts }, ref, errorInfo) => {
    await ts.objects.set("task", ref, { error_info: errorInfo });
  }, { async: false }),
  ...mapFieldCalls("task", "other_config"),
  ].map(ownTaskOnly),
];

/**
 * A call on a task, for its owner (any session of the user who made it) or a pool operator (xapi's
 * `task.destroy/any`); anyone else is refused as xapi refuses them.
 */
function ownTaskOnly(def: MethodDef): MethodDef {
  return {
    ...def,
    call: async (ctx, args) => {
      const task = await ctx.ts.objects.get("task", String(args[0]));
      if (!permits(ctx.session!, "pool-operator") && task.record.hangar_owner !== ownerOf(ctx.session!)) throw rbacErrors.denied("task.destroy/any", "pool-operator");
      return def.call(ctx, args);
    },
  };
}
