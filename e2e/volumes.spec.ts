// The volume table on the default SR's page: create, snapshot, resize, clone, revert, compare, CBT, keys,
// filter, sort and destroy, each through the table's menus and dialogs, checked in the table itself.
import { type Locator, type Page } from "@playwright/test";
import { z } from "zod";
import { toolstackPort } from "../playwright.config.ts";
import { XenApiClient } from "../server/xenapi/client.ts";
import { E2E_PASSWORD, expect, test } from "./fixtures.ts";

async function defaultSr(): Promise<{ uuid: string; name: string }> {
  const xapi = await XenApiClient.login(`http://127.0.0.1:${toolstackPort}`, "root", E2E_PASSWORD, "hangar-e2e");
  const pool = (await xapi.call(z.array(z.string()), "pool.get_all"))[0]!;
  const sr = await xapi.call(z.string(), "pool.get_default_SR", pool);
  const [uuid, name] = await Promise.all([xapi.call(z.string(), "SR.get_uuid", sr), xapi.call(z.string(), "SR.get_name_label", sr)]);
  await xapi.logout();
  return { uuid, name };
}

/** Opens a row's actions menu and picks an item. */
async function act(page: Page, volume: string, item: string | RegExp): Promise<void> {
  await page.getByRole("button", { name: `Actions for ${volume}`, exact: true }).click();
  await page.getByRole("menu", { name: `Actions for ${volume}`, exact: true }).getByRole("menuitem", { name: item }).click();
}

/** The count line for `n` volumes shown: "1 volume" when the filter leaves all, else "1 of 12 volumes". */
function shown(region: Locator, n: number): Locator {
  return region.getByText(new RegExp(`^${n} (of \\d[\\d,]* volumes?|volumes?)$`));
}

/** The table row of a volume, by the accessible name of its actions button. */
function row(table: Locator, volume: string): Locator {
  return table.getByRole("row").filter({ has: table.page().getByRole("button", { name: `Actions for ${volume}`, exact: true }) });
}

test("volumes: create, snapshot, resize, clone, revert, compare, CBT, keys, filter, sort, destroy", async ({ page }) => {
  test.setTimeout(120_000);
  const sr = await defaultSr();
  const name = `e2e-vol-${Date.now().toString(36)}`;
  const clone = `${name}-clone`;

  await page.goto("/storage");
  await page.getByRole("link", { name: sr.name, exact: true }).first().click();
  await expect(page).toHaveURL(new RegExp(`/storage/${sr.uuid}$`));
  const volumes = page.getByRole("region", { name: "Volumes" });
  const table = volumes.getByRole("table", { name: "Volumes" });
  await expect(table).toBeVisible();
  await expect(volumes.getByText(/^\d[\d,]* volumes?$/)).toBeVisible();

  // Create, with a refused size first.
  await volumes.getByRole("button", { name: "Create volume" }).click();
  const create = page.getByRole("dialog", { name: "Create volume" });
  await create.getByLabel("Name").fill(name);
  await create.getByLabel("Size", { exact: true }).fill("0");
  await create.getByRole("button", { name: "Create volume" }).click();
  await expect(create.getByText("The size must be more than zero.")).toBeVisible();
  await create.getByLabel("Size", { exact: true }).fill("64");
  await create.getByLabel("Size: unit").selectOption("MiB");
  await create.getByLabel("Description").fill("made by the e2e test");
  await create.getByRole("button", { name: "Create volume" }).click();
  await expect(create).toBeHidden();
  await expect(volumes.getByText(`Volume “${name}” created.`)).toBeVisible();

  // Filter down to this test's volumes.
  await volumes.getByRole("searchbox", { name: "Filter volumes by name, uuid or description" }).fill(name);
  await expect(shown(volumes, 1)).toBeVisible();
  await expect(row(table, name)).toContainText("64 MiB");

  // Snapshot: a second row of the same name, marked as a snapshot of it.
  await act(page, name, "Take a snapshot");
  await expect(volumes.getByText(`Snapshot of “${name}” taken.`)).toBeVisible();
  const snapshotRow = row(table, `${name} (snapshot)`);
  await expect(snapshotRow).toContainText("Snapshot");
  await expect(snapshotRow.getByRole("cell").nth(4)).toHaveText(name);

  // Resize: a smaller size is refused in the dialog, a larger one is applied.
  await act(page, name, "Resize…");
  const resize = page.getByRole("dialog", { name: `Resize “${name}”` });
  await resize.getByLabel("New size", { exact: true }).fill("32");
  await resize.getByLabel("New size: unit").selectOption("MiB");
  await resize.getByRole("button", { name: "Resize" }).click();
  await expect(resize.getByText(/volumes can only grow/)).toBeVisible();
  await resize.getByLabel("New size", { exact: true }).fill("128");
  await resize.getByRole("button", { name: "Resize" }).click();
  await expect(resize).toBeHidden();
  await expect(row(table, name)).toContainText("128 MiB");

  // Clone, named.
  await act(page, name, "Clone…");
  const cloneDialog = page.getByRole("dialog", { name: `Clone “${name}”` });
  await cloneDialog.getByLabel("Name of the clone").fill(clone);
  await cloneDialog.getByRole("button", { name: "Clone" }).click();
  await expect(cloneDialog).toBeHidden();
  await expect(row(table, clone)).toContainText("128 MiB");

  // Revert the original to its snapshot: back to the snapshot's 64 MiB.
  await act(page, `${name} (snapshot)`, `Revert “${name}” to this snapshot…`);
  const revert = page.getByRole("dialog", { name: `Revert “${name}”?` });
  await revert.getByRole("button", { name: "Revert" }).click();
  await expect(revert).toBeHidden();
  await expect(volumes.getByText(`“${name}” reverted to the snapshot.`)).toBeVisible();
  await expect(row(table, name)).toContainText("64 MiB");

  // Sort by size, both ways: the clone (128 MiB) last, then first.
  await expect(shown(volumes, 3)).toBeVisible();
  const sizeHeader = table.getByRole("columnheader").filter({ has: page.getByRole("button", { name: "Sort by size" }) });
  await table.getByRole("button", { name: "Sort by size" }).click();
  await expect(sizeHeader).toHaveAttribute("aria-sort", "ascending");
  await expect(table.getByRole("row").last()).toContainText(clone);
  await table.getByRole("button", { name: "Sort by size" }).click();
  await expect(sizeHeader).toHaveAttribute("aria-sort", "descending");
  await expect(table.getByRole("row").nth(1)).toContainText(clone);

  // Compare the clone with its original: a block map with its counts in words.
  await table.getByRole("checkbox", { name: `Select ${clone} for compare` }).check();
  await table.getByRole("checkbox", { name: `Select ${name} for compare` }).check();
  await volumes.getByRole("button", { name: /^Compare/ }).click();
  const compare = page.getByRole("dialog", { name: "Compare volumes" });
  await expect(compare.getByRole("img", { name: /^Block map of/ })).toBeVisible();
  await expect(compare.getByText(/blocks differ/)).toBeVisible();
  await compare.getByRole("button", { name: "Close" }).click();

  // CBT on, a key added.
  await act(page, name, "Turn CBT on");
  await expect(row(table, name).getByText("On", { exact: true })).toBeVisible();
  await act(page, name, "Keys…");
  const keys = page.getByRole("dialog", { name: `Keys of “${name}”` });
  await keys.getByLabel("Key", { exact: true }).fill("owner");
  await keys.getByLabel("Value").fill("e2e");
  await keys.getByRole("button", { name: "Add key" }).click();
  await expect(keys.getByRole("cell", { name: "owner", exact: true })).toBeVisible();
  await expect(keys.getByRole("button", { name: "Remove key owner" })).toBeVisible();
  await keys.getByRole("button", { name: "Close" }).click();

  // Filter by the clone's name only.
  await volumes.getByRole("searchbox").fill(clone);
  await expect(shown(volumes, 1)).toBeVisible();
  await page.screenshot({ path: test.info().outputPath("sr-volumes.png"), fullPage: true });

  // Destroy the clone, with a confirmation naming it.
  await act(page, clone, "Destroy…");
  const confirm = page.getByRole("dialog", { name: `Destroy “${clone}”?` });
  await expect(confirm).toContainText(`The volume “${clone}”`);
  await confirm.getByRole("button", { name: "Destroy volume" }).click();
  await expect(confirm).toBeHidden();
  await expect(volumes.getByText(`Volume “${clone}” destroyed.`)).toBeVisible();
  await expect(volumes.getByText("No volume matches the filter.")).toBeVisible();
});

test("a volume destroyed in another window: the action is refused in words where it was asked", async ({ page }) => {
  const sr = await defaultSr();
  const name = `e2e-gone-${Date.now().toString(36)}`;
  const xapi = await XenApiClient.login(`http://127.0.0.1:${toolstackPort}`, "root", E2E_PASSWORD, "hangar-e2e");
  const srRef = await xapi.call(z.string(), "SR.get_by_uuid", sr.uuid);
  const vdi = await xapi.call(z.string(), "VDI.create", { SR: srRef, virtual_size: 16 * 1024 ** 2, name_label: name, type: "user", sharable: false, read_only: false, other_config: {}, sm_config: {} });

  await page.goto(`/storage/${sr.uuid}`);
  const volumes = page.getByRole("region", { name: "Volumes" });
  await volumes.getByRole("searchbox").fill(name);
  await expect(shown(volumes, 1)).toBeVisible();
  // The page's next refresh is held back, so it still shows the volume the other window destroys.
  await page.route("**/api/trpc/*volumes.list*", (route) => route.abort());
  await xapi.call(z.unknown(), "VDI.destroy", vdi);
  await xapi.logout();

  await act(page, name, "Rename / description…");
  const rename = page.getByRole("dialog", { name: `Name and description of “${name}”` });
  await rename.getByLabel("Name").fill(`${name}-renamed`);
  await rename.getByRole("button", { name: "Save" }).click();
  await expect(rename.getByRole("alert")).toHaveText("The volume no longer exists: it may have been destroyed in another window.");
  await rename.getByRole("button", { name: "Cancel" }).click();

  await act(page, name, "Take a snapshot");
  await expect(volumes.getByRole("alert").filter({ hasText: "The snapshot failed" })).toContainText(
    "The snapshot failed: The volume no longer exists: it may have been destroyed in another window.",
  );

  // Once the list can refresh again, the volume is gone from it.
  await page.unroute("**/api/trpc/*volumes.list*");
  await page.reload();
  await page.getByRole("region", { name: "Volumes" }).getByRole("searchbox").fill(name);
  await expect(page.getByRole("region", { name: "Volumes" }).getByText("No volume matches the filter.")).toBeVisible();
});
