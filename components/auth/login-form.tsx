"use client";

import { useActionState } from "react";
import { Button } from "@/components/ui/button.tsx";
import { expectLogin } from "@/components/trpc/trpc-provider.tsx";

const field =
  "mt-1.5 block h-10 w-full rounded-md border border-zinc-300 bg-white px-3 text-sm text-zinc-900 shadow-sm focus-visible:outline-2 focus-visible:outline-offset-0 focus-visible:outline-sky-600 dark:border-zinc-700 dark:bg-zinc-900 dark:text-zinc-100";

/** What a failed log-in gives back: why, and the user name to show again. */
export interface LogInState {
  error?: string;
  user?: string;
}

export interface LoginFormProps {
  /** The server action that logs in (redirects on success); passed by the page, so the form holds no server code. */
  logIn: (previous: LogInState, form: FormData) => Promise<LogInState>;
  next?: string;
  notice?: string;
}

export function LoginForm({ logIn, next, notice }: LoginFormProps) {
  const [state, action, pending] = useActionState(logIn, {});
  const message = state.error ?? notice;
  return (
    <form action={action} onSubmit={expectLogin} className="flex flex-col gap-4" aria-describedby={message ? "login-message" : undefined}>
      {next ? <input type="hidden" name="next" value={next} /> : null}
      {message ? (
        <p id="login-message" role="alert" className="rounded-md border border-red-200 bg-red-50 px-3 py-2 text-sm text-red-800 dark:border-red-900 dark:bg-red-950/50 dark:text-red-200">
          {message}
        </p>
      ) : null}
      <label className="text-sm font-medium text-zinc-800 dark:text-zinc-200">
        User name
        <input name="user" autoComplete="username" required defaultValue={state.user ?? "root"} className={field} />
      </label>
      <label className="text-sm font-medium text-zinc-800 dark:text-zinc-200">
        Password
        <input name="password" type="password" autoComplete="current-password" required autoFocus className={field} />
      </label>
      <Button type="submit" aria-busy={pending} disabled={pending} className="h-10">
        {pending ? "Logging in…" : "Log in"}
      </Button>
    </form>
  );
}
