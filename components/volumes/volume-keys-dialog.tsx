"use client";

import { useMutation } from "@tanstack/react-query";
import { useState } from "react";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Button } from "@/components/ui/button.tsx";
import { Dialog } from "@/components/ui/dialog.tsx";
import { DialogForm } from "@/components/ui/dialog-form.tsx";
import { FormButtons } from "@/components/ui/form-buttons.tsx";
import { TextField } from "@/components/ui/text-field.tsx";
import type { VolumeActionDialogProps } from "./volume-dialog-props.ts";
import { errorText, useRefreshThen } from "./volume-mutations.ts";

/** The volume's other_config: each pair with a Remove button, and a form to add one. */
export function VolumeKeysDialog({ srRef, volume, onClose }: Omit<VolumeActionDialogProps, "onDone">) {
  const trpc = useTRPC();
  const [key, setKey] = useState("");
  const [value, setValue] = useState("");
  const [checked, setChecked] = useState(false);
  const [status, setStatus] = useState("");
  const added = useRefreshThen((_data: unknown, input: { key: string }) => {
    setStatus(`Key “${input.key}” added.`);
    setKey("");
    setValue("");
    setChecked(false);
  });
  const removed = useRefreshThen((_data: unknown, input: { key: string }) => setStatus(`Key “${input.key}” removed.`));
  const add = useMutation(trpc.volumes.addKey.mutationOptions({ onSuccess: added }));
  const remove = useMutation(trpc.volumes.removeKey.mutationOptions({ onSuccess: removed }));
  const entries = Object.entries(volume.otherConfig).sort(([a], [b]) => a.localeCompare(b));
  const keyError = checked && key.trim() === "" ? "Give the key a name." : undefined;
  const failure = errorText(add.error ?? remove.error);
  return (
    <Dialog open onClose={onClose} title={`Keys of “${volume.name}”`} description="Metadata pairs kept on the volume (XenAPI other_config).">
      {entries.length === 0 ? (
        <p className="text-sm text-zinc-600 dark:text-zinc-400">No keys yet.</p>
      ) : (
        <table className="w-full text-sm">
          <caption className="sr-only">Keys of {volume.name}</caption>
          <thead>
            <tr className="text-left text-xs text-zinc-500 dark:text-zinc-400">
              <th scope="col" className="py-1 pr-2 font-medium">Key</th>
              <th scope="col" className="py-1 pr-2 font-medium">Value</th>
              <th scope="col" className="py-1"><span className="sr-only">Remove</span></th>
            </tr>
          </thead>
          <tbody>
            {entries.map(([k, v]) => (
              <tr key={k} className="border-t border-zinc-100 dark:border-zinc-800">
                <td className="py-1.5 pr-2 font-mono text-xs break-all">{k}</td>
                <td className="py-1.5 pr-2 font-mono text-xs break-all">{v === "" ? <span className="text-zinc-400">(empty)</span> : v}</td>
                <td className="py-1.5 text-right">
                  <Button size="sm" variant="ghost" aria-label={`Remove key ${k}`} disabled={remove.isPending} onClick={() => remove.mutate({ srRef, uuid: volume.uuid, key: k })}>
                    Remove
                  </Button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <DialogForm
        noValidate
        onSubmit={() => {
          setChecked(true);
          setStatus("");
          if (key.trim() === "") return;
          add.mutate({ srRef, uuid: volume.uuid, key: key.trim(), value });
        }}
      >
        <div className="grid gap-3 sm:grid-cols-2">
          <TextField label="Key" error={keyError} value={key} onChange={setKey} autoComplete="off" />
          <TextField label="Value" value={value} onChange={setValue} autoComplete="off" />
        </div>
        {failure ? <Alert tone="error">{failure}</Alert> : null}
        <p role="status" className="min-h-5 text-sm text-emerald-700 dark:text-emerald-400">
          {status}
        </p>
        <FormButtons label="Add key" pending={add.isPending} pendingLabel="Adding…" cancelLabel="Close" onCancel={onClose} />
      </DialogForm>
    </Dialog>
  );
}
