"use client";

// A volume downloaded as a disk image (raw, VHD, qcow2, VMDK) through the console's resumable download route,
// whole or only what changed since a snapshot of it (a delta each format carries its own way).
import { useMutation, useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { formatBytes } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { download, ExportProgress } from "@/components/transfers/export-dialog.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Dialog } from "@/components/ui/dialog.tsx";
import { DialogForm } from "@/components/ui/dialog-form.tsx";
import { Field, selectClasses } from "@/components/ui/field.tsx";
import { FormButtons } from "@/components/ui/form-buttons.tsx";
import type { TDiskExportFormat, TStartExportResponse } from "@/server/api/downloads/schema.ts";
import type { VolumeActionDialogProps } from "./volume-dialog-props.ts";

const FORMATS: ReadonlyArray<{ value: TDiskExportFormat; label: string }> = [
  { value: "vhd", label: "VHD (XenServer, XCP-ng, Hyper-V, Azure)" },
  { value: "qcow2", label: "qcow2 (KVM, Proxmox, OpenStack)" },
  { value: "vmdk", label: "VMDK, streamOptimized (VMware, VirtualBox)" },
  { value: "raw", label: "Raw (every tool; as large as the disk)" },
];

export function DownloadVolumeDialog({ volume, srRef, onClose }: VolumeActionDialogProps) {
  const trpc = useTRPC();
  const list = useQuery(trpc.volumes.list.queryOptions({ srRef }));
  // Snapshots of the same disk, newest first: a delta since one of them.
  const original = volume.isSnapshot ? volume.snapshotOf?.uuid : volume.uuid;
  const bases = (list.data?.volumes ?? []).filter((v) => v.isSnapshot && v.uuid !== volume.uuid && v.snapshotOf?.uuid === original).sort((a, b) => (b.snapshotTime ?? "").localeCompare(a.snapshotTime ?? ""));
  const [format, setFormat] = useState<TDiskExportFormat>("vhd");
  const [base, setBase] = useState("");
  const [started, setStarted] = useState<TStartExportResponse | null>(null);
  const start = useMutation(
    trpc.downloads.startDiskExport.mutationOptions({
      onSuccess: (answer) => {
        setStarted(answer);
        download(answer.url, answer.fileName);
      },
    }),
  );
  return (
    <Dialog open onClose={onClose} title={`Download ${volume.name}`} description={`The browser downloads the disk (${formatBytes(volume.virtualSize)}) as an image file, through the console: a broken download resumes from the browser's downloads.`}>
      {started !== null ? (
        <ExportProgress what={volume.name} started={started} onClose={onClose} />
      ) : (
        <DialogForm onSubmit={() => start.mutate({ vdiUuid: volume.uuid, format, ...(base === "" ? {} : { baseUuid: base }) })}>
          <Field label="Format">
            {(id, describedBy) => (
              <select id={id} aria-describedby={describedBy} className={selectClasses} value={format} onChange={(e) => setFormat(e.target.value as TDiskExportFormat)}>
                {FORMATS.map((f) => (
                  <option key={f.value} value={f.value}>
                    {f.label}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field label="What" hint={bases.length === 0 ? "A delta needs a snapshot of this disk: there is none on this SR." : "A delta holds only the blocks that changed; it names its base by the file that snapshot's own download is saved as (<uuid>.<format>)."}>
            {(id, describedBy) => (
              <select id={id} aria-describedby={describedBy} className={selectClasses} value={base} onChange={(e) => setBase(e.target.value)}>
                <option value="">The whole disk</option>
                {bases.map((b) => (
                  <option key={b.uuid} value={b.uuid}>
                    Changes since {b.name}
                    {b.snapshotTime === null ? "" : ` (${b.snapshotTime})`}
                  </option>
                ))}
              </select>
            )}
          </Field>
          {start.error ? <Alert title="The download could not start">{start.error.message}</Alert> : null}
          <FormButtons label="Download" pending={start.isPending} pendingLabel="Starting…" onCancel={onClose} />
        </DialogForm>
      )}
    </Dialog>
  );
}
