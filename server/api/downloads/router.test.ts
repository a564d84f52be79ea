// The Export dialog's procedures against a real toolstack: a task and the route's URL, the task's progress
// through the download to success, and anonymous callers refused.
import assert from "node:assert/strict";
import { test } from "node:test";
import { dataDisk, importTestVm, serveDownloads } from "../../transfers/download/testing.ts";
import { http } from "../../toolstack/transfer/testing.ts";
import { startConsoleUnderTest } from "../testing.ts";

test("downloads.startExport and exportProgress follow an export from its task to success", async (t) => {
  const console = await startConsoleUnderTest(t);
  const server = await serveDownloads();
  t.after(() => server.close());
  const vm = await importTestVm(console.toolstack, "dialog/export", dataDisk(6));
  const started = await console.caller.downloads.startExport({ vmRef: vm.ref, compression: "zstd" });
  assert.match(started.task, /^OpaqueRef:/);
  assert.equal(started.fileName, "dialog_export.xva");
  assert.ok(started.url.startsWith(`/api/download/vm/${vm.uuid}.xva?compression=zstd&task=`));
  assert.equal((await console.caller.downloads.exportProgress({ task: started.task })).state, "waiting");
  const answer = await http(`${server.url}/${started.url.slice("/api/download/vm/".length)}`, { headers: { cookie: console.headers.get("cookie")! } });
  assert.equal(answer.status, 200);
  await console.toolstack.client.waitTask(started.task);
  const done = await console.caller.downloads.exportProgress({ task: started.task });
  assert.equal(done.state, "succeeded");
  assert.equal(done.progress, 1);
  await assert.rejects(console.anonymous.downloads.startExport({ vmRef: vm.ref, compression: "none" }), { code: "UNAUTHORIZED" });
  await assert.rejects(console.caller.downloads.startExport({ vmRef: "OpaqueRef:00000000-0000-0000-0000-000000000000", compression: "none" }), { code: "NOT_FOUND" });
});
