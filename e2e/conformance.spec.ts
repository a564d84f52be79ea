// Conformance from the Plugins page: the bundled file plugin's volume checks (no datapath: ~15-45 s),
// followed check by check, with per-check results, counts, and reasons for what did not pass.
import { expect, test } from "./fixtures.ts";

test("runs the conformance checks on the file plugin and shows the result of each check", async ({ page }) => {
  test.setTimeout(240_000);
  await page.goto("/plugins");
  const card = page.getByRole("region", { name: "Volume plugins" }).getByRole("article", { name: "File SR" });
  await expect(card.getByLabel("Datapath for the data checks")).toHaveValue("");
  await card.getByRole("button", { name: "Run conformance checks on File SR" }).click();

  const results = card.getByRole("region", { name: "Conformance results for File SR" });
  await expect(results.getByRole("status")).toContainText(/Running \d+ checks \(volume checks only\)/);
  await expect(results.getByRole("progressbar", { name: "Conformance checks on File SR" })).toBeVisible();
  await expect(results.getByRole("status")).toContainText("Every check that applies passed", { timeout: 200_000 });

  const checks = results.getByRole("list", { name: "Checks of File SR" });
  await expect(checks.getByRole("listitem", { name: "Passed: SR.create answers a configuration that SR.attach accepts" })).toBeVisible();
  await expect(checks.getByRole("listitem", { name: /^Failed:/ })).toHaveCount(0);
  // A skipped check says why.
  await expect(checks.getByRole("listitem", { name: /^Skipped: / }).first()).toContainText("no datapath was chosen for this run");
  const counts = results.getByRole("list", { name: "Check counts" });
  await expect(counts).toContainText(/[1-9]\d* passed/);
  await expect(counts).toContainText("0 failed");
  await page.screenshot({ path: test.info().outputPath("plugins-conformance.png"), fullPage: true });

  // The result is still there after a reload: the last run of the plugin is kept on the server.
  await page.reload();
  await expect(
    page.getByRole("article", { name: "File SR" }).getByRole("region", { name: "Conformance results for File SR" }).getByRole("status"),
  ).toContainText("Every check that applies passed");
});
