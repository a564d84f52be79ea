// Test helpers for VM import and export: archives made the way real exporters make them, raw HTTP exchanges
// (status and headers matter here, not just results), and a VDI's bytes read back through its datapath.
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { Readable } from "node:stream";
import { type OvaObject, formatOvaXml } from "../../xva/ova-xml.ts";
import { XVA_BLOCK_SIZE } from "../../xva/format.ts";
import { type XvaBlock, writeXva } from "../../xva/writer.ts";
import type { XvaChecksumKind } from "../../xva/format.ts";
import type { Toolstack } from "../toolstack.ts";
import { locateVdi } from "../vdi-records.ts";
import type { XenRecord } from "../../xenapi/values.ts";
import { exportVersion } from "./ova-records.ts";
import { openVolume } from "./volume-io.ts";

export const MiB = 1024 * 1024;

export interface TestDisk {
  size: number;
  /** Block index → its bytes (1 MiB, or less for the last); the rest reads as zeros. */
  blocks: Map<number, Buffer>;
  name?: string;
}

/** A block of recognisable bytes (seeded). */
export function patternBlock(seed: number, length = XVA_BLOCK_SIZE): Buffer {
  const block = Buffer.alloc(length);
  for (let i = 0; i < length; i += 4) block.writeUInt32LE((Math.imul(seed + 1, 2654435761) ^ i) >>> 0, i);
  return block;
}

/** The whole disk as bytes (tests use small disks). */
export function diskBytes(disk: TestDisk): Buffer {
  const bytes = Buffer.alloc(disk.size);
  for (const [index, data] of disk.blocks) data.copy(bytes, index * XVA_BLOCK_SIZE);
  return bytes;
}

/** ova.xml objects of a VM as XenServer writes them: VM, disk VBDs/VDIs on an SR, a CD on an ISO SR, one VIF. */
export function vmObjects(options: { name?: string; uuid?: string; mac?: string; disks: readonly TestDisk[]; version?: Partial<ReturnType<typeof exportVersion>> }): { objects: OvaObject[]; version: ReturnType<typeof exportVersion> } {
  const objects: OvaObject[] = [];
  let next = 1;
  const id = () => `Ref:${next++}`;
  const vbds: string[] = [];
  const sr = id();
  objects.push({ class: "SR", id: sr, snapshot: { uuid: crypto.randomUUID(), name_label: "Local storage", content_type: "user", type: "ext" } });
  for (const [n, disk] of options.disks.entries()) {
    const vdi = id();
    const vbd = id();
    vbds.push(vbd);
    objects.push({ class: "VDI", id: vdi, snapshot: { uuid: crypto.randomUUID(), name_label: disk.name ?? `disk ${n}`, name_description: "test disk", virtual_size: String(disk.size), SR: sr, type: "user", sharable: false, read_only: false, other_config: { purpose: "test" }, VBDs: [vbd] } });
    objects.push({ class: "VBD", id: vbd, snapshot: { uuid: crypto.randomUUID(), VM: "Ref:0", VDI: vdi, device: `xvd${String.fromCharCode(97 + n)}`, userdevice: String(n), bootable: n === 0, mode: "RW", type: "Disk", empty: false, other_config: {} } });
  }
  const isoSr = id();
  const iso = id();
  const cd = id();
  vbds.push(cd);
  objects.push({ class: "SR", id: isoSr, snapshot: { uuid: crypto.randomUUID(), name_label: "ISOs", content_type: "iso", type: "iso" } });
  objects.push({ class: "VDI", id: iso, snapshot: { uuid: crypto.randomUUID(), name_label: "install.iso", virtual_size: String(700 * MiB), SR: isoSr, type: "user" } });
  objects.push({ class: "VBD", id: cd, snapshot: { uuid: crypto.randomUUID(), VM: "Ref:0", VDI: iso, device: "xvdd", userdevice: "3", bootable: false, mode: "RO", type: "CD", empty: false } });
  const network = id();
  const vif = id();
  objects.push({ class: "network", id: network, snapshot: { uuid: crypto.randomUUID(), name_label: "Pool-wide network associated with eth0", bridge: "xenbr0" } });
  objects.push({ class: "VIF", id: vif, snapshot: { uuid: crypto.randomUUID(), device: "0", MAC: options.mac ?? "aa:bb:cc:00:11:22", MTU: "1500", network, VM: "Ref:0", other_config: {} } });
  const vm: XenRecord = {
    uuid: options.uuid ?? crypto.randomUUID(),
    name_label: options.name ?? "imported VM",
    name_description: "made by a test",
    power_state: "Halted",
    is_a_snapshot: false,
    is_a_template: false,
    memory_static_max: String(2 * 1024 * MiB),
    memory_dynamic_max: String(2 * 1024 * MiB),
    memory_dynamic_min: String(1024 * MiB),
    memory_static_min: String(512 * MiB),
    memory_target: String(2 * 1024 * MiB),
    VCPUs_max: "4",
    VCPUs_at_startup: "2",
    HVM_boot_params: { order: "cdn", firmware: "uefi" },
    other_config: { "mac_seed": "1f0e7c42-0000-4000-8000-000000000000" },
    VBDs: vbds,
    VIFs: [vif],
    resident_on: "OpaqueRef:5e7b7b4e-0000-4000-8000-000000000000",
  };
  // The VM need not be first (real exports put it anywhere).
  objects.splice(2, 0, { class: "VM", id: "Ref:0", snapshot: vm });
  return { objects, version: { ...exportVersion(), ...options.version } };
}

/** An XVA as a stream: ova.xml of vmObjects, then the disks' blocks (zero blocks left out but the first and last). */
export function testXva(options: { name?: string; uuid?: string; mac?: string; disks: readonly TestDisk[]; checksum?: XvaChecksumKind | null; version?: Partial<ReturnType<typeof exportVersion>> }): Readable {
  const { objects, version } = vmObjects(options);
  const vdiIds = objects.filter((o) => o.class === "VDI" && o.snapshot.type === "user" && objects.find((s) => s.id === o.snapshot.SR)?.snapshot.content_type !== "iso").map((o) => o.id);
  const disks = options.disks.map((disk, n) => ({
    ref: vdiIds[n]!,
    blocks: (async function* (): AsyncGenerator<XvaBlock> {
      const count = Math.ceil(disk.size / XVA_BLOCK_SIZE);
      for (let index = 0; index < count; index++) {
        const data = disk.blocks.get(index);
        const length = Math.min(XVA_BLOCK_SIZE, disk.size - index * XVA_BLOCK_SIZE);
        if (data !== undefined) yield { index, data };
        else if (index === 0 || index === count - 1) yield { index, data: Buffer.alloc(length) };
      }
    })(),
  }));
  return writeXva({ ovaXml: formatOvaXml({ version, objects }), disks, checksum: options.checksum === undefined ? "xxhash" : options.checksum });
}

export async function collect(stream: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

export interface HttpAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** One HTTP exchange; the body is a Buffer or a stream (sent chunked unless headers give a length). */
export function http(url: string, options: { method?: string; headers?: Record<string, string>; body?: Buffer | Readable } = {}): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    // A connection of its own: a kept-alive one the server is just closing would fail with "socket hang up".
    const request = httpRequest(url, { method: options.method ?? "GET", headers: options.headers, agent: false }, (response) => {
      collect(response).then((body) => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }), reject);
    });
    request.on("error", reject);
    if (options.body instanceof Readable) options.body.pipe(request);
    else request.end(options.body);
  });
}

/**
 * A VDI's bytes, read through its datapath's NBD export. Plugins may round a size up (the file SR to 64 KiB):
 * with `expected`, the bytes past its length must be zeros and are cut off.
 */
export async function readVdi(ts: Toolstack, vdiRef: string, expected?: TestDisk): Promise<Buffer> {
  const bytes = await readWhole(ts, vdiRef);
  if (expected === undefined) return bytes;
  if (bytes.length < expected.size) throw new Error(`the VDI has ${bytes.length} bytes, fewer than ${expected.size}`);
  if (bytes.subarray(expected.size).some((byte) => byte !== 0)) throw new Error("the VDI has data past the disk's size");
  return bytes.subarray(0, expected.size);
}

async function readWhole(ts: Toolstack, vdiRef: string): Promise<Buffer> {
  const vdi = await locateVdi(ts, vdiRef);
  const volume = await openVolume(ts, vdi.sr, vdi.key, "ro");
  try {
    return await volume.client.read(0, volume.client.size);
  } finally {
    await volume.close();
  }
}
