// How many volumes an attached SR holds, from its plugin (SR.ls): the SR record's VDIs are the toolstack's
// locators, which miss volumes no listing has seen yet. SR.ls of 10,000 volumes costs ~200 ms of a core, so a
// count is reused for COUNT_TTL_MS (lists refresh every 5 s) and a page waits at most COUNT_WAIT_MS for a new
// one before showing the record's count; the call goes on and the next refresh gets it. The plugin is the one
// of the host the SR is attached on.
import "server-only";

import { CONSOLE_DBG, type PluginPlace } from "../storage-access.ts";

const COUNT_TTL_MS = 15_000;
const COUNT_WAIT_MS = 1_000;

interface CountEntry {
  at: number;
  count: Promise<number>;
}

const counts = new Map<string, CountEntry>();

const countKey = (place: Pick<PluginPlace, "scope">, type: string, uri: string) => `${place.scope}\n${type}\n${uri}`;

/** A count just seen by a listing of the SR (SR.ls's length): the SR's header agrees with its table at once. */
export function rememberVolumeCount(place: Pick<PluginPlace, "scope">, type: string, uri: string, count: number): void {
  counts.set(countKey(place, type, uri), { at: Date.now(), count: Promise.resolve(count) });
}

function countOf(place: PluginPlace, type: string, uri: string): Promise<number> {
  const key = countKey(place, type, uri);
  const cached = counts.get(key);
  if (cached !== undefined && Date.now() - cached.at < COUNT_TTL_MS) return cached.count;
  const count = (async () => {
    const plugin = (await place.registry()).find(type, "volume");
    if (plugin === undefined) throw new Error(`no volume plugin for ${type}`);
    return (await plugin.client.call("SR.ls", { dbg: CONSOLE_DBG, sr: uri })).length;
  })();
  counts.set(key, { at: Date.now(), count });
  // A failed count is not kept: the next refresh asks again.
  count.catch(() => counts.delete(key));
  return count;
}

/** The volume count of an attached SR (type, SR URI), or `fallback` when the plugin fails or is slow. */
export async function volumeCount(place: PluginPlace, type: string, uri: string, fallback: number): Promise<number> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<number>((resolve) => {
    timer = setTimeout(() => resolve(fallback), COUNT_WAIT_MS);
  });
  try {
    return await Promise.race([countOf(place, type, uri).catch(() => fallback), late]);
  } finally {
    clearTimeout(timer);
  }
}

