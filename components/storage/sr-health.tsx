import { Badge, type BadgeTone } from "@/components/ui/badge.tsx";
import { cn } from "@/components/ui/cn.ts";
import type { TSrHealth, TSrHealthTag } from "@/server/api/srs/schema.ts";

const TONES: Record<TSrHealthTag, BadgeTone> = {
  Healthy: "success",
  Recovering: "warning",
  Unreachable: "danger",
  Unavailable: "danger",
  Unknown: "danger",
};

export function healthTone(tag: TSrHealthTag): BadgeTone {
  return TONES[tag];
}

/** Whether an SR needs someone's attention (anything but Healthy). */
export function needsAttention(health: TSrHealth): boolean {
  return health.tag !== "Healthy";
}

/** The health tag as a coloured badge; the colour is never the only cue (the tag is the text). */
export function HealthBadge({ health, className }: { health: TSrHealth; className?: string }) {
  return (
    <Badge tone={healthTone(health.tag)} className={className}>
      <span aria-hidden="true" className={cn("mr-1 size-1.5 rounded-full bg-current")} />
      {health.tag}
    </Badge>
  );
}

/** The badge and, when not Healthy, the reason in words: visible, not only in a tooltip. */
export function HealthWithReason({ health, clamp = false, className }: { health: TSrHealth; clamp?: boolean; className?: string }) {
  return (
    <div className={cn("flex min-w-0 flex-col items-start gap-1", className)}>
      <HealthBadge health={health} />
      {health.reason !== "" ? (
        <p title={clamp ? health.reason : undefined} className={cn("text-xs break-words text-zinc-600 dark:text-zinc-400", clamp && "line-clamp-2")}>
          {health.reason}
        </p>
      ) : null}
    </div>
  );
}
