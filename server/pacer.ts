// Long loops of quick synchronous steps (node:sqlite answers without ever leaving the turn) would hold the
// event loop for their whole length: every other caller, task.cancel and SIGTERM included, would wait. A
// pacer gives the loop a turn whenever the current one has run for a slice.
import { setImmediate as nextTurn } from "node:timers/promises";

/** A turn's length before the loop gets a turn back: well under the ~50 ms any step may take. */
export const SLICE_MS = 10;

/** Answers a function to await between steps: it yields to the event loop once `sliceMs` has passed since the last yield. */
export function pacer(sliceMs = SLICE_MS): () => Promise<void> {
  let since = performance.now();
  return async () => {
    if (performance.now() - since < sliceMs) return;
    await nextTurn();
    since = performance.now();
  };
}
