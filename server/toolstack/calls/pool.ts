// pool.*: the one pool (made by the core on first start), its default SR and other_config.
import { fieldSetter, mapFieldCalls } from "../accessors.ts";
import { hostErrors } from "../hosts.ts";
import type { Toolstack } from "../toolstack.ts";
import { xenErrors } from "../../xenapi/errors.ts";
import { method } from "../methods.ts";
import { zRef, zString } from "../../xenapi/params.ts";
import { NULL_REF } from "../../xenapi/values.ts";
import { objectGetters } from "./getters.ts";

const POOL_FIELDS = [
  "uuid",
  "name_label",
  "name_description",
  "master",
  "default_SR",
  "suspend_image_SR",
  "crash_dump_SR",
  "other_config",
  "allowed_operations",
  "current_operations",
  "tags",
];

/** The pool's default SR: DEFAULT_SR_NOT_FOUND when none is set or it is gone (VDI.create with a null SR, imports). */
export async function defaultSr(ts: Toolstack): Promise<string> {
  const ref = String((await ts.objects.get("pool", ts.poolRef)).record.default_SR);
  if (ref === NULL_REF || (await ts.objects.find("SR", ref)) === undefined) throw xenErrors.defaultSrNotFound(ref);
  return ref;
}

export const poolCalls = [
  ...objectGetters("pool", POOL_FIELDS),
  method("pool.set_default_SR", [["self", zRef], ["value", zRef]], async ({ ts }, ref, sr) => {
    if (sr !== NULL_REF) await ts.objects.get("SR", sr);
    await ts.objects.set("pool", ref, { default_SR: sr });
  }),
  fieldSetter("pool", "name_label", zString),
  fieldSetter("pool", "name_description", zString),
  ...mapFieldCalls("pool", "other_config"),
  // Makes another live host the master (the old one goes on as a member).
  method("pool.designate_new_master", [["host", zRef]], async ({ ts }, host) => {
    const record = await ts.objects.get("host", host);
    if (!(await ts.pool.isLive(host))) throw hostErrors.hostOffline(record);
    await ts.objects.set("pool", ts.poolRef, { master: host });
  }),
  // Sent to a member when the master is gone: this host becomes the master.
  method("pool.emergency_transition_to_master", [], async ({ ts }) => {
    const pool = await ts.objects.get("pool", ts.poolRef);
    const master = String(pool.record.master);
    if (master !== ts.host.ref && (await ts.pool.isLive(master))) throw xenErrors.operationNotAllowed("the pool's master is alive: use pool.designate_new_master");
    await ts.objects.set("pool", ts.poolRef, { master: ts.host.ref });
  }),
];
