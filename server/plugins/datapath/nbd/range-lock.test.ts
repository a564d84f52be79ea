import assert from "node:assert/strict";
import { test } from "node:test";
import { RangeLock } from "./range-lock.ts";

test("overlapping ranges wait for each other, in the order they asked; disjoint ones do not", async () => {
  const lock = new RangeLock();
  const events: string[] = [];
  const releaseA = await lock.acquire(0, 100);
  const b = lock.acquire(50, 100).then((release) => (events.push("b"), release));
  const c = lock.acquire(200, 10).then((release) => (events.push("c"), release));
  const d = lock.acquire(120, 10).then((release) => (events.push("d"), release)); // overlaps b only
  (await c)();
  assert.deepEqual(events, ["c"], "a disjoint range is granted at once");
  releaseA();
  const releaseB = await b;
  assert.deepEqual(events, ["c", "b"]);
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(events, ["c", "b"], "d waits for b, which asked first");
  releaseB();
  (await d)();
  assert.deepEqual(events, ["c", "b", "d"]);
});

test("touching ranges do not overlap; a zero-length range still takes its byte", async () => {
  const lock = new RangeLock();
  const release = await lock.acquire(0, 100);
  (await lock.acquire(100, 100))();
  let granted = false;
  const empty = lock.acquire(99, 0).then((r) => ((granted = true), r));
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(granted, false);
  release();
  (await empty)();
});
