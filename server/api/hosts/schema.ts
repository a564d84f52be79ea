// What the hosts router returns: every host of the pool, whether it is live and the master, and the SRs its
// PBDs connect it to.
import { z } from "zod";

export const ZHostSr = z.object({
  ref: z.string(),
  uuid: z.string(),
  name: z.string(),
  type: z.string(),
  /** Whether this host's PBD of the SR is plugged. */
  attached: z.boolean(),
  isDefault: z.boolean(),
});

export const ZHostSummary = z.object({
  ref: z.string(),
  uuid: z.string(),
  name: z.string(),
  description: z.string(),
  address: z.string(),
  /** Whether it takes new work (host.disable turns it off). */
  enabled: z.boolean(),
  /** False once its heartbeat has stopped, or it stopped cleanly. */
  live: z.boolean(),
  isMaster: z.boolean(),
  /** The host the console's toolstack URL names: the one it logs in to. */
  isConsoleHost: z.boolean(),
  /** Its software version ("Hangar 0.1.0"), when it says. */
  version: z.string().nullable(),
  srs: z.array(ZHostSr),
});

export const ZListHostsResponse = z.object({ hosts: z.array(ZHostSummary) });

export type THostSr = z.infer<typeof ZHostSr>;
export type THostSummary = z.infer<typeof ZHostSummary>;
export type TListHostsResponse = z.infer<typeof ZListHostsResponse>;
