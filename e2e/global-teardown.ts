// After the run: the toolstack is stopped by Playwright, but daemons its plugins started (a datasource
// writer per attached SR) outlive it. They are found by the run's data dir in their command line.
import { readdirSync, readFileSync, rmSync } from "node:fs";

export default function globalTeardown(): void {
  const dataDir = process.env.HANGAR_E2E_DATA_DIR;
  if (dataDir === undefined || !dataDir.includes("hangar-e2e-")) return;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(dataDir)) process.kill(Number(entry), "SIGTERM");
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  rmSync(dataDir, { recursive: true, force: true });
}
