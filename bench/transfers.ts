// The transfers suite (`npm run bench -- transfers`): VM export downloaded through the console against curl
// of the toolstack's /export (target ≥ 0.9×), and a VM archive uploaded from Chromium through the console
// against curl -T to /import (target ≥ 0.7×, its tail after the last byte ≤ 10% of the upload), with the
// console's RSS; and an OVA (a VMDK converted as it arrives) the same way, against `hangar vm-import` of the file
// (its tail ≤ 10% of the upload). The toolstack and the console's production build run in processes of their own over a data
// dir of the run. HANGAR_BENCH_SCALE scales the 2 GiB disk; HANGAR_BENCH_RUNS the runs (default 3);
// HANGAR_BENCH_PARTS picks some of the parts (export,upload,ova; all by default).
import { join } from "node:path";
import { startConsole } from "./console/console-service.ts";
import { GiB, positiveEnv } from "./measure.ts";
import { renderTable, type Row, unavailableRow } from "./table.ts";
import { startBenchService } from "./toolstack/service.ts";
import { benchExportDownload } from "./transfers/export.ts";
import { benchOvaUpload } from "./transfers/ova-upload.ts";
import { benchUploadImport } from "./transfers/upload.ts";
import { openWorkspace } from "./workspace.ts";

export async function run(): Promise<void> {
  const size = Math.max(64 * 1024 * 1024, Math.round((2 * GiB * positiveEnv("HANGAR_BENCH_SCALE", 1)) / (1024 * 1024)) * 1024 * 1024);
  const runs = Math.max(1, Math.round(positiveEnv("HANGAR_BENCH_RUNS", 3)));
  const parts = new Set((process.env.HANGAR_BENCH_PARTS || "export,upload,ova").split(","));
  const workspace = openWorkspace("hangar-bench-transfers");
  const started = Date.now();
  const rows: Row[] = [];
  try {
    await workspace.withScratch("transfers", async (scratch) => {
      const service = await startBenchService(join(scratch.disk, "data"));
      scratch.defer(() => service.stop());
      const site = await startConsole(service.url);
      scratch.defer(() => site.stop());
      const part = async (name: string, label: string, target: string, measure: () => Promise<Row[]>) => {
        if (!parts.has(name)) return;
        process.stderr.write(`[bench transfers] ${label}...\n`);
        try {
          rows.push(...(await measure()));
        } catch (error) {
          process.stderr.write(`[bench transfers] ${label} failed: ${(error as Error).stack}\n`);
          rows.push({ ...unavailableRow(label, target, (error as Error).message), ours: "FAILED" });
        }
      };
      await part("export", "export download through the console", "≥ 0.9×", () => benchExportDownload(service, site, size, runs));
      await part("upload", "VM import uploaded from Chromium through the console", "≥ 0.7×", () => benchUploadImport(service, site, size, runs, scratch.disk));
      await part("ova", "OVA import uploaded from Chromium through the console", "≤ 10% tail", () => benchOvaUpload(service, site, size, runs, scratch.disk));
    });
  } finally {
    await workspace.close();
  }
  process.stdout.write(`${renderTable(`Hangar transfers bench — ${runs} runs, ${((Date.now() - started) / 1000).toFixed(0)} s in all`, rows)}\n`);
  if (rows.some((row) => row.ours === "FAILED")) process.exitCode = 1;
}
