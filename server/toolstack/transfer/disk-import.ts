// PUT /import_raw_vdi, the work: a disk image read as it arrives (raw, xapi's chunked framing, VHD, qcow2, VMDK,
// xapi's one-disk tar) and written into a VDI through its datapath's NBD export, run by run in the file's order; a
// VHDX is kept aside until complete, then converted (server/disk/vhdx.ts says why). Into a VDI the import makes,
// what the image leaves out is already zeros; into a VDI it was given, it is written as zeros (a delta leaves it
// as it was). A failure removes a VDI the import made, and says how far a given one was written.
import type { Readable } from "node:stream";
import { ByteReader } from "../../disk/byte-reader.ts";
import { readChunked } from "../../disk/chunked.ts";
import { type DiskImage, DiskImageError } from "../../disk/image.ts";
import { type PieceBuffers, readRaw } from "../../disk/raw.ts";
import { SNIFF_BYTES, sniffFormat } from "../../../lib/file-kind.ts";
import { openQcow2 } from "../../disk/qcow2.ts";
import { openDiskTar } from "../../disk/tar.ts";
import { openVhd } from "../../disk/vhd.ts";
import { openVhdx } from "../../disk/vhdx.ts";
import { openVmdk } from "../../disk/vmdk.ts";
import { createVdi, requireIdle } from "../calls/vdi.ts";
import { type AttachedSr, statSr } from "../srs.ts";
import { TASK_STEP_KEY, type TaskControl } from "../tasks.ts";
import type { Toolstack } from "../toolstack.ts";
import { announceChanges, type LocatedVdi, markOperation, vdiRecord } from "../vdi-records.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import { asImportError, importError } from "./import.ts";
import { TransferState } from "./transfer-state.ts";
import { openVolume, WINDOW, writeDiskRuns } from "./volume-io.ts";
import { coalesced, PIECE } from "../../disk/runs.ts";
import { BufferPool } from "../../buffer-pool.ts";

/** The formats /import_raw_vdi reads (`format=`, case-insensitive). */
export const DISK_IMPORT_FORMATS = ["raw", "vhd", "qcow2", "vmdk", "vhdx", "tar"] as const;
export type DiskImportFormat = (typeof DISK_IMPORT_FORMATS)[number];

/** xapi's name for a VDI it makes from an upload. */
export const IMPORTED_VDI_NAME = "Imported VDI";

export interface DiskImportOptions {
  format: DiskImportFormat;
  /** xapi's chunked framing (raw only). */
  chunked: boolean;
  /** The VDI to write into, or the SR to make one on. */
  target: { vdi: LocatedVdi } | { sr: AttachedSr };
  /** The body's length when the request says it. */
  length: number | undefined;
  /** Where a reader keeps aside what arrives before the table that places it (qcow2, VMDK), or a whole VHDX. */
  spillDir: string;
}

/** A VHDX's progress: keeping it aside is the first half, converting it the second. */
const SPOOL_SHARE = 0.5;

/** The image on `reader`, of at most `limit` bytes for raw (the VDI's size, or the body's when making one). */
async function openImage(reader: ByteReader, options: DiskImportOptions, limit: number | undefined, control: TaskControl, buffers: PieceBuffers): Promise<DiskImage> {
  const { length, spillDir } = options;
  if (options.format === "vhd") return openVhd(reader, length);
  if (options.format === "qcow2") return openQcow2(reader, { length, spillDir });
  if (options.format === "vmdk") return openVmdk(reader, { length, spillDir });
  if (options.format === "tar") return openDiskTar(reader, limit ?? fail("a tar does not say its disk's size: name the VDI to write into"));
  if (options.format === "vhdx") {
    return openVhdx(reader, {
      length,
      spillDir,
      signal: control.signal,
      onStep: (step) => void control.remember(TASK_STEP_KEY, step).catch(() => undefined),
      onSpooled: (bytes) => {
        if (length !== undefined) control.progress((SPOOL_SHARE * bytes) / length);
      },
    });
  }
  const virtualSize = limit ?? options.length;
  if (virtualSize === undefined) throw importError("a raw import into a new VDI needs the body's Content-Length: it is the VDI's size");
  if (!options.chunked && options.length !== undefined && options.length > virtualSize) throw new DiskImageError(`the body goes on past the disk's ${virtualSize} bytes`, virtualSize);
  const runs = options.chunked ? readChunked(reader, virtualSize) : readRaw(reader, virtualSize, buffers);
  // A chunked stream writes only its frames: the rest of the VDI stays as it was, as in xapi.
  return { format: "raw", virtualSize, differencing: options.chunked, runs };
}

function fail(message: string): never {
  throw importError(message);
}

/** Refuses a body whose magic names another format than the one asked for. */
async function checkMagic(reader: ByteReader, options: DiskImportOptions): Promise<void> {
  const head = await reader.peek(SNIFF_BYTES);
  if (head.length === 0) throw importError("the body is empty: send the disk image");
  if (options.chunked) return;
  const sniffed = sniffFormat(head);
  if (sniffed === "gzip" || sniffed === "zstd") throw importError(`the body is ${sniffed}-compressed (its magic number says so): send the disk image itself, decompressed`);
  if (sniffed !== undefined && sniffed !== options.format) throw importError(`the body is a ${sniffed} image (its magic number says so), not ${options.format}: import it with format=${sniffed}`);
}

/** /import_raw_vdi: answers the ref of the VDI written. */
export async function importDisk(ts: Toolstack, control: TaskControl, source: Readable, options: DiskImportOptions): Promise<string> {
  const state = new TransferState(ts, control, "disk import");
  const reader = new ByteReader(source);
  const given = "vdi" in options.target ? options.target.vdi : undefined;
  let vdi: LocatedVdi | undefined = given;
  let release = () => {};
  let written = 0;
  let image: DiskImage | undefined;
  try {
    let limit: number | undefined;
    if (given !== undefined) {
      requireIdle(ts, given);
      release = markOperation(ts, [given.ref], control.ref, "import");
      limit = Number((await vdiRecord(ts, given)).virtual_size);
    }
    await checkMagic(reader, options);
    // The pieces a raw body is read into and grains are gathered into, reused once written: a new 1 MiB buffer
    // each is a full GC every few dozen, and a mapping of its own (MALLOC_MMAP_THRESHOLD_) with its page faults.
    const pieces = new BufferPool(2 * WINDOW * PIECE);
    const ours = new WeakSet<ArrayBufferLike>();
    const buffers: PieceBuffers = {
      take: () => {
        const piece = pieces.take(PIECE);
        ours.add(piece.buffer);
        return piece;
      },
      give: (piece) => pieces.give(piece),
    };
    image = await openImage(reader, options, limit, control, buffers);
    if (given !== undefined && image.virtualSize > limit!) throw importError(`the ${image.format} image's virtual size, ${image.virtualSize} bytes, is more than the VDI's ${limit} bytes`);
    if (given === undefined) {
      const { sr } = options.target as { sr: AttachedSr };
      const free = Number((await statSr(ts, sr, { fresh: true })).free_space);
      if (image.virtualSize > free) throw new XenApiError("SR_BACKEND_FAILURE", [`the ${image.format} image's virtual size, ${image.virtualSize} bytes, is more than the ${free} bytes free on SR ${sr.uuid}`]);
      const made = await createVdi(ts, { SR: sr.ref, virtual_size: image.virtualSize, name_label: IMPORTED_VDI_NAME }, { own: (key, tx) => state.addVolume(sr.ref, key, tx) });
      vdi = { ref: made.ref, sr: made.sr, key: made.key };
      release = markOperation(ts, [made.ref], control.ref, "import");
    }
    const target = vdi!;
    const volume = await openVolume(ts, target.sr, target.key, "rw", (attachment) => state.addAttachment(attachment));
    try {
      await writeDiskRuns(volume.client, coalesced(image.runs, buffers.take), {
        zeroed: given === undefined,
        done: (data) => {
          if (ours.has(data.buffer)) pieces.give(Buffer.from(data.buffer, 0, PIECE));
        },
        onRun: (end, length) => {
          control.signal.throwIfAborted();
          written += length;
          const { virtualSize } = image!;
          if (options.format === "vhdx") control.progress(SPOOL_SHARE + ((1 - SPOOL_SHARE) * end) / virtualSize);
          else control.progress(options.length === undefined ? end / virtualSize : reader.position / options.length);
        },
      });
    } finally {
      await volume.close();
      await state.released(volume.attachment);
    }
    control.signal.throwIfAborted();
    await state.keep();
    await announceChanges(ts, target.sr.ref, { modified: [target.ref] });
    return target.ref;
  } catch (error) {
    await state.undo();
    if (control.signal.aborted) throw error;
    const failure = asImportError(error);
    if (given === undefined || written === 0) throw failure;
    const [reason = "", ...rest] = failure.params;
    throw new XenApiError(failure.code, [`${reason}; the VDI ${given.ref} keeps the ${written} bytes of the image written before the failure`, ...rest]);
  } finally {
    // Read to its end or not (a chunked stream's terminator may come before it), the body is done with: its idle
    // timer stops with it.
    source.destroy();
    await image?.close?.();
    release();
  }
}
