import { expect, test } from "./fixtures.ts";

// The main console scans the bundled plugin root (server/plugins): Hangar's own reference plugins.

test("the Plugins page lists Hangar's three plugins", async ({ page }) => {
  await page.goto("/plugins");
  const volumes = page.getByRole("region", { name: "Volume plugins" });
  const datapaths = page.getByRole("region", { name: "Datapath plugins" });
  await expect(volumes.getByRole("article")).toHaveCount(1);
  await expect(datapaths.getByRole("article")).toHaveCount(2);

  const fileSr = volumes.getByRole("article", { name: "File SR" });
  for (const feature of ["SR_CREATE", "VDI_SNAPSHOT", "VDI_CLONE", "VDI_COPY", "VDI_CONFIG_CBT"]) {
    await expect(fileSr.getByRole("list", { name: "Features" }).getByRole("listitem", { name: feature, exact: true })).toBeVisible();
  }
  await expect(fileSr.getByRole("group", { name: "Configuration" }).getByRole("term")).toHaveText(["path", "uri"]);
  await expect(datapaths.getByRole("article", { name: "File datapath" })).toBeVisible();
  await expect(datapaths.getByRole("article", { name: "NBD datapath" })).toBeVisible();
  await expect(page.getByRole("region", { name: "Skipped plugins" })).toHaveCount(0);
});

test("diagnostics of the file volume plugin run on demand", async ({ page }) => {
  await page.goto("/plugins");
  await page.getByRole("button", { name: "Run diagnostics for File SR" }).click();
  await expect(page.getByRole("region", { name: "Diagnostics output for File SR" })).toContainText("Hangar file volume plugin");
  await page.getByRole("button", { name: "Run diagnostics for File datapath" }).click();
  await expect(page.getByRole("region", { name: "Diagnostics output for File datapath" })).toContainText("Hangar file datapath");
});
