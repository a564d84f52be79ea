// Private temp dirs and environment for one bench run, and the clean-up that leaves nothing behind: the
// processes the run started (directly, or detached by plugin calls) and every file it made. Each section
// works in a scratch space of its own, emptied when the section ends so that sizes do not add up.
import { randomUUID } from "node:crypto";
import { accessSync, constants, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stopTrackedProcesses } from "./processes.ts";
import { killPids, processesWithEnv } from "../server/stray-processes.ts";

export interface Scratch {
  /** Memory-backed when /dev/shm is usable: data whose transfer speed is measured, not the disk's. */
  readonly fast: string;
  /** On the disk of os.tmpdir(): where durability costs (fsync) are part of what is measured. */
  readonly disk: string;
  /** Registers clean-up work, run in reverse order when the section ends, before its files go. */
  defer(work: () => Promise<unknown> | unknown): void;
}

export interface Workspace {
  /** Runs `body` with a fresh scratch space, cleaned up and removed afterwards whatever happens. */
  withScratch<T>(name: string, body: (scratch: Scratch) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export function openWorkspace(prefix: string): Workspace {
  const diskRoot = mkdtempSync(join(tmpdir(), `${prefix}-`));
  const fastRoot = usable("/dev/shm") ? mkdtempSync(join("/dev/shm", `${prefix}-`)) : join(diskRoot, "fast");
  mkdirSync(fastRoot, { recursive: true });
  const runDir = join(diskRoot, "run");
  // Plugins and the daemons they start read these; children inherit them.
  process.env.HANGAR_DATA_DIR = join(diskRoot, "data");
  process.env.HANGAR_RUN_DIR = runDir;
  process.env.HANGAR_METRICS_DIR = join(diskRoot, "metrics");
  process.env.HANGAR_HOST_UUID = randomUUID();
  const marker = `HANGAR_RUN_DIR=${runDir}`;
  let closing: Promise<void> | null = null;

  const withScratch = async <T>(name: string, body: (scratch: Scratch) => Promise<T>): Promise<T> => {
    const fast = mkdtempSync(join(fastRoot, `${name}-`));
    const disk = mkdtempSync(join(diskRoot, `${name}-`));
    const deferred: Array<() => Promise<unknown> | unknown> = [];
    try {
      return await body({ fast, disk, defer: (work) => void deferred.push(work) });
    } finally {
      for (const work of deferred.reverse()) {
        try {
          await work();
        } catch (error) {
          process.stderr.write(`clean-up: ${(error as Error).message}\n`);
        }
      }
      rmSync(fast, { recursive: true, force: true });
      rmSync(disk, { recursive: true, force: true });
    }
  };

  const close = () =>
    (closing ??= (async () => {
      await stopTrackedProcesses();
      // Twice: a daemon being killed may have just started a helper of its own.
      for (let pass = 0; pass < 2; pass++) await killPids(processesWithEnv(marker));
      rmSync(fastRoot, { recursive: true, force: true });
      rmSync(diskRoot, { recursive: true, force: true });
    })());

  const interrupted = (signal: NodeJS.Signals) => {
    process.stderr.write(`\n${signal}: cleaning up\n`);
    void close().finally(() => process.exit(130));
  };
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);

  return { withScratch, close };
}

function usable(dir: string): boolean {
  try {
    accessSync(dir, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}
