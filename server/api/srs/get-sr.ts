// One SR for its page: the toolstack's record, and when attached a fresh SR.stat straight from its plugin so
// the health reason is current. A detached SR, or one whose plugin fails or hangs, still answers: with the
// reason in its health instead of an error, so the page can say why and offer what helps.
import "server-only";

import { z } from "zod";
import type { XenApiClient } from "../../xenapi/client.ts";
import { StorageError } from "../../storage/errors.ts";
import { describeXenApiError } from "../../xenapi/error-descriptions.ts";
import { accessSr, CONSOLE_DBG, callPlugin, poolHosts } from "../storage-access.ts";
import { readPool, summarize, ZPbdRecord, ZSrRecord } from "./records.ts";
import type { TGetSrResponse } from "./schema.ts";
import { volumeCount } from "./volume-counts.ts";

const ZRef = z.string();

/** A page refreshed every 5 s waits this long for SR.stat (as the toolstack's records do) before saying so. */
const STAT_WAIT_MS = 5000;

/** device_config keys whose values stay on the server (CHAP passwords and the like). */
const SECRET_KEY = /pass|secret|token|key|credential/i;

/** The ref of an SR named by ref or uuid; NOT_FOUND for neither. */
export async function resolveSr(xapi: XenApiClient, sr: string): Promise<string> {
  if (sr.startsWith("OpaqueRef:")) return sr;
  // UUID_INVALID (and HANDLE_INVALID for a ref) become NOT_FOUND in consoleError.
  return xapi.call(ZRef, "SR.get_by_uuid", sr);
}

export async function getSr(xapi: XenApiClient, pluginRoot: string, sr: string): Promise<TGetSrResponse> {
  const ref = await resolveSr(xapi, sr);
  const [record, pool, hosts] = await Promise.all([xapi.call(ZSrRecord, "SR.get_record", ref), readPool(xapi), poolHosts(xapi)]);
  const pbds = await Promise.all(record.PBDs.map((pbd) => xapi.call(ZPbdRecord, "PBD.get_record", pbd)));
  const summary = summarize(ref, record, pbds, pool.defaultSr, hosts);
  const attachedPbd = pbds.find((pbd) => pbd.currently_attached);
  const deviceConfig = Object.fromEntries(
    Object.entries((attachedPbd ?? pbds[0])?.device_config ?? {}).map(([key, value]) => [key, SECRET_KEY.test(key) ? "(hidden)" : value]),
  );
  const base: TGetSrResponse = {
    ...summary,
    source: "toolstack",
    datasources: [],
    clustered: record.clustered,
    uri: attachedPbd?.other_config["hangar-sr-uri"] ?? null,
    deviceConfig,
  };
  // Detached, or on a host that is offline (its health says so): nothing to ask a plugin.
  if (!summary.attached || summary.host?.live === false) return base;
  try {
    const access = await accessSr(xapi, pluginRoot, ref);
    const [stat, volumes] = await Promise.all([
      withDeadline(callPlugin(access.plugin, "SR.stat", { dbg: CONSOLE_DBG, sr: access.uri }), STAT_WAIT_MS, `SR.stat did not answer within ${STAT_WAIT_MS / 1000} s`),
      volumeCount(access.place, record.type, access.uri, summary.volumeCount),
    ]);
    const [tag, reason] = stat.health;
    const health = summarize(ref, { ...record, health: [tag, reason] }, pbds, pool.defaultSr, hosts).health;
    return {
      ...base,
      source: "plugin",
      health,
      physicalSize: stat.total_space,
      physicalUtilisation: stat.total_space - stat.free_space,
      volumeCount: volumes,
      datasources: stat.datasources,
      clustered: stat.clustered,
      uri: access.uri,
    };
  } catch (error) {
    // The page still renders: the plugin's failure is the health reason, space the last the toolstack knew.
    return { ...base, health: { tag: "Unreachable", reason: failureReason(error) } };
  }
}

/** A plugin call's failure as a health reason: the plugin's error in words, else what the console says. */
function failureReason(error: unknown): string {
  const cause = error instanceof Error ? error.cause : undefined;
  if (cause instanceof StorageError) return describeXenApiError(cause.code, cause.params);
  return error instanceof Error ? error.message : String(error);
}

function withDeadline<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
