import assert from "node:assert/strict";
import { test } from "node:test";
import { formatBytes, formatDuration, formatPercent, formatRate, formatRelativeTime, formatTimeLeft } from "./format.ts";

test("sizes in binary units, rates in decimal ones, as storage people read them", () => {
  assert.equal(formatBytes(0), "0 B");
  assert.equal(formatBytes(512), "512 B");
  assert.equal(formatBytes(1536), "1.5 KiB");
  assert.equal(formatBytes(10 * 1024 ** 3), "10 GiB");
  assert.equal(formatBytes(12.44 * 1024 ** 3), "12.4 GiB");
  assert.equal(formatBytes(250 * 1024 ** 4), "250 TiB");
  assert.equal(formatBytes(Number.NaN), "—");
  assert.equal(formatRate(85_200_000), "85.2 MB/s");
  assert.equal(formatRate(999), "999 B/s");
  assert.equal(formatRate(-1), "—");
});

test("durations, time left and relative times", () => {
  assert.equal(formatDuration(45), "45 s");
  assert.equal(formatDuration(180), "3 min");
  assert.equal(formatDuration(3900), "1 h 5 min");
  assert.equal(formatDuration(7200), "2 h");
  assert.equal(formatDuration(3 * 86400 + 3 * 3600), "3 d 3 h");
  assert.equal(formatTimeLeft(30), "less than a minute left");
  assert.equal(formatTimeLeft(180), "3 min left");
  assert.equal(formatTimeLeft(Number.POSITIVE_INFINITY), "");
  const now = Date.parse("2026-11-25T12:00:00Z");
  assert.equal(formatRelativeTime(now - 10_000, now), "just now");
  assert.equal(formatRelativeTime(now - 120_000, now), "2 min ago");
  assert.equal(formatRelativeTime("2026-11-25T09:00:00Z", now), "3 h ago");
  assert.equal(formatPercent(0.423), "42%");
  assert.equal(formatPercent(0.051), "5.1%");
  assert.equal(formatPercent(1), "100%");
});
