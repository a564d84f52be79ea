import "server-only";

import { cookies, headers } from "next/headers";
import { redirect } from "next/navigation";
import { cache } from "react";
import { type ConsoleSession, SESSION_COOKIE, isSessionValid, sessionFromCookie } from "./session.ts";

/** Header the proxy sets to the requested path, so a page sending its caller to log in can send them back. */
export const PATH_HEADER = "x-hangar-path";

/** The login page's address, returning to `next` afterwards (only same-site paths are kept). */
export function loginPath(next?: string, reason?: "expired"): string {
  const query = new URLSearchParams();
  if (next !== undefined && isSafeNext(next) && next !== "/") query.set("next", next);
  if (reason !== undefined) query.set("reason", reason);
  const text = query.toString();
  return text === "" ? "/login" : `/login?${text}`;
}

/** A path this site may send a user to after login: local, never another origin (`//host`) or the login itself. */
export function isSafeNext(next: string): boolean {
  return next.startsWith("/") && !next.startsWith("//") && !next.startsWith("/\\") && !next.startsWith("/login");
}

/** The session of this request's cookie (one read per render). */
export const currentSession = cache(async (): Promise<ConsoleSession | undefined> => sessionFromCookie((await cookies()).get(SESSION_COOKIE)?.value));

/**
 * The logged-in session, or a redirect to the login page and back. A session the toolstack no longer honours
 * counts as none; a toolstack that does not answer lets the page render, so it can say so where the user is.
 */
export async function requireSession(): Promise<ConsoleSession> {
  const session = await currentSession();
  const here = (await headers()).get(PATH_HEADER) ?? "/";
  if (session === undefined) redirect(loginPath(here));
  const valid = await isSessionValid(session).catch(() => true);
  if (!valid) redirect(loginPath(here, "expired"));
  return session;
}
