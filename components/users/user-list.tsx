"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useId, useState } from "react";
import { ROLES, type Role } from "@/lib/roles.ts";
import { plural } from "@/lib/format.ts";
import { useVerdict } from "@/components/access/use-verdict.tsx";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Badge } from "@/components/ui/badge.tsx";
import { Button } from "@/components/ui/button.tsx";
import { ConfirmDialog } from "@/components/ui/confirm-dialog.tsx";
import { DeniedTooltip } from "@/components/ui/denied-tooltip.tsx";
import { selectClasses } from "@/components/ui/field.tsx";
import type { TSubject } from "@/server/api/users/schema.ts";
import { ResetPasswordDialog } from "./reset-password-dialog.tsx";

const KIND = { local: "Local user", ldap: "Directory user" } as const;

/** Every subject with its role, status and actions; what the caller's role cannot do is disabled, saying why. */
export function UserList({ subjects }: { subjects: TSubject[] }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const managing = useVerdict("users.manage");
  const [removing, setRemoving] = useState<TSubject | null>(null);
  const [resetting, setResetting] = useState<TSubject | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const refresh = () => queryClient.invalidateQueries({ queryKey: trpc.users.list.queryKey() });
  const onError = (error: { message: string }) => setFailure(error.message);
  const setRole = useMutation(trpc.users.setRole.mutationOptions({ onSettled: refresh, onError }));
  const setDisabled = useMutation(trpc.users.setDisabled.mutationOptions({ onSettled: refresh, onError }));
  const remove = useMutation(trpc.users.remove.mutationOptions({ onSettled: refresh, onSuccess: () => setRemoving(null) }));

  if (subjects.length === 0) return <p className="text-sm text-zinc-600 dark:text-zinc-400">Nobody but root may log in yet: add a local user or a directory user or group below.</p>;
  return (
    <div className="flex min-w-0 flex-col gap-3">
      {failure ? (
        <Alert tone="error" title="The toolstack refused">
          {failure}
        </Alert>
      ) : null}
      <div className="overflow-x-auto">
        <table className="w-full min-w-[40rem] text-left text-sm">
          <caption className="sr-only">Users and groups who may log in, with their roles</caption>
          <thead className="border-b border-zinc-200 text-xs text-zinc-500 dark:border-zinc-800 dark:text-zinc-400">
            <tr>
              {["Name", "Kind", "Role", "Status"].map((head) => (
                <th key={head} scope="col" className="py-2 pr-3 font-medium">
                  {head}
                </th>
              ))}
              <th scope="col" className="py-2 font-medium">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody className="divide-y divide-zinc-100 dark:divide-zinc-800">
            {subjects.map((subject) => (
              <tr key={subject.ref}>
                <td className="py-2.5 pr-3 align-top">
                  <div className="font-medium text-zinc-900 dark:text-zinc-100">{subject.name}</div>
                  {subject.source === "ldap" ? <div className="font-mono text-xs break-all text-zinc-500 dark:text-zinc-400">{subject.identifier}</div> : null}
                </td>
                <td className="py-2.5 pr-3 align-top text-zinc-700 dark:text-zinc-300">{subject.isGroup ? "Directory group" : KIND[subject.source]}</td>
                <td className="py-2.5 pr-3 align-top">
                  <RoleSelect subject={subject} denied={managing.reason} pending={setRole.isPending} onChange={(role) => setRole.mutate({ subject: subject.ref, role })} />
                </td>
                <td className="py-2.5 pr-3 align-top">
                  <div className="flex flex-col items-start gap-1">
                    {subject.disabled ? <Badge tone="warning">Disabled</Badge> : <Badge tone="success">Enabled</Badge>}
                    {subject.sessions > 0 ? <span className="text-xs text-zinc-500 dark:text-zinc-400">{plural(subject.sessions, "session")} now</span> : null}
                  </div>
                </td>
                <td className="py-2.5 align-top">
                  <div className="flex flex-wrap justify-end gap-1.5">
                    {subject.source === "local" ? (
                      <Button size="sm" variant="secondary" deniedReason={managing.reason} onClick={() => setResetting(subject)} aria-label={`Reset the password of ${subject.name}`}>
                        Reset password
                      </Button>
                    ) : null}
                    <Button
                      size="sm"
                      variant="secondary"
                      deniedReason={managing.reason}
                      disabled={setDisabled.isPending}
                      onClick={() => setDisabled.mutate({ subject: subject.ref, disabled: !subject.disabled })}
                      aria-label={`${subject.disabled ? "Enable" : "Disable"} ${subject.name}`}
                    >
                      {subject.disabled ? "Enable" : "Disable"}
                    </Button>
                    <Button size="sm" variant="ghost" className="text-red-700! dark:text-red-400!" deniedReason={managing.reason} onClick={() => setRemoving(subject)} aria-label={`Remove ${subject.name}`}>
                      Remove
                    </Button>
                  </div>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <ConfirmDialog
        open={removing !== null}
        title={`Remove ${removing?.name ?? ""}?`}
        body={removing?.source === "local" ? "The local user and their password go; their sessions end now." : "Nobody logs in through this subject any more; the sessions it let in end now. The directory is not changed."}
        confirmLabel="Remove"
        pending={remove.isPending}
        error={remove.error?.message}
        onConfirm={() => removing !== null && remove.mutate({ subject: removing.ref })}
        onCancel={() => {
          remove.reset();
          setRemoving(null);
        }}
      />
      {resetting !== null ? <ResetPasswordDialog subject={resetting} onClose={() => setResetting(null)} /> : null}
    </div>
  );
}

function RoleSelect({ subject, denied, pending, onChange }: { subject: TSubject; denied: string | undefined; pending: boolean; onChange: (role: Role | null) => void }) {
  const label = `Role of ${subject.name}`;
  const reasonId = useId();
  return (
    <div className="group relative inline-flex">
      <select
        aria-label={label}
        aria-disabled={denied === undefined ? undefined : "true"}
        aria-describedby={denied === undefined ? undefined : reasonId}
        disabled={pending}
        value={subject.role ?? ""}
        // A role the user may not give stays as it is: the select is read-only for them, its reason on hover and focus.
        onChange={(event) => denied === undefined && onChange(event.target.value === "" ? null : (event.target.value as Role))}
        className={selectClasses + (denied === undefined ? "" : " cursor-not-allowed opacity-60")}
      >
        <option value="">No role (cannot log in)</option>
        {ROLES.map((role) => (
          <option key={role} value={role}>
            {role}
          </option>
        ))}
      </select>
      {denied === undefined ? null : <DeniedTooltip id={reasonId} reason={denied} />}
    </div>
  );
}
