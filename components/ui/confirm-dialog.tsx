"use client";

import type { ReactNode } from "react";
import { Alert } from "./alert.tsx";
import { Button } from "./button.tsx";
import { Dialog, DialogActions } from "./dialog.tsx";

export interface ConfirmDialogProps {
  open: boolean;
  title: string;
  /** What will happen, in words: what is removed, what stays. */
  body?: ReactNode;
  confirmLabel: string;
  tone?: "danger" | "primary";
  pending?: boolean;
  error?: string;
  onConfirm: () => void;
  onCancel: () => void;
}

/** Asks before an action that cannot be undone; the action's failure is shown inside, where the user is. */
export function ConfirmDialog({ open, title, body, confirmLabel, tone = "danger", pending = false, error, onConfirm, onCancel }: ConfirmDialogProps) {
  return (
    <Dialog open={open} onClose={onCancel} title={title} description={body}>
      {error ? <Alert tone="error">{error}</Alert> : null}
      <DialogActions>
        <Button variant="secondary" onClick={onCancel}>
          Cancel
        </Button>
        <Button
          aria-busy={pending}
          disabled={pending}
          onClick={onConfirm}
          variant={tone === "danger" ? "danger" : "primary"}
        >
          {pending ? "Working…" : confirmLabel}
        </Button>
      </DialogActions>
    </Dialog>
  );
}
