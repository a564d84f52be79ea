import type { Metadata } from "next";
import { PageHeader } from "@/components/page-header.tsx";
import { SrList } from "@/components/storage/sr-list.tsx";

export const metadata: Metadata = { title: "Storage" };

export default function StoragePage() {
  return (
    <>
      <PageHeader
        title="Storage"
        description="Storage repositories (SRs) the toolstack knows: their health, space and volumes. Open an SR for its charts and volumes."
      />
      <SrList />
    </>
  );
}
