// rrdd plugin protocol v2: the datasource files that `xeno+shm:///<uid>` URIs in SR.stat point to. Shared
// by the plugins that write them (server/plugins/filesr/datasources.ts) and the console's sampler that reads
// them (server/datasources/sampler.ts). Layout, all big-endian:
//   "DATASOURCES" | u32 data CRC32 (timestamp + values) | u32 metadata CRC32 | u32 count |
//   f64 timestamp | count × 8-byte values (int64 or double) | u32 metadata length | metadata JSON
// Writers rewrite the file in place; a reader that meets a CRC mismatch caught the file mid-rewrite and
// tries again, and one that sees the data CRC unchanged has no new sample.
import fs from "node:fs";
import * as z from "zod/mini";

/** node:zlib (and the stream modules it pulls in) loaded on use: most plugin calls write no datasource. */
const crc32 = (data: Buffer): number => process.getBuiltinModule("node:zlib").crc32(data);

const HEADER = "DATASOURCES";
const FIXED = HEADER.length + 12;

const DatasourceMetaSchema = z.object({
  description: z.string(),
  owner: z.string(),
  value_type: z.enum(["int64", "float"]),
  type: z.enum(["absolute", "gauge", "derive"]),
  units: z.string(),
  min: z.string(),
  max: z.string(),
  default: z.string(),
});
const MetadataSchema = z.object({ datasources: z.record(z.string(), DatasourceMetaSchema) });

export type DatasourceMeta = z.infer<typeof DatasourceMetaSchema>;

export interface RrddFile {
  timestamp: number;
  values: Record<string, number>;
  metadata: Record<string, DatasourceMeta>;
  dataCrc: number;
}

/** One datasource as a writer gives it. */
export interface RrddDatasource {
  name: string;
  value: number;
  valueType: "int64" | "float";
  type: "gauge" | "derive" | "absolute";
  units: string;
  description: string;
}

/** A file that is not (or not yet, or no longer wholly) an rrdd v2 file: torn by a rewrite, or foreign. */
/** A datasource uid (`xeno+shm:///<uid>`) that names a file in a metrics dir and can never leave it. */
export function isDatasourceUid(uid: string): boolean {
  return /^[A-Za-z0-9_][A-Za-z0-9._-]*$/.test(uid);
}

export class RrddFormatError extends Error {
  override name = "RrddFormatError";
}

export function encodeRrdd(timestamp: number, owner: string, datasources: RrddDatasource[]): Buffer {
  const values = Buffer.alloc(8 + 8 * datasources.length);
  values.writeDoubleBE(timestamp, 0);
  datasources.forEach((source, i) => {
    if (source.valueType === "int64") values.writeBigInt64BE(BigInt(Math.round(source.value)), 8 + 8 * i);
    else values.writeDoubleBE(source.value, 8 + 8 * i);
  });
  const metadata = Buffer.from(
    JSON.stringify({
      datasources: Object.fromEntries(
        datasources.map((source) => [
          source.name,
          {
            description: source.description,
            owner,
            value_type: source.valueType,
            type: source.type,
            units: source.units,
            min: "0",
            max: "inf",
            default: "true",
          },
        ]),
      ),
    }),
  );
  const head = Buffer.alloc(FIXED);
  head.write(HEADER, 0, "latin1");
  head.writeUInt32BE(crc32(values), HEADER.length);
  head.writeUInt32BE(crc32(metadata), HEADER.length + 4);
  head.writeUInt32BE(datasources.length, HEADER.length + 8);
  const length = Buffer.alloc(4);
  length.writeUInt32BE(metadata.length);
  return Buffer.concat([head, values, length, metadata]);
}

/** Decodes a whole file's bytes; RrddFormatError when they are torn or not rrdd v2 (`file` names it in messages). */
export function decodeRrdd(buffer: Buffer, file = "datasource file"): RrddFile {
  if (buffer.length < FIXED || buffer.toString("latin1", 0, HEADER.length) !== HEADER) throw new RrddFormatError(`${file}: not an rrdd v2 file`);
  const dataCrc = buffer.readUInt32BE(HEADER.length);
  const metadataCrc = buffer.readUInt32BE(HEADER.length + 4);
  const count = buffer.readUInt32BE(HEADER.length + 8);
  const values = buffer.subarray(FIXED, FIXED + 8 + 8 * count);
  if (values.length !== 8 + 8 * count || crc32(values) !== dataCrc) throw new RrddFormatError(`${file}: data checksum mismatch`);
  if (buffer.length < FIXED + values.length + 4) throw new RrddFormatError(`${file}: metadata checksum mismatch (file cut short)`);
  const metadataLength = buffer.readUInt32BE(FIXED + values.length);
  const metadata = buffer.subarray(FIXED + values.length + 4, FIXED + values.length + 4 + metadataLength);
  if (metadata.length !== metadataLength || crc32(metadata) !== metadataCrc) throw new RrddFormatError(`${file}: metadata checksum mismatch`);
  let sources: Record<string, DatasourceMeta>;
  try {
    sources = MetadataSchema.parse(JSON.parse(metadata.toString("utf8"))).datasources;
  } catch (error) {
    throw new RrddFormatError(`${file}: metadata is not rrdd v2 JSON: ${(error as Error).message}`);
  }
  const names = Object.keys(sources);
  if (names.length !== count) throw new RrddFormatError(`${file}: ${count} values but ${names.length} datasources`);
  return {
    timestamp: values.readDoubleBE(0),
    values: Object.fromEntries(
      names.map((name, i) => [
        name,
        sources[name]!.value_type === "int64" ? Number(values.readBigInt64BE(8 + 8 * i)) : values.readDoubleBE(8 + 8 * i),
      ]),
    ),
    metadata: sources,
    dataCrc,
  };
}

/** Reads and decodes one file (fs errors such as ENOENT pass through as they are). */
export function readRrddFile(file: string): RrddFile {
  return decodeRrdd(fs.readFileSync(file), file);
}
