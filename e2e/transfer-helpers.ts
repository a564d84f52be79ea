// What the VM import specs share: generated XVAs, a real drop on the VMs page's drop zone, an upload's
// progress as the page shows it, and the disk bytes of the imported VM read back through the toolstack's
// own /export.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { test, type Page } from "@playwright/test";
import { z } from "zod";
import { toolstackPort } from "../playwright.config.ts";
import { collect, http, MiB, patternBlock, testXva, type TestDisk } from "../server/toolstack/transfer/testing.ts";
import type { XenApiClient } from "../server/xenapi/client.ts";
import { openXva } from "../server/xva/reader.ts";
import { expect } from "./fixtures.ts";

export const toolstackUrl = `http://127.0.0.1:${toolstackPort}`;
/** The consoles' tus spool (and each upload's `.import-state`), in the run's shared data dir. */
export const spoolDir = () => join(process.env.HANGAR_E2E_DATA_DIR ?? "", "transfers", "uploads");

/** A disk with `blocks` MiB of data spread over twice that size (the rest holes). */
export function disk(blocks: number, seed: number): TestDisk {
  const map = new Map<number, Buffer>();
  for (let i = 0; i < blocks; i++) map.set(i * 2, patternBlock(seed + i));
  return { size: blocks * 2 * MiB, blocks: map };
}

export async function writeArchive(name: string, vmName: string, d: TestDisk): Promise<string> {
  const file = test.info().outputPath(name);
  await writeFile(file, await collect(testXva({ name: vmName, disks: [d] })));
  return file;
}

/** Drops `file` (or several together) on the drop zone: the Files come from a scratch input, the drop is a real DragEvent with a DataTransfer. */
export async function dropFile(page: Page, file: string | string[]): Promise<void> {
  await page.evaluate(() => {
    document.getElementById("e2e-scratch-file")?.remove();
    const input = document.createElement("input");
    input.type = "file";
    input.id = "e2e-scratch-file";
    input.hidden = true;
    input.multiple = true;
    document.body.append(input);
  });
  await page.setInputFiles("#e2e-scratch-file", file);
  const dataTransfer = await page.evaluateHandle(() => {
    const transfer = new DataTransfer();
    for (const dropped of (document.getElementById("e2e-scratch-file") as HTMLInputElement).files!) transfer.items.add(dropped);
    return transfer;
  });
  const zone = page.getByRole("group", { name: "Drop VM files here" });
  await zone.dispatchEvent("dragover", { dataTransfer });
  await zone.dispatchEvent("drop", { dataTransfer });
}

export async function progressOf(page: Page, fileName: string): Promise<number> {
  return Number((await page.getByRole("progressbar", { name: `Upload of ${fileName}` }).getAttribute("aria-valuenow")) ?? "0");
}

/** Every data block of the VM's disk, read from the toolstack's export, equals the disk's; the rest are zeros. */
export async function expectDiskBytes(xapi: XenApiClient, vmName: string, expected: TestDisk): Promise<void> {
  const [vm] = await xapi.call(z.array(z.string()), "VM.get_by_name_label", vmName);
  expect(vm).toBeDefined();
  const uuid = await xapi.call(z.string(), "VM.get_uuid", vm);
  const answer = await http(`${toolstackUrl}/export?session_id=${xapi.session}&uuid=${uuid}`);
  expect(answer.status).toBe(200);
  const archive = await openXva(Readable.from([answer.body]));
  const sizes = new Map(archive.metadata.objects.filter((o) => o.class === "VDI").map((o) => [o.id, Number(o.snapshot.virtual_size ?? 0)]));
  let disks = 0;
  for await (const d of archive.disks(sizes)) {
    if (sizes.get(d.ref) !== expected.size) {
      for await (const _ of d.blocks) void _;
      continue;
    }
    disks++;
    const seen = new Set<number>();
    for await (const block of d.blocks) {
      const index = block.offset / MiB;
      const want = expected.blocks.get(index);
      if (want === undefined) expect(block.data.every((b) => b === 0), `block ${index} is zeros`).toBe(true);
      else expect(block.data.equals(want), `block ${index}`).toBe(true);
      seen.add(index);
    }
    for (const index of expected.blocks.keys()) expect(seen.has(index), `block ${index} present`).toBe(true);
  }
  expect(disks).toBe(1);
}
