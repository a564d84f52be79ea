import type { ReactNode } from "react";
import { Button } from "./button.tsx";
import { DialogActions } from "./dialog.tsx";

export interface FormButtonsProps {
  /** The primary action; without one the row only dismisses (a dialog that shows, not asks). */
  label?: string;
  pending?: boolean;
  /** Said on the primary button while its action runs. */
  pendingLabel?: string;
  variant?: "primary" | "danger";
  /** The primary action cannot run yet (beyond while it is pending). */
  disabled?: boolean;
  cancelLabel?: string;
  cancelDisabled?: boolean;
  onCancel: () => void;
  /** Runs the action on click; without it the primary button submits its form. */
  onConfirm?: () => void;
  /** Further actions, placed between the dismiss button and the primary one. */
  children?: ReactNode;
}

/** A dialog's button row: dismiss first, the primary action last (right), busy and disabled while it runs. */
export function FormButtons({
  label,
  pending = false,
  pendingLabel = "Working…",
  variant = "primary",
  disabled = false,
  cancelLabel = "Cancel",
  cancelDisabled,
  onCancel,
  onConfirm,
  children,
}: FormButtonsProps) {
  return (
    <DialogActions>
      <Button variant="secondary" onClick={onCancel} disabled={cancelDisabled}>
        {cancelLabel}
      </Button>
      {children}
      {label !== undefined ? (
        <Button type={onConfirm ? "button" : "submit"} variant={variant} aria-busy={pending} disabled={pending || disabled} onClick={onConfirm}>
          {pending ? pendingLabel : label}
        </Button>
      ) : null}
    </DialogActions>
  );
}
