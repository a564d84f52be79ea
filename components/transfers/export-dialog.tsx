"use client";

import { useMutation, useQuery } from "@tanstack/react-query";
import { useId, useState } from "react";
import { formatDuration, formatPercent, formatTimeLeft } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Button } from "@/components/ui/button.tsx";
import { Dialog, DialogActions } from "@/components/ui/dialog.tsx";
import { DialogForm } from "@/components/ui/dialog-form.tsx";
import { FormButtons } from "@/components/ui/form-buttons.tsx";
import { ProgressBar } from "@/components/ui/progress-bar.tsx";
import type { TExportCompression, TExportVmFormat, TStartExportResponse } from "@/server/api/downloads/schema.ts";

const CHOICES: ReadonlyArray<{ value: TExportCompression; label: string; hint: string }> = [
  { value: "zstd", label: "zstd", hint: "Small and fast: the best choice for Hangar, XCP-ng 8.3 and XenServer 8." },
  { value: "gzip", label: "gzip", hint: "Small, slower to make; every importer reads it." },
  { value: "none", label: "None", hint: "The largest file, made fastest." },
];

const FORMATS: ReadonlyArray<{ value: TExportVmFormat; label: string; hint: string }> = [
  { value: "xva", label: "XVA", hint: "For Hangar, XCP-ng and XenServer: the VM as it is, every setting kept." },
  { value: "ova", label: "OVA", hint: "For VMware, VirtualBox, Proxmox and others: an OVF descriptor and a VMDK per disk, with a SHA-256 manifest." },
];

/** No time left is shown before this age: the rate says nothing yet. */
const ETA_MIN_AGE_S = 10;

/** Export a VM to the user's machine: XVA (compressed or not) or OVA, then a browser download through the console, with the export's progress. */
export function ExportDialog({ vm, open, onClose }: { vm: { ref: string; name: string }; open: boolean; onClose: () => void }) {
  return (
    <Dialog open={open} onClose={onClose} title={`Export ${vm.name || "the VM"}`} description="The browser downloads a file of the VM and its disks, as an XVA or an OVA. A broken download can be resumed from the browser's downloads.">
      {/* Mounted on each opening: a fresh choice, no progress left from last time. */}
      {open ? <ExportForm vm={vm} onClose={onClose} /> : null}
    </Dialog>
  );
}

function ExportForm({ vm, onClose }: { vm: { ref: string; name: string }; onClose: () => void }) {
  const trpc = useTRPC();
  const [compression, setCompression] = useState<TExportCompression>("zstd");
  const [format, setFormat] = useState<TExportVmFormat>("xva");
  const [started, setStarted] = useState<TStartExportResponse | null>(null);
  const legendId = useId();
  const formatLegendId = useId();
  const start = useMutation(
    trpc.downloads.startExport.mutationOptions({
      onSuccess: (answer) => {
        setStarted(answer);
        download(answer.url, answer.fileName);
      },
    }),
  );

  if (started !== null) return <ExportProgress what={vm.name || "the VM"} started={started} onClose={onClose} />;
  return (
    <DialogForm onSubmit={() => start.mutate({ vmRef: vm.ref, compression, format })}>
      <Choices legendId={formatLegendId} legend="Format" name="format" choices={FORMATS} value={format} onChange={setFormat} />
      {format === "xva" ? <Choices legendId={legendId} legend="Compression" name="compression" choices={CHOICES} value={compression} onChange={setCompression} /> : null}
      {start.error ? <Alert title="The export could not start">{start.error.message}</Alert> : null}
      <FormButtons label="Download" pending={start.isPending} pendingLabel="Starting…" onCancel={onClose} />
    </DialogForm>
  );
}

/** One choice among a few, each with a line saying what it is for. */
function Choices<T extends string>({ legendId, legend, name, choices, value, onChange }: { legendId: string; legend: string; name: string; choices: ReadonlyArray<{ value: T; label: string; hint: string }>; value: T; onChange: (value: T) => void }) {
  return (
    <fieldset className="flex flex-col gap-2" aria-labelledby={legendId}>
      <legend id={legendId} className="mb-1 text-sm font-medium text-zinc-800 dark:text-zinc-200">
        {legend}
      </legend>
      {choices.map((choice) => (
        <label key={choice.value} className="flex cursor-pointer items-start gap-3 rounded-md border border-zinc-200 p-3 text-sm has-checked:border-sky-600 has-checked:bg-sky-50 dark:border-zinc-800 dark:has-checked:border-sky-500 dark:has-checked:bg-sky-950/40">
          <input type="radio" name={name} value={choice.value} checked={value === choice.value} onChange={() => onChange(choice.value)} className="mt-0.5 accent-sky-600" />
          <span className="flex flex-col gap-0.5">
            <span className="font-medium text-zinc-900 dark:text-zinc-100">{choice.label}</span>
            <span className="text-xs text-zinc-600 dark:text-zinc-400">{choice.hint}</span>
          </span>
        </label>
      ))}
    </fieldset>
  );
}

/** A browser download of `url` (the route answers it as an attachment: the page stays). */
export function download(url: string, fileName: string): void {
  const link = document.createElement("a");
  link.href = url;
  link.download = fileName;
  link.rel = "noopener";
  document.body.append(link);
  link.click();
  link.remove();
}

/** An export's progress from its task, the file the browser saves, and a retry of the download if it failed. */
export function ExportProgress({ what, started, onClose }: { what: string; started: TStartExportResponse; onClose: () => void }) {
  const trpc = useTRPC();
  const progress = useQuery(
    trpc.downloads.exportProgress.queryOptions(
      { task: started.task },
      { refetchInterval: (query) => (query.state.data === undefined || query.state.data.state === "waiting" || query.state.data.state === "running" ? 1000 : false) },
    ),
  );
  const data = progress.data;
  const finished = data?.state === "succeeded";
  const failed = data?.state === "failed" || data?.state === "cancelled";
  const left = data !== undefined && data.state === "running" && data.progress > 0 && data.elapsedS >= ETA_MIN_AGE_S ? data.elapsedS / data.progress - data.elapsedS : null;
  return (
    <div className="flex flex-col gap-4">
      <div className="flex flex-col gap-2">
        <ProgressBar label={`Export of ${what}`} value={data === undefined || data.state === "waiting" ? null : data.progress} tone={finished ? "success" : failed ? "danger" : "default"} />
        <p className="min-h-5 text-sm text-zinc-700 tabular-nums dark:text-zinc-300" aria-live="polite">
          {data === undefined
            ? "Starting the export…"
            : data.state === "waiting"
              ? `Your browser is starting the download of ${started.fileName}…`
              : data.state === "running"
                ? `Exporting: ${formatPercent(data.progress)}${left === null ? "" : ` · ${formatTimeLeft(left)}`}`
                : finished
                  ? `Export complete in ${formatDuration(Math.max(1, Math.round(data.elapsedS)))}: your browser saves ${started.fileName}.`
                  : null}
        </p>
      </div>
      {failed ? <Alert title={data?.state === "cancelled" ? "The export was cancelled" : "The export failed"}>{data?.error}</Alert> : null}
      {progress.isError ? <Alert tone="warning" title="The export's progress cannot be read">{progress.error.message}</Alert> : null}
      <p className="text-xs text-zinc-600 dark:text-zinc-400">
        The export also shows on the Tasks page. If the download breaks, resume it from your browser&apos;s downloads: the console keeps the export for a while.
      </p>
      <DialogActions>
        {failed ? (
          <Button variant="secondary" onClick={() => download(started.url, started.fileName)}>
            Try the download again
          </Button>
        ) : null}
        <Button onClick={onClose}>Close</Button>
      </DialogActions>
    </div>
  );
}
