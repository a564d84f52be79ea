import { fixtureRootPort } from "../playwright.config.ts";
import { expect, test } from "./fixtures.ts";

// This console scans the fixture plugin root (server/storage/fixtures/python-root).
test.use({ baseURL: `http://127.0.0.1:${fixtureRootPort}` });

test.beforeEach(async ({ page }) => {
  await page.goto("/plugins");
});

test("shows the plugin root and both groups", async ({ page }) => {
  await expect(page.getByRole("heading", { level: 1, name: "Plugins" })).toBeVisible();
  await expect(page.getByRole("main")).toContainText("server/storage/fixtures/python-root");
  await expect(page.getByRole("region", { name: "Volume plugins" }).getByRole("article")).toHaveCount(1);
  await expect(page.getByRole("region", { name: "Datapath plugins" }).getByRole("article")).toHaveCount(1);
});

test("the scratch volume plugin shows what Plugin.query declared, and what the toolstack derives apart", async ({ page }) => {
  const scratch = page.getByRole("region", { name: "Volume plugins" }).getByRole("article", { name: "Scratch SR" });
  await expect(scratch).toBeVisible();
  await expect(scratch).toContainText("Raw files in a directory");
  for (const detail of ["SR type", "scratch", "1.2.3", "Example Storage Co", "Required API version", "5.0", "(C) Example Storage Co"]) {
    await expect(scratch).toContainText(detail);
  }

  const features = scratch.getByRole("list", { name: "Features" });
  const declared = ["SR_ATTACH", "SR_DETACH", "SR_CREATE", "SR_PROBE", "SR_STATS", "VDI_CREATE", "VDI_DELETE", "VDI_SNAPSHOT"];
  const fromScripts = [["SR_SCAN", "SR.ls"], ["SR_UPDATE", "SR.stat"], ["VDI_UPDATE", "Volume.stat"]];
  const fromToolstack = ["VDI_ATTACH", "VDI_DETACH", "VDI_ACTIVATE", "VDI_DEACTIVATE", "VDI_INTRODUCE"];
  await expect(features.getByRole("listitem")).toHaveCount(declared.length + fromScripts.length + fromToolstack.length);
  for (const feature of declared) {
    await expect(features.getByRole("listitem", { name: feature, exact: true })).toBeVisible();
  }
  for (const [feature, script] of fromScripts) {
    const item = features.getByRole("listitem", { name: `${feature} (derived from the ${script} script)`, exact: true });
    await expect(item).toHaveAttribute("title", `Not declared: derived from the ${script} script`);
  }
  for (const feature of fromToolstack) {
    await expect(features.getByRole("listitem", { name: `${feature} (added by the toolstack)`, exact: true })).toBeVisible();
  }
  await expect(features).toHaveAccessibleDescription(/not declared: the toolstack derives them from the method scripts/);

  const configuration = scratch.getByRole("group", { name: "Configuration" });
  await expect(configuration.getByRole("term")).toHaveText(["path"]);
  await expect(configuration.getByRole("definition")).toHaveText(["Directory that holds the SR"]);
});

test("the loop datapath plugin is listed under its scheme", async ({ page }) => {
  const loop = page.getByRole("region", { name: "Datapath plugins" }).getByRole("article", { name: "Loop datapath" });
  await expect(loop).toContainText("URI scheme");
  await expect(loop.getByRole("list", { name: "Features" }).getByRole("listitem", { name: "NONPERSISTENT" })).toBeVisible();
  await expect(loop.getByRole("group", { name: "Configuration" })).toContainText("No device-config keys.");
});

test("skipped plugins are listed with the reason", async ({ page }) => {
  const skipped = page.getByRole("region", { name: "Skipped plugins" });
  await expect(skipped.getByRole("listitem")).toHaveCount(2);
  await expect(skipped.getByRole("listitem", { name: "volume/org.example.storage.ancient" })).toContainText("requires API version 2.0");
  await expect(skipped.getByRole("listitem", { name: "datapath/broken" })).toContainText(
    "Plugin.Query failed: SR_BACKEND_FAILURE: cannot load kernel module nbd",
  );
});

test("runs Plugin.diagnostics on demand and shows its output", async ({ page }) => {
  const scratch = page.getByRole("article", { name: "Scratch SR" });
  const output = scratch.getByRole("region", { name: "Diagnostics output for Scratch SR" });
  await expect(output).toHaveCount(0);

  await scratch.getByRole("button", { name: "Run diagnostics for Scratch SR" }).click();
  await expect(output).toHaveText(/^scratch plugin: python \d+\.\d+, no SRs tracked$/);
  await expect(scratch.getByRole("status")).toContainText("Plugin.diagnostics ran at");

  // Each plugin runs its own: the loop card is untouched until asked.
  const loop = page.getByRole("article", { name: "Loop datapath" });
  await expect(loop.getByRole("region", { name: "Diagnostics output for Loop datapath" })).toHaveCount(0);
  await loop.getByRole("button", { name: "Run diagnostics for Loop datapath" }).click();
  await expect(loop.getByRole("region", { name: "Diagnostics output for Loop datapath" })).toHaveText("loop datapath: stateless");
});

test("every control has an accessible name", async ({ page }) => {
  await expect(page.getByRole("article", { name: "Scratch SR" })).toBeVisible();
  const tree = await page.locator("body").ariaSnapshot();
  expect(tree).toMatch(/- button "Run diagnostics for Scratch SR"/);
  // An unnamed control shows up in the snapshot as a bare role with no quoted name after it.
  expect(tree).not.toMatch(/- (button|link|textbox|checkbox|combobox)(:|$| \[)/m);
});
