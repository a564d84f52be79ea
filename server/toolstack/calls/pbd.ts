// PBD.*: an SR's connection to a host of the pool. device_config is what the plugin attaches the SR with; plug is
// SR.attach, unplug SR.detach. A PBD is made by SR.create, or by PBD.create after SR.introduce. Its
// other_config holds the attached SR's URI, so it has no setters.
import { type FieldSpec, parseCreateRecord, zRecordArg } from "../accessors.ts";
import { objectErrors } from "../object-errors.ts";
import { plugPbd, type StringMap, unplugPbd } from "../srs.ts";
import type { Toolstack } from "../toolstack.ts";
import { xenErrors } from "../../xenapi/errors.ts";
import { method } from "../methods.ts";
import { zRef, zStringMap } from "../../xenapi/params.ts";
import { objectGetters } from "./getters.ts";

const PBD_FIELDS = ["uuid", "host", "SR", "device_config", "currently_attached", "other_config"];

/** A detached PBD of a host of the pool for an SR, linked from the SR and the host records. */
export async function createPbd(ts: Toolstack, fields: { host: string; SR: string; device_config: StringMap; other_config: StringMap }): Promise<string> {
  return ts.db.transaction(async (tx) => {
    await ts.objects.get("SR", fields.SR, tx);
    await ts.objects.get("host", fields.host, tx);
    const existing = (await ts.objects.all("PBD", tx)).find((p) => p.record.SR === fields.SR && p.record.host === fields.host);
    if (existing !== undefined) throw objectErrors.pbdExists(fields.SR, fields.host, existing.ref);
    const pbd = await ts.objects.create("PBD", { uuid: crypto.randomUUID(), ...fields, currently_attached: false }, { db: tx });
    const link = (cls: string, ref: string) => ts.objects.update(cls, ref, (r) => ({ ...r, PBDs: [...(r.PBDs as string[]), pbd.ref] }), tx);
    await link("SR", fields.SR);
    await link("host", fields.host);
    return pbd.ref;
  });
}

const PBD_CREATE: FieldSpec = { host: [zRef], SR: [zRef], device_config: [zStringMap], other_config: [zStringMap, {}] };

export const pbdCalls = [
  ...objectGetters("PBD", PBD_FIELDS),
  method("PBD.create", [["args", zRecordArg]], async ({ ts }, args) => {
    const { host, SR, device_config, other_config } = parseCreateRecord(PBD_CREATE, args);
    return createPbd(ts, { host: String(host), SR: String(SR), device_config: device_config as StringMap, other_config: other_config as StringMap });
  }),
  method("PBD.destroy", [["self", zRef]], async ({ ts }, ref) => {
    const pbd = await ts.objects.get("PBD", ref);
    if (pbd.record.currently_attached === true) throw xenErrors.operationNotAllowed("PBD is currently attached: PBD.unplug it first");
    await ts.db.transaction(async (tx) => {
      await ts.objects.destroy("PBD", ref, tx);
      for (const [cls, owner] of [["SR", String(pbd.record.SR)], ["host", String(pbd.record.host)]] as const) {
        if ((await ts.objects.find(cls, owner, tx)) === undefined) continue;
        await ts.objects.update(cls, owner, (r) => ({ ...r, PBDs: (r.PBDs as string[]).filter((p) => p !== ref) }), tx);
      }
    });
  }),
  method("PBD.plug", [["self", zRef]], async ({ ts }, ref) => plugPbd(ts, ref)),
  method("PBD.unplug", [["self", zRef]], async ({ ts }, ref) => unplugPbd(ts, ref)),
];
