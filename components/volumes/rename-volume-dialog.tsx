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

/** The volume's name and description. */
export function RenameVolumeDialog({ srRef, volume, onClose, onDone }: VolumeActionDialogProps) {
  const trpc = useTRPC();
  const [name, setName] = useState(volume.name);
  const [description, setDescription] = useState(volume.description);
  const [checked, setChecked] = useState(false);
  const onSuccess = useRefreshThen(() => onDone({ text: `Volume “${name.trim()}” saved.` }));
  const rename = useMutation(trpc.volumes.rename.mutationOptions({ onSuccess }));
  const nameError = checked && name.trim() === "" ? "Give the volume a name." : undefined;
  return (
    <Dialog open onClose={onClose} title={`Name and description of “${volume.name}”`}>
      <DialogForm
        noValidate
        onSubmit={() => {
          setChecked(true);
          if (name.trim() === "") return;
          rename.mutate({ srRef, uuid: volume.uuid, name: name.trim(), description });
        }}
      >
        <TextField label="Name" error={nameError} value={name} onChange={setName} autoComplete="off" />
        <TextField label="Description" value={description} onChange={setDescription} rows={3} />
        {rename.error ? <Alert tone="error">{errorText(rename.error)}</Alert> : null}
        <FormButtons label="Save" pending={rename.isPending} onCancel={onClose} />
      </DialogForm>
    </Dialog>
  );
}
