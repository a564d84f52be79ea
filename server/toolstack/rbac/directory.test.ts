// LDAP as the pool's external authentication, against Debian's slapd started by the test (a throwaway directory
// of users and nested groups loaded with ldapadd): settings checked before they are saved (TLS verified), users
// let in by their own subject or any group's (nested ones followed), roles as the highest of them, filter
// injection refused, and the directory's users out at once when their subject goes or the directory is turned off.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { invoke } from "../methods.ts";
import { startTestToolstack, type TestToolstack } from "../storage-testing.ts";
import { ROOT_PASSWORD } from "../testing.ts";
import type { Toolstack } from "../toolstack.ts";
import { outcome } from "./testing.ts";
import { nameUuid, type Role, roleRef } from "./roles.ts";
import { type Slapd, startSlapd, SUFFIX } from "./slapd-testing.ts";

const people = `ou=people,${SUFFIX}`;
const groups = `ou=groups,${SUFFIX}`;
const user = (uid: string, password: string) => `dn: uid=${uid},${people}\nobjectClass: inetOrgPerson\nuid: ${uid}\ncn: ${uid}\nsn: ${uid}\nuserPassword: ${password}\n`;
const group = (cn: string, members: string[]) => `dn: cn=${cn},${groups}\nobjectClass: groupOfNames\ncn: ${cn}\n${members.map((m) => `member: ${m}\n`).join("")}`;
const DIRECTORY = [
  `dn: ${people}\nobjectClass: organizationalUnit\nou: people\n`,
  `dn: ${groups}\nobjectClass: organizationalUnit\nou: groups\n`,
  user("svc-hangar", "service-secret"),
  user("alice", "alice-password"),
  user("bob", "bob-password"),
  user("carol", "carol-password"),
  group("admins", [`uid=alice,${people}`]),
  group("helpdesk", [`uid=bob,${people}`]),
  // staff ⊃ helpdesk ⊃ bob: bob is staff through a nested group.
  group("staff", [`cn=helpdesk,${groups}`]),
].join("\n");


describe("LDAP (slapd)", () => {
  let slapd: Slapd;
  let toolstack: TestToolstack;
  let ts: Toolstack;
  let root: string;
  let pool: string;
  let config: Record<string, string>;
  const login = (name: string, password: string) => invoke(ts, "session.login_with_password", [name, password]);
  const roleOf = async (session: string) => ((await invoke(ts, "session.get_record", [session, session])) as { rbac_permissions: string[] }).rbac_permissions[0];
  const grant = (subject: string, role: Role) => invoke(ts, "subject.add_to_roles", [root, subject, roleRef(nameUuid(role))]);

  before(async () => {
    slapd = await startSlapd();
    await slapd.add(DIRECTORY);
    toolstack = await startTestToolstack();
    ts = toolstack.service.ts;
    root = toolstack.client.session;
    pool = ((await invoke(ts, "pool.get_all", [root])) as string[])[0]!;
    config = { url: slapd.url, ca_cert: slapd.cert, bind_dn: `uid=svc-hangar,${people}`, bind_password: "service-secret", user_base: people, group_base: groups };
  });
  after(async () => {
    await toolstack?.stop();
    await slapd?.stop();
  });

  test("settings are tested before they are saved: a wrong password, an unknown base, an untrusted certificate are refused in words", async () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ ...config, bind_password: "wrong" }, /refused the service account/],
      [{ ...config, user_base: `ou=nobody,${SUFFIX}` }, /does not exist/],
      [{ ...config, ca_cert: "" }, /securely/],
      [{ ...config, url: "http://127.0.0.1" }, /the setting url/],
    ];
    for (const [bad, reason] of cases) {
      const got = await outcome(invoke(ts, "pool.enable_external_auth", [root, pool, bad, "hangar.test", "LDAP"]));
      assert.ok(got !== "ok" && got.code === "AUTH_ENABLE_FAILED", JSON.stringify(got));
      assert.match(got.params[0]!, reason);
    }
    assert.match(String(await invoke(ts, "pool.hangar_test_external_auth", [root, pool, config])), /^Connected to ldap:\/\/127\.0\.0\.1:\d+ \(StartTLS\) as uid=svc-hangar,.*: 4 users under ou=people,.*, 3 groups under ou=groups/);
    const unknown = await outcome(invoke(ts, "pool.enable_external_auth", [root, pool, config, "hangar.test", "AD"]));
    assert.ok(unknown !== "ok" && unknown.code === "AUTH_UNKNOWN_TYPE");
  });

  test("enabled over StartTLS: the hosts show it without the bind password; subjects are resolved from the directory", async () => {
    await invoke(ts, "pool.enable_external_auth", [root, pool, config, "hangar.test", "LDAP"]);
    const again = await outcome(invoke(ts, "pool.enable_external_auth", [root, pool, config, "hangar.test", "LDAP"]));
    assert.ok(again !== "ok" && again.code === "AUTH_ALREADY_ENABLED");
    const hosts = JSON.stringify(await invoke(ts, "host.get_all_records", [root]));
    assert.ok(hosts.includes('"external_auth_type":"LDAP"') && !hosts.includes("service-secret"), hosts);
    const unknown = await outcome(invoke(ts, "subject.create", [root, { subject_identifier: `uid=nobody,${people}` }]));
    assert.ok(unknown !== "ok" && unknown.code === "SUBJECT_CANNOT_BE_RESOLVED");
    const staff = String(await invoke(ts, "subject.create", [root, { subject_identifier: `cn=staff,${groups}` }]));
    const record = (await invoke(ts, "subject.get_record", [root, staff])) as { other_config: Record<string, string>; roles: string[] };
    assert.equal(record.other_config["subject-name"], "staff");
    assert.equal(record.other_config["subject-is-group"], "true");
    assert.deepEqual(record.roles, []);
    await grant(staff, "vm-operator");
    const alice = String(await invoke(ts, "subject.create", [root, { subject_identifier: `UID=alice, ${people}` }]));
    assert.equal(((await invoke(ts, "subject.get_record", [root, alice])) as { other_config: Record<string, string> }).other_config["subject-is-group"], "false");
    await grant(alice, "pool-operator");
    const admins = String(await invoke(ts, "subject.create", [root, { subject_identifier: `cn=admins,${groups}` }]));
    await grant(admins, "vm-admin");
  });

  test("users log in with their directory password; their role is the highest over their subject and their groups', nested ones followed", async () => {
    assert.equal(await roleOf(String(await login("alice", "alice-password"))), "pool-operator", "her own subject's, over her group's vm-admin");
    assert.equal(await roleOf(String(await login("bob", "bob-password"))), "vm-operator", "through helpdesk, nested in staff");
    const carol = await outcome(login("carol", "carol-password"));
    assert.ok(carol !== "ok" && carol.code === "SESSION_AUTHORIZATION_FAILED", "known to the directory, let in by no subject");
    for (const [name, password] of [["bob", "wrong"], ["bob", ""], ["nobody", "x"], ["*", "bob-password"], ["bob)(uid=*", "bob-password"], ["alice*", "alice-password"]]) {
      const got = await outcome(login(name!, password!));
      assert.ok(got !== "ok" && got.code === "SESSION_AUTHENTICATION_FAILED", `${name}/${password}: ${JSON.stringify(got)}`);
    }
  });

  test("a directory user's sessions end when the subject that let them in goes, and when the directory is turned off", async () => {
    const bob = String(await login("bob", "bob-password"));
    const alice = String(await login("alice", "alice-password"));
    const subjects = (await invoke(ts, "subject.get_all_records", [root])) as Record<string, { subject_identifier: string }>;
    const staffRef = Object.entries(subjects).find(([, s]) => s.subject_identifier === `cn=staff,${groups}`)![0];
    await invoke(ts, "subject.destroy", [root, staffRef]);
    assert.equal(await outcome(invoke(ts, "session.get_uuid", [bob, bob])) !== "ok", true, "bob's session ended with staff");
    assert.equal(await outcome(invoke(ts, "session.get_uuid", [alice, alice])), "ok", "alice's did not");
    await invoke(ts, "pool.disable_external_auth", [root, pool, {}]);
    assert.equal(await outcome(invoke(ts, "session.get_uuid", [alice, alice])) !== "ok", true, "directory off: alice is out");
    const off = await outcome(login("alice", "alice-password"));
    assert.ok(off !== "ok" && off.code === "SESSION_AUTHENTICATION_FAILED");
  });

  test("ldaps:// from the first byte works as StartTLS does", async () => {
    const secure = { ...config, url: slapd.secureUrl };
    assert.match(String(await invoke(ts, "pool.hangar_test_external_auth", [root, pool, secure])), /\(TLS\)/);
    await invoke(ts, "pool.enable_external_auth", [root, pool, secure, "hangar.test", "LDAP"]);
    assert.equal(await roleOf(String(await login("alice", "alice-password"))), "pool-operator");
    await invoke(ts, "pool.disable_external_auth", [root, pool, {}]);
  });

  test("a directory that goes down: its users get a clear error within the time-out, local users and root are not affected", async () => {
    await invoke(ts, "pool.enable_external_auth", [root, pool, config, "hangar.test", "LDAP"]);
    const local = String(await invoke(ts, "subject.hangar_create_local", [root, "lena", "lena-password"]));
    await grant(local, "read-only");
    await slapd.stop();
    const began = Date.now();
    const down = await outcome(login("alice", "alice-password"));
    assert.ok(down !== "ok" && down.code === "AUTH_SERVICE_ERROR", JSON.stringify(down));
    assert.match(down.params[0]!, /cannot reach the directory/);
    assert.ok(Date.now() - began < 15_000, `answered in ${Date.now() - began} ms`);
    assert.equal(await roleOf(String(await login("lena", "lena-password"))), "read-only");
    await login("root", ROOT_PASSWORD);
    await invoke(ts, "pool.disable_external_auth", [root, pool, {}]);
  });
});
