import type { Metadata } from "next";
import { AuditPage } from "@/components/audit/audit-page.tsx";
import { PageHeader } from "@/components/page-header.tsx";

export const metadata: Metadata = { title: "Audit" };

export default function Audit() {
  return (
    <>
      <PageHeader title="Audit" description="Every change made through the toolstack, allowed or denied, and every login, failed ones too: who, from where, what and with what outcome." />
      <AuditPage />
    </>
  );
}
