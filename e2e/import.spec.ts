// VM import on the VMs page in Chromium: a generated XVA dropped on the page (a real drop event carrying a
// File), uploaded through tus while the console imports it; the page reloaded mid-upload and the same file
// dropped again resumes the same upload; the network cut mid-upload and restored; a file that is no XVA
// rejected with the toolstack's reason and nothing left behind. Disk bytes are compared through the
// toolstack's own /export.
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { MiB } from "../server/toolstack/transfer/testing.ts";
import { XenApiClient } from "../server/xenapi/client.ts";
import { E2E_PASSWORD, expect, test } from "./fixtures.ts";
import { disk, dropFile, expectDiskBytes, progressOf, spoolDir, toolstackUrl, writeArchive } from "./transfer-helpers.ts";

test.describe.configure({ mode: "serial" });

test("a dropped XVA imports while it uploads; a reload mid-upload resumes it, with identical disk bytes", async ({ page }) => {
  test.setTimeout(180_000);
  const xapi = await XenApiClient.login(toolstackUrl, "root", E2E_PASSWORD, "hangar-e2e");
  const vmName = `e2e-import-${Date.now()}`;
  const d = disk(48, 7);
  const file = await writeArchive("reload.xva", vmName, d);
  page.on("dialog", (dialog) => void dialog.accept());
  // Slow PATCHes, so that the middle of the upload can be seen.
  await page.route("**/api/upload/**", async (route) => {
    if (route.request().method() === "PATCH") await new Promise((r) => setTimeout(r, 700));
    await route.continue();
  });
  await page.goto("/vms");
  await expect(page.getByRole("combobox", { name: "Import into SR" })).toHaveValue(/OpaqueRef:/);
  await dropFile(page, file);
  const row = page.getByRole("listitem", { name: "reload.xva" });
  await expect(row.getByRole("status")).toContainText(/Uploading and importing|Uploading/);
  await expect.poll(() => progressOf(page, "reload.xva"), { timeout: 60_000 }).toBeGreaterThan(15);
  expect(await progressOf(page, "reload.xva")).toBeLessThan(100);
  await page.screenshot({ path: test.info().outputPath("import-uploading.png"), fullPage: true });

  await page.reload();
  await expect(page.getByText(/reload\.xva.*drop or choose the same file again to resume/)).toBeVisible();
  await expect(page.getByRole("combobox", { name: "Import into SR" })).toHaveValue(/OpaqueRef:/);
  // This time through the file picker (the other way in).
  await page.getByLabel("VM files to import").setInputFiles(file);
  // Resumed, not started over: the bar starts where the console's copy ends.
  await expect.poll(() => progressOf(page, "reload.xva"), { timeout: 10_000 }).toBeGreaterThan(15);
  await expect(row.getByRole("status")).toContainText("Imported", { timeout: 120_000 });
  // The VM list is virtualized: the filter brings the VM among the rows in view.
  await page.getByRole("searchbox", { name: "Filter VMs by name" }).fill(vmName);
  await expect(page.getByRole("link", { name: vmName, exact: true })).toBeVisible({ timeout: 10_000 });
  await page.screenshot({ path: test.info().outputPath("import-done.png"), fullPage: true });
  expect((await xapi.call(z.array(z.string()), "VM.get_by_name_label", vmName)).length).toBe(1);
  await expectDiskBytes(xapi, vmName, d);
});

test("the network cut mid-upload: the upload resumes by itself and the import completes", async ({ page }) => {
  test.setTimeout(180_000);
  const xapi = await XenApiClient.login(toolstackUrl, "root", E2E_PASSWORD, "hangar-e2e");
  const vmName = `e2e-import-cut-${Date.now()}`;
  const d = disk(40, 300);
  const file = await writeArchive("cut.xva", vmName, d);
  let cut = false;
  await page.route("**/api/upload/**", async (route) => {
    if (cut) return route.abort("internetdisconnected");
    if (route.request().method() === "PATCH") await new Promise((r) => setTimeout(r, 700));
    await route.continue();
  });
  await page.goto("/vms");
  await dropFile(page, file);
  await expect.poll(() => progressOf(page, "cut.xva"), { timeout: 60_000 }).toBeGreaterThan(15);
  cut = true;
  await page.waitForTimeout(4000);
  const row = page.getByRole("listitem", { name: "cut.xva" });
  await expect(row.getByRole("alert")).toHaveCount(0);
  cut = false;
  await expect(row.getByRole("status")).toContainText("Imported", { timeout: 120_000 });
  await expectDiskBytes(xapi, vmName, d);
});

test("a file that is no XVA is rejected with a message and leaves nothing behind", async ({ page }) => {
  const xapi = await XenApiClient.login(toolstackUrl, "root", E2E_PASSWORD, "hangar-e2e");
  const vdis = (await xapi.call(z.array(z.string()), "VDI.get_all")).length;
  const vms = (await xapi.call(z.array(z.string()), "VM.get_all")).length;
  const junkName = `junk-${Date.now()}.xva`;
  const junk = test.info().outputPath(junkName);
  await writeFile(junk, Buffer.alloc(2 * MiB, "this is not a VM archive\n"));
  await page.goto("/vms");
  await dropFile(page, junk);
  const row = page.getByRole("listitem", { name: junkName });
  await expect(row.getByRole("alert")).toContainText(`${junkName} was not imported`, { timeout: 30_000 });
  await expect(row.getByRole("status")).toHaveText(/Failed/);
  await page.screenshot({ path: test.info().outputPath("import-invalid.png"), fullPage: true });
  expect((await xapi.call(z.array(z.string()), "VDI.get_all")).length).toBe(vdis);
  expect((await xapi.call(z.array(z.string()), "VM.get_all")).length).toBe(vms);
  // The console's spool of that upload is gone (its state, with the reason, stays until the retention).
  const names = await readdir(spoolDir());
  for (const name of names.filter((n) => n.endsWith(".import-state"))) {
    const state = JSON.parse(await readFile(join(spoolDir(), name), "utf8")) as { id: string; fileName: string };
    if (state.fileName === junkName) expect(names).not.toContain(state.id);
  }
  // A file that is no VM archive by its name is refused before any upload.
  const text = test.info().outputPath("notes.txt");
  await writeFile(text, "notes");
  await dropFile(page, text);
  await expect(page.getByRole("alert").filter({ hasText: "notes.txt: not a file the console imports" })).toBeVisible();
});

test("import from URL: an address the console must not fetch from is refused in words", async ({ page }) => {
  await page.goto("/vms");
  await page.getByRole("textbox", { name: "Or import from a URL" }).fill("http://169.254.169.254/latest/vm.xva");
  await page.getByRole("button", { name: "Import from URL" }).click();
  await expect(page.getByText(/link-local address/)).toBeVisible();
});
