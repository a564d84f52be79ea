// VHDX (Hyper-V, MS-VHDX): its block table and metadata may lie anywhere in the file, often after the data, and a
// log may rewrite any of them, so no reader is worth writing for a stream. The upload is kept aside in a file, its
// log replayed by Debian's `qemu-img check -r all`, and the disk read through a read-only `qemu-nbd`, by block
// status: what the disk leaves out is a zero run and is never read.
import { execFile, spawn } from "node:child_process";
import { mkdtemp, open, rm, statfs } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { STATE_ZERO } from "../nbd/backend.ts";
import { NbdClient } from "../nbd/client.ts";
import { waitForSocket } from "../nbd/socket-probe.ts";
import type { ByteReader } from "./byte-reader.ts";
import { type DiskImage, DiskImageError, type DiskRun } from "./image.ts";
import { dataRuns, PIECE, ZeroRuns } from "./runs.ts";

const run = promisify(execFile);
const MAGIC = "vhdxfile";
/** The format's own limit (MS-VHDX 2.2.2.2): 64 TiB. */
const MAX_SIZE = 64 * 1024 ** 4;
/** Reads in flight from qemu-nbd. */
const WINDOW = 4;

export interface VhdxOptions {
  /** The file's size when the request says it. */
  length?: number;
  /** Where the upload is kept until it is complete. */
  spillDir: string;
  signal: AbortSignal;
  /** What is being done, for the task (keeping the upload aside, replaying the log, converting). */
  onStep(step: string): void;
  /** Bytes of the upload kept aside so far. */
  onSpooled(bytes: number): void;
}

/** The first error line of a tool's output, for an error that says what the tool said. */
function toolSaid(error: unknown): string {
  const stderr = String((error as { stderr?: unknown }).stderr ?? "").trim();
  return (stderr.split("\n").find((line) => line.trim() !== "") ?? (error as Error).message).replace(/^qemu-img: /, "");
}

export async function openVhdx(reader: ByteReader, options: VhdxOptions): Promise<DiskImage> {
  const dir = await mkdtemp(join(options.spillDir, "hangar-vhdx-"));
  const path = join(dir, "disk.vhdx");
  const socket = join(dir, "nbd.sock");
  let daemon: ReturnType<typeof spawn> | undefined;
  let client: NbdClient | undefined;
  const close = async () => {
    await client?.close().catch(() => undefined);
    if (daemon !== undefined && daemon.exitCode === null && daemon.signalCode === null) {
      const exited = new Promise((resolve) => daemon!.once("exit", resolve));
      daemon.kill("SIGTERM");
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    options.onStep("keeping the VHDX upload aside: it is converted once complete");
    await spool(reader, path, options);
    options.onStep("replaying the VHDX log (qemu-img check -r all)");
    await run("qemu-img", ["check", "-q", "-r", "all", "-f", "vhdx", path], { signal: options.signal }).catch((error: unknown) => {
      // Exit status 3: leaked clusters only, which do not change the disk.
      if ((error as { code?: unknown }).code !== 3) throw new DiskImageError(`qemu-img cannot read the VHDX: ${toolSaid(error)}`);
    });
    const info = await run("qemu-img", ["info", "--output=json", "-f", "vhdx", path], { signal: options.signal }).catch((error: unknown) => {
      throw new DiskImageError(`qemu-img cannot read the VHDX: ${toolSaid(error)}`);
    });
    const virtualSize = Number((JSON.parse(info.stdout) as { "virtual-size"?: unknown })["virtual-size"]);
    if (!Number.isSafeInteger(virtualSize) || virtualSize <= 0 || virtualSize > MAX_SIZE) throw new DiskImageError(`qemu-img reads a virtual size of ${virtualSize} bytes: not from one byte to 64 TiB`);
    options.onStep("converting the VHDX (qemu-nbd, read-only)");
    daemon = spawn("qemu-nbd", ["--read-only", "--format=vhdx", `--socket=${socket}`, "--export-name=disk", "--shared=1", path], { stdio: "ignore" });
    await waitForSocket(socket, 10_000, options.signal);
    client = await NbdClient.connect(`nbd+unix:///disk?socket=${socket}`);
    return { format: "vhdx", virtualSize, differencing: false, runs: runs(client, virtualSize), close };
  } catch (error) {
    await close();
    throw error;
  }
}

async function spool(reader: ByteReader, path: string, options: VhdxOptions): Promise<void> {
  if (options.length !== undefined) {
    const fs = await statfs(options.spillDir);
    const free = fs.bavail * fs.bsize;
    if (options.length > free) throw new DiskImageError(`the VHDX's ${options.length} bytes do not fit in the ${free} bytes free where uploads are kept aside (${options.spillDir})`);
  }
  const file = await open(path, "w");
  try {
    const head = await reader.read(MAGIC.length, "the VHDX file identifier");
    if (head.toString("latin1") !== MAGIC) throw new DiskImageError(`no VHDX file identifier ("${MAGIC}") at byte 0`, 0);
    await file.write(head);
    for (;;) {
      options.signal.throwIfAborted();
      const piece = await reader.readUpTo(PIECE);
      if (piece.length === 0) break;
      if (options.length !== undefined && reader.position > options.length) throw new DiskImageError(`the body goes on past the file's ${options.length} bytes`, options.length);
      await file.write(piece);
      options.onSpooled(reader.position);
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOSPC") throw new DiskImageError(`no room left to keep the VHDX aside after ${reader.position} bytes (${options.spillDir})`);
    throw error;
  } finally {
    await file.close();
  }
}

/** The disk by block status: zero extents as zero runs, data read WINDOW pieces at a time. */
async function* runs(client: NbdClient, size: number): AsyncGenerator<DiskRun> {
  const zeros = new ZeroRuns(size);
  const reads: Array<{ offset: number; data: Promise<Buffer> }> = [];
  async function* drain(keep: number): AsyncGenerator<DiskRun> {
    while (reads.length > keep) {
      const next = reads.shift()!;
      yield* dataRuns(next.offset, await next.data, size);
    }
  }
  try {
    for (let offset = 0; offset < size; ) {
      for (const extent of await client.blockStatus(offset, Math.min(size - offset, 1024 ** 3))) {
        const length = Math.min(extent.length, size - offset);
        if (length <= 0) throw new DiskImageError(`qemu-nbd answered an empty extent at disk offset ${offset}`);
        if (extent.flags & STATE_ZERO) yield* zeros.add(offset, length);
        else {
          yield* zeros.flush();
          for (let at = offset; at < offset + length; at += PIECE) {
            const piece = Math.min(PIECE, offset + length - at);
            const data = client.read(at, piece);
            data.catch(() => undefined);
            reads.push({ offset: at, data });
            yield* drain(WINDOW - 1);
          }
        }
        offset += length;
        if (offset >= size) break;
      }
    }
    yield* drain(0);
    yield* zeros.flush();
  } finally {
    for (const read of reads) await read.data.catch(() => undefined);
  }
}
