// The console's transfer routes in a process of their own, for tests that kill the console (kill -9) and start it
// again: the tus upload route (/api/upload) and the export download route (/api/download/vm/<file>), served on
// 127.0.0.1 as the console's Pages API routes run them, and on start what the console's instrumentation does
// (uploads whose bytes all arrived are imported again). Run as `node --conditions=react-server console-process.ts`
// with the console's environment (HANGAR_DATA_DIR, HANGAR_TOOLSTACK_URL, HANGAR_CONSOLE_SECRET); it prints
// `console listening: <url>`.
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";

export interface ConsoleProcess {
  /** http://127.0.0.1:<port> */
  url: string;
  pid: number;
  /** SIGKILL, as a crash or a power cut; resolves once the process is gone. */
  kill(): Promise<void>;
}

/** Starts the routes in a child process with the console's `env` (on `port`, else a free one). */
export async function startConsoleProcess(env: { HANGAR_DATA_DIR: string; HANGAR_TOOLSTACK_URL: string; HANGAR_CONSOLE_SECRET: string }, port = 0): Promise<ConsoleProcess> {
  const child = spawn(process.execPath, ["--conditions=react-server", fileURLToPath(import.meta.url)], {
    env: { ...process.env, ...env, HANGAR_CONSOLE_PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let output = "";
  child.stderr.setEncoding("utf8").on("data", (text: string) => (output = (output + text).slice(-4000)));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.setEncoding("utf8").on("data", (text: string) => {
      output += text;
      const listening = /^console listening: (\S+)$/m.exec(output);
      if (listening !== null) resolve(listening[1]!);
    });
    void exited.then(() => reject(new Error(`the console process exited: ${output}`)));
  });
  return {
    url,
    pid: child.pid!,
    async kill() {
      child.kill("SIGKILL");
      await exited;
    },
  };
}

if (import.meta.main) {
  const { handleUpload, resumeCompleteUploads, UPLOAD_PATH } = await import("./upload/tus.ts");
  const { serveExportDownload } = await import("./download/serve.ts");
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://console").pathname;
    const route = path.startsWith(UPLOAD_PATH)
      ? handleUpload(req, res)
      : /^\/api\/download\/(vm|vdi)\//.test(path)
        ? serveExportDownload(req, res, path.split("/")[3] as "vm" | "vdi", decodeURIComponent(path.split("/")[4] ?? ""))
        : Promise.resolve(void res.writeHead(404).end());
    route.catch((error: unknown) => {
      // The routes answer every failure themselves: one that escapes is a bug the test should see.
      process.stderr.write(`route threw: ${(error as Error).stack ?? String(error)}\n`);
      res.destroy();
    });
  });
  server.listen(Number(process.env.HANGAR_CONSOLE_PORT ?? 0), "127.0.0.1", () => {
    process.stdout.write(`console listening: http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
  });
  void resumeCompleteUploads().catch((error: unknown) => process.stderr.write(`resuming transfers: ${String(error)}\n`));
}
