// Rate and ETA from a task's progress over time, and how they are shown.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { formatDuration, ProgressMeter, progressBar, progressLine } from "./progress.ts";

describe("progress", () => {
  test("no rate until the progress moves; then the slope over the window, and the time left at it", () => {
    const meter = new ProgressMeter(10_000);
    assert.deepEqual(meter.sample(0, 0), { fraction: 0, rate: null, eta: null });
    assert.deepEqual(meter.sample(0, 1000), { fraction: 0, rate: null, eta: null });
    const moving = meter.sample(0.1, 2000);
    assert.equal(moving.rate, 0.05);
    assert.ok(Math.abs(moving.eta! - 18) < 1e-9);
  });

  test("the rate follows recent speed: samples older than the window stop counting", () => {
    const meter = new ProgressMeter(10_000);
    meter.sample(0, 0);
    meter.sample(0.5, 5_000); // fast start: 10 %/s
    meter.sample(0.5, 20_000); // stalled
    const late = meter.sample(0.6, 30_000); // base is the sample at 20 s: 1 %/s
    assert.ok(Math.abs(late.rate! - 0.01) < 1e-9, String(late.rate));
    assert.ok(Math.abs(late.eta! - 40) < 1e-6);
  });

  test("durations, the bar and the plain line", () => {
    assert.equal(formatDuration(0), "0:00");
    assert.equal(formatDuration(75), "1:15");
    assert.equal(formatDuration(3725), "1:02:05");
    assert.equal(progressBar({ fraction: 0.5, rate: 0.025, eta: 20 }, 20), "[##########----------]  50%  2.5 %/s, ETA 0:20");
    assert.equal(progressBar({ fraction: 0, rate: null, eta: null }, 10), "[----------]   0%");
    assert.equal(progressBar({ fraction: 1, rate: 0.5, eta: 0 }, 4), "[####] 100%  50.0 %/s, ETA 0:00");
    assert.equal(progressLine({ fraction: 0.333, rate: null, eta: null }), "progress 33%");
    assert.equal(progressLine({ fraction: 0.5, rate: 0.01, eta: 50 }), "progress 50% (1.0 %/s, ETA 0:50)");
  });
});
