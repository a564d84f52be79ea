// SR.probe through the toolstack (SR.probe_ext: every result, with the SR found if any), each found SR
// matched against the SRs the toolstack already knows so the dialog can say "already known as …".
import "server-only";

import { z } from "zod";
import { type XenApiClient, zInt64 } from "../../xenapi/client.ts";
import { readPool, ZSrRecord } from "./records.ts";
import type { TProbeSrResponse } from "./schema.ts";

const ZProbeExtResult = z.looseObject({
  configuration: z.record(z.string(), z.string()),
  complete: z.boolean(),
  extra_info: z.record(z.string(), z.string()).default({}),
  sr: z
    .looseObject({
      uuid: z.string(),
      name_label: z.string(),
      name_description: z.string(),
      total_space: zInt64,
      free_space: zInt64,
      health: z.string().default(""),
    })
    .optional(),
});

export async function probeSr(xapi: XenApiClient, type: string, deviceConfig: Record<string, string>): Promise<TProbeSrResponse> {
  const pool = await readPool(xapi);
  const [results, srs] = await Promise.all([
    xapi.call(z.array(ZProbeExtResult), "SR.probe_ext", pool.master, deviceConfig, type, {}),
    xapi.records("SR", ZSrRecord.pick({ uuid: true, name_label: true })),
  ]);
  const known = new Map(Object.entries(srs).map(([ref, sr]) => [sr.uuid, { ref, name: sr.name_label }]));
  return {
    results: results.map(({ configuration, complete, extra_info, sr }) => ({
      configuration,
      complete,
      extraInfo: extra_info,
      sr:
        sr === undefined
          ? null
          : {
              uuid: sr.uuid,
              name: sr.name_label,
              description: sr.name_description,
              totalSpace: sr.total_space,
              freeSpace: sr.free_space,
              health: sr.health,
              knownAs: known.get(sr.uuid) ?? null,
            },
    })),
  };
}
