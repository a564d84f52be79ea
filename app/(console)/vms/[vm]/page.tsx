import type { Metadata } from "next";
import { notFound } from "next/navigation";
import { cache } from "react";
import { TRPCError } from "@trpc/server";
import { VmDetails } from "@/components/vms/vm-details.tsx";
import { api } from "@/server/api/caller.ts";
import type { TGetVmResponse } from "@/server/api/vms/schema.ts";

type Params = Promise<{ vm: string }>;

/** The VM for this render (metadata and page share one call); null when it could not be read now. */
const loadVm = cache(async (ref: string): Promise<TGetVmResponse | null> => {
  try {
    return await api.vms.get({ ref });
  } catch (error) {
    if (error instanceof TRPCError && error.code === "NOT_FOUND") notFound();
    // Any other failure (toolstack restarting…) is the client's to show, with a retry.
    return null;
  }
});

/** The segment decoded (Next may hand it still percent-encoded: a ref's colon); a stray % is left as it is. */
async function refOf(params: Params): Promise<string> {
  const segment = (await params).vm;
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

export async function generateMetadata({ params }: { params: Params }): Promise<Metadata> {
  const vm = await loadVm(await refOf(params));
  return { title: vm === null ? "VM" : `${vm.name || "(no name)"} · VMs` };
}

export default async function VmPage({ params }: { params: Params }) {
  const ref = await refOf(params);
  return <VmDetails vmRef={ref} initial={await loadVm(ref)} />;
}
