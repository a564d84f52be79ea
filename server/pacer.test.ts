import assert from "node:assert/strict";
import { test } from "node:test";
import { pacer } from "./pacer.ts";

test("a paced loop of synchronous steps lets a timer run while it goes on", async () => {
  const pace = pacer(5);
  let fired = 0;
  const started = performance.now();
  const timer = setInterval(() => fired++, 1);
  // 100 ms of busy steps: without yields the interval could not fire until the end.
  for (let n = 0; performance.now() - started < 100; n++) {
    const until = performance.now() + 1;
    while (performance.now() < until);
    await pace();
  }
  clearInterval(timer);
  assert.ok(fired >= 5, `the timer fired ${fired} times during the loop`);
});

test("a pacer does not yield before its slice has passed", async () => {
  const pace = pacer(60_000);
  let fired = false;
  setImmediate(() => (fired = true));
  for (let n = 0; n < 1000; n++) await pace();
  assert.equal(fired, false);
});
