// Every SR the toolstack knows, as the storage list and the dashboard show it: three listings in parallel
// (SRs with their live space and health, PBDs, the pool), whatever the number of SRs.
import type { XenApiClient } from "../../toolstack/xenapi/client.ts";
import { type PbdRecord, readPool, summarize, ZPbdRecord, ZSrRecord } from "./records.ts";
import type { TListSrsResponse } from "./schema.ts";

export async function listSrs(xapi: XenApiClient): Promise<TListSrsResponse> {
  const [srs, pbds, pool] = await Promise.all([xapi.records("SR", ZSrRecord), xapi.records("PBD", ZPbdRecord), readPool(xapi)]);
  const pbdsBySr = new Map<string, PbdRecord[]>();
  for (const pbd of Object.values(pbds)) pbdsBySr.set(pbd.SR, [...(pbdsBySr.get(pbd.SR) ?? []), pbd]);
  const summaries = Object.entries(srs).map(([ref, sr]) => summarize(ref, sr, pbdsBySr.get(ref) ?? [], pool.defaultSr));
  // A stable order for people: by name, then uuid (get_all_records' order is the database's).
  summaries.sort((a, b) => a.name.localeCompare(b.name, undefined, { sensitivity: "base" }) || a.uuid.localeCompare(b.uuid));
  return { srs: summaries };
}
