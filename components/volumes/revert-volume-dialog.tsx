"use client";

import { useMutation } from "@tanstack/react-query";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { ConfirmDialog } from "@/components/ui/confirm-dialog.tsx";
import type { VolumeActionDialogProps } from "./volume-dialog-props.ts";
import { errorText, useRefreshThen } from "./volume-mutations.ts";

/** Asks before a snapshot's original gets the snapshot's contents back (`volume` is the snapshot). */
export function RevertVolumeDialog({ srRef, volume, onClose, onDone }: VolumeActionDialogProps) {
  const trpc = useTRPC();
  const onSuccess = useRefreshThen(() => onDone({ text: `“${volume.snapshotOf?.name ?? "The volume"}” reverted to the snapshot.` }));
  const revert = useMutation(trpc.volumes.revert.mutationOptions({ onSuccess }));
  return (
    <ConfirmDialog
      open
      title={`Revert “${volume.snapshotOf?.name ?? "the original"}”?`}
      body={
        <>
          “{volume.snapshotOf?.name}” gets the contents and size of this snapshot
          {volume.snapshotTime ? ` (taken ${formatSnapshotTime(volume.snapshotTime)})` : ""}. What was written to it since is lost.
        </>
      }
      confirmLabel="Revert"
      pending={revert.isPending}
      error={errorText(revert.error)}
      onConfirm={() => revert.mutate({ srRef, uuid: volume.uuid })}
      onCancel={onClose}
    />
  );
}

/** snapshot_time as kept on the volume: xapi's 20250102T03:04:05Z or RFC 3339. */
function formatSnapshotTime(value: string): string {
  const iso = value.replace(/^(\d{4})(\d{2})(\d{2})T/, "$1-$2-$3T");
  const at = Date.parse(iso);
  return Number.isNaN(at) ? value : new Date(at).toLocaleString();
}
