import assert from "node:assert/strict";
import fs from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test, type TestContext } from "node:test";
import { encodeRrdd, type RrddDatasource } from "../storage/rrdd.ts";
import { Ring } from "./ring.ts";
import { DatasourceSampler, datasourceFile, type SamplerOptions } from "./sampler.ts";

const URI = "xeno+shm:///hangar-sr-test";

function setUp(t: TestContext, options: Partial<SamplerOptions> = {}) {
  const dir = fs.mkdtempSync(path.join(tmpdir(), "hangar-sampler-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  let now = 1_000_000_000_000;
  const sampler = new DatasourceSampler({ metricsDir: dir, timer: false, now: () => now, ...options });
  const file = path.join(dir, "hangar-sr-test");
  return {
    dir,
    file,
    sampler,
    /** Moves the sampler's clock to `seconds` after the start. */
    at: (seconds: number) => {
      now = 1_000_000_000_000 + seconds * 1000;
    },
    /** Rewrites the file in place (as the plugin's daemon does) with a sample taken `seconds` after the start. */
    write: (seconds: number, counters: { read: number; free: number; ops?: number }) => {
      const sources: RrddDatasource[] = [
        { name: "free_space", value: counters.free, valueType: "int64", type: "gauge", units: "B", description: "Free space" },
        { name: "io_read_bytes", value: counters.read, valueType: "int64", type: "derive", units: "B/s", description: "Read throughput" },
        { name: "iops_read", value: counters.ops ?? 0, valueType: "int64", type: "derive", units: "requests", description: "Read operations" },
        { name: "read_latency", value: 1.5, valueType: "float", type: "gauge", units: "ms", description: "Read latency" },
      ];
      const bytes = encodeRrdd(1_000_000_000 + seconds, "sr test", sources);
      const fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT);
      fs.writeSync(fd, bytes, 0, bytes.length, 0);
      fs.ftruncateSync(fd, bytes.length);
      fs.closeSync(fd);
    },
  };
}

test("derive counters become per-second rates; gauges pass as read; an unchanged file adds no sample", async (t) => {
  const { sampler, write, at } = setUp(t);
  write(0, { read: 1000, free: 5000, ops: 10 });
  await sampler.watch("sr", { name: "SR", datasources: async () => [URI] });
  write(5, { read: 11_000, free: 4000, ops: 60 });
  at(5);
  await sampler.tick();
  await sampler.tick(); // the file did not change: no new sample
  const series = sampler.series("sr", 300)!;
  assert.equal(series.error, null);
  assert.deepEqual(
    series.samples.map((s) => s.t),
    [1_000_000_000_000, 1_000_000_005_000],
  );
  assert.deepEqual(series.samples[0]!.values, { free_space: 5000, io_read_bytes: null, iops_read: null, read_latency: 1.5 });
  assert.deepEqual(series.samples[1]!.values, { free_space: 4000, io_read_bytes: 2000, iops_read: 10, read_latency: 1.5 });
  const units = Object.fromEntries(series.datasources.map((d) => [d.name, [d.kind, d.units]]));
  assert.deepEqual(units, { free_space: ["gauge", "B"], io_read_bytes: ["rate", "B/s"], iops_read: ["rate", "requests/s"], read_latency: ["gauge", "ms"] });

  // A counter that goes backwards was reset: no rate for that sample, the next one counts again.
  write(10, { read: 500, free: 4000 });
  at(10);
  await sampler.tick();
  write(15, { read: 5500, free: 4000 });
  at(15);
  await sampler.tick();
  assert.deepEqual(
    sampler.series("sr", 300)!.samples.slice(2).map((s) => s.values.io_read_bytes),
    [null, 1000],
  );
});

test("the ring keeps only its capacity; a range answers the samples inside it", async (t) => {
  const ring = new Ring<number>(3);
  for (const n of [1, 2, 3, 4, 5]) ring.push(n);
  assert.deepEqual([ring.toArray(), ring.size, ring.last()], [[3, 4, 5], 3, 5]);

  const { sampler, write, at } = setUp(t, { capacity: 4 });
  write(0, { read: 0, free: 1 });
  await sampler.watch("sr", { name: "SR", datasources: async () => [URI] });
  for (const seconds of [100, 200, 300, 400, 500]) {
    write(seconds, { read: seconds, free: 1 });
    at(seconds);
    await sampler.tick();
  }
  assert.deepEqual(
    sampler.series("sr", 3600)!.samples.map((s) => (s.t - 1_000_000_000_000) / 1000),
    [200, 300, 400, 500],
    "the oldest samples made room",
  );
  assert.deepEqual(
    sampler.series("sr", 150)!.samples.map((s) => (s.t - 1_000_000_000_000) / 1000),
    [400, 500],
  );
  assert.equal(sampler.series("other", 300), undefined);
});

test("a torn or invalid file: old samples stay, the error is in words, sampling resumes when the file is whole again", async (t) => {
  const { sampler, write, at, file } = setUp(t);
  write(0, { read: 0, free: 1 });
  await sampler.watch("sr", { name: "SR 1", datasources: async () => [URI] });

  // Rewritten under the reader: garbage now, whole again 30 ms later (the reader tries again).
  fs.writeFileSync(file, Buffer.from("DATASOURCES\0\0\0\0 torn"));
  setTimeout(() => write(5, { read: 500, free: 1 }), 30);
  at(5);
  await sampler.tick();
  assert.equal(sampler.series("sr", 300)!.error, null);
  assert.equal(sampler.series("sr", 300)!.samples.length, 2);

  const raw = fs.readFileSync(file);
  raw[30] = raw[30]! ^ 0xff;
  fs.writeFileSync(file, raw);
  at(10);
  await sampler.tick();
  const broken = sampler.series("sr", 300)!;
  assert.match(broken.error ?? "", /^Sampling "SR 1" failed: .*checksum mismatch/);
  assert.equal(broken.samples.length, 2, "the samples before stay");

  fs.rmSync(file);
  at(15);
  await sampler.tick();
  assert.match(sampler.series("sr", 300)!.error ?? "", /datasource file is missing/);

  write(20, { read: 1500, free: 1 });
  at(20);
  await sampler.tick();
  const healed = sampler.series("sr", 300)!;
  assert.equal(healed.error, null);
  assert.deepEqual(healed.samples.at(-1)!.values.io_read_bytes, 1000 / 15);
});

test("a file nobody refreshes any more (its writer died) is reported after four intervals; a new write clears it", async (t) => {
  const { sampler, write, at } = setUp(t);
  write(0, { read: 0, free: 1 });
  await sampler.watch("sr", { name: "SR", datasources: async () => [URI] });
  at(15);
  await sampler.tick();
  assert.equal(sampler.series("sr", 300)!.error, null, "a late write or two is no failure");
  at(25);
  await sampler.tick();
  assert.match(sampler.series("sr", 300)!.error ?? "", /No new samples from "SR" for 25 s/);
  write(30, { read: 0, free: 1 });
  at(30);
  await sampler.tick();
  assert.equal(sampler.series("sr", 300)!.error, null);
});

test("an SR that stops answering is dropped after a while; one no request names is dropped when idle", async (t) => {
  const { sampler, write, at } = setUp(t, { dropFailingAfterMs: 60_000, idleMs: 3600_000, refreshMs: 0 });
  write(0, { read: 0, free: 1 });
  let gone = false;
  await sampler.watch("sr", {
    name: "SR",
    datasources: async () => {
      if (gone) throw new Error("SR.stat: the SR does not exist");
      return [URI];
    },
  });
  await sampler.watch("idle", { name: "Idle", datasources: async () => [URI] });
  gone = true;
  at(5);
  await sampler.tick();
  assert.match(sampler.series("sr", 300)!.error ?? "", /does not exist/);
  at(70);
  await sampler.tick();
  assert.deepEqual(sampler.watching(), ["idle"]);
  at(3700);
  await sampler.tick();
  assert.deepEqual(sampler.watching(), []);
});

test("datasource URIs: xeno+shm:///<uid> in the metrics dir only", () => {
  assert.equal(datasourceFile("/m", "xeno+shm:///hangar-sr-1"), "/m/hangar-sr-1");
  for (const uri of ["xeno+shm:///../etc/passwd", "xeno+shm:///a/b", "xeno+shm:///%2e%2e", "file:///etc/passwd", "xeno+shm:///", "xeno+shm:///.hidden"]) {
    assert.throws(() => datasourceFile("/m", uri), /unsupported datasource URI/, uri);
  }
});
