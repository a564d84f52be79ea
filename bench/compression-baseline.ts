// Parallel XVA compression (server/xva/compression.ts) against `pigz -1` and `zstd -T0 -3` on the same mixed
// data (half word salad, half random, in 1 MiB blocks), file to file on tmpfs. Every contender runs as a
// process of its own (ours: this script with --compress), so the main rows include start-up alike; wall and
// CPU (user + system, all threads: cutime/cstime once waited for). Our child also reports its own time from
// first read to last write (the "in-process" rows: what a long-running toolstack sees), and a Node file-to-file
// copy with no compression at all gives the floor of Node's stream I/O on this machine.
//
//   node bench/compression-baseline.ts     # 256 MiB, 5 rounds; HANGAR_BENCH_SCALE, HANGAR_BENCH_RUNS as the suites
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, createReadStream, readFileSync, createWriteStream, existsSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough, Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createParallelCompressor, type Compression } from "../server/xva/compression.ts";
import { formatSize, interleave, megabytesPerSecond, MiB, spread, summarise, timeSeconds } from "./measure.ts";
import { endedChildrenCpuSeconds } from "./processes.ts";
import { renderTable, type Row } from "./table.ts";

const mode = process.argv[2];
if (mode === "--compress" || mode === "--copy" || mode === "--memory" || mode === "--memory-warm") {
  // The child: compress (or just copy) argv[4] into argv[5], then report its own wall and CPU seconds on stderr.
  // --memory: the file, read beforehand, goes from memory in 1 MiB pieces to a sink that drops it: the
  // compressor alone, no file I/O. --memory-warm: the same after a first 16 MiB has warmed the code up, as in
  // a toolstack that exported a moment ago.
  const [kind, input, output] = process.argv.slice(3) as [Compression, string, string];
  const pieces: Buffer[] = [];
  const memory = mode === "--memory" || mode === "--memory-warm";
  const drop = () => new Writable({ write: (_chunk, _encoding, callback) => callback() });
  if (memory) for (let data = readFileSync(input), at = 0; at < data.byteLength; at += MiB) pieces.push(data.subarray(at, at + MiB));
  if (mode === "--memory-warm") await pipeline(Readable.from(pieces.slice(0, 16)), createParallelCompressor(kind), drop());
  const started = process.hrtime.bigint();
  const cpuStarted = process.cpuUsage();
  if (memory) await pipeline(Readable.from(pieces), createParallelCompressor(kind), drop());
  else await pipeline(createReadStream(input, { highWaterMark: MiB }), mode === "--copy" ? new PassThrough() : createParallelCompressor(kind), createWriteStream(output));
  const cpu = process.cpuUsage(cpuStarted);
  process.stderr.write(JSON.stringify({ wall: Number(process.hrtime.bigint() - started) / 1e9, cpu: (cpu.user + cpu.system) / 1e6 }) + "\n");
  process.exit(0);
}

const scale = Number(process.env.HANGAR_BENCH_SCALE ?? "1");
const rounds = Number(process.env.HANGAR_BENCH_RUNS ?? "5");
const size = Math.max(MiB, Math.round((256 * MiB * scale) / MiB) * MiB);

// On tmpfs: the rows compare compressors, not the disk.
const dir = mkdtempSync(join(existsSync("/dev/shm") ? "/dev/shm" : tmpdir(), "hangar-bench-compression-"));
const input = join(dir, "mixed.bin");
const WORDS = "the quick brown fox jumps over lazy dog virtual machine disk block export import storage volume snapshot clone pool host network xapi".split(" ");

function writeMixed() {
  const fd = openSync(input, "w");
  let state = 0x9e3779b9;
  for (let block = 0; block * MiB < size; block++) {
    let data: Buffer;
    if (block % 2 === 1) data = randomBytes(MiB);
    else {
      data = Buffer.allocUnsafe(MiB);
      for (let at = 0; at < MiB; ) {
        state ^= state << 13;
        state ^= state >>> 17;
        state ^= state << 5;
        at += data.write(WORDS[(state >>> 0) % WORDS.length]!, at, "latin1");
        if (at < MiB) data[at++] = (state & 0xf0) === 0 ? 0x0a : 0x20;
      }
    }
    writeSync(fd, data);
  }
  closeSync(fd);
}

type Contender = "ours gzip" | "pigz -1" | "ours zstd" | "zstd -T0 -3" | "node copy" | "ours gzip, memory" | "ours gzip, memory, warm" | "pigz -1, to null" | "ours zstd, memory" | "ours zstd, memory, warm" | "zstd -T0 -3, to null";
const commands: Record<Contender, (output: string) => [string, string[]]> = {
  "ours gzip": (output) => [process.execPath, [import.meta.filename, "--compress", "gzip", input, output]],
  "pigz -1": () => ["pigz", ["-1", "-c", input]],
  "ours zstd": (output) => [process.execPath, [import.meta.filename, "--compress", "zstd", input, output]],
  "zstd -T0 -3": () => ["zstd", ["-T0", "-3", "-q", "-c", input]],
  "node copy": (output) => [process.execPath, [import.meta.filename, "--copy", "-", input, output]],
  "ours gzip, memory": () => [process.execPath, [import.meta.filename, "--memory", "gzip", input]],
  "ours gzip, memory, warm": () => [process.execPath, [import.meta.filename, "--memory-warm", "gzip", input]],
  "pigz -1, to null": () => ["pigz", ["-1", "-c", input]],
  "ours zstd, memory": () => [process.execPath, [import.meta.filename, "--memory", "zstd", input]],
  "ours zstd, memory, warm": () => [process.execPath, [import.meta.filename, "--memory-warm", "zstd", input]],
  "zstd -T0 -3, to null": () => ["zstd", ["-T0", "-3", "-q", "-c", input]],
};

type Run = { wall: number; cpu: number; innerWall: number; innerCpu: number };
const runs = new Map<Contender, Run[]>();
const sizes = new Map<Contender, number>();

async function run(name: Contender): Promise<number> {
  const output = join(dir, "out");
  const [command, args] = commands[name](output);
  const toNull = name.includes(", memory") || name.endsWith(", to null");
  const out = openSync(toNull ? "/dev/null" : output, "w");
  const cpuBefore = endedChildrenCpuSeconds();
  let report = "";
  const wall = await timeSeconds(
    () =>
      new Promise<void>((resolve, reject) => {
        const child = spawn(command, args, { stdio: ["ignore", out, "pipe"] });
        child.stderr!.setEncoding("utf8").on("data", (text: string) => (report += text));
        child.on("error", reject);
        child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`${name} exited ${code}: ${report}`))));
      }),
  );
  const cpu = endedChildrenCpuSeconds() - cpuBefore;
  closeSync(out);
  // Our children say how long the work took without Node's start-up; the tools' own runs are all work.
  const inner = report.trim() === "" ? { wall, cpu } : (JSON.parse(report.trim().split("\n").pop()!) as { wall: number; cpu: number });
  runs.set(name, [...(runs.get(name) ?? []), { wall, cpu, innerWall: inner.wall, innerCpu: inner.cpu }]);
  if (!toNull) sizes.set(name, statSync(output).size);
  return wall;
}

const median = (name: Contender, pick: (run: Run) => number) => summarise(runs.get(name)!.map(pick)).median;
const rate = (seconds: number) => megabytesPerSecond(size, seconds);

try {
  process.stderr.write(`writing ${formatSize(size)} of mixed data…\n`);
  writeMixed();
  const contenders = Object.keys(commands) as Contender[];
  await interleave(rounds, contenders, async (name, round) => {
    const seconds = await run(name);
    process.stderr.write(`round ${round + 1}/${rounds} ${name}: ${rate(seconds).toFixed(0)} MB/s\n`);
    return seconds;
  });
  const rows: Row[] = [];
  for (const [kind, ours, baseline, where, inProcess] of [
    ["gzip", "ours gzip", "pigz -1", "file to file", false],
    ["gzip", "ours gzip", "pigz -1", "file to file, in-process", true],
    ["gzip", "ours gzip, memory", "pigz -1, to null", "memory (tool: file) to null, in-process", true],
    ["gzip", "ours gzip, memory, warm", "pigz -1, to null", "memory (tool: file) to null, in-process, warm", true],
    ["zstd", "ours zstd", "zstd -T0 -3", "file to file", false],
    ["zstd", "ours zstd", "zstd -T0 -3", "file to file, in-process", true],
    ["zstd", "ours zstd, memory", "zstd -T0 -3, to null", "memory (tool: file) to null, in-process", true],
    ["zstd", "ours zstd, memory, warm", "zstd -T0 -3, to null", "memory (tool: file) to null, in-process, warm", true],
  ] as const) {
    const wall = (r: Run) => (inProcess ? r.innerWall : r.wall);
    const cpu = (r: Run) => (inProcess ? r.innerCpu : r.cpu);
    const base = rate(median(baseline, (r) => r.wall));
    const oursRate = rate(median(ours, wall));
    const walls = summarise(runs.get(ours)!.map((r) => rate(wall(r))));
    const baseWalls = summarise(runs.get(baseline)!.map((r) => rate(r.wall)));
    const sizeNote = sizes.has(ours) && !inProcess ? `; size ${formatSize(sizes.get(ours)!)} vs ${formatSize(sizes.get(baseline)!)}` : "";
    rows.push({
      measure: `${kind}, ${formatSize(size)} mixed, ${where}`,
      ours: `${oursRate.toFixed(0)} MB/s`,
      baseline: `${base.toFixed(0)} MB/s ${baseline.split(",")[0]}`,
      ratio: oursRate / base,
      target: "≥ 0.9×",
      met: oursRate / base >= 0.9,
      note: `CPU ${median(ours, cpu).toFixed(2)} s vs ${median(baseline, (r) => r.cpu).toFixed(2)} s; spread ${spread(walls)} vs ${spread(baseWalls)} MB/s${sizeNote}`,
    });
  }
  const copy = rate(median("node copy", (r) => r.innerWall));
  const zstd = rate(median("zstd -T0 -3", (r) => r.wall));
  rows.push({
    measure: `Node file-to-file copy, no compression, in-process`,
    ours: `${copy.toFixed(0)} MB/s`,
    baseline: `${zstd.toFixed(0)} MB/s zstd -T0 -3`,
    ratio: copy / zstd,
    target: "",
    met: null,
    note: `CPU ${median("node copy", (r) => r.innerCpu).toFixed(2)} s: the floor of Node's stream I/O here`,
  });
  process.stdout.write(renderTable(`Compression (${rounds} rounds, medians, ${availableParallelism()} cores)`, rows) + "\n");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
