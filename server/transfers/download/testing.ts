// Test helpers for export downloads: the route served over real HTTP (Node's request and response, as the
// Pages API route gets them), and a VM with data to export, imported through the toolstack's /import.
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import type { TestToolstack } from "../../toolstack/storage-testing.ts";
import { collect, http, MiB, patternBlock, type TestDisk, testXva } from "../../toolstack/transfer/testing.ts";
import { parseXmlRpcValue } from "../../xenapi/xml-rpc.ts";
import { serveExportDownload } from "./serve.ts";

/** serveExportDownload (as the Pages API route runs it) on a port of 127.0.0.1 at /api/download/vm|vdi/<file>; the VM route's URL. */
export async function serveDownloads(): Promise<{ url: string; close: () => Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const [subject, file] = new URL(req.url ?? "/", "http://x").pathname.split("/").slice(3);
    serveExportDownload(req, res, subject === "vdi" ? "vdi" : "vm", decodeURIComponent(file ?? "")).catch((error: unknown) => {
      // The route answers every failure itself: one that escapes is a bug the test should show.
      process.stderr.write(`serveExportDownload threw: ${(error as Error).stack ?? String(error)}\n`);
      res.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  // A test awaits its requests, which hold their own sockets: the listener must not keep a failed test's file alive.
  server.unref();
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/download/vm`,
    // Every connection goes at the end, busy ones too: a request still waiting on a spool must not hold the test.
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The first `count` bytes of a GET, then the connection is cut (a broken download). */
export function cutDownload(url: string, headers: Record<string, string>, count: number): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, { headers }, (response) => {
      const chunks: Buffer[] = [];
      let got = 0;
      response.on("data", (chunk: Buffer) => {
        chunks.push(chunk);
        got += chunk.length;
        if (got >= count) {
          response.destroy();
          request.destroy();
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).subarray(0, count) });
        }
      });
      response.on("end", () => reject(new Error(`the download ended after ${got} bytes (status ${response.statusCode})`)));
      response.on("close", () => got < count && reject(new Error(`the download broke after ${got} bytes`)));
    });
    request.on("error", () => undefined);
    request.end();
  });
}

/** A disk of `mib` MiB with recognisable data in some blocks (the rest holes). */
export function dataDisk(mib: number): TestDisk {
  const blocks = new Map<number, Buffer>();
  for (let index = 0; index < mib; index += 3) blocks.set(index, patternBlock(index + 7));
  return { size: mib * MiB, blocks };
}

/** Imports a test XVA through the toolstack's /import; answers the new VM's ref and uuid. */
export async function importTestVm(toolstack: TestToolstack, name: string, disk: TestDisk): Promise<{ ref: string; uuid: string }> {
  const archive = await collect(testXva({ name, disks: [disk] }));
  const answer = await http(`${toolstack.client.url}/import?session_id=${toolstack.client.session}`, { method: "PUT", body: archive, headers: { "content-length": String(archive.length) } });
  const taskRef = answer.headers["task-id"];
  if (answer.status !== 200 || typeof taskRef !== "string") throw new Error(`import answered ${answer.status}: ${answer.body.toString()}`);
  const task = await toolstack.client.waitTask(taskRef);
  if (task.status !== "success") throw new Error(`import failed: ${JSON.stringify(task.error_info)}`);
  const [ref] = z.array(z.string()).parse(parseXmlRpcValue(String(task.result)));
  const uuid = z.string().parse(await toolstack.client.call("VM.get_uuid", ref));
  return { ref: ref!, uuid };
}
