// A complete export is served from the console's spool without the toolstack; the cookie of a session logged
// out since must not open it. Found by the console fuzz (e2e/console.fuzz.spec.ts): a logged-out session's
// cookie got a 206 of the whole export, from `Range: bytes=0-` with the export's ETag as If-Range.
import assert from "node:assert/strict";
import { test } from "node:test";
import { logIn, logOut, SESSION_COOKIE } from "../../auth/session.ts";
import { startConsoleUnderTest } from "../../api/testing.ts";
import { ROOT_PASSWORD } from "../../toolstack/testing.ts";
import { http } from "../../toolstack/transfer/testing.ts";
import { dataDisk, importTestVm, serveDownloads } from "./testing.ts";

test("the cookie of a session logged out since downloads nothing, not even a complete export's spool", { timeout: 120_000 }, async (t) => {
  const cu = await startConsoleUnderTest(t);
  const server = await serveDownloads();
  t.after(() => server.close());
  const vm = await importTestVm(cu.toolstack, "spooled", dataDisk(2));
  const url = `${server.url}/${vm.uuid}.xva?compression=none`;

  // Another login downloads the export whole: the spool is complete.
  const other = await logIn("root", ROOT_PASSWORD);
  const cookie = `${SESSION_COOKIE}=${other.cookie}`;
  const whole = await http(url, { headers: { cookie } });
  assert.equal(whole.status, 200, whole.body.toString());
  const etag = String(whole.headers.etag);
  const ranged = await http(url, { headers: { cookie, range: "bytes=0-", "if-range": etag } });
  assert.equal(ranged.status, 206);

  await logOut(other.session);
  const asked: Record<string, string>[] = [{ range: "bytes=0-", "if-range": etag }, { range: "bytes=10-20" }, {}];
  for (const headers of asked) {
    const answer = await http(url, { headers: { cookie, ...headers } });
    assert.equal(answer.status, 401, `${JSON.stringify(headers)}: HTTP ${answer.status} ${answer.body.subarray(0, 200).toString()}`);
  }
  // The live session still gets it.
  const live = await http(url, { headers: { cookie: cu.headers.get("cookie")!, range: "bytes=0-", "if-range": etag } });
  assert.equal(live.status, 206);
});
