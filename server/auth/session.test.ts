import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { startTestToolstack } from "../toolstack/storage-testing.ts";
import { ROOT_PASSWORD } from "../toolstack/testing.ts";
import { seal, sealingKey, unseal } from "./seal.ts";
import { LoginError, SESSION_COOKIE, isSessionValid, logIn, logOut, sessionFromCookie, sessionFromHeaders } from "./session.ts";

/** Puts an environment variable back as it was (unset stays unset). */
function restore(name: string, value: string | undefined): void {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}

test("a sealed value opens only with its key and untouched", () => {
  const key = Buffer.alloc(32, 7);
  const token = seal({ session: "OpaqueRef:x" }, key);
  assert.deepEqual(unseal(token, key), { session: "OpaqueRef:x" });
  assert.doesNotMatch(token, /OpaqueRef/);
  assert.equal(unseal(token, Buffer.alloc(32, 8)), undefined);
  const tampered = Buffer.from(token, "base64url");
  tampered[15]! ^= 1;
  assert.equal(unseal(tampered.toString("base64url"), key), undefined);
  assert.equal(unseal("garbage", key), undefined);
  assert.equal(unseal("", key), undefined);
});

test("without HANGAR_CONSOLE_SECRET the key is made once in the data dir, readable by its owner only", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "hangar-seal-"));
  const saved = { data: process.env.HANGAR_DATA_DIR, secret: process.env.HANGAR_CONSOLE_SECRET };
  t.after(() => {
    restore("HANGAR_DATA_DIR", saved.data);
    restore("HANGAR_CONSOLE_SECRET", saved.secret);
    rmSync(dir, { recursive: true, force: true });
  });
  delete process.env.HANGAR_CONSOLE_SECRET;
  process.env.HANGAR_DATA_DIR = dir;
  const key = sealingKey();
  assert.equal(key.length, 32);
  assert.equal(statSync(join(dir, "console-secret")).mode & 0o777, 0o600);
  assert.deepEqual(Buffer.from(readFileSync(join(dir, "console-secret"), "utf8").trim(), "base64"), key);
  assert.deepEqual(sealingKey(), key);
  process.env.HANGAR_CONSOLE_SECRET = "chosen";
  assert.notDeepEqual(sealingKey(), key);
});

test("login against a real toolstack: wrong password in words, a cookie that stands for the session, logout ends it", async (t) => {
  const toolstack = await startTestToolstack();
  t.after(() => toolstack.stop());
  process.env.HANGAR_TOOLSTACK_URL = `http://127.0.0.1:${toolstack.service.httpPort}`;
  process.env.HANGAR_CONSOLE_SECRET = "session-test-secret";

  await assert.rejects(logIn("root", "wrong"), (error: unknown) => error instanceof LoginError && error.message === "Wrong user name or password.");

  const { cookie, session } = await logIn("root", ROOT_PASSWORD);
  assert.equal(session.user, "root");
  assert.deepEqual(sessionFromCookie(cookie), session);
  assert.deepEqual(sessionFromHeaders(new Headers({ cookie: `other=1; ${SESSION_COOKIE}=${cookie}; x=y` })), session);
  assert.equal(sessionFromHeaders(new Headers({ cookie: "other=1" })), undefined);
  assert.equal(sessionFromHeaders(new Headers({ cookie: `${SESSION_COOKIE}=%E0%A4%A` })), undefined, "a cookie that does not decode is no session");
  assert.equal(await isSessionValid(session), true);

  await logOut(session);
  assert.equal(await isSessionValid(session), false);
  await logOut(session); // a session already gone is no failure
});

test("a toolstack that does not answer is a login error that says where it looked", async (t) => {
  const saved = process.env.HANGAR_TOOLSTACK_URL;
  t.after(() => restore("HANGAR_TOOLSTACK_URL", saved));
  process.env.HANGAR_TOOLSTACK_URL = "http://127.0.0.1:9";
  await assert.rejects(logIn("root", "x"), (error: unknown) => error instanceof LoginError && error.message.includes("http://127.0.0.1:9 cannot be reached"));
});
