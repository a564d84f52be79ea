"use client";

// Asked when disk images are dropped: each becomes a new VM that boots it (named after the file), or only a disk
// on the chosen SR. A new VM by default: that is what most people who drop a cloud image or a VMware disk want.
import { useState } from "react";
import { formatBytes } from "@/lib/format.ts";
import { Dialog } from "@/components/ui/dialog.tsx";
import { DialogForm } from "@/components/ui/dialog-form.tsx";
import { FormButtons } from "@/components/ui/form-buttons.tsx";
import type { Planned } from "./dropped-files.ts";

type PlannedDisk = Extract<Planned, { kind: "disk" }>;

export interface DiskChoice {
  disk: PlannedDisk;
  diskOnly: boolean;
}

export function DiskChoiceDialog({ open, disks, srName, onCancel, onConfirm }: { open: boolean; disks: PlannedDisk[]; srName: string; onCancel: () => void; onConfirm: (choices: DiskChoice[]) => void }) {
  // Fresh for each drop: the owner gives each its own key.
  const [diskOnly, setDiskOnly] = useState<readonly boolean[]>(() => disks.map(() => false));
  const many = disks.length > 1;
  return (
    <Dialog open={open} onClose={onCancel} title={many ? `Import ${disks.length} disk images` : `Import ${disks[0]?.file.name ?? "a disk image"}`} description={`A disk image can become a new VM that boots it, or a disk on ${srName} to attach to a VM later.`}>
      <DialogForm onSubmit={() => onConfirm(disks.map((disk, index) => ({ disk, diskOnly: diskOnly[index] ?? false })))}>
        {disks.map((disk, index) => (
          <fieldset key={disk.file.name + index} className="flex flex-col gap-2 rounded-md border border-zinc-200 p-3 dark:border-zinc-800">
            <legend className="px-1 text-sm font-medium">
              {disk.file.name} <span className="font-normal text-zinc-600 dark:text-zinc-400">({disk.format}, {formatBytes(disk.file.blob.size)})</span>
            </legend>
            {disk.note !== null ? <p className="text-xs text-amber-700 dark:text-amber-400">{disk.note}</p> : null}
            {[false, true].map((only) => (
              <label key={String(only)} className="flex items-center gap-2 text-sm">
                <input type="radio" className="size-4 accent-sky-600" name={`disk-${index}`} checked={(diskOnly[index] ?? false) === only} onChange={() => setDiskOnly((current) => current.map((value, i) => (i === index ? only : value)))} />
                {only ? `Only a disk on ${srName}` : `A new VM with this disk (${disk.file.name.replace(/\.[^.]+$/, "")})`}
              </label>
            ))}
          </fieldset>
        ))}
        <FormButtons label={many ? "Import them" : "Import"} onCancel={onCancel} />
      </DialogForm>
    </Dialog>
  );
}
