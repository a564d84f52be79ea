import { join } from "node:path";
import { defineConfig } from "@playwright/test";

// Runs against the production build (`next build` happens before Playwright starts) with the Python fixture
// plugin root, in the machine's Debian Chromium: Playwright's own browsers are never downloaded here.
const repo = import.meta.dirname;
const port = 3107;

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
  webServer: {
    command: `node_modules/.bin/next start -H 127.0.0.1 -p ${port}`,
    url: `http://127.0.0.1:${port}`,
    reuseExistingServer: false,
    timeout: 60_000,
    env: {
      HANGAR_PLUGIN_ROOT: join(repo, "server/storage/fixtures/python-root"),
      // `next` runs on whichever node is first on PATH: make that the pinned Node 24.
      PATH: `${join(repo, "node_modules/.bin")}:${process.env.PATH ?? ""}`,
    },
  },
});
