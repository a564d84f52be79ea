// Logging in (xapi_session.ml): root with its local password is the local superuser; a local user with theirs;
// anyone else through the directory, when external authentication is on. A user's role is the highest of the
// roles of every subject that lets them in (their own, their groups'), computed now, as xapi does. Failed
// logins are counted per user and per client address (login-limiter.ts) and every attempt is audited.
import type { Session, Identity } from "../sessions.ts";
import type { Toolstack } from "../toolstack.ts";
import { XenApiError, xenErrors } from "../../xenapi/errors.ts";
import { tooManyFailures } from "../../login-limiter.ts";
import { errorCode } from "./audit.ts";
import { authenticate } from "./directory.ts";
import { currentDirectory, directoryFailure } from "./external-auth.ts";
import { highest } from "./roles.ts";
import { isDisabled, LOCAL_PREFIX, subjectRoles, subjectsFor } from "./subjects.ts";

export const loginErrors = {
  /** Known, but no subject lets them in (or theirs is disabled). */
  notAuthorized: (user: string, identifier: string) => new XenApiError("SESSION_AUTHORIZATION_FAILED", [user, `Subject ${user} (identifier ${identifier}) has no access rights in this pool`]),
  noRoles: (user: string, identifier: string) => new XenApiError("RBAC_PERMISSION_DENIED", ["session.login_with_password", `Subject ${user} (identifier ${identifier}) has no roles in this pool`]),
  wait: (user: string, seconds: number) => new XenApiError("SESSION_AUTHENTICATION_FAILED", [user, tooManyFailures(seconds)]),
};

/** Who `user` is once their password is checked: an identity for a session, or the reason they are not let in. */
async function identify(ts: Toolstack, user: string, password: string): Promise<Identity> {
  if (user === "root" || (await ts.sessions.hasLocalUser(user))) {
    if (!(await ts.sessions.verifyLocal(user, password))) throw xenErrors.sessionAuthenticationFailed(user);
    if (user === "root") return { userName: user, superuser: true, role: null, authUserSid: "", subjects: [] };
    return admitted(ts, user, `${LOCAL_PREFIX}${user}`, []);
  }
  const directory = await currentDirectory(ts);
  if (directory === undefined) {
    // As slow as a wrong password for a user that exists.
    await ts.sessions.verifyLocal(user, password);
    throw xenErrors.sessionAuthenticationFailed(user);
  }
  const found = await authenticate(directory, user, password).catch((error: unknown) => {
    throw directoryFailure(error);
  });
  if (found === undefined) {
    // The same work as a local user's wrong password, which dwarfs the directory's round trips: whether the
    // directory knows the name does not show in the time the answer takes.
    await ts.sessions.verifyLocal(user, password);
    throw xenErrors.sessionAuthenticationFailed(user);
  }
  return admitted(ts, found.name, found.dn, found.groups);
}

/** The identity of a user whose password was checked: the subjects of `identifier` and `groups` must let them in. */
async function admitted(ts: Toolstack, user: string, identifier: string, groups: readonly string[]): Promise<Identity> {
  const subjects = (await subjectsFor(ts, [identifier, ...groups])).filter((s) => !isDisabled(s.record));
  if (subjects.length === 0) throw loginErrors.notAuthorized(user, identifier);
  const role = highest(subjects.flatMap((s) => subjectRoles(s.record)));
  if (role === undefined) throw loginErrors.noRoles(user, identifier);
  return { userName: user, superuser: false, role, authUserSid: identifier, subjects: subjects.map((s) => s.ref) };
}

/** session.login_with_password and HTTP Basic: a new session, or the reason none is made. */
export async function logIn(ts: Toolstack, user: string, password: string, originator: string, client: string): Promise<Session> {
  const wait = ts.logins.waitSeconds(user, client);
  const attempt = { session: null, user, client, kind: "API" as const, action: "session.login_with_password", args: [["uname", user] as [string, string], ["originator", originator] as [string, string]] };
  if (wait > 0) {
    await ts.audit.record({ ...attempt, decision: "DENIED" });
    throw loginErrors.wait(user, wait);
  }
  let session: Session;
  try {
    session = await ts.sessions.open(await identify(ts, user, password), originator);
  } catch (error) {
    // A directory that cannot be asked is not the user's failure.
    if (!(error instanceof XenApiError && error.code === "AUTH_SERVICE_ERROR")) ts.logins.failed(user, client);
    await ts.audit.record({ ...attempt, decision: "ALLOWED", error: errorCode(error) });
    throw error;
  }
  ts.logins.succeeded(user, client);
  await ts.audit.record({ ...attempt, session, decision: "ALLOWED" });
  return session;
}
