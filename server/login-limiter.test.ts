// The login limits: a user name or an address waits after its failures in a row, twice as long each time up
// to the cap; a success clears both; keys are forgotten after an hour, and there are never more than 10,000.
import assert from "node:assert/strict";
import { test } from "node:test";
import { LoginLimiter, tooManyFailures } from "./login-limiter.ts";

const LIMITS = { perUser: 3, perClient: 5, firstWaitMs: 10_000, maxWaitMs: 60_000 };

function limiter() {
  let now = 1_000_000;
  const limits = new LoginLimiter(LIMITS, () => now);
  return { limits, advance: (ms: number) => (now += ms) };
}

test("a user waits after their failures in a row, twice as long after each further one, up to the cap", () => {
  const { limits, advance } = limiter();
  for (let i = 0; i < 2; i++) limits.failed("alice", "10.0.0.1");
  assert.equal(limits.waitSeconds("alice", "10.0.0.1"), 0, "two failures: no wait yet");
  limits.failed("alice", "10.0.0.1");
  assert.equal(limits.waitSeconds("alice", "10.0.0.2"), 10, "the third: 10 s, from any address");
  advance(10_000);
  assert.equal(limits.waitSeconds("alice", "10.0.0.1"), 0);
  limits.failed("alice", "10.0.0.1");
  assert.equal(limits.waitSeconds("alice", "10.0.0.1"), 20);
  for (let i = 0; i < 5; i++) limits.failed("alice", "10.0.0.3");
  assert.equal(limits.waitSeconds("alice", "10.0.0.3"), 60, "capped");
  assert.equal(limits.waitSeconds("bob", "10.0.0.9"), 0, "another user elsewhere does not wait");
  assert.equal(tooManyFailures(7), "Too many failed logins: try again in 7 s.");
});

test("an address waits after its own failures in a row, whatever the names; a success clears the user and the address", () => {
  const { limits } = limiter();
  for (const name of ["a", "b", "c", "d", "e"]) limits.failed(name, "192.0.2.1");
  assert.equal(limits.waitSeconds("f", "192.0.2.1"), 10);
  limits.succeeded("f", "192.0.2.1");
  assert.equal(limits.waitSeconds("f", "192.0.2.1"), 0);
});

test("failures are forgotten after an hour without one, and at most 10,000 keys are kept", () => {
  const { limits, advance } = limiter();
  for (let i = 0; i < 3; i++) limits.failed("carol", "10.0.0.1");
  advance(61 * 60_000);
  limits.failed("carol", "10.0.0.1");
  assert.equal(limits.waitSeconds("carol", "10.0.0.1"), 0, "one failure after an hour is a first one");
  for (let i = 0; i < 3; i++) limits.failed("dave", "10.0.0.5");
  for (let i = 0; i < 12_000; i++) limits.failed(`flood-${i}`, "10.0.0.6");
  assert.equal(limits.waitSeconds("dave", "10.0.0.7"), 0, "the oldest keys went to make room");
});
