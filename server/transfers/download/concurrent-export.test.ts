// Two downloads of a VM started in the same second are the same export (the toolstack's ETag carries the second,
// and names the spool): one producer writes its spool, every download gets its bytes. Found by the console fuzz
// (e2e/console.fuzz.spec.ts): two GETs at once answered 500 ("ENOENT: rename …json.<pid>.tmp"), two producers
// writing one spool.
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { startConsoleUnderTest } from "../../api/testing.ts";
import { http } from "../../toolstack/transfer/testing.ts";
import { listSpools } from "./spool.ts";
import { dataDisk, importTestVm, serveDownloads } from "./testing.ts";

test("downloads of a VM started at once share one export, each with all its bytes", { timeout: 120_000 }, async (t) => {
  const cu = await startConsoleUnderTest(t);
  const server = await serveDownloads();
  t.after(() => server.close());
  const cookie = cu.headers.get("cookie")!;
  const vm = await importTestVm(cu.toolstack, "twice", dataDisk(4));
  const url = `${server.url}/${vm.uuid}.xva?compression=none`;

  for (let round = 0; round < 3; round++) {
    const answers = await Promise.all([1, 2, 3, 4].map(() => http(url, { headers: { cookie } })));
    for (const answer of answers) assert.equal(answer.status, 200, answer.body.toString().slice(0, 300));
    // Those with the same ETag are the same export: the same bytes.
    for (const a of answers) for (const b of answers) if (a.headers.etag === b.headers.etag) assert.ok(a.body.equals(b.body), `two downloads of ${String(a.headers.etag)} differ`);
    // Every spool the downloads made is complete and has its export's length.
    for (const entry of await listSpools()) {
      const sizes = answers.filter((a) => a.headers.etag === entry.meta.etag).map((a) => a.body.length);
      if (sizes.length > 0) assert.deepEqual([entry.meta.size, entry.bytes], [sizes[0], sizes[0]]);
    }
  }
  // The exports the toolstack began for the downloads that followed another end too (their answers were let go).
  const deadline = Date.now() + 30_000;
  for (;;) {
    const tasks = Object.values(await cu.xapi.records("task", z.looseObject({ status: z.string(), name_label: z.string() })));
    const running = tasks.filter((task) => task.status === "pending" || task.status === "cancelling");
    if (running.length === 0) break;
    assert.ok(Date.now() < deadline, `tasks still running: ${running.map((task) => task.name_label).join(", ")}`);
    await sleep(100);
  }
});
