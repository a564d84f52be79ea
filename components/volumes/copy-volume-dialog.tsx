"use client";

import { useMutation, useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { formatBytes } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Dialog } from "@/components/ui/dialog.tsx";
import { DialogForm } from "@/components/ui/dialog-form.tsx";
import { Field, selectClasses } from "@/components/ui/field.tsx";
import { FormButtons } from "@/components/ui/form-buttons.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import type { VolumeActionDialogProps } from "./volume-dialog-props.ts";
import { errorText, useRefreshThen } from "./volume-mutations.ts";

/** A copy to another SR is started, then followed on the task page. */
export function CopyVolumeDialog({ srRef, volume, onClose, onDone }: VolumeActionDialogProps) {
  const trpc = useTRPC();
  const targets = useQuery(trpc.volumes.copyTargets.queryOptions({ srRef }));
  const [chosen, setChosen] = useState("");
  const onSuccess = useRefreshThen(() => onDone({ text: `Copy of “${volume.name}” started.`, taskLink: true }));
  const copy = useMutation(trpc.volumes.copy.mutationOptions({ onSuccess }));
  const destination = chosen || targets.data?.[0]?.ref || "";
  return (
    <Dialog open onClose={onClose} title={`Copy “${volume.name}” to another SR`} description={`${formatBytes(volume.virtualSize)}; the copy runs as a task you can follow on the Tasks page.`}>
      <DialogForm noValidate onSubmit={() => destination !== "" && copy.mutate({ srRef, uuid: volume.uuid, destSrRef: destination })}>
        {targets.data === undefined ? (
          targets.isError ? (
            <Alert tone="error" title="Could not load the SRs">
              {targets.error.message}
            </Alert>
          ) : (
            <div className="flex flex-col gap-1.5">
              <span className="text-sm font-medium">Destination SR</span>
              <Skeleton className="h-9 w-full" />
            </div>
          )
        ) : targets.data.length === 0 ? (
          <Alert tone="info">No other attached SR to copy to. Create or attach one on the Storage page.</Alert>
        ) : (
          <Field label="Destination SR">
            {(id, describedBy) => (
              <select id={id} aria-describedby={describedBy} className={selectClasses} value={destination} onChange={(e) => setChosen(e.target.value)}>
                {targets.data.map((sr) => (
                  <option key={sr.ref} value={sr.ref}>
                    {sr.name} ({sr.type}
                    {sr.freeSpace === null ? "" : `, ${formatBytes(sr.freeSpace)} free`}
                    {sr.isDefault ? ", default" : ""})
                  </option>
                ))}
              </select>
            )}
          </Field>
        )}
        {copy.error ? <Alert tone="error">{errorText(copy.error)}</Alert> : null}
        <FormButtons label="Start copy" pending={copy.isPending} pendingLabel="Starting…" disabled={destination === ""} onCancel={onClose} />
      </DialogForm>
    </Dialog>
  );
}
