// How fast Chromium itself uploads on this machine: the same file, through the same tus-js-client and 8 MiB
// PATCHes the console's page uses, into a bare Node server that counts the bytes and drops them (no Next, no
// spool, no import). What it reaches is the most any console could, so the upload row's ratio reads against it.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { Browser } from "@playwright/test";
import { cpuSeconds } from "../processes.ts";
import { treeCpuSeconds } from "./process-tree.ts";

const TIMEOUT_MS = 30 * 60_000;
const SINK = join(import.meta.dirname, "upload-sink.ts");

/** The sink (upload-sink.ts) started: its URL, its CPU so far, and a stop. */
async function sink(): Promise<{ url: string; cpu: () => number; close: () => void }> {
  // The console's V8 settings, as HANGAR_V8_FLAGS in bin/node24.sh gives them to its launchers.
  const child = spawn(process.execPath, ["--max-semi-space-size=1", "--heap-growing-percent=100", SINK], { stdio: ["ignore", "pipe", "inherit"] });
  const [url] = await Promise.race([
    once(createInterface({ input: child.stdout }), "line") as Promise<[string]>,
    new Promise<never>((_, reject) => child.once("exit", (code) => reject(new Error(`the upload sink exited (code ${code})`)))),
  ]);
  return { url, cpu: () => cpuSeconds(child.pid!), close: () => child.kill() };
}

export interface CeilingRun {
  seconds: number;
  /** Chromium's CPU seconds (its process tree) during the upload. */
  chromiumCpu: number;
  /** The sink's CPU seconds meanwhile. */
  sinkCpu: number;
}

/** One upload of `file` from a fresh context of `browser` into the sink, timed from the choice to the last PATCH answered. */
export async function browserCeiling(browser: Browser, chromiumPid: number, file: string): Promise<CeilingRun> {
  const server = await sink();
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(server.url);
    const chromium = () => treeCpuSeconds(chromiumPid);
    const cpu0 = chromium();
    const sink0 = server.cpu();
    const started = performance.now();
    await page.getByLabel("file").setInputFiles(file);
    await page.waitForFunction(() => document.title !== "ready", undefined, { timeout: TIMEOUT_MS, polling: 100 });
    const seconds = (performance.now() - started) / 1000;
    const title = await page.title();
    if (title !== "done") throw new Error(`the bare upload failed: ${title}`);
    return { seconds, chromiumCpu: chromium() - cpu0, sinkCpu: server.cpu() - sink0 };
  } finally {
    await context.close();
    server.close();
  }
}
