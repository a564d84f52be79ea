import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { attachSr, createSr, destroySr, detachSr, openSr, probeSrs, setSrDescription, setSrName, statSr } from "./sr.ts";
import { createVolume, listVolumes } from "./volumes.ts";
import { FileSrError } from "./errors.ts";
import { DB_FILE, srFiles } from "./layout.ts";
import { disconnectSr } from "./db.ts";
import { makeSr, tempDir } from "./test-support.ts";

function rejectsWith(kind: string, code?: string) {
  return (error: unknown) => {
    assert.ok(error instanceof FileSrError, `expected FileSrError, got ${String(error)}`);
    assert.equal(error.kind, kind, error.message);
    if (code) assert.equal(error.code, code, error.message);
    return true;
  };
}

test("createSr writes metadata on the medium and statSr reports it", async (t) => {
  const dir = path.join(tempDir(t), "sr1");
  const uuid = randomUUID();
  const info = await createSr(dir, { uuid, name: "Local SR", description: "fast disks" });
  t.after(() => disconnectSr(dir));
  assert.equal(info.uuid, uuid);
  assert.equal(info.attached, false);
  assert.ok(fs.existsSync(path.join(dir, DB_FILE)));
  const stat = await statSr(dir);
  assert.equal(stat.name, "Local SR");
  assert.equal(stat.description, "fast disks");
  assert.deepEqual(stat.health, ["Healthy", ""]);
  assert.ok(stat.total_space > 0 && stat.free_space > 0 && stat.free_space <= stat.total_space);
  assert.deepEqual(stat.datasources, [`xeno+shm:///hangar-sr-${uuid}`]);
  const reopened = await openSr(dir);
  assert.equal(reopened.uuid, uuid);
});

test("createSr refuses an existing SR, foreign files and bad uuids", async (t) => {
  const root = tempDir(t);
  const dir = path.join(root, "sr");
  await createSr(dir, { uuid: randomUUID(), name: "a", description: "" });
  t.after(() => disconnectSr(dir));
  await assert.rejects(createSr(dir, { uuid: randomUUID(), name: "b", description: "" }), rejectsWith("Invalid", "sr_exists"));
  const foreign = path.join(root, "foreign");
  fs.mkdirSync(foreign);
  fs.writeFileSync(path.join(foreign, "precious.txt"), "keep me");
  await assert.rejects(createSr(foreign, { uuid: randomUUID(), name: "c", description: "" }), rejectsWith("Invalid", "sr_path_not_empty"));
  assert.equal(fs.readFileSync(path.join(foreign, "precious.txt"), "utf8"), "keep me");
  await assert.rejects(createSr(path.join(root, "x"), { uuid: "not-a-uuid", name: "c", description: "" }), rejectsWith("Invalid", "bad_sr_options"));
  // A freshly made filesystem's lost+found does not count as foreign.
  const mount = path.join(root, "mount");
  fs.mkdirSync(path.join(mount, "lost+found"), { recursive: true });
  await createSr(mount, { uuid: randomUUID(), name: "d", description: "" });
  t.after(() => disconnectSr(mount));
});

test("openSr distinguishes a missing directory, missing metadata and corrupt metadata", async (t) => {
  const root = tempDir(t);
  await assert.rejects(openSr(path.join(root, "nope")), rejectsWith("SR_does_not_exist", "sr_directory_missing"));
  fs.mkdirSync(path.join(root, "empty"));
  await assert.rejects(openSr(path.join(root, "empty")), rejectsWith("SR_does_not_exist", "sr_metadata_missing"));
  assert.ok(!fs.existsSync(path.join(root, "empty", DB_FILE)), "looking must not create a database");
  fs.mkdirSync(path.join(root, "junk"));
  fs.writeFileSync(path.join(root, "junk", DB_FILE), Buffer.alloc(8192, 0x41));
  await assert.rejects(openSr(path.join(root, "junk")), rejectsWith("Invalid", "sr_metadata_corrupt"));
});

test("probeSrs finds SRs at and directly under a path", async (t) => {
  const root = tempDir(t);
  const a = path.join(root, "a");
  const b = path.join(root, "b");
  await createSr(a, { uuid: randomUUID(), name: "A", description: "" });
  await createSr(b, { uuid: randomUUID(), name: "B", description: "" });
  fs.mkdirSync(path.join(root, "plain"));
  t.after(() => {
    disconnectSr(a);
    disconnectSr(b);
  });
  const found = await probeSrs(root);
  assert.deepEqual(found.srs.map((sr) => sr.name).sort(), ["A", "B"]);
  assert.equal(found.creatable, false);
  const atSr = await probeSrs(a);
  assert.deepEqual(atSr.srs.map((sr) => sr.name), ["A"]);
  const empty = await probeSrs(path.join(root, "plain"));
  assert.deepEqual(empty, { srs: [], creatable: true });
});

test("attach and detach are idempotent; volume calls need an attached SR", async (t) => {
  const sr = await makeSr(t);
  await attachSr(sr);
  assert.equal((await statSr(sr)).attached, true);
  await detachSr(sr);
  await detachSr(sr);
  assert.equal((await statSr(sr)).attached, false);
  await assert.rejects(listVolumes(sr), rejectsWith("Sr_not_attached"));
  await assert.rejects(createVolume(sr, { name: "v", description: "", size: 1 }), rejectsWith("Sr_not_attached"));
  await attachSr(sr);
  assert.deepEqual(await listVolumes(sr), []);
});

test("setSrName and setSrDescription persist any UTF-8", async (t) => {
  const sr = await makeSr(t);
  await setSrName(sr, "Ünïcødé 💾");
  await setSrDescription(sr, "line 1\nline \"2\"");
  disconnectSr(sr);
  const stat = await statSr(sr);
  assert.equal(stat.name, "Ünïcødé 💾");
  assert.equal(stat.description, "line 1\nline \"2\"");
  await assert.rejects(setSrName(sr, "\ud800"), rejectsWith("Invalid", "bad_text"));
});

test("destroySr needs an attached SR and removes every volume and the metadata", async (t) => {
  const sr = await makeSr(t);
  await createVolume(sr, { name: "v1", description: "", size: 1 << 20 });
  await createVolume(sr, { name: "v2", description: "", size: 1 << 20 });
  await detachSr(sr);
  await assert.rejects(destroySr(sr), rejectsWith("Sr_not_attached"));
  await attachSr(sr);
  await destroySr(sr);
  assert.deepEqual(fs.readdirSync(sr), []);
  await assert.rejects(statSr(sr), rejectsWith("SR_does_not_exist", "sr_metadata_missing"));
  await assert.rejects(listVolumes(sr), rejectsWith("SR_does_not_exist"));
  // The directory can take a new SR.
  await createSr(sr, { uuid: randomUUID(), name: "again", description: "" });
});

test("an interrupted destroy reports Unavailable and is finished by destroying again", async (t) => {
  const sr = await makeSr(t);
  await createVolume(sr, { name: "v1", description: "", size: 1 << 20 });
  const { DatabaseSync } = await import("node:sqlite");
  const db = new DatabaseSync(srFiles(sr).db);
  db.exec("UPDATE sr SET destroying = 1");
  db.close();
  const stat = await statSr(sr);
  assert.equal(stat.health[0], "Unavailable");
  await assert.rejects(listVolumes(sr), rejectsWith("SR_does_not_exist", "sr_destroying"));
  await destroySr(sr);
  assert.deepEqual(fs.readdirSync(sr), []);
});

test("statSr reports Recovering while a merge is recorded and Unreachable when the layers folder is gone", async (t) => {
  const sr = await makeSr(t);
  const { DatabaseSync } = await import("node:sqlite");
  const db = new DatabaseSync(srFiles(sr).db);
  const v = await createVolume(sr, { name: "v", description: "", size: 1 << 20 });
  const layer = (db.prepare("SELECT top_layer FROM volumes WHERE key = ?").get(v.key) as { top_layer: number }).top_layer;
  db.prepare("INSERT INTO merges (parent, child, owner, started_at) VALUES (?, ?, 0, '')").run(layer, layer);
  assert.equal((await statSr(sr)).health[0], "Recovering");
  db.exec("DELETE FROM merges");
  db.close();
  fs.renameSync(srFiles(sr).layers, `${srFiles(sr).layers}.away`);
  const stat = await statSr(sr);
  assert.equal(stat.health[0], "Unreachable");
  assert.match(stat.health[1], /layers/);
  fs.renameSync(`${srFiles(sr).layers}.away`, srFiles(sr).layers);
  assert.deepEqual((await statSr(sr)).health, ["Healthy", ""]);
});
