// What the srs router accepts and returns. An SR is named by its ref everywhere except in page URLs, which
// may carry its uuid (shorter, and stable across an SR.forget and SR.introduce).
import { z } from "zod";

/** SR.stat's health tags, plus Unknown for a tag this console does not know. */
export const ZSrHealthTag = z.enum(["Healthy", "Recovering", "Unreachable", "Unavailable", "Unknown"]);

export const ZSrHealth = z.object({
  tag: ZSrHealthTag,
  /** Why the SR is not Healthy, in the plugin's or the toolstack's words; "" when Healthy. */
  reason: z.string(),
});

/** The host an SR is attached on (or was last plugged into), as lists show it. */
export const ZSrHost = z.object({
  ref: z.string(),
  name: z.string(),
  address: z.string(),
  live: z.boolean(),
});

export const ZSrSummary = z.object({
  ref: z.string(),
  uuid: z.string(),
  name: z.string(),
  description: z.string(),
  type: z.string(),
  contentType: z.string(),
  shared: z.boolean(),
  health: ZSrHealth,
  /** Whether this host's PBD is plugged (an SR without a PBD is detached too). */
  attached: z.boolean(),
  /** Whether the SR has a PBD at all: one introduced without one cannot be attached from here. */
  hasPbd: z.boolean(),
  /** The host of its attached PBD, else of its first; null when it has none (or the toolstack has no hosts). */
  host: ZSrHost.nullable(),
  /** Bytes; 0 when never known (an SR detached since the toolstack started). */
  physicalSize: z.number(),
  physicalUtilisation: z.number(),
  volumeCount: z.number(),
  isDefault: z.boolean(),
  /** XenAPI's allowed_operations (e.g. "destroy" only when the plugin has SR_DELETE). */
  allowedOperations: z.array(z.string()),
});

/**
 * `volumeCounts: false` leaves each SR's count at the toolstack's (no SR.ls through its plugin): for pickers
 * that poll, such as the import card, where a plugin process every 15 s would cost more than it shows.
 */
export const ZListSrsSchema = z.object({ volumeCounts: z.boolean().default(true) }).optional();

export const ZListSrsResponse = z.object({
  srs: z.array(ZSrSummary),
});

export const ZSrRefSchema = z.object({
  sr: z.string().trim().min(1, "Name an SR").max(200).regex(/^OpaqueRef:/, "An SR ref starts with OpaqueRef:"),
});

export const ZGetSrSchema = z.object({
  /** The SR's ref or uuid. */
  sr: z.string().trim().min(1, "Name an SR").max(200),
});

export const ZGetSrResponse = ZSrSummary.extend({
  /** Where health and space came from: a fresh SR.stat through the plugin, or the toolstack's record. */
  source: z.enum(["plugin", "toolstack"]),
  /** Datasource URIs SR.stat lists (empty when detached or unreachable). */
  datasources: z.array(z.string()),
  clustered: z.boolean(),
  /** The SR as its plugin names it, when attached. */
  uri: z.string().nullable(),
  /** The PBD's device_config, values of secret-looking keys hidden. */
  deviceConfig: z.record(z.string(), z.string()),
});

export const ZConfigurationKey = z.object({ key: z.string(), description: z.string() });

export const ZSrType = z.object({
  type: z.string(),
  name: z.string(),
  description: z.string(),
  vendor: z.string(),
  version: z.string(),
  /** The plugin's device_config keys (Plugin.query's `configuration`), each with what it means. */
  configuration: z.array(ZConfigurationKey),
  features: z.array(z.string()),
  canCreate: z.boolean(),
  canProbe: z.boolean(),
  canDestroy: z.boolean(),
});

export const ZListSrTypesResponse = z.object({ types: z.array(ZSrType) });

/** device_config as a form sends it: empty fields are left out (a plugin reads a key given as "" as set). */
const ZDeviceConfig = z
  .record(z.string().trim().min(1, "A configuration key cannot be empty").max(255), z.string().max(4096))
  .transform((config) => Object.fromEntries(Object.entries(config).filter(([, value]) => value.trim() !== "")));

export const ZProbeSrSchema = z.object({
  type: z.string().trim().min(1, "Choose an SR type").max(255),
  deviceConfig: ZDeviceConfig,
});

export const ZProbeFoundSr = z.object({
  uuid: z.string(),
  name: z.string(),
  description: z.string(),
  totalSpace: z.number(),
  freeSpace: z.number(),
  health: z.string(),
  /** The ref when the toolstack already knows an SR of this uuid. */
  knownAs: z.object({ ref: z.string(), name: z.string() }).nullable(),
});

export const ZProbeResult = z.object({
  configuration: z.record(z.string(), z.string()),
  /** True: usable for SR.create (or SR.attach) as is. */
  complete: z.boolean(),
  extraInfo: z.record(z.string(), z.string()),
  sr: ZProbeFoundSr.nullable(),
});

export const ZProbeSrResponse = z.object({ results: z.array(ZProbeResult) });

export const ZCreateSrSchema = z.object({
  type: z.string().trim().min(1, "Choose an SR type").max(255),
  name: z.string().trim().min(1, "Give the SR a name").max(255, "At most 255 characters"),
  description: z.string().trim().max(1024, "At most 1024 characters").default(""),
  deviceConfig: ZDeviceConfig,
});

export const ZCreateSrResponse = z.object({ ref: z.string(), uuid: z.string(), task: z.string() });

export const ZForgetSrSchema = ZSrRefSchema.extend({
  /** Detach first when attached (one confirmation in the UI for both). */
  detachFirst: z.boolean().default(false),
});

/** The toolstack tasks a change ran as, in order. */
export const ZSrActionResponse = z.object({ tasks: z.array(z.string()) });

export type TSrHealthTag = z.infer<typeof ZSrHealthTag>;
export type TSrHealth = z.infer<typeof ZSrHealth>;
export type TSrHost = z.infer<typeof ZSrHost>;
export type TSrSummary = z.infer<typeof ZSrSummary>;
export type TListSrsResponse = z.infer<typeof ZListSrsResponse>;
export type TGetSrResponse = z.infer<typeof ZGetSrResponse>;
export type TSrType = z.infer<typeof ZSrType>;
export type TListSrTypesResponse = z.infer<typeof ZListSrTypesResponse>;
export type TProbeSrResponse = z.infer<typeof ZProbeSrResponse>;
export type TProbeResult = z.infer<typeof ZProbeResult>;
export type TCreateSrResponse = z.infer<typeof ZCreateSrResponse>;
export type TSrActionResponse = z.infer<typeof ZSrActionResponse>;
