// The console's login: toolstack credentials buy a toolstack session, which the console keeps behind an
// httpOnly, SameSite=Strict cookie (sealed: the browser never sees the session reference). Every request
// carries it back; the toolstack stays the one judge of whether it is still valid.
import { z } from "zod";
import { toolstackUrl } from "../config.ts";
import { XenApiClient } from "../xenapi/client.ts";
import { XenApiError } from "../xenapi/errors.ts";
import { seal, unseal } from "./seal.ts";

export const SESSION_COOKIE = "hangar_session";
/** How long the browser keeps the cookie; the toolstack's idle timeout ends the session itself sooner. */
export const SESSION_COOKIE_MAX_AGE_S = 7 * 24 * 3600;

const ZConsoleSession = z.object({ session: z.string().startsWith("OpaqueRef:"), user: z.string(), since: z.number() });
export type ConsoleSession = z.infer<typeof ZConsoleSession>;

/** A login the user can act on: wrong credentials, or a toolstack that cannot be reached. */
export class LoginError extends Error {}

export async function logIn(user: string, password: string): Promise<{ cookie: string; session: ConsoleSession }> {
  let client: XenApiClient;
  try {
    client = await XenApiClient.login(toolstackUrl(), user, password, "hangar-console");
  } catch (error) {
    if (error instanceof XenApiError && error.code === "SESSION_AUTHENTICATION_FAILED") throw new LoginError("Wrong user name or password.");
    throw new LoginError(`The toolstack at ${toolstackUrl()} cannot be reached: ${(error as Error).message}`);
  }
  const session: ConsoleSession = { session: client.session, user, since: Date.now() };
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

export function clientFor(session: ConsoleSession): XenApiClient {
  return new XenApiClient(toolstackUrl(), session.session);
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
