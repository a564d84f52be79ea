// Roles on every call: the whole call table × the six roles, generated from the table itself (a call is refused
// exactly when the caller's role is below the call's), the HTTP resources × the roles, xapi's values for the
// calls it has, local users and what happens to their sessions, and the role and session records.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { invoke } from "../methods.ts";
import { startTestToolstack, type TestToolstack } from "../storage-testing.ts";
import { ROOT_PASSWORD } from "../testing.ts";
import type { Toolstack } from "../toolstack.ts";
import { outcome } from "./testing.ts";
import { HTTP_ACTIONS } from "./http-actions.ts";
import { allows, nameUuid, type Role, roleRef, ROLES, rolesWith } from "./roles.ts";

const PASSWORD = "password-of-a-test";
const refOf = (role: Role) => roleRef(nameUuid(role));


/** A local user holding `role`, logged in: their session. */
async function userWith(ts: Toolstack, root: string, role: Role, name = `user-${role}`): Promise<{ subject: string; session: string }> {
  const subject = String(await invoke(ts, "subject.hangar_create_local", [root, name, PASSWORD]));
  await invoke(ts, "subject.add_to_roles", [root, subject, refOf(role)]);
  return { subject, session: String(await invoke(ts, "session.login_with_password", [name, PASSWORD, "1.0", "rbac test"])) };
}

describe("roles on every call", () => {
  let toolstack: TestToolstack;
  let ts: Toolstack;
  let root: string;
  const sessions = new Map<Role, string>();

  before(async () => {
    toolstack = await startTestToolstack();
    ts = toolstack.service.ts;
    root = toolstack.client.session;
    for (const role of ROLES) sessions.set(role, (await userWith(ts, root, role)).session);
  });
  after(() => toolstack.stop());

  test("the whole call table × the six roles: refused with xapi's RBAC_PERMISSION_DENIED exactly when the role is below the call's", async () => {
    const calls = ts.methods.all().filter((def) => def.session);
    assert.ok(calls.length > 400, `${calls.length} calls`);
    let refused = 0;
    for (const role of ROLES) {
      for (const def of calls) {
        // Ends the session it is made with: made last, with a session of its own.
        if (def.name === "session.logout") continue;
        const params = [sessions.get(role)!, ...def.params.map(() => "OpaqueRef:NULL")];
        const names = def.async ? [def.name, `Async.${def.name}`] : [def.name];
        for (const name of names) {
          const got = await outcome(invoke(ts, name, params));
          if (allows(role, def.role!)) {
            assert.ok(got === "ok" || got.code !== "RBAC_PERMISSION_DENIED", `${name} as ${role} (needs ${def.role}) was refused: ${got === "ok" ? "" : got.message}`);
          } else {
            assert.ok(got !== "ok", `${name} as ${role} (needs ${def.role}) was let through`);
            assert.deepEqual(got.description, ["RBAC_PERMISSION_DENIED", def.name.toLowerCase(), `No permission in user session. (Roles with this permission: ${rolesWith(def.role!).join(", ")})`], name);
            refused++;
          }
        }
      }
      const own = (await userWith(ts, root, role, `logout-${role}`)).session;
      assert.equal(await outcome(invoke(ts, "session.logout", [own])), "ok", "every role may log out");
    }
    assert.ok(refused > 500, `${refused} refusals`);
  });

  test("xapi's roles for the calls it has (datamodel.ml), and Hangar's own by analogy", () => {
    const expected: Record<string, Role> = {
      "VM.get_record": "read-only",
      "event.from": "read-only",
      "task.create": "read-only",
      "VDI.list_changed_blocks": "vm-operator",
      "VM.create": "vm-admin",
      "VDI.destroy": "vm-admin",
      "network.create": "vm-admin",
      "VM.set_memory": "vm-power-admin",
      "SR.scan": "vm-power-admin",
      "VDI.hangar_data_mirror": "vm-power-admin",
      "SR.create": "pool-operator",
      "PBD.plug": "pool-operator",
      "network.set_name_label": "pool-operator",
      "session.logout_subject_identifier": "pool-operator",
      "subject.add_to_roles": "pool-admin",
      "subject.hangar_create_local": "pool-admin",
      "pool.enable_external_auth": "pool-admin",
    };
    for (const [name, role] of Object.entries(expected)) assert.equal(ts.methods.get(name)?.role, role, name);
    assert.equal(ts.methods.get("session.login_with_password")?.role, null, "logging in needs no role");
  });

  test("the HTTP resources × the six roles: 403 in xapi's words below the resource's role, and the given task fails with it", async () => {
    const base = `${toolstack.client.url}/`;
    for (const action of HTTP_ACTIONS.filter((a) => a.path !== "/plugins")) {
      for (const role of ROLES) {
        const session = sessions.get(role)!;
        const task = String(await invoke(ts, "task.create", [session, "probe", ""]));
        const query = new URLSearchParams({ session_id: session, task_id: task, uuid: "0", ref: "OpaqueRef:NULL", vdi: "OpaqueRef:NULL", sr_id: "OpaqueRef:NULL" });
        const response = await fetch(`${base}${action.path.slice(1)}${action.path === "/metrics" ? "/x" : ""}?${query}`, { method: action.method, body: action.method === "PUT" ? "" : undefined });
        const text = await response.text();
        if (allows(role, action.role)) {
          assert.notEqual(response.status, 403, `${action.method} ${action.path} as ${role}: ${text}`);
        } else {
          assert.equal(response.status, 403, `${action.method} ${action.path} as ${role}: ${text}`);
          assert.equal(text, `RBAC_PERMISSION_DENIED ${action.permission} No permission in user session. (Roles with this permission: ${rolesWith(action.role).join(", ")})\n`);
          const record = (await invoke(ts, "task.get_record", [session, task])) as { status: string; error_info: string[] };
          assert.equal(record.status, "failure");
          assert.equal(record.error_info[0], "RBAC_PERMISSION_DENIED");
        }
      }
    }
  });

  test("a plugin call that changes storage is the pool administrator's; one that reads is anyone's", async () => {
    const call = (session: string, method: string) =>
      fetch(`${toolstack.client.url}/plugins/volume/org.xen.xapi.storage.file?session_id=${session}`, { method: "POST", body: JSON.stringify({ method, params: [{ dbg: "t", uri: "file:///nowhere" }], id: 1 }) });
    const reading = await call(sessions.get("read-only")!, "Plugin.query");
    assert.equal(reading.status, 200, await reading.text());
    for (const role of ROLES) {
      const writing = await call(sessions.get(role)!, "SR.destroy");
      assert.equal(writing.status === 403, role !== "pool-admin", `SR.destroy relayed as ${role}: ${writing.status}`);
    }
  });

  test("role.*: the six roles with xapi's uuids, their permissions, and who holds a permission", async () => {
    const session = sessions.get("read-only")!;
    const [poolAdmin] = (await invoke(ts, "role.get_by_name_label", [session, "pool-admin"])) as string[];
    assert.equal(poolAdmin, "OpaqueRef:0165f154-ba3e-034e-6b27-5d271af109ba", "xapi's constant");
    const records = (await invoke(ts, "role.get_all_records", [session])) as Record<string, { name_label: string; is_internal: boolean; subroles: string[] }>;
    const roles = Object.values(records).filter((r) => !r.is_internal).map((r) => r.name_label);
    assert.deepEqual(roles, [...ROLES]);
    const readOnly = (await invoke(ts, "role.get_permissions_name_label", [session, refOf("read-only")])) as string[];
    assert.ok(readOnly.includes("vm.get_record") && !readOnly.includes("vm.destroy"));
    const [destroy] = (await invoke(ts, "role.get_by_name_label", [session, "vm.destroy"])) as string[];
    const holders = (await invoke(ts, "role.get_by_permission", [session, destroy])) as string[];
    assert.deepEqual(holders, rolesWith("vm-admin").map(refOf));
    assert.deepEqual(await invoke(ts, "role.get_by_permission_name_label", [session, "http/put_import"]), rolesWith("vm-admin").map(refOf));
    assert.deepEqual(await invoke(ts, "role.get_by_name_label", [session, "VM.destroy"]), [], "names are lower-case, as in xapi");
  });

  test("the session record says who it is: root the local superuser; a user their subject, name and permissions", async () => {
    const rootRecord = (await invoke(ts, "session.get_record", [root, root])) as Record<string, unknown>;
    assert.equal(rootRecord.is_local_superuser, true);
    assert.deepEqual(rootRecord.rbac_permissions, []);
    const { subject, session } = await userWith(ts, root, "vm-operator", "alice");
    const record = (await invoke(ts, "session.get_record", [session, session])) as Record<string, unknown>;
    assert.equal(record.is_local_superuser, false);
    assert.equal(record.subject, subject);
    assert.equal(record.auth_user_name, "alice");
    assert.equal(record.auth_user_sid, "local:alice");
    const permissions = record.rbac_permissions as string[];
    assert.equal(permissions[0], "vm-operator");
    assert.ok(permissions.includes("vdi.list_changed_blocks") && !permissions.includes("vm.create"));
  });
});

describe("local users", () => {
  let toolstack: TestToolstack;
  let ts: Toolstack;
  let root: string;
  before(async () => {
    toolstack = await startTestToolstack();
    ts = toolstack.service.ts;
    root = toolstack.client.session;
  });
  after(() => toolstack.stop());

  const login = (name: string, password = PASSWORD) => invoke(ts, "session.login_with_password", [name, password]);
  const alive = async (session: string) => (await outcome(invoke(ts, "session.get_uuid", [session, session]))) === "ok";

  test("a user with no role cannot log in; with one, their sessions end when it changes, when disabled, when removed", async () => {
    const subject = String(await invoke(ts, "subject.hangar_create_local", [root, "bob", PASSWORD]));
    const none = await outcome(login("bob"));
    assert.ok(none !== "ok");
    assert.deepEqual(none.description, ["RBAC_PERMISSION_DENIED", "session.login_with_password", "Subject bob (identifier local:bob) has no roles in this pool"]);
    await invoke(ts, "subject.add_to_roles", [root, subject, refOf("vm-admin")]);
    const first = String(await login("bob"));
    await invoke(ts, "subject.add_to_roles", [root, subject, refOf("read-only")]);
    assert.equal(await alive(first), false, "a change of roles ends the sessions that held the old ones");
    const second = String(await login("bob"));
    assert.equal(((await invoke(ts, "session.get_record", [second, second])) as { rbac_permissions: string[] }).rbac_permissions[0], "vm-admin", "the highest of its roles");
    await invoke(ts, "subject.hangar_set_disabled", [root, subject, true]);
    assert.equal(await alive(second), false, "disabled: its sessions end");
    const disabled = await outcome(login("bob"));
    assert.ok(disabled !== "ok" && disabled.code === "SESSION_AUTHORIZATION_FAILED", "a disabled subject lets nobody in");
    await invoke(ts, "subject.hangar_set_disabled", [root, subject, false]);
    const third = String(await login("bob"));
    await invoke(ts, "subject.destroy", [root, subject]);
    assert.equal(await alive(third), false, "removed: its sessions end");
    const gone = await outcome(login("bob"));
    assert.ok(gone !== "ok" && gone.code === "SESSION_AUTHENTICATION_FAILED", "and its password with it");
  });

  test("passwords: a user changes their own (the old one checked), a pool administrator resets one; never answered", async () => {
    const { subject, session } = await userWith(ts, root, "read-only", "carol");
    const wrong = await outcome(invoke(ts, "session.change_password", [session, "not it", "new-password-1"]));
    assert.ok(wrong !== "ok" && wrong.code === "CHANGE_PASSWORD_REJECTED");
    const short = await outcome(invoke(ts, "session.change_password", [session, PASSWORD, "short"]));
    assert.ok(short !== "ok" && short.code === "CHANGE_PASSWORD_REJECTED");
    await invoke(ts, "session.change_password", [session, PASSWORD, "new-password-1"]);
    assert.equal(await alive(session), true, "the session that changed it goes on");
    await login("carol", "new-password-1");
    const denied = await outcome(invoke(ts, "subject.hangar_set_password", [session, subject, "by-herself-1"]));
    assert.ok(denied !== "ok" && denied.code === "RBAC_PERMISSION_DENIED", "a reset is the pool administrator's");
    await invoke(ts, "subject.hangar_set_password", [root, subject, "reset-by-admin"]);
    assert.equal(await alive(session), false, "a reset ends the user's sessions");
    await login("carol", "reset-by-admin");
    const record = JSON.stringify(await invoke(ts, "subject.get_all_records", [root]));
    assert.ok(!record.includes("scrypt") && !record.includes("reset-by-admin"), "no hash or password in a subject's record");
  });

  test("names are checked; a second user of a name is refused; root stays root", async () => {
    for (const name of ["root", "", "a b", "x:y", "../etc"]) {
      const got = await outcome(invoke(ts, "subject.hangar_create_local", [root, name, PASSWORD]));
      assert.ok(got !== "ok" && got.code === "INVALID_VALUE", JSON.stringify(name));
    }
    await invoke(ts, "subject.hangar_create_local", [root, "dave", PASSWORD]);
    const twice = await outcome(invoke(ts, "subject.hangar_create_local", [root, "dave", PASSWORD]));
    assert.ok(twice !== "ok" && twice.code === "SUBJECT_ALREADY_EXISTS");
    // A wrong password and a user that does not exist answer alike (and do the same scrypt work).
    const wrong = await outcome(login("dave", "not dave's"));
    const unknown = await outcome(login("nobody-at-all", "whatever"));
    assert.ok(wrong !== "ok" && unknown !== "ok");
    assert.deepEqual([wrong.code, wrong.params[1]], [unknown.code, unknown.params[1]]);
    await login("root", ROOT_PASSWORD);
  });

  test("tasks: their owner (any of their sessions) may cancel and destroy them; others need a pool operator's role", async () => {
    const owner = await userWith(ts, root, "read-only", "erin");
    const other = await userWith(ts, root, "vm-admin", "frank");
    const task = String(await invoke(ts, "task.create", [owner.session, "erin's", ""]));
    const refused = await outcome(invoke(ts, "task.destroy", [other.session, task]));
    assert.ok(refused !== "ok");
    assert.deepEqual(refused.description, ["RBAC_PERMISSION_DENIED", "task.destroy/any", "No permission in user session. (Roles with this permission: pool-admin, pool-operator)"]);
    const again = String(await login("erin"));
    await invoke(ts, "task.cancel", [again, task]);
    await invoke(ts, "task.destroy", [again, task]);
  });

  test("a role that does not exist is refused; the last pool-admin cannot be removed, disabled or demoted", async () => {
    const { subject } = await userWith(ts, root, "pool-admin", "hana");
    const bogus = await outcome(invoke(ts, "subject.add_to_roles", [root, subject, "OpaqueRef:00000000-0000-0000-0000-000000000000"]));
    assert.ok(bogus !== "ok" && bogus.code === "ROLE_NOT_FOUND");
    const permission = ((await invoke(ts, "role.get_by_name_label", [root, "vm.destroy"])) as string[])[0]!;
    const notARole = await outcome(invoke(ts, "subject.add_to_roles", [root, subject, permission]));
    assert.ok(notARole !== "ok" && notARole.code === "ROLE_NOT_FOUND", "a permission is no role to give");
    for (const [call, args] of [
      ["subject.destroy", [subject]],
      ["subject.hangar_set_disabled", [subject, true]],
      ["subject.remove_from_roles", [subject, refOf("pool-admin")]],
    ] as const) {
      const refused = await outcome(invoke(ts, call, [root, ...args]));
      assert.ok(refused !== "ok" && refused.code === "OPERATION_NOT_ALLOWED", `${call}: ${JSON.stringify(refused)}`);
      assert.match(refused.params[0]!, /^hana is the last user or group holding pool-admin/);
    }
    const second = await userWith(ts, root, "pool-admin", "ivan");
    await invoke(ts, "subject.destroy", [root, subject]);
    const last = await outcome(invoke(ts, "subject.destroy", [root, second.subject]));
    assert.ok(last !== "ok" && last.code === "OPERATION_NOT_ALLOWED", "now ivan is the last one");
  });

  test("logins are limited: after five wrong passwords for a user, the next waits, said in seconds", async () => {
    await userWith(ts, root, "read-only", "grace");
    for (let i = 0; i < 5; i++) await outcome(login("grace", "wrong"));
    const waiting = await outcome(login("grace"));
    assert.ok(waiting !== "ok" && waiting.code === "SESSION_AUTHENTICATION_FAILED");
    assert.match(waiting.params[1]!, /^Too many failed logins: try again in \d+ s\.$/);
  });
});
