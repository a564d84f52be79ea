// task.*: the stored task records with their getters, create (a client's own task, e.g. for /import),
// its status, progress, result and error as the client sets them (a client's own work: an OVA import), its
// other_config, cancel and destroy.
import { mapFieldCalls } from "../accessors.ts";
import { method, type MethodDef } from "../methods.ts";
import { ownerOf, permits } from "../rbac/authorize.ts";
import { rbacErrors } from "../rbac/roles.ts";
import { zFloat, zRef, zString, zStringList } from "../../xenapi/params.ts";
import { xenErrors } from "../../xenapi/errors.ts";
import { xenDate } from "../../xenapi/values.ts";
import { objectGetters } from "./getters.ts";

export const taskCalls = [
  ...objectGetters("task", ["status", "progress", "result", "error_info", "name_label", "name_description", "created", "finished", "allowed_operations", "other_config", "resident_on", "uuid"]),
  method("task.create", [["label", zString], ["description", zString]], ({ ts, session }, label, description) =>
    ts.tasks.create({ name_label: label, name_description: description, owner: ownerOf(session!) }),
  { async: false }),
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
