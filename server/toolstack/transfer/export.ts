// GET /export and /export_metadata, the work itself: ova.xml with the VM's full records, then each disk read
// through its datapath (plugged read-only, holes skipped by block status) as 1 MiB blocks with checksums,
// optionally compressed on all cores, into the response with backpressure: a client that stops reading holds
// the export, never the service's memory.
import { Transform, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { BufferPool } from "../../buffer-pool.ts";
import { datedEtag } from "../../xenapi/export-etag.ts";
import { type Compression, createParallelCompressor } from "../../xva/compression.ts";
import { XVA_BLOCK_SIZE, type XvaChecksumKind } from "../../xva/format.ts";
import { formatOvaXml } from "../../xva/ova-xml.ts";
import { type XvaBlock, writeXva } from "../../xva/writer.ts";
import type { StoredObject } from "../objects.ts";
import type { TaskControl } from "../tasks.ts";
import type { Toolstack } from "../toolstack.ts";
import { describeVm, type ExportDisk, type VmExport } from "./ova-records.ts";
import { TransferState } from "./transfer-state.ts";
import { openVolume, readDiskBlocks } from "./volume-io.ts";

/** Read buffers per export, each reused once the response has sent it: the 16 blocks read ahead, those waiting in the archive stream (4 MiB) and being sent. */
const READ_BUFFERS = 24;

export interface ExportOptions {
  compression: Compression | null;
  checksum: XvaChecksumKind | null;
  /** Only ova.xml (/export_metadata). */
  metadataOnly: boolean;
}

/** An export ready to stream: its ova.xml and disks, and the ETag that names exactly these bytes. */
export interface PreparedExport {
  described: VmExport;
  ovaXml: string;
  etag: string;
  options: ExportOptions;
}

/**
 * Describes the export. Its bytes depend only on ova.xml (whose date is the export's), the options and the
 * disks' contents, so the same date gives the same bytes while the VM is unchanged: the ETag carries that
 * date, and a resumed export (`offset` + `etag`) is made again from it and checked against it.
 */
export async function prepareExport(ts: Toolstack, vm: StoredObject, options: ExportOptions, date = new Date(Math.floor(Date.now() / 1000) * 1000)): Promise<PreparedExport> {
  const described = await describeVm(ts, vm, date);
  const ovaXml = formatOvaXml(described.ova);
  return { described, ovaXml, etag: datedEtag("hx1", date, [ovaXml, options]), options };
}

/** A disk's blocks, its volume plugged when the writer reaches it and released when it is done (or abandoned). */
async function* diskBlocks(
  ts: Toolstack,
  control: TaskControl,
  state: TransferState,
  disk: ExportDisk,
  buffers: BufferPool | undefined,
  progress: (bytes: number) => void,
): AsyncGenerator<XvaBlock, void, undefined> {
  const volume = await openVolume(ts, disk.vdi.sr, disk.vdi.key, "ro", (attachment) => state.addAttachment(attachment));
  try {
    for await (const block of readDiskBlocks(volume.client, disk.size, control.signal, buffers)) {
      yield block;
      progress(block.index * XVA_BLOCK_SIZE + block.data.byteLength);
    }
  } finally {
    await volume.close();
    await state.released(volume.attachment);
  }
}

/** Drops the first `count` bytes of a stream (a resumed export: the client has them); a chunk dropped whole goes back to `buffers`. */
export function skipBytes(count: number, buffers: BufferPool | undefined): Transform {
  let left = count;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      if (left >= chunk.length) {
        left -= chunk.length;
        buffers?.release(chunk);
        return done();
      }
      const rest = chunk.subarray(left);
      left = 0;
      done(null, rest);
    },
  });
}

/**
 * `sink` as the end of the export's pipeline: each chunk goes back to `buffers` once the socket has taken it
 * (a write's callback; writes end in order, so a batch is done with its last).
 */
function releasingSink(sink: Writable, buffers: BufferPool): Writable {
  const sent = (chunks: Buffer[], done: (error?: Error | null) => void) => (error?: Error | null) => {
    if (error) return done(error);
    for (const chunk of chunks) buffers.release(chunk);
    done();
  };
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      sink.write(chunk, sent([chunk], done));
    },
    writev(entries, done) {
      const chunks = entries.map((entry) => entry.chunk as Buffer);
      for (const chunk of chunks.slice(0, -1)) sink.write(chunk);
      sink.write(chunks.at(-1)!, sent(chunks, done));
    },
    final(done) {
      sink.end(() => done());
    },
    destroy(error, done) {
      if (error !== null) sink.destroy(error);
      done(error);
    },
  });
}

/** Streams the export into `sink` (ended when done), from byte `offset`; progress by disk position. */
export async function exportVm(ts: Toolstack, control: TaskControl, prepared: PreparedExport, sink: Writable, offset = 0): Promise<void> {
  const state = new TransferState(ts, control, "export");
  const { options } = prepared;
  try {
    const disks = options.metadataOnly ? [] : prepared.described.disks;
    const total = disks.reduce((sum, disk) => sum + disk.size, 0);
    let before = 0;
    // Blocks come back once sent, or once the compressor has copied them (a fresh 1 MiB buffer per block is a
    // mapping of its own, faulted in page by page: most of a compressed export's system time, measured).
    const buffers = new BufferPool(READ_BUFFERS * XVA_BLOCK_SIZE, { size: XVA_BLOCK_SIZE, count: READ_BUFFERS });
    const sources = disks.map((disk) => ({
      ref: disk.id,
      blocks: (async function* () {
        yield* diskBlocks(ts, control, state, disk, buffers, (end) => total > 0 && control.progress((before + Math.min(end, disk.size)) / total));
        before += disk.size;
      })(),
    }));
    const archive = writeXva({ ovaXml: prepared.ovaXml, disks: sources, checksum: options.checksum });
    const stages: Array<NodeJS.ReadableStream | NodeJS.WritableStream | NodeJS.ReadWriteStream> = [archive];
    if (options.compression !== null) stages.push(createParallelCompressor(options.compression, { consumed: (chunk) => buffers.release(chunk) }));
    if (offset > 0) stages.push(skipBytes(offset, buffers));
    stages.push(options.compression === null ? releasingSink(sink, buffers) : sink);
    await pipeline(stages as Parameters<typeof pipeline>[0][], { signal: control.signal });
  } finally {
    await state.undo();
  }
}

/** Content-Disposition of an export: `<vm name>.xva` (compressed or not: importers sniff), ASCII-safe with an RFC 5987 UTF-8 form. */
export function exportDisposition(vmName: string): string {
  const base = vmName.replace(/[\\/:*?"<>|\x00-\x1f\x7f]+/g, "_").trim() || "export";
  const ascii = base.replace(/[^\x20-\x7e]/g, "_");
  return `attachment; filename="${ascii}.xva"; filename*=UTF-8''${encodeURIComponent(`${base}.xva`)}`;
}
