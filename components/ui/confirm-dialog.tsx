"use client";

import type { ReactNode } from "react";
import { Alert } from "./alert.tsx";
import { Dialog } from "./dialog.tsx";
import { FormButtons } from "./form-buttons.tsx";

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
      <FormButtons label={confirmLabel} variant={tone} pending={pending} onCancel={onCancel} onConfirm={onConfirm} />
    </Dialog>
  );
}
