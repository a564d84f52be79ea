// Data access to a volume for datapaths: an ExportBackend reading through the layer chain and writing,
// copy-on-write, into the top layer (or into a throw-away overlay layer for non-persistent datapaths).
//
// Durability order on flush: CBT bits, then the data file, then the map pages captured *before* the data
// fsync — so a cluster is never marked DATA on disk unless its bytes are, and a crash only loses writes
// that were not flushed. A CBT log is marked "dirty" while a writer has it open; one left dirty by a crash
// counts as "every block changed".
import fs from "node:fs";
import type { Extent, ExportBackend } from "../../nbd/backend.ts";
import { STATE_HOLE, STATE_ZERO } from "../../nbd/backend.ts";
import { CLUSTER_SIZE, cbtLogFile, layerFiles } from "./layout.ts";
import { ABSENT, DATA, ZERO, findSource, type ClusterState } from "./cluster-map.ts";
import { readCbtSync, requireCbtLog, type CbtBitmap } from "./cbt-log.ts";
import { closeFd, fdatasync, readFull, writeFull, writePages } from "./file-io.ts";
import { ClusterLocks } from "./cluster-locks.ts";
import { closeLayerSync, openLayers, type OpenLayer } from "./open-layers.ts";
import { connectSr, statement, transact, type SrConnection, type VolumeRow } from "./db.ts";
import { cancelMergesOf, chainOf, deleteUnreferencedLayers, insertLayer, markStray, unlinkLayerFiles } from "./layers.ts";
import { deleteHandle, insertHandle, liveHandles, type HandleRow } from "./handles.ts";
import { requireVolume } from "./volume-records.ts";
import { activatedElsewhere, invalid } from "./errors.ts";
import { isAlive, localHostId, type ProcessIdentity } from "./liveness.ts";
import { recordIo, startIoRecording, stopIoRecording } from "./stats.ts";

/** Largest single read or write issued while copying clusters around (materialize). */
const COPY_CHUNK = 4 * 1024 * 1024;
/** block_status answers at most this many clusters (4 GiB); NBD clients ask again for the rest. */
const BLOCK_STATUS_CLUSTERS = 65_536;
const PAUSE_POLL_MS = 20;
const ALLOCATION_SYNC_MS = 5000;
/**
 * After this many bytes written, the data file is synced in the background (write-behind): a flush then has
 * only the last few MiB left, not a whole import's dirty pages (a 2 GiB import's final flush took 0.5-1 s).
 */
const WRITE_BEHIND_BYTES = 64 * 1024 * 1024;

export interface OpenVolumeDataOptions {
  /** Refuse writes (default false). */
  readOnly?: boolean;
  /** Host uuid of the caller, checked against activations (default: localHostId()). */
  host?: string;
  /** Put writes into a temporary layer thrown away on close (non-persistent datapath). */
  overlay?: boolean;
}

/** An open volume: the NBD export backend plus what the datapath may want to know. */
export interface VolumeData extends ExportBackend {
  readonly key: string;
  readonly clusterSize: number;
}

interface OpenCbt {
  id: number;
  fd: number;
  bitmap: CbtBitmap;
}

type Purpose = "read" | "write" | "overlay" | "materialize";

interface Run {
  /** Index in the chain of the layer holding the run, or -1 for zeros. */
  source: number;
  start: number;
  end: number;
}

/**
 * Claims the right to write `layer` of `volume`: refused while the volume is activated read-write on another
 * host or written by another live handle; cancels a GC merge of that layer. Runs inside a transaction.
 */
function claimWrite(conn: SrConnection, volume: VolumeRow, layer: number, host: string): void {
  const elsewhere = statement(
    conn,
    "SELECT host FROM activations WHERE volume = ? AND mode = 'rw' AND host <> ? LIMIT 1",
  ).get(volume.id, host) as { host: string } | undefined;
  if (elsewhere) throw activatedElsewhere(elsewhere.host, volume.key);
  const writers = liveHandles(
    conn,
    "(volume = ? AND purpose IN ('write', 'overlay', 'materialize')) OR write_layer = ?",
    volume.id,
    layer,
  );
  const writer = writers[0];
  if (writer) {
    if (writer.host !== host) throw activatedElsewhere(writer.host, volume.key);
    throw invalid("volume_in_use", `volume ${volume.key} is already open for writing by process ${writer.pid}`);
  }
  cancelMergesOf(conn, layer);
}

class VolumeDataHandle implements VolumeData {
  readonly key: string;
  readonly clusterSize = CLUSTER_SIZE;
  readonly readOnly: boolean;
  readonly size: number;
  private readonly conn: SrConnection;
  private readonly purpose: Purpose;
  private readonly handleId: number;
  private chain: OpenLayer[];
  private readonly retired: OpenLayer[] = [];
  private cbt: OpenCbt | null;
  private readonly locks = new ClusterLocks();
  private inflight = 0;
  private readonly drainWaiters: Array<() => void> = [];
  private gate: { promise: Promise<void>; open: () => void } | null = null;
  private dataDirty = false;
  /** Whether the written layer's file held bytes outside DATA clusters before this handle, or now does. */
  private strayBefore: boolean;
  private droppedData = false;
  private flushing: Promise<void> = Promise.resolve();
  /** Bytes written since the data file was last synced (by write-behind or a flush). */
  private unsynced = 0;
  /** The write-behind sync in flight, and the failure of one, which the next flush reports. */
  private behind: Promise<void> | null = null;
  private behindError: unknown = null;
  private lastAllocationSync = Date.now();
  private syncedAllocation: number;
  private timer: NodeJS.Timeout | null = null;
  private polling = false;
  private closed = false;

  constructor(init: {
    conn: SrConnection;
    key: string;
    purpose: Purpose;
    handleId: number;
    size: number;
    chain: OpenLayer[];
    cbt: OpenCbt | null;
    strayBefore: boolean;
  }) {
    this.conn = init.conn;
    this.key = init.key;
    this.purpose = init.purpose;
    this.readOnly = init.purpose === "read";
    this.handleId = init.handleId;
    this.size = init.size;
    this.chain = init.chain;
    this.cbt = init.cbt;
    this.strayBefore = init.strayBefore;
    this.syncedAllocation = init.chain[0]!.map.allocated;
    startIoRecording(this.conn.path);
    if (this.purpose === "write") {
      this.timer = setInterval(() => void this.pollPause(), PAUSE_POLL_MS).unref();
    }
  }

  private get top(): OpenLayer {
    return this.chain[0]!;
  }

  private sourceOf(cluster: number): number {
    return findSource(this.chain, cluster);
  }

  private checkOpen(): void {
    if (this.closed) throw invalid("closed", `volume ${this.key} is closed`);
  }

  private checkRange(offset: number, length: number): void {
    if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0 || offset + length > this.size) {
      throw invalid("out_of_range", `range ${offset}+${length} is outside volume ${this.key} (${this.size} bytes)`);
    }
  }

  private checkWritable(): void {
    if (this.readOnly) throw invalid("read_only", `volume ${this.key} is open read-only`);
  }

  /** Tracks a mutating operation: waits while a pause is in progress, lets the pause wait for it to end. */
  private async mutate<T>(operation: () => Promise<T>): Promise<T> {
    while (this.gate) await this.gate.promise;
    this.checkOpen();
    this.inflight++;
    try {
      return await operation();
    } finally {
      if (--this.inflight === 0) for (const wake of this.drainWaiters.splice(0)) wake();
    }
  }

  private drained(): Promise<void> {
    if (this.inflight === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  async read(offset: number, target: Buffer): Promise<void> {
    this.checkOpen();
    this.checkRange(offset, target.length);
    const started = process.hrtime.bigint();
    await this.readRange(offset, target);
    recordIo(this.conn.path, "read", target.length, started);
  }

  /** Runs of adjacent clusters of [offset, end) held by the same layer (source -1: reads as zeros). */
  private runsOf(offset: number, end: number): Run[] {
    const runs: Run[] = [];
    for (let position = offset; position < end; ) {
      const cluster = Math.floor(position / CLUSTER_SIZE);
      const source = this.sourceOf(cluster);
      let runEnd = Math.min(end, (cluster + 1) * CLUSTER_SIZE);
      while (runEnd < end && this.sourceOf(runEnd / CLUSTER_SIZE) === source) runEnd = Math.min(end, runEnd + CLUSTER_SIZE);
      runs.push({ source, start: position, end: runEnd });
      position = runEnd;
    }
    return runs;
  }

  /**
   * Reads through the chain with few system calls. A request served by several layers is read, when one
   * layer holds at least half of it, by one read of the whole range from that layer followed by the other
   * runs laid over it: two sequential calls beat many parallel ones (thread hand-offs, not bytes, are what
   * cost here). Otherwise each run is read on its own, all in parallel.
   */
  private async readRange(offset: number, target: Buffer): Promise<void> {
    const runs = this.runsOf(offset, offset + target.length);
    const bytes = new Map<number, number>();
    for (const run of runs) bytes.set(run.source, (bytes.get(run.source) ?? 0) + run.end - run.start);
    let primary = -1;
    for (const [source, count] of bytes) if (source >= 0 && (primary < 0 || count > bytes.get(primary)!)) primary = source;
    if (runs.length > 1 && primary >= 0 && 2 * bytes.get(primary)! >= target.length) {
      await readFull(this.chain[primary]!.fd, target, 0, target.length, offset);
      await Promise.all(runs.filter((run) => run.source !== primary).map((run) => this.readRun(run, offset, target)));
    } else {
      await Promise.all(runs.map((run) => this.readRun(run, offset, target)));
    }
  }

  private async readRun(run: Run, offset: number, target: Buffer): Promise<void> {
    if (run.source < 0) target.fill(0, run.start - offset, run.end - offset);
    else await readFull(this.chain[run.source]!.fd, target, run.start - offset, run.end - run.start, run.start);
  }

  async write(offset: number, data: Buffer, options: { fua?: boolean } = {}): Promise<void> {
    this.checkOpen();
    this.checkWritable();
    this.checkRange(offset, data.length);
    if (data.length === 0) return;
    const started = process.hrtime.bigint();
    await this.mutate(() => this.writeRange(offset, data));
    recordIo(this.conn.path, "write", data.length, started);
    if (options.fua) await this.flushNow();
  }

  private async writeRange(offset: number, data: Buffer): Promise<void> {
    const end = offset + data.length;
    const first = Math.floor(offset / CLUSTER_SIZE);
    const last = Math.floor((end - 1) / CLUSTER_SIZE);
    this.markChanged(first, last);
    const release = await this.locks.acquire(first, last);
    try {
      const top = this.top;
      // A partially written cluster that the top layer lacks is first completed from the chain below.
      const needsCopy = (cluster: number) =>
        top.map.get(cluster) !== DATA && (offset > cluster * CLUSTER_SIZE || end < (cluster + 1) * CLUSTER_SIZE);
      const head = needsCopy(first) ? await this.clusterWith(first, offset, data) : null;
      const tail = last !== first && needsCopy(last) ? await this.clusterWith(last, offset, data) : null;
      const middleStart = head ? (first + 1) * CLUSTER_SIZE : offset;
      const middleEnd = tail ? last * CLUSTER_SIZE : end;
      const buffers: Buffer[] = [];
      if (head) buffers.push(head);
      if (middleEnd > middleStart) buffers.push(data.subarray(middleStart - offset, middleEnd - offset));
      if (tail) buffers.push(tail);
      await writeFull(top.fd, buffers, head ? first * CLUSTER_SIZE : offset);
      for (let cluster = first; cluster <= last; cluster++) top.map.set(cluster, DATA);
      this.dataDirty = true;
      this.writeBehind(top.fd, end - offset);
    } finally {
      release();
    }
  }

  /** The full content of `cluster` as the chain shows it, overlaid with the part of `data` (at `offset`) inside it. */
  private async clusterWith(cluster: number, offset: number, data: Buffer): Promise<Buffer> {
    const start = cluster * CLUSTER_SIZE;
    const buffer = Buffer.alloc(CLUSTER_SIZE);
    await this.readRange(start, buffer);
    const from = Math.max(offset, start);
    const to = Math.min(offset + data.length, start + CLUSTER_SIZE);
    data.copy(buffer, from - start, from - offset, to - offset);
    return buffer;
  }

  private markChanged(first: number, last: number): void {
    this.cbt?.bitmap.setRange(first, last);
  }

  async flush(): Promise<void> {
    this.checkOpen();
    await this.flushNow();
  }

  private flushNow(): Promise<void> {
    const run = this.flushing.then(() => this.persist());
    this.flushing = run.catch(() => undefined);
    return run;
  }

  /** Starts a background sync of the data file once WRITE_BEHIND_BYTES were written since the last (none for an overlay: it is thrown away). */
  private writeBehind(fd: number, bytes: number): void {
    this.unsynced += bytes;
    if (this.unsynced < WRITE_BEHIND_BYTES || this.behind !== null || this.purpose === "overlay") return;
    this.unsynced = 0;
    this.behind = fdatasync(fd)
      .catch((error: unknown) => {
        // The kernel reports a write-back error once: kept for the flush, which must not succeed.
        this.behindError ??= error;
      })
      .finally(() => (this.behind = null));
  }

  private async persist(): Promise<void> {
    if (this.readOnly || this.purpose === "overlay") return;
    await this.behind;
    if (this.behindError !== null) {
      const error = this.behindError;
      this.behindError = null;
      throw error;
    }
    this.unsynced = 0;
    const top = this.top;
    // Capture before syncing data: only clusters whose writes completed by now get marked on disk.
    const cbtPages = this.cbt ? this.cbt.bitmap.dirty.take(this.cbt.bitmap.bits) : [];
    const mapPages = top.map.dirty.take(top.map.states);
    const dataDirty = this.dataDirty;
    this.dataDirty = false;
    if (this.cbt) await writePages(this.cbt.fd, cbtPages);
    if (dataDirty) await fdatasync(top.fd);
    await writePages(top.mapFd!, mapPages);
    if (Date.now() - this.lastAllocationSync > ALLOCATION_SYNC_MS) this.syncAllocation();
  }

  /** Records the top layer's allocation for physical_utilisation (throttled: it costs a transaction). */
  private syncAllocation(): void {
    const top = this.top;
    this.lastAllocationSync = Date.now();
    if (top.map.allocated === this.syncedAllocation) return;
    transact(this.conn, () => statement(this.conn, "UPDATE layers SET allocated = ? WHERE id = ?").run(top.map.allocated, top.id));
    this.syncedAllocation = top.map.allocated;
  }

  async trim(offset: number, length: number): Promise<void> {
    this.checkOpen();
    this.checkWritable();
    this.checkRange(offset, length);
    // Trimming is advisory: only whole clusters are dropped, and a complete (raw-file) layer keeps its bytes.
    const first = Math.ceil(offset / CLUSTER_SIZE);
    const end = Math.floor((offset + length) / CLUSTER_SIZE);
    if (end <= first || this.top.complete) return;
    await this.mutate(() => this.dropClusters(first, end - 1));
  }

  async writeZeroes(offset: number, length: number, options: { noHole?: boolean; fua?: boolean } = {}): Promise<void> {
    this.checkOpen();
    this.checkWritable();
    this.checkRange(offset, length);
    if (length === 0) return;
    const started = process.hrtime.bigint();
    const end = offset + length;
    const first = Math.ceil(offset / CLUSTER_SIZE);
    const last = Math.floor(end / CLUSTER_SIZE) - 1;
    await this.mutate(async () => {
      if (last < first) {
        await this.writeRange(offset, Buffer.alloc(length));
        return;
      }
      if (offset < first * CLUSTER_SIZE) await this.writeRange(offset, Buffer.alloc(first * CLUSTER_SIZE - offset));
      if (options.noHole || this.top.complete) await this.writeZeroClusters(first, last);
      else await this.dropClusters(first, last);
      if (end > (last + 1) * CLUSTER_SIZE) await this.writeRange((last + 1) * CLUSTER_SIZE, Buffer.alloc(end - (last + 1) * CLUSTER_SIZE));
    });
    recordIo(this.conn.path, "write", length, started);
    if (options.fua) await this.flushNow();
  }

  /** Makes clusters first..last read as zeros without data: ABSENT when nothing is below, ZERO otherwise. */
  private async dropClusters(first: number, last: number): Promise<void> {
    this.markChanged(first, last);
    const release = await this.locks.acquire(first, last);
    try {
      const top = this.top;
      const state: ClusterState = top.hasParent ? ZERO : ABSENT;
      for (let cluster = first; cluster <= last; cluster++) {
        if (top.map.get(cluster) === DATA) this.droppedData = true; // its bytes stay in the file
        top.map.set(cluster, state);
      }
    } finally {
      release();
    }
  }

  private async writeZeroClusters(first: number, last: number): Promise<void> {
    const zeros = Buffer.alloc(Math.min(COPY_CHUNK, (last - first + 1) * CLUSTER_SIZE));
    for (let start = first * CLUSTER_SIZE; start < (last + 1) * CLUSTER_SIZE; start += zeros.length) {
      const length = Math.min(zeros.length, (last + 1) * CLUSTER_SIZE - start);
      await this.writeRange(start, zeros.subarray(0, length));
    }
  }

  async blockStatus(offset: number, length: number): Promise<Extent[]> {
    this.checkOpen();
    this.checkRange(offset, Math.min(length, this.size - offset));
    const end = Math.min(offset + length, this.size, (Math.floor(offset / CLUSTER_SIZE) + BLOCK_STATUS_CLUSTERS) * CLUSTER_SIZE);
    const extents: Extent[] = [];
    let position = offset;
    while (position < end) {
      const cluster = Math.floor(position / CLUSTER_SIZE);
      const next = Math.min(end, (cluster + 1) * CLUSTER_SIZE);
      const flags = this.sourceOf(cluster) >= 0 ? 0 : STATE_HOLE | STATE_ZERO;
      const previous = extents[extents.length - 1];
      if (previous && previous.flags === flags) previous.length += next - position;
      else extents.push({ length: next - position, flags });
      position = next;
    }
    return extents;
  }

  /** Copies into the top layer every cluster it lacks, so its data file alone holds the whole volume. */
  async materialize(): Promise<void> {
    const top = this.top;
    // Unless the layer's file may hold bytes its map does not claim, clusters reading as zeros are holes.
    const onlyHolesElsewhere = !this.strayBefore;
    const zeros = Buffer.alloc(COPY_CHUNK);
    const buffer = Buffer.alloc(COPY_CHUNK);
    let cluster = 0;
    while (cluster < top.count) {
      if (top.map.get(cluster) === DATA) {
        cluster++;
        continue;
      }
      // Not DATA in the top layer: ABSENT falls through to the parents, ZERO reads as zeros.
      const source = this.sourceOf(cluster);
      let run = 1;
      while (
        cluster + run < top.count &&
        run * CLUSTER_SIZE < COPY_CHUNK &&
        top.map.get(cluster + run) !== DATA &&
        this.sourceOf(cluster + run) === source
      ) {
        run++;
      }
      const start = cluster * CLUSTER_SIZE;
      const length = run * CLUSTER_SIZE;
      const chunk = buffer.subarray(0, length);
      if (source >= 0) {
        await readFull(this.chain[source]!.fd, chunk, 0, length, start);
        await writeFull(top.fd, [chunk], start);
      } else if (!onlyHolesElsewhere) {
        // Reads as zeros, but the top file may hold bytes of a write that never reached its map: clear them.
        await readFull(top.fd, chunk, 0, length, start);
        if (!chunk.equals(zeros.subarray(0, length))) await writeFull(top.fd, [zeros.subarray(0, length)], start);
      }
      for (let i = 0; i < run; i++) top.map.set(cluster + i, DATA);
      this.dataDirty = true;
      cluster += run;
    }
    await this.persist();
    const tokens = transact(this.conn, () => {
      statement(this.conn, "UPDATE layers SET complete = 1, parent = NULL, allocated = ? WHERE id = ?").run(top.map.allocated, top.id);
      // Writes through the raw file escape change tracking: from here on CBT cannot vouch for this volume.
      statement(
        this.conn,
        "UPDATE cbt_logs SET state = 'lost' WHERE id IN (SELECT cbt_log FROM volumes WHERE top_layer = ? AND read_write = 1)",
      ).run(top.id);
      return deleteUnreferencedLayers(this.conn);
    });
    unlinkLayerFiles(this.conn.path, tokens);
    top.complete = true;
    top.hasParent = false;
    this.strayBefore = false; // every cluster is DATA now
    this.syncedAllocation = top.map.allocated;
  }

  flatFilePath(): string {
    return layerFiles(this.conn.path, this.top.token).data;
  }

  /**
   * Pause handshake (see handles.ts): on a request, stop writes, drain, flush and acknowledge; on release,
   * reload the layers and let writes go. A new request seen while still paused means the previous change
   * committed and a new one is asked for before this poll saw the release: reload, then acknowledge again.
   */
  private async pollPause(): Promise<void> {
    if (this.polling || this.closed) return;
    this.polling = true;
    try {
      const row = statement(this.conn, "SELECT pause, pauser FROM handles WHERE id = ?").get(this.handleId) as
        | Pick<HandleRow, "pause" | "pauser">
        | undefined;
      if (!row) return;
      if (row.pause === "requested") {
        if (this.gate) this.reload();
        else this.closeGate();
        await this.acknowledgePause();
      } else if (row.pause === null && this.gate) this.resume();
      else if (row.pause === "paused" && row.pauser && !isAlive(JSON.parse(row.pauser) as ProcessIdentity)) {
        transact(this.conn, () => statement(this.conn, "UPDATE handles SET pause = NULL, pauser = NULL WHERE id = ?").run(this.handleId));
      }
    } catch {
      // A busy or vanished database: try again at the next tick.
    } finally {
      this.polling = false;
    }
  }

  private closeGate(): void {
    let open!: () => void;
    this.gate = { promise: new Promise((resolve) => (open = resolve)), open };
    // Writes now wait on the gate: keep the process alive until the handshake releases them.
    this.timer?.ref();
  }

  private async acknowledgePause(): Promise<void> {
    await this.drained();
    await this.flushNow();
    this.syncAllocation();
    transact(this.conn, () => {
      if (this.cbt) statement(this.conn, "UPDATE cbt_logs SET state = 'clean', writer = NULL WHERE id = ? AND state = 'dirty'").run(this.cbt.id);
      statement(this.conn, "UPDATE handles SET pause = 'paused' WHERE id = ? AND pause = 'requested'").run(this.handleId);
    });
  }

  private resume(): void {
    try {
      this.reload();
    } finally {
      const gate = this.gate;
      this.gate = null;
      this.timer?.unref();
      gate?.open();
    }
  }

  /** Picks up a new top layer and CBT log after a snapshot, clone or CBT change. */
  private reload(): void {
    transact(this.conn, () => {
      const volume = statement(this.conn, "SELECT * FROM volumes WHERE id = (SELECT volume FROM handles WHERE id = ?)").get(
        this.handleId,
      ) as VolumeRow | undefined;
      if (!volume || volume.top_layer === null) return;
      if (volume.top_layer !== this.top.id) {
        // Flushed at the pause: the layer we leave keeps strays only from before or from zeroing.
        statement(this.conn, "UPDATE layers SET stray = ? WHERE id = ?").run(this.strayBefore || this.droppedData ? 1 : 0, this.top.id);
        this.strayBefore = markStray(this.conn, volume.top_layer);
        this.droppedData = false;
        const reuse = new Map(this.chain.map((layer) => [layer.id, layer]));
        const chain = openLayers(this.conn.path, chainOf(this.conn, volume.top_layer), volume.top_layer, reuse);
        const kept = new Set(chain.map((layer) => layer.fd));
        for (const layer of this.chain) {
          if (layer.mapFd !== null) fs.closeSync(layer.mapFd);
          layer.mapFd = null;
          if (!kept.has(layer.fd)) this.retired.push(layer);
        }
        this.chain = chain;
        this.syncedAllocation = this.top.map.allocated;
        statement(this.conn, "UPDATE handles SET write_layer = ? WHERE id = ?").run(volume.top_layer, this.handleId);
      }
      if (this.cbt && this.cbt.id !== volume.cbt_log) {
        fs.closeSync(this.cbt.fd);
        this.cbt = null;
      }
      if (!this.cbt && volume.cbt_enabled && volume.cbt_log !== null) this.cbt = openCbt(this.conn, volume.cbt_log, this.handleId);
      else if (this.cbt) markCbtDirty(this.conn, this.cbt.id, this.handleId);
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.drained();
    if (this.gate) this.resume();
    if (!this.readOnly) await this.flushNow();
    const overlay = this.purpose === "overlay" ? this.top.token : null;
    transact(this.conn, () => {
      if (this.purpose === "write" || this.purpose === "materialize") {
        // All writes reached the map: only zeroed data clusters can have left bytes behind.
        statement(this.conn, "UPDATE layers SET allocated = ?, stray = ? WHERE id = ?").run(
          this.top.map.allocated,
          this.strayBefore || this.droppedData ? 1 : 0,
          this.top.id,
        );
      }
      if (this.cbt) statement(this.conn, "UPDATE cbt_logs SET state = 'clean', writer = NULL WHERE id = ? AND writer = ?").run(this.cbt.id, this.handleId);
      deleteHandle(this.conn, this.handleId);
      if (overlay) statement(this.conn, "DELETE FROM layers WHERE id = ?").run(this.top.id);
    });
    const fds = [...this.chain, ...this.retired].flatMap((layer) => (layer.mapFd === null ? [layer.fd] : [layer.fd, layer.mapFd]));
    if (this.cbt) fds.push(this.cbt.fd);
    await Promise.all([...new Set(fds)].map((fd) => closeFd(fd)));
    if (overlay) unlinkLayerFiles(this.conn.path, [overlay]);
    stopIoRecording(this.conn);
  }
}

function markCbtDirty(conn: SrConnection, id: number, handleId: number): void {
  // A log left dirty by a dead writer stays "lost" (see handles.ts); only a clean one becomes dirty.
  statement(conn, "UPDATE cbt_logs SET state = 'dirty', writer = ? WHERE id = ? AND state <> 'lost'").run(handleId, id);
}

function openCbt(conn: SrConnection, id: number, handleId: number): OpenCbt {
  const log = requireCbtLog(conn, id);
  const file = cbtLogFile(conn.path, log.token);
  const bitmap = readCbtSync(file);
  markCbtDirty(conn, id, handleId);
  return { id, fd: fs.openSync(file, "r+"), bitmap };
}

async function openHandle(srPath: string, key: string, purpose: Purpose, host: string): Promise<VolumeDataHandle> {
  const conn = connectSr(srPath, { attached: true });
  const opened = transact(conn, () => {
    const volume = requireVolume(conn, key);
    if (volume.top_layer === null) throw invalid("no_data", `volume ${key} has no data (data destroyed)`);
    if (purpose === "write" && !volume.read_write) throw invalid("read_only_volume", `volume ${key} is read-only`);
    let writeLayer: number | null = null;
    if (purpose === "write" || purpose === "materialize") {
      claimWrite(conn, volume, volume.top_layer, host);
      writeLayer = volume.top_layer;
    } else if (purpose === "overlay") {
      claimWrite(conn, volume, volume.top_layer, host);
      writeLayer = insertLayer(conn, { parent: volume.top_layer, size: volume.size }).id;
    }
    // A crash while writing may leave bytes in the file that the map never claimed.
    const strayBefore = writeLayer !== null && markStray(conn, writeLayer);
    const handleId = insertHandle(conn, purpose, { volume: volume.id, writeLayer, host });
    const chain = openLayers(conn.path, chainOf(conn, writeLayer ?? volume.top_layer), writeLayer);
    try {
      const cbt = purpose === "write" && volume.cbt_enabled && volume.cbt_log !== null ? openCbt(conn, volume.cbt_log, handleId) : null;
      return { volume, handleId, chain, cbt, strayBefore };
    } catch (error) {
      for (const layer of chain) closeLayerSync(layer);
      throw error;
    }
  });
  return new VolumeDataHandle({
    conn,
    key,
    purpose,
    handleId: opened.handleId,
    size: opened.volume.size,
    chain: opened.chain,
    cbt: opened.cbt,
    strayBefore: opened.strayBefore,
  });
}

/** Opens a volume's data for a datapath. Close it: it holds a handle that keeps GC and other writers away. */
export async function openVolumeData(srPath: string, key: string, options: OpenVolumeDataOptions = {}): Promise<VolumeData> {
  const purpose: Purpose = options.overlay ? "overlay" : options.readOnly ? "read" : "write";
  return openHandle(srPath, key, purpose, options.host ?? localHostId());
}

/**
 * Path of a raw file holding the complete volume, for the `file` datapath: every cluster the top layer lacks
 * is copied up into it and the layer is marked complete (cut from its parents), so reads never fall through
 * and writes made directly to the file are the volume's writes. Such writes bypass change tracking: the
 * volume's CBT log is marked lost. Costs a full copy of the volume the first time.
 */
export async function materializeFlatFile(srPath: string, key: string, options: { host?: string } = {}): Promise<string> {
  const handle = await openHandle(srPath, key, "materialize", options.host ?? localHostId());
  try {
    await handle.materialize();
    return handle.flatFilePath();
  } finally {
    await handle.close();
  }
}
