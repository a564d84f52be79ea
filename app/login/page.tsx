import type { Metadata } from "next";
import { redirect } from "next/navigation";
import { LoginForm } from "@/components/auth/login-form.tsx";
import { currentSession, isSafeNext } from "@/server/auth/current.ts";
import { toolstackUrl } from "@/server/config.ts";
import { logInAction } from "./actions.ts";

export const metadata: Metadata = { title: "Log in" };

export default async function LoginPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const params = await searchParams;
  const next = typeof params.next === "string" && isSafeNext(params.next) ? params.next : undefined;
  if (params.reason !== "expired" && (await currentSession()) !== undefined) redirect(next ?? "/");
  return (
    <main id="main" className="grid min-h-dvh place-items-center px-4 py-10">
      <div className="w-full max-w-sm rounded-xl border border-zinc-200 bg-white p-6 shadow-sm dark:border-zinc-800 dark:bg-zinc-900">
        <div className="mb-6 flex items-center gap-2.5">
          <span aria-hidden="true" className="grid size-8 place-items-center rounded-md bg-zinc-900 text-sm font-bold text-white dark:bg-white dark:text-zinc-900">
            H
          </span>
          <div>
            <h1 className="text-lg font-semibold tracking-tight text-zinc-950 dark:text-white">Log in to Hangar</h1>
            <p className="text-xs text-zinc-500 dark:text-zinc-400">With the toolstack&apos;s credentials ({toolstackUrl()})</p>
          </div>
        </div>
        <LoginForm logIn={logInAction} next={next} notice={params.reason === "expired" ? "Your session has ended. Log in again." : undefined} />
      </div>
    </main>
  );
}
