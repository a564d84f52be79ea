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

test("a VM as an OVA and a disk as VMDK, whole or since a snapshot: tasks, URLs and resumable downloads through the console", async (t) => {
  const console = await startConsoleUnderTest(t);
  const server = await serveDownloads();
  t.after(() => server.close());
  const cookie = console.headers.get("cookie")!;
  const vm = await importTestVm(console.toolstack, "ova/export", dataDisk(5));
  const ova = await console.caller.downloads.startExport({ vmRef: vm.ref, compression: "none", format: "ova" });
  assert.equal(ova.fileName, "ova_export.ova");
  assert.ok(ova.url.startsWith(`/api/download/vm/${vm.uuid}.ova?task=`), ova.url);
  const whole = await http(`${server.url}/${ova.url.slice("/api/download/vm/".length)}`, { headers: { cookie } });
  assert.equal(whole.status, 200);
  assert.equal(whole.body.subarray(257, 262).toString(), "ustar");
  assert.match(whole.body.subarray(0, 100).toString("latin1"), /^ova_export\.ovf\0/);
  await console.toolstack.client.waitTask(ova.task);
  const etag = String(whole.headers.etag);
  const resumed = await http(`${server.url}/${vm.uuid}.ova`, { headers: { cookie, range: "bytes=1000-", "if-range": etag } });
  assert.equal(resumed.status, 206);
  assert.ok(resumed.body.equals(whole.body.subarray(1000)));

  const vbds = await console.toolstack.client.call<string[]>("VM.get_VBDs", vm.ref);
  const vdi = await console.toolstack.client.call<string>("VBD.get_VDI", vbds[0]);
  const vdiUuid = await console.toolstack.client.call<string>("VDI.get_uuid", vdi);
  const snapshot = await console.toolstack.client.call<string>("VDI.snapshot", vdi, {});
  const snapshotUuid = await console.toolstack.client.call<string>("VDI.get_uuid", snapshot);
  const disk = await console.caller.downloads.startDiskExport({ vdiUuid, format: "vmdk" });
  assert.ok(disk.url.startsWith(`/api/download/vdi/${vdiUuid}.vmdk?task=`), disk.url);
  const vdiBase = server.url.replace(/\/vm$/, "/vdi");
  const image = await http(`${vdiBase}/${disk.url.slice("/api/download/vdi/".length)}`, { headers: { cookie } });
  assert.equal(image.status, 200);
  assert.equal(image.body.subarray(0, 4).toString("latin1"), "KDMV");
  const delta = await console.caller.downloads.startDiskExport({ vdiUuid, format: "qcow2", baseUuid: snapshotUuid });
  assert.equal(delta.fileName, `${vdiUuid}.qcow2`);
  const deltaImage = await http(`${vdiBase}/${delta.url.slice("/api/download/vdi/".length)}`, { headers: { cookie } });
  assert.equal(deltaImage.status, 200);
  assert.equal(deltaImage.body.subarray(0, 4).toString("latin1"), "QFI\xfb");
  assert.match(deltaImage.body.toString("latin1", 0, 4096), new RegExp(`${snapshotUuid}\\.qcow2`), "a qcow2 backed by the base's file");
  const wrong = await http(`${vdiBase}/${vdiUuid}.xva`, { headers: { cookie } });
  assert.equal(wrong.status, 404);
  assert.match(wrong.body.toString(), /\/api\/download\/vdi\/<VDI UUID>\.raw, \.vhd, \.qcow2 or \.vmdk/);
});
