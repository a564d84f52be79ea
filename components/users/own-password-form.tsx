"use client";

import { useMutation } from "@tanstack/react-query";
import { useState } from "react";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Button } from "@/components/ui/button.tsx";
import { TextField } from "@/components/ui/text-field.tsx";

/** The logged-in user's own password (root's or a local user's), the old one asked first. */
export function OwnPasswordForm() {
  const trpc = useTRPC();
  const [old, setOld] = useState("");
  const [next, setNext] = useState("");
  const [again, setAgain] = useState("");
  const [checked, setChecked] = useState(false);
  const change = useMutation(
    trpc.users.changeOwnPassword.mutationOptions({
      onSuccess: () => {
        setOld("");
        setNext("");
        setAgain("");
        setChecked(false);
      },
    }),
  );
  const mismatch = checked && next !== again ? "The two new passwords differ." : undefined;
  const short = checked && next.length < 8 ? "A password needs at least 8 characters." : undefined;
  return (
    <form
      aria-label="Change your password"
      noValidate
      className="flex flex-col gap-3"
      onSubmit={(event) => {
        event.preventDefault();
        setChecked(true);
        if (next === again && next.length >= 8) change.mutate({ old, new: next });
      }}
    >
      <div className="grid gap-3 sm:grid-cols-3">
        <TextField label="Current password" type="password" autoComplete="current-password" value={old} onChange={setOld} />
        <TextField label="New password" type="password" autoComplete="new-password" value={next} onChange={setNext} error={short} />
        <TextField label="New password again" type="password" autoComplete="new-password" value={again} onChange={setAgain} error={mismatch} />
      </div>
      {change.error ? <Alert tone="error">{change.error.message}</Alert> : null}
      {change.isSuccess ? (
        <p role="status" className="text-sm text-emerald-700 dark:text-emerald-400">
          Your password is changed; your other sessions have ended.
        </p>
      ) : null}
      <div>
        <Button type="submit" variant="secondary" disabled={change.isPending} aria-busy={change.isPending}>
          Change password
        </Button>
      </div>
    </form>
  );
}
