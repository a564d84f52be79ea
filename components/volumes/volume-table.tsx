"use client";

// The volumes of one SR: a virtualized, sortable, filterable table (10,000 rows stay smooth: only the rows
// in view are in the DOM), per-row actions, create, and compare of two selected volumes. Reads poll every
// 10 s while the tab is visible; every change refreshes the list.
import { useQuery } from "@tanstack/react-query";
import { getCoreRowModel, getSortedRowModel, type SortingState, useReactTable } from "@tanstack/react-table";
import { useDeferredValue, useId, useMemo, useRef, useState, type MouseEvent } from "react";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { cn } from "@/components/ui/cn.ts";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { SkeletonGroup } from "@/components/ui/skeleton-group.tsx";
import type { TVolumeRow } from "@/server/api/volumes/schema.ts";
import { CompareDialog } from "./compare-dialog.tsx";
import { CreateVolumeDialog } from "./create-volume-dialog.tsx";
import { useQuickVolumeActions } from "./use-quick-volume-actions.ts";
import { type DialogAction, VolumeActionDialog } from "./volume-action-dialog.tsx";
import { VolumeActionsMenu, type VolumeAction } from "./volume-actions-menu.tsx";
import { BODY_HEIGHT, volumeColumns } from "./volume-columns.tsx";
import type { DoneMessage } from "./volume-dialog-props.ts";
import { VolumeFilter } from "./volume-filter.tsx";
import { VolumeGrid } from "./volume-grid.tsx";
import { type Notice, VolumeNotice } from "./volume-notice.tsx";
import { VolumeTableHeader } from "./volume-table-header.tsx";

type OpenDialog = { kind: "create" } | { kind: "compare" } | { kind: DialogAction; uuid: string };

/** The grid's place while the list loads or cannot: as tall as the grid, so nothing moves. */
const placeholderClasses = cn(BODY_HEIGHT, "flex flex-col gap-2 p-3");

export function VolumeTable({ srRef }: { srRef: string }) {
  const trpc = useTRPC();
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

  const volumes = list.data?.volumes;
  const features = list.data?.features ?? [];
  const byUuid = useMemo(() => new Map((volumes ?? []).map((v) => [v.uuid, v])), [volumes]);
  const quick = useQuickVolumeActions(srRef, (uuid) => byUuid.get(uuid)?.name ?? "the volume", setNotice);

  const filtered = useMemo(() => {
    const all = volumes ?? [];
    const needle = deferredFilter.trim().toLowerCase();
    if (needle === "") return all;
    return all.filter((v) => v.name.toLowerCase().includes(needle) || v.uuid.includes(needle) || v.description.toLowerCase().includes(needle));
  }, [volumes, deferredFilter]);

  // TanStack Table returns fresh functions each render; this component is not memoized by the compiler, and
  // nothing below is a memoized component that could keep a stale one.
  // eslint-disable-next-line react-hooks/incompatible-library
  const table = useReactTable({
    data: filtered,
    columns: volumeColumns,
    state: { sorting },
    onSortingChange: setSorting,
    getCoreRowModel: getCoreRowModel(),
    getSortedRowModel: getSortedRowModel(),
    getRowId: (row) => row.uuid,
    enableSortingRemoval: false,
    // Every column sorts ascending first, as a person expects (TanStack's default is descending for numbers).
    sortDescFirst: false,
  });

  const done = (message: DoneMessage) => {
    setDialog(null);
    setNotice({ tone: "success", ...message });
  };

  function act(action: VolumeAction, volume: TVolumeRow) {
    setMenu(null);
    setNotice(null);
    if (action === "snapshot") quick.takeSnapshot(volume);
    else if (action === "cbt") quick.toggleCbt(volume);
    else setDialog({ kind: action, uuid: volume.uuid });
  }

  function toggleSelected(volume: TVolumeRow) {
    setSelected((keys) => (keys.includes(volume.key) ? keys.filter((k) => k !== volume.key) : [...keys, volume.key].slice(-2)));
  }

  function toggleMenu(volume: TVolumeRow, event: MouseEvent<HTMLButtonElement>) {
    const justClosed = dismissed.current?.uuid === volume.uuid && event.timeStamp - dismissed.current.at < 500;
    setMenu(menu?.uuid === volume.uuid || justClosed ? null : { uuid: volume.uuid, anchor: event.currentTarget });
  }

  const selectedVolumes = selected.map((key) => volumes?.find((v) => v.key === key)).filter((v): v is TVolumeRow => v !== undefined);
  const dialogVolume = dialog !== null && "uuid" in dialog ? byUuid.get(dialog.uuid) : undefined;
  const menuVolume = menu === null ? undefined : byUuid.get(menu.uuid);
  const total = volumes === undefined ? "" : `${volumes.length.toLocaleString("en")} volume${volumes.length === 1 ? "" : "s"}`;
  const count = volumes === undefined ? null : filtered.length === volumes.length ? total : `${filtered.length.toLocaleString("en")} of ${total}`;

  return (
    <section aria-labelledby={headingId} className="flex flex-col gap-3">
      <VolumeTableHeader
        headingId={headingId}
        count={count}
        selectedCount={selectedVolumes.length}
        canCreate={list.data !== undefined}
        onCompare={() => setDialog({ kind: "compare" })}
        onCreate={() => setDialog({ kind: "create" })}
      />
      <VolumeFilter value={filter} onChange={setFilter} busy={quick.busy} />

      {notice ? <VolumeNotice notice={notice} onDismiss={() => setNotice(null)} /> : null}
      {list.isError && list.data !== undefined ? <QueryError error={list.error} what="the latest volume list" onRetry={() => void list.refetch()} /> : null}

      {/* Opaque in dark mode too: the sticky actions column must match what scrolls under it. */}
      <div className="overflow-hidden rounded-xl border border-zinc-200 bg-white dark:border-zinc-800 dark:bg-zinc-900">
        {list.data !== undefined ? (
          <VolumeGrid
            table={table}
            emptyText={volumes?.length === 0 ? "This SR has no volumes yet. Create one to start." : "No volume matches the filter."}
            selected={selected}
            menuUuid={menu?.uuid}
            onToggleSelected={toggleSelected}
            onMenuButton={toggleMenu}
          />
        ) : list.isError ? (
          <div className={placeholderClasses}>
            <QueryError error={list.error} what="the volumes" onRetry={() => void list.refetch()} />
          </div>
        ) : (
          <SkeletonGroup label="Loading volumes…" className={placeholderClasses}>
            {Array.from({ length: 8 }, (_, i) => (
              <Skeleton key={i} className="h-10 w-full" />
            ))}
          </SkeletonGroup>
        )}
      </div>

      {menu !== null && menuVolume !== undefined ? (
        <VolumeActionsMenu
          anchor={menu.anchor}
          volume={menuVolume}
          features={features}
          onAction={(action) => act(action, menuVolume)}
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
      {dialog !== null && "uuid" in dialog ? (
        <VolumeActionDialog
          // A fresh dialog for each volume and action: no state or error left from the last one.
          key={`${dialog.kind}:${dialog.uuid}`}
          action={dialog.kind}
          volume={dialogVolume}
          srRef={srRef}
          onClose={() => setDialog(null)}
          onDone={(message) => {
            // A destroyed volume leaves the compare selection too.
            if (dialog.kind === "destroy") setSelected((keys) => keys.filter((key) => key !== dialogVolume?.key));
            done(message);
          }}
        />
      ) : null}
    </section>
  );
}
