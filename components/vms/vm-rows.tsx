import { useVirtualizer } from "@tanstack/react-virtual";
import { useRef } from "react";
import { formatBytes, plural } from "@/lib/format.ts";
import { IntentLink } from "@/components/ui/intent-link.tsx";
import { type TListedVm, type TVmVolume, withVolume } from "@/server/api/vms/schema.ts";
import { DiskLine, diskTotals, linkClasses, PowerBadge, vmHref } from "./vm-bits.tsx";

/** A row's height before it is measured: a VM with two disks and a CD drive. */
const ROW_ESTIMATE = 112;
/** Rows drawn beyond the view on each side, so scrolling shows no blank. */
const OVERSCAN = 12;

/** The volumes of the VMs' drives by ref; undefined while they are read. */
type Volumes = Record<string, TVmVolume> | undefined;

interface VmRowProps {
  vm: TListedVm;
  volumes: Volumes;
  index: number;
  count: number;
  measure: (node: HTMLLIElement | null) => void;
}

function VmRow({ vm, volumes, index, count, measure }: VmRowProps) {
  const reading = volumes === undefined;
  const disks = vm.disks.map((drive) => withVolume(drive, volumes));
  return (
    <li ref={measure} data-index={index} aria-setsize={count} aria-posinset={index + 1} className="flex flex-col gap-2 px-4 py-3 sm:px-5">
      <div className="flex flex-wrap items-center justify-between gap-2">
        <div className="flex min-w-0 flex-wrap items-center gap-2">
          <IntentLink href={vmHref(vm.ref)} className={linkClasses}>
            {vm.name || "(no name)"}
          </IntentLink>
          <PowerBadge state={vm.powerState} />
        </div>
        <p className="text-sm text-zinc-600 tabular-nums dark:text-zinc-400">
          {formatBytes(vm.memoryBytes)} memory · {plural(vm.vcpus, "vCPU")} · {diskTotals(disks, reading)}
        </p>
      </div>
      {vm.description ? <p className="line-clamp-1 text-xs text-zinc-600 dark:text-zinc-400">{vm.description}</p> : null}
      {disks.length > 0 ? (
        <ul aria-label={`Drives of ${vm.name}`} className="flex flex-col gap-1 border-l-2 border-zinc-200 pl-3 dark:border-zinc-800">
          {disks.map((disk) => (
            <li key={disk.vbdRef}>
              <DiskLine disk={disk} reading={reading} />
            </li>
          ))}
        </ul>
      ) : null}
    </li>
  );
}

/** The VMs, virtualized: only the rows in view are in the DOM (each measured), padding stands for the others. */
export function VmRows({ vms, volumes }: { vms: TListedVm[]; volumes: Volumes }) {
  const scrollRef = useRef<HTMLDivElement>(null);
  // TanStack Virtual returns fresh functions each render; as in the volume grid, nothing below is memoized.
  // eslint-disable-next-line react-hooks/incompatible-library
  const virtualizer = useVirtualizer({
    count: vms.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => ROW_ESTIMATE,
    getItemKey: (index) => vms[index]!.ref,
    overscan: OVERSCAN,
  });
  const items = virtualizer.getVirtualItems();
  const paddingTop = items.length > 0 ? items[0]!.start : 0;
  // Before the first measure of the scroll box (0 high while it is empty) no row is in range: the estimated
  // height stands in, so the box opens and the rows in view come.
  const paddingBottom = items.length > 0 ? virtualizer.getTotalSize() - items.at(-1)!.end : virtualizer.getTotalSize();

  return (
    <div
      ref={scrollRef}
      className="max-h-[44rem] overflow-auto overscroll-contain rounded-xl border border-zinc-200 bg-white shadow-xs dark:border-zinc-800 dark:bg-zinc-900/60"
    >
      <ul aria-label="VMs" className="flex flex-col divide-y divide-zinc-200 dark:divide-zinc-800" style={{ paddingTop, paddingBottom }}>
        {items.map((item) => (
          <VmRow key={item.key} vm={vms[item.index]!} volumes={volumes} index={item.index} count={vms.length} measure={virtualizer.measureElement} />
        ))}
      </ul>
    </div>
  );
}
