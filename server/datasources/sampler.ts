// The console's datasource sampler: every 5 s it reads the rrdd protocol v2 files behind each watched SR's
// `xeno+shm:///<uid>` datasources (SR.stat), turns `derive` and `absolute` counters into rates, and keeps
// the samples in a ring per SR (a little over an hour at 5 s, bounded memory).
//
// Where the SR list and the URIs come from: the sampler runs without a user request, so it has no toolstack
// session of its own and keeps none (the console holds no credentials beyond its users' cookies). It samples
// the SRs that user requests resolved: the datasources router registers an SR (its plugin and SR URI, which
// it resolved through the toolstack with the user's session) each time a user asks for its series, and
// registers every attached SR the toolstack lists at most once a minute while users look at charts. From then on
// the sampler needs no session: SR.stat goes straight to the SR's plugin (refreshed every minute, or at
// once when a file goes missing), and the files are read from the metrics dir. An SR that fails to answer
// for 10 minutes (destroyed, detached, forgotten) or that no request has named for 6 hours is dropped with
// its samples; a new request starts it again. Serving samples is separate: every series request checks with
// the user's own session that the SR exists and is attached (the router), so permissions still apply.
import fs from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { type DatasourceMeta, decodeRrdd, isDatasourceUid, RrddFormatError, type RrddFile } from "../storage/rrdd.ts";
import { Ring } from "./ring.ts";

export const SAMPLE_INTERVAL_MS = 5000;
/** 800 samples at 5 s: 66 minutes, so a full hour stays even with a late tick or two. */
export const RING_CAPACITY = 800;
/** Unchanged files for this many intervals mean their writer stopped. */
const STALE_AFTER_INTERVALS = 4;

/** What the sampler knows of an SR: how to ask its plugin for its datasource URIs (SR.stat's `datasources`). */
export interface WatchedSr {
  /** For messages: the SR's name. */
  name: string;
  datasources: () => Promise<string[]>;
  /** Reads a datasource file by its uid where the SR's host serves it; absent: from the console's metrics dir. */
  readDatasource?: (uid: string) => Promise<Buffer>;
}

export interface DatasourceInfo {
  name: string;
  description: string;
  /** What the sampled values are in: a rate's unit for counters ("B/s"), the file's unit for gauges. */
  units: string;
  /** gauge: the value as read; rate: a `derive` or `absolute` counter turned into a per-second rate. */
  kind: "gauge" | "rate";
}

export interface Sample {
  /** Milliseconds since the epoch, from the file's timestamp. */
  t: number;
  /** null where no value exists: a rate's first reading, a counter that went backwards (reset). */
  values: Record<string, number | null>;
}

export interface Series {
  datasources: DatasourceInfo[];
  samples: Sample[];
  /** The last sampling failure in words, while it lasts (older samples are still served). */
  error: string | null;
}

export interface SamplerOptions {
  metricsDir: string;
  intervalMs?: number;
  capacity?: number;
  /** How often SR.stat is asked again for the URIs. */
  refreshMs?: number;
  /** How long an SR may fail before it is dropped. */
  dropFailingAfterMs?: number;
  /** How long an SR no request named stays sampled. */
  idleMs?: number;
  now?: () => number;
  /** Whether to run on a timer (tests tick by hand). */
  timer?: boolean;
}

interface FileReading {
  dataCrc: number;
  timestamp: number;
  values: Record<string, number>;
}

interface SrState {
  watched: WatchedSr;
  ring: Ring<Sample>;
  meta: Map<string, DatasourceInfo>;
  files: string[] | null;
  filesAt: number;
  previous: Map<string, FileReading>;
  error: string | null;
  failingSince: number | null;
  /** When a file last brought new data (sampler clock); null before the first. */
  lastNewData: number | null;
  lastNamed: number;
  busy: Promise<void> | null;
}

/** `xeno+shm:///<uid>` → `<uid>`; anything else (or a uid that would leave a directory) is refused. */
export function datasourceUid(uri: string): string {
  const match = /^xeno\+shm:\/\/\/([^/]+)$/.exec(uri);
  const uid = match?.[1] === undefined ? undefined : decodeURIComponent(match[1]);
  if (uid === undefined || !isDatasourceUid(uid)) throw new Error(`unsupported datasource URI ${JSON.stringify(uri)} (only xeno+shm:///<uid>)`);
  return uid;
}

/** `xeno+shm:///<uid>` → the file `<metrics dir>/<uid>`. */
export function datasourceFile(metricsDir: string, uri: string): string {
  return path.join(metricsDir, datasourceUid(uri));
}

/** Reads one rrdd file; a torn read (the writer rewrites in place) is tried again a few times. */
async function readFileSettled(file: string, read: () => Promise<Buffer>): Promise<RrddFile> {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return decodeRrdd(await read(), path.basename(file));
    } catch (error) {
      if (!(error instanceof RrddFormatError) || attempt >= 3) throw error;
      await sleep(25);
    }
  }
}

function describe(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === "ENOENT") return "The SR's datasource file is missing: its plugin is not writing samples (is the SR attached?).";
  return error instanceof Error ? error.message : String(error);
}

export class DatasourceSampler {
  readonly #options: Required<SamplerOptions>;
  readonly #srs = new Map<string, SrState>();
  #timer: NodeJS.Timeout | undefined;

  constructor(options: SamplerOptions) {
    this.#options = {
      intervalMs: SAMPLE_INTERVAL_MS,
      capacity: RING_CAPACITY,
      refreshMs: 60_000,
      dropFailingAfterMs: 10 * 60_000,
      idleMs: 6 * 3600_000,
      now: Date.now,
      timer: true,
      ...options,
    };
  }

  /** The SRs being sampled (keys as given to watch). */
  watching(): string[] {
    return [...this.#srs.keys()];
  }

  /**
   * Samples `key` from now on (or refreshes how to reach it: a re-attached SR has a new URI). The first
   * call takes a sample at once and answers when it is in, so a first chart has its first point.
   */
  async watch(key: string, watched: WatchedSr): Promise<void> {
    const existing = this.#srs.get(key);
    if (existing !== undefined) {
      existing.watched = watched;
      existing.lastNamed = this.#options.now();
      // A request that raced the first one waits for the same first sample rather than answering none.
      if (existing.ring.size === 0) await existing.busy;
      return;
    }
    const state: SrState = {
      watched,
      ring: new Ring(this.#options.capacity),
      meta: new Map(),
      files: null,
      filesAt: 0,
      previous: new Map(),
      error: null,
      failingSince: null,
      lastNewData: null,
      lastNamed: this.#options.now(),
      busy: null,
    };
    this.#srs.set(key, state);
    this.#start();
    await this.#sampleOnce(state);
  }

  /** Everything sampled for `key` in the last `rangeSeconds`; undefined when the SR is not sampled. */
  series(key: string, rangeSeconds: number): Series | undefined {
    const state = this.#srs.get(key);
    if (state === undefined) return undefined;
    const since = this.#options.now() - rangeSeconds * 1000;
    return {
      datasources: [...state.meta.values()],
      samples: state.ring.toArray().filter((sample) => sample.t >= since),
      error: state.error,
    };
  }

  /** One round over every SR (the timer calls it; tests may too). */
  async tick(): Promise<void> {
    const now = this.#options.now();
    for (const [key, state] of this.#srs) {
      const failedTooLong = state.failingSince !== null && now - state.failingSince > this.#options.dropFailingAfterMs;
      if (failedTooLong || now - state.lastNamed > this.#options.idleMs) this.#srs.delete(key);
    }
    if (this.#srs.size === 0) this.stop();
    await Promise.all([...this.#srs].map(([, state]) => this.#sampleOnce(state)));
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #start(): void {
    if (this.#timer !== undefined || !this.#options.timer) return;
    this.#timer = setInterval(() => void this.tick(), this.#options.intervalMs);
    // The sampler never keeps the process (or a test) alive on its own.
    this.#timer.unref();
  }

  /** At most one sampling of an SR at a time: a plugin slow to answer SR.stat delays only its own SR. */
  #sampleOnce(state: SrState): Promise<void> {
    state.busy ??= this.#sample(state).finally(() => {
      state.busy = null;
    });
    return state.busy;
  }

  async #sample(state: SrState): Promise<void> {
    const now = this.#options.now();
    try {
      if (state.files === null || now - state.filesAt > this.#options.refreshMs) {
        // A remote SR's files are named by their uid (its host reads them), a local one's by their path.
        const remote = state.watched.readDatasource !== undefined;
        state.files = (await state.watched.datasources()).map((uri) => (remote ? datasourceUid(uri) : datasourceFile(this.#options.metricsDir, uri)));
        state.filesAt = now;
      }
      const read = state.watched.readDatasource;
      const readings = await Promise.all(
        state.files.map(async (file) => ({ file, data: await readFileSettled(file, read === undefined ? () => fs.promises.readFile(file) : () => read(file)) })),
      );
      state.failingSince = null;
      if (this.#record(state, readings) || state.lastNewData === null) {
        state.lastNewData = now;
        state.error = null;
      } else if (now - state.lastNewData > STALE_AFTER_INTERVALS * this.#options.intervalMs) {
        // A writer that died leaves its last file behind, unchanged: say so rather than draw nothing silently.
        const seconds = Math.round((now - state.lastNewData) / 1000);
        state.error = `No new samples from "${state.watched.name}" for ${seconds} s: its plugin has stopped refreshing the datasource file.`;
      }
    } catch (error) {
      // Ask the plugin again next time: the SR may have been re-attached, or its daemon restarted elsewhere.
      state.files = null;
      state.error = `Sampling "${state.watched.name}" failed: ${describe(error)}`;
      state.failingSince ??= now;
    }
  }

  /** Turns the files' readings into one sample; files whose data CRC did not change add nothing. True when a sample was added. */
  #record(state: SrState, readings: Array<{ file: string; data: RrddFile }>): boolean {
    const values: Record<string, number | null> = {};
    let t = 0;
    for (const { file, data } of readings) {
      const previous = state.previous.get(file);
      if (previous?.dataCrc === data.dataCrc && previous.timestamp === data.timestamp) continue;
      state.previous.set(file, { dataCrc: data.dataCrc, timestamp: data.timestamp, values: data.values });
      t = Math.max(t, data.timestamp * 1000);
      for (const [name, raw] of Object.entries(data.values)) {
        const meta = data.metadata[name]!;
        state.meta.set(name, info(name, meta));
        values[name] = meta.type === "gauge" ? raw : rate(name, meta, raw, data.timestamp, previous);
      }
    }
    if (t === 0) return false;
    state.ring.push({ t, values });
    return true;
  }
}

function info(name: string, meta: DatasourceMeta): DatasourceInfo {
  const kind = meta.type === "gauge" ? "gauge" : "rate";
  // A counter's file unit may already say "/s" (what rrdd shows); a bare unit becomes a per-second one.
  const units = kind === "rate" && !meta.units.endsWith("/s") ? `${meta.units}/s` : meta.units;
  return { name, description: meta.description, units, kind };
}

/** rrdd's arithmetic: derive = Δvalue / Δt (a counter that went backwards was reset: no value); absolute = value / Δt. */
function rate(name: string, meta: DatasourceMeta, raw: number, timestamp: number, previous: FileReading | undefined): number | null {
  if (previous === undefined) return null;
  const seconds = timestamp - previous.timestamp;
  if (!(seconds > 0)) return null;
  if (meta.type === "absolute") return raw / seconds;
  const before = previous.values[name];
  if (before === undefined || raw < before) return null;
  return (raw - before) / seconds;
}
