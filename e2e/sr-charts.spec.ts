// The SR page's performance charts: the default file SR's datasources, sampled by the console every 5 s,
// fill the four charts within ~10 s; the range selector switches the window.
import { join } from "node:path";
import { z } from "zod";
import { toolstackPort } from "../playwright.config.ts";
import { XenApiClient } from "../server/xenapi/client.ts";
import { E2E_PASSWORD, expect, test } from "./fixtures.ts";

test("the default SR's page shows four charts that fill within ~10 s; the range switches", async ({ page }) => {
  const xapi = await XenApiClient.login(`http://127.0.0.1:${toolstackPort}`, "root", E2E_PASSWORD, "hangar-e2e");
  const pool = (await xapi.call(z.array(z.string()), "pool.get_all"))[0]!;
  const sr = await xapi.call(z.string(), "pool.get_default_SR", pool);
  const uuid = await xapi.call(z.string(), "SR.get_uuid", sr);
  await xapi.logout();

  await page.goto(`/storage/${uuid}`);
  const performance = page.getByRole("region", { name: "Performance" });
  await expect(performance).toBeVisible();
  const charts = ["Free space", "Throughput", "IOPS", "Latency"].map((name) => performance.getByRole("figure", { name }));
  for (const chart of charts) await expect(chart).toBeVisible();

  // The first point comes with the first request; rates with the second sample, 5 s later.
  await expect(charts[0]!).toHaveAccessibleDescription(/free of/, { timeout: 10_000 });
  await expect(charts[1]!).toHaveAccessibleDescription(/^Read .*B\/s, write .*B\/s$/, { timeout: 15_000 });
  await expect(charts[2]!).toHaveAccessibleDescription(/^Read .* IOPS, write .* IOPS$/);
  await expect(charts[3]!).toHaveAccessibleDescription(/^Read .* ms, write .* ms/);
  for (const chart of charts) await expect(chart.locator("svg.recharts-surface")).toBeVisible();

  const ranges = performance.getByRole("group", { name: "Time range" });
  await expect(ranges.getByRole("radio", { name: "Last 5 minutes" })).toBeChecked();
  await ranges.getByRole("radio", { name: "Last hour" }).check({ force: true });
  await expect(ranges.getByRole("radio", { name: "Last hour" })).toBeChecked();
  await expect(charts[0]!).toHaveAccessibleDescription(/free of/);
  await page.screenshot({ path: test.info().outputPath("sr-charts.png"), fullPage: true });
  // The README's picture of an SR's page, refreshed on request only.
  if (process.env.HANGAR_UPDATE_SCREENSHOTS === "1") await page.screenshot({ path: join(import.meta.dirname, "../docs/screenshot-sr.png"), fullPage: true });
});
