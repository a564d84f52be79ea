// session.*: log in (2 or 4 parameters, as clients send them; rbac/login.ts), log out, the session's own record
// with who it is (xapi's RBAC fields), a user's own password, and the pool operator's view of who is logged in.
import { method } from "../methods.ts";
import { zRef, zString } from "../../xenapi/params.ts";
import { XenApiError, xenErrors } from "../../xenapi/errors.ts";
import { xenDate } from "../../xenapi/values.ts";
import { logIn } from "../rbac/login.ts";
import { permissionNames } from "../rbac/role-calls.ts";
import { checkPassword, LOCAL_PREFIX } from "../rbac/subjects.ts";

export const sessionCalls = [
  // 2 parameters, or 4 (version, originator) as newer clients send them.
  method(
    "session.login_with_password",
    [["uname", zString], ["pwd", zString], ["version", zString], ["originator", zString]],
    async ({ ts, client }, user, pwd, _version, originator) => (await logIn(ts, user, pwd, originator ?? "", client)).ref,
    { session: false, optional: 2 },
  ),
  method("session.logout", [], async ({ ts, session }) => {
    await ts.sessions.logout(session!.ref);
  }),
  method("session.get_record", [["self", zRef]], async ({ ts, session }, ref) => {
    if (ref !== session!.ref) throw xenErrors.handleInvalid("session", ref);
    const { role } = session!;
    return {
      uuid: session!.uuid,
      this_host: ts.host.ref,
      this_user: "OpaqueRef:NULL",
      last_active: xenDate(new Date(session!.lastActive)),
      pool: false,
      other_config: {},
      is_local_superuser: session!.superuser,
      subject: session!.subjects[0] ?? "OpaqueRef:NULL",
      validation_time: session!.created,
      auth_user_sid: session!.authUserSid,
      auth_user_name: session!.userName,
      // As xapi: the role's name and its permissions' names; nothing for root, whom no role limits.
      rbac_permissions: role === null ? [] : [role, ...permissionNames(ts.methods, role)],
      tasks: [],
      parent: "OpaqueRef:NULL",
      originator: session!.originator,
      client_certificate: false,
    };
  }),
  method("session.get_uuid", [["self", zRef]], ({ session }) => session!.uuid),
  method("session.get_this_host", [["self", zRef]], ({ ts }) => ts.host.ref),
  // The caller's own password (root's or a local user's), checked first; their other sessions end.
  method("session.change_password", [["old_pwd", zString], ["new_pwd", zString]], async ({ ts, session }, oldPassword, newPassword) => {
    const { userName, superuser, authUserSid } = session!;
    if (!superuser && !authUserSid.startsWith(LOCAL_PREFIX)) throw new XenApiError("CHANGE_PASSWORD_REJECTED", ["a directory user's password is changed in the directory"]);
    if (!(await ts.sessions.verifyLocal(userName, oldPassword))) throw new XenApiError("CHANGE_PASSWORD_REJECTED", ["the old password is not right"]);
    if (!superuser) checkPassword(newPassword);
    else if (newPassword === "") throw new XenApiError("CHANGE_PASSWORD_REJECTED", ["root's password cannot be empty"]);
    await ts.sessions.setPassword(userName, newPassword);
    for (const other of await ts.sessions.all()) if (other.userName === userName && other.authUserSid === authUserSid && other.ref !== session!.ref) await ts.sessions.logout(other.ref);
  }),
  method("session.logout_subject_identifier", [["subject_identifier", zString]], async ({ ts, session }, identifier) => {
    await ts.sessions.logoutUser(identifier, session!.ref);
  }),
  method("session.get_all_subject_identifiers", [], async ({ ts }) => [...new Set((await ts.sessions.all()).filter((s) => !s.superuser).map((s) => s.authUserSid))]),
];
