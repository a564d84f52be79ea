import assert from "node:assert/strict";
import { test } from "node:test";
import { formatXapiNbdUri, parseNbdUri } from "./uri.ts";

test("nbd:// URIs: host, default port, export name and credentials", () => {
  assert.deepEqual(parseNbdUri("nbd://example.com/disk"), { kind: "tcp", host: "example.com", port: 10809, exportName: "disk" });
  assert.deepEqual(parseNbdUri("nbd://u%20ser:pa%40ss@10.0.0.1:1234/my%20vol"), {
    kind: "tcp",
    host: "10.0.0.1",
    port: 1234,
    exportName: "my vol",
    user: "u ser",
    password: "pa@ss",
  });
  assert.deepEqual(parseNbdUri("nbd://admin@host/x"), { kind: "tcp", host: "host", port: 10809, exportName: "x", user: "admin" });
  assert.deepEqual(parseNbdUri("nbd://[::1]:5000/x"), { kind: "tcp", host: "::1", port: 5000, exportName: "x" });
  assert.equal(parseNbdUri("nbd://host").exportName, "");
  assert.equal(parseNbdUri("nbd://host//abs").exportName, "/abs");
});

test("nbd+unix URIs need a socket parameter", () => {
  assert.deepEqual(parseNbdUri("nbd+unix:///vol?socket=/run/nbd.sock"), { kind: "unix", socketPath: "/run/nbd.sock", exportName: "vol" });
  assert.deepEqual(parseNbdUri("nbd+unix://?socket=/s"), { kind: "unix", socketPath: "/s", exportName: "" });
  assert.throws(() => parseNbdUri("nbd+unix:///vol"), /socket=/);
});

test("xapi and qemu legacy forms", () => {
  assert.deepEqual(parseNbdUri("nbd:unix:/run/sr/v1.sock:exportname=v1"), { kind: "unix", socketPath: "/run/sr/v1.sock", exportName: "v1" });
  assert.deepEqual(parseNbdUri("nbd:unix:/run/a:b.sock:exportname=n:x"), { kind: "unix", socketPath: "/run/a:b.sock", exportName: "n:x" });
  assert.deepEqual(parseNbdUri("nbd:unix:/run/x.sock"), { kind: "unix", socketPath: "/run/x.sock", exportName: "" });
  assert.deepEqual(parseNbdUri("nbd:10.1.2.3:10809:exportname=d"), { kind: "tcp", host: "10.1.2.3", port: 10809, exportName: "d" });
  assert.deepEqual(parseNbdUri("nbd:[fe80::1]:99"), { kind: "tcp", host: "fe80::1", port: 99, exportName: "" });
});

test("formatXapiNbdUri round-trips through parseNbdUri", () => {
  const uri = formatXapiNbdUri("/var/run/hangar/sr 1/vol.sock", "vol:7");
  assert.equal(uri, "nbd:unix:/var/run/hangar/sr 1/vol.sock:exportname=vol:7");
  assert.deepEqual(parseNbdUri(uri), { kind: "unix", socketPath: "/var/run/hangar/sr 1/vol.sock", exportName: "vol:7" });
  assert.throws(() => formatXapiNbdUri("/x:exportname=y", "z"));
});

test("unsupported or malformed addresses are rejected", () => {
  assert.throws(() => parseNbdUri("nbds://host/x"), /TLS/);
  assert.throws(() => parseNbdUri("nbds+unix:///x?socket=/s"), /TLS/);
  assert.throws(() => parseNbdUri("http://host/x"), /not an NBD URI/);
  assert.throws(() => parseNbdUri("nbd://host:0/x"), /port/);
  assert.throws(() => parseNbdUri("nbd:unix::exportname=x"), /socket path/);
  assert.throws(() => parseNbdUri("nbd:hostonly"), /unrecognised/);
  assert.throws(() => parseNbdUri("not a uri"), /invalid NBD URI|unrecognised|not an NBD/);
});
