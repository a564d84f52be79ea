// Logging in as clients do (2 or 4 parameters), logging out, idle expiry, and root's password: given by
// HANGAR_ROOT_PASSWORD or generated once, kept only as a scrypt hash.
import assert from "node:assert/strict";
import { rm } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, test, type TestContext } from "node:test";
import { migrate } from "./db/migrations.ts";
import { bothEngines, type TestEngine } from "./db/testing.ts";
import { type Identity, Sessions } from "./sessions.ts";
import { openTestToolstack, ROOT_PASSWORD, tempDataDir } from "./testing.ts";
import { openToolstack } from "./toolstack.ts";
import { XenApiError } from "../xenapi/errors.ts";
import { invoke } from "./methods.ts";

const xenError = (code: string, params?: string[]) => (error: unknown) =>
  error instanceof XenApiError && error.code === code && (params === undefined || JSON.stringify(error.params) === JSON.stringify(params));

const engines = bothEngines();

async function sessions(t: TestContext, engine: TestEngine, timeoutMs: number): Promise<Sessions> {
  const db = engine.open(await engine.place(t));
  t.after(() => db.close());
  await migrate(db);
  const store = new Sessions(db, { timeoutMs });
  await store.setPassword("root", "pw");
  return store;
}

describe("sessions", () => {
  test("session.login_with_password with 2 parameters and with 4 (version, originator)", async (t) => {
    const ts = await openTestToolstack(t);
    const two = String(await invoke(ts, "session.login_with_password", ["root", ROOT_PASSWORD]));
    const four = String(await invoke(ts, "session.login_with_password", ["root", ROOT_PASSWORD, "2.21", "XenCenter"]));
    assert.match(two, /^OpaqueRef:[0-9a-f-]{36}$/);
    assert.notEqual(two, four);
    const record = (await invoke(ts, "session.get_record", [four, four])) as Record<string, unknown>;
    assert.equal(record.originator, "XenCenter");
    assert.equal(record.auth_user_name, "root");
    assert.equal(record.this_host, ts.host.ref);
    assert.equal(await invoke(ts, "session.get_this_host", [two, two]), ts.host.ref);
    await assert.rejects(invoke(ts, "session.login_with_password", ["root"]), xenError("MESSAGE_PARAMETER_COUNT_MISMATCH", ["session.login_with_password", "4", "1"]));
    await assert.rejects(invoke(ts, "session.login_with_password", ["root", ROOT_PASSWORD, "2.21", "x", "extra"]), xenError("MESSAGE_PARAMETER_COUNT_MISMATCH"));
  });

  test("a wrong password or an unknown user is SESSION_AUTHENTICATION_FAILED, alike", async (t) => {
    const ts = await openTestToolstack(t);
    await assert.rejects(invoke(ts, "session.login_with_password", ["root", "wrong"]), xenError("SESSION_AUTHENTICATION_FAILED", ["root", "Authentication failure"]));
    await assert.rejects(invoke(ts, "session.login_with_password", ["nobody", ROOT_PASSWORD]), xenError("SESSION_AUTHENTICATION_FAILED", ["nobody", "Authentication failure"]));
    await assert.rejects(invoke(ts, "session.login_with_password", ["root", ""]), xenError("SESSION_AUTHENTICATION_FAILED"));
  });

  test("after session.logout the ref is SESSION_INVALID; other sessions live on", async (t) => {
    const ts = await openTestToolstack(t);
    const gone = String(await invoke(ts, "session.login_with_password", ["root", ROOT_PASSWORD]));
    const kept = String(await invoke(ts, "session.login_with_password", ["root", ROOT_PASSWORD]));
    await invoke(ts, "session.logout", [gone]);
    await assert.rejects(invoke(ts, "task.get_all", [gone]), xenError("SESSION_INVALID", [gone]));
    await assert.rejects(invoke(ts, "session.logout", [gone]), xenError("SESSION_INVALID"));
    assert.ok(Array.isArray(await invoke(ts, "task.get_all", [kept])));
  });

  test("refs that are not sessions: made up, not a string, missing", async (t) => {
    const ts = await openTestToolstack(t);
    await assert.rejects(invoke(ts, "task.get_all", ["OpaqueRef:made-up"]), xenError("SESSION_INVALID", ["OpaqueRef:made-up"]));
    await assert.rejects(invoke(ts, "task.get_all", [42]), xenError("SESSION_INVALID", ["42"]));
    await assert.rejects(invoke(ts, "task.get_all", [null]), xenError("SESSION_INVALID"));
  });

  test("root's password: generated once on first start and only its scrypt hash stored; a given one replaces it", async (t) => {
    const dataDir = await tempDataDir();
    const generated: string[] = [];
    const start = (rootPassword?: string) => openToolstack({ dataDir, rootPassword, onGeneratedPassword: (pw) => generated.push(pw) });

    const first = await start();
    assert.equal(generated.length, 1);
    const password = generated[0]!;
    assert.ok(password.length >= 16, "a generated password is long enough");
    await invoke(first, "session.login_with_password", ["root", password]);
    const stored = await first.db.all<{ password_hash: string }>("SELECT password_hash FROM users");
    assert.equal(stored.length, 1);
    assert.match(stored[0]!.password_hash, /^scrypt\$16384\$8\$1\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
    assert.ok(!stored[0]!.password_hash.includes(password));
    await first.close();

    // A second start on the same data dir generates nothing: the password stays.
    const again = await start();
    assert.equal(generated.length, 1);
    await invoke(again, "session.login_with_password", ["root", password]);
    await again.close();

    // HANGAR_ROOT_PASSWORD (rootPassword) sets it: the old one stops working.
    const chosen = await start("chosen");
    t.after(async () => {
      await chosen.close();
      await rm(dataDir, { recursive: true, force: true });
    });
    assert.equal(generated.length, 1);
    await invoke(chosen, "session.login_with_password", ["root", "chosen"]);
    await assert.rejects(invoke(chosen, "session.login_with_password", ["root", password]), xenError("SESSION_AUTHENTICATION_FAILED"));
  });
});

const ROOT: Identity = { userName: "root", superuser: true, role: null, authUserSid: "", subjects: [] };

for (const engine of engines)
describe(`session store on ${engine.name}`, () => {
  test("a session idle longer than the timeout is SESSION_INVALID; one in use stays", async (t) => {
    // A use restarts the idle clock when it is older than half the timeout: margins wide enough for a loaded
    // machine (the busy session is never idle much past 600 ms of the 1000).
    const store = await sessions(t, engine, 1000);
    const idle = await store.open(ROOT, "test");
    const busy = await store.open(ROOT, "test");
    const began = Date.now();
    while (Date.now() - began < 1200) {
      await sleep(100);
      await store.check(busy.ref);
    }
    await assert.rejects(store.check(idle.ref), xenError("SESSION_INVALID", [idle.ref]));
    assert.equal((await store.check(busy.ref)).ref, busy.ref, "used every 100 ms for 1.2 s, never idle 1 s");
  });

  test("expire() removes the idle sessions only", async (t) => {
    const store = await sessions(t, engine, 400);
    const idle = await store.open(ROOT, "");
    await sleep(600);
    const fresh = await store.open(ROOT, "");
    assert.equal(await store.expire(), 1);
    await assert.rejects(store.check(idle.ref), xenError("SESSION_INVALID"));
    await store.check(fresh.ref);
  });
});
