// The storage page against the e2e toolstack: an SR made through the Create SR dialog (in a directory this
// test makes, so names and paths never collide with other specs), listed Healthy, its page, default and back,
// detach, attach, destroy with a confirmation; a configuration the plugin refuses shows its reason in the dialog;
// forget of an attached SR (made through XenAPI) with one confirmation.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { toolstackPort } from "../playwright.config.ts";
import { XenApiClient } from "../server/xenapi/client.ts";
import { E2E_PASSWORD, expect, test } from "./fixtures.ts";

const unique = () => `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;

test("create an SR through the dialog, open it, make it default and back, detach, attach, destroy", async ({ page }) => {
  test.setTimeout(90_000);
  const dir = mkdtempSync(join(tmpdir(), "hangar-e2e-storage-"));
  const name = `E2E SR ${unique()}`;

  await page.goto("/storage");
  await expect(page.getByRole("heading", { level: 1, name: "Storage" })).toBeVisible();
  await page.getByRole("button", { name: "Create SR" }).click();
  const dialog = page.getByRole("dialog", { name: "Create an SR" });
  await expect(dialog.getByLabel("SR type")).toHaveValue("file");
  await dialog.getByLabel("Name").fill(name);
  await dialog.getByLabel("Description").fill("Made by storage.spec");
  // The form is built from the plugin's configuration keys, each described by Plugin.query's text.
  const path = dialog.getByLabel("path", { exact: true });
  await expect(path).toHaveAccessibleDescription(/Directory that holds the SR/);
  await expect(dialog.getByLabel("uri", { exact: true })).toHaveAccessibleDescription(/file:\/\/ URI/);
  await path.fill(join(dir, "sr"));
  await dialog.getByRole("button", { name: "Probe" }).click();
  await expect(dialog.getByRole("region", { name: "Probe results" })).toContainText("A new SR can be created here.");
  await dialog.getByRole("button", { name: "Create", exact: true }).click();
  await expect(dialog).toBeHidden({ timeout: 30_000 });
  await expect(page.getByRole("status").filter({ hasText: `Created ${name}.` })).toBeVisible();

  const row = page.getByRole("row", { name: new RegExp(name) });
  await expect(row).toContainText("Healthy");
  await expect(row).toContainText("Made by storage.spec");
  await expect(row.getByRole("meter", { name: `Space used on ${name}` })).toHaveAttribute("aria-valuetext", /GiB of .* used/);
  await page.screenshot({ path: test.info().outputPath("storage.png"), fullPage: true });
  // The README's picture, refreshed on request only: a test run leaves the checkout as it found it.
  if (process.env.HANGAR_UPDATE_SCREENSHOTS === "1") await page.screenshot({ path: join(import.meta.dirname, "../docs/screenshot-storage.png"), fullPage: true });

  // Its page: name, health and why, space, uuid.
  await row.getByRole("link", { name }).click();
  await expect(page.getByRole("heading", { level: 1, name })).toBeVisible();
  await expect(page.getByText("Fully available.")).toBeVisible();
  await expect(page.getByRole("meter", { name: `Space used on ${name}` })).toBeVisible();
  const uuid = page.url().split("/").pop() ?? "";
  await expect(page.getByRole("main")).toContainText(uuid);
  await page.screenshot({ path: test.info().outputPath("sr-page.png"), fullPage: true });

  // Default, from the SR page; then back to the previous default from the list's menu.
  await page.getByRole("button", { name: `Set ${name} as default` }).click();
  await expect(page.getByRole("status").filter({ hasText: `${name} is now the default SR.` })).toBeVisible();
  await expect(page.getByRole("button", { name: `Set ${name} as default` })).toBeHidden();
  await page.getByRole("navigation", { name: "Breadcrumb" }).getByRole("link", { name: "Storage" }).click();
  await expect(row.getByText("Default", { exact: true })).toBeVisible();
  const local = page.getByRole("row", { name: /Local storage/ });
  await local.getByRole("button", { name: "Actions for Local storage" }).click();
  await page.getByRole("menuitem", { name: "Set Local storage as default" }).click();
  await expect(local.getByText("Default", { exact: true })).toBeVisible();
  await expect(row.getByText("Default", { exact: true })).toBeHidden();

  // Detach: a confirmation that says what happens; the SR stays listed, detached, with the reason.
  await row.getByRole("button", { name: `Actions for ${name}` }).click();
  await page.getByRole("menuitem", { name: `Detach ${name}` }).click();
  const detach = page.getByRole("dialog", { name: `Detach ${name}?` });
  await expect(detach).toContainText("stay on the storage");
  await detach.getByRole("button", { name: "Detach" }).click();
  await expect(detach).toBeHidden();
  await expect(row).toContainText("Detached");
  await expect(row).toContainText("Unreachable");
  await expect(row).toContainText("Attach it to use its volumes");

  // Destroy needs it attached: the menu says so; Attach, then Destroy after the confirmation.
  await row.getByRole("button", { name: `Actions for ${name}` }).click();
  await expect(page.getByRole("menuitem", { name: `Destroy ${name}` })).toBeDisabled();
  await page.getByRole("menuitem", { name: `Attach ${name}` }).click();
  await expect(row).toContainText("Healthy");
  await expect(row).not.toContainText("Detached");
  await row.getByRole("button", { name: `Actions for ${name}` }).click();
  await page.getByRole("menuitem", { name: `Destroy ${name}` }).click();
  const destroy = page.getByRole("dialog", { name: `Destroy ${name}?` });
  await expect(destroy).toContainText("cannot be undone");
  await destroy.getByRole("button", { name: "Cancel" }).click();
  await expect(destroy).toBeHidden();
  await expect(row).toBeVisible();
  await row.getByRole("button", { name: `Actions for ${name}` }).click();
  await page.getByRole("menuitem", { name: `Destroy ${name}` }).click();
  await destroy.getByRole("button", { name: "Destroy" }).click();
  await expect(destroy).toBeHidden({ timeout: 30_000 });
  await expect(row).toHaveCount(0);
  await expect(page.getByRole("status").filter({ hasText: `${name} is destroyed.` })).toBeVisible();
  rmSync(dir, { recursive: true, force: true });
});

test("a configuration the plugin refuses shows its reason inside the dialog", async ({ page }) => {
  const dir = mkdtempSync(join(tmpdir(), "hangar-e2e-storage-"));
  const taken = join(dir, "taken");
  mkdirSync(taken);
  writeFileSync(join(taken, "not-an-sr.txt"), "someone else's data");
  const name = `Refused SR ${unique()}`;

  await page.goto("/storage");
  await page.getByRole("button", { name: "Create SR" }).click();
  const dialog = page.getByRole("dialog", { name: "Create an SR" });
  await dialog.getByLabel("Name").fill(name);
  await dialog.getByLabel("path", { exact: true }).fill(taken);
  await dialog.getByRole("button", { name: "Probe" }).click();
  await expect(dialog.getByRole("region", { name: "Probe results" })).toContainText("holds files that are not a Hangar SR");
  await dialog.getByRole("button", { name: "Create", exact: true }).click();
  const alert = dialog.getByRole("alert");
  await expect(alert).toContainText("Could not create the SR");
  await expect(alert).toContainText(/is not empty \(holds not-an-sr\.txt\)/);
  // Still open, with what was typed, to fix and retry.
  await expect(dialog.getByLabel("Name")).toHaveValue(name);
  await dialog.getByRole("button", { name: "Cancel" }).click();
  await expect(dialog).toBeHidden();
  await expect(page.getByRole("row", { name: new RegExp(name) })).toHaveCount(0);
  rmSync(dir, { recursive: true, force: true });
});

test("at 360 px the SRs are cards with the same facts and actions", async ({ page }) => {
  await page.setViewportSize({ width: 360, height: 800 });
  await page.goto("/storage");
  const card = page.getByRole("list", { name: "Storage repositories" }).getByRole("article", { name: "Local storage" });
  await expect(card).toContainText("Healthy");
  await expect(card.getByRole("meter", { name: "Space used on Local storage" })).toBeVisible();
  await expect(card.getByRole("button", { name: "Actions for Local storage" })).toBeVisible();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  expect(overflow).toBeLessThanOrEqual(0);
});

test("forget an attached SR: one confirmation detaches and forgets it, its data stays", async ({ page }) => {
  const dir = mkdtempSync(join(tmpdir(), "hangar-e2e-storage-"));
  const name = `Forgotten SR ${unique()}`;
  const xapi = await XenApiClient.login(`http://127.0.0.1:${toolstackPort}`, "root", E2E_PASSWORD, "hangar-e2e");
  const host = (await xapi.call(z.array(z.string()), "host.get_all"))[0]!;
  const sr = await xapi.call(z.string(), "SR.create", host, { path: join(dir, "sr") }, 0, name, "", "file", "user", false, {});
  try {
    await page.goto("/storage");
    const row = page.getByRole("row", { name: new RegExp(name) });
    await row.getByRole("button", { name: `Actions for ${name}` }).click();
    await page.getByRole("menuitem", { name: `Forget ${name}` }).click();
    const forget = page.getByRole("dialog", { name: `Forget ${name}?` });
    await expect(forget).toContainText("It is attached: it will be detached first.");
    await expect(forget).toContainText("The data stays on the storage");
    await forget.getByRole("button", { name: "Detach and forget" }).click();
    await expect(forget).toBeHidden({ timeout: 30_000 });
    await expect(row).toHaveCount(0);
    // The SR's metadata is still there: probing the directory finds it.
    await page.getByRole("button", { name: "Create SR" }).click();
    const dialog = page.getByRole("dialog", { name: "Create an SR" });
    await dialog.getByLabel("path", { exact: true }).fill(join(dir, "sr"));
    await dialog.getByRole("button", { name: "Probe" }).click();
    await expect(dialog.getByRole("region", { name: "Probe results" })).toContainText(`Found the SR "${name}"`);
    await expect(dialog.getByRole("region", { name: "Probe results" })).toContainText("Not known to the toolstack.");
  } finally {
    await xapi.call(z.unknown(), "SR.forget", sr).catch(() => undefined);
    await xapi.logout();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the actions menu works from the keyboard", async ({ page }) => {
  await page.goto("/storage");
  const button = page.getByRole("row", { name: /Local storage/ }).getByRole("button", { name: "Actions for Local storage" });
  await button.focus();
  await page.keyboard.press("Enter");
  const menu = page.getByRole("menu", { name: "Actions for Local storage" });
  await expect(button).toHaveAttribute("aria-expanded", "true");
  const items = menu.getByRole("menuitem");
  await expect(items.first()).toBeFocused();
  await page.keyboard.press("ArrowDown");
  await expect(items.nth(1)).toBeFocused();
  await page.keyboard.press("End");
  await expect(items.last()).toBeFocused();
  await page.keyboard.press("Escape");
  await expect(menu).toBeHidden();
  await expect(button).toBeFocused();
  await expect(button).toHaveAttribute("aria-expanded", "false");
});
