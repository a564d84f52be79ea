// The sealed cookie says who logged in, not that the session still holds: a tus request on an existing upload
// with the cookie of a session logged out since is refused (401) and changes nothing. Found by the console fuzz
// (e2e/console.fuzz.spec.ts): such a cookie's PATCH was taken (204), and its DELETE cancelled the upload.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { z } from "zod";

const dataDir = mkdtempSync(join(tmpdir(), "hangar-tus-ended-test-"));
process.env.HANGAR_DATA_DIR = dataDir;
process.on("exit", () => rmSync(dataDir, { recursive: true, force: true }));

const { startConsoleUnderTest } = await import("../../api/testing.ts");
const { logIn, logOut, SESSION_COOKIE } = await import("../../auth/session.ts");
const { ROOT_PASSWORD } = await import("../../toolstack/testing.ts");
const { serveUploads } = await import("./testing.ts");
const { readState, spoolFile } = await import("./state.ts");
const { cancelPipeline } = await import("./pipeline.ts");
(await import("./state.ts")).uploadSpoolDir();

const { url: BASE } = await serveUploads();
const b64 = (s: string) => Buffer.from(s).toString("base64");

function tus(method: string, url: string, cookie: string, extra: Record<string, string> = {}, body?: Buffer): Promise<Response> {
  return fetch(url, { method, headers: { cookie, "tus-resumable": "1.0.0", ...extra }, body: body === undefined ? undefined : new Uint8Array(body) });
}

test("the cookie of a session logged out since can neither send, read nor cancel its upload", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const [pool] = await cu.xapi.call(z.array(z.string()), "pool.get_all");
  const sr = await cu.xapi.call(z.string(), "pool.get_default_SR", pool);
  const other = await logIn("root", ROOT_PASSWORD);
  const cookie = `${SESSION_COOKIE}=${other.cookie}`;
  const created = await tus("POST", BASE, cookie, { "upload-length": String(1024 * 1024), "upload-metadata": `filename ${b64("ended.xva")},sr ${b64(sr)}` });
  assert.equal(created.status, 201);
  const id = created.headers.get("location")!.split("/").pop()!;
  t.after(() => cancelPipeline(id));
  // (The console takes the toolstack's word that a session holds for a few seconds: the first PATCH is the
  // live session's, the logged-out one never made one.)
  assert.equal((await tus("PATCH", `${BASE}/${id}`, cu.headers.get("cookie")!, { "upload-offset": "0", "content-type": "application/offset+octet-stream" }, Buffer.alloc(1000, 1))).status, 204);

  await logOut(other.session);
  const patch = await tus("PATCH", `${BASE}/${id}`, cookie, { "upload-offset": "1000", "content-type": "application/offset+octet-stream" }, Buffer.alloc(1000, 2));
  assert.equal(patch.status, 401, await patch.text());
  for (const method of ["HEAD", "GET", "DELETE"]) assert.equal((await tus(method, `${BASE}/${id}`, cookie)).status, 401, method);

  assert.ok(existsSync(spoolFile(id)));
  assert.ok(["uploading", "importing"].includes((await readState(id))?.status ?? "gone"));
  // The user's live session goes on with it.
  const head = await tus("HEAD", `${BASE}/${id}`, cu.headers.get("cookie")!);
  assert.equal(head.status, 200);
  assert.equal(head.headers.get("upload-offset"), "1000");
});
