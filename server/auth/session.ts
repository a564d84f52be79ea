// The console's login: toolstack credentials buy a toolstack session, which the console keeps behind an
// httpOnly, SameSite=Strict cookie (sealed: the browser never sees the session reference). Every request
// carries it back; the toolstack stays the one judge of whether it is still valid.
import { z } from "zod";
import { toolstackUrl } from "../config.ts";
import { XenApiClient } from "../xenapi/client.ts";
import { XenApiError } from "../xenapi/errors.ts";
import { isRole, ROLES } from "../../lib/roles.ts";
import { CONSOLE_LOGIN_LIMITS, LoginLimiter } from "../login-limiter.ts";
import { seal, unseal } from "./seal.ts";

export const SESSION_COOKIE = "hangar_session";
/** How long the browser keeps the cookie; the toolstack's idle timeout ends the session itself sooner. */
export const SESSION_COOKIE_MAX_AGE_S = 7 * 24 * 3600;

const ZConsoleSession = z.object({
  session: z.string().startsWith("OpaqueRef:"),
  user: z.string(),
  since: z.number(),
  /** The user's role at login (the toolstack ends the session if it changes); root is pool-admin and superuser. */
  role: z.enum(ROLES),
  superuser: z.boolean(),
});
export type ConsoleSession = z.infer<typeof ZConsoleSession>;

/** A login the user can act on: wrong credentials, or a toolstack that cannot be reached. */
export class LoginError extends Error {
  /** Whether it counts against the user and their address (a wrong password does; a toolstack down does not). */
  readonly countsAsFailure: boolean;
  constructor(message: string, countsAsFailure = false) {
    super(message);
    this.countsAsFailure = countsAsFailure;
  }
}

/** The console's failed logins, per user and per browser address (one console process). */
export const consoleLogins: LoginLimiter = ((globalThis as { __hangarConsoleLogins?: LoginLimiter }).__hangarConsoleLogins ??= new LoginLimiter(CONSOLE_LOGIN_LIMITS));

const ZSessionRecord = z.looseObject({ is_local_superuser: z.boolean(), auth_user_name: z.string(), rbac_permissions: z.array(z.string()) });

/** Why the toolstack would not let a user in, in words they can act on. */
function loginRefusal(error: unknown): LoginError {
  if (!(error instanceof XenApiError)) return new LoginError(`The toolstack at ${toolstackUrl()} cannot be reached: ${(error as Error).message}`);
  if (error.code === "SESSION_AUTHENTICATION_FAILED") return error.params[1]?.startsWith("Too many failed logins") ? new LoginError(error.params[1]) : new LoginError("Wrong user name or password.", true);
  if (error.code === "SESSION_AUTHORIZATION_FAILED") return new LoginError("This account may not use this pool: ask a pool administrator to add it (or one of its groups) on the Users page.", true);
  if (error.code === "RBAC_PERMISSION_DENIED") return new LoginError("This account has no role in this pool yet: ask a pool administrator to give it one on the Users page.", true);
  if (error.code === "AUTH_SERVICE_ERROR") return new LoginError(`The directory could not check the password: ${error.params[0] ?? ""}`);
  return new LoginError(`${error.code}: ${error.params.join(" ")}`);
}

export async function logIn(user: string, password: string, browser = ""): Promise<{ cookie: string; session: ConsoleSession }> {
  let client: XenApiClient;
  try {
    client = await XenApiClient.login(toolstackUrl(), user, password, "hangar-console", forwardedFor(browser));
  } catch (error) {
    throw loginRefusal(error);
  }
  const record = await client.call(ZSessionRecord, "session.get_record", client.session);
  const role = record.is_local_superuser ? "pool-admin" : record.rbac_permissions[0];
  if (role === undefined || !isRole(role)) throw new LoginError("The toolstack gave this session no role.");
  const session: ConsoleSession = { session: client.session, user: record.auth_user_name || user, since: Date.now(), role, superuser: record.is_local_superuser };
  return { cookie: seal(session), session };
}

/** Ends the toolstack session; a session already gone is no failure. */
export async function logOut(session: ConsoleSession): Promise<void> {
  await clientFor(session).logout();
}

/** The session a cookie value stands for, if it is one this console sealed. */
export function sessionFromCookie(value: string | undefined): ConsoleSession | undefined {
  if (value === undefined || value === "") return undefined;
  const parsed = ZConsoleSession.safeParse(unseal(value));
  return parsed.success ? parsed.data : undefined;
}

/** The console cookie out of a Cookie request header. */
export function sessionFromHeaders(headers: Headers): ConsoleSession | undefined {
  for (const part of (headers.get("cookie") ?? "").split(";")) {
    const at = part.indexOf("=");
    if (at > 0 && part.slice(0, at).trim() === SESSION_COOKIE) {
      // A value that does not even decode (mangled or forged) stands for no session, like one that does not unseal.
      try {
        return sessionFromCookie(decodeURIComponent(part.slice(at + 1).trim()));
      } catch (error) {
        if (error instanceof URIError) return undefined;
        throw error;
      }
    }
  }
  return undefined;
}

/**
 * The browser's address as Next.js gives it (X-Forwarded-For, which it sets to the socket's address unless a
 * proxy, or the client, sent one): what the console's login limit counts and the toolstack's audit names.
 */
export function browserAddress(headers: Headers): string {
  return (headers.get("x-forwarded-for") ?? "").split(",")[0]!.trim();
}

/** The header that tells the toolstack whom the console calls for (it believes it from its trusted proxies only). */
function forwardedFor(browser: string): Record<string, string> {
  return browser === "" ? {} : { "x-forwarded-for": browser };
}

/** A client on the user's session; `browser`, the browser's address, travels with every call for the audit trail. */
export function clientFor(session: ConsoleSession, browser = ""): XenApiClient {
  return new XenApiClient(toolstackUrl(), session.session, forwardedFor(browser));
}

/** Whether the toolstack still honours the session (false when it says SESSION_INVALID). */
export async function isSessionValid(session: ConsoleSession): Promise<boolean> {
  try {
    await clientFor(session).call(z.string(), "session.get_uuid", session.session);
    return true;
  } catch (error) {
    if (error instanceof XenApiError && error.code === "SESSION_INVALID") return false;
    throw error;
  }
}

export function cookieAttributes(secure: boolean) {
  return { httpOnly: true, sameSite: "strict" as const, secure, path: "/", maxAge: SESSION_COOKIE_MAX_AGE_S };
}
