import assert from "node:assert/strict";
import { test } from "node:test";
import {
  decodeInfoRequest,
  decodeMetaContextRequest,
  decodeRequestHeader,
  encodeInfoRequest,
  encodeMetaContextRequest,
  encodeRequestHeader,
  ERRNO,
  errnoName,
  errnoOf,
  NbdError,
  readU64,
  writeU64,
} from "./protocol.ts";

test("u64 helpers are exact up to 2^53", () => {
  const buffer = Buffer.alloc(8);
  for (const value of [0, 1, 2 ** 32 - 1, 2 ** 32, 2 ** 40 + 5, Number.MAX_SAFE_INTEGER]) {
    writeU64(buffer, value, 0);
    assert.equal(buffer.readBigUInt64BE(0), BigInt(value));
    assert.equal(readU64(buffer, 0), value);
  }
});

test("request headers round-trip; a bad magic is detected", () => {
  const request = { flags: 3, type: 7, handleHigh: 0xdeadbeef, handleLow: 42, offset: 2 ** 41 + 512, length: 65536 };
  const header = encodeRequestHeader(request);
  assert.equal(header.length, 28);
  assert.deepEqual(decodeRequestHeader(header), request);
  header.writeUInt8(header.readUInt8(0) ^ 1, 0);
  assert.equal(decodeRequestHeader(header), null);
});

test("info and meta-context option payloads round-trip and reject malformed data", () => {
  assert.deepEqual(decodeInfoRequest(encodeInfoRequest("vol-1", [1, 3])), { exportName: "vol-1", infos: [1, 3] });
  assert.equal(decodeInfoRequest(Buffer.concat([encodeInfoRequest("v", [1]), Buffer.from([0])])), null);
  assert.equal(decodeInfoRequest(Buffer.from([0, 0, 0, 9, 0, 0])), null);
  assert.deepEqual(decodeMetaContextRequest(encodeMetaContextRequest("é", ["base:allocation", "x-y:z"])), {
    exportName: "é",
    queries: ["base:allocation", "x-y:z"],
  });
  assert.deepEqual(decodeMetaContextRequest(encodeMetaContextRequest("", [])), { exportName: "", queries: [] });
  assert.equal(decodeMetaContextRequest(encodeMetaContextRequest("v", ["q"]).subarray(0, 12)), null);
});

test("errno names and backend error mapping", () => {
  assert.equal(errnoName(ERRNO.ENOSPC), "ENOSPC");
  assert.equal(errnoName(999), "E999");
  assert.equal(errnoOf(Object.assign(new Error("quota"), { code: "EDQUOT" })), ERRNO.ENOSPC);
  assert.equal(errnoOf(Object.assign(new Error("ro"), { code: "EROFS" })), ERRNO.EPERM);
  assert.equal(errnoOf(new NbdError("EINVAL", "bad")), ERRNO.EINVAL);
  assert.equal(errnoOf(new Error("anything else")), ERRNO.EIO);
});
