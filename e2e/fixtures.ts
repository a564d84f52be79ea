// Every console page needs a login: `test` from here starts each test logged in as root (through the real
// login form), `anonymousTest` does not. `E2E_PASSWORD` is root's password on the test toolstack.
import { type Page, test as base, expect } from "@playwright/test";
import { E2E_PASSWORD } from "../playwright.config.ts";

export { E2E_PASSWORD, expect };

export async function logIn(page: Page, password = E2E_PASSWORD): Promise<void> {
  await page.goto("/login");
  await page.getByLabel("User name").fill("root");
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Log in" }).click();
  await expect(page.getByRole("heading", { level: 1, name: "Dashboard" })).toBeVisible();
}

export const test = base.extend({
  page: async ({ page }, provide) => {
    await logIn(page);
    await provide(page);
  },
});

export const anonymousTest = base;
