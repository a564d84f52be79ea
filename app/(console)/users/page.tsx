import type { Metadata } from "next";
import { PageHeader } from "@/components/page-header.tsx";
import { UsersPage } from "@/components/users/users-page.tsx";

export const metadata: Metadata = { title: "Users" };

export default function Users() {
  return (
    <>
      <PageHeader title="Users" description="Who may log in and what each role lets them do: pool administrators add users and give roles; everyone else sees who has which." />
      <UsersPage />
    </>
  );
}
