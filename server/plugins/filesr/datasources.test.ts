import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { crc32 } from "node:zlib";
import { setTimeout as sleep } from "node:timers/promises";
import {
  defaultMetricsDir,
  readRrddFile,
  runDatasourceDaemon,
  startDatasourceDaemon,
  writeSrDatasources,
} from "./datasources.ts";
import { detachSr, destroySr, statSr } from "./sr.ts";
import { createVolume } from "./volumes.ts";
import { CLUSTER_SIZE } from "./layout.ts";
import { makeSr, readAt, tempDir, writeAt } from "./test-support.ts";

async function waitFor(condition: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

test("writeSrDatasources writes an rrdd protocol v2 file that reads back", async (t) => {
  const sr = await makeSr(t);
  const dir = tempDir(t, "metrics-");
  const { uuid } = await statSr(sr);
  const { key } = await createVolume(sr, { name: "v", description: "", size: 4 * CLUSTER_SIZE });
  await writeAt(sr, key, 0, Buffer.alloc(2 * CLUSTER_SIZE, 1));
  const first = await writeSrDatasources(sr, dir);
  const file = path.join(dir, `hangar-sr-${uuid}`);
  const raw = fs.readFileSync(file);
  // Layout, independently of the reader: header, CRCs, count, timestamp, values, metadata.
  assert.equal(raw.toString("latin1", 0, 11), "DATASOURCES");
  const count = raw.readUInt32BE(19);
  const values = raw.subarray(23, 23 + 8 + 8 * count);
  assert.equal(raw.readUInt32BE(11), crc32(values));
  const metadataLength = raw.readUInt32BE(23 + values.length);
  const metadata = raw.subarray(27 + values.length);
  assert.equal(metadata.length, metadataLength);
  assert.equal(raw.readUInt32BE(15), crc32(metadata));
  assert.ok(Math.abs(raw.readDoubleBE(23) - Date.now() / 1000) < 60);
  const meta = JSON.parse(metadata.toString()).datasources;
  assert.equal(Object.keys(meta).length, count);
  assert.deepEqual(meta.free_space, {
    description: "Free space on the SR's filesystem",
    owner: `sr ${uuid}`,
    value_type: "int64",
    type: "gauge",
    units: "B",
    min: "0",
    max: "inf",
    default: "true",
  });
  assert.equal(meta.io_read_bytes.type, "derive");
  assert.equal(meta.read_latency.value_type, "float");

  const parsed = readRrddFile(file);
  assert.equal(parsed.values.used_space, 2 * CLUSTER_SIZE);
  assert.ok(parsed.values.free_space! > 0 && parsed.values.free_space! <= parsed.values.total_space!);
  assert.equal(parsed.values.io_write_bytes, 2 * CLUSTER_SIZE);
  assert.equal(parsed.values.iops_write, 1);
  await readAt(sr, key, 0, 1000);
  await writeSrDatasources(sr, dir, first);
  const second = readRrddFile(file);
  assert.equal(second.values.io_read_bytes! - parsed.values.io_read_bytes!, 1000);
  assert.equal(second.values.iops_read! - parsed.values.iops_read!, 1);
  assert.ok(second.values.read_latency! > 0, "one read happened since the previous sample");
  assert.equal(second.values.write_latency, 0, "no write since the previous sample");
  assert.notEqual(second.dataCrc, parsed.dataCrc);

  raw[30] = raw[30]! ^ 0xff;
  fs.writeFileSync(file, raw);
  assert.throws(() => readRrddFile(file), /checksum/);
});

test("defaultMetricsDir follows HANGAR_METRICS_DIR, then HANGAR_DATA_DIR", () => {
  const saved = { metrics: process.env.HANGAR_METRICS_DIR, data: process.env.HANGAR_DATA_DIR };
  try {
    process.env.HANGAR_METRICS_DIR = "/m";
    assert.equal(defaultMetricsDir(), "/m");
    delete process.env.HANGAR_METRICS_DIR;
    process.env.HANGAR_DATA_DIR = "/d";
    assert.equal(defaultMetricsDir(), "/d/metrics");
    delete process.env.HANGAR_DATA_DIR;
    assert.match(defaultMetricsDir(), /\/data\/metrics$/);
  } finally {
    for (const [name, value] of [["HANGAR_METRICS_DIR", saved.metrics], ["HANGAR_DATA_DIR", saved.data]] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
});

test("the datasource daemon refreshes the file until the SR is detached, then removes it", async (t) => {
  const sr = await makeSr(t);
  const dir = tempDir(t, "metrics-");
  const file = path.join(dir, `hangar-sr-${(await statSr(sr)).uuid}`);
  const daemon = runDatasourceDaemon(sr, dir, 30);
  await waitFor(() => fs.existsSync(file), "the datasource file");
  const firstCrc = readRrddFile(file).dataCrc;
  await waitFor(() => {
    try {
      return readRrddFile(file).dataCrc !== firstCrc;
    } catch {
      return false; // caught mid-rewrite: the CRC says so
    }
  }, "a refreshed sample");
  // A second daemon for the same SR leaves at once.
  await runDatasourceDaemon(sr, dir, 30);
  await detachSr(sr);
  await daemon;
  assert.ok(!fs.existsSync(file));
});

test("a background daemon started with startDatasourceDaemon exits when its SR is destroyed", async (t) => {
  const sr = await makeSr(t);
  const dir = tempDir(t, "metrics-");
  const file = path.join(dir, `hangar-sr-${(await statSr(sr)).uuid}`);
  const pid = startDatasourceDaemon(sr, dir, 30);
  t.after(() => {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  });
  await waitFor(() => fs.existsSync(file), "the datasource file");
  await destroySr(sr);
  await waitFor(() => {
    try {
      process.kill(pid, 0);
      return false;
    } catch {
      return true;
    }
  }, "the daemon to exit");
  assert.ok(!fs.existsSync(file));
});
