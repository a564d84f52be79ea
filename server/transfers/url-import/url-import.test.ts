// Import from URL against a real toolstack: the console fetches an XVA over HTTP (a redirect followed) into the
// upload pipeline; loopback and link-local addresses are refused unless the administrator allows them; a
// server that is not there is a message.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { z } from "zod";

const dataDir = mkdtempSync(join(tmpdir(), "hangar-url-import-test-"));
process.env.HANGAR_DATA_DIR = dataDir;
process.on("exit", () => rmSync(dataDir, { recursive: true, force: true }));

const { startConsoleUnderTest } = await import("../../api/testing.ts");
const { collect, diskBytes, MiB, patternBlock, readVdi, testXva } = await import("../../toolstack/transfer/testing.ts");
const { readState, uploadSpoolDir } = await import("../upload/state.ts");
const { forbiddenAddress } = await import("./safe-fetch.ts");
uploadSpoolDir();

async function defaultSr(xapi: Awaited<ReturnType<typeof startConsoleUnderTest>>["xapi"]): Promise<string> {
  const [pool] = await xapi.call(z.array(z.string()), "pool.get_all");
  return xapi.call(z.string(), "pool.get_default_SR", pool);
}

test("addresses the console refuses to fetch from", () => {
  for (const a of ["127.0.0.1", "127.9.9.9", "::1", "169.254.169.254", "fe80::1", "0.0.0.0", "::ffff:127.0.0.1", "224.0.0.1"]) assert.ok(forbiddenAddress(a), a);
  assert.equal(forbiddenAddress("93.184.216.34"), undefined);
});

test("an XVA fetched from a URL (through a redirect) is imported while it downloads; loopback refused unless allowed", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const blocks = new Map<number, Buffer>([[0, patternBlock(1)], [5, patternBlock(2)], [9, patternBlock(3)]]);
  const disk = { size: 12 * MiB, blocks };
  const xva = await collect(testXva({ name: "fetched from a URL", disks: [disk] }));
  const server = createServer((request, response) => {
    if (request.url === "/go") {
      response.writeHead(302, { location: "/images/web.xva" });
      response.end();
      return;
    }
    response.writeHead(200, { "content-length": xva.length, "content-type": "application/octet-stream" });
    // In two parts, so that the import starts before the last byte.
    response.write(xva.subarray(0, MiB));
    setTimeout(() => response.end(xva.subarray(MiB)), 300);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => server.close());
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/go`;
  const sr = await defaultSr(cu.xapi);

  delete process.env.HANGAR_IMPORT_URL_ALLOW_PRIVATE;
  await assert.rejects(cu.caller.transfers.importFromUrl({ url, sr }), /loopback address/);
  await assert.rejects(cu.caller.transfers.importFromUrl({ url: "ftp://example.com/x.xva", sr }), /http/);
  await assert.rejects(cu.anonymous.transfers.importFromUrl({ url, sr }), /Log in/);

  process.env.HANGAR_IMPORT_URL_ALLOW_PRIVATE = "1";
  t.after(() => delete process.env.HANGAR_IMPORT_URL_ALLOW_PRIVATE);
  const { id } = await cu.caller.transfers.importFromUrl({ url, sr });
  const deadline = Date.now() + 30_000;
  let state = await readState(id);
  while (state?.status !== "done" && state?.status !== "failed" && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    state = await readState(id);
  }
  assert.equal(state?.status, "done", state?.error ?? "");
  assert.equal(state.fileName, "web.xva");
  const listed = await cu.caller.transfers.uploads({ ids: [id] });
  assert.equal(listed.uploads[0]?.source, "url");
  const vbds = await cu.xapi.call(z.array(z.string()), "VM.get_VBDs", state.vms[0]);
  let vdi: string | undefined;
  for (const vbd of vbds) if ((await cu.xapi.call(z.string(), "VBD.get_type", vbd)) === "Disk") vdi = await cu.xapi.call(z.string(), "VBD.get_VDI", vbd);
  assert.deepEqual(await readVdi(cu.toolstack.service.ts, vdi!, disk), diskBytes(disk));
});

test("a URL that does not answer is a message", async (t) => {
  const cu = await startConsoleUnderTest(t);
  process.env.HANGAR_IMPORT_URL_ALLOW_PRIVATE = "1";
  t.after(() => delete process.env.HANGAR_IMPORT_URL_ALLOW_PRIVATE);
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
  const port = (closed.address() as { port: number }).port;
  await new Promise((r) => closed.close(r));
  await assert.rejects(cu.caller.transfers.importFromUrl({ url: `http://127.0.0.1:${port}/vm.xva`, sr: await defaultSr(cu.xapi) }), /cannot be reached/);
});

test("an import from URL can be cancelled mid-download: the import is undone, the spool goes", async (t) => {
  const cu = await startConsoleUnderTest(t);
  process.env.HANGAR_IMPORT_URL_ALLOW_PRIVATE = "1";
  t.after(() => delete process.env.HANGAR_IMPORT_URL_ALLOW_PRIVATE);
  const xva = await collect(testXva({ name: "cancelled download", disks: [{ size: 8 * MiB, blocks: new Map([[0, patternBlock(9)]]) }] }));
  // Sends the first MiB, then holds the rest.
  const server = createServer((_request, response) => {
    response.writeHead(200, { "content-length": xva.length });
    response.write(xva.subarray(0, MiB));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const { id } = await cu.caller.transfers.importFromUrl({ url: `http://127.0.0.1:${(server.address() as { port: number }).port}/slow.xva`, sr: await defaultSr(cu.xapi) });
  let state = await readState(id);
  for (let i = 0; i < 100 && state?.task === null; i++) {
    await new Promise((r) => setTimeout(r, 100));
    state = await readState(id);
  }
  assert.ok(state?.task);
  await cu.caller.transfers.cancel({ id });
  assert.equal((await readState(id))?.status, "cancelled");
  for (let i = 0; i < 100 && (await cu.xapi.call(z.string(), "task.get_status", state.task)) === "pending"; i++) await new Promise((r) => setTimeout(r, 100));
  assert.notEqual(await cu.xapi.call(z.string(), "task.get_status", state.task), "pending");
  await assert.rejects(cu.caller.transfers.cancel({ id }), /already ended/);
});

test("after a console restart an import from URL goes on: the rest fetched with Range, imported once, the same bytes", async (t) => {
  const cu = await startConsoleUnderTest(t);
  process.env.HANGAR_IMPORT_URL_ALLOW_PRIVATE = "1";
  t.after(() => delete process.env.HANGAR_IMPORT_URL_ALLOW_PRIVATE);
  const blocks = new Map<number, Buffer>([[0, patternBlock(4)], [3, patternBlock(5)], [7, patternBlock(6)]]);
  const disk = { size: 8 * MiB, blocks };
  const xva = await collect(testXva({ name: "outlives a console restart", disks: [disk] }));
  const ranges: Array<string | undefined> = [];
  // The first answer sends 1 MiB and holds the rest (the console dies meanwhile); later ones serve ranges.
  const server = createServer((request, response) => {
    ranges.push(request.headers.range);
    const match = /^bytes=(\d+)-$/.exec(request.headers.range ?? "");
    if (match === null) {
      response.writeHead(200, { "content-length": xva.length, "accept-ranges": "bytes" });
      response.write(xva.subarray(0, MiB));
      return;
    }
    const from = Number(match[1]);
    response.writeHead(206, { "content-length": xva.length - from, "content-range": `bytes ${from}-${xva.length - 1}/${xva.length}` });
    response.end(xva.subarray(from));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const { id } = await cu.caller.transfers.importFromUrl({ url: `http://127.0.0.1:${(server.address() as { port: number }).port}/vm.xva`, sr: await defaultSr(cu.xapi) });
  const { spoolFile } = await import("../upload/state.ts");
  const { statSync } = await import("node:fs");
  for (let i = 0; i < 100 && ((await readState(id))?.task === null || (statSync(spoolFile(id), { throwIfNoEntry: false })?.size ?? 0) < MiB); i++) await new Promise((r) => setTimeout(r, 100));
  const first = await readState(id);
  assert.ok(first?.task);
  // The console process goes away: its download and its import stop where they are, without a word to anyone.
  (await import("../testing.ts")).dropConsoleProcess();
  // The console starts again.
  const { resumeUrlImports } = await import("./import-url.ts");
  await resumeUrlImports();
  let state = await readState(id);
  for (let i = 0; i < 300 && state?.status !== "done" && state?.status !== "failed"; i++) {
    await new Promise((r) => setTimeout(r, 100));
    state = await readState(id);
  }
  assert.equal(state?.status, "done", state?.error ?? "");
  assert.deepEqual(ranges, [undefined, `bytes=${MiB}-`]);
  assert.equal((await cu.xapi.call(z.array(z.string()), "VM.get_by_name_label", "outlives a console restart")).length, 1);
  assert.notEqual(await cu.xapi.call(z.string(), "task.get_status", first.task), "pending");
  const vbds = await cu.xapi.call(z.array(z.string()), "VM.get_VBDs", state.vms[0]);
  let vdi: string | undefined;
  for (const vbd of vbds) if ((await cu.xapi.call(z.string(), "VBD.get_type", vbd)) === "Disk") vdi = await cu.xapi.call(z.string(), "VBD.get_VDI", vbd);
  assert.deepEqual(await readVdi(cu.toolstack.service.ts, vdi!, disk), diskBytes(disk));
});
