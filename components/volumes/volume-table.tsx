"use client";

// The volumes of one SR: a virtualized, sortable, filterable table (10,000 rows stay smooth: only the rows
// in view are in the DOM), per-row actions, create, and compare of two selected volumes. Reads poll every
// 10 s while the tab is visible; every change refreshes the list.
import { useMutation, useQuery } from "@tanstack/react-query";
import {
  createColumnHelper,
  flexRender,
  getCoreRowModel,
  getSortedRowModel,
  type SortingState,
  useReactTable,
} from "@tanstack/react-table";
import { useVirtualizer } from "@tanstack/react-virtual";
import { useDeferredValue, useId, useMemo, useRef, useState } from "react";
import { formatBytes } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Badge } from "@/components/ui/badge.tsx";
import { Button } from "@/components/ui/button.tsx";
import { cn } from "@/components/ui/cn.ts";
import { ConfirmDialog } from "@/components/ui/confirm-dialog.tsx";
import { inputClasses } from "@/components/ui/field.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import type { TVolumeRow } from "@/server/api/volumes/schema.ts";
import { CompareDialog } from "./compare-dialog.tsx";
import { actionsLabel, VolumeActionsMenu, type VolumeAction } from "./volume-actions-menu.tsx";
import {
  CloneVolumeDialog,
  CopyVolumeDialog,
  CreateVolumeDialog,
  type DoneMessage,
  VolumeDetailsDialog,
  RenameVolumeDialog,
  ResizeVolumeDialog,
  TaskLink,
  VolumeKeysDialog,
} from "./volume-dialogs.tsx";
import { errorText, useRefreshVolumes } from "./volume-mutations.ts";

const ROW_HEIGHT = 52;
const HEADER_HEIGHT = 40;
/** The scroll box's height whatever the data: no layout shift when rows arrive. */
const BODY_HEIGHT = "h-[30rem]";

type Notice = { tone: "success" | "error"; text: string; taskLink?: boolean };
type OpenDialog = { kind: "create" } | { kind: "compare" } | { kind: Exclude<VolumeAction, "snapshot" | "cbt">; uuid: string };

const column = createColumnHelper<TVolumeRow>();

function snapshotOfLabel(volume: TVolumeRow): string {
  if (!volume.isSnapshot) return "";
  return volume.snapshotOf?.name ?? "(original gone)";
}

export function VolumeTable({ srRef }: { srRef: string }) {
  const trpc = useTRPC();
  const refresh = useRefreshVolumes();
  const headingId = useId();
  const list = useQuery(trpc.volumes.list.queryOptions({ srRef }, { refetchInterval: 10_000 }));
  const [filter, setFilter] = useState("");
  const deferredFilter = useDeferredValue(filter);
  const [sorting, setSorting] = useState<SortingState>([{ id: "name", desc: false }]);
  const [selected, setSelected] = useState<string[]>([]);
  const [dialog, setDialog] = useState<OpenDialog | null>(null);
  const [menu, setMenu] = useState<{ uuid: string; anchor: HTMLElement } | null>(null);
  // A click on the open menu's own button first light-dismisses the menu (on pointerdown): that click
  // must not open it again.
  const dismissed = useRef<{ uuid: string; at: number } | null>(null);
  const [notice, setNotice] = useState<Notice | null>(null);
  const scrollRef = useRef<HTMLDivElement>(null);

  const volumes = list.data?.volumes;
  const features = list.data?.features ?? [];
  const byUuid = useMemo(() => new Map((volumes ?? []).map((v) => [v.uuid, v])), [volumes]);

  const filtered = useMemo(() => {
    const all = volumes ?? [];
    const needle = deferredFilter.trim().toLowerCase();
    if (needle === "") return all;
    return all.filter((v) => v.name.toLowerCase().includes(needle) || v.uuid.includes(needle) || v.description.toLowerCase().includes(needle));
  }, [volumes, deferredFilter]);

  const columns = useMemo(
    () => [
      column.display({ id: "select", header: () => <span className="sr-only">Select for compare</span> }),
      column.accessor("name", { header: "Name", sortingFn: "text" }),
      column.accessor("virtualSize", { header: "Size" }),
      column.accessor("physicalUtilisation", { header: "Used" }),
      column.accessor(snapshotOfLabel, { id: "snapshotOf", header: "Snapshot of", sortingFn: "text" }),
      column.accessor("cbtEnabled", { header: "CBT", sortingFn: "basic" }),
      column.accessor("uuid", { header: "UUID", sortingFn: "text" }),
      column.display({ id: "actions", header: () => <span className="sr-only">Actions</span> }),
    ],
    [],
  );

  // TanStack Table returns fresh functions each render; this component is not memoized by the compiler, and
  // nothing below is a memoized component that could keep a stale one.
  // eslint-disable-next-line react-hooks/incompatible-library
  const table = useReactTable({
    data: filtered,
    columns,
    state: { sorting },
    onSortingChange: setSorting,
    getCoreRowModel: getCoreRowModel(),
    getSortedRowModel: getSortedRowModel(),
    getRowId: (row) => row.uuid,
    enableSortingRemoval: false,
    // Every column sorts ascending first, as a person expects (TanStack's default is descending for numbers).
    sortDescFirst: false,
  });
  const rows = table.getRowModel().rows;

  const virtualizer = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 12,
    scrollPaddingStart: HEADER_HEIGHT,
  });
  const items = virtualizer.getVirtualItems();
  const paddingTop = items.length > 0 ? items[0]!.start : 0;
  const paddingBottom = items.length > 0 ? virtualizer.getTotalSize() - items.at(-1)!.end : 0;

  const done = (message: DoneMessage) => {
    setDialog(null);
    setNotice({ tone: "success", ...message });
  };
  const failed = (what: string) => (error: Parameters<typeof errorText>[0]) => setNotice({ tone: "error", text: `${what}: ${errorText(error)}` });

  const snapshot = useMutation(
    trpc.volumes.snapshot.mutationOptions({
      onSuccess: async (_d, input) => {
        await refresh();
        setNotice({ tone: "success", text: `Snapshot of “${byUuid.get(input.uuid)?.name ?? "the volume"}” taken.` });
      },
      onError: failed("The snapshot failed"),
    }),
  );
  const cbt = useMutation(
    trpc.volumes.setCbt.mutationOptions({
      onSuccess: async (_d, input) => {
        await refresh();
        setNotice({ tone: "success", text: `CBT turned ${input.enabled ? "on" : "off"} for “${byUuid.get(input.uuid)?.name ?? "the volume"}”.` });
      },
      onError: failed("Changing CBT failed"),
    }),
  );
  const destroy = useMutation(
    trpc.volumes.destroy.mutationOptions({
      onSuccess: async (_d, input) => {
        const name = byUuid.get(input.uuid)?.name ?? "the volume";
        setSelected((keys) => keys.filter((key) => key !== byUuid.get(input.uuid)?.key));
        await refresh();
        done({ text: `Volume “${name}” destroyed.` });
      },
    }),
  );
  const revert = useMutation(
    trpc.volumes.revert.mutationOptions({
      onSuccess: async (_d, input) => {
        await refresh();
        done({ text: `“${byUuid.get(input.uuid)?.snapshotOf?.name ?? "The volume"}” reverted to the snapshot.` });
      },
    }),
  );
  const busy = snapshot.isPending || cbt.isPending;

  function act(action: VolumeAction, volume: TVolumeRow) {
    setMenu(null);
    setNotice(null);
    if (action === "snapshot") snapshot.mutate({ srRef, uuid: volume.uuid });
    else if (action === "cbt") cbt.mutate({ srRef, uuid: volume.uuid, enabled: !volume.cbtEnabled });
    else {
      destroy.reset();
      revert.reset();
      setDialog({ kind: action, uuid: volume.uuid });
    }
  }

  function toggleSelected(volume: TVolumeRow) {
    setSelected((keys) => (keys.includes(volume.key) ? keys.filter((k) => k !== volume.key) : [...keys, volume.key].slice(-2)));
  }

  const selectedVolumes = selected.map((key) => volumes?.find((v) => v.key === key)).filter((v): v is TVolumeRow => v !== undefined);
  const dialogVolume = dialog !== null && "uuid" in dialog ? byUuid.get(dialog.uuid) : undefined;
  const menuVolume = menu === null ? undefined : byUuid.get(menu.uuid);
  const total = volumes === undefined ? "" : `${volumes.length.toLocaleString("en")} volume${volumes.length === 1 ? "" : "s"}`;
  const count = volumes === undefined ? null : filtered.length === volumes.length ? total : `${filtered.length.toLocaleString("en")} of ${total}`;

  return (
    <section aria-labelledby={headingId} className="flex flex-col gap-3">
      <div className="flex flex-wrap items-end justify-between gap-3">
        <div>
          <h2 id={headingId} className="text-base font-semibold tracking-tight text-zinc-950 dark:text-white">
            Volumes
          </h2>
          <p className="min-h-5 text-sm text-zinc-600 tabular-nums dark:text-zinc-400" aria-live="polite">
            {count ?? ""}
          </p>
        </div>
        <div className="flex flex-wrap items-center gap-2">
          <Button
            variant="secondary"
            disabled={selectedVolumes.length !== 2}
            onClick={() => setDialog({ kind: "compare" })}
            title={selectedVolumes.length === 2 ? undefined : "Select two volumes to compare"}
          >
            Compare{selectedVolumes.length > 0 ? ` (${selectedVolumes.length} of 2)` : ""}
          </Button>
          <Button onClick={() => setDialog({ kind: "create" })} disabled={list.data === undefined}>
            Create volume
          </Button>
        </div>
      </div>

      <div className="flex flex-wrap items-center gap-2">
        <input
          type="search"
          aria-label="Filter volumes by name, uuid or description"
          placeholder="Filter by name, uuid or description"
          value={filter}
          onChange={(event) => setFilter(event.target.value)}
          className={cn(inputClasses, "max-w-sm flex-1")}
        />
        {busy ? (
          <span role="status" className="text-sm text-zinc-600 dark:text-zinc-400">
            Working…
          </span>
        ) : null}
      </div>

      {notice ? (
        <Alert tone={notice.tone === "error" ? "error" : "info"}>
          <div className="flex flex-wrap items-center justify-between gap-2">
            <span>
              {notice.text} {notice.taskLink ? <TaskLink /> : null}
            </span>
            <Button size="sm" variant="ghost" onClick={() => setNotice(null)}>
              Dismiss
            </Button>
          </div>
        </Alert>
      ) : null}
      {list.isError && list.data !== undefined ? <QueryError error={list.error} what="the latest volume list" onRetry={() => void list.refetch()} /> : null}

      {/* Opaque in dark mode too: the sticky actions column must match what scrolls under it. */}
      <div className="overflow-hidden rounded-xl border border-zinc-200 bg-white dark:border-zinc-800 dark:bg-zinc-900">
        {list.data === undefined ? (
          <div className={cn(BODY_HEIGHT, "flex flex-col gap-2 p-3")}>
            {list.isError ? (
              <QueryError error={list.error} what="the volumes" onRetry={() => void list.refetch()} />
            ) : (
              <>
                <span role="status" className="sr-only">
                  Loading volumes…
                </span>
                {Array.from({ length: 8 }, (_, i) => (
                  <Skeleton key={i} className="h-10 w-full" />
                ))}
              </>
            )}
          </div>
        ) : (
          <div ref={scrollRef} className={cn(BODY_HEIGHT, "overflow-auto overscroll-contain")}>
            <table aria-rowcount={rows.length + 1} aria-label="Volumes" className="w-full min-w-[60rem] table-fixed border-separate border-spacing-0 text-sm">
              <colgroup>
                <col className="w-10" />
                <col />
                <col className="w-24" />
                <col className="w-24" />
                <col className="w-40" />
                <col className="w-16" />
                <col className="w-44" />
                <col className="w-14" />
              </colgroup>
              <thead className="sticky top-0 z-10 bg-zinc-50 dark:bg-zinc-900">
                {table.getHeaderGroups().map((group) => (
                  <tr key={group.id} aria-rowindex={1} style={{ height: HEADER_HEIGHT }}>
                    {group.headers.map((header) => {
                      const sorted = header.column.getIsSorted();
                      const label = typeof header.column.columnDef.header === "string" ? header.column.columnDef.header : null;
                      const numeric = header.id === "virtualSize" || header.id === "physicalUtilisation";
                      return (
                        <th
                          key={header.id}
                          scope="col"
                          aria-sort={sorted === "asc" ? "ascending" : sorted === "desc" ? "descending" : undefined}
                          className={cn(
                            "border-b border-zinc-200 px-3 text-left text-xs font-medium text-zinc-600 dark:border-zinc-800 dark:text-zinc-400",
                            numeric && "text-right",
                            // The actions stay in view while a narrow screen scrolls the table sideways.
                            header.id === "actions" && "sticky right-0 bg-zinc-50 dark:bg-zinc-900",
                          )}
                        >
                          {label !== null && header.column.getCanSort() ? (
                            <button
                              type="button"
                              aria-label={`Sort by ${label.toLowerCase()}`}
                              onClick={header.column.getToggleSortingHandler()}
                              className={cn(
                                "inline-flex items-center gap-1 rounded px-1 py-0.5 align-middle hover:text-zinc-900 focus-visible:outline-2 focus-visible:outline-sky-600 dark:hover:text-white",
                                // Numbers are right-aligned: the arrow goes left so the label lines up with them.
                                numeric && "-mr-1 flex-row-reverse",
                              )}
                            >
                              {label}
                              <span aria-hidden="true" className="w-3 text-[10px]">
                                {sorted === "asc" ? "▲" : sorted === "desc" ? "▼" : ""}
                              </span>
                            </button>
                          ) : (
                            flexRender(header.column.columnDef.header, header.getContext())
                          )}
                        </th>
                      );
                    })}
                  </tr>
                ))}
              </thead>
              <tbody>
                {rows.length === 0 ? (
                  <tr>
                    <td colSpan={8} className="px-3 py-10 text-center text-sm text-zinc-600 dark:text-zinc-400">
                      {volumes?.length === 0 ? "This SR has no volumes yet. Create one to start." : "No volume matches the filter."}
                    </td>
                  </tr>
                ) : null}
                {paddingTop > 0 ? (
                  <tr aria-hidden="true">
                    <td colSpan={8} style={{ height: paddingTop, padding: 0 }} />
                  </tr>
                ) : null}
                {items.map((item) => {
                  const volume = rows[item.index]!.original;
                  const isSelected = selected.includes(volume.key);
                  return (
                    <tr
                      key={volume.uuid}
                      aria-rowindex={item.index + 2}
                      style={{ height: ROW_HEIGHT }}
                      className={cn("group", isSelected ? "bg-sky-50 dark:bg-sky-950" : "hover:bg-zinc-50 dark:hover:bg-zinc-800")}
                    >
                      <Cell className="text-center">
                        <input
                          type="checkbox"
                          aria-label={`Select ${volume.name}${volume.isSnapshot ? " (snapshot)" : ""} for compare`}
                          checked={isSelected}
                          onChange={() => toggleSelected(volume)}
                          className="size-4 accent-sky-600"
                        />
                      </Cell>
                      <Cell>
                        <div className="flex min-w-0 items-center gap-1.5">
                          <span className="truncate font-medium text-zinc-900 dark:text-zinc-100" title={volume.name}>
                            {volume.name || "(no name)"}
                          </span>
                          {volume.isSnapshot ? <Badge tone="info">Snapshot</Badge> : null}
                          {volume.volumeType === "CBT_Metadata" ? <Badge tone="warning">CBT metadata only</Badge> : null}
                        </div>
                        <div className="truncate text-xs text-zinc-500 dark:text-zinc-400" title={volume.description || undefined}>
                          {/* On a narrow screen the size columns are off to the side: the size comes along here. */}
                          <span className="sm:hidden">
                            {formatBytes(volume.virtualSize)}
                            {volume.description ? " · " : ""}
                          </span>
                          {volume.description}
                        </div>
                      </Cell>
                      <Cell className="text-right tabular-nums">{formatBytes(volume.virtualSize)}</Cell>
                      <Cell className="text-right tabular-nums text-zinc-600 dark:text-zinc-400">{formatBytes(volume.physicalUtilisation)}</Cell>
                      <Cell className="truncate text-zinc-600 dark:text-zinc-400">
                        <span title={snapshotOfLabel(volume)}>{snapshotOfLabel(volume) || <span aria-label="Not a snapshot">—</span>}</span>
                      </Cell>
                      <Cell>{volume.cbtEnabled ? <Badge tone="success">On</Badge> : <span className="text-zinc-500 dark:text-zinc-400">Off</span>}</Cell>
                      <Cell className="truncate font-mono text-xs text-zinc-600 dark:text-zinc-400">
                        <span title={volume.uuid}>{volume.uuid}</span>
                      </Cell>
                      <Cell className={cn("sticky right-0 text-right", isSelected ? "bg-sky-50 dark:bg-sky-950" : "bg-white group-hover:bg-zinc-50 dark:bg-zinc-900 dark:group-hover:bg-zinc-800")}>
                        <Button
                          size="sm"
                          variant="ghost"
                          aria-label={actionsLabel(volume)}
                          aria-haspopup="menu"
                          aria-expanded={menu?.uuid === volume.uuid}
                          onClick={(event) => {
                            const justClosed = dismissed.current?.uuid === volume.uuid && event.timeStamp - dismissed.current.at < 500;
                            setMenu(menu?.uuid === volume.uuid || justClosed ? null : { uuid: volume.uuid, anchor: event.currentTarget });
                          }}
                        >
                          <span aria-hidden="true" className="text-base leading-none">
                            ⋯
                          </span>
                        </Button>
                      </Cell>
                    </tr>
                  );
                })}
                {paddingBottom > 0 ? (
                  <tr aria-hidden="true">
                    <td colSpan={8} style={{ height: paddingBottom, padding: 0 }} />
                  </tr>
                ) : null}
              </tbody>
            </table>
          </div>
        )}
      </div>

      {menu !== null && menuVolume !== undefined ? (
        <VolumeActionsMenu anchor={menu.anchor} volume={menuVolume} features={features} onAction={(action) => act(action, menuVolume)}
          onClose={() => {
            dismissed.current = { uuid: menu.uuid, at: performance.now() };
            setMenu(null);
          }}
        />
      ) : null}

      {dialog?.kind === "create" ? <CreateVolumeDialog srRef={srRef} onClose={() => setDialog(null)} onDone={done} /> : null}
      {dialog?.kind === "compare" && selectedVolumes.length === 2 ? (
        <CompareDialog srRef={srRef} volumes={[selectedVolumes[0]!, selectedVolumes[1]!]} onClose={() => setDialog(null)} />
      ) : null}
      {dialog !== null && "uuid" in dialog && dialogVolume === undefined ? (
        <ConfirmDialog
          open
          title="The volume is gone"
          body="It no longer exists: it may have been destroyed in another window."
          confirmLabel="Close"
          tone="primary"
          onConfirm={() => setDialog(null)}
          onCancel={() => setDialog(null)}
        />
      ) : null}
      {dialogVolume !== undefined && dialog?.kind === "resize" ? <ResizeVolumeDialog srRef={srRef} volume={dialogVolume} onClose={() => setDialog(null)} onDone={done} /> : null}
      {dialogVolume !== undefined && dialog?.kind === "details" ? <VolumeDetailsDialog srRef={srRef} volume={dialogVolume} onClose={() => setDialog(null)} /> : null}
      {dialogVolume !== undefined && dialog?.kind === "clone" ? <CloneVolumeDialog srRef={srRef} volume={dialogVolume} onClose={() => setDialog(null)} onDone={done} /> : null}
      {dialogVolume !== undefined && dialog?.kind === "rename" ? <RenameVolumeDialog srRef={srRef} volume={dialogVolume} onClose={() => setDialog(null)} onDone={done} /> : null}
      {dialogVolume !== undefined && dialog?.kind === "keys" ? <VolumeKeysDialog srRef={srRef} volume={dialogVolume} onClose={() => setDialog(null)} /> : null}
      {dialogVolume !== undefined && dialog?.kind === "copy" ? <CopyVolumeDialog srRef={srRef} volume={dialogVolume} onClose={() => setDialog(null)} onDone={done} /> : null}
      {dialogVolume !== undefined && dialog?.kind === "destroy" ? (
        <ConfirmDialog
          open
          title={`Destroy “${dialogVolume.name}”?`}
          body={
            <>
              The volume “{dialogVolume.name}” ({formatBytes(dialogVolume.virtualSize)}) and its data are removed for good.
              {dialogVolume.isSnapshot ? " Its original stays." : " Its snapshots stay."}
            </>
          }
          confirmLabel="Destroy volume"
          pending={destroy.isPending}
          error={errorText(destroy.error)}
          onConfirm={() => destroy.mutate({ srRef, uuid: dialogVolume.uuid })}
          onCancel={() => setDialog(null)}
        />
      ) : null}
      {dialogVolume !== undefined && dialog?.kind === "revert" ? (
        <ConfirmDialog
          open
          title={`Revert “${dialogVolume.snapshotOf?.name ?? "the original"}”?`}
          body={
            <>
              “{dialogVolume.snapshotOf?.name}” gets the contents and size of this snapshot
              {dialogVolume.snapshotTime ? ` (taken ${formatSnapshotTime(dialogVolume.snapshotTime)})` : ""}. What was written to it since is lost.
            </>
          }
          confirmLabel="Revert"
          pending={revert.isPending}
          error={errorText(revert.error)}
          onConfirm={() => revert.mutate({ srRef, uuid: dialogVolume.uuid })}
          onCancel={() => setDialog(null)}
        />
      ) : null}
    </section>
  );
}

function Cell({ className, children }: { className?: string; children: React.ReactNode }) {
  return <td className={cn("border-b border-zinc-100 px-3 align-middle dark:border-zinc-800/70", className)}>{children}</td>;
}

/** snapshot_time as kept on the volume: xapi's 20250102T03:04:05Z or RFC 3339. */
function formatSnapshotTime(value: string): string {
  const iso = value.replace(/^(\d{4})(\d{2})(\d{2})T/, "$1-$2-$3T");
  const at = Date.parse(iso);
  return Number.isNaN(at) ? value : new Date(at).toLocaleString();
}
