import { Alert } from "@/components/ui/alert.tsx";
import { Button } from "@/components/ui/button.tsx";
import type { DoneMessage } from "./volume-dialog-props.ts";
import { TaskLink } from "./task-link.tsx";

export type Notice = DoneMessage & { tone: "success" | "error" };

/** What the last action on the table did (or why it failed), until dismissed or the next action. */
export function VolumeNotice({ notice, onDismiss }: { notice: Notice; onDismiss: () => void }) {
  return (
    <Alert tone={notice.tone === "error" ? "error" : "info"}>
      <div className="flex flex-wrap items-center justify-between gap-2">
        <span>
          {notice.text} {notice.taskLink ? <TaskLink /> : null}
        </span>
        <Button size="sm" variant="ghost" onClick={onDismiss}>
          Dismiss
        </Button>
      </div>
    </Alert>
  );
}
