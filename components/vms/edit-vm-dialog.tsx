"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Dialog } from "@/components/ui/dialog.tsx";
import { DialogForm } from "@/components/ui/dialog-form.tsx";
import { FormButtons } from "@/components/ui/form-buttons.tsx";
import { TextField } from "@/components/ui/text-field.tsx";
import type { TGetVmResponse } from "@/server/api/vms/schema.ts";

/** Rename the VM, or edit its description: one text field, saved as a toolstack task. */
export function EditVmDialog({ vm, field, onClose }: { vm: TGetVmResponse; field: "name" | "description" | null; onClose: () => void }) {
  return (
    <Dialog open={field !== null} onClose={onClose} title={field === "description" ? "Edit the VM's description" : "Rename the VM"}>
      {/* Mounted on each opening: it starts from the VM's current value, with no error left from last time. */}
      {field !== null ? <EditVmForm key={field} vm={vm} field={field} onClose={onClose} /> : null}
    </Dialog>
  );
}

function EditVmForm({ vm, field, onClose }: { vm: TGetVmResponse; field: "name" | "description"; onClose: () => void }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [value, setValue] = useState(field === "name" ? vm.name : vm.description);
  const onSuccess = async () => {
    await Promise.all([
      queryClient.invalidateQueries({ queryKey: trpc.vms.get.queryKey({ ref: vm.ref }) }),
      queryClient.invalidateQueries({ queryKey: trpc.vms.list.queryKey() }),
    ]);
    onClose();
  };
  const rename = useMutation(trpc.vms.rename.mutationOptions({ onSuccess }));
  const describe = useMutation(trpc.vms.setDescription.mutationOptions({ onSuccess }));
  const mutation = field === "description" ? describe : rename;

  const fieldErrors = mutation.error?.data?.zodError?.fieldErrors as Record<string, string[] | undefined> | undefined;
  const fieldError = fieldErrors?.[field === "description" ? "description" : "name"]?.[0];
  const save = () => {
    if (field === "name") rename.mutate({ ref: vm.ref, name: value });
    else describe.mutate({ ref: vm.ref, description: value });
  };

  return (
    <DialogForm onSubmit={save}>
      {field === "description" ? (
        <TextField label="Description" error={fieldError} value={value} onChange={setValue} rows={3} maxLength={1024} />
      ) : (
        <TextField label="Name" error={fieldError} value={value} onChange={setValue} required maxLength={255} autoComplete="off" />
      )}
      {mutation.error && !fieldError ? <Alert tone="error">{mutation.error.message}</Alert> : null}
      <FormButtons label="Save" pending={mutation.isPending} pendingLabel="Saving…" onCancel={onClose} />
    </DialogForm>
  );
}
