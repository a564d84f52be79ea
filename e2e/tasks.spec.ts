// The task page: a copy and a mirror started from the UI and followed, a failure read in words, a mirror
// cancelled, the history filtered, no polling while the tab is hidden. Volumes and a second SR are made
// through the toolstack's XenAPI; the NBD targets are nbdkit processes this spec starts.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "@playwright/test";
import { toolstackPort } from "../playwright.config.ts";
import { E2E_PASSWORD, expect, test } from "./fixtures.ts";

const MiB = 1024 * 1024;
const run = `${Date.now().toString(36)}`;
// Made when the tests run, not when the file is loaded (Playwright loads every spec to list them).
let scratch: string;
const nbdkits: ChildProcess[] = [];
let session: string | undefined;

async function xapi<T>(method: string, ...params: unknown[]): Promise<T> {
  const call = async (name: string, args: unknown[]) => {
    const response = await fetch(`http://127.0.0.1:${toolstackPort}/jsonrpc`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", method: name, params: args, id: 1 }),
    });
    const reply = (await response.json()) as { result?: unknown; error?: { message: string; data?: unknown } };
    if (reply.error) throw new Error(`${name}: ${reply.error.message} ${JSON.stringify(reply.error.data ?? [])}`);
    return reply.result;
  };
  session ??= (await call("session.login_with_password", ["root", E2E_PASSWORD, "2.21", "e2e tasks"])) as string;
  return (await call(method, [session, ...params])) as T;
}

/** An nbdkit memory export on a unix socket, stopped after the spec; `delayMs` slows every write down. */
async function nbdkit(name: string, delayMs?: number): Promise<string> {
  const socket = join(scratch, `${name}.sock`);
  const delay = delayMs === undefined ? [] : ["--filter=delay"];
  const params = delayMs === undefined ? [] : [`delay-write=${delayMs}ms`, `delay-zero=${delayMs}ms`];
  nbdkits.push(spawn("nbdkit", ["--unix", socket, "--foreground", ...delay, "memory", "256M", ...params], { stdio: "inherit" }));
  for (let i = 0; !existsSync(socket); i++) {
    if (i > 100) throw new Error(`nbdkit did not make ${socket}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return `nbd+unix:///?socket=${socket}`;
}

// Copies and the toolstack's clean-up take their time on a shared 2-core host.
test.describe.configure({ timeout: 180_000 });

let defaultSr: string;
let defaultSrOption: string;
let otherSr: string | undefined;
let otherSrName: string;

test.beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), "hangar-e2e-tasks-"));
  const [pool] = await xapi<string[]>("pool.get_all");
  defaultSr = await xapi<string>("pool.get_default_SR", pool);
  defaultSrOption = `${await xapi<string>("SR.get_name_label", defaultSr)} (file)`;
  const [host] = await xapi<string[]>("host.get_all");
  otherSrName = `e2e tasks target ${run}`;
  otherSr = await xapi<string>("SR.create", host, { path: join(scratch, "other-sr") }, 0, otherSrName, "", "file", "user", false, {});
});

test.afterAll(async () => {
  for (const child of nbdkits) child.kill();
  // The SR lives in the scratch directory: destroyed first, so the toolstack is not left with an SR whose directory is gone.
  if (otherSr !== undefined) await xapi("SR.destroy", otherSr).catch((error: unknown) => console.error(error));
  rmSync(scratch, { recursive: true, force: true });
});

async function volume(name: string, size = 64 * MiB): Promise<{ name: string; option: string }> {
  await xapi("VDI.create", { SR: defaultSr, virtual_size: size, name_label: name });
  return { name, option: `${name} · ${size / MiB} MiB` };
}

/** Opens the dialog and fills it; `target` is an NBD URI or "sr" for a new volume in the other SR. */
async function startFromDialog(page: Page, options: { option: string; operation: "Copy" | "Mirror"; target: string }) {
  await page.getByRole("button", { name: "Copy or mirror a volume" }).click();
  const dialog = page.getByRole("dialog", { name: "Copy or mirror a volume" });
  await expect(dialog).toBeVisible();
  await dialog.getByRole("combobox", { name: "Source SR" }).selectOption({ label: defaultSrOption });
  await dialog.getByRole("combobox", { name: "Volume", exact: true }).selectOption({ label: options.option });
  await dialog.getByRole("radio", { name: new RegExp(`^${options.operation}`) }).check();
  if (options.target === "sr") {
    await dialog.getByRole("radio", { name: "A new volume in another SR" }).check();
    await dialog.getByRole("combobox", { name: "Destination SR" }).selectOption({ label: `${otherSrName} (file)` });
  } else {
    await dialog.getByRole("radio", { name: "A remote NBD URI" }).check();
    await dialog.getByRole("textbox", { name: "NBD URI" }).fill(options.target);
  }
  await dialog.getByRole("button", { name: `Start ${options.operation.toLowerCase()}` }).click();
  await expect(dialog).toBeHidden();
}

const history = (page: Page) => page.getByRole("list", { name: "Finished tasks" });
const running = (page: Page) => page.getByRole("list", { name: "Running tasks" });

test("a Data.copy to an NBD export started from the page climbs to 100% and succeeds", async ({ page }) => {
  const disk = await volume(`e2e copy ${run}`);
  // Every write waits a little at the remote: the copy runs long enough to be watched.
  const remote = await nbdkit("slow", 300);
  await page.goto("/tasks");
  await startFromDialog(page, { option: disk.option, operation: "Copy", target: remote });

  const title = `Copy of volume “${disk.name}” to an NBD export`;
  const card = running(page).getByRole("listitem", { name: title });
  await expect(card).toBeVisible();
  await expect(card).toContainText("Just started");
  const bar = card.getByRole("progressbar", { name: `Progress of ${title}` });
  // Progress climbs while the page watches (the list is polled every second).
  await expect.poll(async () => Number((await bar.getAttribute("aria-valuenow", { timeout: 1_000 }).catch(() => "100")) ?? 0), { timeout: 60_000 }).toBeGreaterThan(0);
  if (await card.isVisible()) {
    await expect(card).toContainText(/\d+(\.\d)? [kMG]?B\/s/);
    await page.screenshot({ path: test.info().outputPath("tasks-running.png"), fullPage: true });
  }

  const done = history(page).getByRole("listitem", { name: title });
  await expect(done).toContainText("Succeeded", { timeout: 120_000 });
  await expect(done).toContainText("64 MiB");
  await expect(done).toContainText(/\d+(\.\d)? [kMG]?B\/s on average/);
  await page.screenshot({ path: test.info().outputPath("tasks.png"), fullPage: true });
});

test("a copy to a new volume in another SR, started from the page, succeeds", async ({ page }) => {
  const disk = await volume(`e2e copy to sr ${run}`, 32 * MiB);
  await page.goto("/tasks");
  await startFromDialog(page, { option: disk.option, operation: "Copy", target: "sr" });
  const done = history(page).getByRole("listitem", { name: `Copy of volume “${disk.name}” to another SR` });
  await expect(done).toContainText("Succeeded", { timeout: 120_000 });
  await expect(done).toContainText("Volume copy (Data.copy)");
});

test("a failed copy shows its reason in words; the history filter finds it", async ({ page }) => {
  const disk = await volume(`e2e failing ${run}`, 16 * MiB);
  await page.goto("/tasks");
  // A bad URI is refused in the dialog before anything starts.
  await page.getByRole("button", { name: "Copy or mirror a volume" }).click();
  const dialog = page.getByRole("dialog", { name: "Copy or mirror a volume" });
  await dialog.getByRole("textbox", { name: "NBD URI" }).fill("http://example.com/disk");
  await dialog.getByRole("button", { name: "Start copy" }).click();
  await expect(dialog.getByText("Not an NBD URI.")).toBeVisible();
  await dialog.getByRole("button", { name: "Close" }).click();

  await startFromDialog(page, { option: disk.option, operation: "Copy", target: `nbd+unix:///?socket=${join(scratch, "nobody-listens.sock")}` });
  const failed = history(page).getByRole("listitem", { name: `Copy of volume “${disk.name}” to an NBD export` });
  await expect(failed).toContainText("Failed", { timeout: 60_000 });
  await expect(failed).toContainText(/The storage plugin failed: .*nobody-listens\.sock/);
  await expect(failed).not.toContainText(/\bat \S+ \(/);

  // The filter: failed only, then text.
  await page.getByRole("combobox", { name: "Status" }).selectOption("failed");
  await expect(failed).toBeVisible();
  await expect(history(page).getByRole("listitem").filter({ hasText: "Succeeded" })).toHaveCount(0);
  await page.getByRole("searchbox", { name: "Search" }).fill(`failing ${run}`);
  await expect(history(page).getByRole("listitem")).toHaveCount(1);
  await page.getByRole("searchbox", { name: "Search" }).fill("no task is called this");
  await expect(page.getByRole("heading", { name: "No task matches" })).toBeVisible();
  await page.getByRole("combobox", { name: "Status" }).selectOption("all");
  await page.getByRole("searchbox", { name: "Search" }).fill("");

  // Removed from the history.
  await failed.getByRole("button", { name: `Remove Copy of volume “${disk.name}” to an NBD export from the history` }).click();
  await expect(failed).toHaveCount(0);
});

test("a mirror runs until it is cancelled from the page", async ({ page }) => {
  const disk = await volume(`e2e mirror ${run}`, 16 * MiB);
  const remote = await nbdkit("mirror");
  await page.goto("/tasks");
  await startFromDialog(page, { option: disk.option, operation: "Mirror", target: remote });
  const title = `Mirror of volume “${disk.name}” to an NBD export`;
  const card = running(page).getByRole("listitem", { name: title });
  await expect(card).toContainText("Mirroring");
  await expect(card).toContainText("runs until cancelled");
  await card.getByRole("button", { name: `Cancel ${title}` }).click();
  await expect(history(page).getByRole("listitem", { name: title })).toContainText("Cancelled", { timeout: 60_000 });
  await expect(card).toHaveCount(0);
});

test("a mirror into a volume of another SR runs until it is cancelled", async ({ page }) => {
  const disk = await volume(`e2e mirror source ${run}`, 16 * MiB);
  const targetName = `e2e mirror target ${run}`;
  await xapi("VDI.create", { SR: otherSr, virtual_size: 16 * MiB, name_label: targetName });
  await page.goto("/tasks");
  await page.getByRole("button", { name: "Copy or mirror a volume" }).click();
  const dialog = page.getByRole("dialog", { name: "Copy or mirror a volume" });
  await dialog.getByRole("combobox", { name: "Source SR" }).selectOption({ label: defaultSrOption });
  await dialog.getByRole("combobox", { name: "Volume", exact: true }).selectOption({ label: disk.option });
  await dialog.getByRole("radio", { name: /^Mirror/ }).check();
  await dialog.getByRole("radio", { name: "A volume in another SR" }).check();
  await dialog.getByRole("combobox", { name: "Destination SR" }).selectOption({ label: `${otherSrName} (file)` });
  await dialog.getByRole("combobox", { name: "Destination volume" }).selectOption({ label: `${targetName} · 16 MiB` });
  await dialog.getByRole("button", { name: "Start mirror" }).click();
  await expect(dialog).toBeHidden();
  const title = `Mirror of volume “${disk.name}” into volume “${targetName}”`;
  const card = running(page).getByRole("listitem", { name: title });
  await expect(card).toContainText("Mirroring");
  await card.getByRole("button", { name: `Cancel ${title}` }).click();
  await expect(history(page).getByRole("listitem", { name: title })).toContainText("Cancelled", { timeout: 60_000 });
});

test("the task list is polled every second while visible, and not at all while the tab is hidden", async ({ page }) => {
  let polls = 0;
  page.on("request", (request) => {
    if (request.url().includes("/api/trpc/") && request.url().includes("tasks.list")) polls++;
  });
  await page.goto("/tasks");
  await expect(page.getByRole("heading", { name: "History" })).toBeVisible();
  polls = 0;
  await page.waitForTimeout(3500);
  expect(polls).toBeGreaterThanOrEqual(2);

  // What the browser does when another tab comes to the front.
  await page.evaluate(() => {
    Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "hidden" });
    Object.defineProperty(document, "hidden", { configurable: true, get: () => true });
    document.dispatchEvent(new Event("visibilitychange"));
  });
  await page.waitForTimeout(500);
  polls = 0;
  await page.waitForTimeout(3500);
  expect(polls).toBe(0);

  await page.evaluate(() => {
    Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "visible" });
    Object.defineProperty(document, "hidden", { configurable: true, get: () => false });
    document.dispatchEvent(new Event("visibilitychange"));
  });
  await expect.poll(() => polls, { timeout: 5_000 }).toBeGreaterThan(0);
});
