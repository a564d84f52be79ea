import { Badge } from "./ui/badge.tsx";
import { Panel } from "./ui/panel.tsx";

/** Says plainly that a console area does not exist yet, and what it will hold. */
export function NotBuiltPanel({ area, planned }: { area: string; planned: string[] }) {
  return (
    <Panel
      title="Not built yet"
      tone="info"
      actions={<Badge tone="info">Planned</Badge>}
      description={`The ${area} page is not part of the console yet, so it shows no data. When it is built it will cover:`}
    >
      <ul className="ml-5 list-disc space-y-1.5 text-sm text-zinc-700 marker:text-zinc-400 dark:text-zinc-300">
        {planned.map((item) => (
          <li key={item}>{item}</li>
        ))}
      </ul>
    </Panel>
  );
}
