// The transfers as a client makes them: curl against /export and /import (following a pool master's
// redirects, -L), in a task the bench creates first (task_id=…), timed from curl's start to the task's
// success; and the set-up import streamed from Node.
import { request as httpRequest } from "node:http";
import type { Readable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { taskResult } from "../../server/xenapi/client.ts";
import { timeSeconds } from "../measure.ts";
import { runCommand } from "../processes.ts";
import { type Cost, meterService, type XvaService } from "./service.ts";

export type Compression = "none" | "gzip" | "zstd";

export interface Transfer {
  seconds: number;
  cost: Cost;
  /** Refs of the VMs an import made. */
  vms: string[];
  /** The task's result: what an import made (a disk import's VDI). */
  result: unknown;
}

const TIMEOUT_MS = 15 * 60_000;

/** Runs `send` (which passes `task` to the service) and waits for the task; fails unless it succeeded. */
async function inTask(service: XvaService, label: string, send: (task: string) => Promise<unknown>): Promise<Transfer> {
  const task = await service.client.call(z.string(), "task.create", label, "hangar bench");
  const stop = meterService(service);
  let record: Awaited<ReturnType<typeof service.client.waitTask>> | undefined;
  let cost: Cost | undefined;
  const seconds = await timeSeconds(async () => {
    try {
      await send(task);
    } catch (error) {
      // The service may never have seen the request: cancel the task so that waiting for it ends.
      await service.client.call(z.unknown(), "task.cancel", task).catch(() => undefined);
      await Promise.race([service.client.waitTask(task), sleep(60_000)]);
      stop();
      throw error;
    }
    record = await service.client.waitTask(task);
    cost = stop();
  });
  if (record!.status !== "success") throw new Error(`${label}: task ${record!.status}: ${record!.error_info.join(" ")}`);
  const result = taskResult(record!);
  const vms = Array.isArray(result) ? result.map(String) : [];
  await service.client.call(z.unknown(), "task.destroy", task).catch(() => undefined);
  return { seconds, cost: cost!, vms, result };
}

/** `<url><path>?session_id=…&task_id=…<extra>` (extra: `&name=value…`); imports go to the service's SR if it names one. */
function query(service: XvaService, task: string, path: string, extra = ""): string {
  const sr = path === "import" && service.importSr !== undefined ? `&sr_id=${service.importSr}` : "";
  return `${service.url}${path}?session_id=${service.client.session}&task_id=${task}${sr}${extra}`;
}

/** GET /export of the VM into `output` (/dev/null for the timed rows). */
export function exportVm(service: XvaService, vm: string, compression: Compression, output = "/dev/null"): Promise<Transfer> {
  const use = compression === "none" ? "" : `&use_compression=${compression}`;
  return inTask(service, `bench export ${compression}`, (task) =>
    runCommand("curl", ["-sS", "-f", "-L", "-o", output, query(service, task, "export", `&ref=${vm}${use}`)], { timeoutMs: TIMEOUT_MS }),
  );
}

/** PUT /import of a saved archive (curl -T: its length is known). */
export function importFile(service: XvaService, path: string): Promise<Transfer> {
  return inTask(service, `bench import ${path}`, (task) =>
    runCommand("curl", ["-sS", "-f", "-L", "-o", "/dev/null", "-T", path, query(service, task, "import")], { timeoutMs: TIMEOUT_MS }),
  );
}

/** PUT /import of an archive made on the fly (chunked). */
export function importStream(service: XvaService, archive: Readable): Promise<Transfer> {
  return inTask(service, "bench import (set-up)", (task) =>
    new Promise<void>((resolve, reject) => {
      const request = httpRequest(query(service, task, "import"), { method: "PUT" }, (response) => {
        response.resume();
        response.once("end", () => (response.statusCode === 200 ? resolve() : reject(new Error(`PUT /import: HTTP ${response.statusCode}`))));
        response.once("error", reject);
      });
      request.once("error", reject);
      archive.once("error", (error) => {
        request.destroy(error);
        reject(error);
      });
      archive.pipe(request);
    }),
  );
}

/** PUT /import_raw_vdi of a disk image into a new VDI on `sr` (curl -T: its length is known). */
export function importDiskFile(service: XvaService, path: string, format: string, sr: string): Promise<Transfer> {
  return inTask(service, `bench disk import ${format}`, (task) =>
    runCommand("curl", ["-sS", "-f", "-L", "-o", "/dev/null", "-T", path, query(service, task, "import_raw_vdi", `&sr_id=${sr}&format=${format}`)], { timeoutMs: TIMEOUT_MS }),
  );
}

/** GET /export_raw_vdi of a VDI in `format` into `output`. */
export function exportDiskFile(service: XvaService, vdi: string, format: string, output: string): Promise<Transfer> {
  return inTask(service, `bench disk export ${format}`, (task) =>
    runCommand("curl", ["-sS", "-f", "-L", "-o", output, query(service, task, "export_raw_vdi", `&vdi=${vdi}&format=${format}`)], { timeoutMs: TIMEOUT_MS }),
  );
}

/** Destroys a VM made by an import and its disks. */
export async function destroyVm(service: XvaService, vm: string): Promise<void> {
  await service.client.call(z.unknown(), "VM.hangar_destroy", vm, false);
}
