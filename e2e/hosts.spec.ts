// The Hosts page on the e2e toolstack (one host, the pool's master): listed Live and Master with its Local
// storage SR, reached from the main navigation; the Storage page and the SR page name the host; the dashboard
// says it is live; at 360 px one card per host and nothing scrolls sideways. Screenshots in light and dark.
import { z } from "zod";
import { toolstackPort } from "../playwright.config.ts";
import { XenApiClient } from "../server/xenapi/client.ts";
import { E2E_PASSWORD, expect, test } from "./fixtures.ts";

async function theHost(): Promise<{ name: string; address: string }> {
  const xapi = await XenApiClient.login(`http://127.0.0.1:${toolstackPort}`, "root", E2E_PASSWORD, "hangar-e2e");
  try {
    const [ref] = await xapi.call(z.array(z.string()), "host.get_all");
    return { name: await xapi.call(z.string(), "host.get_name_label", ref), address: await xapi.call(z.string(), "host.get_address", ref) };
  } finally {
    await xapi.logout();
  }
}

test("the host is listed Live and master with its Local storage SR, and the SR names its host", async ({ page }) => {
  const host = await theHost();
  const title = `${host.name} (${host.address})`;
  await page.goto("/");
  const nav = page.getByRole("navigation", { name: "Main" });
  await nav.getByRole("link", { name: "Hosts" }).click();
  await expect(page).toHaveURL("/hosts");
  await expect(page.getByRole("heading", { level: 1, name: "Hosts" })).toBeVisible();
  await expect(nav.getByRole("link", { name: "Hosts" })).toHaveAttribute("aria-current", "page");

  const table = page.getByRole("table", { name: "Hosts of the pool" });
  const row = table.getByRole("row", { name: title });
  await expect(row.getByRole("rowheader")).toContainText(host.name);
  await expect(row.getByText("Live", { exact: true })).toBeVisible();
  await expect(row.getByText("Master", { exact: true })).toBeVisible();
  await expect(row).toContainText("The console connects here");
  await expect(row.getByRole("cell", { name: host.address, exact: true })).toBeVisible();
  const srs = row.getByRole("list", { name: `SRs of ${title}` });
  const local = srs.getByRole("listitem").filter({ has: page.getByRole("link", { name: "Local storage", exact: true }) });
  await expect(local).toContainText("file");
  await expect(page.getByText("Offline", { exact: true })).toHaveCount(0);
  await page.screenshot({ path: test.info().outputPath("hosts-1280-light.png"), fullPage: true });
  await page.emulateMedia({ colorScheme: "dark" });
  await page.screenshot({ path: test.info().outputPath("hosts-1280-dark.png"), fullPage: true });
  await page.emulateMedia({ colorScheme: "light" });

  // The SR's page says which host it is on, and leads back.
  await local.getByRole("link", { name: "Local storage", exact: true }).click();
  await expect(page.getByRole("heading", { level: 1, name: "Local storage" })).toBeVisible();
  await expect(page.getByRole("main")).toContainText(`On host ${title}`);
  await page.getByRole("link", { name: title }).click();
  await expect(page.getByRole("heading", { level: 1, name: "Hosts" })).toBeVisible();

  // The Storage page's Host column.
  await page.goto("/storage");
  const srRow = page.getByRole("row", { name: /Local storage/ });
  await expect(srRow.getByRole("cell").filter({ hasText: host.address })).toBeVisible();
  await page.screenshot({ path: test.info().outputPath("storage-host-column.png"), fullPage: true });

  // The dashboard: the one host is live.
  await page.goto("/");
  const hosts = page.getByRole("region", { name: "Hosts" });
  await expect(hosts).toContainText(`The only host, ${title}, is live and the pool's master.`);
  await hosts.getByRole("link", { name: "View hosts" }).click();
  await expect(page.getByRole("heading", { level: 1, name: "Hosts" })).toBeVisible();
});

test.describe("at 360 px wide", () => {
  test.use({ viewport: { width: 360, height: 740 } });

  test("one card per host, its state and role in words, nothing scrolls sideways", async ({ page }) => {
    const host = await theHost();
    const title = `${host.name} (${host.address})`;
    await page.goto("/hosts");
    const card = page.getByRole("article", { name: title });
    await expect(card.getByText("Live", { exact: true })).toBeVisible();
    await expect(card.getByText("Master", { exact: true })).toBeVisible();
    await expect(card.getByRole("link", { name: "Local storage", exact: true })).toBeVisible();
    await expect(page.getByRole("table", { name: "Hosts of the pool" })).toBeHidden();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow, "/hosts scrolls sideways").toBeLessThanOrEqual(0);
    await page.screenshot({ path: test.info().outputPath("hosts-360-light.png"), fullPage: true });
    await page.emulateMedia({ colorScheme: "dark" });
    await page.screenshot({ path: test.info().outputPath("hosts-360-dark.png"), fullPage: true });

    // The Storage page's card names the host too.
    await page.goto("/storage");
    const srCard = page.getByRole("article", { name: "Local storage" });
    await expect(srCard).toContainText(host.address);
    await page.screenshot({ path: test.info().outputPath("storage-360-dark.png"), fullPage: true });
  });
});
