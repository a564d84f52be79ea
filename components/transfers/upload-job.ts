// One browser upload of a VM archive through tus (8 MiB PATCHes, resumable): start or resume it, pause,
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

export class UploadJob {
  snapshot: UploadSnapshot;
  private readonly upload: Upload;
  private readonly listeners = new Set<() => void>();
  private samples: { at: number; sent: number }[] = [];

  constructor(file: File, sr: string) {
    this.snapshot = { key: `${file.name}:${file.size}:${file.lastModified}:${Date.now()}`, fileName: file.name, size: file.size, sent: 0, phase: "starting", id: null, rate: null, error: null, resumed: false };
    this.upload = new Upload(file, {
      endpoint: UPLOAD_ENDPOINT,
      chunkSize: CHUNK_SIZE,
      retryDelays: RETRY_DELAYS_MS,
      removeFingerprintOnSuccess: true,
      metadata: { filename: file.name, filetype: file.type || "application/octet-stream", sr, lastModified: String(file.lastModified) },
      onUploadUrlAvailable: () => this.set({ id: this.upload.url?.split("/").pop() ?? null }),
      onProgress: (sent) => this.progress(sent),
      onSuccess: () => this.set({ phase: "uploaded", sent: file.size, rate: null }),
      onError: (error) => this.set({ phase: "failed", error: describe(error), rate: null }),
      onShouldRetry: (error, _attempt, options) => {
        const status = (error as { originalResponse?: { getStatus(): number } | null }).originalResponse?.getStatus() ?? 0;
        // A refusal in words (422 import failed, 410 cancelled, 413 too large…) is final; a dropped connection is not.
        if (status >= 400 && status < 500 && status !== 409 && status !== 423) return false;
        const retry = defaultOptions.onShouldRetry?.(error, _attempt, options) ?? true;
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
