import { useId, type ReactNode } from "react";
import { Badge } from "@/components/ui/badge.tsx";
import { Card, CardContent, CardDescription, CardFooter, CardHeader, CardTitle } from "@/components/ui/card.tsx";
import { cn } from "@/components/ui/cn.ts";
import { plural, stated } from "@/lib/format.ts";
import type { TDerivedFeature, TRegisteredPlugin } from "@/server/api/plugins/schema.ts";
import { ConformancePanel } from "./conformance-panel.tsx";
import { PluginDiagnostics } from "./plugin-diagnostics.tsx";

/** Everything a plugin declared in Plugin.query, the features the toolstack derives, and what the console noticed. */
export function PluginCard({ plugin }: { plugin: TRegisteredPlugin }) {
  const id = useId();
  const configuration = Object.entries(plugin.configuration);
  const typeLabel = plugin.kind === "volume" ? "SR type" : "URI scheme";

  return (
    <Card as="article" aria-labelledby={`${id}-title`}>
      <CardHeader>
        <div className="flex flex-wrap items-center gap-1.5">
          <Badge tone={plugin.kind === "volume" ? "info" : "success"}>{plugin.kind === "volume" ? "Volume" : "Datapath"}</Badge>
          <Badge mono title={typeLabel}>
            {plugin.kind === "datapath" ? `${plugin.type}://` : plugin.type}
          </Badge>
          {plugin.warnings.length > 0 ? <Badge tone="warning">{plural(plugin.warnings.length, "warning")}</Badge> : null}
        </div>
        <CardTitle id={`${id}-title`} className="mt-1">
          {plugin.name}
        </CardTitle>
        {plugin.description ? <CardDescription>{plugin.description}</CardDescription> : null}
      </CardHeader>

      {/* Wide cards put the declared facts beside features and configuration. */}
      <CardContent className="@3xl:grid @3xl:grid-cols-2 @3xl:items-start @3xl:gap-6">
        <dl className="grid grid-cols-1 gap-x-6 gap-y-3 rounded-lg bg-zinc-50 p-3 text-sm @sm:grid-cols-2 dark:bg-zinc-950/50">
          <Field term={typeLabel}>
            <code className="font-mono">{plugin.type}</code>
          </Field>
          <Field term="Version">{stated(plugin.version)}</Field>
          <Field term="Vendor">{stated(plugin.vendor)}</Field>
          <Field term="Required API version">{stated(plugin.required_api_version)}</Field>
          <Field term="Required cluster stack">
            {plugin.required_cluster_stack.length > 0 ? plugin.required_cluster_stack.join(", ") : "None"}
          </Field>
          <Field term="Directory" wide>
            <code className="font-mono break-all">{plugin.dir}</code>
          </Field>
          <Field term="Copyright" wide>
            {stated(plugin.copyright)}
          </Field>
        </dl>

        <div className="flex flex-col gap-5">
          <div className="flex flex-col gap-2">
            <SubHeading id={`${id}-features`}>Features</SubHeading>
            {plugin.features.length > 0 ? (
              <ul
                aria-labelledby={`${id}-features`}
                aria-describedby={plugin.derivedFeatures.length > 0 ? `${id}-derived` : undefined}
                className="flex flex-wrap gap-1.5"
              >
                {plugin.declaredFeatures.map((feature) => (
                  // A list item takes no name from its content; the label lets assistive tech and tests find it.
                  <li key={feature} aria-label={feature}>
                    <Badge mono>{feature}</Badge>
                  </li>
                ))}
                {plugin.derivedFeatures.map((derived) => (
                  <DerivedFeature key={derived.feature} derived={derived} />
                ))}
              </ul>
            ) : (
              <Empty>No features declared.</Empty>
            )}
            {plugin.derivedFeatures.length > 0 ? (
              <p id={`${id}-derived`} className="text-xs text-zinc-500 dark:text-zinc-400">
                Dashed features are not declared: the toolstack derives them from the method scripts the plugin ships,
                or adds them to every volume plugin.
              </p>
            ) : null}
          </div>

          <div role="group" aria-labelledby={`${id}-configuration`} className="flex flex-col gap-2">
            <SubHeading id={`${id}-configuration`}>Configuration</SubHeading>
            {configuration.length > 0 ? (
              <dl className="divide-y divide-zinc-200 rounded-lg border border-zinc-200 text-sm dark:divide-zinc-800 dark:border-zinc-800">
                {configuration.map(([key, description]) => (
                  <div key={key} className="grid gap-1 px-3 py-2 @sm:grid-cols-[minmax(7rem,auto)_1fr] @sm:gap-4">
                    <dt className="font-mono text-xs leading-5 font-medium text-zinc-900 dark:text-zinc-100">{key}</dt>
                    <dd className="text-zinc-600 dark:text-zinc-400">{description}</dd>
                  </div>
                ))}
              </dl>
            ) : (
              <Empty>No device-config keys.</Empty>
            )}
          </div>

          {plugin.warnings.length > 0 ? (
            <div
              role="group"
              aria-labelledby={`${id}-warnings`}
              className="flex flex-col gap-2 rounded-lg border border-amber-300 bg-amber-50/70 p-3 dark:border-amber-900/80 dark:bg-amber-950/30"
            >
              <SubHeading id={`${id}-warnings`}>Warnings</SubHeading>
              <ul className="ml-4 list-disc space-y-1 text-sm text-amber-900 dark:text-amber-200">
                {plugin.warnings.map((warning) => (
                  <li key={warning}>{warning}</li>
                ))}
              </ul>
            </div>
          ) : null}
        </div>
      </CardContent>

      <CardFooter className="flex-col items-stretch">
        <PluginDiagnostics plugin={plugin} />
        {plugin.kind === "volume" ? <ConformancePanel plugin={plugin} /> : null}
      </CardFooter>
    </Card>
  );
}

/** A feature the plugin does not declare: dashed and unfilled, and named with where it comes from. */
function DerivedFeature({ derived: { feature, script } }: { derived: TDerivedFeature }) {
  const origin = script === undefined ? "added by the toolstack" : `derived from the ${script} script`;
  return (
    <li aria-label={`${feature} (${origin})`} title={`Not declared: ${origin}`}>
      <span className="inline-flex items-center rounded-md border border-dashed border-zinc-400 px-1.5 py-0.5 font-mono text-xs font-medium tracking-tight whitespace-nowrap text-zinc-600 dark:border-zinc-600 dark:text-zinc-400">
        {feature}
      </span>
    </li>
  );
}

function Field({ term, wide = false, children }: { term: string; wide?: boolean; children: ReactNode }) {
  return (
    <div className={cn("min-w-0", wide && "@sm:col-span-2")}>
      <dt className="text-xs text-zinc-500 dark:text-zinc-400">{term}</dt>
      <dd className="mt-0.5 text-zinc-900 dark:text-zinc-100">{children}</dd>
    </div>
  );
}

function SubHeading({ id, children }: { id: string; children: ReactNode }) {
  return (
    <h4 id={id} className="text-xs font-semibold tracking-wide text-zinc-500 uppercase dark:text-zinc-400">
      {children}
    </h4>
  );
}

function Empty({ children }: { children: ReactNode }) {
  return <p className="text-sm text-zinc-500 dark:text-zinc-400">{children}</p>;
}
