import type { Metadata } from "next";
import { NotBuiltPanel } from "@/components/not-built-panel.tsx";
import { PageHeader } from "@/components/page-header.tsx";

export const metadata: Metadata = { title: "Storage" };

export default function StoragePage() {
  return (
    <>
      <PageHeader title="Storage" description="Storage repositories (SRs) and the volumes in them." />
      <NotBuiltPanel
        area="Storage"
        planned={[
          "The SRs known to the toolstack, with type, health, free and total space from SR.stat.",
          "Probing, creating, attaching, detaching and destroying SRs through their volume plugin.",
          "The volumes (VDIs) of each SR: create, resize, snapshot, clone, revert and destroy.",
          "Uploading and downloading disk images, streamed through the console.",
        ]}
      />
    </>
  );
}
