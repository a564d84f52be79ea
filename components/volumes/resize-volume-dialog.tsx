"use client";

import { useMutation } from "@tanstack/react-query";
import { useState } from "react";
import { formatBytes } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Dialog } from "@/components/ui/dialog.tsx";
import { DialogForm } from "@/components/ui/dialog-form.tsx";
import { FormButtons } from "@/components/ui/form-buttons.tsx";
import { parseSize, SizeField, sizeValue, type SizeValue } from "./size-field.tsx";
import type { VolumeActionDialogProps } from "./volume-dialog-props.ts";
import { errorText, useRefreshThen } from "./volume-mutations.ts";

/** A larger size for the volume: volumes only grow. */
export function ResizeVolumeDialog({ srRef, volume, onClose, onDone }: VolumeActionDialogProps) {
  const trpc = useTRPC();
  const [size, setSize] = useState<SizeValue>(() => sizeValue(volume.virtualSize * 2));
  const [checked, setChecked] = useState(false);
  const onSuccess = useRefreshThen(() => onDone({ text: `Volume “${volume.name}” resized.` }));
  const resize = useMutation(trpc.volumes.resize.mutationOptions({ onSuccess }));
  const parsed = parseSize(size);
  const sizeError = !checked
    ? undefined
    : "error" in parsed
      ? parsed.error
      : parsed.bytes <= volume.virtualSize
        ? `Choose more than the current ${formatBytes(volume.virtualSize)}: volumes can only grow.`
        : undefined;
  return (
    <Dialog open onClose={onClose} title={`Resize “${volume.name}”`} description={`Now ${formatBytes(volume.virtualSize)}. Volumes can grow, not shrink.`}>
      <DialogForm
        noValidate
        onSubmit={() => {
          setChecked(true);
          if ("error" in parsed || parsed.bytes <= volume.virtualSize) return;
          resize.mutate({ srRef, uuid: volume.uuid, size: parsed.bytes });
        }}
      >
        <SizeField label="New size" value={size} onChange={setSize} error={sizeError} />
        {resize.error ? <Alert tone="error">{errorText(resize.error)}</Alert> : null}
        <FormButtons label="Resize" pending={resize.isPending} onCancel={onClose} />
      </DialogForm>
    </Dialog>
  );
}
