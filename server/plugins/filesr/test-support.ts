// Shared fixtures of the file SR tests: temporary SRs, deterministic data, a consistency checker.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomUUID, createHash } from "node:crypto";
import { DatabaseSync } from "node:sqlite";
import type { TestContext } from "node:test";
import { attachSr, createSr } from "./sr.ts";
import { openVolumeData, type OpenVolumeDataOptions } from "./volume-data.ts";
import { srFiles, layerFiles, cbtLogFile, clusterCount } from "./layout.ts";
import { readMapSync } from "./cluster-map.ts";
import { disconnectSr } from "./db.ts";

/** A fresh temporary directory removed after the test. */
export function tempDir(t: TestContext, prefix = "filesr-"): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A new attached SR in a temporary directory. */
export async function makeSr(t: TestContext, name = "test SR"): Promise<string> {
  const sr = path.join(tempDir(t), "sr");
  await createSr(sr, { uuid: randomUUID(), name, description: "made by a test" });
  await attachSr(sr);
  t.after(() => disconnectSr(sr));
  return sr;
}

/** Deterministic pseudo-random bytes: the same seed gives the same bytes. */
export function pattern(seed: number, length: number): Buffer {
  const buffer = Buffer.alloc(Math.ceil(length / 4) * 4);
  let state = (Math.imul(seed + 1, 2654435761) >>> 0) || 1;
  for (let i = 0; i < buffer.length; i += 4) {
    // xorshift32
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    buffer.writeUInt32LE(state >>> 0, i);
  }
  return buffer.subarray(0, length);
}

export async function writeAt(sr: string, key: string, offset: number, data: Buffer): Promise<void> {
  const volume = await openVolumeData(sr, key);
  try {
    await volume.write(offset, data);
  } finally {
    await volume.close();
  }
}

export async function readAt(sr: string, key: string, offset: number, length: number, options: OpenVolumeDataOptions = { readOnly: true }): Promise<Buffer> {
  const volume = await openVolumeData(sr, key, options);
  try {
    const buffer = Buffer.alloc(length);
    await volume.read(offset, buffer);
    return buffer;
  } finally {
    await volume.close();
  }
}

/** SHA-256 of a volume's whole content, read in 1 MiB steps. */
export async function hashVolume(sr: string, key: string): Promise<string> {
  const volume = await openVolumeData(sr, key, { readOnly: true });
  try {
    const hash = createHash("sha256");
    const buffer = Buffer.alloc(1024 * 1024);
    for (let offset = 0; offset < volume.size; offset += buffer.length) {
      const chunk = buffer.subarray(0, Math.min(buffer.length, volume.size - offset));
      await volume.read(offset, chunk);
      hash.update(chunk);
    }
    return hash.digest("hex");
  } finally {
    await volume.close();
  }
}

/**
 * Problems found in the SR's on-disk state, read with a separate connection: SQLite integrity, every
 * volume's chain present and well formed, and (with `exactFiles`, after a GC) no file without a record.
 */
export function checkConsistency(sr: string, options: { exactFiles?: boolean } = {}): string[] {
  const problems: string[] = [];
  const db = new DatabaseSync(srFiles(sr).db, { readOnly: true, timeout: 15_000 });
  try {
    const integrity = db.prepare("PRAGMA integrity_check").all() as Array<{ integrity_check: string }>;
    if (integrity.length !== 1 || integrity[0]!.integrity_check !== "ok") problems.push(`integrity: ${JSON.stringify(integrity)}`);
    const fk = db.prepare("PRAGMA foreign_key_check").all();
    if (fk.length > 0) problems.push(`foreign keys: ${JSON.stringify(fk)}`);
    const layers = new Map(
      (db.prepare("SELECT * FROM layers").all() as Array<{ id: number; token: string; parent: number | null; size: number; allocated: number }>).map(
        (row) => [row.id, row],
      ),
    );
    for (const layer of layers.values()) {
      const files = layerFiles(sr, layer.token);
      if (!fs.existsSync(files.data)) {
        problems.push(`layer ${layer.id}: data file missing`);
        continue;
      }
      try {
        const map = readMapSync(files.map);
        if (map.count < clusterCount(layer.size)) problems.push(`layer ${layer.id}: map too small`);
        if (fs.statSync(files.data).size < layer.size) problems.push(`layer ${layer.id}: data file too small`);
      } catch (error) {
        problems.push(`layer ${layer.id}: ${(error as Error).message}`);
      }
    }
    const volumes = db.prepare("SELECT key, size, top_layer, cbt_log FROM volumes").all() as Array<{
      key: string;
      size: number;
      top_layer: number | null;
      cbt_log: number | null;
    }>;
    for (const volume of volumes) {
      const seen = new Set<number>();
      for (let id = volume.top_layer; id !== null; ) {
        const layer = layers.get(id);
        if (!layer || seen.has(id)) {
          problems.push(`volume ${volume.key}: chain broken at layer ${id}`);
          break;
        }
        if (id === volume.top_layer && layer.size < volume.size) problems.push(`volume ${volume.key}: top layer smaller than volume`);
        seen.add(id);
        id = layer.parent;
      }
    }
    const logs = db.prepare("SELECT token FROM cbt_logs").all() as Array<{ token: string }>;
    for (const log of logs) if (!fs.existsSync(cbtLogFile(sr, log.token))) problems.push(`cbt log ${log.token}: file missing`);
    if (options.exactFiles) {
      const expected = new Set([...layers.values()].flatMap((layer) => Object.values(layerFiles(sr, layer.token)).map((file) => path.basename(file))));
      for (const name of fs.readdirSync(srFiles(sr).layers)) if (!expected.has(name)) problems.push(`leaked file layers/${name}`);
      const expectedLogs = new Set(logs.map((log) => path.basename(cbtLogFile(sr, log.token))));
      for (const name of fs.readdirSync(srFiles(sr).cbt)) if (!expectedLogs.has(name)) problems.push(`leaked file cbt/${name}`);
    }
  } finally {
    db.close();
  }
  return problems;
}
