"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { TRPCClientError } from "@trpc/client";
import { useId, useState } from "react";
import { formatBytes } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Dialog } from "@/components/ui/dialog.tsx";
import { DialogForm } from "@/components/ui/dialog-form.tsx";
import { Field, inputClasses, selectClasses } from "@/components/ui/field.tsx";
import { FormButtons } from "@/components/ui/form-buttons.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { SkeletonGroup } from "@/components/ui/skeleton-group.tsx";
import { ZNbdUri, type TStartDataTaskInput } from "@/server/api/tasks/schema.ts";

type Operation = "copy" | "mirror";
/** nbd: a remote NBD URI; sr: a new volume in another SR (copy); vdi: an existing volume of another SR (mirror). */
type Target = "nbd" | "sr" | "vdi";

const radioClasses = "size-4 accent-zinc-900 dark:accent-zinc-100";

/** A small radio group with a visible legend. */
function Choice<T extends string>({ legend, name, value, options, onChange }: { legend: string; name: string; value: T; options: Array<{ value: T; label: string; disabled?: boolean; hint?: string }>; onChange: (value: T) => void }) {
  return (
    <fieldset className="flex flex-col gap-1.5">
      <legend className="mb-1.5 text-sm font-medium text-zinc-800 dark:text-zinc-200">{legend}</legend>
      <div className="flex flex-wrap gap-x-5 gap-y-1.5">
        {options.map((option) => (
          <label key={option.value} className="flex items-center gap-2 text-sm text-zinc-800 has-disabled:opacity-50 dark:text-zinc-200">
            <input type="radio" name={name} value={option.value} checked={value === option.value} disabled={option.disabled} onChange={() => onChange(option.value)} className={radioClasses} />
            {option.label}
          </label>
        ))}
      </div>
    </fieldset>
  );
}

/** The dialog behind "Copy or mirror a volume": what to copy, how, and where to; `onStarted` gets the new task. */
export function DataTaskDialog({ open, onClose, onStarted }: { open: boolean; onClose: () => void; onStarted: (task: string) => void }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const name = useId();
  const sources = useQuery(trpc.tasks.copySources.queryOptions(undefined, { enabled: open, staleTime: 5_000 }));
  const [srRef, setSrRef] = useState("");
  const [vdiRef, setVdiRef] = useState("");
  const [operation, setOperation] = useState<Operation>("copy");
  const [target, setTarget] = useState<Target>("nbd");
  const [remote, setRemote] = useState("");
  const [destSr, setDestSr] = useState("");
  const [destVdi, setDestVdi] = useState("");
  const [remoteError, setRemoteError] = useState<string | undefined>();

  const start = useMutation(
    trpc.tasks.startDataTask.mutationOptions({
      onSuccess: async ({ task }) => {
        await queryClient.invalidateQueries({ queryKey: trpc.tasks.list.queryKey() });
        onStarted(task);
      },
    }),
  );

  const srs = sources.data?.srs ?? [];
  const usable = srs.filter((sr) => sr.problem === null);
  // Defaults follow the data until the user chooses: the pool's default SR (else the first with volumes), its first volume.
  const sr = usable.find((s) => s.ref === srRef) ?? usable.find((s) => s.isDefault && s.volumes.length > 0) ?? usable.find((s) => s.volumes.length > 0) ?? usable[0];
  const vdi = sr?.volumes.find((v) => v.ref === vdiRef) ?? sr?.volumes[0];
  const destinations = usable.filter((s) => s.ref !== sr?.ref);
  const dest = destinations.find((s) => s.ref === destSr) ?? destinations[0];
  // A mirror writes into a volume that exists; a copy makes a new one. The other SR choice follows the operation.
  const effectiveTarget: Target = target === "nbd" ? "nbd" : operation === "mirror" ? "vdi" : "sr";
  // Volumes big enough to take every block of the source.
  const intoChoices = dest?.volumes.filter((v) => v.ref !== vdi?.ref && !v.isSnapshot && v.virtualSize >= (vdi?.virtualSize ?? 0)) ?? [];
  const into = intoChoices.find((v) => v.ref === destVdi) ?? intoChoices[0];

  function submit() {
    if (vdi === undefined) return;
    let input: TStartDataTaskInput;
    if (effectiveTarget === "nbd") {
      const parsed = ZNbdUri.safeParse(remote);
      if (!parsed.success) {
        setRemoteError(parsed.error.issues[0]?.message ?? "Not an NBD URI");
        return;
      }
      input = { target: "nbd", vdi: vdi.ref, operation, remote: parsed.data };
    } else if (effectiveTarget === "vdi") {
      if (into === undefined) return;
      input = { target: "vdi", vdi: vdi.ref, operation: "mirror", dest: into.ref };
    } else {
      if (dest === undefined) return;
      input = { target: "sr", vdi: vdi.ref, operation: "copy", sr: dest.ref };
    }
    setRemoteError(undefined);
    start.mutate(input);
  }

  const serverFieldError =
    start.error instanceof TRPCClientError ? (start.error.data as { zodError?: { fieldErrors?: Record<string, string[]> } } | undefined)?.zodError?.fieldErrors?.remote?.[0] : undefined;
  const verb = operation === "mirror" ? "mirror" : "copy";

  return (
    <Dialog
      open={open}
      onClose={onClose}
      title="Copy or mirror a volume"
      description="A copy moves the whole volume once; a mirror sends every later write to an NBD export or another volume until you cancel it."
    >
      {sources.error !== null ? (
        <QueryError error={sources.error} what="the SRs and their volumes" onRetry={() => void sources.refetch()} />
      ) : sources.data === undefined ? (
        <SkeletonGroup label="Loading the SRs and their volumes…" className="flex flex-col gap-4">
          <Skeleton className="h-16" />
          <Skeleton className="h-16" />
          <Skeleton className="h-24" />
        </SkeletonGroup>
      ) : (
        <DialogForm onSubmit={submit} noValidate>
          <div className="grid gap-4 sm:grid-cols-2">
            <Field label="Source SR" hint={srs.length > usable.length ? `${srs.length - usable.length} detached or unreachable SR(s) not shown.` : undefined}>
              {(id, describedBy) => (
                <select id={id} aria-describedby={describedBy} className={selectClasses} value={sr?.ref ?? ""} onChange={(e) => (setSrRef(e.target.value), setVdiRef(""))}>
                  {usable.map((s) => (
                    <option key={s.ref} value={s.ref}>
                      {s.name} ({s.type})
                    </option>
                  ))}
                </select>
              )}
            </Field>
            <Field label="Volume" error={sr !== undefined && sr.volumes.length === 0 ? "This SR has no volumes." : undefined}>
              {(id, describedBy) => (
                <select id={id} aria-describedby={describedBy} className={selectClasses} value={vdi?.ref ?? ""} disabled={vdi === undefined} onChange={(e) => setVdiRef(e.target.value)}>
                  {sr?.volumes.map((v) => (
                    <option key={v.ref} value={v.ref}>
                      {v.name || "(no name)"} · {formatBytes(v.virtualSize)}
                      {v.isSnapshot ? " · snapshot" : ""}
                    </option>
                  ))}
                </select>
              )}
            </Field>
          </div>

          <Choice
            legend="Operation"
            name={`${name}-operation`}
            value={operation}
            onChange={setOperation}
            options={[
              { value: "copy", label: "Copy (Data.copy)" },
              { value: "mirror", label: "Mirror (Data.mirror)" },
            ]}
          />
          <Choice
            legend="Target"
            name={`${name}-target`}
            value={effectiveTarget}
            onChange={setTarget}
            options={[
              { value: "nbd", label: "A remote NBD URI" },
              operation === "mirror"
                ? { value: "vdi", label: "A volume in another SR", disabled: destinations.length === 0 }
                : { value: "sr", label: "A new volume in another SR", disabled: destinations.length === 0 },
            ]}
          />

          {effectiveTarget === "nbd" ? (
            <Field label="NBD URI" hint="nbd://host:port/export, nbd+unix:///export?socket=/path or nbd:unix:/path" error={remoteError ?? serverFieldError}>
              {(id, describedBy) => (
                <input
                  id={id}
                  aria-describedby={describedBy}
                  aria-invalid={remoteError !== undefined || serverFieldError !== undefined}
                  className={inputClasses}
                  value={remote}
                  onChange={(e) => setRemote(e.target.value)}
                  placeholder="nbd://backup.example:10809/disk0"
                  autoComplete="off"
                  spellCheck={false}
                />
              )}
            </Field>
          ) : (
            <div className="grid gap-4 sm:grid-cols-2">
              <Field
                label="Destination SR"
                className={effectiveTarget === "sr" ? "sm:col-span-2" : undefined}
                hint={effectiveTarget === "sr" && vdi !== undefined ? `A new volume of ${formatBytes(vdi.virtualSize)} is made there.` : undefined}
              >
                {(id, describedBy) => (
                  <select id={id} aria-describedby={describedBy} className={selectClasses} value={dest?.ref ?? ""} onChange={(e) => (setDestSr(e.target.value), setDestVdi(""))}>
                    {destinations.map((s) => (
                      <option key={s.ref} value={s.ref}>
                        {s.name} ({s.type})
                      </option>
                    ))}
                  </select>
                )}
              </Field>
              {effectiveTarget === "vdi" ? (
                <Field
                  label="Destination volume"
                  hint="Every later write of the source goes there too; what it holds now is not copied."
                  error={into === undefined ? `No volume there is at least ${formatBytes(vdi?.virtualSize ?? 0)}: create one first.` : undefined}
                >
                  {(id, describedBy) => (
                    <select id={id} aria-describedby={describedBy} className={selectClasses} value={into?.ref ?? ""} disabled={into === undefined} onChange={(e) => setDestVdi(e.target.value)}>
                      {intoChoices.map((v) => (
                        <option key={v.ref} value={v.ref}>
                          {v.name || "(no name)"} · {formatBytes(v.virtualSize)}
                        </option>
                      ))}
                    </select>
                  )}
                </Field>
              ) : null}
            </div>
          )}

          {start.error !== null && serverFieldError === undefined ? (
            <Alert tone="error" title={`Could not start the ${verb}`}>
              {start.error.message}
            </Alert>
          ) : null}

          <FormButtons
            label={`Start ${verb}`}
            pending={start.isPending}
            pendingLabel="Starting…"
            disabled={vdi === undefined || (effectiveTarget === "vdi" && into === undefined) || (effectiveTarget === "sr" && dest === undefined)}
            cancelLabel="Close"
            onCancel={onClose}
          />
        </DialogForm>
      )}
    </Dialog>
  );
}
