import type { Metadata } from "next";
import { PageHeader } from "@/components/page-header.tsx";
import { ImportDropZone } from "@/components/transfers/import-drop-zone.tsx";
import { VmList } from "@/components/vms/vm-list.tsx";

export const metadata: Metadata = { title: "VMs" };

export default function VmsPage() {
  return (
    <>
      <PageHeader title="VMs" description="Virtual machines the toolstack knows, with their disks and the SRs those live on." />
      <div className="flex flex-col gap-6">
        <ImportDropZone />
        <VmList />
      </div>
    </>
  );
}
