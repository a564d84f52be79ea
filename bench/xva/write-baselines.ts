// The import rows' baselines: the same disk data written into a fresh volume of the import's SR without the
// XVA path. `nbdcopy` through the `nbd` datapath, as the toolstack plugs a volume (open, attach, activate), is
// the datapath's own limit: our NBD daemon filling a fresh sparse volume. `cp --sparse=always` into a fresh
// file on the SR's filesystem is the machine's: the kernel filling a fresh sparse file, which any server pays.
import { closeSync, openSync, rmSync, writeSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { z } from "zod";
import { NbdClient } from "../../server/nbd/client.ts";
import { srPathOf, volumeUri } from "../../server/plugins/uris.ts";
import { WINDOW } from "../../server/toolstack/transfer/volume-io.ts";
import { endedChildrenCpuSeconds, runCommand } from "../processes.ts";
import { nbdcopy, toNbdUri } from "../storage/nbd-export.ts";
import { DBG, pluginClient } from "../storage/plugins.ts";
import { type Cost, meterService, type XvaService } from "./service.ts";

const DATAPATH = "nbd";
const MiB = 1024 * 1024;

/**
 * Writes `bytes` into a file in `dir` and removes it, so that the next writer starts with that much memory just
 * freed. On this VM a page the guest has not touched lately costs several times more to fill than one just
 * freed (measured: 2 GiB into a fresh tmpfs file, 3.4–6.4 s of system time against 0.8 s right after 2 GiB
 * were freed), so whoever writes first after a quiet spell pays that; each write contender starts warm alike.
 */
export function warmMemory(dir: string, bytes: number): void {
  const path = join(dir, "bench-warm-memory");
  const fd = openSync(path, "w");
  try {
    const piece = Buffer.alloc(MiB, 1);
    for (let at = 0; at < bytes; at += MiB) writeSync(fd, piece, 0, Math.min(MiB, bytes - at), at);
  } finally {
    closeSync(fd);
    rmSync(path, { force: true });
  }
}
const DOMAIN = "0";
const TIMEOUT_MS = 15 * 60_000;

/** The SR imports go to, and its directory (what its plugin's SR.attach answered, kept on its PBD). */
export async function importSrPath(service: XvaService): Promise<{ sr: string; path: string }> {
  const { client } = service;
  const sr = service.importSr ?? (await client.call(z.string(), "pool.get_default_SR", (await client.call(z.array(z.string()), "pool.get_all"))[0]));
  for (const pbd of await client.call(z.array(z.string()), "SR.get_PBDs", sr)) {
    const uri = (await client.call(z.record(z.string(), z.string()), "PBD.get_other_config", pbd))["hangar-sr-uri"];
    if (uri !== undefined) return { sr, path: srPathOf(uri) };
  }
  throw new Error(`SR ${sr} is not attached: no PBD names its URI`);
}

/**
 * Runs `work` on the NBD export (as Datapath.attach names it) of a fresh volume of `size` bytes on the import SR, plugged
 * through the nbd datapath as the toolstack plugs one (open, attach, activate; none of that timed), then
 * unplugs and destroys it.
 */
async function withFreshVolume<T>(service: XvaService, size: number, work: (xapiNbdUri: string) => Promise<T>): Promise<T> {
  const { client } = service;
  const { sr, path } = await importSrPath(service);
  const vdi = await client.call(z.string(), "VDI.create", { SR: sr, virtual_size: String(size), name_label: "bench write target", type: "user", sharable: false, read_only: false, other_config: {} });
  try {
    const uri = volumeUri(DATAPATH, path, await client.call(z.string(), "VDI.get_location", vdi));
    const plugin = pluginClient("datapath", DATAPATH);
    await plugin.call("Datapath.open", { dbg: DBG, uri, persistent: true });
    try {
      const backend = await plugin.call("Datapath.attach", { dbg: DBG, uri, domain: DOMAIN });
      try {
        await plugin.call("Datapath.activate", { dbg: DBG, uri, domain: DOMAIN });
        const nbd = backend.implementations.find((implementation) => implementation[0] === "Nbd");
        if (nbd === undefined || nbd[0] !== "Nbd") throw new Error(`Datapath.attach offered no Nbd implementation: ${JSON.stringify(backend)}`);
        const result = await work(nbd[1].uri);
        await plugin.call("Datapath.deactivate", { dbg: DBG, uri, domain: DOMAIN });
        return result;
      } finally {
        await plugin.call("Datapath.detach", { dbg: DBG, uri, domain: DOMAIN });
      }
    } finally {
      await plugin.call("Datapath.close", { dbg: DBG, uri });
    }
  } finally {
    await client.call(z.unknown(), "VDI.destroy", vdi);
  }
}

/**
 * `nbdcopy --destination-is-zero <raw> <export>` into a fresh volume: the raw file is sparse, so nbdcopy writes its
 * data and skips its holes, as an import leaves zero blocks out. Cost: the NBD daemon's CPU.
 */
export function nbdcopyIntoFreshVolume(service: XvaService, raw: string, size: number): Promise<{ seconds: number; cost: Cost }> {
  return withFreshVolume(service, size, async (target) => {
    const stop = meterService(service);
    const seconds = await nbdcopy(["--destination-is-zero", raw, toNbdUri(target)]);
    return { seconds, cost: stop() };
  });
}

/**
 * The do-nothing peer of an import: `curl -T <archive>` to a bare Node HTTP server (in the bench process) that
 * writes the body as it comes, in 1 MiB writes at increasing offsets, WINDOW in flight, into a fresh volume over
 * NBD, then flushes. The same sockets and daemon as an import, without tar, checksums, records or plugin calls.
 * Cost: the NBD daemon's CPU; `relay`: the server's own.
 */
export function relayIntoFreshVolume(service: XvaService, archive: string, size: number): Promise<{ seconds: number; cost: Cost; relay: number }> {
  return withFreshVolume(service, size, async (target) => {
    const nbd = await NbdClient.connect(target);
    try {
      const server = createServer((request, response) => {
        const inFlight = new Set<Promise<void>>();
        let piece = Buffer.allocUnsafeSlow(MiB);
        let filled = 0;
        let offset = 0;
        const send = async (data: Buffer) => {
          const write = nbd.write(offset, data);
          offset += data.length;
          inFlight.add(write);
          void write.finally(() => inFlight.delete(write));
          if (inFlight.size >= WINDOW) await Promise.race(inFlight);
        };
        void (async () => {
          for await (const chunk of request as AsyncIterable<Buffer>) {
            for (let at = 0; at < chunk.length; ) {
              const n = chunk.copy(piece, filled, at);
              filled += n;
              at += n;
              if (filled === MiB) {
                await send(piece);
                piece = Buffer.allocUnsafeSlow(MiB);
                filled = 0;
              }
            }
          }
          if (filled > 0) await send(piece.subarray(0, filled));
          await Promise.all(inFlight);
          await nbd.flush();
          response.end();
        })().catch((error: unknown) => response.destroy(error as Error));
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      try {
        const { port } = server.address() as AddressInfo;
        const stop = meterService(service);
        const cpu = process.cpuUsage();
        const { seconds } = await runCommand("curl", ["-sS", "-f", "-o", "/dev/null", "-T", archive, `http://127.0.0.1:${port}/import`], { timeoutMs: TIMEOUT_MS });
        const used = process.cpuUsage(cpu);
        return { seconds, cost: stop(), relay: (used.user + used.system) / 1e6 };
      } finally {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    } finally {
      await nbd.close();
    }
  });
}

/** `cp --sparse=always <raw>` into a fresh file in the import SR's directory (removed after): wall and cp's CPU seconds. */
export async function cpIntoSrFilesystem(service: XvaService, raw: string): Promise<{ seconds: number; cpu: number }> {
  const target = join((await importSrPath(service)).path, "bench-cp-target.raw");
  try {
    const cpuBefore = endedChildrenCpuSeconds();
    const { seconds } = await runCommand("cp", ["--sparse=always", raw, target], { timeoutMs: TIMEOUT_MS });
    return { seconds, cpu: endedChildrenCpuSeconds() - cpuBefore };
  } finally {
    rmSync(target, { force: true });
  }
}
