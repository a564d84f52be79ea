// The pool's hosts as the Hosts page shows them: four listings in parallel (hosts, PBDs, SRs, the pool),
// each host with its SRs through its PBDs. The master first, then by name and address.
import "server-only";

import { z } from "zod";
import type { XenApiClient } from "../../xenapi/client.ts";
import { readPool, ZPbdRecord } from "../srs/records.ts";
import { isToolstackHost } from "../storage-access.ts";
import { ZHostRecord } from "../../xenapi/hosts.ts";
import type { THostSr, TListHostsResponse } from "./schema.ts";

const ZSrBrief = z.looseObject({ uuid: z.string(), name_label: z.string(), type: z.string() });
const ZSoftwareVersion = z.object({ product_brand: z.string().optional(), product_version: z.string().optional() }).partial();

export async function listHosts(xapi: XenApiClient): Promise<TListHostsResponse> {
  const [hosts, pbds, srs, pool] = await Promise.all([xapi.records("host", ZHostRecord), xapi.records("PBD", ZPbdRecord), xapi.records("SR", ZSrBrief), readPool(xapi)]);
  const srsByHost = new Map<string, THostSr[]>();
  for (const pbd of Object.values(pbds)) {
    const sr = srs[pbd.SR];
    if (sr === undefined) continue;
    const entry: THostSr = { ref: pbd.SR, uuid: sr.uuid, name: sr.name_label, type: sr.type, attached: pbd.currently_attached, isDefault: pbd.SR === pool.defaultSr };
    srsByHost.set(pbd.host, [...(srsByHost.get(pbd.host) ?? []), entry]);
  }
  const byName = (a: { name: string; uuid: string }, b: { name: string; uuid: string }) => a.name.localeCompare(b.name, undefined, { sensitivity: "base" }) || a.uuid.localeCompare(b.uuid);
  const summaries = Object.entries(hosts).map(([ref, host]) => {
    const version = ZSoftwareVersion.safeParse(host.software_version);
    const words = version.success ? [version.data.product_brand, version.data.product_version].filter(Boolean).join(" ") : "";
    return {
      ref,
      uuid: host.uuid,
      name: host.name_label,
      description: host.name_description,
      address: host.address,
      enabled: host.enabled,
      live: host.live,
      isMaster: ref === pool.master,
      isConsoleHost: isToolstackHost(host.address),
      version: words === "" ? null : words,
      srs: (srsByHost.get(ref) ?? []).sort(byName),
    };
  });
  summaries.sort((a, b) => Number(b.isMaster) - Number(a.isMaster) || a.name.localeCompare(b.name, undefined, { sensitivity: "base" }) || a.address.localeCompare(b.address, undefined, { numeric: true }));
  return { hosts: summaries };
}
