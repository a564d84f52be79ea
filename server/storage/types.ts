// Every type of the xapi-storage interface (storage-plugin-interface.md) as a schema; the TypeScript types
// are inferred from them.
import * as z from "zod/mini";
import { bool, float, int, int64, list, named, option, string, stringMap, struct, unit, variant } from "./wire.ts";

// Plugin
export const ZQueryResult = struct("query_result", {
  plugin: string(),
  name: string(),
  description: string(),
  vendor: string(),
  copyright: string(),
  version: string(),
  required_api_version: string(),
  features: list(string(), "string list"),
  configuration: stringMap("(string * string) list"),
  required_cluster_stack: list(string(), "string list"),
});
export const ZSrs = list(string(), "srs");

// Datapath
export const ZPersistent = bool("persistent");
export const ZHvdisk = struct("hvdisk", {
  params: string(),
  extra: stringMap(),
  backend_type: string(),
});
export const ZBlockDevice = struct("block_device", { path: string() });
export const ZFile = struct("file", { path: string() });
export const ZNbd = struct("nbd", { uri: string() });
export const ZImplementation = variant("implementation", {
  HvDisk: ZHvdisk,
  BlockDevice: ZBlockDevice,
  File: ZFile,
  Nbd: ZNbd,
});
export const ZBackend = struct("backend", { implementations: list(ZImplementation) });
export const ZSockPath = string("sock_path");
export const ZUri = string("uri");
export const ZDomain = string("domain");

// Data
/** `ranges` are `[start, length]` pairs counted in blocks of `blocksize` bytes. */
export const ZBlocklist = struct("blocklist", {
  blocksize: int(),
  ranges: list(named(z.tuple([int64(), int64()]), "int64 * int64"), "(int64 * int64) list"),
});
export const ZOperation = variant("operation", { CopyV1: string(), MirrorV1: string() });
export const ZOperations = list(ZOperation, "operations");
export const ZStatus = struct("status", {
  failed: bool(),
  complete: bool(),
  progress: option(float()),
});

// SR and volume
export const ZConfiguration = stringMap("configuration");
export const ZHealth = variant("health", {
  Healthy: string(),
  Recovering: string(),
  Unreachable: string(),
  Unavailable: string(),
});
export const ZSrStat = struct("sr_stat", {
  sr: string(),
  name: string(),
  uuid: option(string()),
  description: string(),
  free_space: int64(),
  total_space: int64(),
  datasources: list(string(), "string list"),
  clustered: bool(),
  health: ZHealth,
});
export const ZProbeResult = struct("probe_result", {
  configuration: ZConfiguration,
  complete: bool(),
  sr: option(ZSrStat),
  extra_info: stringMap(),
});
export const ZProbeResults = list(ZProbeResult, "probe_results");
export const ZVolumeType = variant("volume_type", { Data: null, CBT_Metadata: null, Data_and_CBT_Metadata: null });
export const ZVolume = struct("volume", {
  key: string(),
  uuid: option(string()),
  name: string(),
  description: string(),
  read_write: bool(),
  sharable: bool(),
  virtual_size: int64(),
  physical_utilisation: int64(),
  uri: list(string(), "string list"),
  keys: stringMap(),
  volume_type: option(ZVolumeType),
  cbt_enabled: option(bool()),
});
export const ZVolumes = list(ZVolume, "volumes");
export const ZKey = string("key");
export const ZKeyList = list(string(), "key_list");
/** `bitmap` is base64; bit i set = the i-th area of `granularity` bytes changed. */
export const ZChangedBlocks = struct("changed_blocks", { granularity: int(), bitmap: string() });
export const ZUnit = unit();

/** The interface's error constructors, carried as `params[0]` of an SR_BACKEND_FAILURE error. */
export const ERROR_CONSTRUCTORS = [
  "Unimplemented",
  "Sr_not_attached",
  "SR_does_not_exist",
  "Volume_does_not_exist",
  "Activated_on_another_host",
  "Cancelled",
] as const;
export type ErrorConstructor = (typeof ERROR_CONSTRUCTORS)[number];

export type QueryResult = z.output<typeof ZQueryResult>;
export type Hvdisk = z.output<typeof ZHvdisk>;
export type BlockDevice = z.output<typeof ZBlockDevice>;
export type FileImplementation = z.output<typeof ZFile>;
export type NbdImplementation = z.output<typeof ZNbd>;
export type Implementation = z.output<typeof ZImplementation>;
export type Backend = z.output<typeof ZBackend>;
export type Blocklist = z.output<typeof ZBlocklist>;
export type Operation = z.output<typeof ZOperation>;
export type Status = z.output<typeof ZStatus>;
export type Configuration = z.output<typeof ZConfiguration>;
export type Health = z.output<typeof ZHealth>;
export type SrStat = z.output<typeof ZSrStat>;
export type ProbeResult = z.output<typeof ZProbeResult>;
export type VolumeType = z.output<typeof ZVolumeType>;
export type Volume = z.output<typeof ZVolume>;
export type ChangedBlocks = z.output<typeof ZChangedBlocks>;
