import type { Metadata } from "next";
import { PageHeader } from "@/components/page-header.tsx";
import { PluginCatalog } from "@/components/plugins/plugin-catalog.tsx";

export const metadata: Metadata = { title: "Plugins" };

export default function PluginsPage() {
  return (
    <>
      <PageHeader
        title="Plugins"
        description="Storage plugins found in the plugin root. Volume plugins manage SRs and volumes; datapath plugins connect VMs to volumes by URI scheme."
      />
      <PluginCatalog />
    </>
  );
}
