// Part of every plugin bundle: is the bundle still built from the sources as they are now? Sync and tiny, as
// it runs at the start of each plugin call (one stat per input file, well under a millisecond).
import { readFileSync, statSync } from "node:fs";

/** What a bundle was built from: absolute path, mtime and size of every input file. */
export interface BundleManifest {
  inputs: Array<[path: string, mtimeMs: number, size: number]>;
}

export function bundleIsFresh(manifestUrl: URL): boolean {
  let manifest: BundleManifest;
  try {
    manifest = JSON.parse(readFileSync(manifestUrl, "utf8")) as BundleManifest;
  } catch {
    return false;
  }
  return manifest.inputs.every(([path, mtimeMs, size]) => {
    const stat = statSync(path, { throwIfNoEntry: false });
    return stat !== undefined && stat.mtimeMs === mtimeMs && stat.size === size;
  });
}
