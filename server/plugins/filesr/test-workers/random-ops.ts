// Random SR and volume operations for the crash and concurrency tests. Each run touches only volumes whose
// name starts with its own prefix (plus collectGarbage, which works on the whole SR) and keeps a model of
// what every writable volume it owns must contain, so it can check its own view at any point.
import { createHash } from "node:crypto";
import fs from "node:fs";
import {
  cloneVolume,
  createVolume,
  destroyVolume,
  listVolumes,
  resizeVolume,
  revertVolume,
  setVolumeKey,
  snapshotVolume,
} from "../volumes.ts";
import { copyVolume } from "../copy.ts";
import { enableCbt } from "../cbt.ts";
import { collectGarbage } from "../gc.ts";
import { materializeFlatFile, openVolumeData } from "../volume-data.ts";
import { CLUSTER_SIZE } from "../layout.ts";
import type { Volume } from "../volume-records.ts";

const MiB = 1024 * 1024;

export function random(seed: number) {
  let state = seed >>> 0 || 1;
  return (below: number) => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) % below;
  };
}

export function bytes(seed: number, length: number): Buffer {
  const out = Buffer.alloc(length);
  let state = seed >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    out[i] = state >>> 24;
  }
  return out;
}

export async function readAll(sr: string, key: string, size: number): Promise<Buffer> {
  const volume = await openVolumeData(sr, key, { readOnly: true });
  try {
    const buffer = Buffer.alloc(size);
    await volume.read(0, buffer);
    return buffer;
  } finally {
    await volume.close();
  }
}

export function digest(buffer: Buffer): string {
  return createHash("sha256").update(buffer).digest("hex");
}

export class RandomOps {
  readonly sr: string;
  readonly prefix: string;
  readonly next: (below: number) => number;
  /** Expected content of the volumes this run owns (snapshots and writable ones). */
  readonly model = new Map<string, Buffer>();
  readonly counts: Record<string, number> = {};

  constructor(sr: string, prefix: string, seed: number) {
    this.sr = sr;
    this.prefix = prefix;
    this.next = random(seed);
  }

  private pick(filter: (key: string, volume: Volume | undefined) => boolean, volumes: Volume[]): Volume | undefined {
    const mine = volumes.filter((volume) => volume.name.startsWith(this.prefix) && this.model.has(volume.key) && filter(volume.key, volume));
    return mine[this.next(Math.max(1, mine.length))];
  }

  private count(name: string): void {
    this.counts[name] = (this.counts[name] ?? 0) + 1;
  }

  /** One random operation. */
  async step(): Promise<void> {
    const volumes = await listVolumes(this.sr);
    const mine = volumes.filter((volume) => this.model.has(volume.key));
    const writable = (v?: Volume) => v?.read_write === true;
    const choice = mine.length < 3 ? 0 : this.next(100);
    if (choice < 10 || mine.length < 3) {
      const size = (1 + this.next(4)) * MiB;
      const volume = await createVolume(this.sr, { name: `${this.prefix}${this.next(1e6)}`, description: "", size });
      this.model.set(volume.key, Buffer.alloc(volume.virtual_size));
      return this.count("create");
    }
    if (choice < 45) {
      const target = this.pick((_, v) => writable(v), volumes);
      if (!target) return;
      const content = this.model.get(target.key)!;
      const handle = await openVolumeData(this.sr, target.key);
      try {
        for (let i = 0; i < 1 + this.next(6); i++) {
          const offset = this.next(content.length - 1);
          const length = 1 + this.next(Math.min(content.length - offset, 3 * CLUSTER_SIZE));
          if (this.next(5) === 0) {
            await handle.writeZeroes(offset, length);
            content.fill(0, offset, offset + length);
          } else {
            const data = bytes(this.next(1e9), length);
            await handle.write(offset, data);
            data.copy(content, offset);
          }
        }
        if (this.next(2) === 0) await handle.flush();
      } finally {
        await handle.close();
      }
      return this.count("write");
    }
    const target = this.pick(() => true, volumes);
    if (!target) return;
    if (choice < 55) {
      const snap = await snapshotVolume(this.sr, target.key);
      this.model.set(snap.key, Buffer.from(this.model.get(target.key)!));
      return this.count("snapshot");
    }
    if (choice < 62) {
      const clone = await cloneVolume(this.sr, target.key);
      this.model.set(clone.key, Buffer.from(this.model.get(target.key)!));
      return this.count("clone");
    }
    if (choice < 72 && mine.length > 4) {
      await destroyVolume(this.sr, target.key);
      this.model.delete(target.key);
      return this.count("destroy");
    }
    if (choice < 77) {
      const snapshot = this.pick((_, v) => v?.read_write === false, volumes);
      const volume = this.pick((_, v) => writable(v), volumes);
      if (!snapshot || !volume || snapshot.read_write) return;
      await revertVolume(this.sr, snapshot.key, volume.key);
      this.model.set(volume.key, Buffer.from(this.model.get(snapshot.key)!));
      return this.count("revert");
    }
    if (choice < 81 && target.read_write) {
      const grown = target.virtual_size + (1 + this.next(4)) * CLUSTER_SIZE;
      await resizeVolume(this.sr, target.key, grown);
      const content = Buffer.alloc(grown);
      this.model.get(target.key)!.copy(content);
      this.model.set(target.key, content);
      return this.count("resize");
    }
    if (choice < 85) {
      await setVolumeKey(this.sr, target.key, `k${this.next(5)}`, `v${this.next(1e6)}`);
      return this.count("set");
    }
    if (choice < 88) {
      await enableCbt(this.sr, target.key);
      return this.count("cbt");
    }
    if (choice < 91) {
      const copy = await copyVolume(this.sr, target.key, this.sr);
      this.model.set(copy.key, Buffer.from(this.model.get(target.key)!));
      return this.count("copy");
    }
    if (choice < 93) {
      const file = await materializeFlatFile(this.sr, target.key);
      if (!fs.readFileSync(file).equals(this.model.get(target.key)!)) throw new Error(`raw file of ${target.key} differs from the volume`);
      return this.count("materialize");
    }
    await collectGarbage(this.sr);
    this.count("gc");
  }

  /** Keys whose content differs from the model. */
  async verify(): Promise<string[]> {
    const wrong: string[] = [];
    const volumes = new Map((await listVolumes(this.sr)).map((volume) => [volume.key, volume]));
    for (const [key, expected] of this.model) {
      const volume = volumes.get(key);
      if (!volume) {
        wrong.push(`${key} (missing)`);
        continue;
      }
      if (volume.virtual_size !== expected.length || !(await readAll(this.sr, key, expected.length)).equals(expected)) wrong.push(key);
    }
    return wrong;
  }
}
