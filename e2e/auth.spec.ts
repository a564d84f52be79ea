import { E2E_PASSWORD, anonymousTest as test, expect, logIn } from "./fixtures.ts";

test("a wrong password says so; the right one leads back to the page asked for; logout ends the session", async ({ page }) => {
  await page.goto("/storage");
  await expect(page).toHaveURL(/\/login\?next=%2Fstorage$/);
  await expect(page.getByRole("heading", { level: 1, name: "Log in to Hangar" })).toBeVisible();

  await page.getByLabel("User name").fill("root");
  await page.getByLabel("Password").fill("not-the-password");
  await page.getByRole("button", { name: "Log in" }).click();
  // (Next's route announcer is an alert too: pick ours by its text.)
  await expect(page.getByRole("alert").filter({ hasText: "Wrong user name or password." })).toBeVisible();

  await page.getByLabel("Password").fill(E2E_PASSWORD);
  await page.getByRole("button", { name: "Log in" }).click();
  await expect(page).toHaveURL("/storage");
  await expect(page.getByRole("heading", { level: 1, name: "Storage" })).toBeVisible();

  const cookie = (await page.context().cookies()).find((c) => c.name === "hangar_session");
  expect(cookie?.httpOnly).toBe(true);
  expect(cookie?.sameSite).toBe("Strict");
  expect(cookie?.value).not.toContain("OpaqueRef");

  await page.getByRole("button", { name: "Log out" }).click();
  await expect(page).toHaveURL("/login");
  await page.goto("/");
  await expect(page).toHaveURL("/login");
});

test("logging out while the page's queries are under way lands on the login page, not on 'your session has ended'", async ({ page }) => {
  await logIn(page);
  const pending = new Set<string>();
  page.on("request", (request) => void (request.url().includes("/api/trpc/") && pending.add(request.url())));
  page.on("requestfinished", (request) => void pending.delete(request.url()));
  page.on("requestfailed", (request) => void pending.delete(request.url()));
  // The page's queries answer slowly: they are still under way when the session ends, and are refused then.
  await page.route("**/api/trpc/**", async (route) => {
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await route.continue().catch(() => undefined);
  });
  await page.goto("/storage");
  await expect(page.getByRole("heading", { level: 1, name: "Storage" })).toBeVisible();
  await page.getByRole("button", { name: "Log out" }).click();
  await expect(page).toHaveURL("/login");
  // Once the refused queries have answered.
  await expect.poll(() => pending.size, { timeout: 10_000 }).toBe(0);
  await expect(page).toHaveURL("/login");
  await expect(page.getByText("Your session has ended")).toHaveCount(0);
});

test("a tRPC call without a session is refused with UNAUTHORIZED", async ({ request }) => {
  const response = await request.get("/api/trpc/srs.list");
  expect(response.status()).toBe(401);
  const body = (await response.json()) as { error: { data: { code: string } } };
  expect(body.error.data.code).toBe("UNAUTHORIZED");
});

test("a forged session cookie counts as none", async ({ page, context, baseURL }) => {
  await context.addCookies([{ name: "hangar_session", value: "forged-value", url: baseURL! }]);
  await page.goto("/tasks");
  await expect(page).toHaveURL(/\/login\?next=%2Ftasks$/);
});

test("a session the toolstack ended returns to the login page and back", async ({ page }) => {
  await logIn(page);
  // End the session behind the console's back, as an idle timeout would.
  const cookie = (await page.context().cookies()).find((c) => c.name === "hangar_session")!;
  await page.goto("/tasks");
  await page.getByRole("button", { name: "Log out" }).click();
  // Only once the logout's answer (which deletes the cookie) is in may the old cookie go back.
  await expect(page).toHaveURL("/login");
  await page.context().addCookies([{ ...cookie }]);
  await page.goto("/tasks");
  await expect(page).toHaveURL(/\/login\?next=%2Ftasks&reason=expired$/);
  await expect(page.getByRole("alert").filter({ hasText: "Your session has ended. Log in again." })).toBeVisible();
  await page.getByLabel("Password").fill(E2E_PASSWORD);
  await page.getByRole("button", { name: "Log in" }).click();
  await expect(page).toHaveURL("/tasks");
});
