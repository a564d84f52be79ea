"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState, type ReactNode } from "react";
import { ROLES, type Role } from "@/lib/roles.ts";
import { useVerdict } from "@/components/access/use-verdict.tsx";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Button } from "@/components/ui/button.tsx";
import { Field, selectClasses } from "@/components/ui/field.tsx";
import { TextField } from "@/components/ui/text-field.tsx";

function RoleField({ value, onChange }: { value: Role; onChange: (role: Role) => void }) {
  return (
    <Field label="Role" hint="Each role may do all that the roles below it may.">
      {(id, describedBy) => (
        <select id={id} aria-describedby={describedBy} value={value} onChange={(event) => onChange(event.target.value as Role)} className={selectClasses}>
          {ROLES.map((role) => (
            <option key={role} value={role}>
              {role}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
}

function AddForm({ title, onSubmit, children, pending, denied, error, done }: { title: string; onSubmit: () => void; children: ReactNode; pending: boolean; denied: string | undefined; error: string | undefined; done: string | null }) {
  return (
    <form
      aria-label={title}
      noValidate
      className="flex flex-col gap-3"
      onSubmit={(event) => {
        event.preventDefault();
        if (denied === undefined) onSubmit();
      }}
    >
      <h3 className="text-sm font-semibold text-zinc-900 dark:text-zinc-100">{title}</h3>
      <div className="grid gap-3 sm:grid-cols-3">{children}</div>
      {error ? <Alert tone="error">{error}</Alert> : null}
      {done ? (
        <p role="status" className="text-sm text-emerald-700 dark:text-emerald-400">
          {done}
        </p>
      ) : null}
      <div>
        <Button type="submit" variant="secondary" disabled={pending} aria-busy={pending} deniedReason={denied}>
          {title}
        </Button>
      </div>
    </form>
  );
}

/** A local user: name, password and role. */
export function AddLocalUserForm() {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const managing = useVerdict("users.manage");
  const [name, setName] = useState("");
  const [password, setPassword] = useState("");
  const [role, setRole] = useState<Role>("read-only");
  const [done, setDone] = useState<string | null>(null);
  const create = useMutation(
    trpc.users.createLocal.mutationOptions({
      onSuccess: () => {
        setDone(`${name.trim()} may now log in as ${role}.`);
        setName("");
        setPassword("");
        void queryClient.invalidateQueries({ queryKey: trpc.users.list.queryKey() });
      },
    }),
  );
  const fieldErrors = create.error?.data?.zodError?.fieldErrors as Record<string, string[] | undefined> | undefined;
  return (
    <AddForm title="Add a local user" pending={create.isPending} denied={managing.reason} error={fieldErrors === undefined ? create.error?.message : undefined} done={done} onSubmit={() => {
        setDone(null);
        create.mutate({ name: name.trim(), password, role });
      }}>
      <TextField label="User name" autoComplete="off" value={name} onChange={setName} error={fieldErrors?.name?.[0]} />
      <TextField label="Password" type="password" autoComplete="new-password" value={password} onChange={setPassword} error={fieldErrors?.password?.[0]} hint="At least 8 characters." />
      <RoleField value={role} onChange={setRole} />
    </AddForm>
  );
}

/** A user or group of the directory, by its DN: its members log in with their directory passwords. */
export function AddDirectorySubjectForm() {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const managing = useVerdict("users.manage");
  const [dn, setDn] = useState("");
  const [role, setRole] = useState<Role>("read-only");
  const [done, setDone] = useState<string | null>(null);
  const add = useMutation(
    trpc.users.addDirectorySubject.mutationOptions({
      onSuccess: () => {
        setDone(`${dn.trim()} added as ${role}.`);
        setDn("");
        void queryClient.invalidateQueries({ queryKey: trpc.users.list.queryKey() });
      },
    }),
  );
  const fieldErrors = add.error?.data?.zodError?.fieldErrors as Record<string, string[] | undefined> | undefined;
  return (
    <AddForm title="Add a directory user or group" pending={add.isPending} denied={managing.reason} error={fieldErrors === undefined ? add.error?.message : undefined} done={done} onSubmit={() => {
        setDone(null);
        add.mutate({ dn: dn.trim(), role });
      }}>
      <TextField label="DN" autoComplete="off" value={dn} onChange={setDn} error={fieldErrors?.dn?.[0]} hint="e.g. cn=admins,ou=groups,dc=example,dc=com: everyone in that group, nested groups too." className="sm:col-span-2" />
      <RoleField value={role} onChange={setRole} />
    </AddForm>
  );
}
