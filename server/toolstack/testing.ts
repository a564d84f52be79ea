// Toolstacks for tests: each on a fresh data dir, closed and its files removed when the test ends.
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import { type RunningToolstack, type ServeOptions, serveToolstack } from "./serve.ts";
import { type Feature, openToolstack, type Toolstack, type ToolstackOptions } from "./toolstack.ts";

export const ROOT_PASSWORD = "hangar-test-password";

/** A new temp dir for a toolstack's data; the caller removes it. */
export async function tempDataDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "hangar-toolstack-"));
  // The host uuid comes from the environment or the default data dir, never options.dataDir: keep tests off the latter.
  process.env.HANGAR_HOST_UUID ??= randomUUID();
  return dir;
}

export async function openTestToolstack(t: TestContext, options: ToolstackOptions = {}, features: Feature[] = []): Promise<Toolstack> {
  const dir = await tempDataDir();
  const ts = await openToolstack({ dataDir: dir, rootPassword: ROOT_PASSWORD, ...options }, features);
  t.after(async () => {
    await ts.close();
    await rm(dir, { recursive: true, force: true });
  });
  return ts;
}

/** The toolstack served on 127.0.0.1 (HTTP only, a free port); `url` ends in "/". */
export async function serveTestToolstack(t: TestContext, options: Partial<ServeOptions> = {}): Promise<RunningToolstack & { url: string }> {
  const dir = await tempDataDir();
  const running = await serveToolstack({ port: 0, httpsPort: null, address: "127.0.0.1", dataDir: dir, rootPassword: ROOT_PASSWORD, ...options });
  t.after(async () => {
    await running.close();
    await rm(dir, { recursive: true, force: true });
  });
  return { ...running, url: `http://127.0.0.1:${running.httpPort}/` };
}
