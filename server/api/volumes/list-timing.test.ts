// volumes.list of an SR of 10,000 volumes, timed over HTTP as the browser calls it (SR.ls in the plugin
// process, its decoding, the rows, the JSON). The volumes are made straight through the file SR library:
// 10,000 plugin calls would take minutes. Set HANGAR_VOLUMES_TIMING=<n> for another count.
//
// Measured on the 2-core machine (2026-11, load ~2): 268-274 ms a call once warm, 3.3 MiB of JSON; of that
// SR.ls in the plugin process ~210 ms and its decoding ~25 ms, the rows, their output check and the JSON
// ~40 ms. The first call, or one after the plugin registry's 10 s cache and the toolstack's 2 s SR.stat
// cache have lapsed (the table polls every 10 s), costs ~480 ms: a plugin scan and an SR.stat on top.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import { z } from "zod";
import { disconnectSr } from "../../plugins/filesr/db.ts";
import { createVolume } from "../../plugins/filesr/index.ts";
import { appRouter } from "../root.ts";
import { startConsoleUnderTest } from "../testing.ts";
import { createTRPCContext } from "../trpc.ts";

const COUNT = Number(process.env.HANGAR_VOLUMES_TIMING ?? 10_000);

test(`volumes.list of ${COUNT} volumes answers over HTTP in well under a second`, { timeout: 300_000 }, async (t) => {
  const { xapi, headers } = await startConsoleUnderTest(t);
  const dir = await mkdtemp(join(tmpdir(), "hangar-volumes-big-"));
  const [host] = await xapi.call(z.array(z.string()), "host.get_all");
  const path = join(dir, "sr");
  const srRef = await xapi.call(z.string(), "SR.create", host, { path }, "0", "big", "", "file", "user", false, {});
  t.after(async () => {
    await xapi.call(z.unknown(), "SR.destroy", srRef).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });
  const started = performance.now();
  try {
    for (let i = 0; i < COUNT; i++) await createVolume(path, { name: `volume ${i}`, description: "timing", size: (1 + ((i * 7919) % 1000)) * 1024 ** 2 });
  } finally {
    disconnectSr(path);
  }
  const made = performance.now() - started;
  // The library never yielded: let the client notice keep-alive connections the service closed meanwhile.
  await sleep(100);

  const input = encodeURIComponent(JSON.stringify({ srRef }));
  const timings: number[] = [];
  let bytes = 0;
  for (let run = 0; run < 5; run++) {
    const begin = performance.now();
    const response = await fetchRequestHandler({
      endpoint: "/api/trpc",
      req: new Request(`http://hangar.test/api/trpc/volumes.list?input=${input}`, { headers }),
      router: appRouter,
      createContext: () => createTRPCContext({ headers }),
    });
    const body = await response.text();
    timings.push(performance.now() - begin);
    assert.equal(response.status, 200, body.slice(0, 300));
    bytes = body.length;
    if (run === 0) assert.equal((JSON.parse(body) as { result: { data: { volumes: unknown[] } } }).result.data.volumes.length, COUNT);
  }
  const sorted = timings.toSorted((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)]!;
  t.diagnostic(`made ${COUNT} volumes in ${(made / 1000).toFixed(1)} s; volumes.list: ${timings.map((ms) => ms.toFixed(0)).join(", ")} ms (median ${median.toFixed(0)} ms), ${(bytes / 1024 / 1024).toFixed(1)} MiB of JSON`);
  // The target is 300 ms on the 2-core machine; the bound leaves room for a busy one.
  assert.ok(median < 1000, `median ${median.toFixed(0)} ms`);
});
