// The toolstack suite (`npm run bench -- toolstack`): XenAPI call latency over JSON-RPC and XML-RPC with one
// caller and with many, SR listing with 10 SRs, VDI listing of an SR of 10,000 volumes, the management API on
// PostgreSQL against SQLite, each next to a
// baseline measured in the same run. The service is `hangar serve` in a process of its own (its CPU per call
// read from /proc), over a data dir of the run; sections run in order on that one service (each adds
// objects). Progress goes to stderr, the table to stdout; a section that fails gives a failed row.
import { join } from "node:path";
import { renderTable, unavailableRow, type Row } from "./table.ts";
import { openWorkspace } from "./workspace.ts";
import { benchCallLatency } from "./toolstack/call-latency.ts";
import { benchEngines } from "./toolstack/engines.ts";
import { type BenchService, startBenchService } from "./toolstack/service.ts";
import { toolstackSizes, type ToolstackSizes } from "./toolstack/sizes.ts";
import { benchSrListing } from "./toolstack/sr-listing.ts";
import { benchVdiListing } from "./toolstack/vdi-listing.ts";

interface Section {
  id: string;
  name: string;
  target: string;
  bench(service: BenchService, sizes: ToolstackSizes): Promise<Row[]>;
}

const SECTIONS: Section[] = [
  { id: "latency", name: "call latency", target: "", bench: benchCallLatency },
  { id: "srs", name: "SR listing, 10 SRs", target: "", bench: benchSrListing },
  { id: "vdis", name: "VDI listing, 10,000 volumes", target: "< 300 ms", bench: benchVdiListing },
  { id: "engines", name: "management API on SQLite and PostgreSQL", target: "", bench: benchEngines },
];

export async function run(): Promise<void> {
  const sizes = toolstackSizes();
  const workspace = openWorkspace("hangar-bench-toolstack");
  const started = Date.now();
  const rows: Row[] = [];
  try {
    await workspace.withScratch("toolstack", async (scratch) => {
      // On disk: the database's fsyncs are part of what a call costs.
      const service = await startBenchService(join(scratch.disk, "data"));
      scratch.defer(() => service.stop());
      // HANGAR_BENCH_SECTIONS=latency,vdis runs only those sections (ids as in SECTIONS).
      const only = process.env.HANGAR_BENCH_SECTIONS?.split(",").map((id) => id.trim());
      for (const section of SECTIONS.filter((s) => only === undefined || only.includes(s.id))) {
        const sectionStarted = Date.now();
        process.stderr.write(`[bench toolstack] ${section.name}...\n`);
        try {
          rows.push(...(await section.bench(service, sizes)));
        } catch (error) {
          process.stderr.write(`[bench toolstack] ${section.name} failed: ${(error as Error).stack}\n`);
          rows.push({ ...unavailableRow(section.name, section.target, (error as Error).message), ours: "FAILED" });
        }
        process.stderr.write(`[bench toolstack] ${section.name}: ${((Date.now() - sectionStarted) / 1000).toFixed(0)} s\n`);
      }
    });
  } finally {
    await workspace.close();
  }
  const title = `Hangar toolstack bench — scale ${sizes.scale}, ${sizes.rounds} rounds, ${((Date.now() - started) / 1000).toFixed(0)} s in all`;
  process.stdout.write(`${renderTable(title, rows)}\n`);
  if (rows.some((row) => row.ours === "FAILED")) process.exitCode = 1;
}
