"use server";

import { cookies, headers } from "next/headers";
import { redirect } from "next/navigation";
import { z } from "zod";
import type { LogInState } from "@/components/auth/login-form.tsx";
import { isSafeNext } from "@/server/auth/current.ts";
import { browserAddress, consoleLogins, LoginError, SESSION_COOKIE, cookieAttributes, logIn, logOut, sessionFromCookie } from "@/server/auth/session.ts";
import { tooManyFailures } from "@/server/login-limiter.ts";

const ZLogInSchema = z.object({
  user: z.string().trim().min(1, "Enter a user name."),
  password: z.string().min(1, "Enter the password."),
  next: z.string().optional(),
});

export async function logInAction(_previous: LogInState, form: FormData): Promise<LogInState> {
  const parsed = ZLogInSchema.safeParse({ user: form.get("user"), password: form.get("password"), next: form.get("next") ?? undefined });
  if (!parsed.success) return { error: parsed.error.issues[0]?.message ?? "Fill in the form.", user: String(form.get("user") ?? "") };
  const { user, password, next } = parsed.data;
  const requestHeaders = await headers();
  // (A client may name another address than its own here: the per-user limit holds whatever it says.)
  const client = browserAddress(requestHeaders);
  const wait = consoleLogins.waitSeconds(user, client);
  if (wait > 0) return { error: tooManyFailures(wait), user };
  let cookie: string;
  try {
    ({ cookie } = await logIn(user, password, client));
  } catch (error) {
    if (error instanceof LoginError) {
      if (error.countsAsFailure) consoleLogins.failed(user, client);
      return { error: error.message, user };
    }
    throw error;
  }
  consoleLogins.succeeded(user, client);
  const secure = requestHeaders.get("x-forwarded-proto") === "https";
  (await cookies()).set(SESSION_COOKIE, cookie, cookieAttributes(secure));
  redirect(next !== undefined && isSafeNext(next) ? next : "/");
}

export async function logOutAction(): Promise<void> {
  const jar = await cookies();
  const session = sessionFromCookie(jar.get(SESSION_COOKIE)?.value);
  if (session !== undefined) await logOut(session);
  jar.delete(SESSION_COOKIE);
  redirect("/login");
}
