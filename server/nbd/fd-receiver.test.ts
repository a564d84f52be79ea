// SCM_RIGHTS end to end: a peer accepts an NBD client's connection and passes that socket's fd to the
// receiver, exactly as xapi does for Datapath.import_activate; the NbdServer then serves it.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { NbdClient } from "./client.ts";
import { startFdReceiver, type FdReceiver } from "./fd-receiver.ts";
import { openRawFileBackend } from "./raw-file-backend.ts";
import { NbdServer } from "./server.ts";
import { fileExists, firstLine, makeTempDir, run, startProcess, waitForSocket } from "./testing.ts";

const MiB = 1024 * 1024;

/** Accepts connections (unix path or an ephemeral TCP port) and passes each accepted fd to the receiver. */
const PASSER = `
import socket, sys
mode, listen, receiver = sys.argv[1:4]
if mode == "unix":
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(listen)
else:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
server.listen(8)
print(server.getsockname()[1] if mode == "tcp" else "ready", flush=True)
while True:
    peer, _ = server.accept()
    out = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    out.connect(receiver)
    socket.send_fds(out, [b"VDI_MIRROR"], [peer.fileno()])
    out.close()
    peer.close()
`;

/** Sends fds that must be refused: a regular file and a listening socket, then one good socketpair end. */
const BAD_SENDER = `
import os, socket, sys
receiver, path = sys.argv[1:3]
out = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
out.connect(receiver)
regular = os.open(path, os.O_RDONLY)
socket.send_fds(out, [b"file"], [regular])
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.bind(("127.0.0.1", 0))
listener.listen(1)
socket.send_fds(out, [b"listener"], [listener.fileno()])
ours, theirs = socket.socketpair()
socket.send_fds(out, [b"pair"], [theirs.fileno()])
theirs.close()
ours.sendall(bytes(4))  # client flags after the greeting: not fixed newstyle, no zeroes
greeting = b""
while len(greeting) < 18:
    greeting += ours.recv(18 - len(greeting))
print(greeting[:8].decode(), flush=True)
`;

describe("fd receiver", () => {
  let dir: string;
  let server: NbdServer;
  let receiver: FdReceiver;
  let image: Buffer;
  const cleanups: (() => Promise<void> | void)[] = [];
  const cleanup = (fn: () => Promise<void> | void) => cleanups.push(fn);

  before(async () => {
    dir = await makeTempDir(cleanup);
    image = randomBytes(4 * MiB);
    await writeFile(join(dir, "vol.raw"), image);
    const backend = await openRawFileBackend(join(dir, "vol.raw"), { readOnly: false });
    cleanup(() => backend.close());
    server = new NbdServer();
    server.addExport("vol", backend);
    cleanup(() => server.close());
    // The server does not listen anywhere: its only connections arrive by fd passing.
    receiver = await startFdReceiver(join(dir, "import.sock"), server);
    cleanup(() => receiver.stop());
  });

  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  test("a passed unix socket is served as an NBD connection (our client)", async () => {
    const bridge = join(dir, "bridge.sock");
    const passer = startProcess(cleanup, "python3", ["-c", PASSER, "unix", bridge, receiver.listenPath]);
    assert.equal(await firstLine(passer), "ready");
    const client = await NbdClient.connect(`nbd+unix:///vol?socket=${bridge}`);
    try {
      assert.equal(client.size, 4 * MiB);
      assert.deepEqual(await client.read(MiB, 4096), image.subarray(MiB, MiB + 4096));
      const data = randomBytes(100_000);
      await client.write(2 * MiB, data, { fua: true });
      assert.deepEqual((await readFile(join(dir, "vol.raw"))).subarray(2 * MiB, 2 * MiB + data.length), data);
      data.copy(image, 2 * MiB);
    } finally {
      await client.close();
    }
  });

  test("libnbd tools work through a passed socket", async () => {
    const bridge = join(dir, "bridge-libnbd.sock");
    const passer = startProcess(cleanup, "python3", ["-c", PASSER, "unix", bridge, receiver.listenPath]);
    await firstLine(passer);
    const info = JSON.parse(await run("nbdinfo", ["--json", `nbd+unix:///vol?socket=${bridge}`]));
    assert.equal(info.exports[0]["export-size"], 4 * MiB);
    const out = join(dir, "copy.raw");
    await run("nbdcopy", [`nbd+unix:///vol?socket=${bridge}`, out]); // several connections at once
    assert.ok((await readFile(out)).equals(image));
  });

  test("a passed TCP socket is served too", async () => {
    const passer = startProcess(cleanup, "python3", ["-c", PASSER, "tcp", "-", receiver.listenPath]);
    const port = Number(await firstLine(passer));
    const client = await NbdClient.connect(`nbd://127.0.0.1:${port}/vol`);
    try {
      assert.deepEqual(await client.read(0, 1024), image.subarray(0, 1024));
    } finally {
      await client.close();
    }
  });

  test("fds that are not connected stream sockets are refused without harming the process", async () => {
    const sender = startProcess(cleanup, "python3", ["-c", BAD_SENDER, receiver.listenPath, join(dir, "vol.raw")]);
    // Only the socketpair end reaches the server, which greets it.
    assert.equal(await firstLine(sender), "NBDMAGIC");
    const client = await NbdClient.connect(`nbd+unix:///vol?socket=${join(dir, "bridge.sock")}`);
    assert.equal(client.size, 4 * MiB);
    await client.close();
  });

  test("stop() ends the helper and removes its socket; a bad path fails at start", async () => {
    const extra = await startFdReceiver(join(dir, "extra.sock"), server);
    await waitForSocket(extra.listenPath);
    await extra.stop();
    assert.equal(await fileExists(extra.listenPath), false);
    assert.throws(() => process.kill(extra.pid, 0), /ESRCH/);
    await assert.rejects(startFdReceiver(join(dir, "missing", "x.sock"), server), /exited before it was ready/);
  });
});
