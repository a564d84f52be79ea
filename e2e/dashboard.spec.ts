// The dashboard's storage summary: counts by health, capacity, and an SR that is not Healthy listed with its
// reason and a link (an SR made and detached through XenAPI for this test, forgotten afterwards).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { toolstackPort } from "../playwright.config.ts";
import { XenApiClient } from "../server/xenapi/client.ts";
import { E2E_PASSWORD, expect, test } from "./fixtures.ts";

test("the dashboard shows SR health counts and capacity", async ({ page }) => {
  await page.goto("/");
  const storage = page.getByRole("region", { name: "Storage" });
  await expect(storage.getByRole("region", { name: "Healthy SRs" })).toContainText(/[1-9]/);
  await expect(storage.getByRole("region", { name: "Recovering SRs" })).toBeVisible();
  await expect(storage.getByRole("region", { name: "Unreachable SRs" })).toBeVisible();
  await expect(storage.getByRole("meter", { name: "Space used across attached SRs" })).toHaveAttribute("aria-valuetext", /GiB of .* used/);
  await expect(page.getByRole("region", { name: "Running tasks" })).toBeVisible();
  await expect(page.getByRole("region", { name: "Recent failures" })).toBeVisible();
  await expect(page.getByText("Not built yet")).toHaveCount(0);
  await page.screenshot({ path: test.info().outputPath("dashboard.png"), fullPage: true });
});

test("an SR that is not Healthy is listed with its reason and a link to it", async ({ page }) => {
  const dir = mkdtempSync(join(tmpdir(), "hangar-e2e-dashboard-"));
  const name = `Detached SR ${Date.now().toString(36)}`;
  const xapi = await XenApiClient.login(`http://127.0.0.1:${toolstackPort}`, "root", E2E_PASSWORD, "hangar-e2e");
  const host = (await xapi.call(z.array(z.string()), "host.get_all"))[0]!;
  const sr = await xapi.call(z.string(), "SR.create", host, { path: join(dir, "sr") }, 0, name, "", "file", "user", false, {});
  try {
    for (const pbd of await xapi.call(z.array(z.string()), "SR.get_PBDs", sr)) await xapi.call(z.unknown(), "PBD.unplug", pbd);

    await page.goto("/");
    const attention = page.getByRole("region", { name: "Needs attention" });
    const item = attention.getByRole("listitem").filter({ hasText: name });
    await expect(item).toContainText("Unreachable");
    await expect(item).toContainText("Detached: not attached on this host");
    await expect(page.getByRole("region", { name: "Unreachable SRs" })).toContainText(/[1-9]/);
    await page.screenshot({ path: test.info().outputPath("dashboard-attention.png"), fullPage: true });
    await item.getByRole("link", { name }).click();
    await expect(page.getByRole("heading", { level: 1, name })).toBeVisible();
    await expect(page.getByRole("alert").or(page.getByRole("status")).filter({ hasText: "This SR is detached" })).toBeVisible();
    await expect(page.getByRole("button", { name: `Attach ${name}` })).toBeVisible();
  } finally {
    await xapi.call(z.unknown(), "SR.forget", sr).catch(() => undefined);
    await xapi.logout();
    rmSync(dir, { recursive: true, force: true });
  }
});
