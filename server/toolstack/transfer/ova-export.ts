// GET /export?format=ova (Hangar's): a VM as an OVA any importer takes (docs/research/ova-ovf.md §4): the OVF 1.0
// descriptor first, then a streamOptimized VMDK per disk in device order, then a SHA-256 manifest of both, as a tar
// (tar-stream: USTAR, base-256 sizes past 8 GiB, never pax). A tar member's header carries its size, so each VMDK
// is written `sized` (stored grains: its length follows from its block map, read when the writer reaches it)
// rather than compressed. Every byte depends only on the VM, its disks and the export's date (each member's
// mtime), so a resumed export (`offset` + `etag`) is made again and skips what the client has.
import { createHash } from "node:crypto";
import { Readable, type Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { pack, type Pack } from "tar-stream";
import { type DiskSource, SOURCE_BLOCK } from "../../disk/source.ts";
import { vmdkCid, vmdkLength, writeVmdk } from "../../disk/vmdk-writer.ts";
import { type OvfDriveSpec, type OvfSpec, writeOvf } from "../../ova/descriptor-writer.ts";
import { formatManifest } from "../../ova/manifest.ts";
import { datedEtag } from "../../xenapi/export-etag.ts";
import { NULL_REF, type XenRecord } from "../../xenapi/values.ts";
import type { StoredObject } from "../objects.ts";
import type { TaskControl } from "../tasks.ts";
import type { Toolstack } from "../toolstack.ts";
import { type LocatedVdi, locateVdi, vdiRecord } from "../vdi-records.ts";
import { skipBytes } from "./export.ts";
import { TransferState } from "./transfer-state.ts";
import { dataBlockMap, openVolume, readCarriedBlocks } from "./volume-io.ts";

interface OvaDisk {
  vdi: LocatedVdi;
  uuid: string;
  size: number;
  member: string;
}

export interface PreparedOvaExport {
  base: string;
  ovf: string;
  disks: OvaDisk[];
  date: Date;
  etag: string;
}

/** A member name of the VM's name: short ASCII without `/` (no importer then meets a pax header). */
function baseName(vmName: string): string {
  return vmName.replace(/[^A-Za-z0-9._-]+/g, "_").replace(/^[._]+/, "").slice(0, 60) || "vm";
}

const string = (value: unknown) => (typeof value === "string" ? value : "");
const map = (value: unknown) => (value !== null && typeof value === "object" ? (value as Record<string, string>) : {});

/** The OVA of `vm`: its descriptor, disks and ETag, dated `date` (now, or the ETag's of an export being resumed). */
export async function prepareOvaExport(ts: Toolstack, vm: StoredObject, date = new Date(Math.floor(Date.now() / 1000) * 1000)): Promise<PreparedOvaExport> {
  const record = vm.record;
  const base = baseName(string(record.name_label));
  const vbds = (await Promise.all((record.VBDs as string[]).map((ref) => ts.objects.find("VBD", ref)))).filter((v) => v !== undefined).map((v) => v.record);
  vbds.sort((a, b) => Number(a.userdevice) - Number(b.userdevice));
  const drives: OvfDriveSpec[] = [];
  const disks: OvaDisk[] = [];
  for (const vbd of vbds) {
    if (vbd.type === "CD") {
      drives.push({ kind: "cd", name: `CD/DVD drive ${drives.length + 1}` });
      continue;
    }
    const ref = string(vbd.VDI);
    if (vbd.type !== "Disk" || ref === NULL_REF || vbd.empty === true) continue;
    const vdi = await locateVdi(ts, ref);
    const vdiFields: XenRecord = await vdiRecord(ts, vdi);
    const disk = { vdi, uuid: string(vdiFields.uuid), size: Number(vdiFields.virtual_size), member: `${base}-disk${disks.length + 1}.vmdk` };
    disks.push(disk);
    drives.push({ kind: "disk", href: disk.member, capacity: disk.size, name: string(vdiFields.name_label) || `Hard Disk ${disks.length}` });
  }
  const vifs = (await Promise.all((record.VIFs as string[]).map((ref) => ts.objects.find("VIF", ref)))).filter((v) => v !== undefined).map((v) => v.record);
  vifs.sort((a, b) => Number(a.device) - Number(b.device));
  const nics = await Promise.all(vifs.map(async (vif) => ({ network: string((await ts.objects.find("network", string(vif.network)))?.record.name_label) || "VM Network", mac: string(vif.MAC) })));
  const other = map(record.other_config);
  const osId = Number(other["ovf-os-id"]);
  const spec: OvfSpec = {
    name: string(record.name_label) || "vm",
    description: string(record.name_description),
    memory: Number(record.memory_static_max),
    vcpus: Number(record.VCPUs_max),
    firmware: map(record.HVM_boot_params).firmware === "uefi" ? "uefi" : "bios",
    secureBoot: map(record.platform).secureboot === "true",
    os: { id: Number.isInteger(osId) ? osId : null, type: other["ovf-os-type"] ?? "", description: other["ovf-os-description"] ?? "" },
    drives,
    nics,
  };
  const ovf = writeOvf(spec);
  return { base, ovf, disks, date, etag: datedEtag("ho1", date, [ovf, disks.map((d) => d.uuid)]) };
}

/** Content-Disposition: `<vm name>.ova`. */
export function ovaDisposition(prepared: PreparedOvaExport): string {
  return `attachment; filename="${prepared.base}.ova"`;
}

/**
 * Writes `bytes` as a member of `archive` (tar-stream's entries are streamx streams: written here with their own
 * backpressure, not through Node's pipeline); its SHA-256.
 */
async function addMember(archive: Pack, name: string, size: number, mtime: Date, bytes: AsyncIterable<Buffer> | Buffer, signal: AbortSignal): Promise<string> {
  const hash = createHash("sha256");
  const entry = archive.entry({ name, size, mtime, mode: 0o644, uname: "root", gname: "root" });
  const ended = new Promise<void>((resolve, reject) => {
    entry.once("finish", resolve);
    entry.once("error", reject);
    entry.once("close", () => reject(new Error(`the archive closed while ${name} was written`)));
  });
  ended.catch(() => undefined);
  for await (const chunk of Buffer.isBuffer(bytes) ? [bytes] : bytes) {
    signal.throwIfAborted();
    hash.update(chunk);
    if (!entry.write(chunk)) await Promise.race([new Promise<void>((resolve) => entry.once("drain", () => resolve())), ended]);
  }
  entry.end(() => undefined);
  await ended;
  return hash.digest("hex");
}

/** Streams the OVA into `sink` (ended when done), from byte `offset`; progress by the disks' bytes. */
export async function exportOva(ts: Toolstack, control: TaskControl, prepared: PreparedOvaExport, sink: Writable, offset = 0): Promise<void> {
  const state = new TransferState(ts, control, "export");
  const { date } = prepared;
  const { signal } = control;
  const archive = pack();
  const total = prepared.disks.reduce((sum, disk) => sum + disk.size, 0);
  let before = 0;
  const write = async () => {
    const digests: Array<{ file: string; sha256: string }> = [];
    const ovfName = `${prepared.base}.ovf`;
    digests.push({ file: ovfName, sha256: await addMember(archive, ovfName, Buffer.byteLength(prepared.ovf), date, Buffer.from(prepared.ovf), signal) });
    for (const disk of prepared.disks) {
      const volume = await openVolume(ts, disk.vdi.sr, disk.vdi.key, "ro", (attachment) => state.addAttachment(attachment));
      try {
        const carried = await dataBlockMap(volume.client, disk.size, signal);
        const source: DiskSource = {
          virtualSize: disk.size,
          carried: (index) => carried[index] === 1,
          async *blocks() {
            for await (const block of readCarriedBlocks(volume.client, disk.size, carried, signal)) {
              yield block;
              if (total > 0) control.progress((before + Math.min(disk.size, (block.index + 1) * SOURCE_BLOCK)) / total);
            }
          },
        };
        const bytes = writeVmdk(source, { fileName: disk.member, cid: vmdkCid(disk.uuid), sized: true });
        digests.push({ file: disk.member, sha256: await addMember(archive, disk.member, vmdkLength(carried, disk.size), date, bytes, signal) });
      } finally {
        await volume.close();
        await state.released(volume.attachment);
      }
      before += disk.size;
    }
    const manifest = Buffer.from(formatManifest(digests));
    await addMember(archive, `${prepared.base}.mf`, manifest.length, date, manifest, signal);
    archive.finalize();
  };
  try {
    const writing = write().catch((error: unknown) => {
      archive.destroy(error as Error);
      throw error;
    });
    const stages: Array<NodeJS.ReadableStream | NodeJS.WritableStream | NodeJS.ReadWriteStream> = [Readable.from(archive as AsyncIterable<Buffer>, { objectMode: false })];
    if (offset > 0) stages.push(skipBytes(offset, undefined));
    stages.push(sink);
    await Promise.all([pipeline(stages as Parameters<typeof pipeline>[0][], { signal }), writing]);
  } finally {
    await state.undo();
  }
}
