import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFile, stat, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { openRawFileBackend } from "./raw-file-backend.ts";
import { makeTempDir } from "./testing.ts";

const MiB = 1024 * 1024;

test("raw file backend: positional I/O, zeroing, tail punching and shrinking files", async (t) => {
  const dir = await makeTempDir((fn) => t.after(fn));
  const path = join(dir, "v.raw");
  const content = randomBytes(4 * MiB);
  await writeFile(path, content);
  const backend = await openRawFileBackend(path, { readOnly: false });
  t.after(() => backend.close());
  assert.equal(backend.size, 4 * MiB);
  assert.deepEqual(await backend.blockStatus(100, 5000), [{ length: 5000, flags: 0 }]);

  const target = Buffer.alloc(3000);
  await backend.read(MiB + 1, target);
  assert.deepEqual(target, content.subarray(MiB + 1, MiB + 3001));
  await backend.write(10, Buffer.from("hello"), { fua: true });
  await backend.flush();
  assert.equal((await readFile(path)).toString("utf8", 10, 15), "hello");

  // Interior zeroing writes zeros whatever the hole preference.
  await backend.trim(MiB, 2 * MiB + 123);
  assert.deepEqual((await readFile(path)).subarray(MiB, 3 * MiB + 123), Buffer.alloc(2 * MiB + 123));
  // Zeroing that reaches the end may punch (the file gets sparser) unless asked to keep allocation.
  const allocated = (await stat(path)).blocks;
  await backend.writeZeroes(3 * MiB + 500, MiB - 500, { noHole: true });
  assert.equal((await stat(path)).blocks, allocated);
  await backend.writeZeroes(3 * MiB, MiB);
  assert.ok((await stat(path)).blocks < allocated);
  assert.equal((await stat(path)).size, 4 * MiB);
  assert.deepEqual((await readFile(path)).subarray(3 * MiB), Buffer.alloc(MiB));

  // A file truncated behind our back reads as zeros past its new end.
  await truncate(path, 2 * MiB);
  const tail = Buffer.alloc(MiB, 1);
  await backend.read(2 * MiB - 4096, tail);
  assert.deepEqual(tail.subarray(4096), Buffer.alloc(MiB - 4096));
});

test("raw file backend: read-only opening and non-regular files", async (t) => {
  const dir = await makeTempDir((fn) => t.after(fn));
  const path = join(dir, "ro.raw");
  await writeFile(path, Buffer.alloc(4096, 9));
  const backend = await openRawFileBackend(path, { readOnly: true });
  assert.equal(backend.readOnly, true);
  await assert.rejects(backend.write(0, Buffer.alloc(1)));
  await backend.close();
  await assert.rejects(openRawFileBackend(dir, { readOnly: true }), /not a regular file/);
});
