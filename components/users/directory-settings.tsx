"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { useVerdict } from "@/components/access/use-verdict.tsx";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Button } from "@/components/ui/button.tsx";
import { ConfirmDialog } from "@/components/ui/confirm-dialog.tsx";
import { TextField } from "@/components/ui/text-field.tsx";
import type { TDirectorySettings, TListUsersResponse } from "@/server/api/users/schema.ts";

const EMPTY: TDirectorySettings = {
  serviceName: "",
  url: "ldaps://",
  starttls: true,
  caCert: "",
  bindDn: "",
  bindPassword: "",
  userBase: "",
  userFilter: "(objectClass=person)",
  userNameAttribute: "uid",
  groupBase: "",
  groupFilter: "(|(objectClass=groupOfNames)(objectClass=groupOfUniqueNames))",
};

/** The pool's LDAP directory: its settings (tested before they are saved), on or off. */
export function DirectorySettings({ directory }: { directory: TListUsersResponse["directory"] }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const configuring = useVerdict("users.directory");
  const [form, setForm] = useState<TDirectorySettings>(EMPTY);
  const [confirmOff, setConfirmOff] = useState(false);
  const refresh = () => queryClient.invalidateQueries({ queryKey: trpc.users.list.queryKey() });
  const test = useMutation(trpc.users.testDirectory.mutationOptions());
  const enable = useMutation(trpc.users.enableDirectory.mutationOptions({ onSuccess: refresh }));
  const disable = useMutation(trpc.users.disableDirectory.mutationOptions({ onSuccess: () => void refresh().then(() => setConfirmOff(false)) }));
  const set = (key: keyof TDirectorySettings) => (value: string) => setForm((f) => ({ ...f, [key]: value }));
  const fieldErrors = (test.error ?? enable.error)?.data?.zodError?.fieldErrors as Record<string, string[] | undefined> | undefined;
  const failure = fieldErrors === undefined ? (enable.error ?? test.error)?.message : undefined;

  if (directory.enabled) {
    return (
      <div className="flex flex-col gap-3 text-sm">
        <p className="text-zinc-700 dark:text-zinc-300">
          Users of <span className="font-medium">{directory.serviceName}</span> log in with their directory passwords, as the subjects above let them.
        </p>
        <dl className="grid grid-cols-1 gap-x-6 gap-y-1.5 sm:grid-cols-[max-content_1fr]">
          {Object.entries(directory.config).map(([key, value]) => (
            <div key={key} className="contents">
              <dt className="text-zinc-500 dark:text-zinc-400">{key}</dt>
              <dd className="font-mono text-xs break-all text-zinc-800 dark:text-zinc-200">{key === "ca_cert" ? `${value.split("\n").length} lines of PEM` : value}</dd>
            </div>
          ))}
        </dl>
        <div>
          <Button variant="secondary" deniedReason={configuring.reason} onClick={() => setConfirmOff(true)}>
            Turn the directory off
          </Button>
        </div>
        <ConfirmDialog
          open={confirmOff}
          title="Turn the directory off?"
          body="Its users are logged out now and cannot log in until it is on again. Local users and root are not affected."
          confirmLabel="Turn off"
          pending={disable.isPending}
          error={disable.error?.message}
          onConfirm={() => disable.mutate()}
          onCancel={() => setConfirmOff(false)}
        />
      </div>
    );
  }
  return (
    <form
      aria-label="Directory settings"
      noValidate
      className="flex flex-col gap-3"
      onSubmit={(event) => {
        event.preventDefault();
        if (configuring.allowed) enable.mutate(form);
      }}
    >
      <p className="text-sm text-zinc-600 dark:text-zinc-400">
        Off: only root and local users log in. To let a directory&apos;s users in, fill in how to reach it, test the connection, then turn it on.
      </p>
      <div className="grid gap-3 sm:grid-cols-2">
        <TextField label="Name" hint="What to call it, e.g. its domain." value={form.serviceName} onChange={set("serviceName")} error={fieldErrors?.serviceName?.[0]} />
        <TextField label="Server URL" hint="ldaps://host:636, or ldap://host:389 with StartTLS." value={form.url} onChange={set("url")} error={fieldErrors?.url?.[0]} />
        <TextField label="Service account DN" autoComplete="off" value={form.bindDn} onChange={set("bindDn")} error={fieldErrors?.bindDn?.[0]} />
        <TextField label="Service account password" type="password" autoComplete="new-password" value={form.bindPassword} onChange={set("bindPassword")} error={fieldErrors?.bindPassword?.[0]} />
        <TextField label="Users base DN" value={form.userBase} onChange={set("userBase")} error={fieldErrors?.userBase?.[0]} />
        <TextField label="User filter" value={form.userFilter} onChange={set("userFilter")} />
        <TextField label="Login name attribute" hint="uid on OpenLDAP, sAMAccountName on Active Directory." value={form.userNameAttribute} onChange={set("userNameAttribute")} />
        <TextField label="Groups base DN" hint="Leave empty to ignore groups." value={form.groupBase} onChange={set("groupBase")} />
        <TextField label="Group filter" value={form.groupFilter} onChange={set("groupFilter")} className="sm:col-span-2" />
        <TextField label="CA certificate (PEM)" hint="The certificate the server's is signed with, when it is not one this machine trusts." value={form.caCert} onChange={set("caCert")} rows={4} className="sm:col-span-2" />
      </div>
      <label className="flex items-center gap-2 text-sm text-zinc-700 dark:text-zinc-300">
        <input type="checkbox" checked={form.starttls} onChange={(event) => setForm((f) => ({ ...f, starttls: event.target.checked }))} className="size-4" />
        StartTLS on an ldap:// URL (off only for a directory on this machine: the passwords would cross the network in clear)
      </label>
      {failure ? <Alert tone="error">{failure}</Alert> : null}
      {test.data ? (
        <p role="status" className="text-sm text-emerald-700 dark:text-emerald-400">
          {test.data.message}
        </p>
      ) : null}
      <div className="flex flex-wrap gap-2">
        <Button variant="secondary" deniedReason={configuring.reason} disabled={test.isPending} aria-busy={test.isPending} onClick={() => test.mutate(form)}>
          {test.isPending ? "Testing…" : "Test connection"}
        </Button>
        <Button type="submit" deniedReason={configuring.reason} disabled={enable.isPending} aria-busy={enable.isPending}>
          Save and turn on
        </Button>
      </div>
    </form>
  );
}
