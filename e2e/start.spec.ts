// `npm start` (scripts/start.ts, after the build this run made) with the toolstack on a port of the
// administrator's choosing: the console it starts logs in to that toolstack, not to the default :8080.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../server/free-port.ts";
import { killPids, processesWithEnv } from "../server/stray-processes.ts";
import { anonymousTest as test, expect } from "./fixtures.ts";

const repo = join(import.meta.dirname, "..");

test("npm start with HANGAR_TOOLSTACK_PORT: the console finds its toolstack there, and both stop together", async ({ page }) => {
  test.setTimeout(120_000);
  const dataDir = mkdtempSync(join(tmpdir(), "hangar-start-"));
  const [toolstackPort, consolePort] = [await freePort(), await freePort()];
  const password = "start-spec-password";
  const env = {
    ...process.env,
    HANGAR_DATA_DIR: dataDir,
    HANGAR_TOOLSTACK_PORT: String(toolstackPort),
    HANGAR_TOOLSTACK_HTTPS_PORT: "off",
    HANGAR_ROOT_PASSWORD: password,
    HANGAR_TOOLSTACK_URL: "",
    PORT: String(consolePort),
  };
  const child = spawn(join(repo, "node_modules/.bin/node"), [join(repo, "scripts/start.ts")], { cwd: repo, env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  try {
    await expect.poll(() => output, { timeout: 60_000 }).toMatch(/\[console\].*Ready/);
    expect(output).toContain(`[toolstack] toolstack listening: http://0.0.0.0:${toolstackPort}/`);

    await page.goto(`http://127.0.0.1:${consolePort}/login`);
    await page.getByLabel("User name").fill("root");
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Log in" }).click();
    await expect(page.getByRole("heading", { level: 1, name: "Dashboard" })).toBeVisible();
  } finally {
    child.kill("SIGTERM");
    const code = await exited;
    // The datasource daemons its SR's plugin started outlive it, as on a real host.
    await killPids(processesWithEnv(`HANGAR_DATA_DIR=${dataDir}`));
    rmSync(dataDir, { recursive: true, force: true });
    expect(code).toBe(0);
  }
});
