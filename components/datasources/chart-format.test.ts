import assert from "node:assert/strict";
import { test } from "node:test";
import { formatDatasourceValue } from "./chart-format.ts";

test("datasource values for people, by unit", () => {
  assert.equal(formatDatasourceValue(12.4 * 1024 ** 3, "B"), "12.4 GiB");
  assert.equal(formatDatasourceValue(85_200_000, "B/s"), "85.2 MB/s");
  assert.equal(formatDatasourceValue(0, "B/s"), "0 B/s");
  assert.equal(formatDatasourceValue(1234.4, "requests/s"), "1,234 IOPS");
  assert.equal(formatDatasourceValue(2.5, "requests/s"), "2.5 IOPS");
  assert.equal(formatDatasourceValue(0, "requests/s"), "0 IOPS");
  assert.equal(formatDatasourceValue(1.256, "ms"), "1.26 ms");
  assert.equal(formatDatasourceValue(12.25, "ms"), "12.3 ms");
  assert.equal(formatDatasourceValue(3, "widgets"), "3 widgets");
  assert.equal(formatDatasourceValue(null, "ms"), "—");
  assert.equal(formatDatasourceValue(Number.NaN, "B"), "—");
});
