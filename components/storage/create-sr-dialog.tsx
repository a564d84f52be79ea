"use client";

import { useVerdict } from "@/components/access/use-verdict.tsx";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useEffect, useId, useRef, useState } from "react";
import { formatBytes } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Badge } from "@/components/ui/badge.tsx";
import { Button } from "@/components/ui/button.tsx";
import { Dialog } from "@/components/ui/dialog.tsx";
import { DialogForm } from "@/components/ui/dialog-form.tsx";
import { Field, inputClasses, selectClasses } from "@/components/ui/field.tsx";
import { FormButtons } from "@/components/ui/form-buttons.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { SkeletonGroup } from "@/components/ui/skeleton-group.tsx";
import { TextField } from "@/components/ui/text-field.tsx";
import type { TProbeResult, TSrType } from "@/server/api/srs/schema.ts";

const linkClasses =
  "rounded font-medium underline underline-offset-4 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-sky-600";

/** "Create SR" and, after a creation, a line saying so with a link to the new SR. */
export function CreateSrButton() {
  const creating = useVerdict("srs.create");
  const [open, setOpen] = useState(false);
  const [created, setCreated] = useState<{ name: string; uuid: string } | null>(null);
  return (
    <div className="flex flex-wrap items-center gap-3">
      {created ? (
        <p role="status" className="text-sm text-zinc-700 dark:text-zinc-300">
          Created{" "}
          <Link href={`/storage/${created.uuid}`} className={linkClasses}>
            {created.name}
          </Link>
          .
        </p>
      ) : null}
      <Button
        deniedReason={creating.reason}
        onClick={() => {
          setCreated(null);
          setOpen(true);
        }}
      >
        Create SR
      </Button>
      {open ? (
        <CreateSrDialog
          onClose={() => setOpen(false)}
          onCreated={(sr) => {
            setOpen(false);
            setCreated(sr);
          }}
        />
      ) : null}
    </div>
  );
}

/**
 * The SR type, a name, and the plugin's configuration keys (Plugin.query) as labelled fields with their
 * descriptions; Probe shows what SR.probe finds with that configuration; Create runs SR.create as a task.
 * Every failure is shown inside the dialog, in words.
 */
function CreateSrDialog({ onClose, onCreated }: { onClose: () => void; onCreated: (sr: { name: string; uuid: string }) => void }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const types = useQuery(trpc.srs.types.queryOptions());
  const creatable = types.data?.types.filter((type) => type.canCreate) ?? [];
  const [chosen, setChosen] = useState<string | null>(null);
  const type = creatable.find((t) => t.type === chosen) ?? creatable[0];
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [config, setConfig] = useState<Record<string, string>>({});
  const probe = useMutation(trpc.srs.probe.mutationOptions());
  const create = useMutation(
    trpc.srs.create.mutationOptions({
      onSuccess: async (sr, input) => {
        await queryClient.invalidateQueries({ queryKey: trpc.srs.list.queryKey() });
        onCreated({ name: input.name, uuid: sr.uuid });
      },
    }),
  );
  const busy = create.isPending;
  const fieldErrors = create.error?.data?.zodError?.fieldErrors as Record<string, string[] | undefined> | undefined;

  // Only this type's keys are sent: a value typed for another type stays behind.
  const deviceConfig = () => Object.fromEntries((type?.configuration ?? []).map(({ key }) => [key, config[key] ?? ""]));

  return (
    <Dialog open onClose={() => !busy && onClose()} title="Create an SR" description="A new storage repository, made by its volume plugin and attached to this host." className="max-w-xl">
      {types.data === undefined ? (
        types.isError ? (
          <QueryError error={types.error} what="the SR types" onRetry={() => void types.refetch()} />
        ) : (
          <SkeletonGroup label="Loading the SR types…" className="flex flex-col gap-3">
            <Skeleton className="h-9" />
            <Skeleton className="h-9" />
            <Skeleton className="h-24" />
          </SkeletonGroup>
        )
      ) : type === undefined ? (
        <Alert tone="warning" title="No SR type can be created">
          No volume plugin known to the toolstack declares SR_CREATE.
        </Alert>
      ) : (
        <DialogForm onSubmit={() => create.mutate({ type: type.type, name, description, deviceConfig: deviceConfig() })} aria-busy={busy}>
          <Field label="SR type" hint={type.description}>
            {(id, describedBy) => (
              <select
                id={id}
                aria-describedby={describedBy}
                className={selectClasses}
                value={type.type}
                disabled={busy}
                onChange={(event) => {
                  setChosen(event.target.value);
                  setConfig({});
                  probe.reset();
                }}
              >
                {creatable.map((t) => (
                  <option key={t.type} value={t.type}>
                    {t.name} ({t.type})
                  </option>
                ))}
              </select>
            )}
          </Field>
          <div className="grid gap-4 sm:grid-cols-2">
            <TextField label="Name" error={fieldErrors?.name?.[0]} required maxLength={255} value={name} disabled={busy} onChange={setName} />
            <Field label="Description" error={fieldErrors?.description?.[0]}>
              {(id, describedBy) => (
                <input
                  id={id}
                  aria-describedby={describedBy}
                  className={inputClasses}
                  maxLength={1024}
                  value={description}
                  disabled={busy}
                  onChange={(event) => setDescription(event.target.value)}
                />
              )}
            </Field>
          </div>
          <ConfigurationFields type={type} config={config} disabled={busy} onChange={(key, value) => setConfig((was) => ({ ...was, [key]: value }))} />
          {probe.data ? (
            <ProbeResults
              results={probe.data.results}
              onUse={(configuration) => setConfig((was) => ({ ...was, ...configuration }))}
              keys={type.configuration.map((c) => c.key)}
            />
          ) : null}
          {probe.error ? <Alert tone="error" title="Probe failed">{probe.error.message}</Alert> : null}
          {create.error && !fieldErrors ? <Alert tone="error" title="Could not create the SR">{create.error.message}</Alert> : null}
          <FormButtons label="Create" pending={busy} pendingLabel="Creating…" cancelDisabled={busy} onCancel={onClose}>
            <Button
              variant="secondary"
              disabled={!type.canProbe || busy || probe.isPending}
              aria-busy={probe.isPending}
              title={type.canProbe ? undefined : "This plugin does not declare SR_PROBE."}
              onClick={() => probe.mutate({ type: type.type, deviceConfig: deviceConfig() })}
            >
              {probe.isPending ? "Probing…" : "Probe"}
            </Button>
          </FormButtons>
        </DialogForm>
      )}
    </Dialog>
  );
}

function ConfigurationFields({ type, config, disabled, onChange }: { type: TSrType; config: Record<string, string>; disabled: boolean; onChange: (key: string, value: string) => void }) {
  const legendId = useId();
  return (
    <fieldset aria-labelledby={legendId} className="flex flex-col gap-3 rounded-lg border border-zinc-200 p-3 dark:border-zinc-800">
      <legend id={legendId} className="px-1 text-sm font-medium text-zinc-800 dark:text-zinc-200">
        Configuration
      </legend>
      {type.configuration.length === 0 ? (
        <p className="text-sm text-zinc-600 dark:text-zinc-400">The {type.name} plugin declares no configuration keys.</p>
      ) : (
        type.configuration.map(({ key, description }) => (
          <Field key={key} label={key} hint={description}>
            {(id, describedBy) => (
              <input
                id={id}
                aria-describedby={describedBy}
                className={`${inputClasses} font-mono`}
                value={config[key] ?? ""}
                disabled={disabled}
                autoComplete="off"
                spellCheck={false}
                onChange={(event) => onChange(key, event.target.value)}
              />
            )}
          </Field>
        ))
      )}
    </fieldset>
  );
}

function ProbeResults({ results, keys, onUse }: { results: TProbeResult[]; keys: string[]; onUse: (configuration: Record<string, string>) => void }) {
  const headingId = useId();
  const ref = useRef<HTMLElement>(null);
  // The results appear below the form, perhaps below the dialog's fold: bring them to the user.
  // (A block body: Chromium's scrollIntoView may return a promise, which React would take for a cleanup.)
  useEffect(() => {
    ref.current?.scrollIntoView({ block: "nearest", behavior: "smooth" });
  }, [results]);
  return (
    <section ref={ref} aria-labelledby={headingId} className="flex flex-col gap-2">
      <h3 id={headingId} className="text-sm font-medium text-zinc-800 dark:text-zinc-200">
        Probe results
      </h3>
      {results.length === 0 ? <p className="text-sm text-zinc-600 dark:text-zinc-400">The plugin found nothing for this configuration.</p> : null}
      <ul className="flex flex-col gap-2">
        {results.map((result, index) => {
          const usable = Object.fromEntries(Object.entries(result.configuration).filter(([key]) => keys.includes(key)));
          return (
            <li key={index} className="flex flex-col gap-1.5 rounded-lg border border-zinc-200 p-3 text-sm dark:border-zinc-800">
              <p className="font-medium text-zinc-900 dark:text-zinc-100">{probeHeadline(result)}</p>
              {result.sr ? (
                <p className="text-zinc-600 dark:text-zinc-400">
                  {result.sr.description ? `${result.sr.description}. ` : ""}
                  {formatBytes(result.sr.freeSpace)} free of {formatBytes(result.sr.totalSpace)}, {result.sr.health || "health unknown"}.{" "}
                  {result.sr.knownAs ? (
                    <>
                      Already known as <span className="font-medium">{result.sr.knownAs.name}</span>.
                    </>
                  ) : (
                    "Not known to the toolstack."
                  )}
                </p>
              ) : null}
              <dl className="flex flex-wrap gap-x-3 gap-y-1 font-mono text-xs text-zinc-600 dark:text-zinc-400">
                {[...Object.entries(result.configuration), ...Object.entries(result.extraInfo)].map(([key, value]) => (
                  <div key={key} className="flex min-w-0 gap-1">
                    <dt>{key}:</dt>
                    <dd className="break-all text-zinc-800 dark:text-zinc-200">{value}</dd>
                  </div>
                ))}
              </dl>
              <div className="flex flex-wrap items-center gap-2">
                <Badge tone={result.complete ? "success" : "warning"}>{result.complete ? "Complete" : "Incomplete"}</Badge>
                {Object.keys(usable).length > 0 && !result.sr?.knownAs ? (
                  <Button size="sm" variant="ghost" onClick={() => onUse(usable)}>
                    Use this configuration
                  </Button>
                ) : null}
              </div>
            </li>
          );
        })}
      </ul>
    </section>
  );
}

function probeHeadline(result: TProbeResult): string {
  if (result.sr) return `Found the SR "${result.sr.name}" (${result.sr.uuid})`;
  if (result.extraInfo.creatable === "true") return "A new SR can be created here.";
  if (!result.complete) return `Not usable as is${result.extraInfo.reason ? `: ${result.extraInfo.reason}` : result.extraInfo.hint ? `: ${result.extraInfo.hint}` : "."}`;
  return "Usable configuration.";
}
