// Fuzz target (issue 22): the XVA reader in-process on mutated real archives (archive-fuzz-testing.ts), read as
// /import reads them: decompressed if they are, ova.xml, then every disk's blocks. Each case ends in a whole
// read or a clean refusal: XvaReadError (XvaChecksumError included), OvaXmlError, or the compression layer's
// worded failure; never a TypeError, a RangeError or a hang. The blocks read stay inside their disk.
import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { before, test } from "node:test";
import fc from "fast-check";
import { fuzz, type FuzzBudget } from "../fuzz-testing.ts";
import { archiveMutation, hangarSeed, legacySeed, mutatedArchive, type SeedArchive, xenOrchestraSeed } from "./archive-fuzz-testing.ts";
import { decompressing } from "./compression.ts";
import { XVA_BLOCK_SIZE } from "./format.ts";
import { OvaXmlError } from "./ova-xml.ts";
import { openXva, XvaReadError } from "./reader.ts";

const BUDGET: FuzzBudget = { slice: 100, full: 20_000, fullSeconds: 40, caseMs: 10_000 };

/** compression.ts words its failures but gives them no class of their own. */
const COMPRESSION_FAILURE = /^(not a valid (gzip|zstd) stream: |the decompressed stream was closed before its end)/;

const clean = (error: unknown) => error instanceof XvaReadError || error instanceof OvaXmlError || (error instanceof Error && error.constructor === Error && COMPRESSION_FAILURE.test(error.message));

/** How the bytes arrive: the first ones (ova.xml, the first headers) in pieces of `head` bytes, the rest in pieces of `rest`. */
type Arrival = { head: number; rest: number };
const HEAD_BYTES = 32 * 1024;

function* pieces(bytes: Buffer, { head, rest }: Arrival): Generator<Buffer> {
  for (let at = 0; at < bytes.length; ) {
    const size = at < HEAD_BYTES ? head : rest;
    yield bytes.subarray(at, at + size);
    at += size;
  }
}

/** The archive read whole as the importer reads it (sizes: the VDIs' declared ones); every block checked against its disk. */
async function readAll(bytes: Buffer, arrival: Arrival, force: boolean): Promise<void> {
  const { stream } = await decompressing(Readable.from(pieces(bytes, arrival), { objectMode: false }));
  const archive = await openXva(stream, { force });
  try {
    const sizes = new Map<string, number>();
    for (const object of archive.metadata.objects) {
      const size = Number(object.snapshot.virtual_size);
      if (object.class === "VDI" && Number.isSafeInteger(size) && size >= 0) sizes.set(object.id, size);
    }
    for await (const disk of archive.disks(sizes)) {
      let end = 0;
      for await (const block of disk.blocks) {
        const where = `${disk.ref} block ${block.index}`;
        assert.ok(block.data.byteLength > 0 && block.data.byteLength <= XVA_BLOCK_SIZE, `${where}: ${block.data.byteLength} bytes`);
        assert.ok(block.offset >= end, `${where}: offset ${block.offset} before the previous block's end ${end}`);
        end = block.offset + block.data.byteLength;
        if (archive.kind === "xva") assert.ok(end <= sizes.get(disk.ref)!, `${where}: ends at ${end}, past the declared size ${sizes.get(disk.ref)}`);
      }
    }
  } finally {
    archive.close();
  }
}

let seeds: SeedArchive[];
before(async () => {
  seeds = [await hangarSeed("xxhash"), await hangarSeed("sha1"), await xenOrchestraSeed(), await legacySeed()];
});

test("XVA reader: mutated archives read whole or are refused cleanly, within the bound", async (t) => {
  const cases = fc.record({
    seed: fc.nat({ max: seeds.length - 1 }),
    mutation: archiveMutation,
    // Tiny pieces are where parsers' state machines break; kept to the head so that a case stays quick.
    arrival: fc.record({ head: fc.oneof(fc.constant(64 * 1024), fc.integer({ min: 1, max: 4096 })), rest: fc.constantFrom(4096, 64 * 1024, 4 * XVA_BLOCK_SIZE) }),
    force: fc.boolean(),
  });
  await fuzz(t, "xva reader", BUDGET, cases, async ({ seed, mutation, arrival, force }) => {
    const bytes = mutatedArchive(seeds[seed]!, mutation);
    try {
      await readAll(bytes, arrival, force);
    } catch (error) {
      if (!clean(error)) throw error;
    }
  });
});
