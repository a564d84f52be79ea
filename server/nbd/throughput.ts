// Throughput check (not a test): nbdcopy reading/writing an image through our NbdServer vs qemu-nbd.
//   node server/nbd/throughput.ts [--dir /dev/shm] [--size-mib 1024] [--runs 5] [-- extra nbdcopy args]
// Runs alternate between the two servers (same image file); reports median MiB/s, server CPU ms per GiB
// and the median of paired ratios. Put the image on tmpfs so disk writeback does not dominate.

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, open, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { openRawFileBackend } from "./raw-file-backend.ts";
import { NbdServer } from "./server.ts";
import { waitForSocket } from "./testing.ts";

const { values, positionals } = parseArgs({
  options: { dir: { type: "string", default: "/dev/shm" }, "size-mib": { type: "string", default: "1024" }, runs: { type: "string", default: "5" } },
  allowPositionals: true,
});
const sizeMiB = Number(values["size-mib"]);
const runs = Number(values.runs);
const extra = positionals;

function exec(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "ignore", "inherit"] });
    child.once("error", reject);
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited ${code}`))));
  });
}

/** utime+stime of a process in milliseconds (all threads), from /proc. */
async function cpuMs(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, "utf8")).split(") ")[1]!.split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // USER_HZ is 100 on Linux
}

interface Server {
  label: string;
  uri: string;
  pid: number;
}

/** One timed nbdcopy; returns MiB/s and the server's CPU ms per GiB. */
async function copyOnce(server: Server, direction: "read" | "write", source: string): Promise<{ speed: number; cpu: number }> {
  const args = direction === "read" ? [...extra, server.uri, "null:"] : [...extra, source, server.uri];
  const cpuBefore = await cpuMs(server.pid);
  const started = process.hrtime.bigint();
  await exec("nbdcopy", args);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return { speed: sizeMiB / seconds, cpu: ((await cpuMs(server.pid)) - cpuBefore) / (sizeMiB / 1024) };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Runs alternate between the servers, so load changes on a shared machine hit both alike. */
async function compare(ours: Server, theirs: Server, source: string): Promise<void> {
  for (const direction of ["read", "write"] as const) {
    for (const server of [ours, theirs]) await copyOnce(server, direction, source); // warm-up
    const results = new Map<Server, { speed: number; cpu: number }[]>([[ours, []], [theirs, []]]);
    for (let i = 0; i < runs; i++) for (const server of [ours, theirs]) results.get(server)!.push(await copyOnce(server, direction, source));
    for (const server of [ours, theirs]) {
      const rows = results.get(server)!;
      console.log(
        `${server.label.padEnd(9)} ${direction.padEnd(5)} ${median(rows.map((r) => r.speed)).toFixed(0).padStart(5)} MiB/s  ` +
          `${median(rows.map((r) => r.cpu)).toFixed(0).padStart(4)} ms CPU/GiB   runs: ${rows.map((r) => r.speed.toFixed(0)).join(" ")}`,
      );
    }
    const ratios = results.get(ours)!.map((r, i) => r.speed / results.get(theirs)!.at(i)!.speed);
    console.log(`${"".padEnd(9)} ${direction.padEnd(5)} ${ours.label}/${theirs.label}: median of paired ratios ${median(ratios).toFixed(2)}`);
  }
}

const dir = await mkdtemp(join(values.dir, "nbd-throughput-"));
try {
  const source = join(dir, "source.raw");
  const image = join(dir, "image.raw");
  for (const path of [source, image]) {
    const file = await open(path, "w");
    for (let i = 0; i < sizeMiB; i++) await file.write(randomBytes(1024 * 1024));
    await file.close();
  }

  const server = new NbdServer();
  const backend = await openRawFileBackend(image, { readOnly: false });
  server.addExport("image", backend);
  const ours = join(dir, "ours.sock");
  await server.listen({ socketPath: ours });
  const qemuSocket = join(dir, "qemu.sock");
  const qemu = spawn("qemu-nbd", [`--socket=${qemuSocket}`, "--format=raw", "--persistent", "--shared=16", "--export-name=image", image], { stdio: "ignore" });
  try {
    await waitForSocket(qemuSocket);
    await compare(
      { label: "hangar", uri: `nbd+unix:///image?socket=${ours}`, pid: process.pid },
      { label: "qemu-nbd", uri: `nbd+unix:///image?socket=${qemuSocket}`, pid: qemu.pid! },
      source,
    );
  } finally {
    qemu.kill("SIGTERM");
    await server.close();
    await backend.close();
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
