// network.*: networks as metadata (no bridges are made); VIFs link VMs to them. The first start makes one.
import { type FieldSpec, fieldSetter, mapFieldCalls, parseCreateRecord, zRecordArg } from "../accessors.ts";
import { objectErrors } from "../object-errors.ts";
import type { Toolstack } from "../toolstack.ts";
import { method } from "../methods.ts";
import { zBool, zInt, zRef, zString, zStringList, zStringMap } from "../../xenapi/params.ts";
import { objectGetters } from "./getters.ts";

const NETWORK_CREATE: FieldSpec = {
  name_label: [zString, ""],
  name_description: [zString, ""],
  MTU: [zInt, 1500],
  other_config: [zStringMap, {}],
  bridge: [zString, ""],
  managed: [zBool, true],
  tags: [zStringList, []],
};

const NETWORK_FIELDS = [
  "uuid",
  ...Object.keys(NETWORK_CREATE),
  "allowed_operations",
  "current_operations",
  "VIFs",
  "PIFs",
  "blobs",
  "default_locking_mode",
  "assigned_ips",
  "purpose",
];

/** A network record from the fields create takes; a bridge name is made when none is given. */
export async function createNetwork(ts: Toolstack, args: Record<string, unknown>): Promise<string> {
  const fields = parseCreateRecord(NETWORK_CREATE, args);
  if (fields.bridge === "") fields.bridge = `xapi${await ts.objects.count("network")}`;
  const record = {
    uuid: crypto.randomUUID(),
    ...fields,
    allowed_operations: [],
    current_operations: {},
    VIFs: [],
    PIFs: [],
    blobs: {},
    default_locking_mode: "unlocked",
    assigned_ips: {},
    purpose: [],
  };
  return (await ts.objects.create("network", record)).ref;
}

export const networkCalls = [
  ...objectGetters("network", NETWORK_FIELDS),
  method("network.create", [["args", zRecordArg]], ({ ts }, args) => createNetwork(ts, args)),
  method("network.destroy", [["self", zRef]], async ({ ts }, ref) => {
    const vifs = (await ts.objects.get("network", ref)).record.VIFs as string[];
    if (vifs.length > 0) throw objectErrors.networkContainsVif(vifs);
    await ts.objects.destroy("network", ref);
  }),
  fieldSetter("network", "name_label", zString),
  fieldSetter("network", "name_description", zString),
  fieldSetter("network", "MTU", zInt),
  ...mapFieldCalls("network", "other_config"),
];

/** First start: the default network VIFs can join. */
export async function startNetworks(ts: Toolstack): Promise<void> {
  if ((await ts.objects.count("network")) > 0) return;
  await createNetwork(ts, { name_label: "Pool-wide network", name_description: "Hangar's default network", bridge: "xenbr0" });
}
