import { formatBytes, plural } from "@/lib/format.ts";
import { Badge, type BadgeTone } from "@/components/ui/badge.tsx";
import type { TVmDisk } from "@/server/api/vms/schema.ts";
import { IntentLink } from "@/components/ui/intent-link.tsx";

export const linkClasses =
  "font-medium text-zinc-900 underline-offset-2 hover:underline focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-sky-600 dark:text-zinc-100";

/** The VM page's address; refs carry a colon, so they are encoded. */
export const vmHref = (ref: string) => `/vms/${encodeURIComponent(ref)}`;

/** The SR page's address: the storage pages name SRs by uuid. */
export const srHref = (uuid: string) => `/storage/${uuid}`;

const POWER_TONES: Record<string, BadgeTone> = { Running: "success", Paused: "warning", Suspended: "info", Halted: "neutral" };

export function PowerBadge({ state }: { state: string }) {
  return <Badge tone={POWER_TONES[state] ?? "neutral"}>{state}</Badge>;
}

/** Disks only (no CD drives): their count and total size, "2 disks, 12 GiB"; the count alone while the volumes are read. */
export function diskTotals(disks: TVmDisk[], reading = false): string {
  const real = disks.filter((disk) => !disk.isCd);
  if (real.length === 0) return "No disks";
  if (reading) return plural(real.length, "disk");
  const bytes = real.reduce((sum, disk) => sum + (disk.vdi?.sizeBytes ?? 0), 0);
  return `${plural(real.length, "disk")}, ${formatBytes(bytes)}`;
}

/** "Disk 0", "CD drive 3": how the VM sees the device. */
export function deviceLabel(disk: TVmDisk): string {
  return `${disk.isCd ? (disk.type === "Floppy" ? "Floppy drive" : "CD drive") : "Disk"} ${disk.userdevice}`;
}

/** One drive in a line: its volume, size and SR (a link to the SR page), or why there is none; `reading` while its volume is read. */
export function DiskLine({ disk, reading = false }: { disk: TVmDisk; reading?: boolean }) {
  return (
    <span className="flex min-w-0 flex-wrap items-center gap-x-2 gap-y-0.5 text-sm">
      <span className="font-medium text-zinc-800 dark:text-zinc-200">{deviceLabel(disk)}</span>
      {reading && !disk.empty ? (
        <span className="text-zinc-600 dark:text-zinc-400">reading its volume…</span>
      ) : disk.vdi === null ? (
        <span className="text-zinc-600 dark:text-zinc-400">{disk.empty ? "empty" : "volume unavailable (its SR cannot be listed)"}</span>
      ) : (
        <>
          <span className="min-w-0 truncate text-zinc-700 dark:text-zinc-300">{disk.vdi.name || "(no name)"}</span>
          <span className="text-zinc-600 tabular-nums dark:text-zinc-400">{formatBytes(disk.vdi.sizeBytes)}</span>
          <span className="text-zinc-600 dark:text-zinc-400">
            on{" "}
            {disk.vdi.srUuid === null ? (
              "an SR that cannot be read"
            ) : (
              <IntentLink href={srHref(disk.vdi.srUuid)} className={linkClasses}>
                {disk.vdi.srName || "(no name)"}
              </IntentLink>
            )}
          </span>
        </>
      )}
    </span>
  );
}
