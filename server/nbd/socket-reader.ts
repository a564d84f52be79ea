// Exact-length reads over a socket, for a sequential protocol parser, without Node's 'data' events.
// The socket reads through net's `onread` option: the kernel copies into a reusable scratch buffer, and
// while a large payload is awaited with nothing else buffered, straight into that payload's own buffer.
// That avoids a 64 KiB allocation plus a stream push per read (measured ~3x cheaper per byte).
// Backpressure: when enough unread data sits in the scratch buffer and nobody waits, reading stops, so
// the peer is held back by flow control instead of us buffering.

import net from "node:net";

interface PendingFill {
  target: Buffer;
  wanted: number;
  filled: number;
  /** When set, bytes are dropped instead of stored (skipping a payload). */
  discard: boolean;
  resolve: () => void;
  reject: (error: Error) => void;
}

/** Largest single read into the scratch buffer. */
const READ_SIZE = 256 * 1024;
/** Unread bytes at which reading stops while no read is pending. */
const HIGH_WATER = 512 * 1024;
/** Room for HIGH_WATER plus two reads, so a read always has READ_SIZE of space after compaction. */
const SCRATCH_SIZE = HIGH_WATER + 2 * READ_SIZE;
/** Payload remainders at least this large are read in place instead of through the scratch buffer. */
const DIRECT_MIN = 32 * 1024;
/**
 * After a large fill, the stream is likely "small header, large payload" (NBD writes, read replies):
 * reading ahead would pull most of the next payload through the scratch buffer. So for this many small
 * fills after a large one we read exactly what is wanted, letting the payload that follows go in place.
 */
const EXACT_READS_AFTER_LARGE = 4;

const EMPTY = Buffer.alloc(0);

/** The libuv stream handle behind a net.Socket (not in Node's public types). */
interface StreamHandle {
  reading: boolean;
  readStop(): number;
}

export class SocketReader {
  #socket: net.Socket | null = null;
  #scratch = Buffer.allocUnsafeSlow(SCRATCH_SIZE);
  #start = 0; // unread bytes are #scratch[#start, #end)
  #end = 0;
  #direct = false; // the last buffer handed to the kernel is the pending target
  #smallFillsSinceLarge = EXACT_READS_AFTER_LARGE;
  #pending: PendingFill | null = null;
  #failure: Error | null = null;

  private constructor() {}

  /** Connects a socket that reads through a new SocketReader. */
  static connect(options: net.NetConnectOpts): Promise<{ socket: net.Socket; reader: SocketReader }> {
    const reader = new SocketReader();
    return new Promise((resolve, reject) => {
      const socket = net.connect({ ...options, onread: reader.#onread });
      socket.once("error", reject);
      socket.once("connect", () => {
        socket.off("error", reject);
        reader.#attach(socket);
        resolve({ socket, reader });
      });
    });
  }

  /**
   * Takes over a connected socket (accepted by a net.Server with `pauseOnConnect`, or received over an
   * IPC channel) so that it reads through a SocketReader. Node offers `onread` only when a socket is
   * created, so the OS handle is moved into a new net.Socket; the old wrapper is destroyed without
   * closing the handle, which keeps its net.Server's connection count right. Bytes the old wrapper
   * already buffered are carried over.
   */
  static adopt(original: net.Socket, options: { allowHalfOpen: boolean }): { socket: net.Socket; reader: SocketReader } {
    const wrapper = original as unknown as { _handle: StreamHandle | null };
    const handle = wrapper._handle;
    if (handle === null || original.connecting || original.destroyed) throw new Error("can only adopt a connected socket");
    const reader = new SocketReader();
    const early = original.read() as Buffer | null;
    if (early !== null) reader.#store(early);
    handle.readStop();
    handle.reading = false;
    wrapper._handle = null;
    original.destroy();
    // `handle` is how Node itself wraps existing handles (child_process, cluster); it is not in the typings.
    const construct = { handle, readable: true, writable: true, allowHalfOpen: options.allowHalfOpen, onread: reader.#onread };
    const socket = new net.Socket(construct as unknown as net.SocketConstructorOpts);
    reader.#attach(socket);
    return { socket, reader };
  }

  readonly #onread: net.OnReadOpts = {
    buffer: () => this.#nextBuffer(),
    callback: (bytes: number) => this.#onRead(bytes),
  };

  /** Bytes received but not yet consumed. */
  get buffered(): number {
    return this.#end - this.#start;
  }

  /** Exactly `n` bytes (a copy) if they are already buffered, else null (no promise on the hot path). */
  tryRead(n: number): Buffer | null {
    if (this.#pending !== null || this.buffered < n) return null;
    const out = Buffer.allocUnsafe(n);
    this.#scratch.copy(out, 0, this.#start, this.#start + n);
    this.#start += n;
    return out;
  }

  read(n: number): Promise<Buffer> {
    const ready = this.tryRead(n);
    if (ready !== null) return Promise.resolve(ready);
    const target = Buffer.allocUnsafe(n);
    return this.readInto(target).then(() => target);
  }

  /** Fills `target` completely with the next bytes of the stream. */
  readInto(target: Buffer): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.fill(target, resolve, reject)) resolve();
    });
  }

  /**
   * Callback form of readInto for parsers that must react within the read that completed their data
   * (so their next buffer can be read in place). Returns true when `target` was filled right away, in
   * which case no callback runs; otherwise exactly one callback runs later, from a socket read.
   */
  fill(target: Buffer, onFilled: () => void, onFailed: (error: Error) => void): boolean {
    return this.#fill(target, false, target.length, onFilled, onFailed);
  }

  /** Like fill(), but consumes and drops `n` bytes without holding them in memory. */
  skip(n: number, onSkipped: () => void, onFailed: (error: Error) => void): boolean {
    return this.#fill(EMPTY, true, n, onSkipped, onFailed);
  }

  #attach(socket: net.Socket): void {
    this.#socket = socket;
    socket.on("end", () => this.#fail(new Error("connection closed by peer")));
    socket.on("close", () => this.#fail(new Error("connection closed")));
    socket.on("error", (error: Error) => this.#fail(error));
  }

  #fill(target: Buffer, discard: boolean, wanted: number, resolve: () => void, reject: (error: Error) => void): boolean {
    if (this.#pending !== null) throw new Error("SocketReader: concurrent reads");
    const pending: PendingFill = { target, wanted, filled: 0, discard, resolve, reject };
    this.#drainInto(pending);
    if (pending.filled === wanted) {
      this.#countFill(wanted);
      return true;
    }
    if (this.#failure !== null) {
      reject(this.#failure);
      return false;
    }
    this.#pending = pending;
    this.#socket?.resume();
    return false;
  }

  /** Where the kernel writes next: called by net once at start and after every read. */
  #nextBuffer(): Buffer {
    const pending = this.#pending;
    if (pending !== null && !pending.discard && this.buffered === 0 && pending.wanted - pending.filled >= DIRECT_MIN) {
      this.#direct = true;
      return pending.target.subarray(pending.filled, pending.wanted);
    }
    this.#direct = false;
    if (this.buffered === 0) {
      this.#start = this.#end = 0;
    } else if (this.#scratch.length - this.#end < READ_SIZE) {
      this.#scratch.copyWithin(0, this.#start, this.#end);
      this.#end -= this.#start;
      this.#start = 0;
    }
    const exact = pending !== null && this.#smallFillsSinceLarge < EXACT_READS_AFTER_LARGE;
    return this.#scratch.subarray(this.#end, this.#end + (exact ? pending.wanted - pending.filled : READ_SIZE));
  }

  /** Returning false makes net stop reading (our pause). */
  #onRead(bytes: number): boolean {
    const pending = this.#pending;
    if (this.#direct) {
      pending!.filled += bytes;
    } else {
      this.#end += bytes;
      if (pending !== null) this.#drainInto(pending);
    }
    if (pending !== null && pending.filled === pending.wanted) {
      this.#pending = null;
      this.#countFill(pending.wanted);
      pending.resolve();
    }
    return this.#pending !== null || this.buffered < HIGH_WATER;
  }

  #countFill(size: number): void {
    this.#smallFillsSinceLarge = size >= DIRECT_MIN ? 0 : this.#smallFillsSinceLarge + 1;
  }

  /** Moves buffered bytes into the pending fill, as many as it still wants. */
  #drainInto(pending: PendingFill): void {
    const count = Math.min(this.buffered, pending.wanted - pending.filled);
    if (!pending.discard) this.#scratch.copy(pending.target, pending.filled, this.#start, this.#start + count);
    this.#start += count;
    pending.filled += count;
  }

  /** Puts bytes into the scratch buffer as if they had been read (used when adopting a socket). */
  #store(bytes: Buffer): void {
    if (bytes.length > this.#scratch.length) this.#scratch = Buffer.allocUnsafeSlow(bytes.length + SCRATCH_SIZE);
    bytes.copy(this.#scratch, 0);
    this.#end = bytes.length;
  }

  #fail(error: Error): void {
    if (this.#failure === null) this.#failure = error;
    const pending = this.#pending;
    this.#pending = null;
    pending?.reject(this.#failure);
  }
}
