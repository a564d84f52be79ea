"use client";

// VM import on the VMs page: drop files (or a folder, or choose them) into a chosen SR: XVAs, OVAs, an OVF with
// its disks (sent as one package), bare disk images (a dialog asks: a new VM, or a disk alone). Each uploads
// resumably while the console imports it, with its progress, rate, time left, pause / resume / cancel, and the
// import's state, error and notes in words from its toolstack task.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useRef, useState, useSyncExternalStore, type DragEvent, type ReactNode } from "react";
import { formatBytes, formatRate, formatTimeLeft } from "@/lib/format.ts";
import { useVerdict } from "@/components/access/use-verdict.tsx";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Button } from "@/components/ui/button.tsx";
import { cn } from "@/components/ui/cn.ts";
import { Field, inputClasses, selectClasses } from "@/components/ui/field.tsx";
import { ProgressBar } from "@/components/ui/progress-bar.tsx";
import type { UploadSummary } from "@/server/api/transfers/schema.ts";
import { DiskChoiceDialog, type DiskChoice } from "./disk-choice-dialog.tsx";
import { droppedFiles, planUploads, type Planned } from "./dropped-files.ts";
import { unfinishedUploads, type UploadFile, UploadJob } from "./upload-job.ts";

const ACCEPT = ".xva,.gz,.zst,.tar,.tgz,.ova,.ovf,.mf,.cert,.vmdk,.vhd,.vhdx,.qcow2,.qcow,.raw,.img";

export function ImportDropZone() {
  const importing = useVerdict("vms.import");
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  // The SRs to import into: no volume counts, so polling the list starts no plugin process.
  const srs = useQuery(trpc.srs.list.queryOptions({ volumeCounts: false }, { refetchInterval: 15_000 }));
  const [chosenSr, setChosenSr] = useState<string | null>(null);
  const [jobs, setJobs] = useState<UploadJob[]>([]);
  const [dragging, setDragging] = useState(false);
  const [refused, setRefused] = useState<string | null>(null);
  const [unfinished, setUnfinished] = useState<{ fileName: string; size: number | null }[]>([]);
  const [force, setForce] = useState(false);
  const [notes, setNotes] = useState<ReadonlyMap<string, string>>(new Map());
  const [diskChoice, setDiskChoice] = useState<{ id: number; into: string; disks: Array<Extract<Planned, { kind: "disk" }>> } | null>(null);
  const input = useRef<HTMLInputElement>(null);
  const [urlIds, setUrlIds] = useState<string[]>([]);
  const [url, setUrl] = useState("");
  const fromUrl = useMutation(
    trpc.transfers.importFromUrl.mutationOptions({
      onSuccess: ({ id }) => {
        setUrlIds((ids) => [id, ...ids]);
        setUrl("");
      },
    }),
  );

  const diskSrs = (srs.data?.srs ?? []).filter((sr) => sr.contentType !== "iso" && sr.attached);
  const sr = chosenSr ?? diskSrs.find((s) => s.isDefault)?.ref ?? diskSrs[0]?.ref ?? null;

  useEffect(() => {
    void unfinishedUploads().then(setUnfinished);
  }, []);

  // The console's view of each upload: the import's state, its task, its error.
  const [knownIds, setKnownIds] = useState<string[]>([]);
  const ids = [...urlIds, ...knownIds];
  const states = useQuery(
    trpc.transfers.uploads.queryOptions({ ids }, {
      enabled: ids.length > 0,
      refetchInterval: (query) => ((query.state.data?.uploads ?? []).some((u) => u.status === "uploading" || u.status === "importing") || ids.length > (query.state.data?.uploads.length ?? 0) ? 1000 : false),
    }),
  );
  const doneCount = (states.data?.uploads ?? []).filter((u) => u.status === "done").length;
  useEffect(() => {
    if (doneCount > 0) void queryClient.invalidateQueries({ queryKey: trpc.vms.list.queryKey() });
  }, [doneCount, queryClient, trpc]);

  // Leaving the page mid-upload stops it: ask first.
  const uploading = jobs.some((j) => j.snapshot.phase === "uploading" || j.snapshot.phase === "retrying" || j.snapshot.phase === "starting");
  useEffect(() => {
    if (!uploading) return;
    const warn = (event: BeforeUnloadEvent) => {
      event.preventDefault();
      event.returnValue = "";
    };
    window.addEventListener("beforeunload", warn);
    return () => window.removeEventListener("beforeunload", warn);
  }, [uploading]);

  /** The SR to import into: the chosen one, or (dropped before the SRs have loaded) the default once they have. */
  async function targetSr(): Promise<string | null> {
    if (sr !== null || srs.data !== undefined) return sr;
    const loaded = await queryClient.fetchQuery(trpc.srs.list.queryOptions({ volumeCounts: false })).catch(() => undefined);
    const usable = (loaded?.srs ?? []).filter((s) => s.contentType !== "iso" && s.attached);
    return usable.find((s) => s.isDefault)?.ref ?? usable[0]?.ref ?? null;
  }

  function startUploads(files: Array<{ file: UploadFile; note: string | null; diskOnly: boolean }>, into: string) {
    const fresh = files.map(({ file, note, diskOnly }) => ({ job: new UploadJob(file, into, { diskOnly, force }), note }));
    setJobs((current) => [...fresh.map((f) => f.job), ...current]);
    setNotes((current) => new Map([...current, ...fresh.filter((f) => f.note !== null).map((f) => [f.job.snapshot.key, f.note!] as const)]));
    for (const { job } of fresh) {
      // The console's id arrives once the upload is created: ask for its import's state from then on.
      const stop = job.subscribe(() => {
        if (job.snapshot.id === null) return;
        stop();
        setKnownIds((known) => [...known, job.snapshot.id!]);
      });
      void job.start(into);
    }
    setUnfinished((u) => u.filter((p) => !fresh.some(({ job }) => job.snapshot.fileName === p.fileName)));
  }

  async function add(list: FileList | File[]) {
    // Copied before any wait: the picker's FileList empties when its input is cleared.
    const files = [...list];
    if (!importing.allowed) {
      setRefused(`You cannot import: ${importing.reason}`);
      return;
    }
    setRefused(null);
    const into = await targetSr();
    if (into === null) {
      setRefused("There is no attached SR to import into.");
      return;
    }
    const plan = await planUploads(files);
    const refusals = plan.filter((p): p is Extract<Planned, { kind: "refused" }> => p.kind === "refused");
    if (refusals.length > 0) setRefused(refusals.map((r) => `${r.name}: ${r.reason}.`).join(" "));
    startUploads(plan.flatMap((p) => (p.kind === "upload" ? [{ file: p.file, note: p.note, diskOnly: false }] : [])), into);
    const disks = plan.filter((p): p is Extract<Planned, { kind: "disk" }> => p.kind === "disk");
    if (disks.length > 0) setDiskChoice({ id: Date.now(), into, disks });
  }

  function chooseDisks(choices: DiskChoice[]) {
    if (diskChoice === null) return;
    startUploads(choices.map((choice) => ({ file: choice.disk.file, note: choice.disk.note, diskOnly: choice.diskOnly })), diskChoice.into);
    setDiskChoice(null);
  }

  function onDrop(event: DragEvent<HTMLDivElement>) {
    event.preventDefault();
    setDragging(false);
    void droppedFiles(event.dataTransfer).then((files) => (files.length > 0 ? add(files) : undefined));
  }

  return (
    <section aria-labelledby="import-heading" className="flex flex-col gap-3 rounded-xl border border-zinc-200 bg-white p-4 shadow-xs dark:border-zinc-800 dark:bg-zinc-900/60">
      <div className="flex flex-wrap items-end justify-between gap-3">
        <div>
          <h2 id="import-heading" className="text-base font-semibold text-zinc-900 dark:text-zinc-100">
            Import VMs
          </h2>
          <p className="text-sm text-zinc-600 dark:text-zinc-400">XVA, OVA, OVF with its disks, or a disk image (VMDK, VHD, VHDX, qcow2, raw). The import runs while the file uploads; a dropped connection or a reload resumes where it stopped.</p>
        </div>
        <Field label="Import into SR" className="w-full sm:w-80">
          {(id, describedBy) => (
            <select id={id} aria-describedby={describedBy} className={selectClasses} value={sr ?? ""} disabled={diskSrs.length === 0} onChange={(e) => setChosenSr(e.target.value)}>
              {diskSrs.length === 0 ? <option value="">{srs.isLoading ? "Loading SRs…" : "No attached SR"}</option> : null}
              {diskSrs.map((s) => (
                <option key={s.ref} value={s.ref}>
                  {s.name}
                  {s.isDefault ? " (default)" : ""} — {formatBytes(Math.max(0, s.physicalSize - s.physicalUtilisation))} free
                </option>
              ))}
            </select>
          )}
        </Field>
      </div>
      <div
        role="group"
        aria-label="Drop VM files here"
        onDragOver={(e) => {
          e.preventDefault();
          setDragging(true);
        }}
        onDragLeave={() => setDragging(false)}
        onDrop={onDrop}
        className={cn(
          "flex flex-col items-center justify-center gap-2 rounded-lg border-2 border-dashed px-4 py-6 text-center text-sm",
          dragging ? "border-sky-500 bg-sky-50 dark:bg-sky-950/40" : "border-zinc-300 text-zinc-600 dark:border-zinc-700 dark:text-zinc-400",
        )}
      >
        <p>Drop .xva, .ova, .ovf with its disks (or their folder), or disk images here, or</p>
        <Button variant="secondary" onClick={() => input.current?.click()} disabled={sr === null} deniedReason={importing.reason}>
          Choose files to import
        </Button>
        <input
          ref={input}
          type="file"
          multiple
          accept={ACCEPT}
          aria-label="VM files to import"
          className="sr-only"
          tabIndex={-1}
          onChange={(e) => {
            if (e.target.files !== null) void add(e.target.files);
            e.target.value = "";
          }}
        />
      </div>
      <form
        className="flex flex-wrap items-end gap-2"
        onSubmit={(e) => {
          e.preventDefault();
          if (sr !== null && importing.allowed) fromUrl.mutate({ url, sr, force });
        }}
      >
        <Field label="Or import from a URL" className="min-w-0 flex-1" error={fromUrl.error?.message}>
          {(id, describedBy) => (
            <input id={id} aria-describedby={describedBy} aria-invalid={fromUrl.isError || undefined} className={inputClasses} type="url" inputMode="url" placeholder="https://example.com/web.ova" value={url} onChange={(e) => setUrl(e.target.value)} />
          )}
        </Field>
        <Button type="submit" variant="secondary" disabled={sr === null || url.trim() === "" || fromUrl.isPending} deniedReason={importing.reason}>
          {fromUrl.isPending ? "Contacting…" : "Import from URL"}
        </Button>
      </form>
      <label className="flex items-center gap-2 text-sm text-zinc-700 dark:text-zinc-300">
        <input type="checkbox" className="size-4 accent-sky-600" checked={force} onChange={(e) => setForce(e.target.checked)} />
        Ignore checksum errors (an XVA&apos;s block checksums, an OVA&apos;s manifest)
      </label>
      {refused !== null ? <Alert tone="error">{refused}</Alert> : null}
      <DiskChoiceDialog key={diskChoice?.id ?? 0} open={diskChoice !== null} disks={diskChoice?.disks ?? []} srName={diskSrs.find((s) => s.ref === diskChoice?.into)?.name ?? "the SR"} onCancel={() => setDiskChoice(null)} onConfirm={chooseDisks} />
      {unfinished.length > 0 ? (
        <Alert tone="info" title="Unfinished uploads">
          {unfinished.map((u) => `${u.fileName}${u.size === null ? "" : ` (${formatBytes(u.size)})`}`).join(", ")}: drop or choose the same file again to resume where it stopped.
        </Alert>
      ) : null}
      {jobs.length > 0 || urlIds.length > 0 ? (
        <ul aria-label="Imports" className="flex flex-col divide-y divide-zinc-200 dark:divide-zinc-800">
          {urlIds.map((id) => (
            <ImportUrlRow key={id} state={states.data?.uploads.find((u) => u.id === id)} />
          ))}
          {jobs.map((job) => (
            <ImportUploadRow key={job.snapshot.key} job={job} note={notes.get(job.snapshot.key) ?? null} state={states.data?.uploads.find((u) => u.id === job.snapshot.id)} />
          ))}
        </ul>
      ) : null}
    </section>
  );
}

function useJob(job: UploadJob) {
  return useSyncExternalStore(
    (listener) => job.subscribe(listener),
    () => job.snapshot,
    () => job.snapshot,
  );
}

function ImportUploadRow({ job, note, state }: { job: UploadJob; note: string | null; state: UploadSummary | undefined }) {
  const snap = useJob(job);
  const fraction = snap.size === 0 ? 1 : snap.sent / snap.size;
  const importError = importFailure(state);
  const error = importError ?? (snap.phase === "failed" ? snap.error : null);
  const done = state?.status === "done";
  const label = `Upload of ${snap.fileName}`;
  let status: string;
  if (error !== null) status = "Failed";
  else if (snap.phase === "cancelled" || state?.status === "cancelled") status = "Cancelled";
  else if (done) status = state.diskOnly ? "Imported as a disk" : "Imported";
  else if (snap.phase === "paused") status = "Paused";
  else if (snap.phase === "retrying") status = "The console cannot be reached: retrying…";
  else if (snap.phase === "uploaded") status = "Upload complete: finishing the import…";
  else if (state?.status === "importing") status = `Uploading and importing${state.attempts > 1 ? ` (import restarted ×${state.attempts - 1})` : ""}`;
  else status = snap.resumed ? "Resuming…" : "Uploading…";
  const active = error === null && !done && snap.phase !== "cancelled" && state?.status !== "cancelled";
  const left = snap.rate !== null && snap.rate > 0 ? (snap.size - snap.sent) / snap.rate : null;
  return (
    <TransferRow
      fileName={snap.fileName}
      status={`${status}${state !== undefined ? ` · into ${state.srName}` : ""}`}
      actions={
        <div className="flex gap-2">
          {active && (snap.phase === "uploading" || snap.phase === "retrying") ? (
            <Button size="sm" variant="secondary" onClick={() => job.pause()} aria-label={`Pause ${snap.fileName}`}>
              Pause
            </Button>
          ) : null}
          {active && snap.phase === "paused" ? (
            <Button size="sm" variant="secondary" onClick={() => job.resume()} aria-label={`Resume ${snap.fileName}`}>
              Resume
            </Button>
          ) : null}
          {snap.phase === "failed" && importError === null ? (
            <Button size="sm" variant="secondary" onClick={() => job.resume()} aria-label={`Retry ${snap.fileName}`}>
              Retry
            </Button>
          ) : null}
          {active ? (
            <Button size="sm" variant="danger" onClick={() => void job.cancel()} aria-label={`Cancel ${snap.fileName}`}>
              Cancel
            </Button>
          ) : null}
        </div>
      }
    >
      <ProgressBar value={fraction} label={label} tone={error !== null ? "danger" : done ? "success" : "default"} />
      <p className="flex flex-wrap gap-x-3 text-xs tabular-nums text-zinc-600 dark:text-zinc-400">
        <span>
          {formatBytes(snap.sent)} of {formatBytes(snap.size)}
        </span>
        {snap.phase === "uploading" && snap.rate !== null ? <span>{formatRate(snap.rate)}</span> : null}
        {snap.phase === "uploading" && left !== null ? <span>{formatTimeLeft(left)}</span> : null}
        {state?.task !== null && state?.task !== undefined && !done && error === null ? <span>import task {Math.round(state.task.progress * 100)}%</span> : null}
      </p>
      {note !== null && !done && error === null ? <p className="text-xs text-zinc-600 dark:text-zinc-400">{note}</p> : null}
      {error !== null ? <Alert tone="error" title={`${snap.fileName} was not imported`}>{error}</Alert> : null}
      <ImportNotice state={state} />
      <ImportNotes state={state} />
    </TransferRow>
  );
}

/** What the file asked that the VM does not have, or what was noticed on the way, once imported. */
function ImportNotes({ state }: { state: UploadSummary | undefined }) {
  if (state?.status !== "done" || state.notes.length === 0) return null;
  return (
    <Alert tone="info" title="Imported, with notes">
      <ul className="list-disc pl-4">
        {state.notes.map((note) => (
          <li key={note}>{note}</li>
        ))}
      </ul>
    </Alert>
  );
}

/** Why an import failed, in words; null unless it failed. */
function importFailure(state: UploadSummary | undefined): string | null {
  return state?.status === "failed" ? (state.error ?? state.task?.error ?? "The import failed.") : null;
}

/** What a running import waits for (a login after its session ended, a toolstack coming back), in words. */
function ImportNotice({ state }: { state: UploadSummary | undefined }) {
  if (state?.status !== "importing" || state.error === null) return null;
  return <Alert tone="warning">{state.error}</Alert>;
}

/** An import from URL: the console's download and the import, from its state alone. */
function ImportUrlRow({ state }: { state: UploadSummary | undefined }) {
  const trpc = useTRPC();
  const cancel = useMutation(trpc.transfers.cancel.mutationOptions());
  if (state === undefined) {
    return (
      <li className="flex flex-col gap-2 py-3">
        <p className="text-sm text-zinc-600 dark:text-zinc-400" role="status">
          Starting the download…
        </p>
        <ProgressBar value={null} label="Download starting" />
      </li>
    );
  }
  const error = importFailure(state);
  const status = error !== null ? "Failed" : state.status === "done" ? "Imported" : state.status === "cancelled" ? "Cancelled" : state.received < state.length || state.length === 0 ? "Downloading and importing" : "Download complete: finishing the import…";
  return (
    <TransferRow
      fileName={state.fileName}
      status={`${status} · from ${state.url} · into ${state.srName}`}
      oneLine
      actions={
        state.status === "uploading" || state.status === "importing" ? (
          <Button size="sm" variant="danger" disabled={cancel.isPending} onClick={() => cancel.mutate({ id: state.id })} aria-label={`Cancel ${state.fileName}`}>
            Cancel
          </Button>
        ) : null
      }
    >
      {cancel.error !== null ? <Alert tone="error">{cancel.error.message}</Alert> : null}
      <ProgressBar value={state.length > 0 ? state.received / state.length : null} label={`Download of ${state.fileName}`} tone={error !== null ? "danger" : state.status === "done" ? "success" : "default"} />
      <p className="text-xs tabular-nums text-zinc-600 dark:text-zinc-400">
        {formatBytes(state.received)}
        {state.length > 0 ? ` of ${formatBytes(state.length)}` : ""}
      </p>
      {error !== null ? <Alert tone="error" title={`${state.fileName} was not imported`}>{error}</Alert> : null}
      <ImportNotice state={state} />
      <ImportNotes state={state} />
    </TransferRow>
  );
}

/**
 * One transfer in the list: its file name and status (announced as it changes), its buttons beside them,
 * then its progress. A one-line status (a URL can be long) is cut short to keep the buttons beside it;
 * otherwise the buttons wrap under it on a narrow screen.
 */
function TransferRow({ fileName, status, oneLine = false, actions, children }: { fileName: string; status: string; oneLine?: boolean; actions: ReactNode; children: ReactNode }) {
  return (
    <li className="flex flex-col gap-2 py-3" aria-label={fileName}>
      <div className={cn("flex items-center justify-between gap-2", !oneLine && "flex-wrap")}>
        <div className="min-w-0">
          <p className="truncate text-sm font-medium text-zinc-900 dark:text-zinc-100">{fileName}</p>
          <p className={cn(oneLine && "truncate", "text-xs text-zinc-600 dark:text-zinc-400")} role="status">
            {status}
          </p>
        </div>
        {actions}
      </div>
      {children}
    </li>
  );
}
