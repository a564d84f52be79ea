import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineConfig } from "@playwright/test";

// Runs against the production build (`next build` happens before Playwright starts), in the machine's Debian
// Chromium: Playwright's own browsers are never downloaded here. Two servers: one on the Python fixture
// plugin root, one on the bundled root (server/plugins, Hangar's own plugins).
const repo = import.meta.dirname;
const port = 3107;
export const bundledRootPort = 3108;
// `next` runs on whichever node is first on PATH: make that the pinned Node 24.
const PATH = `${join(repo, "node_modules/.bin")}:${process.env.PATH ?? ""}`;

export default defineConfig({
  testDir: "./e2e",
  reporter: "list",
  retries: 0,
  workers: 1,
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
      command: `node_modules/.bin/next start -H 127.0.0.1 -p ${port}`,
      url: `http://127.0.0.1:${port}`,
      reuseExistingServer: false,
      timeout: 60_000,
      env: { HANGAR_PLUGIN_ROOT: join(repo, "server/storage/fixtures/python-root"), PATH },
    },
    {
      command: `node_modules/.bin/next start -H 127.0.0.1 -p ${bundledRootPort}`,
      url: `http://127.0.0.1:${bundledRootPort}`,
      reuseExistingServer: false,
      timeout: 60_000,
      env: { HANGAR_PLUGIN_ROOT: "", HANGAR_DATA_DIR: mkdtempSync(join(tmpdir(), "hangar-e2e-")), PATH },
    },
  ],
});
