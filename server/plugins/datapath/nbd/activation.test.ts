// The nbd datapath's activations through the real plugin client: read-only activations, activations of
// two hosts (and a migration between them), and Datapath.import_activate with a real SCM_RIGHTS fd pass.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { statSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test, type TestContext } from "node:test";
import { NbdClient } from "../../../nbd/client.ts";
import { StorageError } from "../../../storage/errors.ts";
import { listActivations } from "../../filesr/index.ts";
import { dbg, MiB, pattern, TestHangar } from "./test-support.ts";

describe("nbd datapath activations", () => {
  let hangar: TestHangar;

  before(async () => {
    hangar = await TestHangar.start();
  });
  after(() => hangar.stop());

  const assertNothingLeft = () => {
    assert.deepEqual(hangar.daemonPids(), [], "no volume daemon may outlive Datapath.close");
    assert.deepEqual(hangar.socketFiles(), [], "no socket file may outlive Datapath.close");
  };

  test("activate_readonly serves a read-only export and never coexists with a read-write activation", async () => {
    const volume = await hangar.createVolume(4 * MiB);
    const { uri } = volume;
    const reader = await NbdClient.connect(await hangar.plug(uri, "d1", { readonly: true }));
    assert.equal(reader.readOnly, true, "new connections are told the export is read-only");
    await assert.rejects(reader.write(0, Buffer.alloc(512)), /EPERM/);
    await reader.close();

    await hangar.nbd.call("Datapath.attach", { dbg, uri, domain: "d2" });
    await hangar.nbd.call("Datapath.activate_readonly", { dbg, uri, domain: "d2" });
    await assert.rejects(hangar.nbd.call("Datapath.activate", { dbg, uri, domain: "d3" }), /not attached|activated read-only/);
    await hangar.nbd.call("Datapath.attach", { dbg, uri, domain: "d3" });
    await assert.rejects(hangar.nbd.call("Datapath.activate", { dbg, uri, domain: "d3" }), /activated read-only/);

    await hangar.nbd.call("Datapath.deactivate", { dbg, uri, domain: "d1" });
    await hangar.nbd.call("Datapath.deactivate", { dbg, uri, domain: "d2" });
    await hangar.nbd.call("Datapath.activate", { dbg, uri, domain: "d3" });
    await assert.rejects(hangar.nbd.call("Datapath.activate_readonly", { dbg, uri, domain: "d1" }), /activated read-write/);

    for (const domain of ["d1", "d2", "d3"]) {
      await hangar.nbd.call("Datapath.deactivate", { dbg, uri, domain });
      await hangar.nbd.call("Datapath.detach", { dbg, uri, domain });
    }
    await hangar.nbd.call("Datapath.close", { dbg, uri });
    assertNothingLeft();
  });

  test("a second host cannot activate while the first has the volume read-write; it can after deactivate (migration)", async () => {
    const volume = await hangar.createVolume(4 * MiB);
    const { uri } = volume;
    const other = hangar.addHost("h2");
    const first = await NbdClient.connect(await hangar.plug(uri, "vm"));
    await first.write(0, pattern(6, 64 * 1024));
    await first.close();

    const refusal = await hangar.asHost(other, async () => {
      await hangar.nbd.call("Datapath.open", { dbg, uri, persistent: true });
      await hangar.nbd.call("Datapath.attach", { dbg, uri, domain: "vm" });
      const rw = await hangar.nbd.call("Datapath.activate", { dbg, uri, domain: "vm" }).catch((error: unknown) => error);
      const ro = await hangar.nbd.call("Datapath.activate_readonly", { dbg, uri, domain: "vm" }).catch((error: unknown) => error);
      return [rw, ro];
    });
    for (const error of refusal) {
      assert.ok(error instanceof StorageError, String(error));
      assert.deepEqual(error.params, ["Activated_on_another_host", hangar.host.HANGAR_HOST_UUID]);
    }

    // Migration: the source deactivates, the destination activates and writes, the source detaches.
    await hangar.nbd.call("Datapath.deactivate", { dbg, uri, domain: "vm" });
    await hangar.asHost(other, async () => {
      const { implementations } = await hangar.nbd.call("Datapath.attach", { dbg, uri, domain: "vm" });
      await hangar.nbd.call("Datapath.activate", { dbg, uri, domain: "vm" });
      const nbd = implementations[0];
      assert.ok(nbd !== undefined && nbd[0] === "Nbd");
      const second = await NbdClient.connect(nbd[1].uri);
      assert.ok((await second.read(0, 64 * 1024)).equals(pattern(6, 64 * 1024)), "the destination sees the source's writes");
      await second.write(MiB, pattern(7, 4096));
      await second.close();
    });
    await hangar.nbd.call("Datapath.detach", { dbg, uri, domain: "vm" });
    await hangar.nbd.call("Datapath.close", { dbg, uri });
    await assert.rejects(hangar.nbd.call("Datapath.activate", { dbg, uri, domain: "vm" }), /not open/);
    await hangar.asHost(other, () => hangar.unplug(uri, "vm"));
    assert.deepEqual(hangar.daemonPids(other), []);
    assert.deepEqual(hangar.socketFiles(other), []);
    assertNothingLeft();
  });

  test("an activation the daemon cannot serve is refused and taken back", async () => {
    const volume = await hangar.createVolume(4 * MiB);
    const { uri } = volume;
    const other = hangar.addHost("h3");
    // A non-persistent open on another host writes into an overlay: nobody else may write the volume then.
    await hangar.asHost(other, async () => {
      await hangar.nbd.call("Datapath.open", { dbg, uri, persistent: false });
      await hangar.nbd.call("Datapath.attach", { dbg, uri, domain: "scratch" });
    });
    await hangar.nbd.call("Datapath.open", { dbg, uri, persistent: true });
    await hangar.nbd.call("Datapath.attach", { dbg, uri, domain: "vm" });
    const refused = await hangar.nbd.call("Datapath.activate", { dbg, uri, domain: "vm" }).catch((error: unknown) => error);
    assert.ok(refused instanceof StorageError, String(refused));
    assert.deepEqual(refused.params, ["Activated_on_another_host", other.HANGAR_HOST_UUID]);
    assert.deepEqual(await listActivations(join(hangar.root, "sr"), volume.key), [], "the refused activation is not left behind");

    await hangar.asHost(other, async () => {
      await hangar.nbd.call("Datapath.detach", { dbg, uri, domain: "scratch" });
      await hangar.nbd.call("Datapath.close", { dbg, uri });
    });
    await hangar.nbd.call("Datapath.activate", { dbg, uri, domain: "vm" });
    await hangar.unplug(uri, "vm");
    assert.deepEqual(hangar.daemonPids(other), []);
    assertNothingLeft();
  });

  /** Datapath.import_activate, then a peer passes the fd of a connection to the returned socket. */
  async function importedConnection(t: TestContext, blocking: boolean): Promise<void> {
    const volume = await hangar.createVolume(4 * MiB);
    const nbdUri = await hangar.plug(volume.uri, "d1");
    const importPath = await hangar.nbd.call("Datapath.import_activate", { dbg, uri: volume.uri, domain: "d1" });
    assert.ok(statSync(importPath).isSocket());
    assert.equal(await hangar.nbd.call("Datapath.import_activate", { dbg, uri: volume.uri, domain: "d1" }), importPath);

    // A peer accepts our client's connection and passes the accepted socket's fd, as the toolstack does.
    const listenPath = join(hangar.root, `peer-${blocking ? "b" : "n"}.sock`);
    const passer = spawn("python3", ["-c", PASSER, listenPath, importPath, blocking ? "blocking" : "non-blocking"], { stdio: ["ignore", "pipe", "inherit"] });
    t.after(() => passer.kill("SIGKILL"));
    await new Promise<void>((resolve) => passer.stdout.once("data", () => resolve()));
    const imported = await NbdClient.connect(`nbd+unix:///${volume.key}?socket=${listenPath}`);
    await imported.write(2 * MiB, pattern(20, 128 * 1024));
    assert.ok((await imported.read(2 * MiB, 128 * 1024)).equals(pattern(20, 128 * 1024)));
    await imported.close();

    const direct = await NbdClient.connect(nbdUri);
    assert.ok((await direct.read(2 * MiB, 128 * 1024)).equals(pattern(20, 128 * 1024)), "the same volume as the export");
    await direct.close();

    await hangar.nbd.call("Datapath.deactivate", { dbg, uri: volume.uri, domain: "d1" });
    assert.equal(statSync(importPath, { throwIfNoEntry: false }), undefined, "deactivate stops taking fds");
    await hangar.nbd.call("Datapath.detach", { dbg, uri: volume.uri, domain: "d1" });
    await hangar.nbd.call("Datapath.close", { dbg, uri: volume.uri });
    assertNothingLeft();
  }

  test("import_activate: an fd passed with SCM_RIGHTS becomes an NBD connection to the export", (t) => importedConnection(t, false));

  test("import_activate with a blocking fd, as an OCaml toolstack passes it", { timeout: 30_000 }, (t) => importedConnection(t, true));
});

/** Accepts one connection on argv[1] and passes its fd to the receiver at argv[2], blocking or not (argv[3]). */
const PASSER = `
import socket, sys
listen, receiver, mode = sys.argv[1:4]
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(listen)
server.listen(1)
print("ready", flush=True)
peer, _ = server.accept()
peer.setblocking(mode == "blocking")
out = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
out.connect(receiver)
socket.send_fds(out, [b"VDI_MIRROR"], [peer.fileno()])
out.close()
peer.close()
`;
