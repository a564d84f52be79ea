"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { useId, useState } from "react";
import { formatBytes, plural } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Dialog } from "@/components/ui/dialog.tsx";
import { FormButtons } from "@/components/ui/form-buttons.tsx";
import type { TGetVmResponse } from "@/server/api/vms/schema.ts";
import { deviceLabel } from "./vm-bits.tsx";

/** Destroys the VM, and with the box ticked its disks: the dialog says exactly what goes and what stays. */
export function DestroyVmDialog({ vm, open, onClose }: { vm: TGetVmResponse; open: boolean; onClose: () => void }) {
  const connections = [plural(vm.disks.length, "drive connection"), plural(vm.interfaces.length, "network interface")].join(" and ");
  return (
    <Dialog
      open={open}
      onClose={onClose}
      title={`Destroy the VM "${vm.name || "(no name)"}"?`}
      description={`This removes the VM with its ${connections}. It cannot be undone.`}
    >
      {/* Mounted on each opening: the box starts unticked, with no error left from last time. */}
      {open ? <DestroyVmForm vm={vm} onClose={onClose} /> : null}
    </Dialog>
  );
}

function DestroyVmForm({ vm, onClose }: { vm: TGetVmResponse; onClose: () => void }) {
  const trpc = useTRPC();
  const router = useRouter();
  const queryClient = useQueryClient();
  const checkboxId = useId();
  const [withDisks, setWithDisks] = useState(false);
  const destroy = useMutation(
    trpc.vms.destroy.mutationOptions({
      onSuccess: async () => {
        await queryClient.invalidateQueries({ queryKey: trpc.vms.list.queryKey() });
        onClose();
        router.push("/vms");
      },
    }),
  );

  const disks = vm.disks.filter((disk) => !disk.isCd && disk.vdi !== null);
  const total = disks.reduce((sum, disk) => sum + (disk.vdi?.sizeBytes ?? 0), 0);

  return (
    <>
      {disks.length > 0 ? (
        <div className="flex flex-col gap-3 text-sm">
          <div className="flex items-start gap-2">
            <input
              id={checkboxId}
              type="checkbox"
              checked={withDisks}
              onChange={(event) => setWithDisks(event.target.checked)}
              className="mt-0.5 size-4 accent-red-600"
            />
            <label htmlFor={checkboxId} className="font-medium text-zinc-900 dark:text-zinc-100">
              Also destroy its disks
            </label>
          </div>
          <div className={withDisks ? "rounded-md border border-red-200 bg-red-50 p-3 dark:border-red-900 dark:bg-red-950/40" : "rounded-md border border-zinc-200 p-3 dark:border-zinc-800"}>
            <p className="text-zinc-800 dark:text-zinc-200">
              {withDisks
                ? `These ${plural(disks.length, "disk")} (${formatBytes(total)}) are destroyed with their data; a disk another VM also uses stays:`
                : `Its ${plural(disks.length, "disk")} (${formatBytes(total)}) stay on their SRs, detached from any VM:`}
            </p>
            <ul className="mt-1.5 list-disc pl-5 text-zinc-700 dark:text-zinc-300">
              {disks.map((disk) => (
                <li key={disk.vbdRef}>
                  {deviceLabel(disk)}: {disk.vdi?.name || "(no name)"}, {formatBytes(disk.vdi?.sizeBytes ?? 0)} on {disk.vdi?.srName ?? "an SR that cannot be read"}
                </li>
              ))}
            </ul>
          </div>
        </div>
      ) : (
        <p className="text-sm text-zinc-700 dark:text-zinc-300">It has no disks to keep or destroy.</p>
      )}
      {destroy.error ? <Alert tone="error">{destroy.error.message}</Alert> : null}
      <FormButtons
        label={withDisks ? "Destroy VM and disks" : "Destroy VM"}
        variant="danger"
        pending={destroy.isPending}
        pendingLabel="Destroying…"
        onCancel={onClose}
        onConfirm={() => destroy.mutate({ ref: vm.ref, keepDisks: !withDisks })}
      />
    </>
  );
}
