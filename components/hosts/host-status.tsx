import { Badge } from "@/components/ui/badge.tsx";
import type { THostSummary } from "@/server/api/hosts/schema.ts";

/** Live or Offline, in words: the colour is never the only cue. */
export function LiveBadge({ live }: { live: boolean }) {
  return (
    <Badge tone={live ? "success" : "danger"}>
      <span aria-hidden="true" className="mr-1 size-1.5 rounded-full bg-current" />
      {live ? "Live" : "Offline"}
    </Badge>
  );
}

/** Master or Member of the pool. */
export function RoleBadge({ isMaster }: { isMaster: boolean }) {
  return <Badge tone={isMaster ? "info" : "neutral"}>{isMaster ? "Master" : "Member"}</Badge>;
}

/** What an administrator should know about a host's state, in a sentence; "" when all is well. */
export function hostNote(host: Pick<THostSummary, "live" | "enabled" | "srs">): string {
  if (!host.live) {
    return host.srs.length === 0
      ? "Its heartbeat stopped (or it was stopped): the tasks it ran have failed."
      : "Its heartbeat stopped (or it was stopped): the tasks it ran have failed, and its SRs cannot be reached until it is back.";
  }
  if (!host.enabled) return "Disabled: it takes no new work.";
  return "";
}

/** "name (address)": hosts of one machine share a name, never an address. */
export function hostTitle(host: Pick<THostSummary, "name" | "address">): string {
  return host.name === "" || host.name === host.address ? host.address : `${host.name} (${host.address})`;
}
