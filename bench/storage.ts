// The storage suite (`npm run bench -- storage`): NBD throughput, Data.copy, snapshot/clone time, layer-chain
// reads and plugin exec latency, each next to a baseline measured in the same run; prints one table.
// Progress goes to stderr, the table to stdout. A section that fails gives a failed row, not a dead run.
import { renderTable, unavailableRow, type Row } from "./table.ts";
import { openWorkspace, type Scratch } from "./workspace.ts";
import { benchChainRead } from "./storage/chain-read.ts";
import { benchDataCopy, nbdDatapathAvailable } from "./storage/data-copy.ts";
import { benchExecLatency } from "./storage/exec-latency.ts";
import { benchNbdThroughput } from "./storage/nbd-throughput.ts";
import { storageSizes, type StorageSizes } from "./storage/sizes.ts";
import { benchSnapshot } from "./storage/snapshot.ts";

interface Section {
  /** Short name for its scratch dirs. */
  id: string;
  name: string;
  /** The target its rows are held to, for a row saying why the section has no numbers. */
  target: string;
  bench(scratch: Scratch, sizes: StorageSizes): Promise<Row[]>;
  /** Why the section cannot run here, if it cannot. */
  unavailable?(): string | null;
}

const SECTIONS: Section[] = [
  { id: "throughput", name: "NBD sequential throughput", target: "≥ 0.9×", bench: benchNbdThroughput },
  {
    id: "copy",
    name: "Data.copy",
    target: "≥ 0.9×",
    bench: benchDataCopy,
    unavailable: () => (nbdDatapathAvailable() ? null : "server/plugins/datapath/nbd (plugin.ts, Data.copy) is missing"),
  },
  { id: "snapshot", name: "Volume.snapshot / Volume.clone", target: "< 1000 ms", bench: benchSnapshot },
  { id: "chain", name: "layer chain read", target: "≥ 0.8×", bench: benchChainRead },
  { id: "exec", name: "plugin exec latency", target: "≤ 1.5× / 2× a trivial Node start", bench: benchExecLatency },
];

export async function run(): Promise<void> {
  const sizes = storageSizes();
  const workspace = openWorkspace("hangar-bench");
  const started = Date.now();
  const rows: Row[] = [];
  try {
    // HANGAR_BENCH_SECTIONS=exec,throughput runs only those sections (ids as in SECTIONS).
    const only = process.env.HANGAR_BENCH_SECTIONS?.split(",").map((id) => id.trim());
    for (const section of SECTIONS.filter((s) => only === undefined || only.includes(s.id))) {
      const why = section.unavailable?.() ?? null;
      if (why !== null) {
        rows.push(unavailableRow(section.name, section.target, why));
        continue;
      }
      const sectionStarted = Date.now();
      process.stderr.write(`[bench storage] ${section.name}...\n`);
      try {
        rows.push(...(await workspace.withScratch(section.id, (scratch) => section.bench(scratch, sizes))));
      } catch (error) {
        process.stderr.write(`[bench storage] ${section.name} failed: ${(error as Error).stack}\n`);
        rows.push({ ...unavailableRow(section.name, section.target, (error as Error).message), ours: "FAILED" });
      }
      process.stderr.write(`[bench storage] ${section.name}: ${((Date.now() - sectionStarted) / 1000).toFixed(0)} s\n`);
    }
  } finally {
    await workspace.close();
  }
  const title = `Hangar storage bench — scale ${sizes.scale}, medians of ${sizes.runs} runs (${sizes.execRuns} for exec latency), ${((Date.now() - started) / 1000).toFixed(0)} s in all`;
  process.stdout.write(`${renderTable(title, rows)}\n`);
  if (rows.some((row) => row.ours === "FAILED")) process.exitCode = 1;
}
