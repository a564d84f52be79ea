import assert from "node:assert/strict";
import { test } from "node:test";
import { randomBytes, randomUUID } from "./random.ts";

test("randomUUID makes distinct version 4 uuids", () => {
  const seen = new Set<string>();
  for (let i = 0; i < 1000; i++) {
    const uuid = randomUUID();
    assert.match(uuid, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    seen.add(uuid);
  }
  assert.equal(seen.size, 1000);
});

test("randomBytes gives the length asked for, and not the same bytes twice", () => {
  assert.equal(randomBytes(0).length, 0);
  assert.equal(randomBytes(100_000).length, 100_000);
  assert.notDeepEqual(randomBytes(16), randomBytes(16));
});
