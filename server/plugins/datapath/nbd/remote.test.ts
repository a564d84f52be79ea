// Remotes that fail Data.copy / Data.mirror: the failure says which remote (without its password), at which
// stage and after how long — from the Data call itself when the connection cannot be set up, in the
// operation's record (Data.stat: failed) when the remote stops answering mid-copy.
import assert from "node:assert/strict";
import net from "node:net";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { ExportBackend, Extent } from "../../../nbd/backend.ts";
import { NbdServer } from "../../../nbd/server.ts";
import { startMuteListener } from "../../../nbd/testing.ts";
import { readOperation } from "./operations.ts";
import { remoteTimeouts } from "./remote.ts";
import { dbg, MiB, TestHangar } from "./test-support.ts";

test("timeouts come from the environment in seconds; a bad value names its variable", () => {
  assert.deepEqual(remoteTimeouts({}), {});
  assert.deepEqual(remoteTimeouts({ HANGAR_NBD_HANDSHAKE_TIMEOUT: "0.5", HANGAR_NBD_REQUEST_TIMEOUT: "300", HANGAR_NBD_CONNECT_TIMEOUT: "" }), {
    handshakeTimeoutMs: 500,
    requestTimeoutMs: 300_000,
  });
  for (const bad of ["0", "-1", "ten"]) {
    assert.throws(() => remoteTimeouts({ HANGAR_NBD_CONNECT_TIMEOUT: bad }), /HANGAR_NBD_CONNECT_TIMEOUT must be a positive number of seconds/);
  }
});

/** An export that takes the handshake, then never completes a write or a zeroing (until released). */
class StalledBackend implements ExportBackend {
  readonly size: number;
  readonly readOnly = false;
  readonly #held: Array<() => void> = [];

  constructor(size: number) {
    this.size = size;
  }

  async read(): Promise<void> {}
  write(): Promise<void> {
    return new Promise((resolve) => this.#held.push(resolve));
  }
  writeZeroes(): Promise<void> {
    return this.write();
  }
  async flush(): Promise<void> {}
  async trim(): Promise<void> {}
  async blockStatus(_offset: number, length: number): Promise<Extent[]> {
    return [{ length, flags: 0 }];
  }
  async close(): Promise<void> {}

  release(): void {
    for (const resolve of this.#held.splice(0)) resolve();
  }
}

describe("Data.copy / Data.mirror to remotes that fail", () => {
  const LIMITS = { HANGAR_NBD_HANDSHAKE_TIMEOUT: "0.5", HANGAR_NBD_REQUEST_TIMEOUT: "0.5" };
  let hangar: TestHangar;

  before(async () => {
    // Volume daemons inherit these through the plugin processes.
    Object.assign(process.env, LIMITS);
    hangar = await TestHangar.start();
  });
  after(async () => {
    await hangar.stop();
    for (const name of Object.keys(LIMITS)) delete process.env[name];
  });

  const whole = (size: number) => ({ blocksize: MiB, ranges: [[0, size / MiB] as [number, number]] });

  test("Data.copy to a server that never greets fails with the remote, the handshake stage and the wait", async (t) => {
    const port = await startMuteListener(t);
    const volume = await hangar.createVolume(4 * MiB);
    const started = Date.now();
    const call = hangar.nbd.call("Data.copy", { dbg, uri: volume.uri, domain: "d1", remote: `nbd://admin:secret@127.0.0.1:${port}/x`, blocklist: whole(volume.size) });
    await assert.rejects(call, (error: Error) => {
      assert.ok(
        error.message.includes(`NBD handshake with nbd://admin:xxxxx@127.0.0.1:${port}/x timed out after 0.5 s (server accepted the connection but sent no greeting)`),
        error.message,
      );
      assert.ok(!error.message.includes("secret"), error.message);
      return true;
    });
    assert.ok(Date.now() - started < 5000, "failed in time");
  });

  test("Data.copy to a refused port fails in the connect stage", async () => {
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const volume = await hangar.createVolume(4 * MiB);
    await assert.rejects(
      hangar.nbd.call("Data.copy", { dbg, uri: volume.uri, domain: "d1", remote: `nbd://127.0.0.1:${port}/x`, blocklist: whole(volume.size) }),
      new RegExp(`NBD connect to nbd://127\\.0\\.0\\.1:${port}/x failed after \\d+\\.\\d s: connect ECONNREFUSED`),
    );
  });

  test("Data.mirror to a server that never greets fails the same way", async (t) => {
    const port = await startMuteListener(t);
    const volume = await hangar.createVolume(4 * MiB);
    await hangar.plug(volume.uri, "d1");
    try {
      await assert.rejects(
        hangar.nbd.call("Data.mirror", { dbg, uri: volume.uri, domain: "d1", remote: `nbd://127.0.0.1:${port}/x` }),
        new RegExp(`NBD handshake with nbd://127\\.0\\.0\\.1:${port}/x timed out after 0\\.5 s \\(server accepted the connection but sent no greeting\\)`),
      );
    } finally {
      await hangar.unplug(volume.uri, "d1");
    }
  });

  test("a remote that stops answering mid-copy: Data.stat reports failed, the record and diagnostics say why", async (t) => {
    const volume = await hangar.createVolume(4 * MiB);
    const backend = new StalledBackend(volume.size);
    const server = new NbdServer();
    server.addExport("stall", backend);
    const socket = join(hangar.root, "stall.sock");
    await server.listen({ socketPath: socket });
    t.after(async () => {
      backend.release();
      await server.close();
    });
    const remote = `nbd+unix:///stall?socket=${socket}`;
    const operation = await hangar.nbd.call("Data.copy", { dbg, uri: volume.uri, domain: "d1", remote, blocklist: whole(volume.size) });
    const status = await hangar.waitComplete(operation, 5000);
    assert.equal(status.failed, true);
    assert.ok((status.progress ?? 1) < 1);
    const record = readOperation(operation[1]);
    assert.equal(record?.state, "failed");
    const reason = record.error ?? "";
    assert.ok(reason.startsWith(`the connection to the remote ${remote} ended: NBD request to ${remote} timed out after 0.5 s (no reply to `), reason);
    // Data.stat has no field for the reason: diagnostics shows it to the administrator.
    const diagnostics = await hangar.nbd.call("Plugin.diagnostics", { dbg });
    assert.match(diagnostics, new RegExp(`copy ${operation[1]} failed at \\S+: the connection to the remote \\S+ ended: NBD request to `));
    await hangar.nbd.call("Data.destroy", { dbg, operation });
  });
});
