"use client";

import { useMutation } from "@tanstack/react-query";
import { formatBytes } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { ConfirmDialog } from "@/components/ui/confirm-dialog.tsx";
import type { VolumeActionDialogProps } from "./volume-dialog-props.ts";
import { errorText, useRefreshThen } from "./volume-mutations.ts";

/** Asks before a volume and its data go for good; says what stays (its original, or its snapshots). */
export function DestroyVolumeDialog({ srRef, volume, onClose, onDone }: VolumeActionDialogProps) {
  const trpc = useTRPC();
  const onSuccess = useRefreshThen(() => onDone({ text: `Volume “${volume.name}” destroyed.` }));
  const destroy = useMutation(trpc.volumes.destroy.mutationOptions({ onSuccess }));
  return (
    <ConfirmDialog
      open
      title={`Destroy “${volume.name}”?`}
      body={
        <>
          The volume “{volume.name}” ({formatBytes(volume.virtualSize)}) and its data are removed for good.
          {volume.isSnapshot ? " Its original stays." : " Its snapshots stay."}
        </>
      }
      confirmLabel="Destroy volume"
      pending={destroy.isPending}
      error={errorText(destroy.error)}
      onConfirm={() => destroy.mutate({ srRef, uuid: volume.uuid })}
      onCancel={onClose}
    />
  );
}
