// The five interfaces as one table. The plugin client, the dispatcher of our own plugins, the CLI and the
// method reference (`hangar methods`) are all driven by it: no per-method boilerplate anywhere else.
import * as z from "zod/mini";
import {
  ZBackend,
  ZBlocklist,
  ZChangedBlocks,
  ZConfiguration,
  ZDomain,
  ZKey,
  ZKeyList,
  ZOperation,
  ZOperations,
  ZPersistent,
  ZProbeResults,
  ZQueryResult,
  ZSockPath,
  ZSrStat,
  ZSrs,
  ZStatus,
  ZUnit,
  ZUri,
  ZVolume,
  ZVolumes,
} from "./types.ts";
import { bool, int64, string, struct } from "./wire.ts";

type Shape = Record<string, z.ZodMiniType>;
interface MethodSpec<P extends Shape = Shape, R extends z.ZodMiniType = z.ZodMiniType> {
  params: P;
  result: R;
  doc: string;
  /** Feature a plugin must declare before a caller may use the method. */
  feature?: string;
}

const method = <P extends Shape, R extends z.ZodMiniType>(params: P, result: R, doc: string, feature?: string) =>
  ({ params, result, doc, feature }) satisfies MethodSpec<P, R>;

const sr = string("sr");
const key = ZKey;
const uriDomain = { uri: ZUri, domain: ZDomain };

export const METHODS = {
  "Plugin.query": method({}, ZQueryResult, "Describes the plugin: name, version, features, configuration keys."),
  "Plugin.ls": method({}, ZSrs, "Lists the attached SRs."),
  "Plugin.diagnostics": method({}, string(), "Human-readable diagnostics without personal data."),

  "Datapath.open": method({ uri: ZUri, persistent: ZPersistent }, ZUnit, "Prepares a volume for use; persistent=false discards writes on close."),
  "Datapath.attach": method(uriDomain, ZBackend, "Attaches the volume and returns the ways to reach it."),
  "Datapath.activate": method(uriDomain, ZUnit, "Activates read-write; may be exclusive to one host."),
  "Datapath.activate_readonly": method(uriDomain, ZUnit, "Activates read-only; never alongside a read-write activation.", "VDI_ACTIVATE_READONLY"),
  "Datapath.import_activate": method(uriDomain, ZSockPath, "Returns a unix socket that takes an fd (SCM_RIGHTS) to serve NBD on.", "VDI_MIRROR_IN"),
  "Datapath.deactivate": method(uriDomain, ZUnit, "Ends an activation."),
  "Datapath.detach": method(uriDomain, ZUnit, "Releases what attach set up; never fails."),
  "Datapath.close": method({ uri: ZUri }, ZUnit, "Closes the volume; non-persistent writes are thrown away."),

  "Data.copy": method({ ...uriDomain, remote: ZUri, blocklist: ZBlocklist }, ZOperation, "Copies the listed blocks to a remote NBD URI."),
  "Data.mirror": method({ ...uriDomain, remote: ZUri }, ZOperation, "Mirrors every later write to a remote NBD URI."),
  "Data.stat": method({ operation: ZOperation }, ZStatus, "Status and progress of an operation."),
  "Data.cancel": method({ operation: ZOperation }, ZUnit, "Asks an operation to stop; may return before it has."),
  "Data.destroy": method({ operation: ZOperation }, ZUnit, "Forgets a finished operation; fails while it runs."),
  "Data.ls": method({}, ZOperations, "Lists all operations."),

  "SR.probe": method({ configuration: ZConfiguration }, ZProbeResults, "Narrows a configuration or finds existing SRs.", "SR_PROBE"),
  "SR.create": method({ uuid: string(), configuration: ZConfiguration, name: string(), description: string() }, ZConfiguration, "Creates a fresh SR.", "SR_CREATE"),
  "SR.attach": method({ configuration: ZConfiguration }, string("sr"), "Attaches the SR to this host.", "SR_ATTACH"),
  "SR.detach": method({ sr }, ZUnit, "Detaches the SR.", "SR_DETACH"),
  "SR.destroy": method({ sr }, ZUnit, "Destroys an attached SR and all its volumes.", "SR_DELETE"),
  "SR.stat": method({ sr }, ZSrStat, "Summary of the SR: space, health, datasources."),
  "SR.set_name": method({ sr, new_name: string() }, ZUnit, "Renames the SR."),
  "SR.set_description": method({ sr, new_description: string() }, ZUnit, "Sets the SR description."),
  "SR.ls": method({ sr }, ZVolumes, "Lists the volumes of an attached SR.", "SR_SCAN"),

  "Volume.create": method({ sr, name: string(), description: string(), size: int64(), sharable: bool() }, ZVolume, "Creates a volume of at least size bytes.", "VDI_CREATE"),
  "Volume.snapshot": method({ sr, key }, ZVolume, "Creates a read-only snapshot.", "VDI_SNAPSHOT"),
  "Volume.clone": method({ sr, key }, ZVolume, "Creates a writable clone.", "VDI_CLONE"),
  "Volume.copy": method({ sr, key, dest_sr: string("sr") }, ZVolume, "Copies the volume into dest_sr.", "VDI_COPY"),
  "Volume.destroy": method({ sr, key }, ZUnit, "Removes the volume.", "VDI_DELETE"),
  "Volume.revert": method({ sr, snapshot: key, key }, ZUnit, "Gives the volume the contents of a snapshot.", "VDI_REVERT"),
  "Volume.set_name": method({ sr, key, new_name: string() }, ZUnit, "Renames the volume."),
  "Volume.set_description": method({ sr, key, new_description: string() }, ZUnit, "Sets the volume description."),
  "Volume.set": method({ sr, key, k: string(), v: string() }, ZUnit, "Stores a metadata pair on the volume."),
  "Volume.unset": method({ sr, key, k: string() }, ZUnit, "Removes a metadata pair."),
  "Volume.resize": method({ sr, key, new_size: int64() }, ZUnit, "Grows the volume to at least new_size bytes.", "VDI_RESIZE"),
  "Volume.stat": method({ sr, key }, ZVolume, "Describes one volume."),
  "Volume.compare": method({ sr, key, key2: key }, ZBlocklist, "Blocks that differ between two volumes."),
  "Volume.similar_content": method({ sr, key }, ZKeyList, "Volumes with similar content."),
  "Volume.enable_cbt": method({ sr, key }, ZUnit, "Enables changed block tracking.", "VDI_CONFIG_CBT"),
  "Volume.disable_cbt": method({ sr, key }, ZUnit, "Disables changed block tracking.", "VDI_CONFIG_CBT"),
  "Volume.data_destroy": method({ sr, key }, ZUnit, "Drops the data, keeping CBT metadata.", "VDI_CONFIG_CBT"),
  "Volume.list_changed_blocks": method(
    { sr, key, key2: key, offset: int64(), length: int64() },
    ZChangedBlocks,
    "Blocks changed between two volumes (length -1: the whole disk).",
    "VDI_CONFIG_CBT",
  ),
  "Volume.compose": method({ sr, key, key2: key }, ZUnit, "Layers the updates of key2 onto key, modifying key2.", "VDI_COMPOSE"),
} as const;

export type MethodName = keyof typeof METHODS;
type Spec<M extends MethodName> = (typeof METHODS)[M];
export type Params<M extends MethodName> = { dbg: string } & { [K in keyof Spec<M>["params"]]: z.output<Spec<M>["params"][K]> };
export type Result<M extends MethodName> = z.output<Spec<M>["result"]>;

export const METHOD_NAMES = Object.keys(METHODS) as MethodName[];
export const INTERFACES = ["Plugin", "Datapath", "Data", "SR", "Volume"] as const;
export type InterfaceName = (typeof INTERFACES)[number];

const byLowerName = new Map(METHOD_NAMES.map((name) => [name.toLowerCase(), name]));

/** Finds a method however it is cased (`Plugin.Query` → `Plugin.query`). */
export function lookupMethod(name: string): MethodName | undefined {
  return byLowerName.get(name.toLowerCase());
}

export function interfaceOf(name: MethodName): InterfaceName {
  return name.slice(0, name.indexOf(".")) as InterfaceName;
}

// Built on first use: a plugin process checks the params of one method only.
const paramSchemas = new Map<MethodName, z.ZodMiniType>();

export function paramsSchema<M extends MethodName>(name: M): z.ZodMiniType<Params<M>> {
  let schema = paramSchemas.get(name);
  if (schema === undefined) {
    schema = struct(`${name} params`, { dbg: string(), ...METHODS[name].params });
    paramSchemas.set(name, schema);
  }
  return schema as z.ZodMiniType<Params<M>>;
}

export function resultSchema<M extends MethodName>(name: M): z.ZodMiniType<Result<M>> {
  return METHODS[name].result as unknown as z.ZodMiniType<Result<M>>;
}
