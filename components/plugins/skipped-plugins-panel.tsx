import { useId } from "react";
import { Badge } from "@/components/ui/badge.tsx";
import { Panel } from "@/components/ui/panel.tsx";
import type { TSkippedPlugin } from "@/server/api/plugins/schema.ts";

/** Directories in the plugin root that did not register, each with the reason, so they can be fixed. */
export function SkippedPluginsPanel({ skipped }: { skipped: TSkippedPlugin[] }) {
  const id = useId();
  return (
    <Panel
      id="skipped-plugins"
      tone="warning"
      title="Skipped plugins"
      description="These directories are in the plugin root but did not register as plugins. Fix the cause, then rescan."
      actions={<Badge tone="warning">{skipped.length} skipped</Badge>}
    >
      <ul className="divide-y divide-amber-200 overflow-hidden rounded-lg border border-amber-200 bg-white dark:divide-amber-900/60 dark:border-amber-900/60 dark:bg-zinc-950/40">
        {skipped.map((plugin, index) => (
          <li key={plugin.path} aria-labelledby={`${id}-${index}`} className="flex flex-col gap-1 px-3 py-2.5">
            <code id={`${id}-${index}`} className="font-mono text-sm font-medium break-all text-zinc-900 dark:text-zinc-100">
              {plugin.kind}/{plugin.dir}
            </code>
            <p className="text-sm break-words text-zinc-700 dark:text-zinc-300">{plugin.reason}</p>
          </li>
        ))}
      </ul>
    </Panel>
  );
}
