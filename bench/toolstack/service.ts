// The service under test: `hangar serve` as a process of its own over a data dir of the run (its CPU read
// from /proc), a XenAPI client to seed it, and callers that post a prepared request in either wire form
// with as little client work as possible (the body built once, the answer checked for success only).
import { readFileSync } from "node:fs";
import { z } from "zod";
import { XenApiClient } from "../../server/xenapi/client.ts";
import { ROOT_PASSWORD, startServeProcess } from "../../server/toolstack/testing.ts";
import type { XenValue } from "../../server/xenapi/values.ts";
import { formatXmlRpcCall } from "../../server/xenapi/xml-rpc.ts";
import { cpuSeconds } from "../processes.ts";

export type Wire = "JSON-RPC" | "XML-RPC";
export const WIRES: readonly Wire[] = ["JSON-RPC", "XML-RPC"];

export interface BenchService {
  /** Base URL, ending in "/". */
  readonly url: string;
  readonly dataDir: string;
  readonly pid: number;
  readonly client: XenApiClient;
  /** CPU seconds so far: the service's own, and its plugin processes' (children it has waited for). */
  cpu(): { own: number; plugins: number };
  stop(): Promise<void>;
}

/** CPU seconds of the ended, waited-for children of a live process (cutime + cstime). */
function childrenCpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[13]) + Number(fields[14])) / 100; // USER_HZ is 100 on Linux
}

/** `env` adds to the service's environment (e.g. HANGAR_DATABASE_URL). */
export async function startBenchService(dataDir: string, env: Record<string, string> = {}): Promise<BenchService> {
  // The run dir of the bench workspace: its clean-up (also on Ctrl-C) finds the service and its daemons by it.
  const serve = await startServeProcess(dataDir, { HANGAR_RUN_DIR: process.env.HANGAR_RUN_DIR, ...env });
  try {
    const client = await XenApiClient.login(serve.url, "root", ROOT_PASSWORD, "hangar-bench");
    return {
      url: serve.url,
      dataDir,
      pid: serve.pid,
      client,
      cpu: () => ({ own: cpuSeconds(serve.pid), plugins: childrenCpuSeconds(serve.pid) }),
      stop: serve.stop,
    };
  } catch (error) {
    await serve.stop();
    throw error;
  }
}

/** Seeds `service` with `sizes.vms` VMs and `sizes.tasks` tasks named after `label`; answers the tasks' refs. */
export async function seedVmsAndTasks(service: BenchService, sizes: { vms: number; tasks: number }, label: string): Promise<string[]> {
  const { client } = service;
  for (let i = 0; i < sizes.vms; i++) await client.call(z.string(), "VM.create", { name_label: `${label} vm ${i}`, VCPUs_max: 2, VCPUs_at_startup: 2 });
  const tasks: string[] = [];
  for (let i = 0; i < sizes.tasks; i++) tasks.push(await client.call(z.string(), "task.create", `${label} task ${i}`, ""));
  return tasks;
}

/** One call prepared once; each run posts it and checks the answer is a success. */
export function prepareCall(url: string, wire: Wire, method: string, params: readonly XenValue[]): () => Promise<void> {
  const json = wire === "JSON-RPC";
  const endpoint = json ? `${url}jsonrpc` : url;
  const headers = { "content-type": json ? "application/json" : "text/xml" };
  const body = json ? JSON.stringify({ jsonrpc: "2.0", method, params, id: 1 }) : formatXmlRpcCall(method, params);
  const succeeded = json ? (text: string) => text.startsWith('{"jsonrpc":"2.0","result"') : (text: string) => text.includes("<name>Status</name><value>Success</value>");
  return async () => {
    const text = await (await fetch(endpoint, { method: "POST", headers, body })).text();
    if (!succeeded(text)) throw new Error(`${method} over ${wire} failed: ${text.slice(0, 300)}`);
  };
}

export interface LatencyBatch {
  /** Wall time of every call, ms. */
  ms: number[];
  /** Service CPU over the batch, ms: its own, and its plugin processes'. */
  cpuMs: number;
  pluginCpuMs: number;
  seconds: number;
}

/** `callers` callers at once, each making `calls` calls back to back. */
export async function measureBatch(service: BenchService, call: () => Promise<void>, callers: number, calls: number): Promise<LatencyBatch> {
  const ms: number[] = [];
  const before = service.cpu();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: callers }, async () => {
      for (let i = 0; i < calls; i++) {
        const begun = performance.now();
        await call();
        ms.push(performance.now() - begun);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const after = service.cpu();
  return { ms, cpuMs: (after.own - before.own) * 1000, pluginCpuMs: (after.plugins - before.plugins) * 1000, seconds };
}

/** The p-th percentile (0–100) by nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) throw new Error("no samples");
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** Batches of one contender pooled over rounds. */
export function pool(batches: readonly LatencyBatch[]): { ms: number[]; calls: number; cpuMsPerCall: number; pluginCpuMsPerCall: number; callsPerSecond: number } {
  const ms = batches.flatMap((b) => b.ms);
  const seconds = batches.reduce((sum, b) => sum + b.seconds, 0);
  return {
    ms,
    calls: ms.length,
    cpuMsPerCall: batches.reduce((sum, b) => sum + b.cpuMs, 0) / ms.length,
    pluginCpuMsPerCall: batches.reduce((sum, b) => sum + b.pluginCpuMs, 0) / ms.length,
    callsPerSecond: ms.length / seconds,
  };
}

/** "p50 1.2 ms, p99 3.4 ms". */
export function formatLatency(ms: readonly number[]): string {
  const digits = (value: number) => (value < 10 ? value.toFixed(2) : value.toFixed(0));
  return `p50 ${digits(percentile(ms, 50))} ms, p99 ${digits(percentile(ms, 99))} ms`;
}
