import type { TVolumeRow } from "@/server/api/volumes/schema.ts";

/** What a volume dialog reports when its change is done, for the table to say. */
export interface DoneMessage {
  text: string;
  /** A task to follow on the task page (a copy). */
  taskLink?: boolean;
}

/**
 * The props of the forms behind the volume table's actions. Each is mounted while open (its state starts
 * fresh), shows its own failure inside (where the user acted) and reports success to the table, which says so.
 */
export interface VolumeDialogProps {
  srRef: string;
  onClose: () => void;
  onDone: (message: DoneMessage) => void;
}

/** The props of a dialog about one volume. */
export interface VolumeActionDialogProps extends VolumeDialogProps {
  volume: TVolumeRow;
}
