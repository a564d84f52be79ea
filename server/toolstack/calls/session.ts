// session.*: log in with a user's password (2 or 4 parameters, as clients send them), log out, and the
// session's own record.
import { method } from "../methods.ts";
import { zRef, zString } from "../../xenapi/params.ts";
import { xenErrors } from "../../xenapi/errors.ts";
import { xenDate } from "../../xenapi/values.ts";

export const sessionCalls = [
  // 2 parameters, or 4 (version, originator) as newer clients send them.
  method(
    "session.login_with_password",
    [["uname", zString], ["pwd", zString], ["version", zString], ["originator", zString]],
    async ({ ts }, user, pwd, _version, originator) => (await ts.sessions.login(user, pwd, originator ?? "")).ref,
    { session: false, optional: 2 },
  ),
  method("session.logout", [], async ({ ts, session }) => {
    await ts.sessions.logout(session!.ref);
  }),
  method("session.get_record", [["self", zRef]], async ({ ts, session }, ref) => {
    if (ref !== session!.ref) throw xenErrors.handleInvalid("session", ref);
    return {
      uuid: session!.uuid,
      this_host: ts.host.ref,
      this_user: "OpaqueRef:NULL",
      last_active: xenDate(new Date(session!.lastActive)),
      pool: false,
      other_config: {},
      is_local_superuser: session!.userName === "root",
      subject: "OpaqueRef:NULL",
      validation_time: session!.created,
      auth_user_sid: "",
      auth_user_name: session!.userName,
      rbac_permissions: [],
      tasks: [],
      parent: "OpaqueRef:NULL",
      originator: session!.originator,
      client_certificate: false,
    };
  }),
  method("session.get_uuid", [["self", zRef]], ({ session }) => session!.uuid),
  method("session.get_this_host", [["self", zRef]], ({ ts }) => ts.host.ref),
];
