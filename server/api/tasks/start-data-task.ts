// Starting a copy or mirror of a volume from the task page: always an `Async.` call, so the work is a
// toolstack task the page follows like any other. Copy and mirror to an NBD URI, copy to a new volume of
// another SR (VDI.copy), mirror into an existing volume (Hangar's VDI.hangar_data_mirror_to_vdi). The
// choices come from the toolstack's SRs and VDIs.
import "server-only";

import { TRPCError } from "@trpc/server";
import { z } from "zod";
import { type XenApiClient, zInt64 } from "../../xenapi/client.ts";
import type { TCopySourcesResponse, TStartDataTaskInput } from "./schema.ts";

const ZSr = z.looseObject({
  name_label: z.string(),
  type: z.string(),
  PBDs: z.array(z.string()),
  health: z.array(z.string()).optional(),
});
const ZPbd = z.looseObject({ currently_attached: z.boolean() });
const ZVdi = z.looseObject({ name_label: z.string(), SR: z.string(), virtual_size: zInt64, is_a_snapshot: z.boolean().default(false) });

/** The XenAPI call each choice is. */
export async function startDataTask(xapi: XenApiClient, input: TStartDataTaskInput): Promise<string> {
  if (input.target === "nbd") {
    const call = input.operation === "mirror" ? "Async.VDI.hangar_data_mirror" : "Async.VDI.hangar_data_copy";
    return xapi.call(z.string(), call, input.vdi, input.remote);
  }
  if (input.target === "vdi") {
    if (input.dest === input.vdi) throw new TRPCError({ code: "BAD_REQUEST", message: "Choose another volume than the source to mirror into." });
    return xapi.call(z.string(), "Async.VDI.hangar_data_mirror_to_vdi", input.vdi, input.dest);
  }
  const source = await xapi.call(z.string(), "VDI.get_SR", input.vdi);
  if (source === input.sr) throw new TRPCError({ code: "BAD_REQUEST", message: "Choose another SR than the volume's own to copy it to." });
  return xapi.call(z.string(), "Async.VDI.copy", input.vdi, input.sr);
}

/** Every SR with its volumes (snapshots included: they can be copied too), for the copy dialog. */
export async function copySources(xapi: XenApiClient): Promise<TCopySourcesResponse> {
  const [srs, pbds, vdis, pools] = await Promise.all([
    xapi.records("SR", ZSr),
    xapi.records("PBD", ZPbd),
    xapi.records("VDI", ZVdi),
    xapi.records("pool", z.looseObject({ default_SR: z.string() })),
  ]);
  const defaults = new Set(Object.values(pools).map((pool) => pool.default_SR));
  return {
    srs: Object.entries(srs)
      .map(([ref, sr]) => {
        const attached = sr.PBDs.some((pbd) => pbds[pbd]?.currently_attached === true);
        const [tag, why] = sr.health ?? [];
        const problem = !attached ? "detached" : tag === "Unreachable" ? `unreachable${why ? `: ${why}` : ""}` : null;
        const volumes = Object.entries(vdis)
          .filter(([, vdi]) => vdi.SR === ref)
          .map(([vdiRef, vdi]) => ({ ref: vdiRef, name: vdi.name_label, virtualSize: vdi.virtual_size, isSnapshot: vdi.is_a_snapshot }))
          .sort((a, b) => a.name.localeCompare(b.name));
        return { ref, name: sr.name_label, type: sr.type, isDefault: defaults.has(ref), problem, volumes };
      })
      .sort((a, b) => a.name.localeCompare(b.name)),
  };
}
