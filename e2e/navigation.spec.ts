import { fixtureRootPort } from "../playwright.config.ts";
import { expect, test } from "./fixtures.ts";

// The console on the fixture plugin root (server/storage/fixtures/python-root): the plugin counts below are its.
test.use({ baseURL: `http://127.0.0.1:${fixtureRootPort}` });

const pages = [
  { link: "Dashboard", path: "/", heading: "Dashboard" },
  { link: "Storage", path: "/storage", heading: "Storage" },
  { link: "Hosts", path: "/hosts", heading: "Hosts" },
  { link: "VMs", path: "/vms", heading: "VMs" },
  { link: "Tasks", path: "/tasks", heading: "Tasks" },
  { link: "Plugins", path: "/plugins", heading: "Plugins" },
];

test("the main navigation reaches every page and marks the current one", async ({ page }) => {
  await page.goto("/");
  const nav = page.getByRole("navigation", { name: "Main" });
  for (const target of pages) {
    await nav.getByRole("link", { name: target.link }).click();
    await expect(page).toHaveURL(target.path);
    await expect(page.getByRole("heading", { level: 1, name: target.heading })).toBeVisible();
    await expect(nav.getByRole("link", { name: target.link })).toHaveAttribute("aria-current", "page");
    for (const other of pages.filter((p) => p !== target)) {
      await expect(nav.getByRole("link", { name: other.link })).not.toHaveAttribute("aria-current");
    }
  }
});

test("an unknown address says so and leads back", async ({ page }) => {
  const response = await page.goto("/no-such-page");
  expect(response?.status()).toBe(404);
  await expect(page.getByRole("heading", { level: 1, name: "Page not found" })).toBeVisible();
  await page.getByRole("link", { name: "Go to the dashboard" }).click();
  await expect(page.getByRole("heading", { level: 1, name: "Dashboard" })).toBeVisible();
});

test("the skip link moves focus to the main content", async ({ page }) => {
  await page.goto("/storage");
  await page.keyboard.press("Tab");
  const skip = page.getByRole("link", { name: "Skip to main content" });
  await expect(skip).toBeFocused();
  await skip.press("Enter");
  await expect(page.getByRole("main")).toBeFocused();
});

test("the dashboard counts plugins from the scan and links to them", async ({ page }) => {
  await page.goto("/");
  const registered = page.getByRole("region", { name: "Registered plugins" });
  await expect(registered.getByRole("paragraph").first()).toHaveText("2");
  await expect(registered).toContainText("1 volume plugin, 1 datapath plugin");
  const skipped = page.getByRole("region", { name: "Skipped plugins" });
  await expect(skipped.getByRole("paragraph").first()).toHaveText("2");

  await skipped.getByRole("link", { name: "See why they were skipped" }).click();
  await expect(page).toHaveURL("/plugins#skipped-plugins");
  await expect(page.getByRole("region", { name: "Skipped plugins" })).toBeInViewport();
});

test.describe("at 360 px wide", () => {
  test.use({ viewport: { width: 360, height: 740 } });

  test("the menu button opens the navigation and nothing scrolls sideways", async ({ page }) => {
    await page.goto("/plugins");
    await expect(page.getByRole("article", { name: "Scratch SR" })).toBeVisible();
    const nav = page.getByRole("navigation", { name: "Main" });
    await expect(nav).toBeHidden();

    const menu = page.getByRole("button", { name: "Open menu" });
    await expect(menu).toHaveAttribute("aria-expanded", "false");
    await menu.click();
    await expect(page.getByRole("button", { name: "Close menu" })).toHaveAttribute("aria-expanded", "true");
    await nav.getByRole("link", { name: "Tasks" }).click();
    await expect(page.getByRole("heading", { level: 1, name: "Tasks" })).toBeVisible();
    await expect(nav).toBeHidden();

    for (const path of ["/", "/plugins", "/storage", "/hosts"]) {
      await page.goto(path);
      await expect(page.getByRole("heading", { level: 1 })).toBeVisible();
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      expect(overflow, `${path} scrolls sideways`).toBeLessThanOrEqual(0);
    }
  });
});
