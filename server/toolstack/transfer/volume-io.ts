// A volume's bytes as an export or import reads and writes them: the volume plugged into the toolstack through
// its datapath plugin (datapath-session.ts) and reached over the NBD export the datapath offers. Reads skip
// holes through NBD block status, never reading them; writes leave zero blocks out, so holes stay holes.
// The export's failures are the datapath's (or the SR's) in XenAPI terms, naming the volume and its SR: a bare
// ECONNRESET in an import's IMPORT_ERROR read as a bad archive.
import { randomUUID } from "node:crypto";
import type { BufferPool } from "../../buffer-pool.ts";
import { NbdClient, NbdError } from "../../nbd/client.ts";
import { type Extent, STATE_ZERO } from "../../nbd/backend.ts";
import type { DiskRun } from "../../disk/image.ts";
import type { XvaBlock } from "../../xva/writer.ts";
import { isZeroBlock, XVA_BLOCK_SIZE } from "../../xva/format.ts";
import { type Attachment, plug, unplug } from "../datapath-session.ts";
import { type AttachedSr, DBG, requireLocal } from "../srs.ts";
import type { Toolstack } from "../toolstack.ts";
import { XenApiError } from "../../xenapi/errors.ts";

/** Blocks read ahead (or written behind) per disk: enough to keep the datapath busy while a block is sent. */
export const WINDOW = 16;
/** The most one WRITE_ZEROES asks for (its length is 32 bits). */
const ZEROES_REQUEST = 1024 ** 3;
/** Block status asked for this much at a time. */
const STATUS_SPAN = 256 * XVA_BLOCK_SIZE;

export interface OpenVolume {
  client: DatapathClient;
  attachment: Attachment;
  close(): Promise<void>;
}

/** Whose NBD export it is, for the messages of its failures. */
interface ExportOf {
  key: string;
  /** `SR "<name>" (<uuid>)` */
  sr: string;
}

/**
 * A failure of a volume's NBD export: no space (ENOSPC, which NBD servers also send for EFBIG and EDQUOT) as the
 * SR's failure, anything else as the datapath's; `lost` says the connection ended under the request.
 */
function datapathFailure(error: unknown, of: ExportOf, lost: boolean): unknown {
  if (!(error instanceof NbdError)) return error;
  if (error.errno === "ENOSPC") return new XenApiError("SR_BACKEND_FAILURE", [`${of.sr} is full: no space left for the data of volume ${of.key} (${error.message})`]);
  return new XenApiError("VDI_IO_ERROR", [`the datapath of volume ${of.key} on ${of.sr} ${lost ? "went away" : "failed"}: ${error.message}`]);
}

/** The NBD client of an open volume, whose requests fail as datapathFailure says. */
export class DatapathClient {
  readonly #nbd: NbdClient;
  readonly #of: ExportOf;

  private constructor(nbd: NbdClient, of: ExportOf) {
    this.#nbd = nbd;
    this.#of = of;
  }

  static async connect(uri: string, of: ExportOf): Promise<DatapathClient> {
    try {
      return new DatapathClient(await NbdClient.connect(uri), of);
    } catch (error) {
      throw datapathFailure(error, of, false);
    }
  }

  get size(): number {
    return this.#nbd.size;
  }

  get canFlush(): boolean {
    return this.#nbd.canFlush;
  }

  read(offset: number, length: number): Promise<Buffer> {
    return this.#named(this.#nbd.read(offset, length));
  }

  readInto(offset: number, target: Buffer): Promise<void> {
    return this.#named(this.#nbd.readInto(offset, target));
  }

  write(offset: number, data: Buffer): Promise<void> {
    return this.#named(this.#nbd.write(offset, data));
  }

  flush(): Promise<void> {
    return this.#named(this.#nbd.flush());
  }

  /** Makes [offset, offset+length) read as zeros: WRITE_ZEROES where the export has it, else written zeros. */
  async writeZeroes(offset: number, length: number): Promise<void> {
    const step = this.#nbd.canWriteZeroes ? ZEROES_REQUEST : XVA_BLOCK_SIZE;
    for (let at = offset; at < offset + length; at += step) {
      const size = Math.min(step, offset + length - at);
      await this.#named(this.#nbd.canWriteZeroes ? this.#nbd.writeZeroes(at, size) : this.#nbd.write(at, Buffer.alloc(size)));
    }
  }

  blockStatus(offset: number, length: number): Promise<Extent[]> {
    return this.#named(this.#nbd.blockStatus(offset, length));
  }

  close(): Promise<void> {
    return this.#nbd.close();
  }

  #named<T>(request: Promise<T>): Promise<T> {
    return request.catch((error: unknown) => {
      throw datapathFailure(error, this.#of, this.#nbd.failure !== null);
    });
  }
}

/**
 * Plugs the volume (read-only or read-write) and connects to its NBD export. `onAttach` hears of the attachment
 * before it is made, so a task can remember it and a later run can release it. `uris`: the volume's, when the
 * caller has them from the plugin already (no Volume.stat then).
 */
export async function openVolume(
  ts: Toolstack,
  sr: AttachedSr,
  key: string,
  mode: "ro" | "rw",
  onAttach: (attachment: Attachment) => Promise<void> = async () => {},
  uris?: readonly string[],
): Promise<OpenVolume> {
  await requireLocal(ts, sr);
  const volumeUris = uris ?? (await sr.plugin.client.call("Volume.stat", { dbg: DBG, sr: sr.uri, key })).uri;
  const { uri } = await ts.storage.datapathFor(volumeUris);
  const of: ExportOf = { key, sr: `SR "${String((await ts.objects.get("SR", sr.ref)).record.name_label)}" (${sr.uuid})` };
  const attachment: Attachment = { uri, domain: `hangar-${randomUUID()}`, mode };
  await onAttach(attachment);
  const implementations = await plug(ts, attachment);
  const nbd = implementations.find((implementation) => implementation[0] === "Nbd");
  try {
    if (nbd === undefined || nbd[0] !== "Nbd") throw new XenApiError("VDI_IO_ERROR", [`the datapath of volume ${key} on ${of.sr} offers no NBD export`]);
    const client = await DatapathClient.connect(nbd[1].uri, of);
    return {
      client,
      attachment,
      close: async () => {
        await client.close().catch(() => undefined);
        await unplug(ts, attachment);
      },
    };
  } catch (error) {
    await unplug(ts, attachment);
    throw error;
  }
}

/** The 1 MiB blocks holding data (not hole or zero), in order, from block status asked STATUS_SPAN at a time. */
async function* dataBlockIndexes(client: DatapathClient, size: number, signal: AbortSignal): AsyncGenerator<number> {
  for (let from = 0; from < size; from += STATUS_SPAN) {
    signal.throwIfAborted();
    const end = Math.min(from + STATUS_SPAN, size);
    let last = -1;
    for (let offset = from; offset < end; ) {
      const extents = await client.blockStatus(offset, end - offset);
      for (const extent of extents) {
        const length = Math.min(extent.length, end - offset);
        if (length <= 0) break;
        if ((extent.flags & STATE_ZERO) === 0) {
          for (let block = Math.max(last + 1, Math.floor(offset / XVA_BLOCK_SIZE)); block <= Math.floor((offset + length - 1) / XVA_BLOCK_SIZE); block++) yield (last = block);
        }
        offset += length;
      }
    }
  }
}

/** Which 1 MiB blocks of the whole disk hold data (1) or read as zeros (0), from block status. */
export async function dataBlockMap(client: DatapathClient, size: number, signal: AbortSignal): Promise<Uint8Array> {
  const map = new Uint8Array(Math.ceil(size / XVA_BLOCK_SIZE));
  for await (const index of dataBlockIndexes(client, size, signal)) map[index] = 1;
  return map;
}

/**
 * The blocks `indexes` names (in increasing order), read WINDOW ahead (the disk's last block may be short), into
 * buffers lent by `buffers` when given (the consumer releases each once sent).
 */
async function* readAhead(client: DatapathClient, size: number, indexes: AsyncIterator<number> | Iterator<number>, signal: AbortSignal, buffers?: BufferPool): AsyncGenerator<XvaBlock & { data: Buffer }> {
  const queue: Array<{ index: number; data: Promise<Buffer> }> = [];
  let named = true;
  const refill = async () => {
    while (queue.length < WINDOW && named) {
      const step = await indexes.next();
      if (step.done === true) {
        named = false;
        break;
      }
      const index = step.value;
      const length = Math.min(XVA_BLOCK_SIZE, size - index * XVA_BLOCK_SIZE);
      const target = buffers?.lend(length);
      const data = target === undefined ? client.read(index * XVA_BLOCK_SIZE, length) : client.readInto(index * XVA_BLOCK_SIZE, target).then(() => target);
      data.catch(() => undefined); // awaited in order below; a failure surfaces there
      queue.push({ index, data });
    }
  };
  try {
    await refill();
    while (queue.length > 0) {
      signal.throwIfAborted();
      const { index, data } = queue.shift()!;
      const block = await data;
      await refill();
      yield { index, data: block };
    }
  } finally {
    for (const { data } of queue) await data.catch(() => undefined);
  }
}

/** The blocks `carried` names (1), read WINDOW ahead in index order. */
export function readCarriedBlocks(client: DatapathClient, size: number, carried: Uint8Array, signal: AbortSignal): AsyncGenerator<{ index: number; data: Buffer }> {
  const indexes = (function* () {
    for (let index = 0; index < carried.length; index++) if (carried[index] === 1) yield index;
  })();
  return readAhead(client, size, indexes, signal);
}

/**
 * The disk's blocks for an XVA: blocks holding data, plus the first and last always (compat-notes §2).
 * Blocks that block status calls data but read as zeros are left out too. Reads run WINDOW ahead, into
 * buffers lent by `buffers` when given (the consumer releases each block's data there once sent).
 */
export async function* readDiskBlocks(client: DatapathClient, size: number, signal: AbortSignal, buffers?: BufferPool): AsyncGenerator<XvaBlock, void, undefined> {
  if (size === 0) {
    yield { index: 0, data: Buffer.alloc(0) };
    return;
  }
  const lastIndex = Math.ceil(size / XVA_BLOCK_SIZE) - 1;
  const wanted = async function* () {
    yield 0;
    for await (const index of dataBlockIndexes(client, size, signal)) if (index !== 0 && index !== lastIndex) yield index;
    if (lastIndex !== 0) yield lastIndex;
  };
  for await (const block of readAhead(client, size, wanted(), signal, buffers)) {
    if (block.index === 0 || block.index === lastIndex || !isZeroBlock(block.data)) yield block;
    else buffers?.release(block.data);
  }
}

/**
 * Writes runs at their offsets, WINDOW in flight; then flushes. Into a `zeroed` target (a new volume, which reads
 * zeros) zero runs and zero blocks are left out, so holes stay holes; into any other they are written as zeros.
 * Each data buffer goes to `done` once written (or skipped), for reuse.
 */
export async function writeDiskRuns(
  client: DatapathClient,
  runs: AsyncIterable<DiskRun>,
  options: { zeroed: boolean; onRun: (end: number, length: number) => void; done?: (data: Buffer) => void },
): Promise<void> {
  const inFlight = new Set<Promise<void>>();
  let failure: unknown;
  const send = (request: Promise<void>) => {
    const sent = request.catch((error: unknown) => {
      failure ??= error;
    });
    inFlight.add(sent);
    void sent.finally(() => inFlight.delete(sent));
  };
  for await (const run of runs) {
    if (failure !== undefined) break;
    const length = "data" in run ? run.data.byteLength : run.zeros;
    const zeros = !("data" in run) || isZeroBlock(run.data);
    if ("data" in run && zeros) options.done?.(run.data);
    if (zeros) {
      if (!options.zeroed && length > 0) send(client.writeZeroes(run.offset, length));
    } else {
      const { data } = run as { data: Buffer };
      send(client.write(run.offset, data).then(() => options.done?.(data)));
    }
    if (inFlight.size >= WINDOW) await Promise.race(inFlight);
    options.onRun(run.offset + length, length);
  }
  await Promise.all(inFlight);
  if (failure !== undefined) throw failure;
  // A datapath without FLUSH writes through.
  if (client.canFlush) await client.flush();
}
