"use client";

// The forms behind the volume table's actions. Each is mounted while open (its state starts fresh), shows
// its own failure inside (where the user acted) and reports success to the table, which says so and
// refreshes the list.
import { useMutation, useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { useState, type FormEvent, type ReactNode } from "react";
import { formatBytes } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Button } from "@/components/ui/button.tsx";
import { Dialog, DialogActions } from "@/components/ui/dialog.tsx";
import { Field, inputClasses, selectClasses } from "@/components/ui/field.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import type { TVolumeRow } from "@/server/api/volumes/schema.ts";
import { parseSize, SizeField, sizeValue, type SizeValue } from "./size-field.tsx";
import { errorText, useRefreshVolumes } from "./volume-mutations.ts";

export interface DoneMessage {
  text: string;
  /** A task to follow on the task page (a copy). */
  taskLink?: boolean;
}

interface DialogBase {
  srRef: string;
  onClose: () => void;
  onDone: (message: DoneMessage) => void;
}

function FormButtons({ pending, label, onCancel }: { pending: boolean; label: string; onCancel: () => void }) {
  return (
    <DialogActions>
      <Button variant="secondary" onClick={onCancel}>
        Cancel
      </Button>
      <Button type="submit" aria-busy={pending} disabled={pending}>
        {pending ? "Working…" : label}
      </Button>
    </DialogActions>
  );
}

function Form({ onSubmit, children }: { onSubmit: () => void; children: ReactNode }) {
  return (
    <form
      noValidate
      className="flex flex-col gap-4"
      onSubmit={(event: FormEvent) => {
        event.preventDefault();
        onSubmit();
      }}
    >
      {children}
    </form>
  );
}

export function CreateVolumeDialog({ srRef, onClose, onDone }: DialogBase) {
  const trpc = useTRPC();
  const refresh = useRefreshVolumes();
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [size, setSize] = useState<SizeValue>({ amount: "10", unit: "GiB" });
  const [checked, setChecked] = useState(false);
  const create = useMutation(
    trpc.volumes.create.mutationOptions({
      onSuccess: async () => {
        await refresh();
        onDone({ text: `Volume “${name.trim()}” created.` });
      },
    }),
  );
  const parsed = parseSize(size);
  const nameError = checked && name.trim() === "" ? "Give the volume a name." : undefined;
  const sizeError = checked && "error" in parsed ? parsed.error : undefined;
  return (
    <Dialog open onClose={onClose} title="Create volume" description="A new empty volume in this SR.">
      <Form
        onSubmit={() => {
          setChecked(true);
          if (name.trim() === "" || "error" in parsed) return;
          create.mutate({ srRef, name: name.trim(), description, size: parsed.bytes });
        }}
      >
        <Field label="Name" error={nameError}>
          {(id, describedBy) => (
            <input id={id} aria-describedby={describedBy} aria-invalid={nameError ? true : undefined} className={inputClasses} value={name} onChange={(e) => setName(e.target.value)} autoComplete="off" />
          )}
        </Field>
        <SizeField label="Size" value={size} onChange={setSize} error={sizeError} />
        <Field label="Description" hint="Optional.">
          {(id, describedBy) => (
            <textarea id={id} aria-describedby={describedBy} className={`${inputClasses} h-20 py-2`} value={description} onChange={(e) => setDescription(e.target.value)} />
          )}
        </Field>
        {create.error ? <Alert tone="error">{errorText(create.error)}</Alert> : null}
        <FormButtons pending={create.isPending} label="Create volume" onCancel={onClose} />
      </Form>
    </Dialog>
  );
}

export function ResizeVolumeDialog({ srRef, volume, onClose, onDone }: DialogBase & { volume: TVolumeRow }) {
  const trpc = useTRPC();
  const refresh = useRefreshVolumes();
  const [size, setSize] = useState<SizeValue>(() => sizeValue(volume.virtualSize * 2));
  const [checked, setChecked] = useState(false);
  const resize = useMutation(
    trpc.volumes.resize.mutationOptions({
      onSuccess: async () => {
        await refresh();
        onDone({ text: `Volume “${volume.name}” resized.` });
      },
    }),
  );
  const parsed = parseSize(size);
  const sizeError = !checked
    ? undefined
    : "error" in parsed
      ? parsed.error
      : parsed.bytes <= volume.virtualSize
        ? `Choose more than the current ${formatBytes(volume.virtualSize)}: volumes can only grow.`
        : undefined;
  return (
    <Dialog open onClose={onClose} title={`Resize “${volume.name}”`} description={`Now ${formatBytes(volume.virtualSize)}. Volumes can grow, not shrink.`}>
      <Form
        onSubmit={() => {
          setChecked(true);
          if ("error" in parsed || parsed.bytes <= volume.virtualSize) return;
          resize.mutate({ srRef, uuid: volume.uuid, size: parsed.bytes });
        }}
      >
        <SizeField label="New size" value={size} onChange={setSize} error={sizeError} />
        {resize.error ? <Alert tone="error">{errorText(resize.error)}</Alert> : null}
        <FormButtons pending={resize.isPending} label="Resize" onCancel={onClose} />
      </Form>
    </Dialog>
  );
}

export function RenameVolumeDialog({ srRef, volume, onClose, onDone }: DialogBase & { volume: TVolumeRow }) {
  const trpc = useTRPC();
  const refresh = useRefreshVolumes();
  const [name, setName] = useState(volume.name);
  const [description, setDescription] = useState(volume.description);
  const [checked, setChecked] = useState(false);
  const rename = useMutation(
    trpc.volumes.rename.mutationOptions({
      onSuccess: async () => {
        await refresh();
        onDone({ text: `Volume “${name.trim()}” saved.` });
      },
    }),
  );
  const nameError = checked && name.trim() === "" ? "Give the volume a name." : undefined;
  return (
    <Dialog open onClose={onClose} title={`Name and description of “${volume.name}”`}>
      <Form
        onSubmit={() => {
          setChecked(true);
          if (name.trim() === "") return;
          rename.mutate({ srRef, uuid: volume.uuid, name: name.trim(), description });
        }}
      >
        <Field label="Name" error={nameError}>
          {(id, describedBy) => (
            <input id={id} aria-describedby={describedBy} aria-invalid={nameError ? true : undefined} className={inputClasses} value={name} onChange={(e) => setName(e.target.value)} autoComplete="off" />
          )}
        </Field>
        <Field label="Description">
          {(id, describedBy) => (
            <textarea id={id} aria-describedby={describedBy} className={`${inputClasses} h-24 py-2`} value={description} onChange={(e) => setDescription(e.target.value)} />
          )}
        </Field>
        {rename.error ? <Alert tone="error">{errorText(rename.error)}</Alert> : null}
        <FormButtons pending={rename.isPending} label="Save" onCancel={onClose} />
      </Form>
    </Dialog>
  );
}

/** A writable clone, named at once (it would otherwise carry its original's name). */
export function CloneVolumeDialog({ srRef, volume, onClose, onDone }: DialogBase & { volume: TVolumeRow }) {
  const trpc = useTRPC();
  const refresh = useRefreshVolumes();
  const [name, setName] = useState(`${volume.name} (clone)`);
  const [checked, setChecked] = useState(false);
  const clone = useMutation(
    trpc.volumes.clone.mutationOptions({
      onSuccess: async () => {
        await refresh();
        onDone({ text: `Clone “${name.trim()}” made.` });
      },
    }),
  );
  const nameError = checked && name.trim() === "" ? "Give the clone a name." : undefined;
  return (
    <Dialog open onClose={onClose} title={`Clone “${volume.name}”`} description="A writable volume with the same contents, sharing its unchanged blocks.">
      <Form
        onSubmit={() => {
          setChecked(true);
          if (name.trim() === "") return;
          clone.mutate({ srRef, uuid: volume.uuid, name: name.trim() });
        }}
      >
        <Field label="Name of the clone" error={nameError}>
          {(id, describedBy) => (
            <input id={id} aria-describedby={describedBy} aria-invalid={nameError ? true : undefined} className={inputClasses} value={name} onChange={(e) => setName(e.target.value)} autoComplete="off" />
          )}
        </Field>
        {clone.error ? <Alert tone="error">{errorText(clone.error)}</Alert> : null}
        <FormButtons pending={clone.isPending} label="Clone" onCancel={onClose} />
      </Form>
    </Dialog>
  );
}

/** The volume's other_config: each pair with a Remove button, and a form to add one. */
export function VolumeKeysDialog({ srRef, volume, onClose }: Omit<DialogBase, "onDone"> & { volume: TVolumeRow }) {
  const trpc = useTRPC();
  const refresh = useRefreshVolumes();
  const [key, setKey] = useState("");
  const [value, setValue] = useState("");
  const [checked, setChecked] = useState(false);
  const [status, setStatus] = useState("");
  const add = useMutation(
    trpc.volumes.addKey.mutationOptions({
      onSuccess: async (_data, input) => {
        await refresh();
        setStatus(`Key “${input.key}” added.`);
        setKey("");
        setValue("");
        setChecked(false);
      },
    }),
  );
  const remove = useMutation(
    trpc.volumes.removeKey.mutationOptions({
      onSuccess: async (_data, input) => {
        await refresh();
        setStatus(`Key “${input.key}” removed.`);
      },
    }),
  );
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
      <Form
        onSubmit={() => {
          setChecked(true);
          setStatus("");
          if (key.trim() === "") return;
          add.mutate({ srRef, uuid: volume.uuid, key: key.trim(), value });
        }}
      >
        <div className="grid gap-3 sm:grid-cols-2">
          <Field label="Key" error={keyError}>
            {(id, describedBy) => (
              <input id={id} aria-describedby={describedBy} aria-invalid={keyError ? true : undefined} className={inputClasses} value={key} onChange={(e) => setKey(e.target.value)} autoComplete="off" />
            )}
          </Field>
          <Field label="Value">
            {(id, describedBy) => <input id={id} aria-describedby={describedBy} className={inputClasses} value={value} onChange={(e) => setValue(e.target.value)} autoComplete="off" />}
          </Field>
        </div>
        {failure ? <Alert tone="error">{failure}</Alert> : null}
        <p role="status" className="min-h-5 text-sm text-emerald-700 dark:text-emerald-400">
          {status}
        </p>
        <DialogActions>
          <Button variant="secondary" onClick={onClose}>
            Close
          </Button>
          <Button type="submit" aria-busy={add.isPending} disabled={add.isPending}>
            {add.isPending ? "Adding…" : "Add key"}
          </Button>
        </DialogActions>
      </Form>
    </Dialog>
  );
}

/** A copy to another SR is started, then followed on the task page. */
export function CopyVolumeDialog({ srRef, volume, onClose, onDone }: DialogBase & { volume: TVolumeRow }) {
  const trpc = useTRPC();
  const refresh = useRefreshVolumes();
  const targets = useQuery(trpc.volumes.copyTargets.queryOptions({ srRef }));
  const [chosen, setChosen] = useState("");
  const copy = useMutation(
    trpc.volumes.copy.mutationOptions({
      onSuccess: async () => {
        await refresh();
        onDone({ text: `Copy of “${volume.name}” started.`, taskLink: true });
      },
    }),
  );
  const destination = chosen || targets.data?.[0]?.ref || "";
  return (
    <Dialog open onClose={onClose} title={`Copy “${volume.name}” to another SR`} description={`${formatBytes(volume.virtualSize)}; the copy runs as a task you can follow on the Tasks page.`}>
      <Form onSubmit={() => destination !== "" && copy.mutate({ srRef, uuid: volume.uuid, destSrRef: destination })}>
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
        <DialogActions>
          <Button variant="secondary" onClick={onClose}>
            Cancel
          </Button>
          <Button type="submit" aria-busy={copy.isPending} disabled={copy.isPending || destination === ""}>
            {copy.isPending ? "Starting…" : "Start copy"}
          </Button>
        </DialogActions>
      </Form>
    </Dialog>
  );
}

const CONTENT: Record<string, string> = { Data: "Data", Data_and_CBT_Metadata: "Data and CBT metadata", CBT_Metadata: "CBT metadata only (data destroyed)" };

/** Everything the plugin says of one volume (Volume.stat), read fresh when opened. */
export function VolumeDetailsDialog({ srRef, volume, onClose }: Omit<DialogBase, "onDone"> & { volume: TVolumeRow }) {
  const trpc = useTRPC();
  const stat = useQuery(trpc.volumes.stat.queryOptions({ srRef, key: volume.key }, { staleTime: 0 }));
  const data = stat.data;
  const rows: Array<[string, ReactNode]> = data
    ? [
        ["Name", data.name || "(no name)"],
        ["Description", data.description || "—"],
        ["Size", `${formatBytes(data.virtualSize)} (${data.virtualSize.toLocaleString("en")} bytes)`],
        ["Used", formatBytes(data.physicalUtilisation)],
        ["Access", data.readWrite ? "Read and write" : "Read-only"],
        ["Sharable", data.sharable ? "Yes" : "No"],
        ["Content", CONTENT[data.volumeType ?? ""] ?? data.volumeType ?? "Not stated"],
        ["CBT", data.cbtEnabled ? "On" : "Off"],
        ["Snapshot of", volume.isSnapshot ? (volume.snapshotOf?.name ?? "(original gone)") : "—"],
        ["UUID", <span key="uuid" className="font-mono text-xs break-all">{data.uuid}</span>],
        ["Key", <span key="key" className="font-mono text-xs break-all">{data.key}</span>],
      ]
    : [];
  const keys = data ? Object.entries(data.keys).sort(([a], [b]) => a.localeCompare(b)) : [];
  return (
    <Dialog open onClose={onClose} title={`Details of “${volume.name}”`} description="As the SR's plugin reports the volume now.">
      {data ? (
        <>
          <dl className="grid grid-cols-[max-content_1fr] gap-x-4 gap-y-1.5 text-sm">
            {rows.map(([term, value]) => (
              <div key={term} className="contents">
                <dt className="text-zinc-500 dark:text-zinc-400">{term}</dt>
                <dd className="min-w-0">{value}</dd>
              </div>
            ))}
          </dl>
          <div>
            <h3 className="text-sm font-medium">Metadata on the volume</h3>
            {keys.length === 0 ? (
              <p className="mt-1 text-sm text-zinc-600 dark:text-zinc-400">None.</p>
            ) : (
              <ul className="mt-1 flex flex-col gap-0.5 font-mono text-xs">
                {keys.map(([k, v]) => (
                  <li key={k} className="break-all">
                    {k} = {v}
                  </li>
                ))}
              </ul>
            )}
          </div>
        </>
      ) : stat.isError ? (
        <Alert tone="error" title="Could not read the volume">
          {stat.error.message}
        </Alert>
      ) : (
        <div role="status" className="flex flex-col gap-2">
          <span className="sr-only">Loading…</span>
          {Array.from({ length: 8 }, (_, i) => (
            <Skeleton key={i} className="h-5 w-full" />
          ))}
        </div>
      )}
      <DialogActions>
        <Button variant="secondary" onClick={onClose}>
          Close
        </Button>
      </DialogActions>
    </Dialog>
  );
}

/** The link a started copy's message carries. */
export function TaskLink() {
  return (
    <Link href="/tasks" className="font-medium underline underline-offset-2">
      Follow it on the Tasks page
    </Link>
  );
}
