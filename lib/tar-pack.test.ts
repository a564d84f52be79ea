// The browser's tar packing, read by GNU tar and by the importer's own tar reader (tar-stream).
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { tarBlob, tarHeader } from "./tar-pack.ts";
import { Readable } from "node:stream";
import { TarMembers } from "../server/xva/tar-members.ts";

const dir = mkdtempSync(join(tmpdir(), "hangar-tar-pack-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("files packed as a Blob: GNU tar lists and extracts them, the importer's tar reader reads them in order", async () => {
  const files = [new File(["<Envelope/>"], "vm.ovf", { lastModified: 1_700_000_000_000 }), new File([new Uint8Array(1536).fill(7)], "disk1.vmdk"), new File([], "empty.img"), new File(["é".repeat(300)], "ünï.mf")];
  const tar = Buffer.from(await tarBlob(files).arrayBuffer());
  assert.equal(tar.length % 512, 0);
  const file = join(dir, "packed.ova");
  writeFileSync(file, tar);
  assert.equal(execFileSync("tar", ["-tf", file]).toString(), "vm.ovf\ndisk1.vmdk\nempty.img\nünï.mf\n");
  assert.match(execFileSync("tar", ["-tvf", file, "--utc"]).toString(), /-rw-r--r-- root\/root\s+11 2023-11-14 22:13 vm\.ovf/);
  assert.equal(execFileSync("tar", ["-xOf", file, "ünï.mf"]).toString(), "é".repeat(300));
  const members = new TarMembers(Readable.from([tar]));
  const read: Array<[string, number]> = [];
  for (let member = await members.next(); member !== null; member = await members.next()) read.push([member.name, (await members.readAll(member, member.entry.header.size ?? 0)).length]);
  assert.deepEqual(read, [["vm.ovf", 11], ["disk1.vmdk", 1536], ["empty.img", 0], ["ünï.mf", 600]]);
});

test("a file of 8 GiB or more has its size in base-256, as GNU tar reads it; names that do not fit are refused", () => {
  const header = tarHeader({ name: "big.vmdk", size: 10 * 1024 ** 3 + 5, mtime: 0 });
  const file = join(dir, "big.tar");
  writeFileSync(file, header);
  const listed = spawnSync("tar", ["-tvf", file]);
  assert.match(listed.stdout.toString(), /10737418245 1970-01-01 \d\d:\d\d big\.vmdk/);
  assert.throws(() => tarHeader({ name: `${"a".repeat(101)}.vmdk`, size: 1, mtime: 0 }), /longer than 100 bytes/);
  assert.throws(() => tarHeader({ name: "dir/a.vmdk", size: 1, mtime: 0 }), /with a \//);
});

test("a tar's kind from its first file, directory entries passed over: ova.xml or Ref:N/ an XVA, anything else an OVA", async () => {
  const { PACKAGE_SNIFF_BYTES, sniffPackage } = await import("./file-kind.ts");
  const { tarHeader } = await import("./tar-pack.ts");
  const dir = (name: string) => {
    const header = tarHeader({ name: "x", size: 0, mtime: 0 });
    header.fill(0, 0, 100);
    header.set(new TextEncoder().encode(name), 0);
    header[156] = 0x35;
    header.fill(0x20, 148, 156);
    const sum = header.reduce((total, byte) => total + byte, 0);
    header.set(new TextEncoder().encode(`${sum.toString(8).padStart(6, "0")}\0 `), 148);
    return header;
  };
  const head = (...parts: Uint8Array[]) => Buffer.concat(parts).subarray(0, PACKAGE_SNIFF_BYTES);
  assert.deepEqual(sniffPackage(head(tarHeader({ name: "vm.ovf", size: 10, mtime: 0 }))), { kind: "ova" });
  assert.deepEqual(sniffPackage(head(dir("./"), tarHeader({ name: "vm.ovf", size: 10, mtime: 0 }))), { kind: "ova" });
  assert.deepEqual(sniffPackage(head(tarHeader({ name: "ova.xml", size: 10, mtime: 0 }))), { kind: "xva" });
  assert.deepEqual(sniffPackage(head(dir("./"), dir("xvda/"), tarHeader({ name: "ova.xml", size: 10, mtime: 0 }))), { kind: "xva" });
  assert.deepEqual(sniffPackage(head(tarHeader({ name: "disk1.vmdk", size: 10, mtime: 0 }))), { kind: "ova" });
});
