import { TRPCError } from "@trpc/server";
import type { Metadata } from "next";
import { notFound } from "next/navigation";
import { cache } from "react";
import { SrDetail } from "@/components/storage/sr-detail.tsx";
import { api } from "@/server/api/caller.ts";
import type { TGetSrResponse } from "@/server/api/srs/schema.ts";

interface Props {
  params: Promise<{ sr: string }>;
}

/** The SR by ref or uuid, once per render (metadata and page); undefined when it could not be read now. */
const loadSr = cache(async (sr: string): Promise<TGetSrResponse | undefined> => {
  try {
    return await api.srs.get({ sr });
  } catch (error) {
    if (error instanceof TRPCError && error.code === "NOT_FOUND") notFound();
    // Anything else (toolstack down, …): the client shows the error where the SR would be, and retries.
    return undefined;
  }
});

/** The segment as given; Next may hand it still percent-encoded (a ref's colon), and a stray % is not an error. */
function srParam(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

export async function generateMetadata({ params }: Props): Promise<Metadata> {
  const sr = await loadSr(srParam((await params).sr));
  return { title: sr?.name ? `${sr.name} · Storage` : "SR · Storage" };
}

export default async function SrPage({ params }: Props) {
  const param = srParam((await params).sr);
  const initial = await loadSr(param);
  return <SrDetail sr={param} initial={initial} />;
}
