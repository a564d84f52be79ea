// Every SR the toolstack knows, as the storage list and the dashboard show it: four listings in parallel
// (SRs with their live space and health, PBDs, hosts, the pool), whatever the number of SRs, and each attached
// SR's volume count from its plugin on the host it is attached on (volume-counts.ts).
import "server-only";

import type { XenApiClient } from "../../xenapi/client.ts";
import { hostPlugins, poolHosts } from "../storage-access.ts";
import { type PbdRecord, readPool, srHost, summarize, ZPbdRecord, ZSrRecord } from "./records.ts";
import type { TListSrsResponse } from "./schema.ts";
import { volumeCount } from "./volume-counts.ts";

export async function listSrs(xapi: XenApiClient, pluginRoot: string, options: { volumeCounts: boolean } = { volumeCounts: true }): Promise<TListSrsResponse> {
  const [srs, pbds, hosts, pool] = await Promise.all([xapi.records("SR", ZSrRecord), xapi.records("PBD", ZPbdRecord), poolHosts(xapi), readPool(xapi)]);
  const pbdsBySr = new Map<string, PbdRecord[]>();
  for (const pbd of Object.values(pbds)) pbdsBySr.set(pbd.SR, [...(pbdsBySr.get(pbd.SR) ?? []), pbd]);
  const summaries = await Promise.all(
    Object.entries(srs).map(async ([ref, sr]) => {
      const pbds = pbdsBySr.get(ref) ?? [];
      const summary = summarize(ref, sr, pbds, pool.defaultSr, hosts);
      const uri = pbds.find((pbd) => pbd.currently_attached)?.other_config["hangar-sr-uri"];
      const host = srHost(pbds, hosts);
      // An offline host's SRs keep the toolstack's count: asking would only wait.
      if (!options.volumeCounts || uri === undefined || host?.live === false) return summary;
      return { ...summary, volumeCount: await volumeCount(hostPlugins(xapi, pluginRoot, host), sr.type, uri, summary.volumeCount) };
    }),
  );
  // A stable order for people: by name, then uuid (get_all_records' order is the database's).
  summaries.sort((a, b) => a.name.localeCompare(b.name, undefined, { sensitivity: "base" }) || a.uuid.localeCompare(b.uuid));
  return { srs: summaries };
}
