import assert from "node:assert/strict";
import { test } from "node:test";
import { decodeRrdd, encodeRrdd, RrddFormatError, type RrddDatasource } from "./rrdd.ts";

const sources: RrddDatasource[] = [
  { name: "free_space", value: 2 ** 40 + 3, valueType: "int64", type: "gauge", units: "B", description: "Free" },
  { name: "io_read_bytes", value: 12345, valueType: "int64", type: "derive", units: "B/s", description: "Read" },
  { name: "read_latency", value: 0.375, valueType: "float", type: "gauge", units: "ms", description: "Latency" },
];

test("encodeRrdd → decodeRrdd: values (int64 and float), metadata and the data CRC", () => {
  const decoded = decodeRrdd(encodeRrdd(1_700_000_000.5, "sr x", sources));
  assert.equal(decoded.timestamp, 1_700_000_000.5);
  assert.deepEqual(decoded.values, { free_space: 2 ** 40 + 3, io_read_bytes: 12345, read_latency: 0.375 });
  assert.deepEqual(decoded.metadata.io_read_bytes, { description: "Read", owner: "sr x", value_type: "int64", type: "derive", units: "B/s", min: "0", max: "inf", default: "true" });
  const again = decodeRrdd(encodeRrdd(1_700_000_005.5, "sr x", sources));
  assert.notEqual(again.dataCrc, decoded.dataCrc, "a new timestamp is new data");
});

test("a torn, short or foreign file is an RrddFormatError, never a RangeError", () => {
  const whole = encodeRrdd(1, "sr x", sources);
  const cases: Array<[string, Buffer]> = [
    ["empty", Buffer.alloc(0)],
    ["header only", whole.subarray(0, 11)],
    ["cut in the values", whole.subarray(0, 40)],
    ["cut before the metadata length", whole.subarray(0, 23 + 8 + 8 * sources.length + 2)],
    ["cut in the metadata", whole.subarray(0, whole.length - 5)],
    ["foreign", Buffer.from("NOTDATASOURCES and more bytes than the header")],
  ];
  const flipped = Buffer.from(whole);
  flipped[30] = flipped[30]! ^ 0xff;
  cases.push(["a value rewritten under the reader", flipped]);
  const metadataFlipped = Buffer.from(whole);
  metadataFlipped[whole.length - 3] = metadataFlipped[whole.length - 3]! ^ 0x01;
  cases.push(["metadata rewritten under the reader", metadataFlipped]);
  for (const [what, bytes] of cases) assert.throws(() => decodeRrdd(bytes, "f"), RrddFormatError, what);
});

test("a count that disagrees with the metadata is refused", () => {
  const whole = encodeRrdd(1, "sr x", sources);
  const other = encodeRrdd(1, "sr x", sources.slice(0, 2));
  // The two-datasource file's header and values with the three-datasource metadata: CRCs each fine, count wrong.
  const valuesEnd = 23 + 8 + 8 * 2;
  const metadata = whole.subarray(23 + 8 + 8 * 3);
  const mixed = Buffer.concat([other.subarray(0, 15), whole.subarray(15, 19), other.subarray(19, valuesEnd), metadata]);
  assert.throws(() => decodeRrdd(mixed, "f"), /2 values but 3 datasources/);
});
