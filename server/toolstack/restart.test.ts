// Restart safety of data tasks with a real `hangar serve` killed with SIGKILL during a VDI.copy of 1 GiB of
// data: the next run follows a copy still running in the plugin's daemon to its end; a copy whose daemon
// died too fails with a reason, its half-made destination removed and its datapaths released.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, test } from "node:test";
import { openVolumeData } from "../plugins/filesr/index.ts";
import type { PluginClient } from "../storage/client.ts";
import { defaultPluginRoot, scanPluginRoot } from "../storage/registry.ts";
import { daemonPids, MiB, testHost, XenApiClient } from "./storage-testing.ts";
import { ROOT_PASSWORD } from "./testing.ts";

const HANGAR = resolve(import.meta.dirname, "../../bin/hangar");
const dbg = "toolstack restart test";
const SIZE = 1024 * MiB;

interface Serve {
  child: ChildProcess;
  client: XenApiClient;
  output(): string;
}

/** `hangar serve` on a free port over the test host's data dir (the environment carries it). */
async function serve(): Promise<Serve> {
  const child = spawn(HANGAR, ["serve", "--port", "0", "--https-port", "off", "--address", "127.0.0.1"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, HANGAR_ROOT_PASSWORD: ROOT_PASSWORD },
  });
  let output = "";
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (output += text));
  const url = await new Promise<string>((resolveUrl, reject) => {
    child.stdout!.setEncoding("utf8").on("data", (text: string) => {
      output += text;
      const match = /toolstack listening: (http:\/\/[^/\s]+)/.exec(output);
      if (match !== null) resolveUrl(match[1]!);
    });
    child.once("exit", (code) => reject(new Error(`hangar serve exited (${code}): ${output}`)));
  });
  try {
    return { child, client: await XenApiClient.login(url), output: () => output };
  } catch (error) {
    child.kill("SIGKILL");
    throw error;
  }
}

async function kill(serve: Serve): Promise<void> {
  if (serve.child.exitCode !== null || serve.child.signalCode !== null) return;
  const exited = new Promise((resolveExit) => serve.child.once("exit", resolveExit));
  serve.child.kill("SIGKILL");
  await exited;
}

describe("a data task across kill -9 of the service", () => {
  let host: Awaited<ReturnType<typeof testHost>>;
  let current: Serve;
  let nbd: PluginClient;
  let source: string;
  let otherSr: string;

  async function srPath(client: XenApiClient, sr: string): Promise<string> {
    const [pbd] = await client.call<string[]>("SR.get_PBDs", sr);
    return (await client.call<Record<string, string>>("PBD.get_device_config", pbd)).path!;
  }

  async function readVdi(client: XenApiClient, vdi: string, offset: number, length: number): Promise<Buffer> {
    const sr = await client.call<string>("VDI.get_SR", vdi);
    const volume = await openVolumeData(await srPath(client, sr), await client.call<string>("VDI.get_location", vdi), { readOnly: true });
    const buffer = Buffer.alloc(length);
    await volume.read(offset, buffer);
    await volume.close();
    return buffer;
  }

  /** Starts a copy of the source and kills the service once the copy has made progress. */
  async function copyThenKill(): Promise<string> {
    const task = await current.client.call<string>("Async.VDI.copy", source, otherSr);
    for (let i = 0; i < 600; i++) {
      const record = await current.client.call<Record<string, unknown>>("task.get_record", task);
      assert.equal(record.status, "pending", `the copy ended before the kill: ${JSON.stringify(record)}`);
      if (Number(record.progress) > 0) break;
      await sleep(50);
    }
    await kill(current);
    return task;
  }

  async function assertReleased(): Promise<void> {
    assert.deepEqual(await nbd.call("Data.ls", { dbg }), [], "the data operation was forgotten");
    assert.deepEqual(await nbd.call("Plugin.ls", { dbg }), [], "no volume is left open in the nbd datapath");
  }

  before(async () => {
    host = await testHost();
    current = await serve();
    nbd = (await scanPluginRoot(defaultPluginRoot())).find("nbd", "datapath")!.client;
    const { client } = current;
    const defaultSr = await client.call<string>("pool.get_default_SR", (await client.call<string[]>("pool.get_all"))[0]);
    const [hostRef] = await client.call<string[]>("host.get_all");
    otherSr = await client.call<string>("SR.create", hostRef, { path: join(host.dataDir, "other-sr") }, 0, "other", "", "file", "user", false, {});
    source = await client.call<string>("VDI.create", { SR: defaultSr, virtual_size: SIZE, name_label: "big" });
    // 1 GiB of data, each MiB telling its offset: a copy takes seconds.
    const volume = await openVolumeData(await srPath(client, defaultSr), await client.call<string>("VDI.get_location", source), {});
    const chunk = Buffer.alloc(8 * MiB);
    for (let offset = 0; offset < SIZE; offset += chunk.length) {
      for (let at = 0; at < chunk.length; at += MiB) chunk.fill((offset + at) / MiB, at, at + MiB);
      await volume.write(offset, chunk);
    }
    await volume.flush();
    await volume.close();
  });
  after(async () => {
    if (current !== undefined) await kill(current);
    host?.cleanUp();
  });

  test("a copy still running in its daemon is followed to the end by the next run", async () => {
    const task = await copyThenKill();
    current = await serve();
    // The copy (seconds long) was still running when the new run took it over.
    assert.equal(await current.client.call("task.get_status", task), "pending");
    const record = await current.client.waitTask(task);
    assert.equal(record.status, "success", `${JSON.stringify(record.error_info)}\n${current.output()}`);
    assert.equal(record.progress, 1);
    const copy = /(OpaqueRef:[0-9a-f-]+)/.exec(String(record.result))?.[1];
    assert.ok(copy !== undefined);
    assert.equal(await current.client.call("VDI.get_SR", copy), otherSr);
    for (const offset of [0, 100 * MiB, SIZE / 2, SIZE - MiB]) {
      assert.ok((await readVdi(current.client, copy, offset, MiB)).equals(await readVdi(current.client, source, offset, MiB)), `MiB at ${offset}`);
    }
    assert.deepEqual(await current.client.call("VDI.get_current_operations", source), {});
    await assertReleased();
  });

  test("a copy whose daemon died too fails with a reason; its destination and datapaths are gone", async () => {
    const before = new Set(await current.client.call<string[]>("SR.get_VDIs", otherSr));
    const task = await copyThenKill();
    // The host went down with it: the copy's daemons die as well.
    for (const pid of daemonPids(host.dataDir)) process.kill(pid, "SIGKILL");
    current = await serve();
    const record = await current.client.waitTask(task);
    assert.equal(record.status, "failure");
    const [code, reason] = record.error_info as string[];
    assert.equal(code, "VDI_COPY_FAILED");
    assert.match(reason!, /failed/, reason);
    await current.client.call("SR.scan", otherSr);
    assert.deepEqual(new Set(await current.client.call<string[]>("SR.get_VDIs", otherSr)), before, "the half-made copy was removed");
    await assertReleased();
  });
});
