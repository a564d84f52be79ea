// vm-import, vm-export, the metadata pair, vdi-import and vdi-export as a user runs them (bin/hangar, not on a
// terminal) against a real toolstack: files plain and compressed, a URL, round trips to the same disk bytes, an
// export killed and resumed to the same bytes, Ctrl-C on either side, failures in words; disk images of
// qemu-img's in every format, their format read from their bytes, exports read back by qemu-img.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { after, before, describe, test } from "node:test";
import { execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";
import { sampleDisk } from "../disk/testing.ts";
import { locateVdi } from "../toolstack/vdi-records.ts";
import { openVolume } from "../toolstack/transfer/volume-io.ts";
import { fileURLToPath } from "node:url";
import { createGzip, gzipSync } from "node:zlib";
import { startTestToolstack, type TestToolstack } from "../toolstack/storage-testing.ts";
import { ROOT_PASSWORD } from "../toolstack/testing.ts";
import { formatSize, TransferMeter, transferBar, transferLine } from "./progress.ts";
import { writeOvf } from "../ova/descriptor-writer.ts";
import { manifestOf, qemuImage, tarOf } from "../ova/testing.ts";
import { collect, diskBytes, http, MiB, patternBlock, readVdi, type TestDisk, testXva } from "../toolstack/transfer/testing.ts";

const HANGAR = fileURLToPath(new URL("../../bin/hangar", import.meta.url));

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

let host: TestToolstack;
let dir: string;
let env: Record<string, string>;

before(async () => {
  host = await startTestToolstack();
  dir = await mkdtemp(join(tmpdir(), "hangar-vm-transfer-"));
  env = { HANGAR_URL: host.client.url, HANGAR_PASSWORD: ROOT_PASSWORD };
});
after(async () => {
  await host.stop();
  await rm(dir, { recursive: true, force: true });
});

/** bin/hangar as a child; `run` is its outcome. */
function start(args: string[], stdin: "ignore" | "pipe" = "ignore"): { child: ChildProcess; run: Promise<Run> } {
  const child = spawn(HANGAR, args, { env: { ...process.env, ...env }, stdio: [stdin, "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (text: string) => (stdout += text));
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (stderr += text));
  const run = new Promise<Run>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return { child, run };
}

const hangar = (...args: string[]) => start(args).run;

function ok(run: Run): Run {
  assert.equal(run.code, 0, `exit code (stderr: ${run.stderr})`);
  return run;
}

const call = <T = unknown>(method: string, ...params: unknown[]) => host.client.call<T>(method, ...params);
const path = (name: string) => join(dir, name);
const sha256 = async (file: string) => createHash("sha256").update(await readFile(file)).digest("hex");
const exists = (file: string) => stat(file).then(() => true, () => false);

async function writeArchive(name: string, archive: Readable): Promise<string> {
  await pipeline(archive, createWriteStream(path(name)));
  return path(name);
}

/** The "uuid  name" a successful import prints: the VM's ref and uuid. */
async function importedVm(run: Run, name: string): Promise<{ ref: string; uuid: string }> {
  const match = /^([0-9a-f-]{36}) {2}(.*)$/.exec(run.stdout.trim());
  assert.ok(match, run.stdout);
  assert.equal(match[2], name);
  return { ref: await call<string>("VM.get_by_uuid", match[1]), uuid: match[1]! };
}

async function diskOf(vm: string): Promise<string> {
  for (const vbd of await call<string[]>("VM.get_VBDs", vm)) if ((await call("VBD.get_type", vbd)) === "Disk") return call<string>("VBD.get_VDI", vbd);
  throw new Error("no disk");
}

async function assertDisk(vm: string, disk: TestDisk, what: string): Promise<void> {
  const [got, want] = [await readVdi(host.service.ts, await diskOf(vm)), diskBytes(disk)];
  const differs = got.findIndex((byte, at) => byte !== want[at]);
  assert.ok(got.equals(want), `${what}: the disk's bytes (${got.length} bytes read of ${want.length}; first difference at ${differs}; virtual_size ${String(await call("VDI.get_virtual_size", await diskOf(vm)))})`);
}

/** stderr off a terminal: whole lines, progress or a summary, never a bar redrawn in place. */
function assertPlainLines(stderr: string): void {
  assert.doesNotMatch(stderr, /[\r\u001b]/);
  for (const line of stderr.trimEnd().split("\n").filter((l) => /^(sent|received)\b/.test(l))) {
    assert.match(line, /^(sent|received)(?: \d+%)?: [\d.]+ [KMGT]?i?B|^(sent|received) [\d.]+ [KMGT]?i?B in \d+:\d\d/, line);
  }
}

const vmCount = async () => (await call<string[]>("VM.get_all")).length;

// A short last block; 64 KiB-aligned as the file SR rounds volume sizes up to 64 KiB.
const smallDisk = (seed: number): TestDisk => ({ size: 7 * MiB + 64 * 1024, blocks: new Map([[0, patternBlock(seed)], [5, patternBlock(seed + 1)], [7, patternBlock(seed + 2, 64 * 1024)]]) });

describe("hangar vm-import", () => {
  test("a plain and a gzipped XVA file: the new VM's uuid and name, its disk's bytes; --sr; plain progress lines", async () => {
    const disk = smallDisk(1);
    const plain = await writeArchive("plain.xva", testXva({ name: "plain vm", disks: [disk] }));
    const gzipped = await writeArchive("gzipped.xva.gz", testXva({ name: "gzipped vm", disks: [disk] }).pipe(createGzip()));
    const [pool] = await call<string[]>("pool.get_all");
    const sr = await call<string>("SR.get_uuid", await call<string>("pool.get_default_SR", pool));
    const first = ok(await hangar("vm-import", plain, "--sr", sr));
    const second = ok(await hangar("vm-import", gzipped));
    for (const [run, name] of [[first, "plain vm"], [second, "gzipped vm"]] as const) {
      const vm = await importedVm(run, name);
      await assertDisk(vm.ref, disk, name);
      assertPlainLines(run.stderr);
      assert.match(run.stderr, /^sent [\d.]+ [KM]i?B in \d+:\d\d/m);
    }
    assert.match(first.stderr, new RegExp(`^sent ${((await stat(plain)).size / MiB).toFixed(1)} MiB in`, "m"), "the whole file went");
  });

  test("a URL: fetched and streamed through", async (t) => {
    const disk = smallDisk(4);
    const file = await writeArchive("served.xva", testXva({ name: "served vm", disks: [disk] }));
    const size = (await stat(file)).size;
    const server = await serve((_request, response) => {
      response.writeHead(200, { "content-length": size, "content-type": "application/octet-stream" });
      createReadStream(file).pipe(response);
    });
    t.after(() => server.close());
    const run = ok(await hangar("vm-import", `${url(server)}/exports/served.xva`));
    await assertDisk((await importedVm(run, "served vm")).ref, disk, "from a URL");
    const missing = await hangar("vm-import", `${url(server).replace(/\d+$/, "1")}/nothing.xva`);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /ECONNREFUSED/);
  });

  test("a legacy package directory (ova.xml and gzipped chunks) is packed and streamed", async () => {
    const disk: TestDisk = { size: 3 * MiB, blocks: new Map([[0, patternBlock(30)], [2, patternBlock(31)]]) };
    const pkg = path("legacy-package");
    await mkdir(join(pkg, "xvda"), { recursive: true });
    await writeFile(join(pkg, "xvda", "chunk-000000000.gz"), gzipSync(diskBytes(disk)));
    await writeFile(
      join(pkg, "ova.xml"),
      `<?xml version="1.0" ?>
<appliance version="0.1">
  <vm name="vm">
    <label>legacy vm</label>
    <shortdesc>a legacy package</shortdesc>
    <config mem_set="268435456" vcpus="1"/>
    <hacks is_hvm="true" kernel_boot_cmdline=""></hacks>
    <vbd device="xvda" function="root" mode="w" vdi="vdi_xvda"/>
  </vm>
  <vdi name="vdi_xvda" size="${disk.size}" source="file://xvda" type="dir-gzipped-chunks" variety="system"/>
</appliance>
`,
    );
    const run = ok(await hangar("vm-import", pkg));
    await assertDisk((await importedVm(run, "legacy vm")).ref, disk, "a legacy package");
    const notPackage = await hangar("vm-import", join(pkg, "xvda"));
    assert.equal(notPackage.code, 1);
    assert.match(notPackage.stderr, /is a directory without ova\.xml: not a legacy package/);
  });

  test("a corrupt file: the task's reason in words, exit 1, nothing made; refusals before the upload say why", async () => {
    const before = await vmCount();
    const corrupt = path("corrupt.xva");
    await writeFile(corrupt, "hello, this is not an XVA\n".repeat(200));
    const run = await hangar("vm-import", corrupt);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /^import failed: IMPORT_ERROR .*(tar|ova\.xml)/m);
    assert.equal(run.stdout, "");
    assert.equal(await vmCount(), before);
    const noSr = await hangar("vm-import", corrupt, "--sr", "00000000-0000-4000-8000-000000000000");
    assert.equal(noSr.code, 1);
    assert.match(noSr.stderr, /UUID_INVALID/);
    const badSr = await hangar("vm-import", corrupt, "--sr", "OpaqueRef:00000000-0000-4000-8000-000000000000");
    assert.equal(badSr.code, 1);
    assert.match(badSr.stderr, /the import refused \(HTTP 404\): HANDLE_INVALID/);
    const none = await hangar("vm-import", path("no-such.xva"));
    assert.equal(none.code, 1);
    assert.match(none.stderr, /ENOENT/);
  });

  test("Ctrl-C while the data flows cancels the import's task; exit 130, nothing made", async (t) => {
    const archive = await collect(testXva({ name: "never", disks: [smallDisk(7)] }));
    let sent!: () => void;
    const halfSent = new Promise<void>((resolve) => (sent = resolve));
    // Half the archive, then nothing: the import waits for the rest.
    const server = await serve((_request, response) => {
      response.writeHead(200, { "content-length": archive.length });
      response.write(archive.subarray(0, archive.length / 2), () => sent());
    });
    t.after(() => {
      server.closeAllConnections();
      server.close();
    });
    const before = await vmCount();
    const { child, run } = start(["vm-import", `${url(server)}/stalls.xva`]);
    await halfSent;
    await waitFor(async () => (await pendingTasks("VM import")).length > 0);
    child.kill("SIGINT");
    const result = await run;
    assert.equal(result.code, 130, result.stderr);
    assert.match(result.stderr, /^interrupted: the import's task ended cancelled$/m);
    assert.equal(await vmCount(), before);
  });
});

describe("hangar vm-import of OVA, OVF and disk images", () => {
  /** A streamOptimized VMDK of `raw` (qemu-img), in an OVF of Hangar's writer. */
  function ovfPackage(name: string, raw: Buffer): { ovf: Buffer; vmdk: Buffer } {
    const vmdk = qemuImage(dir, raw, name, "vmdk", ["-o", "subformat=streamOptimized"]);
    const ovf = writeOvf({ name, description: "", memory: 512 * MiB, vcpus: 1, firmware: "bios", secureBoot: false, os: { id: 101, type: "", description: "" }, drives: [{ kind: "disk", href: `${name}.vmdk`, capacity: raw.length, name: "Hard Disk 1" }], nics: [] });
    return { ovf: Buffer.from(ovf), vmdk };
  }

  test("an OVA, an OVF with its files beside it, a qcow2: each the VM with its disk; a bad manifest refused, nothing made", async () => {
    const disk = smallDisk(11);
    const raw = diskBytes(disk);
    const { ovf, vmdk } = ovfPackage("ova-vm", raw);
    const files: Array<[string, Buffer]> = [["ova-vm.ovf", ovf], ["ova-vm.vmdk", vmdk]];
    await writeFile(path("ova-vm.ova"), await tarOf([files[0]!, ["ova-vm.mf", manifestOf(files)], files[1]!]));
    const fromOva = ok(await hangar("vm-import", path("ova-vm.ova")));
    const imported = await importedVm(fromOva, "ova-vm");
    await assertDisk(imported.ref, disk, "an OVA");
    assert.match(fromOva.stderr, /^read [\d.]+ [KM]i?B in/m);
    // Out as an OVA (its format from the name) and in again: the same disk.
    ok(await hangar("vm-export", imported.uuid, path("out.ova")));
    assert.equal(execFileSync("tar", ["-tf", path("out.ova")]).toString(), "ova-vm.ovf\nova-vm-disk1.vmdk\nova-vm.mf\n");
    await assertDisk((await importedVm(ok(await hangar("vm-import", path("out.ova"))), "ova-vm")).ref, disk, "an exported OVA");
    const usage = await hangar("vm-export", imported.uuid, path("x.ova"), "--compress", "zstd");
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--compress is for XVA archives/);

    const ovfDir = path("ovf-files");
    await mkdir(ovfDir);
    const beside = ovfPackage("ovf-vm", raw);
    await writeFile(join(ovfDir, "ovf-vm.ovf"), beside.ovf);
    await writeFile(join(ovfDir, "ovf-vm.vmdk"), beside.vmdk);
    await writeFile(join(ovfDir, "ovf-vm.mf"), manifestOf([["ovf-vm.ovf", beside.ovf], ["ovf-vm.vmdk", beside.vmdk]]));
    await assertDisk((await importedVm(ok(await hangar("vm-import", join(ovfDir, "ovf-vm.ovf"))), "ovf-vm")).ref, disk, "an OVF");

    await writeFile(path("cloud.qcow2"), qemuImage(dir, raw, "cloud", "qcow2"));
    await assertDisk((await importedVm(ok(await hangar("vm-import", path("cloud.qcow2"))), "cloud")).ref, disk, "a qcow2");

    const before = await vmCount();
    await writeFile(path("bad.ova"), await tarOf([files[0]!, ["ova-vm.mf", manifestOf([files[0]!, ["ova-vm.vmdk", Buffer.from("other")]])], files[1]!]));
    const bad = await hangar("vm-import", path("bad.ova"));
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /^import failed: the package does not match its manifest ova-vm\.mf \(ova-vm\.vmdk: its SHA256 digest is/m);
    assert.equal(await vmCount(), before);
    const forced = ok(await hangar("vm-import", path("bad.ova"), "--force"));
    assert.match(forced.stderr, /^note: checksum errors ignored: ova-vm\.vmdk/m);
  });
});

describe("hangar vm-export", () => {
  const disk = smallDisk(10);
  let vm: { ref: string; uuid: string };
  /** ~64 MiB of data: an export that takes a moment. */
  const big: TestDisk = { size: 64 * MiB, blocks: new Map(Array.from({ length: 64 }, (_, i) => [i, patternBlock(100 + i)])) };
  let bigVm: { ref: string; uuid: string };

  before(async () => {
    vm = await importedVm(ok(await hangar("vm-import", await writeArchive("source.xva", testXva({ name: "exported vm", disks: [disk] })))), "exported vm");
    bigVm = await importedVm(ok(await hangar("vm-import", await writeArchive("big.xva", testXva({ name: "big vm", disks: [big] })))), "big vm");
  });

  test("to a file by uuid, then imported back: the same disk bytes; no .part or sidecar left", async () => {
    const file = path("round-trip.xva");
    const run = ok(await hangar("vm-export", vm.uuid, file));
    assertPlainLines(run.stderr);
    assert.match(run.stderr, /^received [\d.]+ [KM]i?B in \d+:\d\d/m);
    assert.match(run.stderr, /^exported to .*round-trip\.xva$/m);
    assert.ok(!(await exists(`${file}.part`)) && !(await exists(`${file}.part.json`)));
    const back = await importedVm(ok(await hangar("vm-import", file)), "exported vm");
    assert.notEqual(back.uuid, vm.uuid);
    await assertDisk(back.ref, disk, "exported and imported");
  });

  test("--compress zstd by name; to stdout with -; usage errors", async () => {
    const file = path("compressed.xva.zst");
    await call("VM.set_name_label", vm.ref, "only one of this name");
    ok(await hangar("vm-export", "only one of this name", file, "--compress", "zstd"));
    assert.deepEqual([...(await readFile(file)).subarray(0, 4)], [0x28, 0xb5, 0x2f, 0xfd]);
    await assertDisk((await importedVm(ok(await hangar("vm-import", file)), "only one of this name")).ref, disk, "zstd");
    const piped = ok(await hangar("vm-export", vm.uuid, "-"));
    assert.equal(piped.stdout.slice(0, 7), "ova.xml", "a plain XVA on stdout");
    for (const [args, message] of [
      [["vm-export", vm.uuid, file, "--compress", "xz"], /--compress takes gzip or zstd/],
      [["vm-export", vm.uuid, "-", "--resume"], /--resume needs a FILE/],
      [["vm-export", vm.uuid], /needs VM and FILE/],
    ] as const) {
      const run = await hangar(...args);
      assert.equal(run.code, 2);
      assert.match(run.stderr, message);
    }
    const unknown = await hangar("vm-export", "no such vm", file);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no VM named "no such vm"/);
  });

  test("killed mid-export, --resume continues from FILE.part: the same bytes as the whole export in one go", async () => {
    const file = path("resumed.xva");
    const part = `${file}.part`;
    const sidecarBytes = async () => ((JSON.parse(await readFile(`${part}.json`, "utf8").catch(() => "{}")) as { bytes?: number }).bytes ?? 0);
    const { child, run } = start(["vm-export", bigVm.uuid, file]);
    await waitFor(async () => ((await stat(part).catch(() => undefined))?.size ?? 0) >= 2 * MiB, 5);
    // Held past a checkpoint's 5 s: its next write syncs FILE.part and records how much is safe.
    child.kill("SIGSTOP");
    await new Promise((resolve) => setTimeout(resolve, 5_500));
    child.kill("SIGCONT");
    await waitFor(async () => (await sidecarBytes()) > 0, 5);
    child.kill("SIGKILL");
    assert.equal((await run).signal, "SIGKILL");
    const left = (await stat(part)).size;
    const sidecar = JSON.parse(await readFile(`${part}.json`, "utf8")) as { subject: string; etag: string; bytes: number; query: Record<string, string> };
    assert.equal(sidecar.subject, bigVm.uuid);
    assert.deepEqual(sidecar.query, { uuid: bigVm.uuid });
    assert.ok(sidecar.bytes >= 2 * MiB && sidecar.bytes <= left, `checkpoint ${sidecar.bytes}, file ${left}`);
    assert.ok(!(await exists(file)));
    // A copy as a crash (a reboot) would leave it: the sidecar from another boot, its last checkpoint short of
    // the file's end. Only the checkpoint is trusted there: the rest is cut and asked for again.
    const crashed = path("crashed.xva");
    await writeFile(`${crashed}.part`, Buffer.concat([await readFile(part), Buffer.alloc(4096, 0xee)]));
    const checkpoint = sidecar.bytes;
    await writeFile(`${crashed}.part.json`, JSON.stringify({ ...sidecar, boot: "a boot before the crash" }));
    const resumed = ok(await hangar("vm-export", bigVm.uuid, file, "--resume"));
    const from = Number(/^resuming .* at byte (\d+) /m.exec(resumed.stderr)?.[1]);
    assert.equal(from, left, "within the same boot all of FILE.part is kept");
    assert.ok(!(await exists(part)) && !(await exists(`${part}.json`)));
    const afterCrash = ok(await hangar("vm-export", bigVm.uuid, crashed, "--resume"));
    assert.match(afterCrash.stderr, new RegExp(`^resuming .* at byte ${checkpoint} `, "m"));
    // The same export (its etag names its date) fetched whole.
    const whole = await http(`${host.client.url}/export?session_id=${host.client.session}&uuid=${bigVm.uuid}&offset=0&etag=${encodeURIComponent(sidecar.etag)}`);
    assert.equal(whole.status, 200);
    assert.ok(from < whole.body.length, `killed before the end (${from} of ${whole.body.length})`);
    const straight = createHash("sha256").update(whole.body).digest("hex");
    assert.equal(await sha256(file), straight);
    assert.equal(await sha256(crashed), straight);
    await assertDisk((await importedVm(ok(await hangar("vm-import", file)), "big vm")).ref, big, "resumed");
  });

  test("Ctrl-C keeps FILE.part and a sidecar of its size; --resume after the VM changed starts over (412)", async () => {
    const file = path("interrupted.xva.gz");
    const part = `${file}.part`;
    const { child, run } = start(["vm-export", bigVm.uuid, file, "--compress", "gzip"]);
    await waitFor(async () => ((await stat(part).catch(() => undefined))?.size ?? 0) >= MiB, 5);
    child.kill("SIGINT");
    const interrupted = await run;
    assert.equal(interrupted.code, 130, interrupted.stderr);
    assert.match(interrupted.stderr, /^interrupted: .*interrupted\.xva\.gz\.part keeps .*--resume" continues it$/m);
    const sidecar = JSON.parse(await readFile(`${part}.json`, "utf8")) as { bytes: number; query: Record<string, string> };
    assert.equal(sidecar.bytes, (await stat(part)).size, "the sidecar records all that was written");
    assert.equal(sidecar.query.use_compression, "gzip");
    const wrong = await hangar("vm-export", bigVm.uuid, file, "--resume", "--compress", "zstd");
    assert.equal(wrong.code, 2);
    assert.match(wrong.stderr, /exported with --compress gzip/);
    await call("VM.set_name_description", bigVm.ref, "changed after the export began");
    const again = ok(await hangar("vm-export", bigVm.uuid, file, "--resume"));
    assert.match(again.stderr, /the VM changed since .* \(HTTP 412\): exporting it again from the start/);
    assert.deepEqual([...(await readFile(file)).subarray(0, 2)], [0x1f, 0x8b]);
    await assertDisk((await importedVm(ok(await hangar("vm-import", file)), "big vm")).ref, big, "restarted after 412");
  });
});

describe("hangar vm-export-metadata and vm-import-metadata", () => {
  test("metadata to a file; --dry-run makes nothing; a real import links the same disk", async () => {
    const disk = smallDisk(20);
    const vm = await importedVm(ok(await hangar("vm-import", await writeArchive("meta.xva", testXva({ name: "meta vm", disks: [disk] })))), "meta vm");
    const file = path("meta.ova");
    ok(await hangar("vm-export-metadata", vm.uuid, file));
    const metadata = await readFile(file);
    assert.equal(metadata.subarray(0, 7).toString(), "ova.xml");
    assert.ok(metadata.length < 64 * 1024);
    const before = await vmCount();
    const dryRun = ok(await hangar("vm-import-metadata", file, "--dry-run"));
    assert.equal(dryRun.stdout, "");
    assert.match(dryRun.stderr, /dry run: the metadata imports cleanly/);
    assert.equal(await vmCount(), before);
    const copy = await importedVm(ok(await hangar("vm-import-metadata", file)), "meta vm");
    assert.equal(await diskOf(copy.ref), await diskOf(vm.ref));
    const badMap = await hangar("vm-import-metadata", file, "--map-vdi", "nonsense");
    assert.equal(badMap.code, 2);
    assert.match(badMap.stderr, /--map-vdi takes SRC=DST/);
  });
});

function serve(handler: Parameters<typeof createServer>[1]): Promise<Server> {
  const server = createServer(handler);
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

const url = (server: Server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

async function waitFor(condition: () => Promise<boolean>, everyMs = 50, withinMs = 30_000): Promise<void> {
  for (const deadline = Date.now() + withinMs; !(await condition()); await new Promise((resolve) => setTimeout(resolve, everyMs))) {
    if (Date.now() > deadline) throw new Error("timed out waiting");
  }
}

async function pendingTasks(name: string): Promise<string[]> {
  const tasks = await call<Record<string, { name_label: string; status: string }>>("task.get_all_records");
  return Object.entries(tasks)
    .filter(([, task]) => task.name_label === name && task.status === "pending")
    .map(([ref]) => ref);
}

describe("transfer progress", () => {
  test("bytes of a known total: fraction, byte rate, ETA; without a total, the task's fraction and its ETA", () => {
    const sized = new TransferMeter(10_000);
    assert.deepEqual(sized.sample(0, 100 * MiB, null, 0), { bytes: 0, total: 100 * MiB, rate: null, fraction: 0, task: null, eta: null });
    const half = sized.sample(50 * MiB, 100 * MiB, 0.4, 5_000);
    assert.equal(half.rate, 10 * MiB);
    assert.equal(half.eta, 5);
    assert.equal(transferBar(half, 10), "[#####-----]  50%  50.0 MiB of 100.0 MiB  10.0 MiB/s  ETA 0:05  task 40%");
    assert.equal(transferLine("sent", half), "sent 50%: 50.0 MiB of 100.0 MiB, 10.0 MiB/s, ETA 0:05, task 40%");
    const unsized = new TransferMeter(10_000);
    unsized.sample(0, null, 0, 0);
    const byTask = unsized.sample(20 * MiB, null, 0.25, 10_000);
    assert.equal(byTask.fraction, 0.25);
    assert.equal(byTask.eta, 30);
    assert.equal(transferLine("received", byTask), "received 25%: 20.0 MiB, 2.0 MiB/s, ETA 0:30");
    assert.equal(transferBar(new TransferMeter().sample(512, null, null)), "512 B");
    assert.equal(formatSize(1536 * MiB), "1.5 GiB");
  });
});

describe("hangar vdi-import and vdi-export", () => {
  const raw = sampleDisk();
  let sr: string;
  before(async () => {
    sr = await call<string>("pool.get_default_SR", (await call<string[]>("pool.get_all"))[0]);
    await writeFile(path("disk.raw"), raw);
  });
  const qemuImage = (name: string, format: string, options: string[] = []) => {
    execFileSync("qemu-img", ["convert", "-f", "raw", "-O", format, ...options, path("disk.raw"), path(name)]);
    return path(name);
  };
  /** The "uuid  name" a successful disk import prints: the VDI's ref. */
  const importedVdi = async (run: Run, name: string) => {
    const match = /^([0-9a-f-]{36}) {2}(.*)$/.exec(run.stdout.trim());
    assert.ok(match, run.stdout);
    assert.equal(match[2], name);
    return call<string>("VDI.get_by_uuid", match[1]);
  };
  const newVdi = (name: string) => call<string>("VDI.create", { SR: sr, virtual_size: raw.length, name_label: name, type: "user", sharable: false, read_only: false, other_config: {} });

  test("images of every format, their format read from their bytes (a fixed VHD from its footer): into a new VDI on --sr, into --vdi, from stdin", async () => {
    const images: Array<[string, string]> = [
      [qemuImage("disk.qcow2", "qcow2", ["-c"]), "qcow2"],
      [qemuImage("disk.vmdk", "vmdk", ["-o", "subformat=streamOptimized"]), "vmdk"],
      [qemuImage("fixed.vhd", "vpc", ["-o", "subformat=fixed,force_size=on"]), "vhd"],
      [qemuImage("disk.vhdx", "vhdx"), "vhdx"],
      [path("disk.raw"), "raw"],
    ];
    for (const [file, format] of images) {
      const made = ok(await hangar("vdi-import", file, "--sr", sr));
      assert.match(made.stderr, new RegExp(`: ${format}$`, "m"), file);
      const vdi = await importedVdi(made, "Imported VDI");
      assert.ok((await readVdi(host.service.ts, vdi)).subarray(0, raw.length).equals(raw), file);
    }
    const target = await newVdi("cli target");
    const piped = start(["vdi-import", "-", "--vdi", "cli target"], "pipe");
    createReadStream(images[1]![0]).pipe(piped.child.stdin!);
    await importedVdi(ok(await piped.run), "cli target");
    assert.ok((await readVdi(host.service.ts, target)).subarray(0, raw.length).equals(raw), "from stdin");
  });

  test("exports by FILE's extension read back by qemu-img; --base makes a qcow2 over the snapshot's export; raw to stdout", async () => {
    const vdi = await newVdi("cli export");
    ok(await hangar("vdi-import", path("disk.raw"), "--vdi", vdi));
    const uuid = await call<string>("VDI.get_uuid", vdi);
    for (const [name, qemuFormat] of [["out.vhd", "vpc"], ["out.qcow2", "qcow2"], ["out.vmdk", "vmdk"]] as const) {
      const run = ok(await hangar("vdi-export", uuid, path(name)));
      assert.match(run.stderr, /exported to /);
      assert.ok(!(await exists(`${path(name)}.part`)) && !(await exists(`${path(name)}.part.json`)));
      execFileSync("qemu-img", ["compare", "-f", qemuFormat, "-F", "raw", path(name), path("disk.raw")], { stdio: "pipe" });
    }
    const base = await call<string>("VDI.snapshot", vdi, {});
    const baseUuid = await call<string>("VDI.get_uuid", base);
    ok(await hangar("vdi-export", baseUuid, path(`${baseUuid}.qcow2`)));
    const newer = Buffer.from(raw);
    newer.fill(0x77, 9 * MiB, 10 * MiB);
    await writeFile(path("newer.raw"), newer);
    // Written as a VM would: one block changes.
    const located = await locateVdi(host.service.ts, vdi);
    const volume = await openVolume(host.service.ts, located.sr, located.key, "rw");
    await volume.client.write(9 * MiB, newer.subarray(9 * MiB, 10 * MiB));
    await volume.close();
    ok(await hangar("vdi-export", uuid, path("delta.qcow2"), "--base", baseUuid));
    assert.ok((await stat(path("delta.qcow2"))).size < 4 * MiB, "the delta holds what changed");
    execFileSync("qemu-img", ["compare", "-f", "qcow2", "-F", "raw", path("delta.qcow2"), path("newer.raw")], { stdio: "pipe" });
    // Bytes as they come (start() reads stdout as text); not execFileSync, which would stop the toolstack here.
    const { stdout: bytes } = await promisify(execFile)(HANGAR, ["vdi-export", uuid, "-"], { env: { ...process.env, ...env }, maxBuffer: 64 * MiB, encoding: "buffer" });
    assert.ok(bytes.equals(newer), `stdout: ${bytes.length} bytes of ${newer.length}`);
  });

  test("--resume continues FILE.part from its sidecar: the same bytes as the whole export; usage errors in words", async () => {
    const vdi = await newVdi("cli resume");
    ok(await hangar("vdi-import", path("disk.raw"), "--vdi", vdi));
    const uuid = await call<string>("VDI.get_uuid", vdi);
    const whole = await http(`${host.client.url}/export_raw_vdi?session_id=${host.client.session}&vdi=${uuid}&format=vhd`);
    const file = path("resumed.vhd");
    const cut = 5 * MiB + 123;
    await writeFile(`${file}.part`, whole.body.subarray(0, cut));
    const boot = (await readFile("/proc/sys/kernel/random/boot_id", "utf8")).trim();
    const sidecar = { version: 2, path: "export_raw_vdi", subject: uuid, query: { vdi: uuid, format: "vhd" }, etag: String(whole.headers.etag), bytes: cut, boot };
    await writeFile(`${file}.part.json`, JSON.stringify(sidecar));
    const run = ok(await hangar("vdi-export", uuid, file, "--resume"));
    assert.match(run.stderr, new RegExp(`resuming .* at byte ${cut}`));
    assert.ok((await readFile(file)).equals(whole.body));
    const cases: Array<[string[], RegExp]> = [
      [["vdi-import", path("disk.raw")], /needs --vdi VDI or --sr SR/],
      [["vdi-import", path("disk.raw"), "--vdi", uuid, "--format", "iso"], /--format takes raw, vhd, qcow2, vmdk, vhdx, tar/],
      [["vdi-export", uuid, path("x.vhdx")], /x\.vhdx names vhdx: exports are raw, vhd, qcow2, vmdk, tar/],
      [["vdi-export", uuid, "-", "--resume"], /--resume needs a FILE/],
    ];
    for (const [args, reason] of cases) {
      const failed = await hangar(...args);
      assert.equal(failed.code, 2, args.join(" "));
      assert.match(failed.stderr, reason, args.join(" "));
    }
  });
});
