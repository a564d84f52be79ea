// The package manifest (`.mf`): one `ALG(file)= hex` line per file (docs/research/ova-ovf.md §3). Read
// tolerantly (blanks around the parentheses and `=`, as VirtualBox writes; CRLF; either hex case; SHA1, SHA256,
// SHA512), written as VMware's tools do (`SHA256(name)= lowercase hex`, which ESXi insists on). And the digests
// of a member computed as its bytes pass: the manifest may come after the disks (VirtualBox, vCenter put it
// last), so SHA-1 and SHA-256 are both kept until it is known which one it names.
import { createHash, type Hash } from "node:crypto";

export class ManifestError extends Error {}

export type DigestAlgorithm = "sha1" | "sha256" | "sha512";
const ALGORITHMS: Record<string, DigestAlgorithm> = { SHA1: "sha1", SHA256: "sha256", SHA512: "sha512" };

/** What a manifest may be: a line per file of a package of a few hundred files. */
export const MAX_MANIFEST_BYTES = 1024 * 1024;

export interface ManifestEntry {
  file: string;
  algorithm: DigestAlgorithm;
  digest: string;
}

/** The entries of a manifest; a line that is none is an error naming it (a manifest is checked or it is nothing). */
export function parseManifest(bytes: Buffer): ManifestEntry[] {
  if (bytes.length > MAX_MANIFEST_BYTES) throw new ManifestError(`the manifest is ${bytes.length} bytes, more than ${MAX_MANIFEST_BYTES}`);
  const entries: ManifestEntry[] = [];
  const lines = bytes.toString("utf8").split(/\r?\n/);
  for (const [index, line] of lines.entries()) {
    if (line.trim() === "") continue;
    const match = /^\s*([A-Za-z0-9-]+)\s*\((.+)\)\s*=\s*([0-9A-Fa-f]+)\s*$/.exec(line);
    if (match === null) throw new ManifestError(`manifest line ${index + 1} is not "ALGORITHM(file)= digest": ${JSON.stringify(line.slice(0, 120))}`);
    const algorithm = ALGORITHMS[match[1]!.toUpperCase()];
    if (algorithm === undefined) throw new ManifestError(`manifest line ${index + 1}: the digest algorithm ${match[1]} is not one this import checks (SHA1, SHA256, SHA512)`);
    const digest = match[3]!.toLowerCase();
    const expected = { sha1: 40, sha256: 64, sha512: 128 }[algorithm];
    if (digest.length !== expected) throw new ManifestError(`manifest line ${index + 1}: a ${match[1]} digest has ${expected} hex digits, not ${digest.length}`);
    entries.push({ file: match[2]!.trim().replace(/^(?:\.\/)+/, ""), algorithm, digest });
  }
  return entries;
}

export function formatManifest(entries: ReadonlyArray<{ file: string; sha256: string }>): string {
  return entries.map((entry) => `SHA256(${entry.file})= ${entry.sha256}\n`).join("");
}

/** The digests of one file's bytes as they pass, in the algorithms that may be asked for. */
export class Digests {
  readonly #hashes: Map<DigestAlgorithm, Hash>;
  #results: Map<DigestAlgorithm, string> | undefined;

  constructor(algorithms: readonly DigestAlgorithm[]) {
    this.#hashes = new Map(algorithms.map((algorithm) => [algorithm, createHash(algorithm)]));
  }

  update(bytes: Uint8Array): void {
    for (const hash of this.#hashes.values()) hash.update(bytes);
  }

  /** The hex digest in `algorithm`, or undefined when it was not computed. */
  result(algorithm: DigestAlgorithm): string | undefined {
    this.#results ??= new Map([...this.#hashes].map(([name, hash]) => [name, hash.digest("hex")]));
    return this.#results.get(algorithm);
  }
}
