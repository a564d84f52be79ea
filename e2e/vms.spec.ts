// VMs from the toolstack: a VM made through XenAPI (VM.create, VDI.create, VBD.create) is listed with its
// disks and SR, opened, renamed and destroyed with its disks from the UI.
import { z } from "zod";
import { toolstackPort } from "../playwright.config.ts";
import { XenApiClient } from "../server/xenapi/client.ts";
import { E2E_PASSWORD, expect, test } from "./fixtures.ts";

const MiB = 1024 * 1024;
const zRef = z.string();

async function toolstack(): Promise<XenApiClient> {
  return XenApiClient.login(`http://127.0.0.1:${toolstackPort}`, "root", E2E_PASSWORD, "hangar-e2e");
}

async function makeVm(xapi: XenApiClient, name: string) {
  const pool = (await xapi.call(z.array(zRef), "pool.get_all"))[0]!;
  const sr = await xapi.call(zRef, "pool.get_default_SR", pool);
  const vm = await xapi.call(zRef, "VM.create", { name_label: name, name_description: "made by e2e/vms.spec.ts", memory_static_max: 2 * 1024 * MiB, memory_dynamic_max: 2 * 1024 * MiB, VCPUs_max: 2, VCPUs_at_startup: 2 });
  const disks: string[] = [];
  for (const [device, size] of [["0", 16 * MiB], ["1", 8 * MiB]] as const) {
    const vdi = await xapi.call(zRef, "VDI.create", { SR: sr, virtual_size: size, name_label: `${name} disk ${device}`, type: "user" });
    await xapi.call(zRef, "VBD.create", { VM: vm, VDI: vdi, userdevice: device, type: "Disk", mode: "RW", bootable: device === "0" });
    disks.push(vdi);
  }
  await xapi.call(zRef, "VBD.create", { VM: vm, VDI: "OpaqueRef:NULL", userdevice: "3", type: "CD", mode: "RO", empty: true });
  return { vm, disks, srName: await xapi.call(z.string(), "SR.get_name_label", sr), srUuid: await xapi.call(z.string(), "SR.get_uuid", sr) };
}

test("a VM made through XenAPI: listed with its disks, opened, renamed, destroyed with its disks", async ({ page }) => {
  const xapi = await toolstack();
  const name = `e2e-vm-${Date.now()}`;
  const { disks, srName, srUuid } = await makeVm(xapi, name);

  await page.goto("/vms");
  await expect(page.getByRole("heading", { level: 1, name: "VMs" })).toBeVisible();
  // The list shows the rows in view (it is virtualized): the filter finds one VM among the suite's many.
  await page.getByRole("searchbox", { name: "Filter VMs by name" }).fill(name);
  const link = page.getByRole("link", { name, exact: true });
  await expect(link).toBeVisible({ timeout: 10_000 });
  const drives = page.getByRole("list", { name: `Drives of ${name}` });
  await expect(drives.getByRole("listitem")).toHaveCount(3);
  await expect(drives).toContainText(`${name} disk 0`);
  await expect(drives).toContainText("16 MiB");
  await expect(drives).toContainText("CD drive 3");
  await expect(drives.getByRole("link", { name: srName }).first()).toHaveAttribute("href", `/storage/${srUuid}`);
  await page.screenshot({ path: test.info().outputPath("vms-list.png"), fullPage: true });

  await link.click();
  await expect(page.getByRole("heading", { level: 1, name })).toBeVisible();
  const drivesPanel = page.getByRole("region", { name: "Drives" });
  await expect(drivesPanel).toContainText("Disk 0");
  await expect(drivesPanel).toContainText("8 MiB");
  await expect(page.getByRole("region", { name: "Overview" })).toContainText("2 GiB");
  await page.screenshot({ path: test.info().outputPath("vm-page.png"), fullPage: true });

  // Rename in a dialog: the heading follows.
  const renamed = `${name}-renamed`;
  await page.getByRole("button", { name: "Rename" }).click();
  const renameDialog = page.getByRole("dialog", { name: "Rename the VM" });
  await renameDialog.getByLabel("Name").fill(renamed);
  await renameDialog.getByRole("button", { name: "Save" }).click();
  await expect(renameDialog).toBeHidden();
  await expect(page.getByRole("heading", { level: 1, name: renamed })).toBeVisible();

  // Destroy with its disks: the dialog says what goes; back on the list, the VM is gone, and so are its disks.
  await page.getByRole("button", { name: "Destroy", exact: true }).click();
  const destroyDialog = page.getByRole("dialog", { name: `Destroy the VM "${renamed}"?` });
  await expect(destroyDialog).toContainText("stay on their SRs");
  await destroyDialog.getByLabel("Also destroy its disks").check();
  await expect(destroyDialog).toContainText("are destroyed with their data");
  await destroyDialog.getByRole("button", { name: "Destroy VM and disks" }).click();
  await expect(page).toHaveURL("/vms");
  await expect(page.getByRole("link", { name: renamed, exact: true })).toHaveCount(0);
  for (const vdi of disks) await expect(xapi.call(z.unknown(), "VDI.get_record", vdi)).rejects.toThrow(/HANDLE_INVALID/);
  await xapi.logout();
});

test("an unknown VM is a not-found page", async ({ page }) => {
  const response = await page.goto(`/vms/${encodeURIComponent("OpaqueRef:00000000-0000-0000-0000-000000000000")}`);
  expect(response?.status()).toBe(404);
  await expect(page.getByRole("heading", { level: 1, name: "Page not found" })).toBeVisible();
});
