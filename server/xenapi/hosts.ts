// A pool's hosts as a client sees them: the record, where a member's service listens (its address from the
// record, its ports from other_config: Hangar's keys; without them, the scheme's default port, as xapi's
// 80 and 443), and how messages name it.
import { z } from "zod";
import type { XenValue } from "./values.ts";

export const HTTP_PORT_KEY = "hangar-http-port";
export const HTTPS_PORT_KEY = "hangar-https-port";

/** The base URL of a host's service (`http://address:port`), from its record (the toolstack's, or a client's copy). */
export function hostUrl(record: { address?: XenValue; other_config?: XenValue }, scheme: "http" | "https" = "http"): string {
  const address = String(record.address);
  const port = (record.other_config as Record<string, string> | undefined)?.[scheme === "http" ? HTTP_PORT_KEY : HTTPS_PORT_KEY];
  return `${scheme}://${address.includes(":") ? `[${address}]` : address}${port === undefined ? "" : `:${port}`}`;
}

/** A host of the pool as the toolstack records it: each serves the plugins of the SRs attached on it. */
export const ZHostRecord = z.looseObject({
  uuid: z.string().default(""),
  name_label: z.string(),
  name_description: z.string().default(""),
  hostname: z.string().default(""),
  address: z.string(),
  enabled: z.boolean().default(true),
  /** Hangar's: false once the host's heartbeat has stopped (a toolstack without it has one live host). */
  live: z.boolean().default(true),
  PBDs: z.array(z.string()).default([]),
  other_config: z.record(z.string(), z.string()).default({}),
});
export type HostRecord = z.infer<typeof ZHostRecord>;

/** "host (address)", as messages name a host. */
export function hostLabel(host: { name: string; address: string }): string {
  return host.name === "" || host.name === host.address ? host.address : `${host.name} (${host.address})`;
}
