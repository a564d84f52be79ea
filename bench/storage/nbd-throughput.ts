// Row group 1: sequential read and write through our NBD server (a file SR volume via openVolumeData, and a
// raw file via openRawFileBackend) against qemu-nbd serving the same raw file; nbdcopy is the client of all
// three with the same flags. Server CPU per GiB is noted: on a shared machine it is steadier than wall time.
import { join } from "node:path";
import { formatSize } from "../measure.ts";
import type { Row } from "../table.ts";
import type { Scratch } from "../workspace.ts";
import { writeFile, writeVolume } from "./content.ts";
import { measureTransfers, serveOurs, serveQemu, transferNote, type NbdExport, type TransferSamples } from "./nbd-export.ts";
import type { StorageSizes } from "./sizes.ts";
import { createBenchSr, createBenchVolume } from "./sr.ts";

const TARGET = 0.9;
/** One connection each: qemu-nbd allows one client by default, and a fair race has one lane each. */
const CLIENT_FLAGS = ["--connections=1"];
type Contender = "volume" | "raw" | "qemu";

const LABELS: Record<Exclude<Contender, "qemu">, string> = {
  volume: "file SR volume",
  raw: "raw file",
};

export async function benchNbdThroughput(scratch: Scratch, sizes: StorageSizes): Promise<Row[]> {
  const dir = scratch.fast;
  const size = sizes.throughputBytes;
  const source = join(dir, "source.raw");
  const image = join(dir, "image.raw");
  await writeFile(source, size);
  await writeFile(image, size);
  const sr = await createBenchSr(scratch, dir, "sr");
  const key = await createBenchVolume(sr, "throughput", size);
  await writeVolume(sr, key, [{ offset: 0, length: size }]);

  const exports: Record<Contender, NbdExport> = {
    volume: await serveOurs(dir, "volume", { sr, key }, { readOnly: false }),
    raw: await serveOurs(dir, "raw", { raw: image }, { readOnly: false }),
    qemu: await serveQemu(dir, "qemu", image, { readOnly: false }),
  };
  try {
    const rows: Row[] = [];
    for (const direction of ["read", "write"] as const) {
      const argsOf = (contender: Contender) =>
        direction === "read" ? [...CLIENT_FLAGS, exports[contender].uri, "null:"] : [...CLIENT_FLAGS, source, exports[contender].uri];
      const measured = await measureTransfers(exports, argsOf, size, sizes.runs);
      for (const contender of ["volume", "raw"] as const) {
        rows.push(throughputRow(`seq ${direction} ${formatSize(size)}, ${LABELS[contender]}, our NBD server`, measured[contender], measured.qemu));
      }
    }
    return rows;
  } finally {
    await Promise.all(Object.values(exports).map((e) => e.stop()));
  }
}

function throughputRow(measure: string, ours: TransferSamples, baseline: TransferSamples): Row {
  const ratio = ours.speed.median / baseline.speed.median;
  return {
    measure,
    ours: `${ours.speed.median.toFixed(0)} MB/s`,
    baseline: `${baseline.speed.median.toFixed(0)} MB/s qemu-nbd, same file`,
    ratio,
    target: `≥ ${TARGET}×`,
    met: ratio >= TARGET,
    note: transferNote(ours, baseline),
  };
}
