// The toolstack records an SR summary is made of (SR, its PBDs, the pool's default_SR), checked with zod,
// and the summary itself. One place, so the list and the SR page say the same things the same way.
import "server-only";

import { z } from "zod";
import { type XenApiClient, zInt64 } from "../../xenapi/client.ts";
import type { PoolHost } from "../storage-access.ts";
import { hostLabel } from "../../xenapi/hosts.ts";
import { describeXenApiError } from "../../xenapi/error-descriptions.ts";
import { type TSrHealth, type TSrHost, type TSrSummary, ZSrHealthTag } from "./schema.ts";

export const ZSrRecord = z.looseObject({
  uuid: z.string(),
  name_label: z.string(),
  name_description: z.string(),
  type: z.string(),
  content_type: z.string().default(""),
  shared: z.boolean().default(false),
  PBDs: z.array(z.string()),
  VDIs: z.array(z.string()).default([]),
  physical_size: zInt64.default(0),
  physical_utilisation: zInt64.default(0),
  clustered: z.boolean().default(false),
  allowed_operations: z.array(z.string()).default([]),
  /** Hangar's field: SR.stat's health as [tag, message]; a toolstack without it says nothing. */
  health: z.tuple([z.string(), z.string()]).optional(),
});
export type SrRecord = z.infer<typeof ZSrRecord>;

export const ZPbdRecord = z.looseObject({
  SR: z.string(),
  host: z.string().default(""),
  currently_attached: z.boolean(),
  device_config: z.record(z.string(), z.string()).default({}),
  other_config: z.record(z.string(), z.string()).default({}),
});
export type PbdRecord = z.infer<typeof ZPbdRecord>;

const ZPoolRecord = z.looseObject({ default_SR: z.string(), master: z.string() });

/** The pool's ref, its default SR (OpaqueRef:NULL for none) and its master, the host SR.create and SR.probe run on. */
export async function readPool(xapi: XenApiClient): Promise<{ ref: string; defaultSr: string; master: string }> {
  const pools = Object.entries(await xapi.records("pool", ZPoolRecord));
  const [ref, pool] = pools[0] ?? [];
  if (ref === undefined || pool === undefined) throw new Error("the toolstack has no pool");
  return { ref, defaultSr: pool.default_SR, master: pool.master };
}

/** A health tuple as SR.stat gives it, with an unknown tag kept visible as Unknown. */
export function healthOf(tuple: readonly [string, string] | undefined, attached: boolean): TSrHealth {
  if (tuple === undefined) return attached ? { tag: "Unknown", reason: "The toolstack reports no health for this SR." } : detachedHealth();
  const parsed = ZSrHealthTag.safeParse(tuple[0]);
  if (!parsed.success) return { tag: "Unknown", reason: tuple[1] === "" ? `The plugin reports "${tuple[0]}".` : `${tuple[0]}: ${tuple[1]}` };
  return { tag: parsed.data, reason: describeHealthReason(tuple[1]) };
}

/**
 * The toolstack words a failing plugin's health as the error's message ("SR_BACKEND_FAILURE: SR_does_not_exist,
 * /srv/sr"); such a message reads as the console says XenAPI errors. Other reasons are the plugin's own words.
 */
export function describeHealthReason(reason: string): string {
  const match = /^([A-Z][A-Z0-9_]+): (.*)$/s.exec(reason);
  if (match === null) return reason;
  return describeXenApiError(match[1]!, match[2]!.split(", "));
}

export function detachedHealth(): TSrHealth {
  return { tag: "Unreachable", reason: "Detached: not attached on this host. Attach it to use its volumes." };
}

/** The host an SR is on: its attached PBD's, else its first PBD's; undefined for none known. */
export function srHost(pbds: readonly PbdRecord[], hosts: ReadonlyMap<string, PoolHost>): PoolHost | undefined {
  const pbd = pbds.find((p) => p.currently_attached) ?? pbds[0];
  return pbd === undefined ? undefined : hosts.get(pbd.host);
}

export function offlineHostHealth(host: Pick<PoolHost, "name" | "address">): TSrHealth {
  return { tag: "Unreachable", reason: `Its host ${hostLabel(host)} is offline: the SR cannot be reached until the host is back.` };
}

/** `hosts`: the pool's (poolHosts()); an SR attached on one that is offline is Unreachable, and says why. */
export function summarize(ref: string, sr: SrRecord, pbds: readonly PbdRecord[], defaultSr: string, hosts: ReadonlyMap<string, PoolHost>): TSrSummary {
  const attached = pbds.some((pbd) => pbd.currently_attached);
  const host = srHost(pbds, hosts);
  // The toolstack's own words for a detached SR name its XenAPI call; the console says what to do here.
  const health = !attached ? detachedHealth() : host !== undefined && !host.live ? offlineHostHealth(host) : healthOf(sr.health, true);
  return {
    ref,
    uuid: sr.uuid,
    name: sr.name_label,
    description: sr.name_description,
    type: sr.type,
    contentType: sr.content_type,
    shared: sr.shared,
    health,
    attached,
    hasPbd: pbds.length > 0,
    host: host === undefined ? null : ({ ref: host.ref, name: host.name, address: host.address, live: host.live } satisfies TSrHost),
    physicalSize: sr.physical_size,
    physicalUtilisation: sr.physical_utilisation,
    volumeCount: sr.VDIs.length,
    isDefault: ref === defaultSr,
    allowedOperations: sr.allowed_operations,
  };
}
