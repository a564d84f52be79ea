"use client";

import { ConfirmDialog } from "@/components/ui/confirm-dialog.tsx";
import type { TVolumeRow } from "@/server/api/volumes/schema.ts";
import { CloneVolumeDialog } from "./clone-volume-dialog.tsx";
import { CopyVolumeDialog } from "./copy-volume-dialog.tsx";
import { DestroyVolumeDialog } from "./destroy-volume-dialog.tsx";
import { DownloadVolumeDialog } from "./download-volume-dialog.tsx";
import { RenameVolumeDialog } from "./rename-volume-dialog.tsx";
import { ResizeVolumeDialog } from "./resize-volume-dialog.tsx";
import { RevertVolumeDialog } from "./revert-volume-dialog.tsx";
import type { VolumeAction } from "./volume-actions-menu.tsx";
import { VolumeDetailsDialog } from "./volume-details-dialog.tsx";
import type { VolumeDialogProps } from "./volume-dialog-props.ts";
import { VolumeKeysDialog } from "./volume-keys-dialog.tsx";

/** The menu's actions that open a dialog (a snapshot and CBT run at once). */
export type DialogAction = Exclude<VolumeAction, "snapshot" | "cbt">;

interface Props extends VolumeDialogProps {
  action: DialogAction;
  /** undefined once the volume has left the list, e.g. destroyed in another window. */
  volume: TVolumeRow | undefined;
}

/** The dialog of one menu action on one volume. */
export function VolumeActionDialog({ action, volume, ...props }: Props) {
  if (volume === undefined) {
    return (
      <ConfirmDialog
        open
        title="The volume is gone"
        body="It no longer exists: it may have been destroyed in another window."
        confirmLabel="Close"
        tone="primary"
        onConfirm={props.onClose}
        onCancel={props.onClose}
      />
    );
  }
  const Dialog = {
    details: VolumeDetailsDialog,
    resize: ResizeVolumeDialog,
    clone: CloneVolumeDialog,
    revert: RevertVolumeDialog,
    copy: CopyVolumeDialog,
    download: DownloadVolumeDialog,
    rename: RenameVolumeDialog,
    keys: VolumeKeysDialog,
    destroy: DestroyVolumeDialog,
  }[action];
  return <Dialog volume={volume} {...props} />;
}
