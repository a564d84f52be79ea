// Which SRs this host has attached, for Plugin.ls: one small file per SR in the host's data dir (the SR's
// own attached flag lives on the SR; this index only lets us find them again).
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync, renameSync } from "node:fs";
import { join } from "node:path";
import { dataDir } from "../../../config.ts";

const indexDir = () => join(dataDir(), "file-plugin", "attached");

export function rememberAttached(uuid: string, srUri: string): void {
  mkdirSync(indexDir(), { recursive: true });
  const file = join(indexDir(), uuid);
  writeFileSync(`${file}.tmp`, srUri);
  renameSync(`${file}.tmp`, file);
}

export function forgetAttached(uuid: string): void {
  rmSync(join(indexDir(), uuid), { force: true });
}

export function listAttached(): string[] {
  try {
    return readdirSync(indexDir())
      .filter((name) => !name.endsWith(".tmp"))
      .map((name) => readFileSync(join(indexDir(), name), "utf8"))
      .sort();
  } catch {
    return [];
  }
}
