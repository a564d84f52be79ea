"use client";

import { useQuery } from "@tanstack/react-query";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Panel } from "@/components/ui/panel.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { AddDirectorySubjectForm, AddLocalUserForm } from "./add-user-forms.tsx";
import { DirectorySettings } from "./directory-settings.tsx";
import { OwnPasswordForm } from "./own-password-form.tsx";
import { UserList } from "./user-list.tsx";

/** Who may log in, with which role; adding them; the directory; your own password. */
export function UsersPage() {
  const trpc = useTRPC();
  const users = useQuery(trpc.users.list.queryOptions(undefined, { refetchInterval: 15_000 }));
  if (users.data === undefined) return users.isError ? <QueryError error={users.error} what="the users" onRetry={() => void users.refetch()} /> : <Skeleton className="h-64" />;
  const { subjects, directory, you } = users.data;
  return (
    <>
      <Panel title="Users and groups" description="root, the local superuser, may always log in and is not listed. Everyone else needs a role here.">
        <div className="mt-4 flex min-w-0 flex-col gap-6">
          <UserList subjects={subjects} />
          <AddLocalUserForm />
          {directory.enabled ? <AddDirectorySubjectForm /> : null}
        </div>
      </Panel>
      <Panel title="Directory (LDAP)" description="Users and groups of an LDAP directory, logging in with their directory passwords.">
        <div className="mt-4">
          <DirectorySettings directory={directory} />
        </div>
      </Panel>
      <Panel title="Your password" description={you.local ? `The password ${you.name} logs in with.` : "You log in with your directory password: change it in the directory."}>
        {you.local ? (
          <div className="mt-4">
            <OwnPasswordForm />
          </div>
        ) : null}
      </Panel>
    </>
  );
}
