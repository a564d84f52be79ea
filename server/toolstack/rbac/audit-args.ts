// What of a call's arguments the audit trail keeps (xapi's rbac_audit.ml heuristics): names, labels and other
// words that say what was acted on, by value; a ref as (name, label, uuid, ref), looked up before the call so
// that a destroyed object keeps its name; numbers and booleans. Everything else is left out: passwords,
// secrets and configuration maps never reach the trail, and session refs are never among the arguments kept.
import type { Toolstack } from "../toolstack.ts";
import type { AuditArg } from "../../xenapi/audit-log.ts";
import { roleByRef } from "./roles.ts";

/** Parameters kept by value: they name or describe what the call acts on. */
const BY_VALUE = new Set(["name", "label", "description", "name_label", "name_description", "new_name", "uname", "originator", "service_name", "auth_type", "subject_identifier", "key", "format", "mode", "type", "uuid", "device", "userdevice", "MAC", "vdi", "sr_uuid", "base", "use_compression", "checksum", "offset", "method"]);
/** Fields of a record argument kept by value. */
const RECORD_FIELDS = new Set(["name_label", "name_description", "subject_identifier", "uuid", "type", "device", "userdevice"]);
/** The setters whose `value` is a name, kept. */
const NAMING_SETTERS = /\.set_name_(label|description)$/;
const MAX_KEPT = 200;
/** Members of an object argument looked at: a record's fields all, a large map's none past these. */
const RECORD_SCAN = 256;

function isRef(value: unknown): value is string {
  return typeof value === "string" && value.startsWith("OpaqueRef:") && value !== "OpaqueRef:NULL";
}

/** A ref as (name, label, uuid, ref), from the objects, the VDI locators or the static roles. */
async function named(ts: Toolstack, name: string, ref: string): Promise<AuditArg> {
  const object = await ts.db.get<{ uuid: string; name_label: string }>("SELECT uuid, name_label FROM objects WHERE ref = ?", [ref]);
  if (object !== undefined) return [name, object.name_label, object.uuid, ref];
  const vdi = await ts.db.get<{ uuid: string }>("SELECT uuid FROM vdi_locations WHERE ref = ?", [ref]);
  if (vdi !== undefined) return [name, "", vdi.uuid, ref];
  const role = roleByRef(ref);
  return role === undefined ? [name, "", "", ref] : [name, role, ref.slice("OpaqueRef:".length), ref];
}

async function describe(ts: Toolstack, action: string, name: string, value: unknown, out: AuditArg[]): Promise<void> {
  if (out.length >= MAX_KEPT || value === undefined || value === null || name === "session_id") return;
  if (isRef(value)) out.push(await named(ts, name, value));
  else if (typeof value === "number" || typeof value === "boolean") out.push([name, String(value)]);
  else if (typeof value === "string") {
    if (BY_VALUE.has(name) || (name === "value" && NAMING_SETTERS.test(action))) out.push([name, value.slice(0, 1024)]);
  } else if (Array.isArray(value)) {
    for (const item of value) if (isRef(item)) await describe(ts, action, name, item, out);
  } else if (typeof value === "object") {
    // A record's fields (a VBD's VM and VDI, a VDI's name): a record has a few dozen, so past RECORD_SCAN members
    // this is a map (other_config with up to 24,000), whose members the trail does not keep: not read at all
    // (listing them all held the event loop ~50 ms for the largest allowed).
    let scanned = 0;
    for (const field in value) {
      if (++scanned > RECORD_SCAN) break;
      const inner = (value as Record<string, unknown>)[field];
      if (RECORD_FIELDS.has(field) && typeof inner === "string") out.push([`${name}.${field}`, inner.slice(0, 1024)]);
      else if (isRef(inner)) out.push(await named(ts, `${name}.${field}`, inner));
    }
  }
}

/** The arguments of `action` (parameter names beside values, the session left out) as the trail keeps them. */
export async function auditArgs(ts: Toolstack, action: string, names: readonly string[], values: readonly unknown[]): Promise<AuditArg[]> {
  const out: AuditArg[] = [];
  for (const [i, name] of names.entries()) await describe(ts, action, name, values[i], out);
  return out;
}
