"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState, type ReactNode } from "react";
import { plural } from "@/lib/format.ts";
import { useVerdict } from "@/components/access/use-verdict.tsx";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { ConfirmDialog } from "@/components/ui/confirm-dialog.tsx";
import type { TSrSummary } from "@/server/api/srs/schema.ts";
import type { MenuAction } from "./action-menu.tsx";

type Confirmable = "detach" | "forget" | "destroy";

export interface SrActions {
  /** The actions an SR offers now, for a menu or a row of buttons. */
  actionsFor(sr: TSrSummary): MenuAction[];
  /** The confirmation dialog and the outcome of the last quick action: render once. */
  element: ReactNode;
}

/**
 * Every change of an SR from the console, each a toolstack task: set default and attach at once, detach,
 * forget and destroy after a confirmation that says what will happen. `onGone` runs after a forget or a
 * destroy (the SR page leaves for the list).
 */
export function useSrActions({ onGone }: { onGone?: (sr: TSrSummary) => void } = {}): SrActions {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [confirm, setConfirm] = useState<{ kind: Confirmable; sr: TSrSummary } | null>(null);
  const [notice, setNotice] = useState<{ tone: "error" | "info"; text: string } | null>(null);

  const refresh = () =>
    Promise.all([
      queryClient.invalidateQueries({ queryKey: trpc.srs.list.queryKey() }),
      queryClient.invalidateQueries({ queryKey: trpc.srs.get.queryKey() }),
    ]);

  const setDefault = useMutation(trpc.srs.setDefault.mutationOptions({ onSettled: refresh }));
  const attach = useMutation(trpc.srs.attach.mutationOptions({ onSettled: refresh }));
  const detach = useMutation(trpc.srs.detach.mutationOptions({ onSettled: refresh }));
  const forget = useMutation(trpc.srs.forget.mutationOptions({ onSettled: refresh }));
  const destroy = useMutation(trpc.srs.destroy.mutationOptions({ onSettled: refresh }));

  const quick = (sr: TSrSummary, what: "default" | "attach") => {
    const mutation = what === "default" ? setDefault : attach;
    setNotice({ tone: "info", text: what === "default" ? `Setting ${sr.name} as the default SR…` : `Attaching ${sr.name}…` });
    mutation.mutate(
      { sr: sr.ref },
      {
        onSuccess: () => setNotice({ tone: "info", text: what === "default" ? `${sr.name} is now the default SR.` : `${sr.name} is attached.` }),
        onError: (error) => setNotice({ tone: "error", text: `Could not ${what === "default" ? `set ${sr.name} as the default SR` : `attach ${sr.name}`}: ${error.message}` }),
      },
    );
  };

  const open = (kind: Confirmable, sr: TSrSummary) => {
    for (const mutation of [detach, forget, destroy]) mutation.reset();
    setConfirm({ kind, sr });
  };

  const denied = {
    default: useVerdict("srs.setDefault").reason,
    detach: useVerdict("srs.detach").reason,
    attach: useVerdict("srs.attach").reason,
    forget: useVerdict("srs.forget").reason,
    destroy: useVerdict("srs.destroy").reason,
  };

  const actionsFor = (sr: TSrSummary): MenuAction[] => {
    const name = <span className="sr-only"> {sr.name}</span>;
    const actions: MenuAction[] = [];
    if (!sr.isDefault) {
      actions.push({ key: "default", label: <>Set{name} as default</>, denied: denied.default, onSelect: () => quick(sr, "default") });
    }
    if (sr.attached) {
      actions.push({ key: "detach", label: <>Detach{name}</>, denied: denied.detach, onSelect: () => open("detach", sr) });
    } else {
      actions.push({
        key: "attach",
        label: <>Attach{name}</>,
        disabled: !sr.hasPbd,
        hint: sr.hasPbd ? undefined : "It has no connection to this host.",
        denied: denied.attach,
        onSelect: () => quick(sr, "attach"),
      });
    }
    actions.push({ key: "forget", label: <>Forget{name}</>, denied: denied.forget, onSelect: () => open("forget", sr) });
    if (sr.allowedOperations.includes("destroy")) {
      actions.push({
        key: "destroy",
        label: <>Destroy{name}</>,
        tone: "danger",
        disabled: !sr.attached,
        hint: sr.attached ? undefined : "Attach it first: its plugin deletes it.",
        denied: denied.destroy,
        onSelect: () => open("destroy", sr),
      });
    }
    return actions;
  };

  const pendingMutation = confirm === null ? null : { detach, forget, destroy }[confirm.kind];
  const run = () => {
    if (confirm === null) return;
    const { kind, sr } = confirm;
    const done = () => {
      setConfirm(null);
      setNotice({ tone: "info", text: kind === "detach" ? `${sr.name} is detached.` : kind === "forget" ? `${sr.name} is forgotten.` : `${sr.name} is destroyed.` });
      if (kind !== "detach") onGone?.(sr);
    };
    if (kind === "detach") detach.mutate({ sr: sr.ref }, { onSuccess: done });
    else if (kind === "forget") forget.mutate({ sr: sr.ref, detachFirst: sr.attached }, { onSuccess: done });
    else destroy.mutate({ sr: sr.ref }, { onSuccess: done });
  };

  const element = (
    <>
      {notice ? (
        <Alert tone={notice.tone}>
          <div className="flex items-start justify-between gap-3">
            <span>{notice.text}</span>
            <button
              type="button"
              onClick={() => setNotice(null)}
              className="shrink-0 rounded text-xs font-medium underline underline-offset-2 focus-visible:outline-2 focus-visible:outline-sky-600"
            >
              Dismiss
            </button>
          </div>
        </Alert>
      ) : null}
      {confirm === null ? null : (
        <ConfirmDialog
          open
          title={confirmTitle(confirm.kind, confirm.sr)}
          body={confirmBody(confirm.kind, confirm.sr)}
          confirmLabel={confirmLabel(confirm.kind, confirm.sr)}
          tone={confirm.kind === "detach" ? "primary" : "danger"}
          pending={pendingMutation?.isPending ?? false}
          error={pendingMutation?.error?.message}
          onConfirm={run}
          onCancel={() => setConfirm(null)}
        />
      )}
    </>
  );

  return { actionsFor, element };
}

function confirmTitle(kind: Confirmable, sr: TSrSummary): string {
  return kind === "detach" ? `Detach ${sr.name}?` : kind === "forget" ? `Forget ${sr.name}?` : `Destroy ${sr.name}?`;
}

function confirmLabel(kind: Confirmable, sr: TSrSummary): string {
  if (kind === "detach") return "Detach";
  if (kind === "forget") return sr.attached ? "Detach and forget" : "Forget";
  return "Destroy";
}

function confirmBody(kind: Confirmable, sr: TSrSummary): ReactNode {
  const volumes = plural(sr.volumeCount, "volume");
  if (kind === "detach") {
    return (
      <p>
        Its plugin detaches the SR from this host. Its {volumes} stay on the storage but cannot be used, listed or copied until you
        attach it again.{sr.isDefault ? " It is the default SR: new volumes without an SR will fail until then." : ""}
      </p>
    );
  }
  if (kind === "forget") {
    return (
      <p>
        {sr.attached ? "It is attached: it will be detached first. " : ""}The toolstack then forgets the SR and the records of its {volumes}. The
        data stays on the storage: probing the same configuration finds it again.
      </p>
    );
  }
  return (
    <p>
      Its plugin deletes the SR and all {volumes} in it, with their data. This cannot be undone.
    </p>
  );
}
