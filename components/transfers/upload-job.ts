// One browser upload of a VM archive, an OVA or a disk image through tus (8 MiB PATCHes, resumable): start or resume it, pause,
// cancel, and its rate and ETA from a sliding window of samples.
import { defaultOptions, type PreviousUpload, Upload } from "tus-js-client";

export const UPLOAD_ENDPOINT = "/api/upload";
const CHUNK_SIZE = 8 * 1024 * 1024;
const RATE_WINDOW_MS = 5000;
/** Progress shown at most this often. */
const PROGRESS_EVERY_MS = 250;

export type UploadPhase = "starting" | "uploading" | "retrying" | "paused" | "uploaded" | "failed" | "cancelled";
/** Waits between tries after a lost connection: about 6 minutes in all, enough for a console restart or upgrade. */
const RETRY_DELAYS_MS = [0, 1000, 3000, 5000, 10_000, 20_000, 30_000, 30_000, 60_000, 60_000, 60_000, 60_000];

export interface UploadSnapshot {
  key: string;
  fileName: string;
  size: number;
  sent: number;
  phase: UploadPhase;
  /** The console's id of the upload (from its URL), once created. */
  id: string | null;
  rate: number | null;
  error: string | null;
  resumed: boolean;
}

/** The words of a tus failure: the console's answer when it gave one, else what went wrong. */
function describe(error: Error): string {
  const text = /response text: (.*?)(?:, request id:|$)/s.exec(error.message)?.[1]?.trim();
  if (text !== undefined && text !== "" && text !== "n/a") return text;
  if (/failed to upload chunk|network|xhr/i.test(error.message)) return "The connection to the console was lost; retrying did not help. Resume to try again.";
  return error.message;
}

/** What is uploaded: a file the user chose, or several packed as one (an OVF and its disks, as an OVA). */
export interface UploadFile {
  blob: Blob;
  name: string;
  lastModified: number;
}

export function uploadFileOf(file: File): UploadFile {
  return { blob: file, name: file.name, lastModified: file.lastModified };
}

export interface UploadOptions {
  /** A bare disk image becomes a disk on the SR alone, not a VM. */
  diskOnly?: boolean;
  /** Import even when checksums do not match. */
  force?: boolean;
}

export class UploadJob {
  snapshot: UploadSnapshot;
  private readonly upload: Upload;
  private readonly listeners = new Set<() => void>();
  private samples: { at: number; sent: number }[] = [];

  constructor(file: UploadFile, sr: string, options: UploadOptions = {}) {
    const { blob, name, lastModified } = file;
    this.snapshot = { key: `${name}:${blob.size}:${lastModified}:${Date.now()}`, fileName: name, size: blob.size, sent: 0, phase: "starting", id: null, rate: null, error: null, resumed: false };
    const metadata: Record<string, string> = { filename: name, filetype: blob.type || "application/octet-stream", sr, lastModified: String(lastModified) };
    if (options.diskOnly === true) metadata.diskOnly = "true";
    if (options.force === true) metadata.force = "true";
    this.upload = new Upload(blob, {
      endpoint: UPLOAD_ENDPOINT,
      chunkSize: CHUNK_SIZE,
      retryDelays: RETRY_DELAYS_MS,
      removeFingerprintOnSuccess: true,
      // The same file (or the same files packed as one) finds its unfinished upload again after a reload.
      fingerprint: async () => `hangar-upload:${name}:${blob.size}:${lastModified}:${options.diskOnly === true ? "disk" : "vm"}`,
      metadata,
      onUploadUrlAvailable: () => this.set({ id: this.upload.url?.split("/").pop() ?? null }),
      onProgress: (sent) => this.progress(sent),
      onSuccess: () => this.set({ phase: "uploaded", sent: blob.size, rate: null }),
      onError: (error) => this.set({ phase: "failed", error: describe(error), rate: null }),
      onShouldRetry: (error, _attempt, retryOptions) => {
        const status = (error as { originalResponse?: { getStatus(): number } | null }).originalResponse?.getStatus() ?? 0;
        // A refusal in words (422 import failed, 410 cancelled, 413 too large…) is final; a dropped connection is not.
        if (status >= 400 && status < 500 && status !== 409 && status !== 423) return false;
        const retry = defaultOptions.onShouldRetry?.(error, _attempt, retryOptions) ?? true;
        // Shown until bytes move again (the next progress event).
        if (retry && this.snapshot.phase !== "paused") this.set({ phase: "retrying", rate: null });
        return retry;
      },
    });
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private set(change: Partial<UploadSnapshot>): void {
    this.snapshot = { ...this.snapshot, ...change };
    for (const listener of this.listeners) listener();
  }

  private progress(sent: number): void {
    const now = Date.now();
    // The browser reports every 50 ms; a re-render each time is CPU the upload shares on a busy machine.
    const last = this.samples.at(-1);
    if (last !== undefined && now - last.at < PROGRESS_EVERY_MS && this.snapshot.phase === "uploading" && sent < this.snapshot.size) return;
    this.samples.push({ at: now, sent });
    this.samples = this.samples.filter((s) => now - s.at <= RATE_WINDOW_MS);
    const first = this.samples[0]!;
    const rate = now - first.at >= 1000 ? ((sent - first.sent) * 1000) / (now - first.at) : this.snapshot.rate;
    this.set({ sent, rate, phase: this.snapshot.phase === "paused" ? "paused" : "uploading" });
  }

  /** Starts, resuming the same file's unfinished upload to the same SR if this browser has one. */
  async start(sr: string): Promise<void> {
    const previous: PreviousUpload[] = await this.upload.findPreviousUploads().catch(() => []);
    const same = previous.find((p) => p.metadata.sr === sr);
    if (same !== undefined) {
      this.upload.resumeFromPreviousUpload(same);
      this.set({ resumed: true });
    }
    this.samples = [];
    this.set({ phase: "uploading", error: null });
    this.upload.start();
  }

  pause(): void {
    void this.upload.abort();
    this.samples = [];
    this.set({ phase: "paused", rate: null });
  }

  resume(): void {
    this.samples = [];
    this.set({ phase: "uploading", error: null });
    this.upload.start();
  }

  /** Stops and removes the upload on the console (its import is cancelled there). */
  async cancel(): Promise<void> {
    this.set({ phase: "cancelled", rate: null });
    await this.upload.abort(true).catch(() => undefined);
  }
}

/** Uploads this browser started and did not finish (tus's fingerprints in localStorage): offered for resuming. */
export async function unfinishedUploads(): Promise<{ fileName: string; size: number | null; created: string }[]> {
  const storage = defaultOptions.urlStorage;
  const all = await storage.findAllUploads().catch(() => []);
  return all.map((p) => ({ fileName: p.metadata.filename ?? "a file", size: p.size, created: p.creationTime }));
}
