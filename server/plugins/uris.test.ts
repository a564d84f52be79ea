import assert from "node:assert/strict";
import { test } from "node:test";
import { parseVolumeUri, volumeUri } from "./uris.ts";

test("volumeUri is what URL and URLSearchParams make, for plain and odd keys and SR paths", () => {
  for (const srPath of ["/srv/sr1", "/srv/with space/ü"]) {
    for (const key of ["0b9c6a1e-7d3f-4c8e-9a51-2f6d8e4b7c10", "v1", "a b+c&d=é/?", "*._-"]) {
      for (const scheme of ["nbd", "file"] as const) {
        const expected = new URL(`${scheme}://${srPath}`);
        expected.searchParams.set("volume", key);
        assert.equal(volumeUri(scheme, srPath, key), expected.href);
        assert.deepEqual(parseVolumeUri(volumeUri(scheme, srPath, key), scheme), { srPath, key });
      }
    }
  }
});
