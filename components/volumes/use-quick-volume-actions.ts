"use client";

import { useMutation } from "@tanstack/react-query";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import type { TVolumeRow } from "@/server/api/volumes/schema.ts";
import type { Notice } from "./volume-notice.tsx";
import { errorText, useRefreshThen } from "./volume-mutations.ts";

/**
 * The menu's actions that run at once, without a dialog: a snapshot, and CBT on or off. Their outcome is said
 * in the table's notice; `nameOf` names the volume then (after the refresh).
 */
export function useQuickVolumeActions(srRef: string, nameOf: (uuid: string) => string, say: (notice: Notice) => void) {
  const trpc = useTRPC();
  const failed = (what: string) => (error: Parameters<typeof errorText>[0]) => say({ tone: "error", text: `${what}: ${errorText(error)}` });
  const snapshotTaken = useRefreshThen((_data: unknown, input: { uuid: string }) => say({ tone: "success", text: `Snapshot of “${nameOf(input.uuid)}” taken.` }));
  const cbtChanged = useRefreshThen((_data: unknown, input: { uuid: string; enabled: boolean }) =>
    say({ tone: "success", text: `CBT turned ${input.enabled ? "on" : "off"} for “${nameOf(input.uuid)}”.` }),
  );
  const snapshot = useMutation(trpc.volumes.snapshot.mutationOptions({ onSuccess: snapshotTaken, onError: failed("The snapshot failed") }));
  const cbt = useMutation(trpc.volumes.setCbt.mutationOptions({ onSuccess: cbtChanged, onError: failed("Changing CBT failed") }));
  return {
    busy: snapshot.isPending || cbt.isPending,
    takeSnapshot: (volume: TVolumeRow) => snapshot.mutate({ srRef, uuid: volume.uuid }),
    toggleCbt: (volume: TVolumeRow) => cbt.mutate({ srRef, uuid: volume.uuid, enabled: !volume.cbtEnabled }),
  };
}
