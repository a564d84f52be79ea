// VMs from anywhere on the VMs page, in Chromium: an OVA made as VMware's tools make one (an OVF descriptor, a
// streamOptimized VMDK written by Debian's qemu-img, a SHA-256 manifest) dropped, the page reloaded mid-upload
// and the file dropped again, the VM's disk read back through /export_raw_vdi and compared by qemu-img with the
// source; an OVF dropped with its files; a qcow2 dropped as a disk alone; an OVA whose manifest lies refused with
// nothing left; the VM exported as an OVA from its Export dialog, its VMDK compared by qemu-img with the VM's
// disk and its OVF read back by Hangar's own importer into the same VM.
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { readOvf } from "../server/ova/descriptor.ts";
import { writeOvf } from "../server/ova/descriptor-writer.ts";
import { manifestOf, tarOf, virtualBoxOvf } from "../server/ova/testing.ts";
import { http, MiB } from "../server/toolstack/transfer/testing.ts";
import { XenApiClient } from "../server/xenapi/client.ts";
import { E2E_PASSWORD, expect, test } from "./fixtures.ts";
import { dropFile, progressOf, toolstackUrl } from "./transfer-helpers.ts";

test.describe.configure({ mode: "serial" });

/** A raw disk of `mib` MiB, every other MiB random (a VMDK's deflate cannot shrink it), written to the test's output. */
async function rawDisk(name: string, mib: number): Promise<{ path: string; bytes: Buffer }> {
  const bytes = Buffer.alloc(mib * MiB);
  for (let i = 0; i < mib; i += 2) randomBytes(MiB).copy(bytes, i * MiB);
  const path = test.info().outputPath(`${name}.raw`);
  await writeFile(path, bytes);
  return { path, bytes };
}

/** `raw` converted by qemu-img (`format`, with `options`); the image's path. */
function convert(raw: string, format: string, options: string[] = []): string {
  const image = raw.replace(/\.raw$/, `.${format}`);
  execFileSync("qemu-img", ["convert", "-f", "raw", "-O", format, ...options, raw, image]);
  return image;
}

const vmdkOf = (raw: string) => convert(raw, "vmdk", ["-o", "subformat=streamOptimized"]);

/** An OVF of Hangar's writer (VMware's dialect) for one disk of `capacity` bytes in `href`. */
function ovfFor(name: string, href: string, capacity: number): Buffer {
  return Buffer.from(writeOvf({ name, description: "made by the e2e test", memory: 768 * MiB, vcpus: 2, firmware: "uefi", secureBoot: false, os: { id: 96, type: "debian10_64Guest", description: "Debian" }, drives: [{ kind: "disk", href, capacity, name: "Hard Disk 1" }, { kind: "cd", name: "CD 1" }], nics: [{ network: "VM Network", mac: "00:50:56:12:34:56" }] }));
}

/** The OVA of one VM: ovf, mf, vmdk as VMware orders them; `badDigest` makes the manifest lie about the disk. */
async function writeOva(file: string, vmName: string, raw: { path: string; bytes: Buffer }, options: { badDigest?: boolean } = {}): Promise<string> {
  const vmdk = await readFile(vmdkOf(raw.path));
  const ovf = ovfFor(vmName, "disk1.vmdk", raw.bytes.length);
  const listed: Array<[string, Buffer]> = [["vm.ovf", ovf], ["disk1.vmdk", options.badDigest === true ? Buffer.from("other bytes") : vmdk]];
  const path = test.info().outputPath(file);
  await writeFile(path, await tarOf([["vm.ovf", ovf], ["vm.mf", manifestOf(listed)], ["disk1.vmdk", vmdk]]));
  return path;
}

async function login(): Promise<XenApiClient> {
  return XenApiClient.login(toolstackUrl, "root", E2E_PASSWORD, "hangar-e2e");
}

/** The VM's first disk read back through the toolstack's /export_raw_vdi (raw), compared by qemu-img with `source`. */
async function expectSameDisk(xapi: XenApiClient, vmName: string, source: string): Promise<void> {
  const [vm] = await xapi.call(z.array(z.string()), "VM.get_by_name_label", vmName);
  expect(vm, `a VM named ${vmName}`).toBeDefined();
  const vbds = await xapi.call(z.array(z.string()), "VM.get_VBDs", vm);
  const types = await Promise.all(vbds.map((vbd) => xapi.call(z.string(), "VBD.get_type", vbd)));
  const vdi = await xapi.call(z.string(), "VBD.get_VDI", vbds[types.indexOf("Disk")]);
  await expectSameVdi(xapi, vdi, source);
}

async function expectSameVdi(xapi: XenApiClient, vdi: string, source: string): Promise<void> {
  const uuid = await xapi.call(z.string(), "VDI.get_uuid", vdi);
  const answer = await http(`${toolstackUrl}/export_raw_vdi?session_id=${xapi.session}&vdi=${uuid}&format=raw`);
  expect(answer.status).toBe(200);
  const exported = test.info().outputPath(`${uuid}.raw`);
  await writeFile(exported, answer.body);
  expect(execFileSync("qemu-img", ["compare", "-f", "raw", "-F", "raw", exported, source]).toString()).toMatch(/Images are identical/);
}

const counts = async (xapi: XenApiClient) => ({ vms: (await xapi.call(z.array(z.string()), "VM.get_all")).length, vdis: (await xapi.call(z.array(z.string()), "VDI.get_all")).length });

test("a dropped OVA imports while it uploads; a reload mid-upload resumes it; its disk reads back the same", async ({ page }) => {
  test.setTimeout(240_000);
  const xapi = await login();
  const vmName = `e2e-ova-${Date.now()}`;
  const raw = await rawDisk("ova-source", 96);
  const file = await writeOva("appliance.ova", vmName, raw);
  page.on("dialog", (dialog) => void dialog.accept());
  await page.route("**/api/upload/**", async (route) => {
    if (route.request().method() === "PATCH") await new Promise((r) => setTimeout(r, 800));
    await route.continue();
  });
  await page.goto("/vms");
  await expect(page.getByRole("combobox", { name: "Import into SR" })).toHaveValue(/OpaqueRef:/);
  await dropFile(page, file);
  const row = page.getByRole("listitem", { name: "appliance.ova" });
  await expect(row.getByRole("status")).toContainText(/Uploading and importing|Uploading/);
  await expect.poll(() => progressOf(page, "appliance.ova"), { timeout: 60_000 }).toBeGreaterThan(20);
  expect(await progressOf(page, "appliance.ova")).toBeLessThan(100);
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.screenshot({ path: test.info().outputPath("ova-import-uploading.png"), fullPage: true });

  await page.reload();
  await expect(page.getByText(/appliance\.ova.*drop or choose the same file again to resume/)).toBeVisible();
  await dropFile(page, file);
  await expect.poll(() => progressOf(page, "appliance.ova"), { timeout: 10_000 }).toBeGreaterThan(20);
  await expect(row.getByRole("status")).toContainText("Imported", { timeout: 180_000 });
  // The VM list is virtualized: the filter brings the VM among the rows in view.
  await page.getByRole("searchbox", { name: "Filter VMs by name" }).fill(vmName);
  await expect(page.getByRole("link", { name: vmName, exact: true })).toBeVisible({ timeout: 10_000 });
  // What the OVF asked: 2 vCPUs, 768 MiB, UEFI, a disk, an empty CD drive, a NIC with its MAC.
  const [vm] = await xapi.call(z.array(z.string()), "VM.get_by_name_label", vmName);
  const record = await xapi.call(z.looseObject({ VCPUs_max: z.coerce.number(), memory_static_max: z.coerce.number(), HVM_boot_params: z.record(z.string(), z.string()), VBDs: z.array(z.string()), VIFs: z.array(z.string()) }), "VM.get_record", vm);
  expect([record.VCPUs_max, record.memory_static_max, record.HVM_boot_params.firmware, record.VBDs.length, record.VIFs.length]).toEqual([2, 768 * MiB, "uefi", 2, 1]);
  await expectSameDisk(xapi, vmName, raw.path);
});

test("an OVF of VirtualBox's dropped with its disk and manifest imports as one package; what the VM cannot have is listed", async ({ page }) => {
  test.setTimeout(120_000);
  const xapi = await login();
  const vmName = `e2e-ovf-${Date.now()}`;
  const raw = await rawDisk("ovf-source", 8);
  const dir = test.info().outputPath("ovf-files");
  await mkdir(dir, { recursive: true });
  const vmdk = await readFile(vmdkOf(raw.path));
  const ovf = Buffer.from(virtualBoxOvf({ disk: "disk.vmdk", capacity: raw.bytes.length }).replaceAll("debian &amp; friends", vmName));
  await writeFile(join(dir, "vm.ovf"), ovf);
  await writeFile(join(dir, "disk.vmdk"), vmdk);
  await writeFile(join(dir, "vm.mf"), manifestOf([["vm.ovf", ovf], ["disk.vmdk", vmdk]]));
  await page.goto("/vms");
  await dropFile(page, [join(dir, "disk.vmdk"), join(dir, "vm.mf"), join(dir, "vm.ovf")]);
  const row = page.getByRole("listitem", { name: "vm.ova" });
  await expect(row).toContainText("vm.ovf and 2 files beside it, sent as one package");
  await expect(row.getByRole("status").first()).toContainText("Imported", { timeout: 90_000 });
  await expect(row.getByRole("status").filter({ hasText: "Imported, with notes" })).toContainText("USB controller: usb");
  await expect(row).toContainText("sound card: sound (ensoniq1371)");
  await page.setViewportSize({ width: 360, height: 800 });
  await page.screenshot({ path: test.info().outputPath("ovf-notes-360.png"), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 900 });
  await expectSameDisk(xapi, vmName, raw.path);
});

test("a qcow2 dropped as a disk alone becomes a disk on the SR, named after the file", async ({ page }) => {
  test.setTimeout(120_000);
  const xapi = await login();
  const raw = await rawDisk("qcow-source", 8);
  const name = `e2e-data-${Date.now()}`;
  const qcow2 = test.info().outputPath(`${name}.qcow2`);
  execFileSync("qemu-img", ["convert", "-f", "raw", "-O", "qcow2", raw.path, qcow2]);
  const before = await counts(xapi);
  await page.goto("/vms");
  await dropFile(page, qcow2);
  const dialog = page.getByRole("dialog", { name: `Import ${name}.qcow2` });
  await expect(dialog.getByRole("radio", { name: /A new VM with this disk/ })).toBeChecked();
  await page.setViewportSize({ width: 360, height: 800 });
  await page.emulateMedia({ colorScheme: "dark" });
  await page.screenshot({ path: test.info().outputPath("disk-choice-360-dark.png") });
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.emulateMedia({ colorScheme: "light" });
  await dialog.getByRole("radio", { name: /Only a disk on/ }).check();
  await dialog.getByRole("button", { name: "Import" }).click();
  const row = page.getByRole("listitem", { name: `${name}.qcow2` });
  await expect(row.getByRole("status")).toContainText("Imported as a disk", { timeout: 90_000 });
  const vdis = await xapi.call(z.array(z.string()), "VDI.get_by_name_label", name);
  expect(vdis).toHaveLength(1);
  expect(await counts(xapi)).toEqual({ vms: before.vms, vdis: before.vdis + 1 });
  await expectSameVdi(xapi, vdis[0]!, raw.path);
});

test("an OVA whose manifest lies about its disk is refused in words, and nothing is left", async ({ page }) => {
  test.setTimeout(120_000);
  const xapi = await login();
  const raw = await rawDisk("lying-source", 8);
  const file = await writeOva("lying.ova", `e2e-lying-${Date.now()}`, raw, { badDigest: true });
  const before = await counts(xapi);
  await page.goto("/vms");
  await dropFile(page, file);
  const row = page.getByRole("listitem", { name: "lying.ova" });
  await expect(row.getByRole("alert")).toContainText("does not match its manifest vm.mf (disk1.vmdk: its SHA256 digest is", { timeout: 90_000 });
  await expect(row.getByRole("status")).toHaveText(/Failed/);
  expect(await counts(xapi)).toEqual(before);
});

test("a VM exported as an OVA from its Export dialog: qemu-img reads its VMDK as the VM's disk, Hangar reads its OVF as the VM", async ({ page }) => {
  test.setTimeout(180_000);
  const xapi = await login();
  const vmName = `e2e-ova-out-${Date.now()}`;
  const raw = await rawDisk("out-source", 16);
  const file = await writeOva("out-source.ova", vmName, raw);
  await page.goto("/vms");
  await dropFile(page, file);
  await expect(page.getByRole("listitem", { name: "out-source.ova" }).getByRole("status")).toContainText("Imported", { timeout: 90_000 });
  // The VM list is virtualized: the filter brings the VM among the rows in view.
  await page.getByRole("searchbox", { name: "Filter VMs by name" }).fill(vmName);
  await page.getByRole("link", { name: vmName, exact: true }).click();
  await page.getByRole("button", { name: "Export" }).click();
  const dialog = page.getByRole("dialog", { name: `Export ${vmName}` });
  await dialog.getByRole("radio", { name: /^OVA/ }).check();
  await expect(dialog.getByRole("radio", { name: /zstd/ })).toHaveCount(0);
  await page.setViewportSize({ width: 360, height: 800 });
  await page.screenshot({ path: test.info().outputPath("export-ova-360.png") });
  await page.setViewportSize({ width: 1280, height: 900 });
  const downloading = page.waitForEvent("download");
  await dialog.getByRole("button", { name: "Download" }).click();
  const download = await downloading;
  expect(download.suggestedFilename()).toBe(`${vmName}.ova`);
  const ova = test.info().outputPath("exported.ova");
  await download.saveAs(ova);
  await expect(dialog.getByRole("progressbar", { name: `Export of ${vmName}` })).toHaveAttribute("aria-valuenow", "100", { timeout: 60_000 });
  const out = test.info().outputPath("exported");
  await mkdir(out, { recursive: true });
  execFileSync("tar", ["-xf", ova, "-C", out]);
  expect(execFileSync("tar", ["-tf", ova]).toString().split("\n").filter(Boolean)).toEqual([`${vmName}.ovf`, `${vmName}-disk1.vmdk`, `${vmName}.mf`]);
  expect(execFileSync("qemu-img", ["compare", "-f", "vmdk", "-F", "raw", join(out, `${vmName}-disk1.vmdk`), raw.path]).toString()).toMatch(/Images are identical/);
  const manifest = await readFile(join(out, `${vmName}.mf`), "utf8");
  const vmdkDigest = createHash("sha256").update(await readFile(join(out, `${vmName}-disk1.vmdk`))).digest("hex");
  expect(manifest).toContain(`SHA256(${vmName}-disk1.vmdk)= ${vmdkDigest}`);
  const described = await readOvf(await readFile(join(out, `${vmName}.ovf`)));
  expect({ name: described.name, vcpus: described.vcpus, memory: described.memory, firmware: described.firmware, drives: described.drives.map((d) => d.kind), nics: described.nics.map((n) => n.mac) }).toEqual({ name: vmName, vcpus: 2, memory: 768 * MiB, firmware: "uefi", drives: ["disk", "cd"], nics: ["00:50:56:12:34:56"] });
  await expect.poll(async () => (await xapi.call(z.array(z.string()), "VM.get_by_name_label", vmName)).length).toBe(1);
});

test("a volume downloaded from its menu on the SR page: VMDK read by qemu-img as the disk; the changes since its snapshot as a qcow2 delta over the snapshot's own download", async ({ page }) => {
  test.setTimeout(120_000);
  const xapi = await login();
  const name = `e2e-dl-${Date.now().toString(36)}`;
  const first = await rawDisk("dl-first", 8);
  const pool = (await xapi.call(z.array(z.string()), "pool.get_all"))[0]!;
  const sr = await xapi.call(z.string(), "pool.get_default_SR", pool);
  const vdi = await xapi.call(z.string(), "VDI.create", { SR: sr, virtual_size: first.bytes.length, name_label: name, type: "user", sharable: false, read_only: false, other_config: {} });
  const put = async (bytes: Buffer) => expect((await http(`${toolstackUrl}/import_raw_vdi?session_id=${xapi.session}&vdi=${vdi}&format=raw`, { method: "PUT", body: bytes, headers: { "content-length": String(bytes.length) } })).status).toBe(200);
  await put(first.bytes);
  const snapshot = await xapi.call(z.string(), "VDI.snapshot", vdi, {});
  const snapshotUuid = await xapi.call(z.string(), "VDI.get_uuid", snapshot);
  const second = Buffer.from(first.bytes);
  randomBytes(MiB).copy(second, 3 * MiB);
  const secondPath = test.info().outputPath("dl-second.raw");
  await writeFile(secondPath, second);
  await put(second);

  const srUuid = await xapi.call(z.string(), "SR.get_uuid", sr);
  await page.goto(`/storage/${srUuid}`);
  const download = async (volume: string, format: RegExp, what: string) => {
    await page.getByRole("button", { name: `Actions for ${volume}`, exact: true }).click();
    await page.getByRole("menu", { name: `Actions for ${volume}`, exact: true }).getByRole("menuitem", { name: "Download…" }).click();
    const dialog = page.getByRole("dialog", { name: `Download ${name}` });
    await dialog.getByRole("combobox", { name: "Format" }).selectOption({ label: (await dialog.getByRole("option", { name: format }).textContent())! });
    await dialog.getByRole("combobox", { name: "What" }).selectOption({ label: (await dialog.getByRole("option", { name: what }).textContent())! });
    await page.emulateMedia({ colorScheme: "dark" });
    await page.screenshot({ path: test.info().outputPath(`download-${format.source.replace(/\W/g, "")}-${what.split(" ")[0]}.png`) });
    await page.emulateMedia({ colorScheme: "light" });
    const downloading = page.waitForEvent("download");
    await dialog.getByRole("button", { name: "Download" }).click();
    const file = await downloading;
    const saved = test.info().outputPath(file.suggestedFilename());
    await file.saveAs(saved);
    await expect(dialog.getByRole("progressbar")).toHaveAttribute("aria-valuenow", "100", { timeout: 60_000 });
    await dialog.getByRole("button", { name: "Close" }).click();
    return { saved, suggested: file.suggestedFilename() };
  };
  const vdiUuid = await xapi.call(z.string(), "VDI.get_uuid", vdi);
  const whole = await download(name, /^VMDK/, "The whole disk");
  expect(whole.suggested).toBe(`${vdiUuid}.vmdk`);
  expect(execFileSync("qemu-img", ["compare", "-f", "vmdk", "-F", "raw", whole.saved, secondPath]).toString()).toMatch(/Images are identical/);
  // The snapshot's own download: saved as `<its uuid>.qcow2`, the name the delta's backing file gives it.
  const base = await download(`${name} (snapshot)`, /^qcow2/, "The whole disk");
  expect(base.suggested).toBe(`${snapshotUuid}.qcow2`);
  const delta = await download(name, /^qcow2/, `Changes since ${name}`);
  expect(delta.suggested).toBe(`${vdiUuid}.qcow2`);
  expect(execFileSync("qemu-img", ["info", "--output=json", delta.saved]).toString()).toContain(`${snapshotUuid}.qcow2`);
  expect(execFileSync("qemu-img", ["compare", "-f", "qcow2", "-F", "raw", delta.saved, secondPath], { cwd: test.info().outputDir }).toString()).toMatch(/Images are identical/);
});
