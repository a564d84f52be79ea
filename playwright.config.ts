import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineConfig } from "@playwright/test";

// Runs against the production build (`next build` happens before Playwright starts), in the machine's Debian
// Chromium: Playwright's own browsers are never downloaded here. A toolstack (`hangar serve`) over a fresh
// data dir, and two consoles on it: the main one on the bundled plugin root (server/plugins, Hangar's own
// plugins), one on the Python fixture plugin root for the Plugins page.
const repo = import.meta.dirname;
const port = 3107;
export const fixtureRootPort = 3108;
export const toolstackPort = 8107;
/** root's password on the test toolstack. */
export const E2E_PASSWORD = "hangar-e2e-password";
// Made once: workers load this file again, and inherit the environment of the run that made it.
process.env.HANGAR_E2E_DATA_DIR ??= mkdtempSync(join(tmpdir(), "hangar-e2e-"));
const dataDir = process.env.HANGAR_E2E_DATA_DIR;
const toolstackUrl = `http://127.0.0.1:${toolstackPort}`;
// `next` runs on whichever node is first on PATH: make that the pinned Node 24.
const PATH = `${join(repo, "node_modules/.bin")}:${process.env.PATH ?? ""}`;

export default defineConfig({
  testDir: "./e2e",
  // Stops what the toolstack's plugins left running (datasource daemons) and removes the data dir.
  globalTeardown: "./e2e/global-teardown.ts",
  reporter: "list",
  retries: 0,
  workers: 1,
  // A backstop: a run that hangs fails in words within this, instead of holding CI until it is killed.
  globalTimeout: 20 * 60_000,
  forbidOnly: Boolean(process.env.CI),
  use: {
    baseURL: `http://127.0.0.1:${port}`,
    browserName: "chromium",
    launchOptions: {
      executablePath: "/usr/bin/chromium",
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
      ],
    },
    trace: "retain-on-failure",
  },
  webServer: [
    {
      command: `bin/hangar serve --address 127.0.0.1 --port ${toolstackPort} --https-port off`,
      port: toolstackPort,
      reuseExistingServer: false,
      timeout: 60_000,
      env: { HANGAR_PLUGIN_ROOT: "", HANGAR_DATA_DIR: dataDir, HANGAR_ROOT_PASSWORD: E2E_PASSWORD, PATH },
    },
    {
      command: `bin/hangar-console -H 127.0.0.1 -p ${port}`,
      url: `http://127.0.0.1:${port}/login`,
      reuseExistingServer: false,
      timeout: 60_000,
      env: { HANGAR_PLUGIN_ROOT: "", HANGAR_DATA_DIR: dataDir, HANGAR_TOOLSTACK_URL: toolstackUrl, PATH },
    },
    {
      command: `bin/hangar-console -H 127.0.0.1 -p ${fixtureRootPort}`,
      url: `http://127.0.0.1:${fixtureRootPort}/login`,
      reuseExistingServer: false,
      timeout: 60_000,
      env: { HANGAR_PLUGIN_ROOT: join(repo, "server/storage/fixtures/python-root"), HANGAR_DATA_DIR: dataDir, HANGAR_TOOLSTACK_URL: toolstackUrl, PATH },
    },
  ],
});
