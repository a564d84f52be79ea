// Helpers shared by the NBD tests: temp dirs, child processes that are always reaped, and a backend
// that tracks allocation so block status and sparse reads have something real to report.

import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, stat } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import { promisify } from "node:util";
import { STATE_HOLE, STATE_ZERO, type ExportBackend, type Extent } from "./backend.ts";
import { openRawFileBackend } from "./raw-file-backend.ts";

export { waitForSocket } from "./socket-probe.ts";

type Cleanup = (fn: () => Promise<void> | void) => void;

export async function makeTempDir(cleanup: Cleanup): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "hangar-nbd-"));
  cleanup(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Runs a command to completion; rejects with its stderr on failure. */
export async function run(command: string, args: string[]): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)(command, args, { maxBuffer: 64 * 1024 * 1024 });
    return stdout;
  } catch (error) {
    const { stderr, message } = error as { stderr?: string; message: string };
    throw new Error(`${command} ${args.join(" ")} failed: ${stderr || message}`);
  }
}

/** Starts a long-running process that is killed (and waited for) at cleanup. */
export function startProcess(cleanup: Cleanup, command: string, args: string[]): ChildProcess {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (stderr += text));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.once("exit", (code, signal) => {
    if (code !== 0 && signal === null) process.stderr.write(`${command} exited ${code}: ${stderr}\n`);
  });
  cleanup(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
    await exited;
    clearTimeout(timer);
  });
  return child;
}

/** The first line a process prints on stdout. */
export async function firstLine(child: ChildProcess): Promise<string> {
  let text = "";
  for await (const chunk of child.stdout!) {
    text += String(chunk);
    const end = text.indexOf("\n");
    if (end >= 0) return text.slice(0, end);
  }
  throw new Error(`process ended without printing a line (got ${JSON.stringify(text)})`);
}


/** A TCP listener that accepts connections and never says anything (a server stuck before its greeting); answers its port. */
export async function startMuteListener(t: TestContext): Promise<number> {
  const accepted: net.Socket[] = [];
  const server = net.createServer((socket) => accepted.push(socket));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => {
    for (const socket of accepted) socket.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return (server.address() as net.AddressInfo).port;
}

export async function fileExists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/**
 * A raw file plus an in-memory allocation bitmap (one bit per `blockSize`): writes allocate, trims and
 * hole-allowed zeroing of whole blocks deallocate. Unallocated blocks read as zeros and are reported
 * as hole+zero, which is what a sparse volume of a file SR looks like.
 */
export class AllocationTrackingBackend implements ExportBackend {
  readonly size: number;
  readonly readOnly: boolean;
  readonly blockSize: number;
  readonly #raw: ExportBackend;
  readonly #allocated: Uint8Array;

  private constructor(raw: ExportBackend, blockSize: number) {
    this.#raw = raw;
    this.size = raw.size;
    this.readOnly = raw.readOnly;
    this.blockSize = blockSize;
    this.#allocated = new Uint8Array(Math.ceil(raw.size / blockSize));
  }

  /** `allocatedBlocks`: blocks that already hold data in the file. */
  static async open(path: string, options: { readOnly: boolean; blockSize: number; allocatedBlocks?: number[] }) {
    const backend = new AllocationTrackingBackend(await openRawFileBackend(path, { readOnly: options.readOnly }), options.blockSize);
    for (const block of options.allocatedBlocks ?? []) backend.#allocated[block] = 1;
    return backend;
  }

  read(offset: number, target: Buffer): Promise<void> {
    return this.#raw.read(offset, target);
  }

  async write(offset: number, data: Buffer, options?: { fua?: boolean }): Promise<void> {
    await this.#raw.write(offset, data, options);
    this.#mark(offset, data.length, 1, false);
  }

  flush(): Promise<void> {
    return this.#raw.flush();
  }

  async trim(offset: number, length: number): Promise<void> {
    await this.#raw.writeZeroes(offset, length, { noHole: true });
    this.#mark(offset, length, 0, true);
  }

  async writeZeroes(offset: number, length: number, options: { noHole?: boolean; fua?: boolean } = {}): Promise<void> {
    await this.#raw.writeZeroes(offset, length, { noHole: true, fua: options.fua ?? false });
    if (options.noHole) this.#mark(offset, length, 1, false);
    else this.#mark(offset, length, 0, true);
  }

  async blockStatus(offset: number, length: number): Promise<Extent[]> {
    const extents: Extent[] = [];
    const end = Math.min(offset + length, this.size);
    let at = offset;
    while (at < end) {
      const block = Math.floor(at / this.blockSize);
      const blockEnd = Math.min((block + 1) * this.blockSize, end);
      const flags = this.#allocated[block] === 1 ? 0 : STATE_HOLE | STATE_ZERO;
      const last = extents[extents.length - 1];
      if (last !== undefined && last.flags === flags) last.length += blockEnd - at;
      else extents.push({ length: blockEnd - at, flags });
      at = blockEnd;
    }
    return extents;
  }

  close(): Promise<void> {
    return this.#raw.close();
  }

  /** Sets bits for blocks touched by the range; `wholeOnly` restricts to fully covered blocks. */
  #mark(offset: number, length: number, value: 0 | 1, wholeOnly: boolean): void {
    const first = wholeOnly ? Math.ceil(offset / this.blockSize) : Math.floor(offset / this.blockSize);
    const endBlock = wholeOnly ? Math.floor((offset + length) / this.blockSize) : Math.ceil((offset + length) / this.blockSize);
    for (let block = first; block < endBlock; block++) this.#allocated[block] = value;
    if (wholeOnly && offset + length === this.size && endBlock < this.#allocated.length) this.#allocated[endBlock] = value;
  }
}
