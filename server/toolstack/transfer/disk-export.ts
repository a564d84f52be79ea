// GET /export_raw_vdi, the work: the VDI read through its datapath (plugged read-only) and written out in the
// format asked for, as it is read, into the response with backpressure. A whole disk carries the blocks block
// status calls data (holes are never read); a delta (`base`) carries the blocks the SR's plugin says differ
// from the base (Volume.compare). Its bytes depend only on the VDI's contents, the request and the export's
// date, so a resumed export (`offset` + `etag`) is made again and skips what the client has.
import { Readable, type Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { writeQcow2 } from "../../disk/qcow2-writer.ts";
import { writeChunked, writeRaw } from "../../disk/raw-writer.ts";
import { type DiskSource, SOURCE_BLOCK } from "../../disk/source.ts";
import { TAR_PREFIX } from "../../disk/tar.ts";
import { MAX_VHD_SIZE } from "../../disk/vhd.ts";
import { writeVhd } from "../../disk/vhd-writer.ts";
import { writeVmdk } from "../../disk/vmdk-writer.ts";
import { writeXva } from "../../xva/writer.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import { datedEtag } from "../../xenapi/export-etag.ts";
import { DBG } from "../srs.ts";
import type { TaskControl } from "../tasks.ts";
import type { Toolstack } from "../toolstack.ts";
import type { LocatedVdi } from "../vdi-records.ts";
import { skipBytes } from "./export.ts";
import { TransferState } from "./transfer-state.ts";
import { dataBlockMap, openVolume, readCarriedBlocks } from "./volume-io.ts";

export const DISK_EXPORT_FORMATS = ["raw", "vhd", "qcow2", "vmdk", "tar"] as const;
export type DiskExportFormat = (typeof DISK_EXPORT_FORMATS)[number];

/** What each format goes out as: the file name's extension and the content type (xapi's where it has one). */
export const DISK_EXPORT_TYPES: Record<DiskExportFormat, string> = {
  raw: "application/octet-stream",
  vhd: "application/vhd",
  qcow2: "application/x-qemu-disk",
  vmdk: "application/x-vmdk",
  tar: "application/x-tar",
};

/** A VDI as an export names it: its uuid (the file's name), size and when it was taken. */
export interface ExportedVdi {
  vdi: LocatedVdi;
  uuid: string;
  virtualSize: number;
  snapshotTime: Date;
}

export interface PreparedDiskExport {
  source: ExportedVdi;
  base: ExportedVdi | undefined;
  format: DiskExportFormat;
  /** The export's date: written into the formats that carry one, and named by the ETag. */
  date: Date;
  etag: string;
}

/** The export, dated `date` (now, or the date of the ETag being resumed). */
export function prepareDiskExport(source: ExportedVdi, base: ExportedVdi | undefined, format: DiskExportFormat, date = new Date(Math.floor(Date.now() / 1000) * 1000)): PreparedDiskExport {
  if (format === "vhd" && source.virtualSize > MAX_VHD_SIZE) throw new XenApiError("VDI_TOO_LARGE", [source.vdi.ref, String(MAX_VHD_SIZE)]);
  return { source, base, format, date, etag: datedEtag("hd1", date, [source.uuid, source.virtualSize, base?.uuid ?? null, format]) };
}

/** Content-Disposition: `<vdi uuid>.<format>`, as xapi names it. */
export function diskExportDisposition(prepared: PreparedDiskExport): string {
  return `attachment; filename="${prepared.source.uuid}.${prepared.format}"`;
}

/** The blocks of `vdi` that differ from `base`, as the SR's plugin says (Volume.compare), 1 MiB each. */
async function changedBlockMap(vdi: LocatedVdi, base: LocatedVdi, size: number): Promise<Uint8Array> {
  let blocklist: { blocksize: number; ranges: Array<[number, number]> };
  try {
    blocklist = await vdi.sr.plugin.client.call("Volume.compare", { dbg: DBG, sr: vdi.sr.uri, key: vdi.key, key2: base.key });
  } catch (error) {
    throw new XenApiError("VDI_INCOMPATIBLE_TYPE", [base.ref, `the SR's plugin cannot say which blocks differ from the base (Volume.compare: ${(error as Error).message})`]);
  }
  const map = new Uint8Array(Math.ceil(size / SOURCE_BLOCK));
  const { blocksize } = blocklist;
  if (!(blocksize > 0)) throw new XenApiError("SR_BACKEND_FAILURE", [`Volume.compare answered a block size of ${blocksize}`]);
  for (const [start, length] of blocklist.ranges) {
    const from = Math.max(0, start * blocksize);
    const to = Math.min(size, (start + length) * blocksize);
    for (let block = Math.floor(from / SOURCE_BLOCK); block * SOURCE_BLOCK < to; block++) map[block] = 1;
  }
  // A delta with no change still carries a block (its own, equal to the base's): a tar of no block is no disk.
  if (map.length > 0 && !map.includes(1)) map[0] = 1;
  return map;
}

/** The file's bytes for `source` in the prepared format. */
function formatted(prepared: PreparedDiskExport, source: DiskSource): AsyncIterable<Buffer> | Readable {
  const { base, date } = prepared;
  const me = prepared.source;
  switch (prepared.format) {
    case "raw":
      // A delta as raw is xapi's chunked framing of the blocks that differ.
      return base === undefined ? writeRaw(source) : writeChunked(source);
    case "vhd":
      return writeVhd(source, { uuid: me.uuid, timestamp: date, ...(base === undefined ? {} : { parent: { uuid: base.uuid, name: `${base.uuid}.vhd`, timestamp: base.snapshotTime } }) }).bytes;
    case "qcow2":
      return writeQcow2(source, base === undefined ? {} : { backingFile: `${base.uuid}.qcow2`, backingFormat: "qcow2" }).bytes;
    case "vmdk":
      return writeVmdk(source, { fileName: `${me.uuid}.vmdk`, cid: vmdkCid(me.uuid), ...(base === undefined ? {} : { parent: { fileName: `${base.uuid}.vmdk`, cid: vmdkCid(base.uuid) } }) });
    case "tar": {
      const blocks = source.blocks();
      return writeXva({ ovaXml: null, disks: [{ ref: base === undefined ? TAR_PREFIX.whole : TAR_PREFIX.delta, blocks }], checksum: "xxhash", delta: base !== undefined });
    }
  }
}

/** A VMDK's content id: from the VDI's uuid, so that a delta names its base's. */
function vmdkCid(uuid: string): string {
  return uuid.replace(/-/g, "").slice(0, 8);
}

/** Streams the export into `sink` (ended when done), from byte `offset`; progress by blocks read. */
export async function exportDisk(ts: Toolstack, control: TaskControl, prepared: PreparedDiskExport, sink: Writable, offset = 0): Promise<void> {
  const state = new TransferState(ts, control, "export");
  const { vdi, virtualSize } = prepared.source;
  try {
    const volume = await openVolume(ts, vdi.sr, vdi.key, "ro", (attachment) => state.addAttachment(attachment));
    try {
      const carried = prepared.base === undefined ? await dataBlockMap(volume.client, virtualSize, control.signal) : await changedBlockMap(vdi, prepared.base.vdi, virtualSize);
      const total = carried.reduce((sum, bit) => sum + bit, 0);
      let read = 0;
      const source: DiskSource = {
        virtualSize,
        carried: (index) => carried[index] === 1,
        async *blocks() {
          for await (const block of readCarriedBlocks(volume.client, virtualSize, carried, control.signal)) {
            yield block;
            control.progress(++read / total);
          }
        },
      };
      const bytes = formatted(prepared, source);
      const stages: Array<NodeJS.ReadableStream | NodeJS.WritableStream | NodeJS.ReadWriteStream> = [bytes instanceof Readable ? bytes : Readable.from(bytes, { objectMode: false })];
      if (offset > 0) stages.push(skipBytes(offset, undefined));
      stages.push(sink);
      await pipeline(stages as Parameters<typeof pipeline>[0][], { signal: control.signal });
    } finally {
      await volume.close();
      await state.released(volume.attachment);
    }
  } finally {
    await state.undo();
  }
}
