// The ocaml-rpc JSON encoding of compat-notes §1, in both directions: what plugins emit (decode) and what we
// send (encode), through the real schemas, the method table and the codec.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type * as z from "zod/mini";
import { decodeParams, decodeResult, describeIssues, encodeParams, encodeResult } from "./codec.ts";
import { CALLER_CODES, StorageError, parseWireError, storageErrors } from "./errors.ts";
import { METHODS, METHOD_NAMES, type MethodName, interfaceOf, lookupMethod, paramsSchema, resultSchema } from "./interface.ts";
import { InexactInteger, IntegralFloat, parseWireJson, stringifyWireJson } from "./json.ts";
import {
  ZBackend,
  ZBlockDevice,
  ZBlocklist,
  ZChangedBlocks,
  ZConfiguration,
  ZFile,
  ZHealth,
  ZHvdisk,
  ZImplementation,
  ZKey,
  ZKeyList,
  ZNbd,
  ZOperation,
  ZOperations,
  ZProbeResult,
  ZProbeResults,
  ZQueryResult,
  ZSrStat,
  ZSrs,
  ZStatus,
  ZUnit,
  ZVolume,
  ZVolumeType,
  ZVolumes,
} from "./types.ts";
import { float, int, int64, wireTypeName } from "./wire.ts";

/** Decodes JSON text the way the transports do: parseWireJson, then the schema. */
function decode(schema: z.ZodMiniType, text: string): unknown {
  const parsed = schema.safeParse(parseWireJson(text));
  if (!parsed.success) throw new Error(describeIssues(parsed.error));
  return parsed.data;
}

/** Encodes a value the way the codec does: validate by the schema, then compact JSON. */
function encode(schema: z.ZodMiniType, value: unknown): string {
  return stringifyWireJson(schema.parse(value));
}

function assertRejects(schema: z.ZodMiniType, text: string, message: RegExp) {
  const parsed = schema.safeParse(parseWireJson(text));
  assert.equal(parsed.success, false, `${text} should be rejected`);
  if (!parsed.success) assert.match(describeIssues(parsed.error), message);
}

function storageError(fn: () => unknown): StorageError {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof StorageError, `expected a StorageError, got ${String(error)}`);
    return error;
  }
  assert.fail("expected a StorageError, nothing was thrown");
}

const VOLUME = {
  key: "v1",
  uuid: "8f2c1e2a-0000-4000-8000-000000000001",
  name: "disk",
  description: "root disk",
  read_write: true,
  sharable: false,
  virtual_size: 10737418240,
  physical_utilisation: 4096,
  uri: ["loop:///srv/sr1/v1.raw", "nbd+unix:///v1?socket=/run/x.sock"],
  keys: { "vdi-type": "user" },
  volume_type: "Data" as const,
  cbt_enabled: true,
};
const VOLUME_JSON = JSON.stringify(VOLUME);

describe("json: numbers keep their source", () => {
  test("integers stay numbers; fractions and exponents of integral value are marked", () => {
    const [one, oneDotZero, thousand, half, huge, negative] = parseWireJson("[1, 1.0, 1e3, 0.5, 9007199254740993, -42]") as unknown[];
    assert.equal(one, 1);
    assert.ok(oneDotZero instanceof IntegralFloat);
    assert.equal(oneDotZero.source, "1.0");
    assert.ok(thousand instanceof IntegralFloat);
    assert.equal(thousand.value, 1000);
    assert.equal(half, 0.5);
    assert.ok(huge instanceof InexactInteger);
    assert.equal(huge.source, "9007199254740993");
    assert.equal(negative, -42);
  });

  test("numbers after whitespace, in objects and at the top level are caught as exactly; plain ones stay plain", () => {
    const parsed = parseWireJson('{"a": 1.0, "b":[2,\n 3e0], "c": {"d": 12345678901234567}, "e": "x:1.5", "f": 7}') as Record<string, unknown>;
    assert.ok(parsed.a instanceof IntegralFloat);
    assert.ok((parsed.b as unknown[])[1] instanceof IntegralFloat);
    assert.ok((parsed.c as Record<string, unknown>).d instanceof InexactInteger);
    assert.equal(parsed.e, "x:1.5");
    assert.equal(parsed.f, 7);
    assert.ok(parseWireJson(" 2.0") instanceof IntegralFloat);
    // No number that could come back inexact: plain JSON.parse, same values.
    assert.deepEqual(parseWireJson(VOLUME_JSON), JSON.parse(VOLUME_JSON));
    assert.deepEqual(parseWireJson('{"uuid":"6e7d-1e5","n":[1,22,333]}'), { uuid: "6e7d-1e5", n: [1, 22, 333] });
  });

  test("the largest safe integer is still a plain number", () => {
    assert.equal(parseWireJson("9007199254740991"), Number.MAX_SAFE_INTEGER);
    assert.ok(parseWireJson("9007199254740992") instanceof InexactInteger);
    assert.ok(parseWireJson("-9007199254740993") instanceof InexactInteger);
  });

  test("stringify is compact, drops undefined members and turns undefined into null", () => {
    assert.equal(stringifyWireJson({ a: 1, b: undefined, c: [1, "x"], d: { e: true } }), '{"a":1,"c":[1,"x"],"d":{"e":true}}');
    assert.equal(stringifyWireJson(undefined), "null");
    assert.equal(stringifyWireJson(null), "null");
  });

  test("a parsed value is written back with its numbers exactly as received", () => {
    const text = '{"a":1.0,"b":[12345678901234567890,1e3,-0.5],"c":{"d":9007199254740993}}';
    assert.equal(stringifyWireJson(parseWireJson(text)), text);
  });

  test("bad JSON throws", () => {
    assert.throws(() => parseWireJson("{"), SyntaxError);
    assert.throws(() => parseWireJson(""), SyntaxError);
  });
});

describe("structs", () => {
  test("keys match case-insensitively and unknown keys are ignored", () => {
    const decoded = decode(ZFile, '{"PATH":"/srv/a.raw","colour":"blue"}');
    assert.deepEqual(decoded, { path: "/srv/a.raw" });
    assert.equal(encode(ZHvdisk, decode(ZHvdisk, '{"Params":"p","EXTRA":{"k":"v"},"Backend_Type":"vbd3","x":{}}')), '{"params":"p","extra":{"k":"v"},"backend_type":"vbd3"}');
  });

  test("an exactly cased key wins over a differently cased duplicate, in either order", () => {
    assert.deepEqual(decode(ZFile, '{"Path":"/wrong","path":"/right"}'), { path: "/right" });
    assert.deepEqual(decode(ZFile, '{"path":"/right","PATH":"/wrong"}'), { path: "/right" });
  });

  test("a missing required member, or something other than an object, is rejected", () => {
    assertRejects(ZFile, "{}", /^path: /);
    assertRejects(ZFile, '["/srv/a.raw"]', /expected object/);
    assertRejects(ZFile, '"/srv/a.raw"', /expected object/);
    assertRejects(ZFile, "null", /expected object/);
    assertRejects(ZFile, '{"path":5}', /^path: .*expected string/);
  });

  test("the encoded members follow the interface's order, whatever order the plugin used", () => {
    assert.equal(encode(ZStatus, decode(ZStatus, '{"progress":0.25,"complete":false,"failed":false}')), '{"failed":false,"complete":false,"progress":0.25}');
  });
});

describe("options", () => {
  test("absent and null decode to undefined", () => {
    const absent = decode(ZStatus, '{"failed":false,"complete":true}') as { progress?: number };
    const nulled = decode(ZStatus, '{"failed":false,"complete":true,"progress":null}') as { progress?: number };
    assert.equal(absent.progress, undefined);
    assert.equal(nulled.progress, undefined);
    const volume = decode(ZVolume, JSON.stringify({ ...VOLUME, uuid: null, volume_type: null, cbt_enabled: null })) as Record<string, unknown>;
    assert.equal(volume.uuid, undefined);
    assert.equal(volume.volume_type, undefined);
    assert.equal(volume.cbt_enabled, undefined);
  });

  test("Some x is the bare x", () => {
    const volume = decode(ZVolume, VOLUME_JSON) as typeof VOLUME;
    assert.equal(volume.uuid, VOLUME.uuid);
    assert.equal(volume.cbt_enabled, true);
    assert.equal(volume.volume_type, "Data");
  });

  test("None is omitted on encode, never null", () => {
    const { uuid: _uuid, volume_type: _type, cbt_enabled: _cbt, ...required } = VOLUME;
    const json = encodeResult("Volume.stat", { ...required, uuid: undefined, volume_type: undefined, cbt_enabled: undefined });
    assert.equal(json, JSON.stringify(required));
    assert.ok(!json.includes("null"));
    assert.ok(!json.includes("uuid"));
    // A caller that slips a null in (JavaScript has two "nothing"s) still sends nothing.
    const fromNull = encodeResult("Volume.stat", { ...required, uuid: null, cbt_enabled: null } as never);
    assert.equal(fromNull, JSON.stringify(required));
    assert.equal(encodeResult("Data.stat", { failed: false, complete: true, progress: undefined }), '{"failed":false,"complete":true}');
  });

  test("an option still validates what it holds", () => {
    assertRejects(ZStatus, '{"failed":false,"complete":true,"progress":"soon"}', /^progress: expected float/);
    assertRejects(ZVolume, JSON.stringify({ ...VOLUME, cbt_enabled: "yes" }), /^cbt_enabled: /);
    assertRejects(ZVolume, JSON.stringify({ ...VOLUME, volume_type: "Floppy" }), /^volume_type: unknown volume_type constructor "Floppy"/);
  });
});

describe("variants", () => {
  test("a constructor with a payload is [Tag, payload]; tags match case-insensitively", () => {
    assert.deepEqual(decode(ZHealth, '["Healthy","ok"]'), ["Healthy", "ok"]);
    assert.deepEqual(decode(ZHealth, '["UNREACHABLE","no route"]'), ["Unreachable", "no route"]);
    assert.deepEqual(decode(ZImplementation, '["nbd",{"URI":"nbd:unix:/s:exportname=v"}]'), ["Nbd", { uri: "nbd:unix:/s:exportname=v" }]);
    assert.equal(encode(ZOperation, ["mirrorv1", "m-1"]), '["MirrorV1","m-1"]');
  });

  test("a bare string for a constructor with a payload is rejected", () => {
    assertRejects(ZHealth, '"Healthy"', /Healthy needs a payload/);
    assertRejects(ZOperation, '"CopyV1"', /CopyV1 needs a payload/);
    assertRejects(ZHealth, '["Healthy"]', /Healthy needs a payload/);
    assertRejects(ZHealth, '["Healthy","a","b"]', /Healthy needs a payload/);
  });

  test("an unknown tag, a non-string tag or a non-variant is rejected", () => {
    assertRejects(ZHealth, '["Sick","x"]', /unknown health constructor "Sick" \(expected Healthy \| Recovering \| Unreachable \| Unavailable\)/);
    assertRejects(ZHealth, '[1,"x"]', /expected health/);
    assertRejects(ZHealth, '{"Healthy":"x"}', /expected health/);
    assertRejects(ZHealth, "null", /expected health .*got null/);
    assertRejects(ZVolumeType, '"Bogus"', /unknown volume_type constructor "Bogus"/);
  });

  test("a payload is validated, and the error points into it", () => {
    assertRejects(ZHealth, '["Healthy",5]', /^\[1\]: .*expected string/);
    assertRejects(ZImplementation, '["File",{"uri":"x"}]', /^\[1\]\.path: /);
  });

  test("constant constructors (volume_type) are bare strings, on decode and on encode", () => {
    assert.equal(decode(ZVolumeType, '"Data"'), "Data");
    assert.equal(decode(ZVolumeType, '"cbt_metadata"'), "CBT_Metadata");
    assert.equal(decode(ZVolumeType, '["Data_and_CBT_Metadata"]'), "Data_and_CBT_Metadata");
    assert.equal(encode(ZVolumeType, "CBT_Metadata"), '"CBT_Metadata"');
    assert.equal(encode(ZVolumeType, "data"), '"Data"');
    assertRejects(ZVolumeType, '["Data","payload"]', /Data takes no payload/);
  });
});

describe("maps, pairs and unit", () => {
  test("(string * string) list is a JSON object", () => {
    assert.deepEqual(decode(ZConfiguration, '{"path":"/srv/sr1","Server":"nfs1"}'), { path: "/srv/sr1", Server: "nfs1" });
    assert.equal(encode(ZConfiguration, { b: "2", a: "1" }), '{"b":"2","a":"1"}');
    assertRejects(ZConfiguration, '{"size":1}', /^size: .*expected string/);
    assertRejects(ZConfiguration, '[["path","/srv/sr1"]]', /expected record/);
  });

  test("(int64 * int64) list is [[a,b],...]; a pair of any other arity is rejected", () => {
    assert.deepEqual(decode(ZBlocklist, '{"blocksize":512,"ranges":[[0,8],[100,"1"]]}'), { blocksize: 512, ranges: [[0, 8], [100, 1]] });
    assertRejects(ZBlocklist, '{"blocksize":512,"ranges":[[0]]}', /^ranges\[0\]: Too small/);
    assertRejects(ZBlocklist, '{"blocksize":512,"ranges":[[0,8,9]]}', /^ranges\[0\]: Too big/);
    assertRejects(ZBlocklist, '{"blocksize":512,"ranges":[0,8]}', /^ranges\[0\]: .*expected tuple/);
    assertRejects(ZBlocklist, '{"blocksize":512,"ranges":[{"start":0,"length":8}]}', /^ranges\[0\]: .*expected tuple/);
    assertRejects(ZBlocklist, '{"blocksize":512,"ranges":[[0,1.5]]}', /^ranges\[0\]\[1\]: expected int64, got 1\.5/);
  });

  test("unit is null and only null", () => {
    assert.equal(decode(ZUnit, "null"), null);
    assert.equal(encodeResult("SR.detach", null), "null");
    assertRejects(ZUnit, "{}", /expected null/);
    assertRejects(ZUnit, "[]", /expected null/);
    assertRejects(ZUnit, '""', /expected null/);
    assertRejects(ZUnit, "0", /expected null/);
    assert.equal(ZUnit.safeParse(undefined).success, false, "a missing result is not unit");
    assert.equal(storageError(() => decodeResult("SR.detach", {}, "p")).code, CALLER_CODES.invalidResult);
    assert.equal(storageError(() => decodeResult("SR.detach", undefined, "p")).code, CALLER_CODES.invalidResult);
  });
});

describe("integers", () => {
  const I64 = int64();
  test("JSON integers and numeric strings are accepted, negatives included", () => {
    assert.equal(decode(I64, "0"), 0);
    assert.equal(decode(I64, "-1"), -1);
    assert.equal(decode(I64, '"1024"'), 1024);
    assert.equal(decode(I64, '"-1"'), -1);
    assert.equal(decode(I64, "9007199254740991"), Number.MAX_SAFE_INTEGER);
    assert.equal(decode(I64, '"-9007199254740991"'), -Number.MAX_SAFE_INTEGER);
    assert.equal(encode(I64, "4096"), "4096", "a numeric string is sent as a JSON integer");
  });

  test("1.0 and 1e3 are not integers", () => {
    assertRejects(I64, "1.0", /expected int64, got 1\.0/);
    assertRejects(I64, "1e3", /expected int64, got 1e3/);
    assertRejects(int(), "2.0", /expected int, got 2\.0/);
    assertRejects(I64, "1.5", /expected int64, got 1\.5/);
    assertRejects(I64, '"1.5"', /expected int64, got "1\.5"/);
    assertRejects(I64, '"12abc"', /expected int64/);
    assertRejects(I64, '""', /expected int64/);
    assertRejects(I64, "true", /expected int64, got boolean/);
    assertRejects(I64, "null", /expected int64, got null/);
    assertRejects(I64, "[1]", /expected int64, got an array/);
  });

  test("2^53+1 is rejected as not exactly representable, never silently rounded", () => {
    assertRejects(I64, "9007199254740993", /9007199254740993 cannot be represented exactly/);
    assertRejects(I64, '"9007199254740993"', /9007199254740993 cannot be represented exactly/);
    assertRejects(I64, "-9007199254740993", /-9007199254740993 cannot be represented exactly/);
    // On the way out too: a JavaScript number past 2^53 may already be a rounded value.
    assert.throws(() => encode(I64, 2 ** 53 + 2), /cannot be represented exactly/);
    assert.throws(() => encode(I64, 1.5), /expected int64, got 1\.5/);
    assert.throws(() => encode(I64, Number.NaN), /expected int64/);
  });

  test("values outside int64 are rejected as out of range", () => {
    assertRejects(I64, "9223372036854775808", /9223372036854775808 is out of the int64 range/);
    assertRejects(I64, "-9223372036854775809", /is out of the int64 range/);
    assertRejects(I64, '"99999999999999999999999"', /is out of the int64 range/);
  });
});

describe("floats", () => {
  const F = float();
  test("1.0, 0.5, integers and numeric strings are floats", () => {
    assert.equal(decode(F, "1.0"), 1);
    assert.equal(decode(F, "0.5"), 0.5);
    assert.equal(decode(F, "0"), 0);
    assert.equal(decode(F, "1e-3"), 0.001);
    assert.equal(decode(F, "1e3"), 1000);
    assert.equal(decode(F, '"0.25"'), 0.25);
    assert.equal(decode(F, "9007199254740993"), 9007199254740992, "a float is approximate by nature");
    assert.equal(encode(F, 0.75), "0.75");
  });

  test("anything else is rejected", () => {
    assertRejects(F, "true", /expected float, got boolean/);
    assertRejects(F, '"half"', /expected float, got "half"/);
    assertRejects(F, '""', /expected float/);
    assertRejects(F, "[0.5]", /expected float, got an array/);
    assert.throws(() => encode(F, Number.POSITIVE_INFINITY), /expected float/);
  });
});

describe("round trips of every type: plugin JSON → decode → encode → decode", () => {
  // [type, schema, what a plugin might print, the exact JSON we print]
  const cases: Array<[string, z.ZodMiniType, string, string]> = [
    [
      "query_result",
      ZQueryResult,
      '{"Plugin":"gfs2","NAME":"GFS2","description":"Clustered","vendor":"V","copyright":"(C)","version":"1.0","required_api_version":"5.0","features":["SR_CREATE","VDI_CREATE/2"],"configuration":{"device":"block device"},"required_cluster_stack":["corosync"],"future":{"x":1}}',
      '{"plugin":"gfs2","name":"GFS2","description":"Clustered","vendor":"V","copyright":"(C)","version":"1.0","required_api_version":"5.0","features":["SR_CREATE","VDI_CREATE/2"],"configuration":{"device":"block device"},"required_cluster_stack":["corosync"]}',
    ],
    ["srs", ZSrs, '["file:///srv/sr1","file:///srv/sr2"]', '["file:///srv/sr1","file:///srv/sr2"]'],
    ["hvdisk", ZHvdisk, '{"params":"vhd:/dev/x","Extra":{"k":"v"},"backend_type":"vbd3"}', '{"params":"vhd:/dev/x","extra":{"k":"v"},"backend_type":"vbd3"}'],
    ["block_device", ZBlockDevice, '{"path":"/dev/sdb","major":8}', '{"path":"/dev/sdb"}'],
    ["file", ZFile, '{"PATH":"/srv/sr1/v1.raw"}', '{"path":"/srv/sr1/v1.raw"}'],
    ["nbd", ZNbd, '{"uri":"nbd:unix:/run/x.sock:exportname=v1"}', '{"uri":"nbd:unix:/run/x.sock:exportname=v1"}'],
    ["implementation", ZImplementation, '["blockdevice",{"path":"/dev/sdb"}]', '["BlockDevice",{"path":"/dev/sdb"}]'],
    [
      "implementation (HvDisk)",
      ZImplementation,
      '["HVDISK",{"params":"p","extra":{},"backend_type":"qdisk"}]',
      '["HvDisk",{"params":"p","extra":{},"backend_type":"qdisk"}]',
    ],
    [
      "backend",
      ZBackend,
      '{"Implementations":[["file",{"path":"/a"}],["Nbd",{"uri":"nbd:unix:/s:exportname=a"}]]}',
      '{"implementations":[["File",{"path":"/a"}],["Nbd",{"uri":"nbd:unix:/s:exportname=a"}]]}',
    ],
    ["blocklist", ZBlocklist, '{"blocksize":"65536","ranges":[[0,"16"],[4294967296,1]]}', '{"blocksize":65536,"ranges":[[0,16],[4294967296,1]]}'],
    ["blocklist (empty)", ZBlocklist, '{"blocksize":512,"ranges":[]}', '{"blocksize":512,"ranges":[]}'],
    ["operation", ZOperation, '["copyv1","op-1"]', '["CopyV1","op-1"]'],
    ["operations", ZOperations, '[["MirrorV1","m"],["COPYV1","c"]]', '[["MirrorV1","m"],["CopyV1","c"]]'],
    ["status", ZStatus, '{"failed":false,"complete":true,"progress":1.0}', '{"failed":false,"complete":true,"progress":1}'],
    ["status (no progress)", ZStatus, '{"failed":true,"complete":true,"progress":null}', '{"failed":true,"complete":true}'],
    ["configuration", ZConfiguration, '{"path":"/srv/sr1","uuid":"u-1"}', '{"path":"/srv/sr1","uuid":"u-1"}'],
    ["health", ZHealth, '["recovering","rebuilding mirror"]', '["Recovering","rebuilding mirror"]'],
    [
      "sr_stat",
      ZSrStat,
      '{"sr":"file:///srv/sr1","name":"SR 1","uuid":null,"description":"","free_space":"1000","total_space":4398046511104,"datasources":["xeno+shm:///sr-1"],"clustered":false,"health":["healthy",""]}',
      '{"sr":"file:///srv/sr1","name":"SR 1","description":"","free_space":1000,"total_space":4398046511104,"datasources":["xeno+shm:///sr-1"],"clustered":false,"health":["Healthy",""]}',
    ],
    [
      "probe_result (with an SR)",
      ZProbeResult,
      '{"configuration":{"path":"/srv"},"complete":true,"sr":{"sr":"file:///srv","name":"n","uuid":"u","description":"d","free_space":1,"total_space":2,"datasources":[],"clustered":true,"health":["Unavailable","reboot"]},"extra_info":{"lun":"0"}}',
      '{"configuration":{"path":"/srv"},"complete":true,"sr":{"sr":"file:///srv","name":"n","uuid":"u","description":"d","free_space":1,"total_space":2,"datasources":[],"clustered":true,"health":["Unavailable","reboot"]},"extra_info":{"lun":"0"}}',
    ],
    [
      "probe_results (no SR)",
      ZProbeResults,
      '[{"configuration":{},"complete":false,"extra_info":{}}]',
      '[{"configuration":{},"complete":false,"extra_info":{}}]',
    ],
    ["volume_type", ZVolumeType, '"data_and_cbt_metadata"', '"Data_and_CBT_Metadata"'],
    ["volume", ZVolume, VOLUME_JSON.replace('"key"', '"KEY"').replace('"Data"', '["data"]'), VOLUME_JSON],
    [
      "volumes (options absent)",
      ZVolumes,
      '[{"key":"k","name":"n","description":"","read_write":false,"sharable":true,"virtual_size":"-1","physical_utilisation":0,"uri":[],"keys":{},"uuid":null}]',
      '[{"key":"k","name":"n","description":"","read_write":false,"sharable":true,"virtual_size":-1,"physical_utilisation":0,"uri":[],"keys":{}}]',
    ],
    ["key", ZKey, '"v1"', '"v1"'],
    ["key_list", ZKeyList, '["a","b"]', '["a","b"]'],
    ["changed_blocks", ZChangedBlocks, '{"granularity":"65536","bitmap":"AAE="}', '{"granularity":65536,"bitmap":"AAE="}'],
    ["unit", ZUnit, "null", "null"],
  ];

  for (const [type, schema, pluginJson, wireJson] of cases) {
    test(type, () => {
      const decoded = decode(schema, pluginJson);
      const encoded = encode(schema, decoded);
      assert.equal(encoded, wireJson);
      const again = decode(schema, encoded);
      assert.equal(encode(schema, again), wireJson, "encoding is a fixed point");
      assert.deepEqual(JSON.parse(stringifyWireJson(again)), JSON.parse(stringifyWireJson(decoded)));
      if (type !== "unit") assert.ok(!encoded.includes("null"), "no null in what we send");
    });
  }

  test("every result type of the method table is covered above", () => {
    const covered = new Set(cases.map(([, schema]) => wireTypeName(schema)));
    for (const name of METHOD_NAMES) {
      const type = wireTypeName(METHODS[name].result);
      if (["string", "sr", "sock_path"].includes(type)) continue;
      assert.ok(covered.has(type), `${name} returns ${type}, which has no round trip`);
    }
  });
});

describe("the examples of compat-notes §1", () => {
  test("Datapath.attach result", () => {
    const wire = '{"implementations":[["File",{"path":"/srv/sr1/v1.raw"}],["Nbd",{"uri":"nbd:unix:/run/x.sock:exportname=v1"}]]}';
    const result = decodeResult("Datapath.attach", parseWireJson(wire), "p");
    assert.deepEqual(result, {
      implementations: [
        ["File", { path: "/srv/sr1/v1.raw" }],
        ["Nbd", { uri: "nbd:unix:/run/x.sock:exportname=v1" }],
      ],
    });
    assert.equal(encodeResult("Datapath.attach", result), wire);
  });

  test("Data.stat, with progress and with progress unknown", () => {
    const withProgress = decodeResult("Data.stat", parseWireJson('{"failed":false,"complete":false,"progress":0.5}'), "p");
    assert.deepEqual(withProgress, { failed: false, complete: false, progress: 0.5 });
    assert.equal(encodeResult("Data.stat", withProgress), '{"failed":false,"complete":false,"progress":0.5}');
    const unknown = decodeResult("Data.stat", parseWireJson('{"failed":false,"complete":false}'), "p");
    assert.equal(unknown.progress, undefined);
    assert.equal(encodeResult("Data.stat", unknown), '{"failed":false,"complete":false}');
  });

  test("Data.copy and Data.mirror return CopyV1 / MirrorV1 operations", () => {
    assert.deepEqual(decodeResult("Data.copy", parseWireJson('["CopyV1","op-7"]'), "p"), ["CopyV1", "op-7"]);
    assert.deepEqual(decodeResult("Data.mirror", parseWireJson('["MirrorV1","op-8"]'), "p"), ["MirrorV1", "op-8"]);
    assert.equal(encodeResult("Data.mirror", ["MirrorV1", "op-8"]), '["MirrorV1","op-8"]');
    assert.equal(encodeParams("Data.stat", { dbg: "d", operation: ["CopyV1", "op-7"] }), '{"dbg":"d","operation":["CopyV1","op-7"]}');
  });

  test("the params object on stdin", () => {
    assert.equal(encodeParams("Volume.stat", { dbg: "x", sr: "file:///srv/sr1", key: "v1" }), '{"dbg":"x","sr":"file:///srv/sr1","key":"v1"}');
  });

  test("blocklist ranges are [start, length] pairs", () => {
    const params = { dbg: "d", uri: "loop:///a", domain: "0", remote: "nbd://u:p@h/v", blocklist: { blocksize: 65536, ranges: [[0, 2], [10, 1]] as [number, number][] } };
    assert.equal(encodeParams("Data.copy", params), '{"dbg":"d","uri":"loop:///a","domain":"0","remote":"nbd://u:p@h/v","blocklist":{"blocksize":65536,"ranges":[[0,2],[10,1]]}}');
  });

  test("the error object", () => {
    const wire = '{"code":"SR_BACKEND_FAILURE","params":["Volume_does_not_exist","v1"],"backtrace":{"error":"...","files":[],"lines":[]}}';
    const error = parseWireError(parseWireJson(wire));
    assert.ok(error instanceof StorageError);
    assert.equal(error.code, "SR_BACKEND_FAILURE");
    assert.deepEqual(error.params, ["Volume_does_not_exist", "v1"]);
    assert.equal(error.errorConstructor, "Volume_does_not_exist");
    assert.deepEqual(error.detail, ["v1"]);
    assert.equal(error.message, "SR_BACKEND_FAILURE: Volume_does_not_exist, v1");
    assert.deepEqual(error.toWire(), { code: "SR_BACKEND_FAILURE", params: ["Volume_does_not_exist", "v1"], backtrace: { error: error.message, files: [], lines: [] } });
    assert.equal(
      stringifyWireJson(storageErrors.volumeDoesNotExist("v1").toWire()),
      '{"code":"SR_BACKEND_FAILURE","params":["Volume_does_not_exist","v1"],"backtrace":{"error":"SR_BACKEND_FAILURE: Volume_does_not_exist, v1","files":[],"lines":[]}}',
    );
  });
});

describe("errors", () => {
  test("each constructor travels as params[0], matched case-insensitively", () => {
    const cases: Array<[StorageError, string, string[]]> = [
      [storageErrors.unimplemented("SR.probe"), "Unimplemented", ["SR.probe"]],
      [storageErrors.srNotAttached("file:///a"), "Sr_not_attached", ["file:///a"]],
      [storageErrors.srDoesNotExist("file:///a"), "SR_does_not_exist", ["file:///a"]],
      [storageErrors.volumeDoesNotExist("v"), "Volume_does_not_exist", ["v"]],
      [storageErrors.activatedOnAnotherHost("host-uuid"), "Activated_on_another_host", ["host-uuid"]],
      [storageErrors.cancelled("op"), "Cancelled", ["op"]],
    ];
    for (const [error, constructor, detail] of cases) {
      assert.equal(error.code, "SR_BACKEND_FAILURE");
      assert.equal(error.errorConstructor, constructor);
      assert.deepEqual(error.detail, detail);
      const back = parseWireError(JSON.parse(JSON.stringify(error.toWire())));
      assert.equal(back?.errorConstructor, constructor);
      assert.deepEqual(back?.params, error.params);
    }
    assert.equal(new StorageError("SR_BACKEND_FAILURE", ["sr_NOT_attached", "x"]).errorConstructor, "Sr_not_attached");
  });

  test("free-form codes and params have no constructor; the detail is every param", () => {
    const error = parseWireError({ code: "SR_BACKEND_FAILURE_42", params: ["Cannot open /dev/sdz", "errno 2"] });
    assert.equal(error?.code, "SR_BACKEND_FAILURE_42");
    assert.equal(error?.errorConstructor, undefined);
    assert.deepEqual(error?.detail, ["Cannot open /dev/sdz", "errno 2"]);
    const failure = storageErrors.backendFailure("disk on fire", "sda");
    assert.deepEqual(failure.params, ["disk on fire", "sda"]);
    assert.equal(failure.errorConstructor, undefined);
  });

  test("missing params default to none; non-string params are kept as JSON text", () => {
    assert.deepEqual(parseWireError({ code: "X" })?.params, []);
    assert.deepEqual(parseWireError({ code: "X", params: [42, { a: 1 }, "s"] })?.params, ["42", '{"a":1}', "s"]);
    const printed = parseWireJson('{"code":"SR_BACKEND_FAILURE_5","params":[1.0,12345678901234567890,{"n":2.0}]}');
    assert.deepEqual(parseWireError(printed)?.params, ["1.0", "12345678901234567890", '{"n":2.0}']);
  });

  test("values that are not error objects are not errors", () => {
    for (const value of [null, "SR_BACKEND_FAILURE", [], { params: [] }, { code: 5 }, { code: "X", params: "p" }]) {
      assert.equal(parseWireError(value), undefined, JSON.stringify(value));
    }
  });
});

describe("decodeParams and encodeParams", () => {
  test("decodes from text or from a value; dbg is required; keys are case-insensitive", () => {
    const fromText = decodeParams("Volume.create", '{"DBG":"d","Sr":"file:///s","name":"n","description":"","size":"1048576","sharable":false,"unknown":1}');
    assert.deepEqual(fromText, { dbg: "d", sr: "file:///s", name: "n", description: "", size: 1048576, sharable: false });
    assert.deepEqual(decodeParams("Plugin.query", { dbg: "d" }), { dbg: "d" });
    const missing = storageError(() => decodeParams("Plugin.query", {}));
    assert.equal(missing.code, "INCORRECT_PARAMETERS");
    assert.equal(missing.params[0], "Plugin.query");
    assert.match(missing.params[1] ?? "", /^dbg: /);
  });

  test("INCORRECT_PARAMETERS names the method and each bad field", () => {
    const error = storageError(() =>
      decodeParams("Volume.create", '{"dbg":"d","sr":"s","name":"n","description":"","size":1.0,"sharable":"no"}'),
    );
    assert.equal(error.code, CALLER_CODES.incorrectParameters);
    assert.equal(error.params[0], "Volume.create");
    assert.match(error.params[1] ?? "", /size: expected int64, got 1\.0/);
    assert.match(error.params[1] ?? "", /sharable: .*expected boolean/);
    const nested = storageError(() =>
      decodeParams("Data.copy", { dbg: "d", uri: "u", domain: "0", remote: "r", blocklist: { blocksize: 512, ranges: [[1, 2], [3]] } }),
    );
    assert.match(nested.params[1] ?? "", /^blocklist\.ranges\[1\]: Too small/);
    const operation = storageError(() => decodeParams("Data.stat", { dbg: "d", operation: "CopyV1" }));
    assert.match(operation.params[1] ?? "", /^operation: CopyV1 needs a payload/);
  });

  test("text that is not JSON, or not an object, is INCORRECT_PARAMETERS", () => {
    const notJson = storageError(() => decodeParams("SR.ls", "{sr:"));
    assert.equal(notJson.code, "INCORRECT_PARAMETERS");
    assert.deepEqual(notJson.params.slice(0, 1), ["SR.ls"]);
    assert.match(notJson.params[1] ?? "", /not valid JSON/);
    assert.equal(storageError(() => decodeParams("SR.ls", "[]")).code, "INCORRECT_PARAMETERS");
    assert.equal(storageError(() => decodeParams("SR.ls", null)).code, "INCORRECT_PARAMETERS");
  });

  test("encodeParams validates before sending, and sends int64 as integers", () => {
    assert.equal(
      encodeParams("Volume.list_changed_blocks", { dbg: "d", sr: "s", key: "a", key2: "b", offset: 0, length: -1 }),
      '{"dbg":"d","sr":"s","key":"a","key2":"b","offset":0,"length":-1}',
    );
    assert.equal(storageError(() => encodeParams("Volume.resize", { dbg: "d", sr: "s", key: "k", new_size: 2 ** 53 + 2 })).code, "INCORRECT_PARAMETERS");
    assert.equal(
      encodeParams("SR.create", { dbg: "d", uuid: "u", configuration: { path: "/srv" }, name: "n", description: "" }),
      '{"dbg":"d","uuid":"u","configuration":{"path":"/srv"},"name":"n","description":""}',
    );
  });
});

describe("decodeResult and encodeResult", () => {
  test("PLUGIN_RESULT_INVALID names the plugin, the method and the field path", () => {
    const good = JSON.parse(VOLUME_JSON) as Record<string, unknown>;
    const error = storageError(() => decodeResult("SR.ls", [good, { ...good, virtual_size: 1.5 }], "org.example.x"));
    assert.equal(error.code, "PLUGIN_RESULT_INVALID");
    assert.deepEqual(error.params.slice(0, 2), ["org.example.x", "SR.ls"]);
    assert.equal(error.params[2], "volumes[1].virtual_size: expected int64, got 1.5");
    assert.match(error.message, /org\.example\.x.*SR\.ls.*volumes\[1\]\.virtual_size/);
  });

  test("the path goes through structs, lists and variant payloads", () => {
    const attach = storageError(() =>
      decodeResult("Datapath.attach", parseWireJson('{"implementations":[["File",{"path":"/a"}],["Nbd",{"uri":5}]]}'), "p"),
    );
    assert.match(attach.params[2] ?? "", /^backend\.implementations\[1\]\[1\]\.uri: /);
    const stat = storageError(() =>
      decodeResult("SR.stat", parseWireJson('{"sr":"s","name":"n","description":"","free_space":"x","total_space":1,"datasources":[],"clustered":false,"health":"Healthy"}'), "p"),
    );
    assert.match(stat.params[2] ?? "", /sr_stat\.free_space: expected int64, got "x"/);
    assert.match(stat.params[2] ?? "", /sr_stat\.health: Healthy needs a payload/);
  });

  test("encodeResult refuses a value of the wrong type", () => {
    assert.throws(() => encodeResult("SR.stat", { health: "Healthy" } as never), /SR\.stat produced an invalid result: sr_stat\./);
    assert.throws(() => encodeResult("Plugin.ls", "file:///a" as never), /Plugin\.ls produced an invalid result/);
  });
});

describe("the method table", () => {
  // Parameters (besides dbg) and result types, from storage-plugin-interface.md and compat-notes §1.
  const SPEC: Record<MethodName, [string[], string]> = {
    "Plugin.query": [[], "query_result"],
    "Plugin.ls": [[], "srs"],
    "Plugin.diagnostics": [[], "string"],
    "Datapath.open": [["uri", "persistent"], "unit"],
    "Datapath.attach": [["uri", "domain"], "backend"],
    "Datapath.activate": [["uri", "domain"], "unit"],
    "Datapath.activate_readonly": [["uri", "domain"], "unit"],
    "Datapath.import_activate": [["uri", "domain"], "sock_path"],
    "Datapath.deactivate": [["uri", "domain"], "unit"],
    "Datapath.detach": [["uri", "domain"], "unit"],
    "Datapath.close": [["uri"], "unit"],
    "Data.copy": [["uri", "domain", "remote", "blocklist"], "operation"],
    "Data.mirror": [["uri", "domain", "remote"], "operation"],
    "Data.stat": [["operation"], "status"],
    "Data.cancel": [["operation"], "unit"],
    "Data.destroy": [["operation"], "unit"],
    "Data.ls": [[], "operations"],
    "SR.probe": [["configuration"], "probe_results"],
    "SR.create": [["uuid", "configuration", "name", "description"], "configuration"],
    "SR.attach": [["configuration"], "sr"],
    "SR.detach": [["sr"], "unit"],
    "SR.destroy": [["sr"], "unit"],
    "SR.stat": [["sr"], "sr_stat"],
    "SR.set_name": [["sr", "new_name"], "unit"],
    "SR.set_description": [["sr", "new_description"], "unit"],
    "SR.ls": [["sr"], "volumes"],
    "Volume.create": [["sr", "name", "description", "size", "sharable"], "volume"],
    "Volume.snapshot": [["sr", "key"], "volume"],
    "Volume.clone": [["sr", "key"], "volume"],
    "Volume.copy": [["sr", "key", "dest_sr"], "volume"],
    "Volume.destroy": [["sr", "key"], "unit"],
    "Volume.revert": [["sr", "snapshot", "key"], "unit"],
    "Volume.set_name": [["sr", "key", "new_name"], "unit"],
    "Volume.set_description": [["sr", "key", "new_description"], "unit"],
    "Volume.set": [["sr", "key", "k", "v"], "unit"],
    "Volume.unset": [["sr", "key", "k"], "unit"],
    "Volume.resize": [["sr", "key", "new_size"], "unit"],
    "Volume.stat": [["sr", "key"], "volume"],
    "Volume.compare": [["sr", "key", "key2"], "blocklist"],
    "Volume.similar_content": [["sr", "key"], "key_list"],
    "Volume.enable_cbt": [["sr", "key"], "unit"],
    "Volume.disable_cbt": [["sr", "key"], "unit"],
    "Volume.data_destroy": [["sr", "key"], "unit"],
    "Volume.list_changed_blocks": [["sr", "key", "key2", "offset", "length"], "changed_blocks"],
    "Volume.compose": [["sr", "key", "key2"], "unit"],
  };

  test("holds exactly the methods of the interface", () => {
    assert.deepEqual([...METHOD_NAMES].sort(), Object.keys(SPEC).sort());
  });

  for (const name of METHOD_NAMES) {
    test(`${name} has params and result schemas of the interface's types`, () => {
      const [params, result] = SPEC[name];
      const spec = METHODS[name];
      assert.deepEqual(Object.keys(spec.params), params);
      for (const [param, schema] of Object.entries(spec.params as Record<string, z.ZodMiniType>)) {
        assert.notEqual(wireTypeName(schema), "unknown", `${name}.${param} has no wire type name`);
      }
      assert.equal(wireTypeName(spec.result), result);
      assert.ok(paramsSchema(name), `${name} has no params schema`);
      assert.ok(resultSchema(name), `${name} has no result schema`);
      assert.equal(paramsSchema(name).safeParse({}).success, false, "dbg at least is required");
      assert.ok(spec.doc.length > 0);
      assert.equal(interfaceOf(name), name.split(".")[0]);
    });
  }

  test("lookupMethod finds a method however it is cased", () => {
    assert.equal(lookupMethod("Plugin.Query"), "Plugin.query");
    assert.equal(lookupMethod("plugin.query"), "Plugin.query");
    assert.equal(lookupMethod("VOLUME.LIST_CHANGED_BLOCKS"), "Volume.list_changed_blocks");
    assert.equal(lookupMethod("sr.ls"), "SR.ls");
    assert.equal(lookupMethod("Plugin.nothing"), undefined);
    assert.equal(lookupMethod("Query"), undefined);
    assert.equal(lookupMethod(""), undefined);
  });

  test("feature-gated methods name real feature strings", () => {
    const features = new Set(["SR_CREATE", "SR_DELETE", "SR_ATTACH", "SR_DETACH", "SR_SCAN", "SR_PROBE", "VDI_CREATE", "VDI_DELETE",
      "VDI_SNAPSHOT", "VDI_CLONE", "VDI_COPY", "VDI_REVERT", "VDI_RESIZE", "VDI_CONFIG_CBT", "VDI_COMPOSE", "VDI_ACTIVATE_READONLY", "VDI_MIRROR_IN"]);
    for (const name of METHOD_NAMES) {
      const feature = (METHODS[name] as { feature?: string }).feature;
      if (feature !== undefined) assert.ok(features.has(feature), `${name}: ${feature}`);
    }
    assert.equal((METHODS["Volume.list_changed_blocks"] as { feature?: string }).feature, "VDI_CONFIG_CBT");
  });
});
