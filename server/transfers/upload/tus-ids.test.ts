// An upload's id names its spool; the spool's neighbours (tus's `<id>.json`, the console's `<id>.import-state`)
// are no uploads: a tus request naming one is refused (404) and touches nothing. Found by the console fuzz
// (e2e/console.fuzz.spec.ts): `DELETE /api/upload/<id>.json` removed another upload's tus record (HTTP 500),
// and `<id>.import-state` its import's state, past the owner check (which reads the state of upload ids only).
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { z } from "zod";

const dataDir = mkdtempSync(join(tmpdir(), "hangar-tus-ids-test-"));
process.env.HANGAR_DATA_DIR = dataDir;
process.on("exit", () => rmSync(dataDir, { recursive: true, force: true }));

const { startConsoleUnderTest } = await import("../../api/testing.ts");
const { serveUploads } = await import("./testing.ts");
const { readState, spoolFile } = await import("./state.ts");
const { cancelPipeline } = await import("./pipeline.ts");
(await import("./state.ts")).uploadSpoolDir();

const { url: BASE } = await serveUploads();
const b64 = (s: string) => Buffer.from(s).toString("base64");

function tus(method: string, url: string, headers: Headers, extra: Record<string, string> = {}): Promise<Response> {
  const h = new Headers(headers);
  h.set("tus-resumable", "1.0.0");
  for (const [k, v] of Object.entries(extra)) h.set(k, v);
  return fetch(url, { method, headers: h });
}

test("a tus request naming an upload's other files (its .json, its .import-state) is refused and touches nothing", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const [pool] = await cu.xapi.call(z.array(z.string()), "pool.get_all");
  const sr = await cu.xapi.call(z.string(), "pool.get_default_SR", pool);
  const created = await tus("POST", BASE, cu.headers, { "upload-length": String(1024 * 1024), "upload-metadata": `filename ${b64("victim.xva")},sr ${b64(sr)}` });
  assert.equal(created.status, 201);
  const id = created.headers.get("location")!.split("/").pop()!;
  t.after(() => cancelPipeline(id));
  const files = [spoolFile(id), `${spoolFile(id)}.json`, `${spoolFile(id)}.import-state`];

  for (const suffix of [".json", ".import-state"]) {
    for (const method of ["DELETE", "HEAD", "PATCH", "GET"]) {
      const extra: Record<string, string> = method === "PATCH" ? { "upload-offset": "0", "content-type": "application/offset+octet-stream" } : {};
      const answer = await tus(method, `${BASE}/${id}${suffix}`, cu.headers, extra);
      assert.equal(answer.status, 404, `${method} ${suffix}: HTTP ${answer.status} ${await answer.text()}`);
    }
  }
  for (const file of files) assert.ok(existsSync(file), `${file} is still there`);
  assert.ok(["uploading", "importing"].includes((await readState(id))?.status ?? "gone"), `the upload is ${(await readState(id))?.status}`);
  assert.equal((await tus("HEAD", `${BASE}/${id}`, cu.headers)).status, 200);
});
