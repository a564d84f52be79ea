import type { Metadata } from "next";
import { NotBuiltPanel } from "@/components/not-built-panel.tsx";
import { PageHeader } from "@/components/page-header.tsx";

export const metadata: Metadata = { title: "VMs" };

export default function VmsPage() {
  return (
    <>
      <PageHeader title="VMs" description="Virtual machines and their disks." />
      <NotBuiltPanel
        area="VMs"
        planned={[
          "The VMs known to the toolstack, with their disks and the SRs those live on.",
          "Importing a VM from an XVA file: a resumable upload that streams into the toolstack's import.",
          "Exporting a VM as an XVA download, resumable with HTTP ranges.",
          "Importing and exporting VM metadata only.",
        ]}
      />
    </>
  );
}
