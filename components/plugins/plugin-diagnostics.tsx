"use client";

import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Button } from "@/components/ui/button.tsx";
import type { TRegisteredPlugin } from "@/server/api/plugins/schema.ts";

/** Runs Plugin.diagnostics only when asked: it starts a process and its output can be long. */
export function PluginDiagnostics({ plugin }: { plugin: Pick<TRegisteredPlugin, "kind" | "dir" | "type" | "name"> }) {
  const trpc = useTRPC();
  const [requested, setRequested] = useState(false);
  const diagnostics = useQuery({
    ...trpc.plugins.diagnostics.queryOptions({ name: plugin.dir, kind: plugin.kind }),
    enabled: requested,
    retry: false,
    staleTime: Number.POSITIVE_INFINITY,
    refetchOnWindowFocus: false,
  });

  function run() {
    if (!requested) setRequested(true);
    else if (!diagnostics.isFetching) void diagnostics.refetch();
  }

  return (
    <div className="flex flex-col gap-3">
      <div className="flex flex-wrap items-center justify-between gap-x-3 gap-y-2">
        <p role="status" className="text-xs text-zinc-500 dark:text-zinc-400">
          {statusText(requested, diagnostics.isFetching, diagnostics.isError, diagnostics.dataUpdatedAt)}
        </p>
        <Button variant="secondary" size="sm" aria-label={`Run diagnostics for ${plugin.name}`} aria-busy={diagnostics.isFetching} onClick={run}>
          {diagnostics.isFetching ? <Spinner /> : null}
          Run diagnostics
        </Button>
      </div>
      {diagnostics.isError ? (
        <p role="alert" className="rounded-md border border-red-200 bg-red-50 px-3 py-2 text-sm text-red-800 dark:border-red-900/80 dark:bg-red-950/40 dark:text-red-300">
          {diagnostics.error.message}
        </p>
      ) : diagnostics.data ? (
        <div className="flex flex-col gap-1.5">
          <p className="text-xs font-medium text-zinc-700 dark:text-zinc-300">Diagnostics output</p>
          <pre
            role="region"
            aria-label={`Diagnostics output for ${plugin.name}`}
            tabIndex={0}
            className="max-h-72 overflow-auto rounded-lg bg-zinc-950 p-3 font-mono text-xs leading-relaxed whitespace-pre-wrap break-words text-zinc-100 ring-1 ring-zinc-800 focus-visible:outline-2 focus-visible:outline-sky-500 dark:bg-black/60"
          >
            {diagnostics.data.diagnostics === "" ? "(The plugin returned no diagnostics.)" : diagnostics.data.diagnostics}
          </pre>
        </div>
      ) : null}
    </div>
  );
}

function statusText(requested: boolean, fetching: boolean, failed: boolean, updatedAt: number): string {
  if (fetching) return "Running Plugin.diagnostics…";
  if (!requested) return "Plugin.diagnostics runs on demand.";
  if (failed) return "Plugin.diagnostics failed.";
  return `Plugin.diagnostics ran at ${new Date(updatedAt).toLocaleTimeString()}.`;
}

function Spinner() {
  return <span aria-hidden="true" className="size-3 animate-spin rounded-full border-2 border-current border-t-transparent" />;
}
