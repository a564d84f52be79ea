// An SR of many volumes for listing benches: the SR made through XenAPI SR.create, its volumes straight
// through the file SR library (10,000 plugin calls would take minutes).
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { disconnectSr } from "../../server/plugins/filesr/db.ts";
import { createVolume } from "../../server/plugins/filesr/index.ts";
import type { BenchService } from "./service.ts";

export interface BigSr {
  ref: string;
  path: string;
}

/** The size of volume `i`: 1 to 1000 MiB, varied, so a sort by size has work to do. */
export function bigSrVolumeSize(i: number): number {
  return (1 + ((i * 7919) % 1000)) * 1024 ** 2;
}

export async function createBigSr(service: BenchService, name: string, volumes: number): Promise<BigSr> {
  const { client } = service;
  const [host] = await client.call(z.array(z.string()), "host.get_all");
  const path = join(service.dataDir, "bench-srs", name);
  const ref = await client.call(z.string(), "SR.create", host, { path }, "0", name, "", "file", "user", false, {});
  const started = Date.now();
  try {
    for (let i = 0; i < volumes; i++) await createVolume(path, { name: `volume ${i}`, description: "bench", size: bigSrVolumeSize(i) });
  } finally {
    disconnectSr(path);
  }
  process.stderr.write(`  created ${volumes} volumes in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  // The library's calls never yielded to I/O: let the client see the keep-alive connections the service
  // closed meanwhile, or the next call goes out on one ("other side closed").
  await sleep(100);
  return { ref, path };
}
