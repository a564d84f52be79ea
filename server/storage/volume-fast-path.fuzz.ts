// Fuzz target: the volume fast path never answers differently from the schema. On generated volumes (canonical
// ones, and ones with members renamed, dropped, added, nulled or of the wrong type), whenever the plain check
// accepts a value, ZVolume accepts it too and gives back the same value; and decodeResult answers the same
// with or without the fast path.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { fuzz, type FuzzBudget } from "../fuzz-testing.ts";
import { decodeResult } from "./codec.ts";
import { ZVolume, ZVolumes } from "./types.ts";
import { isCanonicalVolume } from "./volume-fast-path.ts";

const BUDGET: FuzzBudget = { slice: 400, full: 20_000, fullSeconds: 30, caseMs: 2000 };

const odd = fc.oneof(fc.constant(null), fc.constant(undefined), fc.string({ maxLength: 4 }), fc.integer(), fc.double(), fc.boolean(), fc.constant([]), fc.constant({}), fc.constant(2 ** 60), fc.constant("12"), fc.constant(-0));
const canonical = fc.record(
  {
    key: fc.string({ maxLength: 8 }),
    uuid: fc.uuid(),
    name: fc.string({ maxLength: 8 }),
    description: fc.string({ maxLength: 8 }),
    read_write: fc.boolean(),
    sharable: fc.boolean(),
    virtual_size: fc.maxSafeNat(),
    physical_utilisation: fc.maxSafeNat(),
    uri: fc.array(fc.string({ maxLength: 8 }), { maxLength: 3 }),
    keys: fc.dictionary(fc.oneof(fc.string({ maxLength: 6 }), fc.constant("__proto__")), fc.string({ maxLength: 6 }), { maxKeys: 4 }),
    volume_type: fc.constantFrom("Data", "CBT_Metadata", "Data_and_CBT_Metadata", "data", "Other"),
    cbt_enabled: fc.boolean(),
  },
  { requiredKeys: ["key", "name", "description", "read_write", "sharable", "virtual_size", "physical_utilisation", "uri", "keys"] },
);
/** A canonical volume, perhaps edited: a member renamed (case), dropped, added, or given an odd value. */
const volume = fc.tuple(canonical, fc.array(fc.tuple(fc.constantFrom("rename", "drop", "add", "set"), fc.nat(20), odd), { maxLength: 2 })).map(([base, edits]) => {
  const value: Record<string, unknown> = { ...base };
  for (const [edit, at, replacement] of edits) {
    const names = Object.keys(value);
    const name = names[at % Math.max(1, names.length)] ?? "key";
    if (edit === "rename") {
      value[name.toUpperCase()] = value[name];
      delete value[name];
    } else if (edit === "drop") delete value[name];
    else if (edit === "add") value[`extra${at}`] = replacement;
    else value[name] = replacement;
  }
  return value;
});

test("the volume fast path accepts only what ZVolume would give back unchanged", async (t) => {
  await fuzz(t, "volume fast path", BUDGET, fc.array(volume, { maxLength: 4 }), (volumes) => {
    for (const value of volumes) {
      if (!isCanonicalVolume(value)) continue;
      const parsed = ZVolume.safeParse(value);
      assert.ok(parsed.success, `fast path accepted what the schema refuses: ${JSON.stringify(value)}`);
      assert.deepEqual(parsed.data, value);
    }
    // Through the codec: the same answer (or the same refusal) as the schema alone gives.
    const wire = JSON.parse(JSON.stringify(volumes)) as unknown;
    const bySchema = ZVolumes.safeParse(wire);
    let decoded: unknown;
    try {
      decoded = decodeResult("SR.ls", wire, "fuzz");
    } catch {
      assert.equal(bySchema.success, false, "decodeResult refused what the schema accepts");
      return;
    }
    assert.ok(bySchema.success, "decodeResult accepted what the schema refuses");
    assert.deepEqual(decoded, bySchema.data);
  });
});
