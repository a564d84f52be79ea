// Fuzz target (issue 24): an OVA imported end to end (server/ova, through XenAPI and /import_raw_vdi) against a real toolstack, from packages generated as the
// real tools lay them out (the descriptor first or last, the manifest before or after the disks, VMDK of
// qemu-img's, qcow2, raw) and then broken: members renamed, dropped, duplicated, reordered or cut short, a
// manifest that lies or is garbage, descriptors edited as text, tar headers with their bytes flipped. Each case:
// the import ends within its bound with a VM or a PackageError (never another error), leaves no VM, VDI or
// pending task it made behind (a VM it made is destroyed after a success), and the service answers a probe.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import fc from "fast-check";
import { z } from "zod";
import { editedText, fuzz, type FuzzBudget, within } from "../../fuzz-testing.ts";
import { startTestToolstack, type TestToolstack } from "../storage-testing.ts";
import { XenApiClient } from "../../xenapi/client.ts";
import { writeOvf } from "../../ova/descriptor-writer.ts";
import { importOva, PackageError } from "../../ova/import.ts";
import { bufferSource, manifestOf, tarOf } from "../../ova/testing.ts";

const BUDGET: FuzzBudget = { slice: 10, full: 300, fullSeconds: 90, caseMs: 40_000 };
const MiB = 1024 * 1024;

let host: TestToolstack;
let xapi: XenApiClient;
let dir: string;
let sr: string;
let disks: Array<{ name: string; bytes: Buffer }>;
const rawSize = 3 * MiB;

before(async () => {
  host = await startTestToolstack();
  xapi = new XenApiClient(host.client.url, host.client.session);
  dir = mkdtempSync(join(tmpdir(), "hangar-ova-fuzz-"));
  sr = await host.client.call<string>("pool.get_default_SR", (await host.client.call<string[]>("pool.get_all"))[0]);
  const raw = Buffer.alloc(rawSize);
  for (let i = 0; i < MiB; i++) raw[i] = (i * 7) & 0xff;
  writeFileSync(join(dir, "disk.raw"), raw);
  const convert = (format: string, options: string[], name: string) => {
    execFileSync("qemu-img", ["convert", "-f", "raw", "-O", format, ...options, join(dir, "disk.raw"), join(dir, name)]);
    return readFileSync(join(dir, name));
  };
  disks = [
    { name: "d.vmdk", bytes: convert("vmdk", ["-o", "subformat=streamOptimized"], "d.vmdk") },
    { name: "d.qcow2", bytes: convert("qcow2", [], "d.qcow2") },
    { name: "d.img", bytes: raw },
  ];
});
after(async () => {
  await host.stop();
  rmSync(dir, { recursive: true, force: true });
});

const ovfOf = (href: string, capacity: number) =>
  writeOvf({ name: "fuzzed", description: "", memory: 256 * MiB, vcpus: 1, firmware: "bios", secureBoot: false, os: { id: 1, type: "", description: "" }, drives: [{ kind: "disk", href, capacity, name: "disk" }, { kind: "cd", name: "cd" }], nics: [{ network: "n", mac: "" }] });

const fragments = fc.constantFrom("<Item><rasd:ResourceType>17</rasd:ResourceType><rasd:HostResource>ovf:/disk/vmdisk1</rasd:HostResource></Item>", '<File ovf:id="file1" ovf:href="../d"/>', '<!DOCTYPE x [<!ENTITY a "b">]>', "&a;", "</Envelope>", 'ovf:capacity="1"', "", "\u0000");

const member = fc.record({
  disk: fc.nat({ max: 2 }),
  capacity: fc.oneof({ weight: 4, arbitrary: fc.constant(rawSize) }, fc.constantFrom(MiB, 0, rawSize + 512)),
  order: fc.constantFrom("ovf-mf-disk", "ovf-disk-mf", "disk-ovf-mf", "mf-ovf-disk"),
  manifest: fc.constantFrom("good", "lying", "garbage", "none"),
  editOvf: fc.option(editedText(fc.constant(""), fragments), { nil: undefined }),
  renameDisk: fc.option(fc.constantFrom("other.vmdk", "../d.vmdk", "/abs.vmdk", "d.vmdk"), { nil: undefined }),
  drop: fc.option(fc.constantFrom("ovf", "disk", "mf"), { nil: undefined }),
  duplicate: fc.option(fc.constantFrom("ovf", "disk"), { nil: undefined }),
  cut: fc.option(fc.nat(), { nil: undefined }),
  flips: fc.array(fc.record({ at: fc.nat({ max: 4096 }), bit: fc.nat({ max: 7 }) }), { maxLength: 3 }),
  rereadable: fc.boolean(),
});

type Case = typeof member extends fc.Arbitrary<infer T> ? T : never;

async function packageOf(c: Case): Promise<Buffer> {
  const disk = disks[c.disk]!;
  let ovf = Buffer.from(ovfOf(disk.name, c.capacity));
  if (c.editOvf !== undefined) {
    const text = ovf.toString();
    const at = text.length > 0 ? (c.editOvf.length * 7919) % text.length : 0;
    ovf = Buffer.from(text.slice(0, at) + c.editOvf + text.slice(at));
  }
  const diskName = c.renameDisk ?? disk.name;
  const listed: Array<[string, Buffer]> = [["vm.ovf", ovf], [disk.name, disk.bytes]];
  const mf = c.manifest === "good" ? manifestOf(listed) : c.manifest === "lying" ? manifestOf([listed[0]!, [disk.name, Buffer.from("x")]]) : Buffer.from("SHA256(vm.ovf) = not hex\n");
  const parts: Record<string, [string, Buffer]> = { ovf: ["vm.ovf", ovf], disk: [diskName, disk.bytes], mf: ["vm.mf", mf] };
  let order = c.order.split("-").filter((p) => p !== c.drop && !(p === "mf" && c.manifest === "none"));
  if (c.duplicate !== undefined) order = [...order, c.duplicate];
  const tar = await tarOf(order.map((p) => parts[p]!));
  for (const { at, bit } of c.flips) if (at < tar.length) tar[at]! ^= 1 << bit;
  return c.cut === undefined ? tar : tar.subarray(0, c.cut % (tar.length + 1));
}

async function made(): Promise<{ vms: number; vdis: number; pending: number }> {
  const tasks = await xapi.records("task", z.looseObject({ status: z.string() }));
  return {
    vms: (await xapi.call(z.array(z.string()), "VM.get_all")).length,
    vdis: (await xapi.call(z.array(z.string()), "VDI.get_all")).length,
    pending: Object.values(tasks).filter((t) => t.status === "pending").length,
  };
}

let cases = 0;
test("fuzz: broken OVAs import or are refused with PackageError, leaving nothing behind", async (t) => {
  await fuzz(t, "ova import", BUDGET, member, async (c) => {
    const before = await made();
    const ova = await packageOf(c);
    let vm: string | null = null;
    try {
      const result = await within(30_000, importOva({ xapi, toolstack: host.client.url, sr, mark: `fuzz-${++cases}`, force: false, signal: AbortSignal.timeout(30_000) }, bufferSource("fuzz.ova", ova, { rereadable: c.rereadable, piece: 100_000 })), "the import");
      vm = result.vm;
    } catch (error) {
      assert.ok(error instanceof PackageError, `not a PackageError: ${(error as Error).stack}`);
    }
    if (vm !== null) await xapi.call(z.unknown(), "VM.hangar_destroy", vm, false);
    assert.deepEqual(await made(), before, "what the import made is gone");
    assert.equal(await within(2000, xapi.call(z.string(), "pool.get_default_SR", (await xapi.call(z.array(z.string()), "pool.get_all"))[0]), "a probe"), sr);
  });
});
