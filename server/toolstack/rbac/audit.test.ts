// The audit trail: what is recorded (changes allowed and denied, logins good and bad, HTTP actions), what is
// never (reads, passwords, session refs), GET /audit_log as xapi serves it, and the hash chain: a row edited or
// removed in the database is found, by the service and by `hangar audit --verify` reading the rows itself.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { invoke } from "../methods.ts";
import { startTestToolstack, type TestToolstack } from "../storage-testing.ts";
import { ROOT_PASSWORD } from "../testing.ts";
import type { Toolstack } from "../toolstack.ts";
import type { AuditRow } from "../../xenapi/audit-log.ts";
import { nameUuid, roleRef } from "./roles.ts";

const run = promisify(execFile);
const HANGAR = join(import.meta.dirname, "../../../bin/hangar");
const PASSWORD = "password-of-an-auditor";

describe("the audit trail", () => {
  let toolstack: TestToolstack;
  let ts: Toolstack;
  let root: string;
  let operator: string;
  const rows = async (): Promise<AuditRow[]> => {
    const out: AuditRow[] = [];
    for await (const row of ts.audit.rows()) out.push(row);
    return out;
  };
  const hangar = (args: string[]) =>
    run(HANGAR, args, { env: { ...process.env, HANGAR_URL: toolstack.client.url, HANGAR_PASSWORD: PASSWORD } })
      .then(({ stdout }) => ({ code: 0, stdout }))
      .catch((error: { code: number; stdout: string }) => ({ code: error.code, stdout: error.stdout }));

  before(async () => {
    toolstack = await startTestToolstack();
    ts = toolstack.service.ts;
    root = toolstack.client.session;
    const subject = String(await invoke(ts, "subject.hangar_create_local", [root, "olga", PASSWORD]));
    await invoke(ts, "subject.add_to_roles", [root, subject, roleRef(nameUuid("vm-operator"))]);
    operator = String(await invoke(ts, "session.login_with_password", ["olga", PASSWORD, "1.0", "audit test"], "192.0.2.7"));
  });
  after(() => toolstack.stop());

  test("changes, denials and logins are rows; reads are not; no password or session ref is ever kept", async () => {
    const before = (await rows()).length;
    const vm = String(await invoke(ts, "VM.create", [root, { name_label: "audited web" }]));
    await invoke(ts, "VM.get_record", [root, vm]);
    await invoke(ts, "VM.set_name_label", [root, vm, "audited web 2"]);
    await assert.rejects(invoke(ts, "VM.destroy", [operator, vm], "192.0.2.7"));
    await assert.rejects(invoke(ts, "session.login_with_password", ["olga", "not her password"], "192.0.2.8"));
    await invoke(ts, "VM.destroy", [root, vm]);
    const added = (await rows()).slice(before);
    const brief = added.map((row) => [row.subject_name, row.decision, row.outcome, row.kind, row.action]);
    assert.deepEqual(brief, [
      ["root", "ALLOWED", "OK", "API", "VM.create"],
      ["root", "ALLOWED", "OK", "API", "VM.set_name_label"],
      ["olga", "DENIED", "", "API", "VM.destroy"],
      ["olga", "ALLOWED", "ERROR:SESSION_AUTHENTICATION_FAILED", "API", "session.login_with_password"],
      ["root", "ALLOWED", "OK", "API", "VM.destroy"],
    ]);
    const [create, rename, denied, failedLogin, destroy] = added;
    assert.deepEqual(JSON.parse(create!.args), [["args.name_label", "audited web"]]);
    assert.deepEqual(JSON.parse(rename!.args)[1], ["value", "audited web 2"]);
    assert.equal(denied!.subject_sid, "local:olga");
    assert.equal(denied!.client, "192.0.2.7");
    assert.equal(failedLogin!.client, "192.0.2.8");
    const [self] = JSON.parse(destroy!.args) as string[][];
    assert.deepEqual(self, ["self", "audited web 2", self![2], vm], "a destroyed VM keeps its name in the trail");
    const all = JSON.stringify(await rows());
    for (const secret of [PASSWORD, "not her password", ROOT_PASSWORD, root, operator]) assert.ok(!all.includes(secret), `${secret.slice(0, 12)}… is not in the trail`);
  });

  test("HTTP actions are rows too: an export refused to a VM operator", async () => {
    const response = await fetch(`${toolstack.client.url}/export?session_id=${operator}&uuid=00000000-0000-0000-0000-000000000000`);
    assert.equal(response.status, 403);
    const last = (await rows()).at(-1)!;
    assert.deepEqual([last.decision, last.kind, last.action, last.subject_name], ["DENIED", "HTTP", "http/get_export", "olga"]);
    assert.ok(!last.args.includes(operator), "the session_id argument is left out");
  });

  test("a call through a trusted proxy (the console) names the browser it was made for, and the proxy; anyone else's claim is not believed", async () => {
    const call = (headers: Record<string, string>) =>
      fetch(`${toolstack.client.url}/jsonrpc`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ jsonrpc: "2.0", method: "task.create", params: [root, "proxied", ""], id: 1 }) });
    await call({ "x-forwarded-for": "203.0.113.9" });
    assert.equal((await rows()).at(-1)!.client, "203.0.113.9 via 127.0.0.1");
    process.env.HANGAR_TRUSTED_PROXIES = "";
    try {
      await call({ "x-forwarded-for": "203.0.113.9" });
      assert.equal((await rows()).at(-1)!.client, "127.0.0.1", "no proxy trusted: the connection's own address");
    } finally {
      delete process.env.HANGAR_TRUSTED_PROXIES;
    }
    await call({ "x-forwarded-for": "not an address" });
    assert.equal((await rows()).at(-1)!.client, "127.0.0.1", "what is no address is not taken");
  });

  test("GET /audit_log serves xapi's lines from `since`, to any role; format=json the rows whole", async () => {
    const since = (await rows()).at(-2)!.time;
    const text = await (await fetch(`${toolstack.client.url}/audit_log?session_id=${operator}&since=${encodeURIComponent(since)}`)).text();
    const lines = text.trim().split("\n");
    assert.ok(lines.length >= 2);
    assert.match(lines[0]!, /^\[\d{8}T\d\d:\d\d:\d\d\.\d{3}Z\|audit\|[^|]+\|[^\]]*\] \('trackid=[0-9a-f]{32}' '[^']*' '[^']*' '(ALLOWED|DENIED)' '[^']*' '(API|HTTP)' '[^']+' \(.*\)\)$/);
    const compact = since.replaceAll("-", "").replace(/Z$/, "");
    const same = await (await fetch(`${toolstack.client.url}/audit_log?session_id=${operator}&since=${compact}`)).text();
    assert.equal(same, text, "xapi's compact form of the same time (reading the trail adds no row to it)");
    const json = await (await fetch(`${toolstack.client.url}/audit_log?session_id=${root}&format=json&decision=DENIED&user=olga`)).text();
    const denied = json.trim().split("\n").map((line) => JSON.parse(line) as AuditRow);
    assert.ok(denied.length >= 2 && denied.every((row) => row.decision === "DENIED" && row.subject_name === "olga"));
    const bad = await fetch(`${toolstack.client.url}/audit_log?session_id=${root}&since=yesterday`);
    assert.equal(bad.status, 400);
  });

  test("the chain: intact it verifies; a row edited or removed in the database is found, by the service and by hangar audit --verify", async () => {
    const good = await hangar(["audit", "--verify", "--user", "olga"]);
    assert.equal(good.code, 0, good.stdout);
    assert.match(good.stdout, /^The audit trail verifies: \d+ row\(s\), .* head [0-9a-f]{64}\.\n$/);
    const database = new DatabaseSync(join(toolstack.dataDir, "toolstack.db"));
    try {
      const victim = (await rows()).find((row) => row.action === "VM.set_name_label")!;
      database.prepare("UPDATE audit_log SET args = ? WHERE id = ?").run("[]", victim.id);
      const edited = await ts.audit.verify();
      assert.equal(edited.ok, false);
      assert.match(!edited.ok ? edited.reason : "", new RegExp(`^row ${victim.id} .* was changed`));
      const cli = await hangar(["audit", "--verify", "--user", "olga"]);
      assert.equal(cli.code, 1);
      assert.match(cli.stdout, new RegExp(`^The audit trail is broken: row ${victim.id} `));
      const original = (await rows()).find((row) => row.id === victim.id - 1)!;
      // Removing the edited row leaves the next pointing at a row that is not there.
      database.prepare("DELETE FROM audit_log WHERE id = ?").run(victim.id);
      const removed = await ts.audit.verify();
      assert.match(!removed.ok ? removed.reason : "", new RegExp(`rows ${victim.id}–${victim.id} are missing`));
      assert.ok(original);
    } finally {
      database.close();
    }
    const text = await hangar(["audit", "--user", "olga"]);
    assert.equal(text.code, 0);
    assert.match(text.stdout, /'VM\.create'/);
  });
});
