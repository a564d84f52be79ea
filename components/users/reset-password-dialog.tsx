"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Dialog } from "@/components/ui/dialog.tsx";
import { DialogForm } from "@/components/ui/dialog-form.tsx";
import { FormButtons } from "@/components/ui/form-buttons.tsx";
import { TextField } from "@/components/ui/text-field.tsx";
import type { TSubject } from "@/server/api/users/schema.ts";

/** A pool administrator sets a local user's password; the user's sessions end. */
export function ResetPasswordDialog({ subject, onClose }: { subject: TSubject; onClose: () => void }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [password, setPassword] = useState("");
  const [checked, setChecked] = useState(false);
  const reset = useMutation(trpc.users.resetPassword.mutationOptions({ onSuccess: () => void queryClient.invalidateQueries({ queryKey: trpc.users.list.queryKey() }).then(onClose) }));
  const error = checked && password.length < 8 ? "A password needs at least 8 characters." : undefined;
  return (
    <Dialog open onClose={onClose} title={`New password for ${subject.name}`} description="Their sessions end; they log in again with this password.">
      <DialogForm
        noValidate
        onSubmit={() => {
          setChecked(true);
          if (password.length >= 8) reset.mutate({ subject: subject.ref, password });
        }}
      >
        <TextField label="New password" type="password" autoComplete="new-password" value={password} onChange={setPassword} error={error} />
        {reset.error ? <Alert tone="error">{reset.error.message}</Alert> : null}
        <FormButtons label="Set password" pending={reset.isPending} onCancel={onClose} />
      </DialogForm>
    </Dialog>
  );
}
