// The console restarted mid-upload, in Chromium. Playwright's own consoles cannot be restarted from a test, so
// this spec runs one of its own (same build, same data dir and toolstack): a dropped XVA is uploading when that
// console is stopped; the page keeps waiting without a failure; the console is started again on the same
// port; the browser's upload retries by itself, resumes where the console's copy ends, the console imports
// again from its spool, and the VM's disk bytes are identical.
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createWriteStream } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { MiB } from "../server/toolstack/transfer/testing.ts";
import { XenApiClient, zTaskRecord } from "../server/xenapi/client.ts";
import { anonymousTest as test, E2E_PASSWORD, expect, logIn } from "./fixtures.ts";
import { disk, dropFile, expectDiskBytes, progressOf, spoolDir, toolstackUrl, writeArchive } from "./transfer-helpers.ts";

const repo = join(import.meta.dirname, "..");
const port = 3109;
const baseURL = `http://127.0.0.1:${port}`;
const fileName = "restart.xva";
/** tus-js-client's chunk: one PATCH (components/transfers/upload-job.ts). */
const CHUNK = 8 * MiB;

test.use({ baseURL });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let consoleProcess: ChildProcess | undefined;

/** Starts this spec's console as playwright.config.ts starts the main one, and waits until it answers. */
async function startConsole(logName: string): Promise<void> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HANGAR_PLUGIN_ROOT: "",
    HANGAR_DATA_DIR: process.env.HANGAR_E2E_DATA_DIR,
    HANGAR_TOOLSTACK_URL: toolstackUrl,
    // `next` runs on whichever node is first on PATH: the pinned Node 24.
    PATH: `${join(repo, "node_modules/.bin")}:${process.env.PATH ?? ""}`,
  };
  // Its own process group, so that stopping it stops whatever it started too.
  const child = spawn(join(repo, "bin/hangar-console"), ["-H", "127.0.0.1", "-p", String(port)], { cwd: repo, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  consoleProcess = child;
  const log = createWriteStream(test.info().outputPath(logName));
  child.stdout!.pipe(log);
  child.stderr!.pipe(log);
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the console on :${port} exited (${child.exitCode ?? child.signalCode}); see ${logName}`);
    const answered = await fetch(`${baseURL}/login`, { signal: AbortSignal.timeout(5000) }).then((r) => r.ok, () => false);
    if (answered) return;
    if (Date.now() > deadline) throw new Error(`the console on :${port} did not answer /login within 90 s; see ${logName}`);
    await sleep(250);
  }
}

/**
 * SIGKILL to the console's process group, as a crash or a power cut: on SIGTERM, Next waits for the PATCH in
 * flight, which would stop the upload only between two chunks.
 */
async function stopConsole(): Promise<void> {
  const child = consoleProcess;
  consoleProcess = undefined;
  if (child?.pid === undefined) return;
  const exited = child.exitCode === null && child.signalCode === null ? once(child, "exit") : undefined;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    // The whole group is gone already.
  }
  await exited;
}

test.afterAll(stopConsole);

/** Once the console has written the first bytes of the PATCH that starts at `offset` (or 2 s have passed). */
async function spoolGrownPast(id: string, offset: number): Promise<void> {
  for (const deadline = Date.now() + 2000; Date.now() < deadline; await sleep(2)) {
    if ((await stat(join(spoolDir(), id)).then((s) => s.size, () => 0)) > offset) return;
  }
}

test("the console restarted mid-upload: the upload resumes by itself and the import completes with identical disk bytes", async ({ page }) => {
  test.setTimeout(180_000);
  await startConsole("console-before-restart.log");
  const xapi = await XenApiClient.login(toolstackUrl, "root", E2E_PASSWORD, "hangar-e2e");
  const vmName = `e2e-import-restart-${Date.now()}`;
  const d = disk(64, 900);
  const file = await writeArchive(fileName, vmName, d);
  // Every PATCH the browser sends, with the offset it starts at; slowed, so that the middle of the upload can be seen.
  const patches: { id: string; offset: number }[] = [];
  let patchSent: (() => void) | undefined;
  await page.route("**/api/upload/**", async (route) => {
    const request = route.request();
    if (request.method() !== "PATCH") return route.continue();
    const patch = { id: request.url().split("/").pop()!, offset: Number(request.headers()["upload-offset"]) };
    patches.push(patch);
    await sleep(700);
    await route.continue();
    if (patchSent !== undefined) void spoolGrownPast(patch.id, patch.offset).then(patchSent);
  });
  // Uploads at 16 MiB/s: a chunk takes half a second to arrive, so the console can be stopped in its middle.
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Network.enable");
  await cdp.send("Network.emulateNetworkConditions", { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: 16 * MiB });
  await logIn(page);
  await page.goto("/vms");
  await expect(page.getByRole("combobox", { name: "Import into SR" })).toHaveValue(/OpaqueRef:/);
  await dropFile(page, file);
  const row = page.getByRole("listitem", { name: fileName });
  await expect.poll(() => progressOf(page, fileName), { timeout: 60_000 }).toBeGreaterThan(15);
  expect(await progressOf(page, fileName)).toBeLessThan(100);

  // Stopped while a PATCH is on its way: a chunk cut short, not only a pause between chunks.
  await new Promise<void>((resolve) => (patchSent = resolve));
  const stoppedAt = Date.now();
  await stopConsole();
  const sentBefore = patches.length;
  const id = patches[0]!.id;
  // What the console had received when it went away: the resume must start there.
  const kept = (await stat(join(spoolDir(), id))).size;
  expect(kept % CHUNK, `stopped in the middle of a chunk (at byte ${kept})`).toBeGreaterThan(0);
  // While the console is away the upload says it retries: no failure, no Retry button, no progress.
  await sleep(3000);
  const waiting = await progressOf(page, fileName);
  await expect(row.getByRole("alert")).toHaveCount(0);
  await expect(row.getByRole("status")).toContainText("The console cannot be reached: retrying");
  await expect(row.getByRole("button", { name: `Retry ${fileName}` })).toHaveCount(0);
  await page.screenshot({ path: test.info().outputPath("console-away.png"), fullPage: true });
  expect(await progressOf(page, fileName)).toBe(waiting);

  await startConsole("console-after-restart.log");
  const restartedAt = Date.now();
  // No click: the browser's own retries find the console again and continue from the console's copy.
  await expect.poll(() => patches.length, { timeout: 60_000 }).toBeGreaterThan(sentBefore);
  const resumedAt = Date.now();
  expect(patches[sentBefore]).toEqual({ id, offset: kept });
  console.log(`console away ${((restartedAt - stoppedAt) / 1000).toFixed(1)} s; upload resumed ${((resumedAt - restartedAt) / 1000).toFixed(1)} s after it answered, at byte ${kept} (${kept % CHUNK} into a chunk)`);
  await expect(row.getByRole("status")).toContainText("Imported", { timeout: 120_000 });
  // The VM list is virtualized: the filter brings the VM among the rows in view.
  await page.getByRole("searchbox", { name: "Filter VMs by name" }).fill(vmName);
  await expect(page.getByRole("link", { name: vmName, exact: true })).toBeVisible({ timeout: 10_000 });
  await page.screenshot({ path: test.info().outputPath("console-restart-done.png"), fullPage: true });

  // The restarted console imported again from its spool; the import cut short by the stop was undone.
  const state = z.object({ status: z.string(), attempts: z.number() }).parse(JSON.parse(await readFile(join(spoolDir(), `${id}.import-state`), "utf8")));
  expect(state.status).toBe("done");
  expect(state.attempts).toBeGreaterThanOrEqual(2);
  const tasks = Object.values(await xapi.records("task", zTaskRecord)).filter((t) => t.name_label === `VM import: ${fileName}`);
  expect(tasks.map((t) => t.status)).not.toContain("pending");
  expect(tasks.filter((t) => t.status === "success")).toHaveLength(1);
  expect(await xapi.call(z.array(z.string()), "VM.get_by_name_label", vmName)).toHaveLength(1);
  await expectDiskBytes(xapi, vmName, d);
});
