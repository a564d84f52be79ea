"use client";

import { useMutation } from "@tanstack/react-query";
import { useState } from "react";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Dialog } from "@/components/ui/dialog.tsx";
import { DialogForm } from "@/components/ui/dialog-form.tsx";
import { FormButtons } from "@/components/ui/form-buttons.tsx";
import { TextField } from "@/components/ui/text-field.tsx";
import type { VolumeActionDialogProps } from "./volume-dialog-props.ts";
import { errorText, useRefreshThen } from "./volume-mutations.ts";

/** A writable clone, named at once (it would otherwise carry its original's name). */
export function CloneVolumeDialog({ srRef, volume, onClose, onDone }: VolumeActionDialogProps) {
  const trpc = useTRPC();
  const [name, setName] = useState(`${volume.name} (clone)`);
  const [checked, setChecked] = useState(false);
  const onSuccess = useRefreshThen(() => onDone({ text: `Clone “${name.trim()}” made.` }));
  const clone = useMutation(trpc.volumes.clone.mutationOptions({ onSuccess }));
  const nameError = checked && name.trim() === "" ? "Give the clone a name." : undefined;
  return (
    <Dialog open onClose={onClose} title={`Clone “${volume.name}”`} description="A writable volume with the same contents, sharing its unchanged blocks.">
      <DialogForm
        noValidate
        onSubmit={() => {
          setChecked(true);
          if (name.trim() === "") return;
          clone.mutate({ srRef, uuid: volume.uuid, name: name.trim() });
        }}
      >
        <TextField label="Name of the clone" error={nameError} value={name} onChange={setName} autoComplete="off" />
        {clone.error ? <Alert tone="error">{errorText(clone.error)}</Alert> : null}
        <FormButtons label="Clone" pending={clone.isPending} onCancel={onClose} />
      </DialogForm>
    </Dialog>
  );
}
