"use client";

import { useMutation } from "@tanstack/react-query";
import { useState } from "react";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Dialog } from "@/components/ui/dialog.tsx";
import { DialogForm } from "@/components/ui/dialog-form.tsx";
import { FormButtons } from "@/components/ui/form-buttons.tsx";
import { TextField } from "@/components/ui/text-field.tsx";
import { parseSize, SizeField, type SizeValue } from "./size-field.tsx";
import type { VolumeDialogProps } from "./volume-dialog-props.ts";
import { errorText, useRefreshThen } from "./volume-mutations.ts";

export function CreateVolumeDialog({ srRef, onClose, onDone }: VolumeDialogProps) {
  const trpc = useTRPC();
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [size, setSize] = useState<SizeValue>({ amount: "10", unit: "GiB" });
  const [checked, setChecked] = useState(false);
  const onSuccess = useRefreshThen(() => onDone({ text: `Volume “${name.trim()}” created.` }));
  const create = useMutation(trpc.volumes.create.mutationOptions({ onSuccess }));
  const parsed = parseSize(size);
  const nameError = checked && name.trim() === "" ? "Give the volume a name." : undefined;
  const sizeError = checked && "error" in parsed ? parsed.error : undefined;
  return (
    <Dialog open onClose={onClose} title="Create volume" description="A new empty volume in this SR.">
      <DialogForm
        noValidate
        onSubmit={() => {
          setChecked(true);
          if (name.trim() === "" || "error" in parsed) return;
          create.mutate({ srRef, name: name.trim(), description, size: parsed.bytes });
        }}
      >
        <TextField label="Name" error={nameError} value={name} onChange={setName} autoComplete="off" />
        <SizeField label="Size" value={size} onChange={setSize} error={sizeError} />
        <TextField label="Description" hint="Optional." value={description} onChange={setDescription} rows={3} />
        {create.error ? <Alert tone="error">{errorText(create.error)}</Alert> : null}
        <FormButtons label="Create volume" pending={create.isPending} onCancel={onClose} />
      </DialogForm>
    </Dialog>
  );
}
