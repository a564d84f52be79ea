import type { Metadata } from "next";
import { HostList } from "@/components/hosts/host-list.tsx";
import { PageHeader } from "@/components/page-header.tsx";

export const metadata: Metadata = { title: "Hosts" };

export default function HostsPage() {
  return (
    <>
      <PageHeader
        title="Hosts"
        description="The hosts of the pool: whether each is live, which one is the master, and the SRs attached on each. An SR's volumes are read through the host it is attached on."
      />
      <HostList />
    </>
  );
}
