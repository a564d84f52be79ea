// `npm run bench -- <suite>...`: runs benchmark suites by name (all of them when none is named).
// Each suite measures side by side with its baselines and prints one table; see bench/README.md.
import { argv, exit, stderr } from "node:process";

const SUITES: Record<string, () => Promise<{ run(): Promise<void> }>> = {
  storage: () => import("./storage.ts"),
  console: () => import("./console.ts"),
  toolstack: () => import("./toolstack.ts"),
  xva: () => import("./xva.ts"),
  transfers: () => import("./transfers.ts"),
  pool: () => import("./pool.ts"),
  load: () => import("./load.ts"),
  disks: () => import("./disks.ts"),
  scale: () => import("./scale.ts"),
};

const names = argv.slice(2);
const unknown = names.filter((name) => !(name in SUITES));
if (unknown.length > 0) {
  stderr.write(`unknown bench suite(s): ${unknown.join(", ")}; known: ${Object.keys(SUITES).join(", ")}\n`);
  exit(2);
}
for (const name of names.length > 0 ? names : Object.keys(SUITES)) {
  const suite = await SUITES[name]!();
  await suite.run();
}
