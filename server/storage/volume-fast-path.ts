// SR.ls answers carry thousands of volumes, and zod checks each in ~15–30 µs (a struct of pipes and transforms):
// 160–300 ms for 10,000, most of a console listing's CPU. A volume already in canonical form (the members by
// their own names, every value of its type, no null for an absent option, variant tags spelt as declared) is
// one the schema would give back unchanged, so a plain check accepts it as it is; anything else, even one
// volume of a list, goes through the schema for its exact answer or its exact error.
const MEMBERS = new Set(["key", "uuid", "name", "description", "read_write", "sharable", "virtual_size", "physical_utilisation", "uri", "keys", "volume_type", "cbt_enabled"]);
const REQUIRED = ["key", "name", "description", "read_write", "sharable", "virtual_size", "physical_utilisation", "uri", "keys"] as const;
const VOLUME_TYPES = new Set(["Data", "CBT_Metadata", "Data_and_CBT_Metadata"]);

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** True when the schema (ZVolume) would answer `value` itself, member for member. */
export function isCanonicalVolume(value: unknown): boolean {
  if (!isRecord(value) || Object.getPrototypeOf(value) !== Object.prototype) return false;
  let members = 0;
  for (const key in value) {
    if (!Object.hasOwn(value, key) || !MEMBERS.has(key)) return false;
    members++;
  }
  for (const key of REQUIRED) if (!Object.hasOwn(value, key)) return false;
  const { key, uuid, name, description, read_write, sharable, virtual_size, physical_utilisation, uri, keys, volume_type, cbt_enabled } = value;
  if (typeof key !== "string" || typeof name !== "string" || typeof description !== "string") return false;
  if (typeof read_write !== "boolean" || typeof sharable !== "boolean") return false;
  if (!Number.isSafeInteger(virtual_size) || !Number.isSafeInteger(physical_utilisation)) return false;
  if (!Array.isArray(uri) || !uri.every((u) => typeof u === "string")) return false;
  if (!isRecord(keys) || Object.getPrototypeOf(keys) !== Object.prototype) return false;
  for (const k in keys) if (!Object.hasOwn(keys, k) || k === "__proto__" || typeof keys[k] !== "string") return false;
  if ("uuid" in value && typeof uuid !== "string") return false;
  if ("volume_type" in value && !(typeof volume_type === "string" && VOLUME_TYPES.has(volume_type))) return false;
  if ("cbt_enabled" in value && typeof cbt_enabled !== "boolean") return false;
  return members >= REQUIRED.length;
}

/** True when every member of `value` (a list) is a canonical volume. */
export function isCanonicalVolumeList(value: unknown): boolean {
  return Array.isArray(value) && value.every(isCanonicalVolume);
}
